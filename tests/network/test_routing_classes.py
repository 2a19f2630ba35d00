"""Route planning shortcuts give the routes of the plain definitions.

The router finds switch distances by a breadth-first search over index arrays, chooses a
source NIC per (server, destination switch, rail) class before the per-GPU tie-break, and
prices cables per distinct kind; each is checked here against the direct definition
(networkx distances, the four-criteria `min` over the server's NICs, one price per cable)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from simulator.network import cost
from simulator.network.cluster import Cluster
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
