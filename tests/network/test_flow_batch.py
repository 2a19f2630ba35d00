"""Flows started as one batch give what starting them one by one gave, event for event.

`Fabric.transfer_batch` replaces a `transfer` per flow and an `AllOf` over their events:
the flow records, link intervals, link bytes, recomputation count and the order in which
every process resumes (the order of every other event) must be the very same.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network.fabric import Fabric
from simulator.network.flow_batch import flow_batch

N_LINKS = 10

flow_strategy = st.tuples(
    st.lists(st.integers(0, N_LINKS - 1), max_size=4, unique=True),  # links (none: finishes at once)
    st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.25]),  # size, bytes (0: finishes at once)
    st.sampled_from([1.0, 2.0]),  # multiplicity of every link
)
batch_strategy = st.tuples(
    st.sampled_from([0, 0, 0.25, 1.0]),  # start, s (0 is the clock's int start)
    st.lists(flow_strategy, max_size=5),
    st.booleans(),  # keyed (equal links and multiplicities share a class)
)


def _run(batches, batched: bool):  # noqa: ANN001, ANN202
    env = simpy.Environment()
    fab = Fabric(env, np.linspace(1.0, 2.0, N_LINKS))
    resumed = []

    def proc(i, at, flows, keyed):  # noqa: ANN001, ANN202
        if at:
            yield env.timeout(at)
        links = [np.array(sorted(ls), dtype=np.int64) for ls, _, _ in flows]
        mult = [np.full(len(ls), m) for ls, _, m in flows]
        keys = [fab.class_key(x, m) if keyed else -1 for x, m in zip(links, mult, strict=True)]
        if batched:
            batch = flow_batch(links, mult, [s for _, s, _ in flows], [f"f{i}"] * len(flows), None, keys)
            yield fab.transfer_batch(batch, op_id=f"op{i}")[0]
        else:
            events = [
                fab.transfer(x, m, s, op_id=f"op{i}", label=f"f{i}", key=k)
                for x, m, (_, s, _), k in zip(links, mult, flows, keys, strict=True)
            ]
            yield env.all_of(events)
        resumed.append((i, env.now))

    for i, (at, flows, keyed) in enumerate(batches):
        env.process(proc(i, at, flows, keyed))
    env.run()
    cols = fab.flow_records.columns()
    records = {k: (v.dtype.str, v.tolist()) for k, v in cols.items()}
    intervals = [a.tolist() for a in fab.link_intervals()]
    return resumed, records, intervals, fab.link_bytes.tolist(), fab.recomputations


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(batch_strategy, min_size=1, max_size=6))
def test_a_batch_gives_the_records_and_event_order_of_its_flows_one_by_one(batches):
    assert _run(batches, batched=True) == _run(batches, batched=False)


def test_a_batch_of_flows_without_bytes_finishes_when_started():
    """Every flow empty: the batch's event is processed at once, the flows recorded at 0."""
    env = simpy.Environment()
    fab = Fabric(env, np.ones(2))
    batch = flow_batch(
        [np.array([0]), np.empty(0, dtype=np.int64)], [np.ones(1), np.ones(0)], [0.0, 3.0], ["a", "b"]
    )
    done, first = fab.transfer_batch(batch, op_id="x")
    env.run()
    assert done.processed and first == 0 and fab.recomputations == 0
    cols = fab.flow_records.columns()
    assert cols["flow_id"].tolist() == [0, 1] and cols["finished_at_s"].tolist() == [0, 0]
    assert cols["finished_at_s"].dtype == np.int64  # the clock's int 0, as a frame of the rows has it


def test_a_flow_of_nan_or_negative_bytes_is_refused():
    link = [np.array([0], dtype=np.int64)]
    mult = [np.array([1.0])]
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="finite and non-negative"):
            flow_batch(link, mult, [bad], ["x"])
