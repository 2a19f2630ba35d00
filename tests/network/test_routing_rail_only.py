"""Rail-only networks (Wang et al., "Optimized Network Architectures for LLM Training with
Billions of Parameters"): traffic between different rails of different servers is forwarded
through a GPU of the sender's scale-up domain, never across a spine, and the run reports it."""

from __future__ import annotations

from pathlib import Path

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSimulator
from simulator.metrics import frames as fr
from simulator.network.cluster import Cluster
from simulator.network.topology import load_topology
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[2]


def test_cross_rail_traffic_goes_through_the_scale_up_domain():
    topo = load_topology(ROOT / "topologies/h100-rail-only-32n.yaml")
    c = Cluster(topo.graph, topo.gpu)
    gpus = c.gpus[:16]  # two servers, all eight rails
    g = c.graph
    for a in gpus[:8]:
        for b in gpus[8:]:
            path = c.router.node_path(a, b)
            assert all(g.nodes[n].get("tier", 0) < 2 for n in path if g.nodes[n]["kind"] == "switch")
            rail_a, rail_b = g.nodes[a]["local_rank"], g.nodes[b]["local_rank"]
            forwarded = c.router.forwarded_via_gpu(a, b)
            assert forwarded == (rail_a != rail_b)
            if forwarded:  # the hop after the sender is inside its own server
                assert g.nodes[path[2]]["kind"] == "gpu" and g.nodes[path[2]]["node"] == g.nodes[a]["node"]
    n = len(gpus)
    op = Op(
        "a2a",
        "collective",
        tuple(range(n)),
        "comm",
        collective="all_to_all",
        group=tuple(range(n)),
        size_bytes=2**28,
    )
    sim = StepSimulator(SimContext(0), c, StepProgram("a2a", gpus, [op]), ComputeCost(topo.gpu))
    sim.run(1)
    # every cross-rail, cross-server pair: 8 x 7 pairs each way, S/n bytes each
    assert sim.forwarded_bytes == 2 * 8 * 7 * 2**28 / n
    links = fr.links_frame(sim.fabric.link_intervals(), c.links)
    assert links["tier"].max() <= 1 and not links.empty
