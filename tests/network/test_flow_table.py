"""The flow records kept as columns give the very frame the records as rows gave."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.metrics.frames import flows_frame
from simulator.network.flow_table import FlowRecord, FlowTable

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
