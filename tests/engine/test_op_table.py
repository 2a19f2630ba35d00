"""The op records kept as columns give the very `ops` frame the records as rows gave."""

from __future__ import annotations

import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulator.engine.records import OpRecord, OpTable
from simulator.metrics.frames import ops_frame

number = st.one_of(st.just(0), st.integers(0, 5), st.floats(0.0, 1e3))
row_strategy = st.builds(
    OpRecord,
    step=st.integers(0, 2),
    op_id=st.sampled_from(["fwd-0", "ar", "p2p-1"]),
    kind=st.sampled_from(["compute", "collective"]),
    tag=st.sampled_from(["fwd", "dp", ""]),
    rank=st.integers(0, 3),
    stream=st.sampled_from(["compute", "comm"]),
    ready_at_s=number,
    started_at_s=number,
    finished_at_s=number,
    size_bytes=number,
    flops=number,
    collective=st.sampled_from(["", "all_reduce"]),
    algorithm=st.sampled_from(["", "ring"]),
    protocol=st.sampled_from(["", "simple"]),
    n_ranks=st.integers(1, 8),
)


def _assert_same_records(table: OpTable, rows: list[OpRecord]) -> None:
    """The table gives the frame of the rows (values, dtypes, order) and the rows back."""
    assert len(table) == len(rows)
    gpus = ["g0", "g1", "g2", "g3"]
    pd.testing.assert_frame_equal(
        ops_frame(table, gpus, {1: "pp1"}), ops_frame(rows, gpus, {1: "pp1"}), check_exact=True
    )
    assert [tuple(r) for r in table] == [tuple(r) for r in rows]


@settings(max_examples=30, deadline=None)
@given(rows=st.lists(row_strategy, min_size=1, max_size=12))
def test_columns_give_the_frame_of_the_rows(rows):
    """Same values, dtypes (int64 where every value was an int) and order as the rows."""
    table = OpTable(chunk_rows=3)  # several chunks even for a few rows
    for r in rows:
        table.append(r)
    _assert_same_records(table, rows)


member_strategy = st.tuples(st.integers(0, 3), number)  # (rank, ready time)


_INT_ROW = OpRecord(0, "ar", "collective", "dp", 0, "comm", 0, 0, 2, 64, 0, "all_reduce", "ring", "simple", 2)


@settings(max_examples=30, deadline=None)
@example(groups=[(_INT_ROW, [(0, 0), (1, 1)], True), (_INT_ROW, [(2, 0)], False)])  # int columns stay int
@given(
    groups=st.lists(
        st.tuples(row_strategy, st.lists(member_strategy, min_size=1, max_size=5), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_members_added_as_columns_give_the_frame_of_their_rows(groups):
    """`add_members` between rows: the same frame, dtypes and order as one record per member."""
    table = OpTable(chunk_rows=4)
    rows: list[OpRecord] = []
    for first, members, as_columns in groups:
        mine = [first._replace(rank=rank, ready_at_s=ready) for rank, ready in members]
        rows.extend(mine)
        if as_columns:
            table.add_members(first, [m[0] for m in members], [m[1] for m in members])
        else:
            table.extend(mine)
    _assert_same_records(table, rows)
