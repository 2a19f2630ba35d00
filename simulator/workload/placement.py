"""Where the ranks of a job run, and which of them are simulated one by one.

Rank placement: rank r runs on the r-th GPU in server-major order (servers in natural
order of their names, n2 before n10, then local rank). The layout's `placement` order puts
tensor-parallel peers on consecutive ranks by default (tp innermost), so they share a
server.

Representatives (`fidelity.representatives`, default true): only one rank per (pipeline
stage, cp position, ep position) of one data-parallel replica at tensor rank 0 is
simulated; its `weight` says it stands for tp·dp/ep ranks. Every collective carries
`mirrors`: the same collective of the ranks it stands for, so their traffic loads the
fabric. Mirrors whose traffic stays inside one server holding no simulated rank are left
out (exact when scale-up links are per GPU, as NVSwitch and full meshes are: disjoint
groups share no link, and scale-out traffic does not use them). With `mirrors: leaf` the
mirrors of non-DP collectives (PP, EP, CP, TP across servers) are kept only when they touch
a server in a leaf group (the servers sharing tier-1 switches) of the simulated group's
servers; DP mirrors (the other tensor ranks, which share the NICs) are always kept.
`auto` is `all` up to 4,096 GPUs, else `leaf`.

Simplifies: servers are taken to be alike (the GPUs per server are counted on the first);
the representative of a group stands for ranks whose work is identical, so load imbalance
between data-parallel replicas or tensor ranks is not modeled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from simulator.network.graph import server_major
from simulator.workload.layout import LayoutSpec, RankGrid

#: `mirrors: auto` keeps every mirror up to this many GPUs, then caps them to leaf groups.
AUTO_MIRROR_LIMIT_GPUS = 4096


def server_major_gpus(g: nx.Graph, gpus: Iterable[str]) -> list[str]:
    """GPUs by server (natural order of server names: n2 before n10), then local rank."""
    return server_major(g, gpus)


def gpus_per_server(g: nx.Graph, gpus: list[str]) -> int:
    """GPUs in the server of the first GPU (servers are alike in generated topologies)."""
    first = g.nodes[gpus[0]].get("node")
    return sum(1 for n in gpus if g.nodes[n].get("node") == first)


class _Leaves:
    """Leaf group of each server: the tier-1 switches its NICs (or GPUs) attach to."""

    def __init__(self, g: nx.Graph) -> None:
        self.g = g
        self._by_server: dict[str, frozenset[str]] = {}
        data = dict(g.nodes(data=True))
        for n, nbrs in g.adjacency():
            d = data[n]
            if d.get("kind") not in ("nic", "gpu") or "node" not in d:
                continue
            sw = {x for x in nbrs if data[x].get("kind") == "switch" and int(data[x].get("tier", 1)) == 1}
            if sw:
                key = str(d["node"])
                self._by_server[key] = self._by_server.get(key, frozenset()) | sw

    def of(self, server: str) -> frozenset[str]:
        return self._by_server.get(server, frozenset())


@dataclass
class CollectiveGroup:
    """A collective instance: its simulated members, the whole group, and its mirrors."""

    ranks: tuple[int, ...]
    group: tuple[int, ...]
    mirrors: tuple[tuple[int, ...], ...] = ()


class SimulatedRanks:
    """The ranks simulated one by one, what each stands for, and their collective groups.

    Args:
        layout: the parallel layout.
        rank_gpus: GPU node name of every rank (rank r on `rank_gpus[r]`).
        graph: the topology graph (servers and leaf switches of the GPUs).
        representatives: simulate one rank per (stage, cp, ep position); false: every rank.
        mirrors: which mirrors of non-DP collectives are kept: all, leaf or auto.
    """

    def __init__(
        self,
        layout: LayoutSpec,
        rank_gpus: list[str],
        graph: nx.Graph,
        *,
        representatives: bool,
        mirrors: str,
    ) -> None:
        self.layout = layout
        self.g = graph
        self.representatives = representatives
        self.grid = RankGrid(layout)
        self.world = layout.world_size
        self.coords = list(self.grid.all_coords)
        if representatives:
            reps: dict[tuple[int, int, int], int] = {}  # one `rank` call per (ep, pp, cp)
            self.rep = []
            for c in self.coords:
                key = (c.ep, c.pp, c.cp)
                r = reps.get(key)
                if r is None:
                    r = reps[key] = self.grid.rank(dp=c.ep, pp=c.pp, tp=0, cp=c.cp)
                self.rep.append(r)
        else:
            self.rep = list(range(self.world))
        self.simulated = sorted(set(self.rep))
        self.sim_set = set(self.simulated)
        self.weight = {r: 0 for r in self.simulated}
        for r in self.rep:
            self.weight[r] += 1
        scope = mirrors
        if scope == "auto":
            scope = "all" if self.world <= AUTO_MIRROR_LIMIT_GPUS else "leaf"
        self.scope = scope
        self.server = [str(graph.nodes[gname].get("node", gname)) for gname in rank_gpus]
        self.sim_servers = {self.server[r] for r in self.simulated}
        self._leaves: _Leaves | None = None
        self._leaf_hits: dict[tuple[int, ...], tuple[set[str], dict[str, bool]]] = {}
        self._groups: dict[str, dict[int, CollectiveGroup]] = {}
        self._p2p: dict[tuple[int, int, str], CollectiveGroup] = {}
        self.stage_ranks = {
            s: [r for r in self.simulated if self.coords[r].pp == s] for s in range(layout.pp)
        }

    def role(self, rank: int) -> str:
        """Label of `rank` for results: its pipeline stage, and cp / ep position when used."""
        c = self.coords[rank]
        parts = [f"pp{c.pp}"]
        if self.layout.cp > 1:
            parts.append(f"cp{c.cp}")
        if self.layout.ep > 1:
            parts.append(f"ep{c.ep}")
        return " ".join(parts)

    def leaves(self) -> _Leaves:
        """Leaf groups of the servers (computed on first use)."""
        if self._leaves is None:
            self._leaves = _Leaves(self.g)
        return self._leaves

    def _keep_mirror(self, mirror: tuple[int, ...], sim_group: tuple[int, ...], kind: str) -> bool:
        server = self.server
        servers = {server[r] for r in mirror}
        if len(servers) == 1 and servers.isdisjoint(self.sim_servers):
            return False  # traffic entirely inside a server no simulated rank uses
        if self.scope == "leaf" and kind not in ("dp_cp", "edp"):
            lv = self.leaves()
            got = self._leaf_hits.get(sim_group)
            if got is None:
                mine = {x for r in sim_group for x in lv.of(server[r])}
                got = self._leaf_hits[sim_group] = (mine, {})
            mine, hits = got  # hits: server -> does it share a leaf switch with `mine`
            if not mine:
                return True
            for s in servers:
                h = hits.get(s)
                if h is None:
                    h = hits[s] = not lv.of(s).isdisjoint(mine)
                if h:
                    return True
            return False
        return True

    def groups_of(self, kind: str) -> dict[int, CollectiveGroup]:
        """Simulated rank -> the collective instance of `kind` it takes part in."""
        got = self._groups.get(kind)
        if got is not None:
            return got
        by_image: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for grp in self.grid.groups(kind):
            g = tuple(grp)
            image = tuple(sorted({self.rep[r] for r in g}))
            by_image.setdefault(image, []).append(g)
        out: dict[int, CollectiveGroup] = {}
        for gs in by_image.values():
            sims = [g for g in gs if any(r in self.sim_set for r in g)]
            for g in sims:
                mirrors: tuple[tuple[int, ...], ...] = ()
                if len(sims) == 1:
                    mirrors = tuple(x for x in gs if x is not g and self._keep_mirror(x, g, kind))
                inst = CollectiveGroup(tuple(r for r in g if r in self.sim_set), g, mirrors)
                for r in inst.ranks:
                    out[r] = inst
        self._groups[kind] = out
        return out

    def p2p_group(self, src: int, dst: int, kind: str = "pp") -> CollectiveGroup:
        """The pair src, dst (simulated ranks of two pipeline stages) and its mirrors: the
        pairs at the other dp and tp coordinates it stands for (cached: the same for every
        micro-batch). `kind` decides which mirrors are kept (`_keep_mirror`): "pp" for a
        pipeline transfer, "dp_cp" for a gradient collective (always kept)."""
        got = self._p2p.get((src, dst, kind))
        if got is None:
            got = self._p2p[(src, dst, kind)] = self._p2p_group(src, dst, kind)
        return got

    def _p2p_group(self, src: int, dst: int, kind: str) -> CollectiveGroup:
        if not self.representatives:
            return CollectiveGroup((src, dst), (src, dst))
        cs, cd = self.coords[src], self.coords[dst]
        L = self.layout
        mirrors = []
        s_tp = self.grid.strides["tp"]  # a rank is linear in its tp coordinate
        for edp in range(L.edp):
            dp = cs.ep + L.ep * edp
            a0 = self.grid.rank(dp=dp, pp=cs.pp, tp=0, cp=cs.cp)
            b0 = self.grid.rank(dp=dp, pp=cd.pp, tp=0, cp=cd.cp)
            for tp in range(L.tp):
                if edp == 0 and tp == 0:
                    continue
                pair = (a0 + tp * s_tp, b0 + tp * s_tp)
                if self._keep_mirror(pair, (src, dst), kind):
                    mirrors.append(pair)
        return CollectiveGroup((src, dst), (src, dst), tuple(mirrors))
