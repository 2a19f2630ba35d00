"""Routes decided once per server shape are the routes of the step-by-step definition.

The router decides paths inside a server, entry NICs and exit NICs once per server shape
(or egress class) and maps them to the other servers by local index. Each route is checked
here against `node_path`, which follows the definitions server by server, on topologies
whose servers differ: a scale-up link down in one server, a NIC cable down in another,
NIC names that sort differently in a third; on a full xGMI mesh, a storage topology and a
torus (no NICs). The latency and the forwarding flag (and count) are checked against their
numpy definitions over the route's links.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from simulator.network.cluster import Cluster
from simulator.network.graph import SCALE_UP_MEDIA, edge_list
from simulator.network.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]


def _check_routes(c: Cluster, pairs: list[tuple[str, str]]) -> None:
    r, idx = c.router, c.links.index
    n_forwarded = r.forwarded_count(pairs[::2] + pairs)  # routes the pairs first
    got = r.paths(pairs)
    forwarded = []
    for (a, b), p in zip(pairs, got, strict=True):
        nodes = r.node_path(a, b)
        assert p.tolist() == [idx[(u, v)] for u, v in zip(nodes, nodes[1:], strict=False)], (a, b)
        assert r.latency_s(a, b) == float(c.links.latency_s[p].sum())
        forwarded.append(len(p) > 1 and bool(c.links.into_gpu[p[:-1]].any()))
        assert r.forwarded_via_gpu(a, b) == forwarded[-1]
    assert n_forwarded == sum(forwarded[::2]) + sum(forwarded)


def _uneven_rail_clos() -> Cluster:
    """16 servers of the 4:1 rail Clos, made unlike each other."""
    topo = load_topology(ROOT / "topologies/h100-rail-clos-16n-4to1.yaml")
    # NIC names of n7 that sort in another order than their local ranks
    g = nx.relabel_nodes(topo.graph, {f"n7.nic{i}": f"n7.nic{9 - i}x" for i in range(8)}, copy=True)
    nic_leaf = next((u, v) for u, v in g.edges("n5.nic3") if g.nodes[v]["kind"] == "switch")
    down = [("n3.gpu2", "n3.nvsw"), nic_leaf]
    assert all(g.has_edge(*e) for e in down)
    return Cluster(g, topo.gpu, down=down)


def test_uneven_servers_get_their_own_shapes_and_the_defined_routes() -> None:
    c = _uneven_rail_clos()
    gpus = c.gpus
    pairs = [(a, b) for a in gpus[::3] for b in gpus[::2] if a != b]
    pairs += [(a, b) for s in ("n3", "n5", "n7", "n0") for a in gpus for b in gpus if a.startswith(f"{s}.")]
    _check_routes(c, pairs)
    sh = c.router._shapes
    shapes = {sh.shape(c.router.domain_of(g)) for g in gpus}
    # the alike servers share one shape; n3 (split in two by the link down: gpu2 and its NIC
    # are a domain of their own), n5 (a NIC with no cable up) and n7 (names) have their own
    assert len(shapes) == 5
    classes = {sh.egress_class(c.router.domain_of(g)) for g in gpus}
    assert len(classes) > len(shapes)


@pytest.mark.parametrize(
    "name",
    ["mi325x-thor2-2n.yaml", "torus-4x4x4.yaml", "h100-rail-only-32n.yaml", "dgx-h100-superpod-su.yaml"],
)
def test_catalog_topologies_route_as_defined(name: str) -> None:
    topo = load_topology(ROOT / "topologies" / name)
    c = Cluster(topo.graph, topo.gpu)
    gpus = c.gpus
    step = max(1, len(gpus) // 24)
    pairs = [(a, b) for a in gpus[::step] for b in gpus[1::step]]
    pairs += [(g, c.storage_sink(None, i)) for i, g in enumerate(gpus[::step])] if c.storage else []
    _check_routes(c, pairs)


def test_nic_ties_are_broken_by_name_in_each_server() -> None:
    """Two NICs equally near every GPU, on no rail: the entry and exit NICs are chosen by
    name. Server s1 lists its NICs in the other order of their names, so it cannot share
    the shape of s0 and s2 (mapping by local index would pick the other NIC)."""
    gpu = load_topology(ROOT / "topologies/h100-rail-clos-2n.yaml").gpu
    g = nx.Graph()
    g.add_node("leaf", kind="switch", tier=1)
    for s in ("s0", "s1", "s2"):
        g.add_node(f"{s}.sw", kind="switch", tier=0, node=s)
        for i in range(2):
            g.add_node(f"{s}.g{i}", kind="gpu", node=s, local_rank=i)
            g.add_edge(f"{s}.g{i}", f"{s}.sw", bandwidth_bytes_per_s=4e11, latency_s=1e-6, medium="nvlink")
        for nic in ("nicB", "nicA") if s == "s1" else ("nicA", "nicB"):
            g.add_node(f"{s}.{nic}", kind="nic", node=s)
            g.add_edge(f"{s}.{nic}", f"{s}.sw", bandwidth_bytes_per_s=5e10, latency_s=0.0, medium="pcie")
            g.add_edge(f"{s}.{nic}", "leaf", bandwidth_bytes_per_s=5e10, latency_s=1e-6, medium="ib")
    c = Cluster(g, gpu)
    pairs = [(a, b) for a in c.gpus for b in c.gpus if a != b]
    _check_routes(c, pairs)
    assert c.router.node_path("s0.g0", "s1.g1") == [
        "s0.g0",
        "s0.sw",
        "s0.nicA",
        "leaf",
        "s1.nicA",
        "s1.sw",
        "s1.g1",
    ]


def test_switch_distances_as_lists_are_the_dicts() -> None:
    c = _uneven_rail_clos()
    r = c.router
    for t in r._sw_names[::3]:
        dl, d = r._dist_list(t), r._switch_dist(t)
        assert {s: dl[i] for i, s in enumerate(r._sw_names) if dl[i] >= 0} == d
        assert np.array_equal(r._dist_arrays[t], np.array(dl))


def test_edges_links_and_domains_read_in_one_pass_are_the_networkx_ones() -> None:
    """The edge list, the link table and the scale-up domains, built from the adjacency in one
    pass, equal networkx's edge view, a table built edge by edge and networkx's components."""
    c = _uneven_rail_clos()
    g, links, r = c.graph, c.links, c.router
    assert edge_list(g) == list(g.edges(data=True))
    want = [(u, v, d) for a, b, d in g.edges(data=True) for u, v in ((a, b), (b, a))]
    assert list(zip(links.src, links.dst, strict=True)) == [(u, v) for u, v, _ in want]
    assert links.capacity_bytes_per_s.tolist() == [float(d["bandwidth_bytes_per_s"]) for *_, d in want]
    assert links.latency_s.tolist() == [float(d.get("latency_s", 0.0)) for *_, d in want]
    assert links.medium == [d["medium"] for *_, d in want]
    dom = nx.Graph()
    dom.add_nodes_from(n for n in g if n not in r._net_switches)
    dom.add_edges_from(
        (u, v)
        for u, v, m in g.edges(data="medium")
        if u in dom and v in dom and m in SCALE_UP_MEDIA and frozenset((u, v)) not in r.down
    )
    assert r._dom_adj == {n: list(dom.adj[n]) for n in dom}
    comps = sorted(nx.connected_components(dom), key=lambda x: min(map(str, x)))
    assert r._domain == {n: i for i, comp in enumerate(comps) for n in comp}
