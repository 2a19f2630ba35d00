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

from collections.abc import Callable, Mapping

import networkx as nx

from simulator.errors import SimulationError
from simulator.network.graph import SCALE_UP_MEDIA


class DirectRoutes:
    """Shortest paths over the GPU-to-GPU links of a direct network (`of` finds one)."""

    def __init__(self, g: nx.Graph, gpus: frozenset[str], up: Callable[[str, str], bool]) -> None:
        self.gpus = gpus
        self._view = nx.subgraph_view(g, filter_node=gpus.__contains__, filter_edge=up)

    @classmethod
    def of(
        cls, g: nx.Graph, kind: Mapping[str, object], up: Callable[[str, str], bool]
    ) -> DirectRoutes | None:
        """The routes of `g`'s GPUs if some GPU has a scale-out link to another GPU, else None."""
        gpus = frozenset(n for n, k in kind.items() if k == "gpu")
        return cls(g, gpus, up) if _cabled(g, gpus) else None

    def serves(self, a: str, b: str) -> bool:
        """Whether the route from `a` to `b` is one of these (both are GPUs)."""
        return a in self.gpus and b in self.gpus

    def path(self, a: str, b: str) -> list[str]:
        """Nodes of the shortest path from GPU `a` to GPU `b` over GPU-to-GPU links
        (`SimulationError` if there is none)."""
        return shortest_path(self._view, a, b)


def _cabled(g: nx.Graph, gpus: frozenset[str]) -> bool:
    """Whether some GPU has a link of a scale-out medium to another GPU."""
    return any(u in gpus and v in gpus and m not in SCALE_UP_MEDIA for u, v, m in g.edges(data="medium"))


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
