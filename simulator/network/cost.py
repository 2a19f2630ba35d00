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
    return float(edge["bandwidth_bytes_per_s"]) * 8 / 1e9 / int(edge.get("links", 1))


def _is_scale_out_switch(d: dict[str, Any]) -> bool:
    return d.get("kind") == "switch" and int(d.get("tier", 1)) >= 1


def _same_server(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("node") is not None and a.get("node") == b.get("node")


def _switch_item(g: nx.Graph, n: str, d: dict[str, Any], prices: PriceSpec) -> _Item | None:
    """A scale-out switch priced as ports x port price at the speed of its fastest cable."""
    edges = list(g.adj[n].values())
    if not edges:
        return None
    speed = max(_gbps(e) for e in edges)
    medium = Counter(e["medium"] for e in edges).most_common(1)[0][0]
    ports = int(d.get("radix") or d.get("ports") or sum(int(e.get("links", 1)) for e in edges))
    key = medium if medium in prices.switch_port_usd else "ethernet"
    port_usd = (
        lookup(prices.speed_table("switch_port_usd", key), speed) if key in prices.switch_port_usd else 0.0
    )
    port_w = lookup(prices.speed_table("switch_port_power_w"), speed)
    kind = f"{ports}-port" if d.get("radix") else f"{ports} x"
    item = f"{d.get('role', 'switch')} switch, {kind} {speed:g}G {medium}"
    return ("switches", item, ports * port_usd, ports * port_w)


def _nic_item(
    g: nx.Graph, n: str, prices: PriceSpec, by_speed: dict[float, _Item] | None = None
) -> _Item | None:
    """A NIC with a scale-out link, priced at the speed of its fastest such link (items
    already priced kept in `by_speed`, by speed)."""
    nodes = g.nodes
    out = [
        e
        for nb, e in g.adj[n].items()
        if e["medium"] in ("ib", "ethernet") or _is_scale_out_switch(nodes[nb])
    ]
    if not out:
        return None
    speed = max(_gbps(e) for e in out)
    if by_speed is not None and speed in by_speed:
        return by_speed[speed]
    item = (
        "nics",
        f"NIC {speed:g}G",
        lookup(prices.speed_table("nic_usd"), speed),
        lookup(prices.speed_table("nic_power_w"), speed),
    )
    if by_speed is not None:
        by_speed[speed] = item
    return item


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
    nics: dict[float, _Item] = {}
    for n, d in g.nodes(data=True):
        if _is_scale_out_switch(d):
            item = _switch_item(g, n, d, prices)
        elif d.get("kind") == "nic":
            item = _nic_item(g, n, prices, nics)
        else:
            item = None
        if item is not None:
            items[item] += 1
    nodes = g.nodes
    # a cable's item depends only on these attributes of its ends and edge: price each
    # distinct combination once (tens of thousands of cables, a handful of kinds)
    priced: dict[tuple[Any, ...], _Item | None] = {}
    ends = {n: tuple(d.get(k) for k in _CABLE_END_KEYS) for n, d in g.nodes(data=True)}
    server = {n: d.get("node") for n, d in g.nodes(data=True)}
    medium, reach, bandwidth, links = _CABLE_EDGE_KEYS
    for u, v, e in g.edges(data=True):
        if server[u] is not None and server[u] == server[v]:
            continue  # inside a server: no cable (`_cable_item`), whatever the rest
        key = (ends[u], ends[v], e.get(medium), e.get(reach), e.get(bandwidth), e.get(links))
        if key in priced:
            item = priced[key]
        else:
            item = priced[key] = _cable_item(nodes[u], nodes[v], e, prices)
        if item is not None:
            items[item] += int(e.get("links", 1))
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
