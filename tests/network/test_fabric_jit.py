"""The compiled recomputation gives the numpy path's results bit for bit.

`Fabric` switches to `simulator.network.fabric_jit.recompute_single` after
`compiled_after` recomputations, whenever every class of active flows has one member. Flow
records (values and dtypes), link intervals, link bytes and the recomputation count must be
the very same with the switch at 0 (compiled from the first update) and never (numpy).
Keyed flows make classes of several members, so runs pass from one path to the other.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network.fabric import Fabric
from simulator.network.flow_batch import flow_batch

pytest.importorskip("numba")

N_LINKS = 10
NEVER = 10**9

flow_strategy = st.tuples(
    st.lists(st.integers(0, N_LINKS - 1), max_size=4, unique=True),  # links (none: finishes at once)
    st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.25, 1e-13]),  # size, bytes
    st.sampled_from([1.0, 2.0, 3.0 / 0.927]),  # multiplicity of every link
)
batch_strategy = st.tuples(
    st.sampled_from([0, 0, 0.25, 1.0, 1.0 / 3.0]),  # start, s (0 is the clock's int start)
    st.lists(flow_strategy, max_size=5),
    st.booleans(),  # keyed (equal links and multiplicities share a class)
)


def _records(fab: Fabric) -> tuple:
    cols = fab.flow_records.columns()
    records = {k: (v.dtype.str, v.tolist()) for k, v in cols.items()}
    intervals = [(a.dtype.str, a.tolist()) for a in fab.link_intervals()]
    return records, intervals, fab.link_bytes.tolist(), fab.recomputations


def _run_batches(batches, compiled_after: int, record_links: bool):  # noqa: ANN001, ANN202
    env = simpy.Environment()
    fab = Fabric(env, np.linspace(1.0, 2.0, N_LINKS), record_links=record_links)
    fab.compiled_after = compiled_after
    resumed = []

    def proc(i, at, flows, keyed):  # noqa: ANN001, ANN202
        if at:
            yield env.timeout(at)
        links = [np.array(sorted(ls), dtype=np.int64) for ls, _, _ in flows]
        mult = [np.full(len(ls), m) for ls, _, m in flows]
        keys = [fab.class_key(x, m) if keyed else -1 for x, m in zip(links, mult, strict=True)]
        batch = flow_batch(links, mult, [s for _, s, _ in flows], [f"f{i}"] * len(flows), None, keys)
        yield fab.transfer_batch(batch, op_id=f"op{i}")[0]
        resumed.append((i, env.now))

    for i, (at, flows, keyed) in enumerate(batches):
        env.process(proc(i, at, flows, keyed))
    env.run()
    return _records(fab), resumed


@settings(max_examples=35, deadline=None)
@given(batches=st.lists(batch_strategy, max_size=8), record_links=st.booleans())
def test_compiled_and_numpy_paths_give_the_same_run(batches, record_links):
    want = _run_batches(batches, NEVER, record_links)
    assert _run_batches(batches, 0, record_links) == want


def _run_many(seed: int, compiled_after: int) -> tuple:
    """300 flows of 1-5 links among 40, with non-round sizes, starts and capacities."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    fab = Fabric(env, rng.uniform(1.0, 3.0, 40))
    fab.compiled_after = compiled_after

    def start(at, links, mult, size):  # noqa: ANN001, ANN202
        yield env.timeout(at)
        yield fab.transfer(links, mult, size)

    for _ in range(300):
        k = int(rng.integers(1, 6))
        links = np.sort(rng.choice(40, k, replace=False))
        mult = rng.choice([1.0, 2.0, 3.0], k) / 0.927
        at = float(rng.choice([0.0, 0.5, rng.uniform(0, 20)]))
        env.process(start(at, links, mult, float(rng.uniform(0.5, 50))))
    env.run()
    return _records(fab)


