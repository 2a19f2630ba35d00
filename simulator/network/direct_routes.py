"""Routes between GPUs of a direct network: GPU-to-GPU links across servers, no switch between.

What is modelled: in a design whose GPUs are cabled to GPUs of other servers (a torus), the
GPUs' traffic to each other takes a shortest path over those GPU-to-GPU links alone, the
path it takes when the design has no NIC at all. NICs and switches such a design also has
(the frontend network that reaches storage) carry only traffic to or from a node that is
not a GPU, such as a checkpoint's writes; they are never a shortcut between two GPUs.

What is simplified: one shortest path per pair, as networkx's breadth-first search finds it
(ties by the graph's order of nodes and edges), not dimension-order routing; links that are
down are avoided.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np

from simulator.errors import SimulationError
from simulator.network.graph import SCALE_UP_MEDIA
from simulator.network.links import LinkTable


class DirectRoutes:
    """Shortest paths over the GPU-to-GPU links of a direct network (`of` finds one)."""

    def __init__(self, g: nx.Graph, gpus: frozenset[str], up: Callable[[str, str], bool]) -> None:
        self.gpus = gpus
        self._view = nx.subgraph_view(g, filter_node=gpus.__contains__, filter_edge=up)

    @classmethod
    def of(cls, g: nx.Graph, links: LinkTable, up: Callable[[str, str], bool]) -> DirectRoutes | None:
        """The routes of `g`'s GPUs if some GPU has a scale-out link to another GPU, else None
        (read from the link table: both ends of a link into a GPU, of a medium not scale-up)."""
        both = links.into_gpu[0::2] & links.into_gpu[1::2]  # the two directions of each edge
        if not any(links.medium[2 * i] not in SCALE_UP_MEDIA for i in np.flatnonzero(both).tolist()):
            return None
        return cls(g, frozenset(n for n, k in g.nodes(data="kind") if k == "gpu"), up)

    def serves(self, a: str, b: str) -> bool:
        """Whether the route from `a` to `b` is one of these (both are GPUs)."""
        return a in self.gpus and b in self.gpus

    def path(self, a: str, b: str) -> list[str]:
        """Nodes of the shortest path from GPU `a` to GPU `b` over GPU-to-GPU links
        (`SimulationError` if there is none)."""
        return shortest_path(self._view, a, b)


def _cabled(g: nx.Graph, gpus: frozenset[str]) -> bool:
    """Whether some GPU has a link of a scale-out medium to another GPU."""
    adj = g.adj
    return any(v in gpus and d.get("medium") not in SCALE_UP_MEDIA for n in gpus for v, d in adj[n].items())


def gpu_traffic_graph(g: nx.Graph) -> nx.Graph:
    """The part of `g` that traffic between GPUs crosses: the GPUs and their links to each
    other in a direct network, all of `g` otherwise."""
    gpus = frozenset(n for n, k in g.nodes(data="kind") if k == "gpu")
    return nx.subgraph_view(g, filter_node=gpus.__contains__) if _cabled(g, gpus) else g


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
