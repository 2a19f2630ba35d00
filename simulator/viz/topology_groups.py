"""The topology at scale: one node per group of switches or servers, links summed between groups.

Groups: the scale-out switches of one tier and pod (a switch `leaf3.5` is in pod 5 of
role leaf; a switch without a pod, such as `spine12`, is in its tier's one group), the
servers whose NICs mostly reach the leaves of one pod, and the storage servers. Every
link between two groups is summed into one drawn link: its link count, its bandwidth,
and, when the run recorded link load, the bandwidth-weighted mean utilization over the
run of its links (the colour) and the busiest link's.

Simplified: a pod is read from switch names (the part after the last `.`, when it is a
number); a server goes with the pod most of its NICs reach; links inside a server are not
drawn (the run dashboard's link views cover them).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import Any

import networkx as nx
import plotly.graph_objects as go

from simulator.network.graph import natural_key
from simulator.viz.topology import LinkUtil, util_color

#: Servers past which the run dashboard draws the topology by group.
GROUP_PAST_SERVERS = 32


def _pod(name: str) -> str | None:
    tail = str(name).rsplit(".", 1)
    return tail[1] if len(tail) == 2 and tail[1].isdigit() else None


def _link_positions(g: nx.Graph) -> dict[Any, int]:
    """Position of every node in the order the graph walks its links (`g.edges()`)."""
    return {n: i for i, (n, _) in enumerate(g.adjacency())}


def _neighbours_in_link_order(nbrs: dict[Any, Any], here: int, pos: dict[Any, int]) -> list[Any]:
    """A node's neighbours (`nbrs`, its adjacency; `here`, its position) in the order of
    the graph's links: those whose link was listed at an earlier node's turn (by that
    node's position), then the rest in the node's own order.

    That order is the graph's own: saved as node-link data and read back, a graph lists
    every node's neighbours in it, so the groups are the same in memory and read back.
    """
    earlier = sorted((m for m in nbrs if pos[m] < here), key=pos.__getitem__)
    return earlier + [m for m in nbrs if pos[m] >= here] if earlier else list(nbrs)


def node_groups(g: nx.Graph, pos: dict[Any, int] | None = None) -> dict[Any, tuple[str, float]]:
    """Group name and drawing row of every node outside the servers' insides (`pos`: the
    nodes' `_link_positions`, worked out when not given).

    A server's group is the pod most of its NIC's first-tier neighbours are in, ties going
    to the pod met first in the order of the graph's links.
    """
    groups: dict[Any, tuple[str, float]] = {}
    attrs = dict(g.nodes(data=True))
    for n, d in attrs.items():
        if d.get("kind") != "switch":
            continue
        tier = int(d.get("tier", 0) or 0)
        if tier >= 1:
            role = str(d.get("role") or f"tier {tier}")
            pod = _pod(n)
            groups[n] = (f"{role} pod {pod}" if pod is not None else role, 1.0 + tier)
    first_tier = {m for m in groups if attrs[m].get("tier", 1) == 1}
    pos = _link_positions(g) if pos is None else pos
    adj = dict(g.adjacency())
    for n, d in attrs.items():
        if d.get("kind") == "nic":
            pods = _first_tier_pods(adj[n], pos[n], pos, first_tier, groups)
            # the most common, the first met on a tie (`Counter.most_common`)
            pod = pods[0] if len(pods) == 1 else Counter(pods).most_common(1)[0][0] if pods else None
            server = str(d.get("node", n))
            storage = server.startswith("stor") or d.get("kind") == "storage"
            label = "storage" if storage else f"servers of {pod}" if pod is not None else "servers"
            groups[n] = (label, 5.0 if storage else 0.0)
            if d.get("tier", 1) == 1:  # a NIC met later counts it among its first tier
                first_tier.add(n)
    return groups


def _first_tier_pods(
    nbrs: dict[Any, Any],
    here: int,
    pos: dict[Any, int],
    first_tier: set[Any],
    groups: dict[Any, tuple[str, float]],
) -> list[str]:
    """The groups of a NIC's first-tier switch neighbours, in the order of the graph's links
    (`_neighbours_in_link_order`; that order is only worked out for two or more)."""
    found = [m for m in nbrs if m in first_tier]
    if len(found) > 1:
        found = [m for m in _neighbours_in_link_order(nbrs, here, pos) if m in first_tier]
    return [groups[m][0] for m in found]


def group_graph(g: nx.Graph, link_util: LinkUtil | None = None) -> nx.Graph:
    """The graph of groups: nodes carry `row`, `members`; edges `links`, `bandwidth_bytes_per_s`,
    and with `link_util` `util` (bandwidth-weighted mean) and `util_max`."""
    pos = _link_positions(g)
    groups = node_groups(g, pos)
    h = nx.Graph()
    members: Counter[str] = Counter()
    servers: dict[str, set[str]] = {}
    rows: dict[str, float] = {}  # a group's row: its last member's, groups in order first met
    attrs = dict(g.nodes(data=True))
    for n, (name, row) in groups.items():
        rows[name] = row
        if attrs[n].get("kind") == "nic":
            servers.setdefault(name, set()).add(str(attrs[n].get("node", n)))
        else:
            members[name] += 1
    for name, row in rows.items():
        h.add_node(name, row=row, members=len(servers[name]) if name in servers else members[name])
    util = {} if link_util is None else _float_by_pair(link_util)
    for (a, b), e in _group_links(g, groups, pos, util).items():
        h.add_edge(a, b, **e)
    return h


def _float_by_pair(link_util: LinkUtil) -> dict[Any, float]:
    """The loads of `link_util` keyed by a pair of nodes, as floats: the mapping itself when
    it is a dict of nothing else (`mean_utilization_by_link`'s), else a copy."""
    keys_are_pairs = isinstance(link_util, dict) and set(map(type, link_util)) <= {tuple}
    if keys_are_pairs and set(map(type, link_util.values())) <= {float}:
        return link_util  # type: ignore[return-value]
    return {k: float(v) for k, v in link_util.items() if isinstance(k, tuple)}


def _links_between(g: nx.Graph, nodes: dict[Any, Any], pos: dict[Any, int]) -> Iterator[tuple[Any, Any, Any]]:
    """The links whose two ends are in `nodes`, as `g.edges(data=True)` lists them (a link
    at the turn of its end met first), without walking the other nodes' links."""
    for n, nbrs in g.adjacency():
        if n in nodes:
            here = pos[n]
            for m, d in nbrs.items():
                if pos[m] >= here and m in nodes:
                    yield n, m, d


def _group_links(
    g: nx.Graph, groups: dict[Any, tuple[str, float]], pos: dict[Any, int], util: dict[tuple[Any, Any], float]
) -> dict[tuple[str, str], dict[str, Any]]:
    """The drawn links: the graph's links between two different groups summed per pair of
    groups, pairs in the order first met (so that adding them to a graph in that order
    gives the graph adding them one link at a time would); each link's bandwidth added in
    the order of the graph's links."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for u, v, d in _links_between(g, groups, pos):
        a, b = groups[u][0], groups[v][0]
        if a == b:
            continue
        bw = float(d.get("bandwidth_bytes_per_s", 0.0))
        e = found.get((a, b)) or found.get((b, a))
        if e is None:
            e = found[(a, b)] = {
                "links": 0, "bandwidth_bytes_per_s": 0.0, "_ubw": 0.0, "_wbw": 0.0, "util_max": math.nan
            }  # fmt: skip
        e["links"] += 1
        e["bandwidth_bytes_per_s"] += bw
        u_link = (util.get((u, v)) if (u, v) in util else util.get((v, u))) if util else None
        if u_link is not None:
            e["_ubw"] += u_link * bw
            e["_wbw"] += bw
            e["util_max"] = u_link if math.isnan(e["util_max"]) else max(e["util_max"], u_link)
    for e in found.values():
        weighted, weight = e.pop("_ubw"), e.pop("_wbw")
        e["util"] = weighted / weight if weight > 0 else math.nan
    return found


def _positions(h: nx.Graph) -> dict[str, tuple[float, float]]:
    rows: dict[float, list[str]] = {}
    for n, d in h.nodes(data=True):
        rows.setdefault(float(d["row"]), []).append(n)
    rank = {y: i for i, y in enumerate(sorted(rows))}
    pos = {}
    for y, names in rows.items():
        names.sort(key=natural_key)
        for i, n in enumerate(names):
            pos[n] = ((i + 0.5) / len(names), float(rank[y]))
    return pos


def topology_group_figure(g: nx.Graph, link_util: LinkUtil | None = None) -> go.Figure:
    """The topology drawn by group (see the module docstring), links coloured by load."""
    h = group_graph(g, link_util)
    pos = _positions(h)
    fig = go.Figure()
    bins: dict[str, tuple[list[float | None], list[float | None], str]] = {}
    mids: tuple[list[float], list[float], list[str]] = ([], [], [])
    for a, b, e in h.edges(data=True):
        util = e["util"]
        if math.isnan(util):
            key, color = "no load recorded", "#bbbbbb"
        else:
            k = min(9, int(util * 10))
            key, color = f"mean load {k * 10}-{k * 10 + 10}%", util_color((k + 0.5) / 10)
        xs, ys, _ = bins.setdefault(key, ([], [], color))
        (x0, y0), (x1, y1) = pos[a], pos[b]
        xs += [x0, x1, None]
        ys += [y0, y1, None]
        mids[0].append((x0 + x1) / 2)
        mids[1].append((y0 + y1) / 2)
        load = (
            ""
            if math.isnan(util)
            else f"<br>mean load {util * 100:.1f}%, busiest link {e['util_max'] * 100:.1f}%"
        )
        mids[2].append(
            f"{a} – {b}<br>{e['links']} links, {e['bandwidth_bytes_per_s'] * 8 / 1e12:.2f} Tb/s{load}"
        )
    for key in sorted(bins):
        xs, ys, color = bins[key]
        fig.add_trace(
            go.Scatter(
                x=xs, y=ys, mode="lines", line={"color": color, "width": 2}, name=key, hoverinfo="skip"
            )
        )
    fig.add_trace(
        go.Scatter(
            x=mids[0],
            y=mids[1],
            mode="markers",
            marker={"size": 6, "color": "rgba(0,0,0,0)"},
            text=mids[2],
            hoverinfo="text",
            showlegend=False,
            name="links",
        )
    )
    names = list(h.nodes)
    fig.add_trace(
        go.Scatter(
            x=[pos[n][0] for n in names],
            y=[pos[n][1] for n in names],
            mode="markers+text",
            text=[f"{n} ({h.nodes[n]['members']})" for n in names],
            textposition="top center",
            marker={"size": 14, "color": "#4e79a7", "line": {"width": 1, "color": "#333"}},
            name="groups (members)",
            hoverinfo="text",
        )
    )
    note = (
        "no link load recorded (network.record_links: false)"
        if link_util is None or not len(link_util)
        else "link colour: mean load over the run"
    )
    fig.update_layout(
        title=f"{g.graph.get('name', 'topology')} by tier and pod: {g.number_of_nodes()} nodes in "
        f"{h.number_of_nodes()} groups<br><sub>{note}</sub>",
        xaxis={"visible": False},
        yaxis={"visible": False},
        plot_bgcolor="white",
        height=560,
        margin={"l": 20, "r": 20, "t": 80, "b": 20},
    )
    return fig
