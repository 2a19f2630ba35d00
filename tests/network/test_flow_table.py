"""The flow records kept as columns give the very frame the records as rows gave."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.metrics.frames import flows_frame
from simulator.network.flow_table import FlowRecord, FlowTable, flow_columns

time_strategy = st.one_of(st.just(0), st.integers(0, 3), st.floats(0.0, 10.0))
flow_strategy = st.tuples(
    st.sampled_from(["ar", "p2p-1", "ckpt"]),
    st.sampled_from(["ring", "", "tree-up"]),
    st.integers(0, 4),  # links
    st.sampled_from([None, 2.0, 3.5]),  # crossings given by the caller
    st.floats(0.0, 1e9),
    time_strategy,
    time_strategy,
)


def _flow(i, op_id, label, n, crossings, size, start, end):  # noqa: ANN001, ANN202
    links = np.arange(n)
    return SimpleNamespace(
        flow_id=i, op_id=op_id, label=label, links=links, mult=np.full(n, 1.5), size_bytes=size,
        started_at_s=start, finished_at_s=end, crossings=crossings,
    )  # fmt: skip


def _row(f) -> FlowRecord:  # noqa: ANN001 - the record the fabric made per flow before
    cross = f.crossings if f.crossings is not None else (float(f.mult.sum()) if len(f.mult) else 0.0)
    return FlowRecord(
        f.flow_id, f.op_id, f.label, len(f.links), cross, f.size_bytes, f.started_at_s, f.finished_at_s
    )


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(flow_strategy, min_size=1, max_size=6), max_size=5))
def test_columns_give_the_frame_of_the_rows(batches):
    """Same values, dtypes (int64 where every value was an int) and order as the rows."""
    table, rows, i = FlowTable(chunk_rows=4), [], 0  # several chunks even for a few rows
    for batch in batches:
        flows = []
        for spec in batch:
            flows.append(_flow(i, *spec))
            i += 1
        table.add(flows)
        rows.extend(_row(f) for f in flows)
    assert len(table) == len(rows)
    pd.testing.assert_frame_equal(flows_frame(table), flows_frame(rows), check_exact=True)
    assert [tuple(r) for r in table] == [tuple(r) for r in rows]


def test_a_converted_column_and_the_merged_chunks_keep_every_row():
    """`convert` replaces one column over all rows (the others untouched), and merging the
    chunks neither loses a row nor empties a mapping the caller handed over."""
    table = FlowTable(chunk_rows=4)
    table.add([_flow(i, f"op-{i % 3}", "ring", 2, None, 1.0, 0, 1.5) for i in range(6)])
    handed = {
        "flow_id": np.array([6, 7]), "op_id": np.array(["op-9", "op-9"], dtype=object),
        "label": np.array(["p2p", "p2p"], dtype=object), "n_links": np.array([1, 1]),
        "link_crossings": np.array([1.0, 1.0]), "size_bytes": np.array([2.0, 2.0]),
        "started_at_s": np.array([0.5, 0.5]), "finished_at_s": np.array([2.0, 2.0]),
    }  # fmt: skip
    table.add_columns(handed)
    table.add([_flow(8, "op-1", "ring", 1, None, 3.0, 1, 2.5)])
    before = {k: v.copy() for k, v in table.columns().items()}
    assert len(handed) == 8 and all(len(v) == 2 for v in handed.values())
    table.convert("op_id", lambda v: np.array([s.upper() for s in v], dtype=object))
    after = table.columns()
    assert after["op_id"].tolist() == [s.upper() for s in before["op_id"].tolist()]
    for k in before:
        if k != "op_id":
            np.testing.assert_array_equal(after[k], before[k])
    assert len(table) == 9


def test_columns_added_call_by_call_are_chunked_by_the_chunk_size():
    """Pieces added as columns gather until a chunk is full (not a chunk per call, which
    made merging a long run's 60,000 pieces cost seconds), rows keep their place among them."""
    table = FlowTable(chunk_rows=8)
    for i in range(10):
        ids = np.array([2 * i, 2 * i + 1])
        table.add_columns(
            flow_columns(
                ids,
                f"op-{i}",
                np.array(["p2p", "p2p"], dtype=object),
                np.ones(2, dtype=np.int64),
                np.ones(2),
                np.ones(2),
                0.5,
                1.0,
            )
        )
    assert len(table._chunks) == 2  # 16 rows of the 20 chunked, 4 still pieces
    table.add([_flow(20, "op-x", "ring", 1, None, 1.0, 0, 2.0)])
    table.add_columns(flow_columns(np.array([21]), "op-y", np.array(["p2p"], dtype=object),
                                   np.ones(1, dtype=np.int64), np.ones(1), np.ones(1), 0.5, 3.0))  # fmt: skip
    cols = table.columns()
    assert cols["flow_id"].tolist() == list(range(22))
    assert cols["op_id"].tolist()[-4:] == ["op-9", "op-9", "op-x", "op-y"]


def _piece(ids: list[int]) -> dict[str, np.ndarray]:
    n = len(ids)
    return flow_columns(
        np.array(ids, dtype=np.int64), np.array([f"op-{i % 3}" for i in ids], dtype=object),
        np.full(n, "p2p", dtype=object), np.ones(n, dtype=np.int64), np.ones(n), np.ones(n), 0.5, 1.0,
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.sampled_from(["rows", "columns", "merge"]), st.integers(0, 5)), max_size=25),
    chunk_rows=st.integers(1, 9),
)
def test_any_mix_of_rows_columns_and_merges_keeps_every_row_in_order(steps, chunk_rows):
    """Rows added one by one, rows added as columns and merges (`columns`) in any order and
    any chunk size: every row, in the order added; a mapping handed over is left whole."""
    table, next_id, handed = FlowTable(chunk_rows=chunk_rows), 0, []
    for what, n in steps:
        ids = list(range(next_id, next_id + n))
        if what == "rows":
            table.add([_flow(i, f"op-{i % 3}", "ring", 1, None, 1.0, 0, 2.0) for i in ids])
            next_id += n
        elif what == "columns" and n:
            piece = _piece(ids)
            handed.append((piece, {k: v.copy() for k, v in piece.items()}))
            table.add_columns(piece)
            next_id += n
        elif what == "merge":
            table.columns()
        assert len(table) == next_id
    cols = table.columns()
    assert cols["flow_id"].tolist() == list(range(next_id))
    assert cols["op_id"].tolist() == [f"op-{i % 3}" for i in range(next_id)]
    for piece, copy in handed:
        assert piece.keys() == copy.keys()
        for k in copy:
            np.testing.assert_array_equal(piece[k], copy[k])


def test_the_rows_of_one_call_share_its_op_id_object() -> None:
    """A call's op id is one string on every row (not a copy per row: a 530B step records
    3.7 M flows, and a copy each cost ~200 MB of peak memory)."""
    op = "pp.F0.v0@0>8"
    cols = flow_columns(np.arange(3), op, np.array(["p2p"] * 3, dtype=object), np.ones(3, dtype=np.int64),
                        np.ones(3), np.ones(3), 0.5, 1.0)  # fmt: skip
    assert all(x is op for x in cols["op_id"]) and cols["op_id"].dtype == object
