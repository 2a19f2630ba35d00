"""Where a job's GPUs go on a shared cluster: placement policies over servers and leaf groups.

What is modelled: the cluster is a list of servers (GPUs grouped by their `node`
attribute, in natural order) and each server belongs to a *leaf group*, the set of tier-1
switches its NICs (or GPUs) attach to. Servers of one leaf group reach each other without
crossing a spine uplink; a job inside one group shares no uplink with anyone. Policies:

* `packed`: the first free GPUs in server order (fill servers, then the next leaf group).
* `leaf_aligned`: the fullest leaf group that still holds the whole job (best fit), so the
  job stays under its leaves; if none does, the fewest groups, emptiest first. The
  topology-aware scheduler uses it to minimise shared uplinks.
* `spread`: servers taken round-robin over the leaf groups (the worst case for uplinks).
* `random`: free servers in an order drawn from the policy's seed.
* `explicit`: a list of GPU names.

Within a server a job takes the free GPUs in local-rank order. A placement is a list of
GPU names in server-major order; rank r of the job runs on its r-th GPU.

What is simplified: servers are taken whole where they can be; a job smaller than a server
shares it with the next job; leaf groups are compared by free GPU count only (not by the
uplink load the jobs already in them make).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np

from simulator.network.graph import gpus as graph_gpus
from simulator.network.graph import natural_key

POLICIES = ("packed", "leaf_aligned", "spread", "random", "explicit")


def _leaf_key(g: nx.Graph, gpu_names: list[str]) -> frozenset[str]:
    """The tier-1 switches that the NICs (or the GPUs themselves) of one server attach to."""
    out: set[str] = set()
    for gname in gpu_names:
        ports = [gname, *(x for x in g.neighbors(gname) if g.nodes[x].get("kind") == "nic")]
        for p in ports:
            for x in g.neighbors(p):
                d = g.nodes[x]
                if d.get("kind") == "switch" and int(d.get("tier", 1)) == 1:
                    out.add(str(x))
    return frozenset(out)


@dataclass
class ClusterLayout:
    """Servers, their GPUs and their leaf groups (see the module docstring).

    Attributes:
        servers: server names in natural order.
        gpus: per server, its GPU names in local-rank order.
        group: per server, the index of its leaf group (groups numbered by first server).
        n_groups: number of leaf groups.
    """

    servers: list[str]
    gpus: list[list[str]]
    group: np.ndarray
    n_groups: int

    @classmethod
    def of(cls, g: nx.Graph) -> ClusterLayout:
        """The layout of a topology graph."""
        by_server: dict[str, list[str]] = {}
        for gname in graph_gpus(g):
            by_server.setdefault(str(g.nodes[gname].get("node", gname)), []).append(gname)
        servers = sorted(by_server, key=natural_key)
        keys: dict[frozenset[str], int] = {}
        group = np.array([keys.setdefault(_leaf_key(g, by_server[s]), len(keys)) for s in servers])
        return cls(servers, [by_server[s] for s in servers], group, len(keys))

    @cached_property
    def gpus_per_server(self) -> np.ndarray:
        """GPUs of each server (computed once: a scheduler asks at every placement)."""
        return np.array([len(x) for x in self.gpus])

    @cached_property
    def group_members(self) -> list[np.ndarray]:
        """Per leaf group, its servers in order (computed once)."""
        return [np.flatnonzero(self.group == grp) for grp in range(self.n_groups)]

    def server_of(self) -> dict[str, int]:
        """Server index of every GPU name."""
        return {gname: i for i, names in enumerate(self.gpus) for gname in names}

    def groups_of(self, gpu_names: Sequence[str]) -> set[int]:
        """The leaf groups a set of GPUs touches."""
        where = self.server_of()
        return {int(self.group[where[x]]) for x in gpu_names}


def _take(order: Sequence[int], free: np.ndarray, n_gpus: int) -> list[tuple[int, int]] | None:
    """Take GPUs from the servers in `order`, each as far as it has free GPUs."""
    full = [i for i in order if free[i] > 0]
    need = n_gpus
    out: list[tuple[int, int]] = []
    for i in full:
        if need <= 0:
            break
        k = int(min(free[i], need))
        out.append((i, k))
        need -= k
    return out if need <= 0 else None


def _packed(layout: ClusterLayout, free: np.ndarray, n_gpus: int) -> list[tuple[int, int]] | None:
    """Whole free servers for the whole-server part of the job, the rest on the partly free
    server it fills best (fewest free GPUs that still hold it), in server order; when there
    are not enough whole servers, servers in order as far as each has free GPUs."""
    size = layout.gpus_per_server
    out: list[tuple[int, int]] = []
    rest = n_gpus
    smallest = int(size.min()) if len(size) else 0
    for i in map(int, np.flatnonzero(free == size)):  # whole free servers, in order, that fit
        if rest < smallest:
            break
        if size[i] <= rest:
            out.append((i, int(size[i])))
            rest -= int(size[i])
    if len(size) and rest >= int(size.max()):  # not enough whole servers
        return _take(range(len(free)), free, n_gpus)
    if rest:
        used = {i for i, _ in out}
        fits = [i for i in range(len(free)) if i not in used and free[i] >= rest]
        if not fits:
            return _take(range(len(free)), free, n_gpus)
        out.append((min(fits, key=lambda i: (int(free[i]), i)), rest))
    return sorted(out)


def _leaf_aligned(layout: ClusterLayout, free: np.ndarray, n_gpus: int) -> list[int]:
    free_per_group = np.bincount(layout.group, weights=free, minlength=layout.n_groups)
    fits = np.flatnonzero(free_per_group >= n_gpus)
    if len(fits):
        best = int(fits[int(np.argmin(free_per_group[fits]))])
        groups = [best]
    else:
        groups = [int(x) for x in np.argsort(-free_per_group, kind="stable")]
    order: list[int] = []
    size = layout.gpus_per_server
    for grp in groups:
        members = layout.group_members[grp]
        # whole free servers before partly used ones, so the job spans as few servers as it can
        order += members[np.argsort(free[members] < size[members], kind="stable")].tolist()
    return order


def _spread(layout: ClusterLayout, free: np.ndarray) -> list[int]:
    per_group = [list(np.flatnonzero((layout.group == grp) & (free > 0))) for grp in range(layout.n_groups)]
    order: list[int] = []
    depth = max((len(x) for x in per_group), default=0)
    for k in range(depth):
        order += [int(x[k]) for x in per_group if k < len(x)]
    return order


def place_counts(
    layout: ClusterLayout, policy: str, n_gpus: int, free: np.ndarray, seed: int = 0
) -> list[tuple[int, int]] | None:
    """GPUs per server for a job of `n_gpus` under `policy` (not `explicit`), or None if it does
    not fit in the `free` GPUs per server.

    Raises:
        ValueError: an unknown policy.
    """
    if n_gpus > int(free.sum()):
        return None
    n_servers = len(layout.servers)
    if policy == "packed":
        return _packed(layout, free, n_gpus)
    order: Sequence[int]
    if policy == "leaf_aligned":
        order = _leaf_aligned(layout, free, n_gpus)
    elif policy == "spread":
        order = _spread(layout, free)
    elif policy == "random":
        order = [int(x) for x in np.random.default_rng(seed).permutation(n_servers)]
    else:
        raise ValueError(f"unknown placement policy {policy!r}; expected one of {POLICIES[:-1]}")
    return _take(order, free, n_gpus)


def place(
    layout: ClusterLayout, policy: str, n_gpus: int, taken: set[str], seed: int = 0
) -> list[str] | None:
    """GPU names for a job of `n_gpus` under `policy`, avoiding `taken` GPUs, in server-major
    order; None if the job does not fit."""
    free_names = [[x for x in names if x not in taken] for names in layout.gpus]
    free = np.array([len(x) for x in free_names])
    counts = place_counts(layout, policy, n_gpus, free, seed)
    if counts is None:
        return None
    chosen = sorted(counts)
    return [x for i, k in chosen for x in free_names[i][:k]]


def split_group(gpu_names: Sequence[str], server: dict[str, int], size: int) -> int | None:
    """The first rank whose block of `size` consecutive ranks spans two servers, or None."""
    if size <= 1:
        return None
    for start in range(0, len(gpu_names) - size + 1, size):
        block = gpu_names[start : start + size]
        if len({server[x] for x in block}) > 1:
            return start
    return None
