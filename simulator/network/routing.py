"""Routes between endpoints: scale-up domains, rail-aware egress, deterministic ECMP.

Model of how traffic finds its way (what NCCL and an ECMP fabric do, simplified):

* GPUs of one server (a *scale-up domain*: nodes joined by NVLink, xGMI or PCIe edges,
  switches of tier 0 included) reach each other by the shortest path inside the domain.
* Traffic to another domain leaves through a NIC of the source domain. The NIC is the one
  whose switch is fewest switch hops from the destination's NIC; among those, one on the
  destination's rail (NCCL's PXN: move data over NVLink to the GPU on the right rail),
  then the one nearest the source. It enters the destination domain at the destination
  GPU's nearest NIC.
* Between switches, packets take a shortest path; where several exist, the next hop is
  chosen by a stable hash of (source, destination, hop), as flow-hashed ECMP does. The
  hash is CRC-32, so routes are identical across runs and processes.
* Graphs with no NICs fall back to a plain shortest path, cached per pair; GPUs cabled to
  GPUs of other servers (a torus) reach each other over those cables alone (`direct_routes`).

Routes avoid links marked down; where no NIC of the source server reaches the
destination's entry switch (rail-only, that rail's NIC link down), the route is a plain
shortest path over the links up (NVLink to another rail and back); a node that can no
longer be reached is a `SimulationError`. Links are directed: edge (u, v) is two links, u->v and v->u.

How it is computed (the routes are those of the definitions above, which `node_path`
follows step by step): switch distances by a breadth-first search per destination switch
(`simulator.network.switch_graph`); the first two NIC criteria once per (source
server, destination switch, rail) class, the distance inside the server per source GPU; the
entry NIC of a destination by a search that stops at the first level holding a NIC; paths
inside a server by networkx's bidirectional search written over plain adjacency lists
(same path, ties included). Servers that routing cannot tell apart share a *shape*
(`simulator.network.route_shapes`): a path inside a server, an entry NIC and an exit NIC
(per egress class, destination switch and rail) are decided once per shape on its first
server and mapped to the others by local index. A route is joined, as link indices, from
a piece per destination (entry switch to the GPU), a piece per (source GPU, entry switch,
entry rail) (the GPU to its first switch) and the switch path, the only part hashed per
GPU pair; its latency is summed once, as numpy sums it, and whether it is forwarded
through another GPU is noted with it. Every route, piece and next-hop list is cached.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterable, Sequence

import networkx as nx
import numpy as np

from simulator.errors import SimulationError
from simulator.network.direct_routes import DirectRoutes, shortest_path
from simulator.network.graph import SCALE_UP_MEDIA
from simulator.network.links import LinkTable
from simulator.network.route_cache import lookup as _lookup
from simulator.network.route_shapes import ServerShapes
from simulator.network.route_shapes import bidirectional_path as _bidirectional_path
from simulator.network.switch_graph import SwitchGraph


def _crc(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


class Router:
    """Computes and caches routes (as arrays of directed link indices)."""

    def __init__(self, g: nx.Graph, links: LinkTable, down: Iterable[tuple[str, str]] = ()) -> None:
        self.g = g
        self.links = links
        self.down = {frozenset(e) for e in down}
        self._paths: dict[tuple[str, str], np.ndarray] = {}
        self._latency: dict[tuple[str, str], float] = {}
        self._build()

    # -- structure -----------------------------------------------------------------
    def _up(self, u: str, v: str) -> bool:
        return not self.down or frozenset((u, v)) not in self.down

    def _build(self) -> None:
        g = self.g
        data = dict(g.nodes(data=True))
        kind = {n: d.get("kind") for n, d in data.items()}
        self._kind = kind
        # node attributes the route choices read, as plain dicts
        self._rail: dict[str, object] = {n: d.get("rail") for n, d in data.items()}
        self._local_rank: dict[str, object] = {n: d.get("local_rank") for n, d in data.items()}
        is_net_switch = {n for n, k in kind.items() if k == "switch" and int(data[n].get("tier", 1)) >= 1}
        self._net_switches = is_net_switch
        self._build_domains(is_net_switch)
        self._direct = DirectRoutes.of(g, self.links, self._up)  # GPU-to-GPU cables across servers
        # network endpoints: non-switch nodes with an up edge to a network switch
        self._attach: dict[str, list[str]] = {}
        up, down = self._up, self.down
        for n, nbrs in g.adjacency():
            if n in is_net_switch:
                continue
            sws = [s for s in nbrs if s in is_net_switch]
            if sws and down:
                sws = [s for s in sws if up(n, s)]
            if sws:
                self._attach[n] = sorted(sws)
        self._endpoints_of: dict[int, list[str]] = {}
        for n in sorted(self._attach, key=str):
            self._endpoints_of.setdefault(self._domain[n], []).append(n)
        # the switch graph (neighbours sorted for determinism): distances and next hops
        adj = g.adj
        self._switches = SwitchGraph(
            {s: sorted(t for t in adj[s] if t in is_net_switch and up(s, t)) for s in is_net_switch}
        )
        self._sw_names = self._switches.names
        self._sw_index = self._switches.index
        self._egress_best: dict[tuple[int, str, object], list[str]] = {}
        self._dist_cache: dict[str, dict[str, int]] = {}
        self._dist_arrays = self._switches.dist_arrays  # the same by switch index (-1: unreachable)
        self._next_hops: dict[tuple[str, str], list[str]] = {}
        self._next_links: dict[tuple[str, str], list[tuple[str, int]]] = {}  # the same, with links
        self._hops_in_domain: dict[str, dict[str, int]] = {}
        self._egress_cache: dict[tuple[str, str], str | None] = {}
        self._egress_class: dict[tuple[str, str, object], str | None] = {}
        self._ingress_cache: dict[str, str] = {}
        self._entry_switch: dict[str, str] = {}
        self._domain_paths: dict[tuple[str, str], list[str]] = {}
        self._domain_link_paths: dict[tuple[str, str], list[int]] = {}
        # per destination: (entry endpoint, its switch and rail, links from that switch to
        # it); per (source, entry switch, entry rail): (first switch, links to it)
        self._into: dict[str, tuple[str, str, object, list[int]]] = {}
        self._out_of: dict[tuple[str, str, object], tuple[str, list[int]]] = {}
        self._link_latency_s: list[float] = self.links.latency_s.tolist()
        self._into_gpu: set[int] = set(np.flatnonzero(self.links.into_gpu).tolist())
        self._forwarded: dict[tuple[str, str], bool] = {}
        self._reach: dict[str, set[str]] = {}
        # decisions inside a server, taken once per server shape (or egress class), by local index
        self._shapes = ServerShapes(
            self._dom_adj, self._domain, self._attach, self._endpoints_of, self._local_rank, self._rail,
            self.links.index,
        )  # fmt: skip
        self._shape_paths: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._dom_info: dict[int, tuple[int, list[int], list[str], int]] = {}  # domain -> `_place`
        self._places: dict[str, tuple[int, int, list[int], list[str], int]] = {}  # `_place`
        self._shape_ingress: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {}
        self._shape_egress: dict[tuple[int, int, str, object], tuple[int, str, int, tuple[int, ...]]] = {}

    def _build_domains(self, is_net_switch: set[str]) -> None:
        """Scale-up domains: the nodes that are not network switches, joined by up links of
        scale-up media. `_dom_adj` is their adjacency as plain lists, in the order a networkx
        graph built from the nodes and then the links (in the graph's order) would hold it;
        domains are numbered in the order of their smallest node name."""
        g, up, links = self.g, self._up, self.links
        adj: dict[str, list[str]] = {n: [] for n in g if n not in is_net_switch}
        # the graph's edges in order: the link table's u->v links (every other one)
        for u, v, medium in zip(links.src[::2], links.dst[::2], links.medium[::2], strict=True):
            if medium in SCALE_UP_MEDIA and u in adj and v in adj and (not self.down or up(u, v)):
                adj[u].append(v)
                if u != v:
                    adj[v].append(u)
        self._dom_adj = adj
        comps: list[list[str]] = []
        seen: set[str] = set()
        for n in adj:
            if n in seen:
                continue
            seen.add(n)
            comp, i = [n], 0
            while i < len(comp):
                for w in adj[comp[i]]:
                    if w not in seen:
                        seen.add(w)
                        comp.append(w)
                i += 1
            comps.append(comp)
        self._domain: dict[str, int] = {}
        for i, comp in enumerate(sorted(comps, key=lambda c: min(map(str, c)))):
            for n in comp:
                self._domain[n] = i

    # -- helpers -------------------------------------------------------------------
    def domain_of(self, n: str) -> int:
        return self._domain[n]

    def _switch_dist(self, target: str) -> dict[str, int]:
        """Hop distance to `target` from every network switch that can reach it (cached)."""
        d = self._dist_cache.get(target)
        if d is None:
            names = self._sw_names
            d = {names[i]: h for i, h in enumerate(self._dist_list(target)) if h >= 0}
            self._dist_cache[target] = d
        return d

    def _dist_list(self, target: str) -> list[int]:
        """`_switch_dist(target)` by switch index, -1 where `target` cannot be reached (cached)."""
        return self._switches.dist_list(target)

    def _hops_to(self, s: str, dl: list[int]) -> int:
        """Hops from network switch `s` by the distances `dl` (`_dist_list`); 1 << 30 if none."""
        h = dl[self._sw_index[s]]
        return h if h >= 0 else 1 << 30

    def _domain_hops(self, src: str) -> dict[str, int]:
        """Hop count from `src` to every node of its scale-up domain (cached)."""
        h = self._hops_in_domain.get(src)
        if h is None:
            h = {src: 0}
            q = deque([src])
            adj = self._dom_adj
            while q:
                u = q.popleft()
                du = h[u] + 1
                for v in adj[u]:
                    if v not in h:
                        h[v] = du
                        q.append(v)
            self._hops_in_domain[src] = h
        return h

    def _ingress(self, b: str) -> str | None:
        """The endpoint where traffic for `b` enters its domain (b itself, or its nearest NIC)."""
        e = self._ingress_cache.get(b)
        if e is None:
            if b in self._attach:
                e = b
            else:
                cands = self._endpoints_of.get(self._domain[b], [])
                if not cands:
                    return None
                # the candidates fewest hops from b (a breadth-first search that stops at
                # the first level holding one), then the same local rank, then the name
                adj, seen, level = self._dom_adj, {b}, [b]
                while True:
                    found = set(level).intersection(cands)
                    if found or not level:
                        break
                    nxt = []
                    for u in level:
                        for v in adj[u]:
                            if v not in seen:
                                seen.add(v)
                                nxt.append(v)
                    level = nxt
                local_rank = self._local_rank
                lr = local_rank[b]
                e = min((n for n in cands if n in found), key=lambda n: (local_rank[n] != lr, str(n)))
            self._ingress_cache[b] = e
        return e

    def _best_switch(self, endpoint: str, dist: dict[str, int]) -> tuple[int, str]:
        attach = self._attach[endpoint]
        best = attach[0] if len(attach) == 1 else min(attach, key=lambda s: (dist.get(s, 1 << 30), s))
        return dist.get(best, 1 << 30), best

    def _nearest_switch(self, endpoint: str, dl: list[int]) -> tuple[int, str]:
        """`_best_switch` with the distances as a `_dist_list`."""
        attach, hops = self._attach[endpoint], self._hops_to
        best = attach[0] if len(attach) == 1 else min(attach, key=lambda s: (hops(s, dl), s))
        return hops(best, dl), best

    def _switch_of(self, endpoint: str) -> str:
        """The switch where traffic for `endpoint` arrives: the first of its switches by name."""
        s = self._entry_switch.get(endpoint)
        if s is None:
            s = self._entry_switch[endpoint] = min(self._attach[endpoint])
        return s

    def _egress(self, a: str, eb: str) -> str | None:
        key = (a, eb)
        if key in self._egress_cache:
            return self._egress_cache[key]
        if a in self._attach and not self._dom_adj[a]:
            e: str | None = a
        else:
            # the choice depends on eb only through its switch and its rail: one per class
            sb = self._switch_of(eb)
            rail_b = self._rail[eb]
            cls = (a, sb, rail_b)
            if cls in self._egress_class:
                e = self._egress_class[cls]
            else:
                e = self._egress_class[cls] = self._pick_egress(a, sb, rail_b)
        if e is not None:
            self._egress_cache[key] = e
        return e

    def _pick_egress(self, a: str, sb: str, rail_b: object) -> str | None:
        """The NIC of `a`'s server fewest hops from switch `sb`, then on rail `rail_b`, then nearest `a`.

        The first two criteria do not depend on `a`, only on its server: the NICs that tie
        on them are found once per (server, `sb`, `rail_b`) and kept in their order, so the
        choice is that of one `min` over all four criteria.
        """
        dom = self._domain[a]
        best = self._egress_best.get((dom, sb, rail_b))
        if best is None:
            cands = self._endpoints_of.get(dom, [])
            dl = self._dist_list(sb)
            rail, attach, hops_to = self._rail, self._attach, self._hops_to
            keys = [
                (
                    hops_to(attach[n][0], dl) if len(attach[n]) == 1 else self._nearest_switch(n, dl)[0],
                    rail_b is None or rail[n] != rail_b,
                )
                for n in cands
            ]
            top = min(keys, default=None)
            best = [n for n, k in zip(cands, keys, strict=True) if k == top]
            self._egress_best[(dom, sb, rail_b)] = best
        if len(best) <= 1:
            return best[0] if best else None
        hops = self._domain_hops(a)
        return min(best, key=lambda n: (hops.get(n, 1 << 30), str(n)))

    def _domain_path(self, a: str, b: str) -> list[str]:
        """Shortest path inside one server (cached; callers must not modify it)."""
        if a == b:
            return [a]
        p = self._domain_paths.get((a, b))
        if p is None:
            p = self._domain_paths[(a, b)] = _bidirectional_path(self._dom_adj, a, b)
        return p

    def _switch_path(self, s: str, t: str, a: str, b: str) -> list[str]:
        if s == t:
            return [s]
        dl = self._dist_list(t)
        if dl[self._sw_index[s]] < 0:
            raise SimulationError(f"no network path from switch {s} to {t} (links down?)")
        path, u, hop, nh = [s], s, 0, self._next_hops
        while u != t:
            nxt = nh.get((u, t))
            if nxt is None:
                nxt = nh[(u, t)] = self._switches.next_switches(u, t)
            u = nxt[_crc(a, b, hop) % len(nxt)] if len(nxt) > 1 else nxt[0]
            path.append(u)
            hop += 1
        return path

    def _fallback(self, a: str, b: str) -> list[str]:
        return shortest_path(nx.subgraph_view(self.g, filter_edge=self._up), a, b)

    # -- public --------------------------------------------------------------------
    def node_path(self, a: str, b: str) -> list[str]:
        """Node sequence from `a` to `b`."""
        if a == b:
            return [a]
        if self._direct is not None and self._direct.serves(a, b):
            return self._direct.path(a, b)
        da, db = self._domain[a], self._domain[b]
        if da == db:
            return self._domain_path(a, b)
        eb = self._ingress(b)
        ea = self._egress(a, eb) if eb is not None else None
        if ea is None or eb is None:
            return self._fallback(a, b)
        sb = self._switch_of(eb)
        dist = self._switch_dist(sb)
        da_hops, sa = self._best_switch(ea, dist)
        if da_hops >= 1 << 30:  # no NIC of a's server reaches b's entry (a rail cut): any path up
            return self._fallback(a, b)
        return self._domain_path(a, ea) + self._switch_path(sa, sb, a, b) + self._domain_path(eb, b)

    def path(self, a: str, b: str) -> np.ndarray:
        """Directed link indices from `a` to `b` (cached, with the path's latency)."""
        p = self._paths.get((a, b))
        if p is None:
            self._route((a, b))
            p = self._paths[(a, b)]
        return p

    def _route(self, *keys: tuple[str, str]) -> None:
        """Find and cache the route of each (a, b) of `keys` (not cached yet): its link
        indices and whether it is forwarded through another GPU (its latency is summed
        when first asked for, `_latencies`)."""
        paths, forwarded, into_gpu, domain = self._paths, self._forwarded, self._into_gpu, self._domain
        direct, into_of, out_of, array, int64 = self._direct, self._into, self._out_of, np.array, np.int64
        for key in keys:
            a, b = key
            if a == b:
                hops = []
            elif direct is not None and direct.serves(a, b):
                hops = self._hops(direct.path(a, b))
            elif domain[a] == domain[b]:
                li = self._domain_link_paths.get(key)
                hops = self._shape_links(a, b) if li is None else list(li)
            elif (into := into_of.get(b)) is None or (out := out_of.get((a, into[1], into[2]))) is None:
                hops = self._link_path(a, b)  # a piece not cached yet
            elif out[0] == into[1]:  # `_link_path` from its cached pieces
                hops = out[1] + into[3]
            else:
                hops = out[1] + self._switch_links(out[0], into[1], a, b) + into[3]
            paths[key] = array(hops, dtype=int64)
            forwarded[key] = len(hops) > 1 and not into_gpu.isdisjoint(hops[:-1])

    def _latencies(self, *keys: tuple[str, str]) -> None:
        """Sum and cache the latency of the route of each (a, b) of `keys`, as numpy sums the
        route's link latencies."""
        per_link, latency = self._link_latency_s, self._latency
        for key in keys:
            p = self.path(*key)
            if len(p) < 8:
                # numpy sums fewer than 8 float64 one by one from 0.0, in order: same bits
                lat = 0.0
                for i in p.tolist():
                    lat += per_link[i]
                latency[key] = lat
            else:
                latency[key] = float(self.links.latency_s[p].sum())

    def _link_path(self, a: str, b: str) -> list[int]:
        """Link indices of `node_path(a, b)`, joined from cached pieces (a new list).

        The pieces inside a server are decided once per server shape or egress class
        (`ServerShapes`), by local index, with the same functions `node_path` calls.
        """
        if a == b:
            return []
        if self._domain[a] == self._domain[b]:
            return list(self._domain_links(a, b))
        into = self._into.get(b)
        if into is None:
            into = self._into_piece(b)
            if into is None:
                return self._hops(self._fallback(a, b))
        eb, sb, rail_b, tail = into
        key = (a, sb, rail_b)  # the egress NIC depends on eb only through these (`_egress`)
        out = self._out_of.get(key)
        if out is None:
            out = self._out_piece(a, b, sb, rail_b)
            if out is None:
                return self._hops(self._fallback(a, b))
        sa, head = out
        if sa == sb:
            return head + tail
        return head + self._switch_links(sa, sb, a, b) + tail

    def _place(self, n: str) -> tuple[int, int, list[int], list[str], int]:
        """(shape, local index, global link of each local edge, nodes, egress class) of node
        `n`'s domain (cached per node)."""
        p = self._places.get(n)
        if p is None:
            d = self._domain[n]
            info = self._dom_info.get(d)
            if info is None:
                sh = self._shapes
                info = self._dom_info[d] = (sh.shape(d), sh.edge_links(d), sh.nodes[d], sh.egress_class(d))
            p = self._places[n] = (info[0], self._shapes.local[n], info[1], info[2], info[3])
        return p

    def _local_path(self, shape: int, i: int, j: int) -> tuple[int, ...]:
        """Local edge ids of the path from local index `i` to `j` inside a domain of `shape`,
        found once on the shape's first domain (`_domain_path`)."""
        ids = self._shape_paths.get((shape, i, j))
        if ids is None:  # (a domain is connected: there is a path)
            sh = self._shapes
            rep = sh.rep[shape]
            ids = sh.edge_ids(rep, self._domain_path(sh.nodes[rep][i], sh.nodes[rep][j]))
            self._shape_paths[(shape, i, j)] = ids
        return ids

    def _into_piece(self, b: str) -> tuple[str, str, object, list[int]] | None:
        """(entry endpoint, its switch, its rail, links from that switch to `b`) of traffic
        into `b`'s server (cached); None if the server has no NIC."""
        shape, lb, el, nodes, _ = self._place(b)
        got = self._shape_ingress.get((shape, lb))
        if got is None:  # `_ingress(b)` and the path from it, once per (server shape, local index)
            sh = self._shapes
            rep = self._ingress(sh.nodes[sh.rep[shape]][lb])
            e = -1 if rep is None else sh.local[rep]
            ids = self._local_path(shape, e, lb) if 0 <= e != lb else ()
            got = self._shape_ingress[(shape, lb)] = (e, ids)
        e, ids = got
        if e < 0:
            return None
        eb = nodes[e]
        sb = self._switch_of(eb)
        tail = [self.links.index[(sb, eb)]]
        tail += [el[i] for i in ids]
        into = self._into[b] = (eb, sb, self._rail[eb], tail)
        return into

    def _out_piece(self, a: str, b: str, sb: str, rail_b: object) -> tuple[str, list[int]] | None:
        """(first switch, links from `a` to it) of traffic from `a` to an endpoint at switch
        `sb` on rail `rail_b` (cached); None if the server has no NIC or none of its NICs
        reaches `sb` (a rail-only fabric with the rail's NIC link down: `_fallback`).

        The exit NIC, its switch toward `sb` and that switch's hops to `sb` (`_egress`, then
        `_best_switch`) are decided once per (egress class, local index of `a`, `sb`,
        `rail_b`), on the class's first server.
        """
        shape, la, el, nodes, cls = self._place(a)
        key = (cls, la, sb, rail_b)
        got = self._shape_egress.get(key)
        if got is None:  # on the egress class's first server, at `a`'s local index
            sh = self._shapes
            ra = sh.nodes[sh.egress_rep[cls]][la]
            e = ra if ra in self._attach and not self._dom_adj[ra] else self._pick_egress(ra, sb, rail_b)
            if e is None:
                got = (-1, "", 0, ())
            else:
                hops, s = self._nearest_switch(e, self._dist_list(sb))
                le = sh.local[e]  # the path to it too (an egress class is of one shape)
                got = (le, s, hops, self._local_path(shape, la, le) if le != la else ())
            self._shape_egress[key] = got
        le, sa, da_hops, ids = got
        if le < 0 or da_hops >= 1 << 30:  # no NIC, or (as `node_path`) the caller falls back to any path
            return None
        head = [el[i] for i in ids]
        head.append(self.links.index[(nodes[le], sa)])
        out = self._out_of[(a, sb, rail_b)] = (sa, head)
        return out

    def _hops(self, nodes: list[str]) -> list[int]:
        """Link indices along a node path."""
        idx = self.links.index
        return [idx[(u, v)] for u, v in zip(nodes, nodes[1:], strict=False)]

    def _switch_links(self, s: str, t: str, a: str, b: str) -> list[int]:
        """Link indices of `_switch_path(s, t, a, b)`: the same walk, over cached lists of
        (next switch, link to it) per (switch, target)."""
        if s == t:
            return []
        dl = self._dist_list(t)
        if dl[self._sw_index[s]] < 0:
            raise SimulationError(f"no network path from switch {s} to {t} (links down?)")
        out: list[int] = []
        u, hop, steps, prefix = s, 0, self._next_links, f"{a!s}|{b!s}|"
        while u != t:
            nxt = steps.get((u, t))
            if nxt is None:
                idx = self.links.index
                nxt = steps[(u, t)] = [(v, idx[(u, v)]) for v in self._switches.next_switches(u, t)]
            # the hash of `_switch_path`: CRC-32 of "a|b|hop" (`_crc`)
            u, li = nxt[zlib.crc32(f"{prefix}{hop}".encode()) % len(nxt)] if len(nxt) > 1 else nxt[0]
            out.append(li)
            hop += 1
        return out

    def _domain_links(self, a: str, b: str) -> list[int]:
        """Link indices of `_domain_path(a, b)` (cached; callers must not modify it)."""
        key = (a, b)
        li = self._domain_link_paths.get(key)
        if li is None:
            li = self._domain_link_paths[key] = self._shape_links(a, b)
        return li

    def _shape_links(self, a: str, b: str) -> list[int]:
        """Link indices of `_domain_path(a, b)` (a new list): the path is found once per
        (server shape, local indices of `a` and `b`), on the shape's first server."""
        if a == b:
            return []
        shape, la, el, _, _ = self._place(a)
        return [el[i] for i in self._local_path(shape, la, self._shapes.local[b])]

    def paths(self, edges: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        """`path(a, b)` of every (a, b) of `edges`, in order."""
        return _lookup(self._paths, edges, self._route)

    def max_latency_s(self, edges: Sequence[tuple[str, str]]) -> float:
        """The largest `latency_s(a, b)` over the (a, b) of `edges` (not empty)."""
        return max(_lookup(self._latency, edges, self._latencies))

    def forwarded_count(self, edges: Sequence[tuple[str, str]]) -> int:
        """How many of the (a, b) of `edges` are `forwarded_via_gpu` (each counted every time)."""
        return sum(_lookup(self._forwarded, edges, self._route))

    def forwarded_via_gpu(self, a: str, b: str) -> bool:
        """Does the route from `a` to `b` pass through another GPU (scale-up forwarding)?"""
        f = self._forwarded.get((a, b))
        if f is None:
            self.path(a, b)  # caches the answer with the path
            f = self._forwarded[(a, b)]
        return f

    def latency_s(self, a: str, b: str) -> float:
        key = (a, b)
        lat = self._latency.get(key)
        if lat is None:
            self._latencies(key)
            lat = self._latency[key]
        return lat

    def check_reachable(self, gpus: list[str]) -> None:
        """Raise SimulationError naming a GPU cut off from the others (links down)."""
        parts: list[set[str]] = []  # the parts of the fabric (over links up) holding the GPUs
        for gname in gpus:
            if not any(gname in p for p in parts):
                reach = self._reach.get(gname)
                if reach is None:  # cached, as routes are
                    view = nx.subgraph_view(self.g, filter_edge=self._up) if self.down else self.g
                    reach = self._reach[gname] = nx.node_connected_component(view, gname)
                parts.append(reach)
        if len(parts) > 1:  # cut off: outside the part with most GPUs, then most nodes (switches)
            main = max(parts, key=lambda p: (sum(gname in p for gname in gpus), len(p)))
            gname = next(gname for gname in gpus if gname not in main)
            why = "is cut off from the fabric (its links are down); the job cannot be scheduled"
            raise SimulationError(f"GPU {gname} {why}")
