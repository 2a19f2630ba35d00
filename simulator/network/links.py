"""Directed links of a topology graph, as arrays.

What is modelled: every undirected edge of the graph (a full-duplex link) is two directed
links, u->v then v->u, in the graph's edge order, each with the edge's bandwidth per
direction, latency, medium and tier (the highest tier of its two ends; -1 for links
between non-switch nodes).

What is simplified: nothing; this is the table the router and the fabric index. It is
built a column at a time (`map` over the edges), not a Python expression per link.
"""

from __future__ import annotations

from itertools import count, repeat
from operator import itemgetter
from typing import Any

import networkx as nx
import numpy as np

from simulator.network.graph import edge_list


class LinkTable:
    """Directed links of a graph as arrays (SI units), with a (u, v) -> index map."""

    def __init__(self, g: nx.Graph) -> None:
        data = dict(g.nodes(data=True))
        edges = edge_list(g)
        us, vs = list(map(_U, edges)), list(map(_V, edges))
        attrs = list(map(_ATTRS, edges))
        # both directions of each edge, u->v then v->u
        self.src = _interleave(us, vs)
        self.dst = _interleave(vs, us)
        self.capacity_bytes_per_s = np.repeat(np.asarray(list(map(_BANDWIDTH, attrs)), dtype=float), 2)
        self.latency_s = np.repeat(
            np.asarray(list(map(dict.get, attrs, repeat("latency_s"), repeat(0.0))), dtype=float), 2
        )
        media = list(map(_MEDIUM, attrs))
        self.medium: list[str] = _interleave(media, media)
        keys = zip(self.src, self.dst, strict=True)
        self.index: dict[tuple[str, str], int] = dict(zip(keys, count()))  # noqa: B905 (count is endless)
        tier_of = {n: _tier(d) for n, d in data.items()}
        tiers = np.maximum(_tiers(tier_of, us), _tiers(tier_of, vs))
        self.tier = np.repeat(tiers.astype(np.int16), 2)
        # links that end at a GPU: a route using one before its last hop is forwarded
        # through that GPU's scale-up domain (NCCL's PXN)
        gpus = {n for n, d in data.items() if d.get("kind") == "gpu"}
        self.into_gpu = np.fromiter(map(gpus.__contains__, self.dst), dtype=bool, count=len(self.dst))

    def __len__(self) -> int:
        return len(self.src)

    def name(self, i: int) -> str:
        return f"{self.src[i]}->{self.dst[i]}"


_U, _V, _ATTRS = itemgetter(0), itemgetter(1), itemgetter(2)
_BANDWIDTH, _MEDIUM = itemgetter("bandwidth_bytes_per_s"), itemgetter("medium")


def _interleave(a: list[str], b: list[str]) -> list[str]:
    """a[0], b[0], a[1], b[1], ..."""
    out = [""] * (2 * len(a))
    out[0::2] = a
    out[1::2] = b
    return out


def _tiers(tier_of: dict[str, int], names: list[str]) -> np.ndarray:
    return np.fromiter(map(tier_of.__getitem__, names), dtype=np.int64, count=len(names))


def _tier(d: dict[str, Any]) -> int:
    if d.get("kind") == "switch":
        return int(d.get("tier", 1))
    return -1
