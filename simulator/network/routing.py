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
* Graphs with no NICs (e.g. a torus of directly linked GPUs) fall back to a plain shortest
  path, cached per pair.

Routes avoid links marked down; a node that can no longer be reached is a
`SimulationError`. Links are directed: edge (u, v) is two links, u->v and v->u.

How it is computed (the routes are those of the definitions above): switch distances by a
breadth-first search over index arrays of the switch graph, one per destination switch;
the first two NIC criteria once per (source server, destination switch, rail) class, the
distance inside the server per source GPU; the entry NIC of a destination by a search
that stops at the first level holding a NIC; paths inside a server by networkx's
bidirectional search written over plain adjacency lists (same path, ties included). A
route is joined, as link indices, from a piece per destination (entry switch to the
GPU), a piece per (source GPU, entry switch, entry rail) (the GPU to its first switch)
and the switch path, the only part hashed per GPU pair; its latency is summed once, as
numpy sums it. Every route, piece and next-hop list is cached.
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Iterable, Sequence

import networkx as nx
import numpy as np

from simulator.errors import SimulationError
from simulator.network.graph import SCALE_UP_MEDIA


class LinkTable:
    """Directed links of a graph as arrays (SI units), with a (u, v) -> index map."""

    def __init__(self, g: nx.Graph) -> None:
        src: list[str] = []
        dst: list[str] = []
        cap: list[float] = []
        lat: list[float] = []
        medium: list[str] = []
        tiers: list[int] = []
        tier_of = {n: _tier(g, n) for n in g.nodes}
        for u, v, d in g.edges(data=True):
            # both directions of the edge, u->v then v->u
            c, t = float(d["bandwidth_bytes_per_s"]), max(tier_of[u], tier_of[v])
            lt = float(d.get("latency_s", 0.0))
            src += (u, v)
            dst += (v, u)
            cap += (c, c)
            lat += (lt, lt)
            medium += (d["medium"], d["medium"])
            tiers += (t, t)
        self.src = src
        self.dst = dst
        self.capacity_bytes_per_s = np.asarray(cap, dtype=float)
        self.latency_s = np.asarray(lat, dtype=float)
        self.medium = medium
        self.index: dict[tuple[str, str], int] = {
            (a, b): i for i, (a, b) in enumerate(zip(src, dst, strict=False))
        }
        self.tier = np.asarray(tiers, dtype=np.int16)
        # links that end at a GPU: a route using one before its last hop is forwarded
        # through that GPU's scale-up domain (NCCL's PXN)
        gpus = {n for n, k in g.nodes(data="kind") if k == "gpu"}
        self.into_gpu = np.asarray([b in gpus for b in dst], dtype=bool)

    def __len__(self) -> int:
        return len(self.src)

    def name(self, i: int) -> str:
        return f"{self.src[i]}->{self.dst[i]}"


def _tier(g: nx.Graph, n: str) -> int:
    d = g.nodes[n]
    if d.get("kind") == "switch":
        return int(d.get("tier", 1))
    return -1


