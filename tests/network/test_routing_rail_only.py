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


def test_a_rail_cut_at_one_nic_is_routed_over_another_rail():
    """With n0.nic0's link to rail 0 down, no NIC of server 0 reaches rail 0 (a rail-only
    fabric has no spine): traffic from n0.gpu0 crosses NVLink to another rail and back in
    at the destination (the shortest path over the links up), as a step on the rail
    Clos does; it ended the run with 'no network path between their NICs' while validate
    passed. The joined link path is the node path's links, as on every other route."""
    topo = load_topology(ROOT / "topologies/h100-rail-only-32n.yaml")
    c = Cluster(topo.graph, topo.gpu, down=[("n0.nic0", "rail0")])
    r, idx, g = c.router, c.links.index, c.graph
    down = {idx[("n0.nic0", "rail0")], idx[("rail0", "n0.nic0")]}
    for b in ("n1.gpu0", "n1.gpu3"):
        nodes = r.node_path("n0.gpu0", b)
        assert nodes[0] == "n0.gpu0" and nodes[-1] == b and "rail0" not in nodes
        assert all(g.nodes[n].get("tier", 0) < 2 for n in nodes if g.nodes[n]["kind"] == "switch")
        links = r.path("n0.gpu0", b).tolist()
        assert links == [idx[(u, v)] for u, v in zip(nodes, nodes[1:], strict=False)]
        assert not down & set(links) and r.forwarded_via_gpu("n0.gpu0", b)
    assert r.node_path("n0.gpu2", "n1.gpu2")[2] == "rail2"  # untouched NICs keep their rail
