"""Drawing of a topology graph as a layered plotly figure.

Layout: GPUs at the bottom, in-server switches and hosts above them, NICs above those,
then one row per scale-out switch tier (leaf, spine, core), storage on top; each row is
spread over the full width in natural name order, so a server's parts line up. A graph
with no scale-out switch (a torus) is drawn with a seeded spring layout instead.

Large graphs are aggregated so that the browser stays responsive: past `max_elements`
nodes plus edges, every server becomes one node (its GPUs, NICs and in-server switches
merged, parallel links summed); if that is still too large, only the first servers are
kept with the switches above them, and the title says what is shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeAlias

import networkx as nx
import pandas as pd
import plotly.graph_objects as go

from simulator.network.graph import natural_key

#: Mean utilization per link, keyed by (u, v) tuples: a Series (`link_mean_utilization`) or a
#: plain mapping (`mean_utilization_by_link`).
LinkUtil: TypeAlias = pd.Series | Mapping[tuple[str, str], float]

KIND_COLORS = {
    "gpu": "#76b900",
    "nic": "#f28e2b",
    "host": "#9c9c9c",
    "server": "#4e79a7",
    "storage": "#b07aa1",
}
TIER_COLORS = {0: "#59a14f", 1: "#e15759", 2: "#af7aa1", 3: "#76b7b2"}
MEDIUM_COLORS = {
    "nvlink": "#76b900",
    "xgmi": "#ed1c24",
    "pcie": "#bab0ac",
    "ib": "#4e79a7",
    "ethernet": "#f28e2b",
}


def _aggregate_servers(g: nx.Graph) -> nx.Graph:
    """One node per server; edges between merged nodes sum bandwidth, keep max utilization."""
    owner = {}
    for n, d in g.nodes(data=True):
        server = d.get("node")
        owner[n] = f"{server}" if server is not None else n
    h = nx.Graph(**g.graph)
    for n, d in g.nodes(data=True):
        o = owner[n]
        if o == n:
            h.add_node(n, **d)
        elif o not in h:
            kind = "storage" if d.get("kind") == "storage" or str(o).startswith("stor") else "server"
            h.add_node(o, kind=kind)
        if owner[n] != n and d.get("kind") == "gpu":
            h.nodes[o]["gpus"] = h.nodes[o].get("gpus", 0) + 1
    for u, v, d in g.edges(data=True):
        a, b = owner[u], owner[v]
        if a == b:
            continue
        if h.has_edge(a, b):
            e = h.edges[a, b]
            e["bandwidth_bytes_per_s"] += d["bandwidth_bytes_per_s"]
            e["util"] = max(e.get("util", math.nan), d.get("util", math.nan))
        else:
            h.add_edge(a, b, **d)
    return h


def _upward_closure(h: nx.Graph, keep: set[Any]) -> set[Any]:
    """The kept endpoints plus every switch reachable from them by climbing tiers."""
    out = set(keep)
    frontier = list(keep)
    while frontier:
        nxt = []
        for n in frontier:
            t = h.nodes[n].get("tier", -1) if h.nodes[n].get("kind") == "switch" else -1
            for nb in h.adj[n]:
                d = h.nodes[nb]
                if nb not in out and d.get("kind") == "switch" and d.get("tier", 1) > t:
                    out.add(nb)
                    nxt.append(nb)
        frontier = nxt
    return out


def _reduce(g: nx.Graph, max_elements: int) -> tuple[nx.Graph, str]:
    size = g.number_of_nodes() + g.number_of_edges()
    if size <= max_elements:
        return g, ""
    h = _aggregate_servers(g)
    servers = sorted((n for n, d in h.nodes(data=True) if d.get("kind") == "server"), key=natural_key)
    note = f"one node per server ({len(servers)} servers)"
    if h.number_of_nodes() + h.number_of_edges() <= max_elements:
        return h, note
    storage = sorted((n for n, d in h.nodes(data=True) if d.get("kind") == "storage"), key=natural_key)
    n = len(servers)
    while n > 1:
        n = max(1, n // 2)
        kept = _upward_closure(h, set(servers[:n]) | set(storage[: max(1, n // 8)]))
        sub = h.subgraph(kept)
        if sub.number_of_nodes() + sub.number_of_edges() <= max_elements:
            break
    return h.subgraph(kept).copy(), f"{note}; showing the first {n} of {len(servers)} servers"


def _layer(d: dict[str, Any]) -> float:
    kind = d.get("kind")
    if kind == "gpu":
        return 0.0
    if kind in ("host", "server"):
        return 1.0
    if kind == "switch":
        t = int(d.get("tier", 1))
        return 1.0 if t == 0 else 2.0 + t
    if kind == "nic":
        return 2.0
    return 7.0  # storage


def _positions(h: nx.Graph) -> dict[Any, tuple[float, float]]:
    has_fabric = any(d.get("kind") == "switch" and d.get("tier", 1) >= 1 for _, d in h.nodes(data=True))
    if not has_fabric:
        return {n: (float(x), float(y)) for n, (x, y) in nx.spring_layout(h, seed=0).items()}
    rows: dict[float, list[Any]] = {}
    for n, d in h.nodes(data=True):
        if d.get("kind") == "nic" and str(d.get("node", "")).startswith("stor"):
            rows.setdefault(6.0, []).append(n)  # storage NICs sit under their servers
        else:
            rows.setdefault(_layer(d), []).append(n)
    used = sorted(rows)
    rank = {y: i for i, y in enumerate(used)}  # compact: no empty rows
    pos = {}
    for y, names in rows.items():
        names.sort(key=natural_key)
        k = len(names)
        for i, n in enumerate(names):
            pos[n] = ((i + 0.5) / k, float(rank[y]))
    return pos


def _node_color(d: dict[str, Any]) -> str:
    if d.get("kind") == "switch":
        return TIER_COLORS.get(int(d.get("tier", 1)), "#e15759")
    return KIND_COLORS.get(str(d.get("kind")), "#333333")


def util_color(u: float) -> str:
    """Green (idle) through yellow to red (saturated)."""
    u = min(max(u, 0.0), 1.0)
    r = int(255 * min(1.0, 2 * u))
    gr = int(200 * min(1.0, 2 * (1 - u)))
    return f"rgb({r},{gr},40)"


def _with_utilization(g: nx.Graph, link_util: LinkUtil) -> nx.Graph:
    """A copy of `g` whose edges named in `link_util` (either orientation) carry `util`."""
    work = g.copy()
    for key, u in link_util.items():
        if isinstance(key, tuple) and len(key) == 2 and work.has_edge(*key):
            work.edges[key]["util"] = float(u)
    return work


def _edge_traces(h: nx.Graph, pos: dict[Any, tuple[float, float]], by_utilization: bool) -> list[go.Scatter]:
    """One line trace per legend group of links: a medium, or a utilization decile."""
    groups: dict[str, tuple[list[float | None], list[float | None], str]] = {}
    for u, v, d in h.edges(data=True):
        if by_utilization:
            util = d.get("util", math.nan)
            if isinstance(util, float) and math.isnan(util):
                key, color = "no data", "#dddddd"
            else:
                b = min(9, int(util * 10))
                key, color = f"util {b / 10:.1f}-{(b + 1) / 10:.1f}", util_color((b + 0.5) / 10)
        else:
            key = str(d.get("medium"))
            color = MEDIUM_COLORS.get(key, "#999999")
        xs, ys, _ = groups.setdefault(key, ([], [], color))
        (x0, y0), (x1, y1) = pos[u], pos[v]
        xs.extend([x0, x1, None])
        ys.extend([y0, y1, None])
    traces = []
    for key in sorted(groups):
        xs, ys, color = groups[key]
        traces.append(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"color": color, "width": 1},
                name=key,
                hoverinfo="skip",
                legendgroup="links",
            )
        )
    return traces


def _node_traces(h: nx.Graph, pos: dict[Any, tuple[float, float]]) -> list[go.Scatter]:
    """One marker trace per node kind (switches per tier), hover text naming each node."""
    by_kind: dict[str, list[Any]] = {}
    for n, d in h.nodes(data=True):
        label = d.get("kind", "?")
        if label == "switch":
            label = f"switch tier {d.get('tier', 1)}"
        by_kind.setdefault(str(label), []).append(n)
    traces = []
    for label in sorted(by_kind):
        names = by_kind[label]
        texts = []
        for n in names:
            d = h.nodes[n]
            extra = ", ".join(f"{k}={d[k]}" for k in ("role", "ports", "rail", "gpus", "node") if k in d)
            texts.append(f"{n}<br>{d.get('kind')}" + (f" ({extra})" if extra else ""))
        traces.append(
            go.Scatter(
                x=[pos[n][0] for n in names],
                y=[pos[n][1] for n in names],
                mode="markers",
                marker={
                    "color": _node_color(h.nodes[names[0]]),
                    "size": 8 if len(names) < 500 else 4,
                    "line": {"width": 0.5, "color": "#333"},
                },
                name=label,
                text=texts,
                hoverinfo="text",
            )
        )
    return traces


def topology_figure(g: nx.Graph, link_util: LinkUtil | None = None, max_elements: int = 4000) -> go.Figure:
    """Draw a topology graph.

    Args:
        g: a topology graph (conventions of `simulator.network.graph`).
        link_util: optional utilization in [0, 1] per link, indexed by (u, v) tuples in
            either orientation; links are then colored by utilization instead of medium.
        max_elements: cap on nodes plus edges before aggregating (see module docstring).

    Returns:
        A plotly Figure; the title names the topology and any aggregation.
    """
    work = g if link_util is None else _with_utilization(g, link_util)
    h, note = _reduce(work, max_elements)
    pos = _positions(h)
    fig = go.Figure()
    for trace in _edge_traces(h, pos, by_utilization=link_util is not None):
        fig.add_trace(trace)
    for trace in _node_traces(h, pos):
        fig.add_trace(trace)
    title = f"{g.graph.get('name', 'topology')}: {g.number_of_nodes()} nodes, {g.number_of_edges()} links"
    if note:
        title += f"<br><sub>aggregated: {note}</sub>"
    fig.update_layout(
        title=title,
        showlegend=True,
        xaxis={"visible": False},
        yaxis={"visible": False},
        plot_bgcolor="white",
        height=650,
        margin={"l": 20, "r": 20, "t": 80, "b": 20},
    )
    return fig
