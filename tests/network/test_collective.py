"""Golden collective times on textbook fabrics, and routing rules on a rail-optimized Clos."""

from __future__ import annotations

import pytest

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.clos import RailClosSpec, SwitchSpec, build_rail_clos, build_switch
from simulator.network.hardware import GPUSpec
from simulator.workload.program import Op, StepProgram

GPU = GPUSpec(
    name="t", peak_flops_per_s={"bf16": 1e15}, hbm_bandwidth_bytes_per_s=3e12, hbm_capacity_bytes=8e10
)


def _time(
    cluster: Cluster, kind: str, algo: str, size: float, n: int | None = None, fidelity="flow"
) -> float:
    n = n or len(cluster.gpus)
    op = Op(
        "c",
        "collective",
        tuple(range(n)),
        "comm",
        collective=kind,
        group=tuple(range(n)),
        size_bytes=size,
        algorithm=algo,
    )
    sim = StepSimulator(
        SimContext(0),
        cluster,
        StepProgram("t", cluster.gpus[:n], [op]),
        ComputeCost(GPU),
        StepSettings(fidelity=fidelity),
    )
    sim.run(1)
    return sim.step_rows[0].finished_at_s


@pytest.mark.parametrize("n", [2, 4, 8, 16])
@pytest.mark.parametrize("fidelity", ["flow", "analytic"])
@pytest.mark.parametrize("size", [2**30, 2**16])  # bandwidth-bound and latency-bound
def test_ring_all_reduce_on_switch(n, fidelity, size):
    """Ring all-reduce: T = 2(n-1)·a_path + 2(n-1)/n · S/B (Patarasuk & Yuan 2009; NCCL's ring).

    Latency convention: one ring step costs the path latency between neighbours; on `switch`
    that is GPU->switch->GPU, a_path = 2·a."""
    bw, a = 50e9, 1e-6
    c = Cluster(
        build_switch(
            SwitchSpec(generator="switch", gpus=n, link_gbyte_per_s=50, latency_us=1, medium="ib"), GPU
        ),
        GPU,
    )
    expected = 2 * (n - 1) * (2 * a) + 2 * (n - 1) / n * size / bw
    # the fluid model is exact: only floating-point error remains
    assert _time(c, "all_reduce", "ring", size, fidelity=fidelity) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
def test_ring_gather_scatter_on_switch(kind):
    """Ring all-gather / reduce-scatter: T = (n-1)·a_path + (n-1)/n · S/B."""
    n, bw, a, size = 8, 50e9, 1e-6, 2**28
    c = Cluster(
        build_switch(
            SwitchSpec(generator="switch", gpus=n, link_gbyte_per_s=50, latency_us=1, medium="ib"), GPU
        ),
        GPU,
    )
    assert _time(c, kind, "ring", size) == pytest.approx((n - 1) * 2 * a + (n - 1) / n * size / bw, rel=1e-9)


def test_halving_doubling_on_switch():
    """Rabenseifner all-reduce: 2·log2(n) steps; each rank sends 2(n-1)/n·S in total."""
    n, bw, a, size = 8, 50e9, 1e-6, 2**28
    c = Cluster(
        build_switch(
            SwitchSpec(generator="switch", gpus=n, link_gbyte_per_s=50, latency_us=1, medium="ib"), GPU
        ),
        GPU,
    )
    expected = 2 * 3 * 2 * a + 2 * (n - 1) / n * size / bw
    assert _time(c, "all_reduce", "halving_doubling", size) == pytest.approx(expected, rel=1e-9)


def test_direct_all_to_all_on_switch():
    """All-to-all, every pair at once: each rank sends (n-1)/n·S through its one link."""
    n, bw, a, size = 8, 50e9, 1e-6, 2**28
    c = Cluster(
        build_switch(
            SwitchSpec(generator="switch", gpus=n, link_gbyte_per_s=50, latency_us=1, medium="ib"), GPU
        ),
        GPU,
    )
    assert _time(c, "all_to_all", "direct", size) == pytest.approx(2 * a + (n - 1) / n * size / bw, rel=1e-9)


def _clos(nodes=4, per_leaf=2, oversub=1.0):
    spec = RailClosSpec(
        generator="rail_clos",
        nodes=nodes,
        gpus_per_node=8,
        servers_per_leaf=per_leaf,
        oversubscription=oversub,
        nic_gbps=400,
        link_latency_us=1.0,
    )
    return build_rail_clos(spec, GPU)


def test_multi_node_ring_uses_every_nic():
    """A multi-node ring runs one channel per GPU of a server, so all 8 NICs carry traffic and the
    bus bandwidth approaches 8 x 50 GB/s (the NICs), not one NIC's 50 GB/s."""
    c = Cluster(_clos(nodes=2, per_leaf=2), GPU)
    n, size = 16, 2**30
    t = _time(c, "all_reduce", "ring", size)
    busbw = size / t * 2 * (n - 1) / n
    assert 0.9 * 400e9 < busbw <= 400e9


def test_rail_aligned_route_stays_off_the_spine():
    """Cross-rail traffic to a server under the same leaves is moved over NVLink to the GPU on the
    destination's rail (PXN) and never touches a spine."""
    c = Cluster(_clos(nodes=2, per_leaf=2), GPU)
    path = c.router.node_path("n0.gpu7", "n1.gpu0")
    assert not any(p.startswith("spine") for p in path)
    assert path[:3] == ["n0.gpu7", "n0.nvsw", "n0.gpu0"]


def test_oversubscribed_spine_halves_cross_group_bandwidth():
    """A 2:1 oversubscribed leaf has half its down bandwidth up: a ring across leaf groups gets half.

    Compared on the bandwidth term only (the slope of time against size); latency is unchanged."""
    s1, s2 = 2**29, 2**30

    def slope(oversub):
        c = Cluster(_clos(nodes=4, per_leaf=1, oversub=oversub), GPU)
        return _time(c, "all_reduce", "ring", s2) - _time(c, "all_reduce", "ring", s1)

    assert slope(2) / slope(1) == pytest.approx(2.0, rel=1e-6)


def test_degraded_link_slows_ring_by_max_min_prediction():
    """Halving one NIC link on a channel's path halves that channel's rate: with C channels of equal
    bytes, the collective ends when the slow channel does: T_fluid doubles."""
    g = _clos(nodes=2, per_leaf=2)
    base = Cluster(g, GPU)
    slow = Cluster(g, GPU, degraded={("n0.nic3", "leaf3.0"): 0.5})
    size = 2**30
    t0, t1 = _time(base, "all_reduce", "ring", size), _time(slow, "all_reduce", "ring", size)
    lat = 2 * 15 * max(base.router.latency_s(a, b) for a, b in [("n0.gpu2", "n1.gpu3")])
    assert (t1 - lat) / (t0 - lat) == pytest.approx(2.0, rel=0.01)


def test_down_link_reroutes():
    g = _clos(nodes=4, per_leaf=2)
    c = Cluster(g, GPU, down=[("leaf0.0", "spine0")])
    path = c.router.node_path("n0.gpu0", "n2.gpu0")
    assert ("leaf0.0", "spine0") not in list(zip(path, path[1:], strict=False))
    assert _time(c, "all_reduce", "ring", 2**26) > 0
