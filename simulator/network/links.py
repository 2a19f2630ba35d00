"""Directed links of a topology graph, as arrays.

What is modelled: every undirected edge of the graph (a full-duplex link) is two directed
links, u->v then v->u, in the graph's edge order, each with the edge's bandwidth per
direction, latency, medium and tier (the highest tier of its two ends; -1 for links
between non-switch nodes).

What is simplified: nothing; this is the table the router and the fabric index.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from simulator.network.graph import edge_list


class LinkTable:
    """Directed links of a graph as arrays (SI units), with a (u, v) -> index map."""

    def __init__(self, g: nx.Graph) -> None:
        data = dict(g.nodes(data=True))
        tier_of = {n: _tier(d) for n, d in data.items()}
        edges = edge_list(g)
        # both directions of each edge, u->v then v->u
        src = [x for u, v, _ in edges for x in (u, v)]
        dst = [x for u, v, _ in edges for x in (v, u)]
        self.src = src
        self.dst = dst
        self.capacity_bytes_per_s = np.repeat(
            np.asarray([float(d["bandwidth_bytes_per_s"]) for _, _, d in edges], dtype=float), 2
        )
        self.latency_s = np.repeat(
            np.asarray([float(d.get("latency_s", 0.0)) for _, _, d in edges], dtype=float), 2
        )
        self.medium: list[str] = [m for _, _, d in edges for m in (d["medium"], d["medium"])]
        tiers = [max(tier_of[u], tier_of[v]) for u, v, _ in edges]
        self.index: dict[tuple[str, str], int] = dict(
            zip(zip(src, dst, strict=True), range(len(src)), strict=True)
        )
        self.tier = np.repeat(np.asarray(tiers, dtype=np.int16), 2)
        # links that end at a GPU: a route using one before its last hop is forwarded
        # through that GPU's scale-up domain (NCCL's PXN)
        gpus = {n for n, d in data.items() if d.get("kind") == "gpu"}
        self.into_gpu = np.asarray([b in gpus for b in dst], dtype=bool)

    def __len__(self) -> int:
        return len(self.src)

    def name(self, i: int) -> str:
        return f"{self.src[i]}->{self.dst[i]}"


def _tier(d: dict[str, Any]) -> int:
    if d.get("kind") == "switch":
        return int(d.get("tier", 1))
    return -1
