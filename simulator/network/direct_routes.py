"""Routes between GPUs of a direct network: GPU-to-GPU cables across servers, no switch between.

What is modelled: GPUs cabled to other GPUs by links of a scale-out medium (a torus, or a
few direct cables beside a switched fabric) reach each other over those cables, by a
shortest path among the GPUs so cabled, the path they take when the design has no NIC at
all. NICs and switches such a design also has (the frontend network that reaches storage)
are never a shortcut between two of them. Every other route, and a route between two
cabled GPUs that their cables (those up) do not join, follows the switched fabric
(`simulator.network.routing`).

What is simplified: one shortest path per pair, as networkx's breadth-first search finds it
(ties by the graph's order of nodes and edges), not dimension-order routing.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np

from simulator.errors import SimulationError
from simulator.network.graph import SCALE_UP_MEDIA
from simulator.network.links import LinkTable


class DirectRoutes:
    """Shortest paths among the GPUs cabled to other GPUs (`of` finds them)."""

    def __init__(self, g: nx.Graph, cabled: frozenset[str], up: Callable[[str, str], bool]) -> None:
        self.cabled = cabled
        self._view = nx.subgraph_view(g, filter_node=cabled.__contains__, filter_edge=up)
        self._part: dict[str, set[str]] = {}  # GPU -> the cabled GPUs its cables (up) reach

    @classmethod
    def of(cls, g: nx.Graph, links: LinkTable, up: Callable[[str, str], bool]) -> DirectRoutes | None:
        """The routes among `g`'s GPUs that have a scale-out link to another GPU, None if no
        GPU has one (read from the link table: both ends of a link into a GPU, of a medium
        that is not scale-up)."""
        both = links.into_gpu[0::2] & links.into_gpu[1::2]  # the two directions of each edge
        edges = [2 * i for i in np.flatnonzero(both).tolist() if links.medium[2 * i] not in SCALE_UP_MEDIA]
        if not edges:
            return None
        return cls(g, frozenset(n for i in edges for n in (links.src[i], links.dst[i])), up)

    def serves(self, a: str, b: str) -> bool:
        """Whether the route from `a` to `b` is one of these: both are cabled GPUs that their
        cables join."""
        if a not in self.cabled or b not in self.cabled:
            return False
        part = self._part.get(a)
        if part is None:
            part = nx.node_connected_component(self._view, a)
            for n in part:
                self._part[n] = part
        return b in part

    def path(self, a: str, b: str) -> list[str]:
        """Nodes of the shortest path from GPU `a` to GPU `b` among the cabled GPUs (`serves`)."""
        return shortest_path(self._view, a, b)


def gpu_traffic_graph(g: nx.Graph) -> nx.Graph:
    """The part of `g` that traffic between GPUs crosses: the GPUs and their links to each
    other when every GPU is cabled to others and the cables join them all (a torus, with or
    without a frontend network), all of `g` otherwise."""
    gpus = frozenset(n for n, k in g.nodes(data="kind") if k == "gpu")
    adj = g.adj
    cabled = {
        n for n in gpus if any(v in gpus and d.get("medium") not in SCALE_UP_MEDIA for v, d in adj[n].items())
    }
    if not gpus or cabled != gpus:
        return g
    view = nx.subgraph_view(g, filter_node=gpus.__contains__)
    return view if nx.is_connected(view) else g


def shortest_path(view: nx.Graph, a: str, b: str) -> list[str]:
    """Nodes of a shortest path from `a` to `b` in `view` (networkx's search).

    Raises:
        SimulationError: no path (links down or missing cables).
    """
    try:
        return nx.shortest_path(view, a, b)
    except nx.NetworkXNoPath:
        raise SimulationError(
            f"{a} cannot reach {b}: the fabric is cut (down links or missing cables)"
        ) from None
