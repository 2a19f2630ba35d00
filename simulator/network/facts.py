"""Topology facts: counts, bisection bandwidth, diameter and oversubscription of a graph.

Pure functions of a graph that follows `simulator.network.graph`. What they measure:

* counts of GPUs, servers, NICs, storage servers, switches by tier and by role, links by
  medium (edges, and physical cables from the edge attribute `links`, default 1);
* bisection bandwidth (bytes/s per direction): taken from the structure a design
  builder recorded in `g.graph["structure"]` when present (each design states its
  formula). Otherwise, on graphs of at most `FLOW_LIMIT_NODES` nodes, the max-flow
  min-cut between the first and second half of the GPU list (natural name order, so
  whole servers fall on one side), computed with networkx; on larger graphs the same
  max-flow on a graph reduced exactly (`reduced_flow_bisection`: each half's GPUs merged,
  pass-through nodes folded), and only where even that is too large a Clos tier-cut
  estimate: the minimum of half the GPU injection bandwidth and half the uplink bandwidth
  leaving each switch tier (low where a leaf serves both halves, as a rail-optimized
  leaf of a 4:1 fabric does). The method used is reported with the number.
* diameter: the largest, over pairs of GPUs, of the fewest scale-out switches (tier >= 1)
  a path crosses (0-1 BFS; in-server hops are free), and of the fewest links; exact from
  every GPU on graphs of at most `EXACT_DIAMETER_GPUS` GPUs, otherwise from a sample of
  source GPUs spread over the list (exact for the symmetric designs of `simulator.network.design`).
* oversubscription per switch tier: bandwidth towards lower tiers and endpoints (down)
  over bandwidth towards higher tiers (up); links inside a tier are reported apart.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any

import networkx as nx
import pandas as pd

from simulator.network.direct_routes import gpu_traffic_graph
from simulator.network.graph import gpus as gpu_list

FLOW_LIMIT_NODES = 3000
EXACT_DIAMETER_GPUS = 64
DIAMETER_SAMPLES = 8


def ordered_gpus(g: nx.Graph) -> list[str]:
    """GPUs ordered by server then local rank, with numbers compared as numbers (n2 < n10)."""
    return gpu_list(g)


def _tier(g: nx.Graph, n: Any) -> int | None:
    d = g.nodes[n]
    return int(d.get("tier", 1)) if d.get("kind") == "switch" else None


def counts(g: nx.Graph) -> dict[str, Any]:
    """Node and link counts."""
    kinds = Counter(d.get("kind") for _, d in g.nodes(data=True))
    servers = {d.get("node") for _, d in g.nodes(data=True) if d.get("kind") == "gpu" and d.get("node")}
    by_tier: Counter[int] = Counter()
    by_role: Counter[str] = Counter()
    for _, d in g.nodes(data=True):
        if d.get("kind") == "switch":
            by_tier[int(d.get("tier", 1))] += 1
            by_role[str(d.get("role", "switch"))] += 1
    edges: Counter[str] = Counter()
    cables: Counter[str] = Counter()
    for _, _, d in g.edges(data=True):
        edges[d.get("medium")] += 1
        cables[d.get("medium")] += int(d.get("links", 1))
    return {
        "gpus": kinds.get("gpu", 0),
        "servers": len(servers),
        "nics": kinds.get("nic", 0),
        "storage": kinds.get("storage", 0),
        "switches": kinds.get("switch", 0),
        "scale_out_switches": sum(c for t, c in by_tier.items() if t >= 1),
        "switches_by_tier": dict(sorted(by_tier.items())),
        "switches_by_role": dict(sorted(by_role.items())),
        "edges_by_medium": dict(sorted(edges.items())),
        "links_by_medium": dict(sorted(cables.items())),
    }


def tier_table(g: nx.Graph) -> pd.DataFrame:
    """Per switch tier: switches, ports, down/up/lateral bandwidth and oversubscription.

    Columns: tier, roles, switches, ports, down_bytes_per_s, up_bytes_per_s,
    lateral_bytes_per_s, oversubscription (down/up; NaN at the top tier).
    """
    rows: dict[int, dict[str, Any]] = {}
    for n, d in g.nodes(data=True):
        if d.get("kind") != "switch":
            continue
        t = int(d.get("tier", 1))
        row = rows.setdefault(
            t,
            {
                "tier": t,
                "roles": set(),
                "switches": 0,
                "ports": 0,
                "down_bytes_per_s": 0.0,
                "up_bytes_per_s": 0.0,
                "lateral_bytes_per_s": 0.0,
            },
        )
        row["roles"].add(str(d.get("role", "switch")))
        row["switches"] += 1
        row["ports"] += int(d.get("ports", 0))
        for nb, e in g.adj[n].items():
            bw = float(e["bandwidth_bytes_per_s"])
            tn = _tier(g, nb)
            if tn is None or tn < t:
                row["down_bytes_per_s"] += bw
            elif tn > t:
                row["up_bytes_per_s"] += bw
            else:
                row["lateral_bytes_per_s"] += bw / 2  # counted from both ends
    out = []
    for t in sorted(rows):
        r = rows[t]
        r["roles"] = ",".join(sorted(r["roles"]))
        r["oversubscription"] = (
            r["down_bytes_per_s"] / r["up_bytes_per_s"] if r["up_bytes_per_s"] > 0 else math.nan
        )
        out.append(r)
    cols = [
        "tier",
        "roles",
        "switches",
        "ports",
        "down_bytes_per_s",
        "up_bytes_per_s",
        "lateral_bytes_per_s",
        "oversubscription",
    ]
    return pd.DataFrame(out, columns=cols)


def flow_bisection(g: nx.Graph) -> float:
    """Max-flow min-cut (bytes/s) between the two halves of the ordered GPU list, over the
    links their traffic crosses (`gpu_traffic_graph`)."""
    order = ordered_gpus(g)
    half = len(order) // 2
    g = gpu_traffic_graph(g)
    h = nx.Graph()
    h.add_edges_from(
        (u, v, {"capacity": float(d["bandwidth_bytes_per_s"])}) for u, v, d in g.edges(data=True)
    )
    src, dst = ("__src__",), ("__dst__",)
    h.add_edges_from((src, n) for n in order[:half])  # no capacity attribute = infinite
    h.add_edges_from((n, dst) for n in order[half:])
    return float(nx.maximum_flow_value(h, src, dst, capacity="capacity"))


_SRC, _DST = ("__src__",), ("__dst__",)


def reduced_flow_bisection(g: nx.Graph, limit: int = FLOW_LIMIT_NODES) -> float | None:
    """`flow_bisection` on a smaller graph with the same max flow, or None when even that has
    more than `limit` nodes.

    Exact reductions: each half's GPUs are merged into its terminal (they are tied to it by
    links of no limit, so the cut cannot pass between them); a link between the halves' GPUs
    crosses every cut (counted apart); a node left with one neighbour carries no flow
    (dropped); a node with two is a pipe of its smaller link (folded into one link); parallel
    links add up. A rail-optimized Clos keeps its switches only.
    """
    order = ordered_gpus(g)
    half = len(order) // 2
    side = {n: (_SRC if k < half else _DST) for k, n in enumerate(order)}
    adj: dict[Any, dict[Any, float]] = {}
    crossing = 0.0
    for u, v, d in gpu_traffic_graph(g).edges(data=True):
        u, v, cap = side.get(u, u), side.get(v, v), float(d["bandwidth_bytes_per_s"])
        if u == v:
            continue
        if {u, v} == {_SRC, _DST}:
            crossing += cap
            continue
        au, av = adj.setdefault(u, {}), adj.setdefault(v, {})
        au[v] = au.get(v, 0.0) + cap
        av[u] = av.get(u, 0.0) + cap
    stack = [n for n in adj if n not in (_SRC, _DST)]
    while stack:
        n = stack.pop()
        nbrs = adj.get(n)
        if nbrs is None or len(nbrs) > 2:
            continue
        del adj[n]
        for m in nbrs:
            del adj[m][n]
        if len(nbrs) == 2:
            (a, ca), (b, cb) = nbrs.items()
            if {a, b} == {_SRC, _DST}:
                crossing += min(ca, cb)
            else:
                adj[a][b] = adj[a].get(b, 0.0) + min(ca, cb)
                adj[b][a] = adj[b].get(a, 0.0) + min(ca, cb)
        stack += [m for m in nbrs if m not in (_SRC, _DST)]
    if len(adj) > limit:
        return None
    h = nx.Graph()
    h.add_nodes_from((_SRC, _DST))
    h.add_edges_from((u, v, {"capacity": c}) for u, nb in adj.items() for v, c in nb.items())
    return crossing + float(nx.maximum_flow_value(h, _SRC, _DST, capacity="capacity"))


def tier_cut_bisection(g: nx.Graph) -> float:
    """Clos estimate: min of half the GPU scale-out injection and half each tier's uplinks
    (the bisection when the halves' traffic crosses every tier; lower when it need not)."""
    injection = 0.0
    for n, d in g.nodes(data=True):
        server = d.get("node")
        if d.get("kind") == "nic" and g.nodes.get(server, {}).get("kind") != "storage":
            injection += sum(
                float(e["bandwidth_bytes_per_s"])
                for nb, e in g.adj[n].items()
                if g.nodes[nb].get("kind") == "switch" and int(g.nodes[nb].get("tier", 1)) >= 1
            )
    cuts = [injection / 2] if injection else []
    table = tier_table(g)
    for _, row in table.iterrows():
        if row["tier"] >= 1 and row["up_bytes_per_s"] > 0:
            cuts.append(row["up_bytes_per_s"] / 2)
    return min(cuts) if cuts else math.nan


def bisection(g: nx.Graph) -> tuple[float, str]:
    """Bisection bandwidth in bytes/s per direction, and the method that gave it."""
    structure = g.graph.get("structure") or {}
    if "bisection_bytes_per_s" in structure:
        return float(structure["bisection_bytes_per_s"]), "structure: " + str(
            structure.get("bisection_method", "from the design")
        )
    if g.number_of_nodes() <= FLOW_LIMIT_NODES:
        return flow_bisection(g), "max-flow min-cut between halves of the GPU list (networkx)"
    reduced = reduced_flow_bisection(g)
    if reduced is not None:
        return reduced, "max-flow min-cut between halves of the GPU list, on the graph reduced exactly"
    return tier_cut_bisection(g), "Clos tier-cut estimate (graph too large for max-flow)"


def _switch_hops_from(g: nx.Graph, src: Any, cost: dict[Any, int]) -> dict[Any, int]:
    """0-1 BFS: fewest tier>=1 switches on a path from src to every node."""
    dist = {src: 0}
    dq: deque[Any] = deque([src])
    while dq:
        u = dq.popleft()
        du = dist[u]
        for v in g.adj[u]:
            w = cost.get(v, 0)
            nd = du + w
            if nd < dist.get(v, math.inf):
                dist[v] = nd
                if w:
                    dq.append(v)
                else:
                    dq.appendleft(v)
    return dist


def diameter(g: nx.Graph) -> dict[str, Any]:
    """Diameter between GPUs in scale-out switch hops and in links, with the method, over
    the links their traffic crosses (`gpu_traffic_graph`: a torus's frontend switch that
    reaches storage is no shortcut)."""
    order = ordered_gpus(g)
    g = gpu_traffic_graph(g)
    if len(order) <= EXACT_DIAMETER_GPUS:
        sources, method = order, "exact (BFS from every GPU)"
    else:
        step = (len(order) - 1) / (DIAMETER_SAMPLES - 1)
        sources = list(dict.fromkeys(order[round(i * step)] for i in range(DIAMETER_SAMPLES)))
        method = f"sampled BFS from {len(sources)} GPUs spread over the GPU list"
    cost = {n: 1 for n, d in g.nodes(data=True) if d.get("kind") == "switch" and int(d.get("tier", 1)) >= 1}
    targets = set(order)
    sw_hops = 0
    links = 0
    for s in sources:
        d = _switch_hops_from(g, s, cost)
        sw_hops = max(sw_hops, max(d[t] for t in targets if t in d))
        lengths = nx.single_source_shortest_path_length(g, s)
        links = max(links, max(lengths[t] for t in targets if t in lengths))
    return {"diameter_switch_hops": sw_hops, "diameter_links": links, "diameter_method": method}


def topology_facts(g: nx.Graph) -> dict[str, Any]:
    """All facts of a topology as one flat-ish dict (SI units: bytes/s).

    Keys: name, gpus, servers, nics, storage, switches, scale_out_switches,
    switches_by_tier, switches_by_role, edges_by_medium, links_by_medium,
    bisection_bytes_per_s, bisection_per_gpu_bytes_per_s, bisection_method,
    diameter_switch_hops, diameter_links, diameter_method, oversubscription_by_tier.
    """
    facts: dict[str, Any] = {"name": g.graph.get("name", "")}
    facts.update(counts(g))
    bis, method = bisection(g)
    facts["bisection_bytes_per_s"] = bis
    facts["bisection_per_gpu_bytes_per_s"] = bis / (facts["gpus"] / 2) if facts["gpus"] > 1 else bis
    facts["bisection_method"] = method
    facts.update(diameter(g))
    table = tier_table(g)
    facts["oversubscription_by_tier"] = {
        int(r.tier): (None if math.isnan(r.oversubscription) else float(r.oversubscription))
        for r in table.itertuples()
    }
    return facts


_UNITS = {
    "bisection_bytes_per_s": "bytes/s",
    "bisection_per_gpu_bytes_per_s": "bytes/s",
    "diameter_switch_hops": "switches",
    "diameter_links": "links",
}


def facts_frame(facts: dict[str, Any]) -> pd.DataFrame:
    """Tidy table of `topology_facts` output: columns fact, key, value, unit.

    Nested dicts (switches by tier, links by medium, ...) become one row per key.
    """
    rows = []
    for fact, value in facts.items():
        if isinstance(value, dict):
            for k, v in value.items():
                rows.append({"fact": fact, "key": str(k), "value": v, "unit": ""})
        else:
            rows.append({"fact": fact, "key": "", "value": value, "unit": _UNITS.get(fact, "")})
    return pd.DataFrame(rows, columns=["fact", "key", "value", "unit"])
