"""Topology facts: bisection bandwidth, diameter, oversubscription, counts."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from simulator.network.design.clos import (
    FatTreeSpec,
    MI300XClusterSpec,
    MultiPlaneFatTreeSpec,
    RailClosSpec,
    RailOnlySpec,
    SuperPodSpec,
)
from simulator.network.design.direct import DragonflySpec, TorusSpec
from simulator.network.design.registry import build_design
from simulator.network.design.scale_up import PCIeNodeSpec
from simulator.network.facts import (
    bisection,
    diameter,
    facts_frame,
    flow_bisection,
    ordered_gpus,
    reduced_flow_bisection,
    tier_cut_bisection,
    tier_table,
    topology_facts,
)


def without_structure(g: nx.Graph) -> nx.Graph:
    h = g.copy()
    h.graph.pop("structure", None)
    return h


@pytest.mark.parametrize("k", [4, 6])
def test_fat_tree_has_full_bisection(k: int) -> None:
    """k-ary fat-tree (Al-Fares 2008) is non-blocking: bisection = (k^3/4)/2 x B, checked
    three ways: structure, networkx max-flow min-cut, and the Clos tier-cut bound."""
    g = build_design(FatTreeSpec(k=k, link_gbps=100))
    full = k**3 / 4 / 2 * 100e9 / 8
    assert bisection(g)[0] == pytest.approx(full)
    assert flow_bisection(g) == pytest.approx(full)
    assert tier_cut_bisection(g) == pytest.approx(full)
    assert bisection(without_structure(g))[1].startswith("max-flow")


def test_two_to_one_clos_has_half_bisection() -> None:
    """A 2:1 oversubscribed leaf (u = s/2 uplinks) halves the bisection: N*G/2 x B / 2."""
    kw = {"nodes": 8, "su_size": 4, "gpus_per_node": 2, "switch_radix": 8}
    full = build_design(SuperPodSpec(**kw, oversubscription=1))
    half = build_design(SuperPodSpec(**kw, oversubscription=2))
    b = 400e9 / 8
    assert bisection(full)[0] == pytest.approx(8 * 2 / 2 * b)
    assert bisection(half)[0] == pytest.approx(8 * 2 / 2 * b / 2)
    # the structural numbers agree with max-flow min-cut on the same graphs
    assert flow_bisection(full) == pytest.approx(bisection(full)[0])
    assert flow_bisection(half) == pytest.approx(bisection(half)[0])
    assert tier_table(half).set_index("tier").loc[1, "oversubscription"] == pytest.approx(2.0)
    assert tier_table(full).set_index("tier").loc[1, "oversubscription"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "spec",
    [
        RailOnlySpec(nodes=4, gpus_per_node=4),
        MultiPlaneFatTreeSpec(nodes=8, gpus_per_node=2, switch_radix=8),
        TorusSpec(dims=[4, 4], gpus_per_node=2),
        TorusSpec(
            dims=[4, 4],
            gpus_per_node=2,
            storage={"nodes": 1, "write_gbyte_per_s": 1, "read_gbyte_per_s": 1},
        ),
        DragonflySpec(a=4, p=2, h=2),
        PCIeNodeSpec(nodes=8, switch_radix=8),
        SuperPodSpec(nodes=1),
        MI300XClusterSpec(nodes=1),
        RailOnlySpec(nodes=1),
        MultiPlaneFatTreeSpec(nodes=1),
    ],
    ids=lambda s: s.generator,
)
def test_structural_bisection_matches_max_flow(spec) -> None:
    """Each design's structural formula equals the max-flow min-cut between the two
    halves of the GPU list on a small instance."""
    g = build_design(spec)
    assert flow_bisection(g) == pytest.approx(bisection(g)[0], rel=1e-9)


def test_ordered_gpus_uses_natural_order() -> None:
    g = build_design(FatTreeSpec(k=4))
    order = ordered_gpus(g)
    assert order[:3] == ["n0.gpu0", "n1.gpu0", "n2.gpu0"]
    assert order[-1] == "n15.gpu0"


def test_diameters() -> None:
    """Switch hops between GPUs: fat-tree edge-agg-core-agg-edge = 5; one-SU rail-optimized
    pod = 1 (NVLink to the right rail, then one leaf); torus: no switch, sum(k_i // 2) links;
    dragonfly with one global link per group pair: local, global, local link = 4 routers."""
    assert diameter(build_design(FatTreeSpec(k=4)))["diameter_switch_hops"] == 5
    assert diameter(build_design(SuperPodSpec(nodes=4, su_size=4)))["diameter_switch_hops"] == 1
    assert diameter(build_design(SuperPodSpec(nodes=8, su_size=4)))["diameter_switch_hops"] == 3
    t = diameter(build_design(TorusSpec(dims=[4, 6], gpus_per_node=2)))
    assert (t["diameter_switch_hops"], t["diameter_links"]) == (0, 2 + 3)
    assert diameter(build_design(DragonflySpec(a=4, p=2, h=2)))["diameter_switch_hops"] == 4


def test_diameter_samples_large_graphs() -> None:
    d = diameter(build_design(SuperPodSpec(nodes=64)))
    assert d["diameter_method"].startswith("sampled")
    assert d["diameter_switch_hops"] == 3


def test_topology_facts_and_frame() -> None:
    g = build_design(SuperPodSpec(nodes=64))
    f = topology_facts(g)
    assert f["gpus"] == 512 and f["servers"] == 64 and f["nics"] == 512
    assert f["switches_by_tier"] == {0: 64, 1: 16, 2: 8}
    assert f["switches_by_role"]["leaf"] == 16
    assert f["links_by_medium"]["nvlink"] == 512
    assert f["bisection_per_gpu_bytes_per_s"] == pytest.approx(50e9)
    assert f["oversubscription_by_tier"][1] == pytest.approx(1.0)
    assert f["oversubscription_by_tier"][2] is None
    frame = facts_frame(f)
    assert list(frame.columns) == ["fact", "key", "value", "unit"]
    row = frame[(frame.fact == "switches_by_tier") & (frame.key == "1")]
    assert row.value.item() == 16


def test_tier_cut_fallback_for_graphs_without_structure() -> None:
    g = without_structure(build_design(SuperPodSpec(nodes=64, oversubscription=2)))
    assert tier_cut_bisection(g) == pytest.approx(512 / 2 * 50e9 / 2)
    t = tier_table(g)
    assert math.isnan(t.set_index("tier").loc[2, "oversubscription"])


@pytest.mark.parametrize(
    "spec",
    [
        RailClosSpec(generator="rail_clos", nodes=16, servers_per_leaf=4, oversubscription=4),
        RailClosSpec(generator="rail_clos", nodes=12, servers_per_leaf=12, oversubscription=4),
        TorusSpec(dims=[4, 4], gpus_per_node=2),
        DragonflySpec(a=4, p=2, h=2),
        PCIeNodeSpec(nodes=8, switch_radix=8),
        MI300XClusterSpec(nodes=4),
    ],
    ids=lambda s: s.generator,
)
def test_the_reduced_max_flow_equals_the_max_flow(spec) -> None:
    """Merging each half's GPUs and folding pass-through nodes keeps the max flow: it equals
    networkx's on the whole graph (and the tier cut, above 3,000 nodes until now, does not
    on a rail-optimized leaf that serves both halves, or on a torus)."""
    g = without_structure(build_design(spec))
    assert reduced_flow_bisection(g) == pytest.approx(flow_bisection(g), rel=1e-12)


def test_a_large_rail_clos_gets_its_max_flow_not_the_tier_cut() -> None:
    """400 servers under one leaf per rail at 4:1 (6,908 nodes, over the 3,000 of the plain
    max-flow): every NIC reaches the other half through its leaf, so the bisection is
    1,600 NICs x 50 GB/s = 80 TB/s; the tier cut said 20 TB/s (half the 4:1 uplinks)."""
    g = build_design(RailClosSpec(generator="rail_clos", nodes=400, servers_per_leaf=400, oversubscription=4))
    assert g.number_of_nodes() > 3000
    value, method = bisection(g)
    assert value == pytest.approx(1600 * 50e9, rel=1e-12)
    assert method == "max-flow min-cut between halves of the GPU list, on the graph reduced exactly"
    assert tier_cut_bisection(g) == pytest.approx(20e12, rel=1e-12)
    assert reduced_flow_bisection(g, limit=5) is None  # the switches alone are more than 5
