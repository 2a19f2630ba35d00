"""GPUs cabled to GPUs of other servers (a torus) reach each other over those cables alone.

A torus with storage has one frontend NIC per server, on PCIe to its GPUs, and a frontend
switch: before `direct_routes`, routing sent all GPU traffic between servers out through
that NIC (6.25 GB/s) and inside a server over PCIe, leaving the torus links idle (a 1 GB
all-reduce over 64 GPUs 2.7x slower with storage than without).
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import yaml

from simulator.network.cluster import Cluster
from simulator.network.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]


def _torus(tmp_path: Path, storage: bool) -> Cluster:
    doc = yaml.safe_load((ROOT / "topologies/torus-4x4x4.yaml").read_text())
    doc["gpu"] = {"file": str(ROOT / "topologies/gpus/mi300x.yaml")}
    if not storage:
        del doc["storage"]
    path = tmp_path / f"torus-{storage}.yaml"
    path.write_text(yaml.safe_dump(doc))
    topo = load_topology(path)
    return Cluster(topo.graph, topo.gpu)


def test_storage_leaves_gpu_routes_on_the_torus_links(tmp_path: Path) -> None:
    with_st, without = _torus(tmp_path, True), _torus(tmp_path, False)
    assert with_st.storage and not without.storage
    gpus = without.gpus
    pairs = [(a, b) for a in gpus[::5] for b in gpus[::3] if a != b]
    pairs += [("n0.gpu0", "n0.gpu2"), ("n0.gpu3", "n1.gpu0")]  # inside a server; across servers
    for a, b in pairs:
        nodes = with_st.router.node_path(a, b)
        # as short as over the torus alone (ties may break the other way: the cluster's
        # graph with storage lists each GPU's neighbours in another order)
        assert len(nodes) == len(without.router.node_path(a, b)), (a, b)
        assert all(n.split(".")[-1].startswith("gpu") for n in nodes)
        links = with_st.router.path(a, b)
        assert [with_st.links.medium[i] for i in links] == ["ethernet"] * (len(nodes) - 1)
    # a checkpoint's writes still leave through the server's frontend NIC
    sink = with_st.storage_sink(None, 0)
    to_storage = with_st.router.node_path("n0.gpu1", sink)
    assert to_storage[1] == "n0.nic0" and "frontend" in to_storage


def test_torus_facts_with_storage_are_the_torus_ones(tmp_path: Path) -> None:
    """Diameter sum(k // 2) = 6 links and bisection 2 x N/k links x 50 GB/s = 1.6 TB/s
    (the design's stated formula), with or without the frontend network."""
    from simulator.network.facts import topology_facts

    for storage in (True, False):
        f = topology_facts(_torus(tmp_path, storage).graph)
        assert f["diameter_links"] == 6
        assert f["bisection_bytes_per_s"] == 2 * (64 / 4) * 50e9


def _switched(cable: bool) -> Cluster:
    """Two servers of two GPUs on an NVSwitch each, one NIC per GPU on one leaf; with `cable`,
    an Ethernet cable joins s0.g0 and s1.g0 directly."""
    gpu = load_topology(ROOT / "topologies/h100-rail-clos-2n.yaml").gpu
    g = nx.Graph()
    g.add_node("leaf", kind="switch", tier=1)
    for s in ("s0", "s1"):
        g.add_node(f"{s}.sw", kind="switch", tier=0, node=s)
        for i in range(2):
            g.add_node(f"{s}.g{i}", kind="gpu", node=s, local_rank=i)
            g.add_node(f"{s}.nic{i}", kind="nic", node=s, local_rank=i)
            g.add_edge(f"{s}.g{i}", f"{s}.sw", bandwidth_bytes_per_s=4e11, latency_s=1e-6, medium="nvlink")
            g.add_edge(f"{s}.g{i}", f"{s}.nic{i}", bandwidth_bytes_per_s=5e10, latency_s=0.0, medium="pcie")
            g.add_edge(f"{s}.nic{i}", "leaf", bandwidth_bytes_per_s=5e10, latency_s=1e-6, medium="ib")
    if cable:
        g.add_edge("s0.g0", "s1.g0", bandwidth_bytes_per_s=5e10, latency_s=1e-6, medium="ethernet")
    return Cluster(g, gpu)


def test_a_direct_cable_beside_a_switched_fabric_carries_only_its_gpus_traffic() -> None:
    """The two cabled GPUs use their cable; every other pair keeps the route it has without
    the cable (NVSwitch inside a server, NIC and leaf between servers)."""
    with_cable, without = _switched(True), _switched(False)
    assert with_cable.router.node_path("s0.g0", "s1.g0") == ["s0.g0", "s1.g0"]
    for a in without.gpus:
        for b in without.gpus:
            if a != b and {a, b} != {"s0.g0", "s1.g0"}:
                assert with_cable.router.node_path(a, b) == without.router.node_path(a, b), (a, b)


def test_a_torus_gpu_whose_torus_links_are_down_reaches_the_others_through_the_frontend(
    tmp_path: Path,
) -> None:
    """All six torus links of n0.gpu0 down: it is not cut off (its frontend NIC is up), its
    traffic takes the frontend network, and the other GPUs keep their torus routes."""
    whole = _torus(tmp_path, True)
    topo = load_topology(tmp_path / "torus-True.yaml")
    down = [(u, v) for u, v, m in topo.graph.edges("n0.gpu0", data="medium") if m == "ethernet"]
    assert len(down) == 6
    c = Cluster(topo.graph, topo.gpu, down=down)
    c.router.check_reachable(c.gpus)  # not cut off: its frontend NIC is up
    nodes = c.router.node_path("n0.gpu0", "n5.gpu1")
    assert "frontend" in nodes and nodes[1] == "n0.nic0"
    assert c.router.node_path("n1.gpu0", "n5.gpu1") == whole.router.node_path("n1.gpu0", "n5.gpu1")
