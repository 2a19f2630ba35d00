"""Switch distances and next hops: the dense-matrix search, the index-array search and
networkx agree.

`SwitchGraph` searches over the rows of a dense adjacency matrix when the switch graph is
small and over CSR index arrays otherwise; both must give networkx's breadth-first
distances (-1 where the target cannot be reached) and the same next-hop candidates, and a
router on either gives the same routes, link for link."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from simulator.network import switch_graph
from simulator.network.cluster import Cluster
from simulator.network.switch_graph import SwitchGraph
from simulator.network.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]


def _random_graph(seed: int) -> nx.Graph:
    """A sparse random graph of named switches, with isolated parts and lone switches."""
    rng = random.Random(seed)
    n = rng.randint(2, 60)
    g = nx.gnp_random_graph(n, rng.uniform(0.02, 0.2), seed=seed)
    return nx.relabel_nodes(g, {i: f"sw{i}" for i in g})


def _adjacency(g: nx.Graph) -> dict[str, list[str]]:
    return {s: sorted(g.adj[s]) for s in g}


@pytest.mark.parametrize("seed", range(12))
def test_dense_and_sparse_searches_are_networkx_distances(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    g = _random_graph(seed)
    dense = SwitchGraph(_adjacency(g))
    monkeypatch.setattr(switch_graph, "DENSE_SWITCHES", 0)
    sparse = SwitchGraph(_adjacency(g))
    assert dense.matrix is not None and sparse.matrix is None
    for t in dense.names:
        expected = nx.single_source_shortest_path_length(g, t)
        want = [expected.get(s, -1) for s in dense.names]
        assert dense.dist_list(t) == want
        assert sparse.dist_list(t) == want
        assert np.array_equal(dense.dist_arrays[t], sparse.dist_arrays[t])
        for u in dense.names:
            if u != t and want[dense.index[u]] > 0:
                nearer = [v for v in dense.adj[u] if expected.get(v) == expected[u] - 1]
                assert dense.next_switches(u, t) == nearer == sparse.next_switches(u, t)


def test_routes_are_the_same_on_either_search(monkeypatch: pytest.MonkeyPatch) -> None:
    topo = load_topology(ROOT / "topologies/fat-tree-k8.yaml")
    g = topo.graph
    sw = [(u, v) for u, v in g.edges if g.nodes[u]["kind"] == "switch" and g.nodes[v]["kind"] == "switch"]
    cut = nx.Graph(sw)
    down = []  # some switch links down (unequal next-hop lists), the switches still connected
    for u, v in sw[::5]:
        cut.remove_edge(u, v)
        if nx.is_connected(cut):
            down.append((u, v))
        else:
            cut.add_edge(u, v)
    assert down
    dense = Cluster(g, topo.gpu, down=down)
    monkeypatch.setattr(switch_graph, "DENSE_SWITCHES", 0)
    sparse = Cluster(g, topo.gpu, down=down)
    assert dense.router._switches.matrix is not None and sparse.router._switches.matrix is None
    gpus = dense.gpus
    pairs = [(a, b) for a in gpus[::3] for b in gpus[1::5] if a != b]
    for a, b in pairs:
        assert np.array_equal(dense.router.path(a, b), sparse.router.path(a, b))
        assert dense.router.node_path(a, b) == sparse.router.node_path(a, b)
