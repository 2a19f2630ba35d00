"""Golden cases of the flow-level fabric (max-min fair sharing)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network.fabric import Fabric, Flow, max_min_rates
from simulator.network.routing import LinkTable, Router


def _chain(bws: list[float], lats: list[float]) -> nx.Graph:
    g = nx.Graph()
    names = ["gpu0", *[f"sw{i}" for i in range(len(bws) - 1)], "gpu1"]
    for n in names:
        g.add_node(n, kind="gpu" if n.startswith("gpu") else "switch", tier=1)
    for i, (bw, lat) in enumerate(zip(bws, lats, strict=False)):
        g.add_edge(names[i], names[i + 1], bandwidth_bytes_per_s=bw, latency_s=lat, medium="ib")
    return g


def test_lone_flow_over_hops_takes_latency_plus_bytes_over_bottleneck():
    """One flow over h hops: T = sum(latency_i) + S / min(bandwidth_i) (fluid model, STYLE.md)."""
    bws, lats = [100e9, 25e9, 50e9], [1e-6, 2e-6, 0.5e-6]
    g = _chain(bws, lats)
    lt = LinkTable(g)
    router = Router(g, lt)
    env = simpy.Environment()
    fab = Fabric(env, lt.capacity_bytes_per_s)
    path = router.path("gpu0", "gpu1")
    size = 3e9
    log = []

    def proc():
        yield env.timeout(router.latency_s("gpu0", "gpu1"))
        yield fab.transfer(path, np.ones(len(path)), size)
        log.append(("done", env.now))

    env.process(proc())
    env.run()
    assert log == [("done", pytest.approx(sum(lats) + size / min(bws), rel=1e-12))]


def test_two_flows_on_one_link_each_get_half():
    env = simpy.Environment()
    fab = Fabric(env, np.array([10e9]))
    ends = []
    for _ in range(2):
        ev = fab.transfer(np.array([0]), np.array([1.0]), 10e9)
        ev.callbacks.append(lambda e: ends.append(env.now))
    env.run()
    # each at 5 GB/s for 10 GB: 2 s
    assert ends == [pytest.approx(2.0), pytest.approx(2.0)]


def test_three_flows_unequal_max_min_shares():
    """Links A (10) and B (4). f1 uses A, f2 uses A+B, f3 uses B.
    Max-min: B is the bottleneck: f2 = f3 = 2; then f1 = 10 - 2 = 8."""
    rates = max_min_rates(
        np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1]), np.ones(4), np.array([10.0, 4.0]), 3
    )
    assert rates == pytest.approx([8.0, 2.0, 2.0], rel=1e-12)


def test_rates_recomputed_when_a_flow_ends():
    """f1 (4 B) and f2 (12 B) share a 2 B/s link: both at 1 until f1 ends at t=4, then f2 at 2:
    f2 has 8 B left and ends at 4 + 8/2 = 8."""
    env = simpy.Environment()
    fab = Fabric(env, np.array([2.0]))
    ends = {}
    for name, size in (("f1", 4.0), ("f2", 12.0)):
        ev = fab.transfer(np.array([0]), np.array([1.0]), size, label=name)
        ev.callbacks.append(lambda e, n=name: ends.__setitem__(n, env.now))
    env.run()
    assert ends == {"f1": pytest.approx(4.0), "f2": pytest.approx(8.0)}


def _bytes_by_link(fab: Fabric, n_links: int) -> np.ndarray:
    """Bytes each link carried, integrated from the fabric's rate intervals (rate x time)."""
    idx, started, finished, rate = fab.link_intervals()
    return np.bincount(idx, weights=rate * (finished - started), minlength=n_links)