def _crc(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def _bidirectional_path(adj: dict[str, list[str]], a: str, b: str) -> list[str]:
    """The shortest path from `a` to `b` that `networkx.bidirectional_shortest_path` returns
    on the graph whose adjacency (in its order) is `adj`: the same search, written over
    plain lists (a != b).

    Raises:
        SimulationError: no path.
    """
    pred: dict[str, str | None] = {a: None}
    succ: dict[str, str | None] = {b: None}
    forward, reverse = [a], [b]
    meet: str | None = None
    while forward and reverse and meet is None:
        if len(forward) <= len(reverse):
            level, forward = forward, []
            for v in level:
                for w in adj[v]:
                    if w not in pred:
                        forward.append(w)
                        pred[w] = v
                    if w in succ:
                        meet = w
                        break
                if meet is not None:
                    break
        else:
            level, reverse = reverse, []
            for v in level:
                for w in adj[v]:
                    if w not in succ:
                        succ[w] = v
                        reverse.append(w)
                    if w in pred:
                        meet = w
                        break
                if meet is not None:
                    break
    if meet is None:
        raise SimulationError(f"no path from {a} to {b} inside their server")
    path: list[str] = []
    node: str | None = meet
    while node is not None:
        path.append(node)
        node = pred[node]
    path.reverse()
    node = succ[path[-1]]
    while node is not None:
        path.append(node)
        node = succ[node]
    return path


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
        kind = {n: d.get("kind") for n, d in g.nodes(data=True)}
        self._kind = kind
        # node attributes the route choices read, as plain dicts
        self._rail: dict[str, object] = {n: d.get("rail") for n, d in g.nodes(data=True)}
        self._local_rank: dict[str, object] = {n: d.get("local_rank") for n, d in g.nodes(data=True)}
        is_net_switch = {n for n, k in kind.items() if k == "switch" and int(g.nodes[n].get("tier", 1)) >= 1}
        self._net_switches = is_net_switch
        # scale-up domains: non-network-switch nodes joined by scale-up media
        domain_graph = nx.Graph()
        domain_graph.add_nodes_from(n for n in g.nodes if n not in is_net_switch)
        domain_graph.add_edges_from(
            (u, v)
            for u, v, medium in g.edges(data="medium")
            if u not in is_net_switch
            and v not in is_net_switch
            and medium in SCALE_UP_MEDIA
            and self._up(u, v)
        )
        self._domain: dict[str, int] = {}
        self._domain_graph = domain_graph
        for i, comp in enumerate(
            sorted(nx.connected_components(domain_graph), key=lambda c: min(map(str, c)))
        ):
            for n in comp:
                self._domain[n] = i
        # network endpoints: non-switch nodes with an up edge to a network switch
        self._attach: dict[str, list[str]] = {}
        for n in g.nodes:
            if n in is_net_switch:
                continue
            sws = sorted(s for s in g.neighbors(n) if s in is_net_switch and self._up(n, s))
            if sws:
                self._attach[n] = sws
        self._endpoints_of: dict[int, list[str]] = {}
        for n in sorted(self._attach, key=str):
            self._endpoints_of.setdefault(self._domain[n], []).append(n)
        # switch graph adjacency (sorted for determinism), and the same as index arrays
        self._sw_adj: dict[str, list[str]] = {
            s: sorted(t for t in g.neighbors(s) if t in is_net_switch and self._up(s, t))
            for s in is_net_switch
        }
        self._sw_names = sorted(is_net_switch, key=str)
        sw_index = {s: i for i, s in enumerate(self._sw_names)}
        self._sw_index = sw_index
        lengths = [len(self._sw_adj[s]) for s in self._sw_names]
        self._sw_indptr = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64)))
        self._sw_indices = np.fromiter(
            (sw_index[t] for s in self._sw_names for t in self._sw_adj[s]), dtype=np.int64, count=sum(lengths)
        )
        # scale-up domain adjacency as plain lists (hop counts inside a server)
        self._dom_adj: dict[str, list[str]] = {n: list(domain_graph.adj[n]) for n in domain_graph}
        self._egress_best: dict[tuple[int, str, object], list[str]] = {}
        self._dist_cache: dict[str, dict[str, int]] = {}
        self._dist_arrays: dict[str, np.ndarray] = {}  # the same by switch index (-1: unreachable)
        self._next_hops: dict[tuple[str, str], list[str]] = {}
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

    # -- helpers -------------------------------------------------------------------
    def domain_of(self, n: str) -> int:
        return self._domain[n]

    def _switch_dist(self, target: str) -> dict[str, int]:
        """Hop distance to `target` from every network switch that can reach it (cached).

        A breadth-first search, one level at a time over index arrays of the switch graph.
        """
        d = self._dist_cache.get(target)
        if d is None:
            indptr, indices = self._sw_indptr, self._sw_indices
            dist = np.full(len(self._sw_names), -1, dtype=np.int64)
            frontier = np.array([self._sw_index[target]], dtype=np.int64)
            dist[frontier] = 0
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
            names = self._sw_names
            d = {names[i]: int(dist[i]) for i in np.flatnonzero(dist >= 0).tolist()}
            self._dist_cache[target] = d
            self._dist_arrays[target] = dist
        return d

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
            dist = self._switch_dist(sb)
            rail = self._rail
            attach, far = self._attach, 1 << 30
            keys = [
                (
                    dist.get(attach[n][0], far) if len(attach[n]) == 1 else self._best_switch(n, dist)[0],
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
        dist = self._switch_dist(t)
        if s not in dist:
            raise SimulationError(f"no network path from switch {s} to {t} (links down?)")
        path = [s]
        u = s
        hop = 0
        nh = self._next_hops
        while u != t:
            nxt = nh.get((u, t))
            if nxt is None:
                # the neighbours of u one hop nearer t, in adjacency order
                ui = self._sw_index[u]
                nb = self._sw_indices[self._sw_indptr[ui] : self._sw_indptr[ui + 1]]
                names = self._sw_names
                nxt = [names[i] for i in nb[self._dist_arrays[t][nb] == dist[u] - 1].tolist()]
                nh[(u, t)] = nxt
            u = nxt[_crc(a, b, hop) % len(nxt)] if len(nxt) > 1 else nxt[0]
            path.append(u)
            hop += 1
        return path

    def _fallback(self, a: str, b: str) -> list[str]:
        view = nx.subgraph_view(self.g, filter_edge=lambda u, v: self._up(u, v))
        try:
            return nx.shortest_path(view, a, b)
        except nx.NetworkXNoPath:
            raise SimulationError(
                f"{a} cannot reach {b}: the fabric is cut (down links or missing cables)"
            ) from None

    # -- public --------------------------------------------------------------------
    def node_path(self, a: str, b: str) -> list[str]:
        """Node sequence from `a` to `b`."""
        if a == b:
            return [a]
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
        if da_hops >= 1 << 30:
            raise SimulationError(f"{a} cannot reach {b}: no network path between their NICs")
        return self._domain_path(a, ea) + self._switch_path(sa, sb, a, b) + self._domain_path(eb, b)

    def path(self, a: str, b: str) -> np.ndarray:
        """Directed link indices from `a` to `b` (cached, with the path's latency)."""
        key = (a, b)
        p = self._paths.get(key)
        if p is None:
            hops = self._link_path(a, b)
            p = self._paths[key] = np.array(hops, dtype=np.int64)
            if len(hops) < 8:
                # numpy sums fewer than 8 float64 one by one from 0.0, in order: same bits
                lat, per_link = 0.0, self._link_latency_s
                for i in hops:
                    lat += per_link[i]
                self._latency[key] = lat
            else:
                self._latency[key] = float(self.links.latency_s[p].sum())
        return p

    def _link_path(self, a: str, b: str) -> list[int]:
        """Link indices of `node_path(a, b)`, joined from cached pieces (a new list)."""
        if a == b:
            return []
        if self._domain[a] == self._domain[b]:
            return list(self._domain_links(a, b))
        into = self._into.get(b)
        if into is None:
            eb = self._ingress(b)
            if eb is None:
                return self._fallback_links(a, b)
            sb = self._switch_of(eb)
            tail = [self.links.index[(sb, eb)], *self._domain_links(eb, b)]
            into = self._into[b] = (eb, sb, self._rail[eb], tail)
        eb, sb, rail_b, tail = into
        key = (a, sb, rail_b)  # the egress NIC depends on eb only through these (`_egress`)
        out = self._out_of.get(key)
        if out is None:
            ea = self._egress(a, eb)
            if ea is None:
                return self._fallback_links(a, b)
            da_hops, sa = self._best_switch(ea, self._switch_dist(sb))
            if da_hops >= 1 << 30:
                raise SimulationError(f"{a} cannot reach {b}: no network path between their NICs")
            out = self._out_of[key] = (sa, [*self._domain_links(a, ea), self.links.index[(ea, sa)]])
        sa, head = out
        if sa == sb:
            return head + tail
        return head + self._switch_links(sa, sb, a, b) + tail

    def _hops(self, nodes: list[str]) -> list[int]:
        """Link indices along a node path."""
        idx = self.links.index
        return [idx[(u, v)] for u, v in zip(nodes, nodes[1:], strict=False)]

    def _switch_links(self, s: str, t: str, a: str, b: str) -> list[int]:
        """Link indices of `_switch_path(s, t, a, b)`."""
        return self._hops(self._switch_path(s, t, a, b))

    def _fallback_links(self, a: str, b: str) -> list[int]:
        return self._hops(self._fallback(a, b))

    def _domain_links(self, a: str, b: str) -> list[int]:
        """Link indices of `_domain_path(a, b)` (cached; callers must not modify it)."""
        key = (a, b)
        li = self._domain_link_paths.get(key)
        if li is None:
            li = self._domain_link_paths[key] = self._hops(self._domain_path(a, b))
        return li

    def paths(self, edges: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        """`path(a, b)` of every (a, b) of `edges`, in order."""
        get = self._paths.get
        out = [get((a, b)) for a, b in edges]
        if any(p is None for p in out):
            out = [self.path(a, b) if p is None else p for p, (a, b) in zip(out, edges, strict=True)]
        return out  # type: ignore[return-value]

    def max_latency_s(self, edges: Sequence[tuple[str, str]]) -> float:
        """The largest `latency_s(a, b)` over the (a, b) of `edges` (not empty)."""
        get = self._latency.get
        lat = [get((a, b)) for a, b in edges]
        if any(x is None for x in lat):
            lat = [self.latency_s(a, b) if x is None else x for x, (a, b) in zip(lat, edges, strict=True)]
        return max(lat)  # type: ignore[type-var,return-value]

    def forwarded_via_gpu(self, a: str, b: str) -> bool:
        """Does the route from `a` to `b` pass through another GPU (scale-up forwarding)?"""
        p = self.path(a, b)
        return len(p) > 1 and bool(self.links.into_gpu[p[:-1]].any())

    def latency_s(self, a: str, b: str) -> float:
        key = (a, b)
        lat = self._latency.get(key)
        if lat is None:
            self.path(a, b)  # caches the path's latency with it
            lat = self._latency[key]
        return lat

    def check_reachable(self, gpus: list[str]) -> None:
        """Raise SimulationError naming a GPU cut off from the others (links down)."""
        if len(gpus) < 2:
            return
        view = nx.subgraph_view(self.g, filter_edge=lambda u, v: self._up(u, v)) if self.down else self.g
        reach = nx.node_connected_component(view, gpus[0])
        for gname in gpus[1:]:
            if gname not in reach:
                raise SimulationError(
                    f"GPU {gname} is cut off from the fabric (its links are down); "
                    "the job cannot be scheduled"
                )
