"""The graph of network switches, as the router searches it: hop distances and next hops.

What is modelled: the network switches (tier >= 1) and the up links between them; the hop
distance from every switch to a target switch (a breadth-first search from the target, one
level at a time) and, at a switch, the neighbours one hop nearer the target, in adjacency
order (the candidates an ECMP hash picks from).

What is simplified: nothing; this is bookkeeping. Switches are numbered in name order and
each one's neighbours are sorted by name. The search runs over the rows of a dense boolean
adjacency matrix when the graph has at most `DENSE_SWITCHES` switches (a few numpy calls
per level), otherwise over index arrays (CSR); both give the same distances.
"""

from __future__ import annotations

import numpy as np

#: switch graphs of at most this many switches are also kept as a dense matrix (4 MiB)
DENSE_SWITCHES = 2048


class SwitchGraph:
    """Hop distances between network switches, cached per target switch.

    Args:
        adj: every switch's neighbouring switches (up links only), sorted.
    """

    def __init__(self, adj: dict[str, list[str]]) -> None:
        self.adj = adj
        self.names = sorted(adj, key=str)
        index = {s: i for i, s in enumerate(self.names)}
        self.index = index
        lengths = [len(adj[s]) for s in self.names]
        self.indptr = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
        self.indices = np.fromiter(
            (index[t] for s in self.names for t in adj[s]), dtype=np.int64, count=sum(lengths)
        )
        n = len(self.names)
        self.matrix: np.ndarray | None = None
        if n <= DENSE_SWITCHES:
            self.matrix = np.zeros((n, n), dtype=bool)
            self.matrix[np.repeat(np.arange(n), lengths), self.indices] = True
        self.dist_arrays: dict[str, np.ndarray] = {}  # target -> hops by switch index (-1: unreachable)
        self.dist_lists: dict[str, list[int]] = {}  # the same as lists

    def dist_list(self, target: str) -> list[int]:
        """Hops from every switch to `target` by switch index, -1 where it cannot be reached
        (cached)."""
        dl = self.dist_lists.get(target)
        if dl is None:
            dist = np.full(len(self.names), -1, dtype=np.int64)
            frontier = np.array([self.index[target]], dtype=np.int64)
            dist[frontier] = 0
            if self.matrix is not None:
                _search_dense(self.matrix, dist, frontier)
            else:
                _search_sparse(self.indptr, self.indices, dist, frontier)
            self.dist_arrays[target] = dist
            dl = self.dist_lists[target] = dist.tolist()
        return dl

    def next_switches(self, u: str, t: str) -> list[str]:
        """The neighbours of switch `u` one hop nearer switch `t`, in adjacency order."""
        dl = self.dist_list(t)
        ui = self.index[u]
        nb = self.indices[self.indptr[ui] : self.indptr[ui + 1]]
        names = self.names
        return [names[i] for i in nb[self.dist_arrays[t][nb] == dl[ui] - 1].tolist()]


def _search_dense(adj: np.ndarray, dist: np.ndarray, frontier: np.ndarray) -> None:
    """Fill `dist` (-1: not reached yet) level by level from `frontier`, over the rows of
    the dense adjacency matrix `adj`."""
    level = 0
    while frontier.size:
        level += 1
        reach = adj[frontier].any(axis=0)
        reach &= dist < 0
        frontier = np.flatnonzero(reach)
        dist[frontier] = level


def _search_sparse(indptr: np.ndarray, indices: np.ndarray, dist: np.ndarray, frontier: np.ndarray) -> None:
    """`_search_dense` over the CSR index arrays of the graph."""
    level = 0
    while frontier.size:
        level += 1
        starts, counts = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        total = int(counts.sum())
        if total == 0:
            break
        offsets = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        nb = indices[offsets + np.arange(total)]
        new = nb[dist[nb] < 0]
        if not new.size:
            break
        dist[new] = level
        frontier = np.flatnonzero(dist == level)  # the new level, each switch once
