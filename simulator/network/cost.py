"""Capital cost and rated power of a cluster, part by part, from the price table.

What is priced (`estimate_cost`):
    * network scope: every scale-out switch (tier >= 1) as ports x port price at the speed
      of its fastest cable, where the ports are the switch's `radix` when a fixed-radix
      design sets one (a whole box is bought) and the ports it uses otherwise; every NIC
      that has a scale-out link; every cable between two different servers or switches
      (the edge attribute `links` counts parallel cables), by reach class (`dac` in-rack
      copper, `aoc` within a row, `optics` transceivers plus fibre) and by the tiers it
      joins (`nic-leaf`, `leaf-spine`, `spine-core`, ...). A cable's reach comes from the
      edge attribute `reach` set by the design builders; without it, links touching a
      tier >= 2 switch count as optics, the rest as AOC.
    * cluster scope adds: every GPU (by the GPU model's `name`), the rest of each GPU
      server per GPU slot (CPUs, memory, baseboard, chassis) and every storage server.
      GPU power is the model's `tdp_w`.

What is not: racks, power and cooling plant, buildings, management and frontend networks
not in the graph, software and staff. Prices for a speed not in the table use the next
listed speed up, or the fastest scaled linearly.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from typing import Any, Literal

import networkx as nx
import pandas as pd

from simulator.network.hardware import GPUSpec
from simulator.network.prices import DEFAULT_PRICES, REACHES, PriceSpec, load_prices, lookup

__all__ = [
    "CATEGORIES",
    "COLUMNS",
    "DEFAULT_PRICES",
    "PriceSpec",
    "cost_summary",
    "estimate_cost",
    "load_prices",
    "lookup",
]

COLUMNS = ["category", "item", "quantity", "unit_usd", "capex_usd", "unit_power_w", "power_w"]
#: categories in display order; the network ones are `NETWORK_CATEGORIES`
CATEGORIES = ("gpus", "servers", "storage", "switches", "nics", "cables")
NETWORK_CATEGORIES = ("switches", "nics", "cables")
Scope = Literal["network", "cluster"]

# A line item: (category, item, unit price in USD, unit power in W); the Counter counts units.
_Item = tuple[str, str, float, float]


def _gbps(edge: dict[str, Any]) -> float:
    return _gbps_of(edge["bandwidth_bytes_per_s"], edge.get("links", 1))


def _gbps_of(bandwidth: Any, links: Any) -> float:
    return float(bandwidth) * 8 / 1e9 / int(links)


def _fastest(edges: list[dict[str, Any]]) -> float:
    """`max(_gbps(e) for e in edges)`, each distinct (bandwidth, links) pair worked out once
    (a later equal pair gives an equal speed, which `max` would not take)."""
    bandwidths = map(operator.itemgetter("bandwidth_bytes_per_s"), edges)
    links = map(dict.get, edges, itertools.repeat("links"), itertools.repeat(1))
    return max(itertools.starmap(_gbps_of, dict.fromkeys(zip(bandwidths, links, strict=True))))


def _is_scale_out_switch(d: dict[str, Any]) -> bool:
    return d.get("kind") == "switch" and int(d.get("tier", 1)) >= 1


def _same_server(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("node") is not None and a.get("node") == b.get("node")


def _switch_item(
    g: nx.Graph,
    n: str,
    d: dict[str, Any],
    prices: PriceSpec,
    by_port: dict[tuple[Any, float], tuple[float, float]] | None = None,
) -> _Item | None:
    """A scale-out switch priced as ports x port price at the speed of its fastest cable
    (port prices already looked up kept in `by_port`, by medium and speed)."""
    edges = list(g.adj[n].values())
    if not edges:
        return None
    speed = _fastest(edges)
    medium = Counter(map(operator.itemgetter("medium"), edges)).most_common(1)[0][0]
    ports = int(d.get("radix") or d.get("ports") or sum(int(e.get("links", 1)) for e in edges))
    port = None if by_port is None else by_port.get((medium, speed))
    if port is None:
        port = _port_price(medium, speed, prices)
        if by_port is not None:
            by_port[(medium, speed)] = port
    port_usd, port_w = port
    kind = f"{ports}-port" if d.get("radix") else f"{ports} x"
    item = f"{d.get('role', 'switch')} switch, {kind} {speed:g}G {medium}"
    return ("switches", item, ports * port_usd, ports * port_w)


def _port_price(medium: Any, speed: float, prices: PriceSpec) -> tuple[float, float]:
    """Price and power of one switch port of `medium` (Ethernet's when the table has no
    such medium) at `speed` Gbit/s."""
    key = medium if medium in prices.switch_port_usd else "ethernet"
    port_usd = (
        lookup(prices.speed_table("switch_port_usd", key), speed) if key in prices.switch_port_usd else 0.0
    )
    return port_usd, lookup(prices.speed_table("switch_port_power_w"), speed)


def _nic_item_at(speed: float, prices: PriceSpec) -> _Item:
    """A NIC priced at `speed` (Gbit/s)."""
    return (
        "nics",
        f"NIC {speed:g}G",
        lookup(prices.speed_table("nic_usd"), speed),
        lookup(prices.speed_table("nic_power_w"), speed),
    )


def _end_name(d: dict[str, Any]) -> str:
    if d.get("kind") == "switch":
        return str(d.get("role") or f"tier{d.get('tier', 1)}")
    return str(d.get("kind", "node"))


def _tier(d: dict[str, Any]) -> int:
    return int(d.get("tier", 0)) if d.get("kind") == "switch" else 0


#: what `_cable_item` reads of a cable's end nodes and of its edge
_CABLE_END_KEYS = ("kind", "role", "tier")
_CABLE_EDGE_KEYS = ("medium", "reach", "bandwidth_bytes_per_s", "links")


def _cable_item(du: dict[str, Any], dv: dict[str, Any], e: dict[str, Any], prices: PriceSpec) -> _Item | None:
    """One cable of edge `e` between nodes `du` and `dv`; none inside a server or over PCIe."""
    if _same_server(du, dv) or e["medium"] == "pcie":
        return None
    reach = e.get("reach")
    if reach not in REACHES:
        reach = "optics" if max(_tier(du), _tier(dv)) >= 2 else "aoc"
    lo, hi = sorted((du, dv), key=_tier)
    speed = _gbps(e)
    return (
        "cables",
        f"{reach} {speed:g}G {_end_name(lo)}-{_end_name(hi)}",
        lookup(prices.speed_table("cable_usd", reach), speed),
        lookup(prices.speed_table("cable_power_w", reach), speed),
    )


def _compute_items(g: nx.Graph, prices: PriceSpec, gpu: GPUSpec | None) -> Counter[_Item]:
    """GPUs, the rest of their servers (per GPU slot) and storage servers."""
    items: Counter[_Item] = Counter()
    n_gpus = sum(1 for _, d in g.nodes(data=True) if d.get("kind") == "gpu")
    n_storage = sum(1 for _, d in g.nodes(data=True) if d.get("kind") == "storage")
    gpu = gpu or g.graph.get("gpu")
    if n_gpus:
        if gpu is None:
            raise prices.error("the topology names no GPU model, so its GPUs cannot be priced", ("gpu_usd",))
        if gpu.tdp_w is None:
            raise prices.error(f"GPU {gpu.name!r} has no tdp_w in its GPU file; power needs it", ("gpu_usd",))
        items[("gpus", gpu.name, prices.by_gpu("gpu_usd", gpu.name), float(gpu.tdp_w))] += n_gpus
        slot = (
            "servers",
            f"{gpu.name} server, per GPU slot",
            prices.by_gpu("server_per_gpu_usd", gpu.name),
            prices.by_gpu("server_per_gpu_power_w", gpu.name),
        )
        items[slot] += n_gpus
    if n_storage:
        stor = (
            "storage",
            "storage server",
            prices.storage_server_usd.value,
            prices.storage_server_power_w.value,
        )
        items[stor] += n_storage
    return items


def estimate_cost(
    g: nx.Graph, prices: PriceSpec, scope: Scope = "network", gpu: GPUSpec | None = None
) -> pd.DataFrame:
    """Line items of the capex and rated power of the network or of the whole cluster.

    Args:
        g: the topology graph.
        prices: the price table.
        scope: `network` (switches, NICs, cables) or `cluster` (also GPUs, servers, storage).
        gpu: the GPU model (default: the graph's `gpu` attribute).

    Returns:
        DataFrame with columns category, item, quantity, unit_usd, capex_usd,
        unit_power_w, power_w; one row per distinct item, categories in `CATEGORIES` order.

    Raises:
        InputError: (cluster scope) a part has no price in the table.
    """
    items: Counter[_Item] = _compute_items(g, prices, gpu) if scope == "cluster" else Counter()
    _add_port_items(g, prices, items)
    _add_cable_items(g, prices, items)
    rows: list[dict[str, Any]] = [
        {
            "category": c,
            "item": i,
            "quantity": q,
            "unit_usd": usd,
            "capex_usd": usd * q,
            "unit_power_w": w,
            "power_w": w * q,
        }
        for (c, i, usd, w), q in items.items()
    ]
    rows.sort(key=lambda r: (CATEGORIES.index(r["category"]), r["item"]))
    return pd.DataFrame(rows, columns=COLUMNS)


def _add_port_items(g: nx.Graph, prices: PriceSpec, items: Counter[_Item]) -> None:
    """Count the scale-out switches and the NICs with a scale-out link, in node order.

    A NIC is priced at the speed of its fastest link that is InfiniBand or Ethernet or
    reaches a scale-out switch (the scale-out switches gathered in one pass first), each
    speed priced once; a NIC with no such link is not counted."""
    attrs = g.nodes(data=True)
    scale_out = {n for n, d in attrs if _is_scale_out_switch(d)}
    adj = dict(g.adjacency())
    nics: dict[float, _Item] = {}
    ports: dict[tuple[Any, float], tuple[float, float]] = {}
    for n, d in attrs:
        if n in scale_out:
            item = _switch_item(g, n, d, prices, ports)
        elif d.get("kind") == "nic":
            speed = None
            for nb, e in adj[n].items():
                if e["medium"] in ("ib", "ethernet") or nb in scale_out:
                    s = _gbps(e)
                    if speed is None or s > speed:  # as max() keeps the first largest
                        speed = s
            if speed is None:
                continue
            item = nics.get(speed)
            if item is None:
                item = nics[speed] = _nic_item_at(speed, prices)
        else:
            continue
        if item is not None:
            items[item] += 1


def _add_cable_items(g: nx.Graph, prices: PriceSpec, items: Counter[_Item]) -> None:
    """Count the cables, in the order of the graph's links (`g.edges()`).

    A cable's item depends only on `_CABLE_END_KEYS` of its ends and `_CABLE_EDGE_KEYS` of
    its edge: the links are counted by those (tens of thousands of cables, a handful of
    kinds), then each kind is priced once (`_cable_item`, on its first link) and counted
    times its `links`, kinds in the order first met (the order the items are met in)."""
    ends = {n: tuple(map(d.get, _CABLE_END_KEYS)) for n, d in g.nodes(data=True)}
    server = {n: d.get("node") for n, d in g.nodes(data=True)}
    medium, reach, bandwidth, links = _CABLE_EDGE_KEYS
    first: dict[tuple[Any, ...], tuple[Any, Any, dict[str, Any]]] = {}
    counts: dict[tuple[Any, ...], int] = {}
    seen: set[Any] = set()
    for u, nbrs in g.adjacency():
        end_u, server_u = ends[u], server[u]
        for v, e in nbrs.items():
            if v in seen or (server_u is not None and server_u == server[v]):
                continue  # listed at v's turn; or inside a server: no cable (`_cable_item`)
            key = (end_u, ends[v], e.get(medium), e.get(reach), e.get(bandwidth), e.get(links, 1))
            met = counts.get(key)
            if met is None:
                first[key] = (u, v, e)
                met = 0
            counts[key] = met + 1
        seen.add(u)
    nodes = g.nodes
    for key, count in counts.items():
        u, v, e = first[key]
        item = _cable_item(nodes[u], nodes[v], e, prices)
        if item is not None:
            items[item] += int(e.get("links", 1)) * count


def cost_summary(items: pd.DataFrame, gpus: int | None = None) -> dict[str, float]:
    """Totals of `estimate_cost` line items: capex and power, overall and by category.

    Keys: capex_usd, power_w, capex_<category>_usd, power_<category>_w, and
    capex_per_gpu_usd when `gpus` is given; with cluster-scope items also
    network_capex_usd and network_power_w (switches, NICs and cables together).
    """
    out: dict[str, float] = {
        "capex_usd": float(items["capex_usd"].sum()),
        "power_w": float(items["power_w"].sum()),
    }
    for cat, grp in items.groupby("category", sort=False):
        out[f"capex_{cat}_usd"] = float(grp["capex_usd"].sum())
        out[f"power_{cat}_w"] = float(grp["power_w"].sum())
    if set(items["category"]) - set(NETWORK_CATEGORIES):
        net = items[items["category"].isin(NETWORK_CATEGORIES)]
        out["network_capex_usd"] = float(net["capex_usd"].sum())
        out["network_power_w"] = float(net["power_w"].sum())
    if gpus:
        out["capex_per_gpu_usd"] = out["capex_usd"] / gpus
    return out