def test_staggered_one_byte_flows_finish_when_their_last_byte_arrives():
    """Regression: a flow used to finish with up to 1e-3 bytes still to send. Three 1-byte
    flows on a 1 B/s link, the second and third starting at 0.9995 s: the first has 0.0005
    bytes left and gets a third of the link, so it ends at 0.9995 + 0.0015 = 1.001 s (not at
    0.9995 s); the others then share the link and end at 3 s, when 3 bytes have crossed it."""
    env = simpy.Environment()
    fab = Fabric(env, np.array([1.0]))
    ends: list[float] = []

    def start(at: float):
        yield env.timeout(at)
        flow = yield fab.transfer(np.array([0]), np.array([1.0]), 1.0)
        ends.append(flow.finished_at_s)

    for at in (0.0, 0.9995, 0.9995):
        env.process(start(at))
    env.run()
    assert ends == pytest.approx([1.001, 3.0, 3.0], rel=1e-12)
    assert _bytes_by_link(fab, 1)[0] == pytest.approx(3.0, rel=1e-12)
    assert fab.link_bytes[0] == pytest.approx(3.0, rel=1e-12)


def test_multiplicity_counts_a_link_crossed_twice():
    """A flow crossing a link twice moves at half that link's capacity."""
    env = simpy.Environment()
    fab = Fabric(env, np.array([8.0, 100.0]))
    ev = fab.transfer(np.array([0, 1]), np.array([2.0, 1.0]), 8.0)
    env.run()
    assert ev.value.finished_at_s == pytest.approx(2.0)


N_SHARED_LINKS = 6
MAX_FLOWS = 12

# sizes from 1 byte to 1 TB and capacities from 1 B/s to 1 TB/s: the fabric must conserve
# bytes to 1e-9 relative at every scale (a flow never finishes with bytes still to send)
flows_strategy = st.lists(
    st.tuples(
        st.lists(st.integers(0, N_SHARED_LINKS - 1), min_size=1, max_size=4, unique=True),
        st.floats(1.0, 1e12),
        st.floats(0.0, 2.0),
    ),
    min_size=1,
    max_size=MAX_FLOWS,
)


@settings(max_examples=60, deadline=None)
@given(
    flows=flows_strategy,
    caps=st.lists(st.floats(1.0, 1e12), min_size=N_SHARED_LINKS, max_size=N_SHARED_LINKS),
)
def test_fabric_laws(flows, caps):
    """Property: bytes delivered = bytes sent (to 1e-9 relative, or to what the clock can
    resolve, per flow and per link), no flow finishes before its last byte could arrive, no
    link above capacity.

    Each flow also crosses a private link of its own (capacity 1e15 B/s, never the
    bottleneck), whose bytes are that flow's delivered bytes alone.
    """
    env = simpy.Environment()
    cap = np.array(list(caps) + [1e15] * MAX_FLOWS)
    fab = Fabric(env, cap)
    done: dict[int, Flow] = {}

    def start(i, links, size, at):
        yield env.timeout(at)
        done[i] = yield fab.transfer(np.array(sorted(links)), np.ones(len(links)), size)

    for i, (links, size, at) in enumerate(flows):
        env.process(start(i, [*links, N_SHARED_LINKS + i], size, at))
    env.run()
    assert len(done) == len(flows)
    idx, s, e, rate = fab.link_intervals()
    assert np.all(rate <= cap[idx] * (1 + 1e-9))
    carried = _bytes_by_link(fab, len(cap))
    expected = np.zeros(len(cap))
    for i, (links, size, _) in enumerate(flows):
        expected[links] += size
        expected[N_SHARED_LINKS + i] = size
    for i, f in done.items():
        links, size, _ = flows[i]
        bound_rate = min(caps[k] for k in links)
        # the clock resolves time to a few ulps of `now`: rate x time is exact to that
        clock_bytes = 8 * bound_rate * float(np.spacing(f.finished_at_s))
        # delivered (rate x time on its private link) = sent, to 1e-9 or the clock's resolution
        assert abs(carried[N_SHARED_LINKS + i] - size) <= 1e-9 * size + clock_bytes
        # never finished before its last byte could have arrived at the bottleneck rate
        earliest_s = f.started_at_s + size / bound_rate
        assert f.finished_at_s >= earliest_s * (1 - 1e-12) - 8 * float(np.spacing(earliest_s))
        assert f.finished_at_s >= f.started_at_s
    # the fabric's own per-link totals settle the clock's rounding: exact to 1e-9
    assert fab.link_bytes == pytest.approx(expected, rel=1e-9, abs=0.0)