@pytest.mark.parametrize("seed", [1, 2])
def test_compiled_path_on_hundreds_of_concurrent_flows(seed):
    """Many filling steps per update (different bottlenecks), from the first update and
    from a switch in the middle of the run."""
    want = _run_many(seed, NEVER)
    assert want[3] > 100  # recomputations: the switch below falls inside the run
    assert _run_many(seed, 0) == want
    assert _run_many(seed, 50) == want


def _late_small_key_run(compiled_after: int) -> tuple[list, list, list, int]:
    """250 one-link flows whose class keys are far above the compiled path's initial scratch
    table (64), then one flow with a small key while they are active."""
    env = simpy.Environment()
    fab = Fabric(env, np.linspace(1.0, 2.0, 300))
    fab.compiled_after = compiled_after
    for i in range(5000):  # register enough route classes that later keys exceed 4,000
        fab.class_key(np.array([i % 300, (i % 300 + 1) % 300]), np.array([1.0, float(1 + i // 300)]))
    done: list[tuple[int, float]] = []

    def flow(i: int, at: float, link: int, key: int, size: float):  # noqa: ANN202
        yield env.timeout(at)
        batch = flow_batch([np.array([link])], [np.array([1.0])], [size], ["x"], None, [key])
        yield fab.transfer_batch(batch)[0]
        done.append((i, env.now))

    for i in range(250):
        env.process(flow(i, 0.0, i, 4000 + i, 10.0 + i))
    env.process(flow(999, 0.5, 299, 3, 1.0))
    env.run()
    records = fab.flow_records.columns()["finished_at_s"].tolist()
    return done, fab.link_bytes.tolist(), records, len(fab._key_seen)


def test_compiled_admission_with_active_keys_beyond_its_scratch_table():
    # Active classes admitted on the numpy path carry keys the compiled admission's scratch
    # table was never sized for; it must be sized from them too (an unchecked write otherwise).
    compiled, plain = _late_small_key_run(1), _late_small_key_run(10**9)
    assert compiled[:3] == plain[:3]
    assert compiled[3] > 4249  # the scratch table covers every active key the scan marks


def test_compiled_path_gives_an_infinite_time_for_a_zero_rate_like_numpy():
    results = []
    for compiled_after in (10**9, 0):
        env = simpy.Environment()
        fab = Fabric(env, np.array([0.0, 1.0]))
        fab.compiled_after = compiled_after

        def one(fab: Fabric, link: int):  # noqa: ANN202
            yield fab.transfer(np.array([link]), np.array([1.0]), 5.0)

        for link in (0, 1):
            env.process(one(fab, link))
        with np.errstate(divide="ignore", invalid="ignore"):
            env.run(until=100)
        results.append(fab.link_bytes.tolist())
    assert results[0] == results[1] == [0.0, 5.0]


@settings(max_examples=60, deadline=None)
@given(
    flows=st.lists(
        st.tuples(
            st.lists(st.integers(0, 7), max_size=4, unique=True),  # links (none: an infinite rate)
            st.sampled_from([1.0, 2.0, 3.0 / 0.927]),  # multiplicity
        ),
        min_size=1,
        max_size=12,
    ),
    capacity=st.lists(st.sampled_from([1.0, 1.5, 2.0 / 3.0, 7.0, 1e-3, 0.1]), min_size=8, max_size=8),
)
def test_compiled_filling_matches_the_numpy_filling_bit_for_bit(flows, capacity):
    """`_fill` on its own against `max_min_class_rates`, on problems with several
    bottleneck levels, links no flow loads and flows with no link (an infinite rate)."""
    from simulator.network.fabric_jit import _fill
    from simulator.network.maxmin import max_min_class_rates

    e_cls = np.array([c for c, (links, _) in enumerate(flows) for _ in links], dtype=np.int64)
    e_link = np.array([x for links, _ in flows for x in links], dtype=np.int64)
    e_mult = np.array([m for links, m in flows for _ in links])
    cap = np.array(capacity)
    n = len(flows)
    want = max_min_class_rates(e_cls, e_link, e_mult, cap, np.ones(n, dtype=np.int64), np.arange(n))
    got = _fill(e_link, e_mult, e_cls, cap, n, n)
    assert got.tobytes() == want.tobytes()
