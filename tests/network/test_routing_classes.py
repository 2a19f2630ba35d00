"""Route planning shortcuts give the routes of the plain definitions.

The router finds switch distances by a breadth-first search over index arrays, chooses a
source NIC per (server, destination switch, rail) class before the per-GPU tie-break, and
prices cables per distinct kind; each is checked here against the direct definition
(networkx distances, the four-criteria `min` over the server's NICs, one price per cable)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from simulator.errors import SimulationError
from simulator.network import cost
from simulator.network.cluster import Cluster
from simulator.network.routing import _bidirectional_path
from simulator.network.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fat_tree_down() -> Cluster:
    topo = load_topology(ROOT / "topologies/fat-tree-k8.yaml")
    g = topo.graph
    sw = [(u, v) for u, v in g.edges if g.nodes[u]["kind"] == "switch" and g.nodes[v]["kind"] == "switch"]
    return Cluster(g, topo.gpu, down=sw[::7])  # every 7th switch link down


def test_switch_distances_are_networkx_distances(fat_tree_down: Cluster) -> None:
    c = fat_tree_down
    g, down = c.graph, {frozenset(e) for e in c.down}
    net = [n for n, d in g.nodes(data=True) if d["kind"] == "switch" and d.get("tier", 1) >= 1]
    switches = nx.Graph(g.subgraph(net).edges)
    switches.remove_edges_from([tuple(e) for e in down])
    assert down and set(switches.nodes) == set(net)
    for target in net:
        assert c.router._switch_dist(target) == nx.single_source_shortest_path_length(switches, target)


def test_egress_class_choice_is_the_four_criteria_min() -> None:
    topo = load_topology(ROOT / "topologies/h100-rail-clos-16n-4to1.yaml")
    c = Cluster(topo.graph, topo.gpu)
    r, nodes = c.router, c.graph.nodes
    leaves = sorted({r._switch_of(e) for e in r._attach})
    for a in c.gpus[::5]:
        hops = r._domain_hops(a)
        for sb in leaves:
            dist = r._switch_dist(sb)
            for rail in (None, 0, 3):
                direct = min(
                    r._endpoints_of[r.domain_of(a)],
                    key=lambda n: (
                        r._best_switch(n, dist)[0],
                        rail is None or nodes[n].get("rail") != rail,
                        hops.get(n, 1 << 30),
                        str(n),
                    ),
                )
                assert r._pick_egress(a, sb, rail) == direct


def test_cables_priced_by_kind_are_priced_one_by_one() -> None:
    topo = load_topology(ROOT / "topologies/h100-rail-clos-16n-4to1.yaml")
    g, prices = topo.graph, cost.load_prices()
    one_by_one: Counter[tuple] = Counter()
    for u, v, e in g.edges(data=True):
        item = cost._cable_item(g.nodes[u], g.nodes[v], e, prices)
        if item is not None:
            one_by_one[item] += int(e.get("links", 1))
    items = cost.estimate_cost(g, prices)
    cables = items[items["category"] == "cables"]
    assert one_by_one and {(r.item, r.unit_usd, r.quantity) for r in cables.itertuples()} == {
        (i, usd, q) for (_, i, usd, _), q in one_by_one.items()
    }


def test_in_server_search_is_networkx_bidirectional_search() -> None:
    """`_bidirectional_path` returns the path networkx's bidirectional search returns,
    ties included, on random graphs with many shortest paths (and refuses a missing one)."""
    rng = random.Random(5)
    for trial in range(30):
        g = nx.gnm_random_graph(14, rng.randint(10, 40), seed=trial)
        adj = {n: list(g.adj[n]) for n in g}
        for a in g:
            for b in g:
                if a == b:
                    continue
                try:
                    want = nx.bidirectional_shortest_path(g, a, b)
                except nx.NetworkXNoPath:
                    with pytest.raises(SimulationError):
                        _bidirectional_path(adj, a, b)
                    continue
                assert _bidirectional_path(adj, a, b) == want


@pytest.mark.parametrize("name", ["h100-rail-clos-16n-4to1.yaml", "fat-tree-k8.yaml"])
def test_link_paths_and_latencies_are_those_of_node_paths(name: str) -> None:
    """A route joined from cached pieces (entry, exit, switch path) is the node path's links,
    and its latency the numpy sum over them, bit for bit."""
    topo = load_topology(ROOT / "topologies" / name)
    c = Cluster(topo.graph, topo.gpu)
    r, idx = c.router, c.links.index
    pairs = [(a, b) for a in c.gpus[::5] for b in c.gpus[::3]]
    for a, b in pairs:
        nodes = r.node_path(a, b)
        assert r.path(a, b).tolist() == [idx[(u, v)] for u, v in zip(nodes, nodes[1:], strict=False)]
        assert r.latency_s(a, b) == float(c.links.latency_s[r.path(a, b)].sum())
    assert [p.tolist() for p in r.paths(pairs[:50])] == [r.path(a, b).tolist() for a, b in pairs[:50]]
    assert r.max_latency_s(pairs[:50]) == max(r.latency_s(a, b) for a, b in pairs[:50])
