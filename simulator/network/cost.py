"""Capital cost and power of a topology's scale-out network, from an editable price table.

What is priced: every scale-out switch (tier >= 1) as ports x port price at the speed of
its fastest cable, every NIC that has a scale-out link, and every cable between two
different servers or switches (the edge attribute `links` counts parallel cables), by
reach class (`dac` in-rack copper, `aoc` within a row, `optics` transceivers plus fibre).
A cable's reach comes from the edge attribute `reach` set by the design builders;
without it, links touching a tier >= 2 switch count as optics, the rest as AOC.

What is not: servers, GPUs and everything inside a server (NVSwitch, PCIe switches,
NVLink/xGMI/PCIe traces), racks, management and frontend networks not in the graph.
Prices for a speed not in the table use the next listed speed up, or the fastest listed
scaled linearly. All prices are illustrative unless the user's table says otherwise.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.config.loader import load

REACHES = ("dac", "aoc", "optics")
DEFAULT_PRICES = Path(__file__).resolve().parents[2] / "topologies" / "prices.yaml"

SpeedTable = dict[float, float]


class PriceSpec(Spec):
    """Price and power table (USD, watts), keyed by port speed in Gbit/s."""

    currency: str = Field("USD", description="Currency of every price in the table.")
    switch_port_usd: dict[str, SpeedTable] = Field(
        description="Price of one switch port, by medium (ib, ethernet, ...) then speed (Gbit/s)."
    )
    switch_port_power_w: SpeedTable = Field(
        description="Switch power per port without optics, watts, by speed (Gbit/s)."
    )
    nic_usd: SpeedTable = Field(description="Price of one NIC, by port speed (Gbit/s).")
    nic_power_w: SpeedTable = Field(description="Power of one NIC, watts, by speed (Gbit/s).")
    cable_usd: dict[str, SpeedTable] = Field(
        description="Price of one cable with both ends, by reach (dac, aoc, optics) then speed."
    )
    cable_power_w: dict[str, SpeedTable] = Field(
        description="Power of one cable's two ends, watts, by reach (dac, aoc, optics) then speed."
    )

    @model_validator(mode="after")
    def _check(self) -> PriceSpec:
        tables: list[tuple[str, SpeedTable]] = [
            ("switch_port_power_w", self.switch_port_power_w),
            ("nic_usd", self.nic_usd),
            ("nic_power_w", self.nic_power_w),
        ]
        tables += [(f"switch_port_usd.{k}", v) for k, v in self.switch_port_usd.items()]
        for name in ("cable_usd", "cable_power_w"):
            table = getattr(self, name)
            missing = [r for r in REACHES if r not in table]
            if missing:
                raise ValueError(f"{name} lacks reach class(es) {missing}")
            tables += [(f"{name}.{k}", v) for k, v in table.items()]
        for name, t in tables:
            if not t:
                raise ValueError(f"{name} is empty; give at least one speed")
            if any(s <= 0 for s in t) or any(v < 0 for v in t.values()):
                raise ValueError(f"{name}: speeds must be > 0 and values >= 0")
        return self


def load_prices(path: str | Path | None = None) -> PriceSpec:
    """Load a price table (default: `topologies/prices.yaml` of this checkout)."""
    return load(PriceSpec, path or DEFAULT_PRICES)


def lookup(table: SpeedTable, gbps: float) -> float:
    """Value for a speed: the next listed speed up, or the fastest scaled linearly."""
    speeds = sorted(table)
    for s in speeds:
        if s >= gbps - 1e-9:
            return table[s]
    top = speeds[-1]
    return table[top] * gbps / top


def _gbps(edge: dict[str, Any]) -> float:
    return float(edge["bandwidth_bytes_per_s"]) * 8 / 1e9 / int(edge.get("links", 1))


def _is_scale_out_switch(d: dict[str, Any]) -> bool:
    return d.get("kind") == "switch" and int(d.get("tier", 1)) >= 1


def _same_server(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("node") is not None and a.get("node") == b.get("node")


COLUMNS = ["category", "item", "quantity", "unit_usd", "capex_usd", "unit_power_w", "power_w"]


# A line item: (category, item, unit price in USD, unit power in W); the Counter counts units.
_Item = tuple[str, str, float, float]
_CATEGORY_ORDER = {"switches": 0, "nics": 1, "cables": 2}


def _switch_item(g: nx.Graph, n: str, d: dict[str, Any], prices: PriceSpec) -> _Item | None:
    """A scale-out switch priced as ports x port price at the speed of its fastest cable."""
    edges = list(g.adj[n].values())
    if not edges:
        return None
    speed = max(_gbps(e) for e in edges)
    medium = Counter(e["medium"] for e in edges).most_common(1)[0][0]
    ports = int(d.get("ports") or sum(int(e.get("links", 1)) for e in edges))
    table = prices.switch_port_usd.get(medium) or prices.switch_port_usd.get("ethernet")
    port_usd = lookup(table, speed) if table else 0.0
    item = f"{d.get('role', 'switch')} switch, {ports} x {speed:g}G {medium}"
    return ("switches", item, ports * port_usd, ports * lookup(prices.switch_port_power_w, speed))


def _nic_item(g: nx.Graph, n: str, prices: PriceSpec) -> _Item | None:
    """A NIC with a scale-out link, priced at the speed of its fastest such link."""
    nodes = g.nodes
    out = [
        e
        for nb, e in g.adj[n].items()
        if e["medium"] in ("ib", "ethernet") or _is_scale_out_switch(nodes[nb])
    ]
    if not out:
        return None
    speed = max(_gbps(e) for e in out)
    return ("nics", f"NIC {speed:g}G", lookup(prices.nic_usd, speed), lookup(prices.nic_power_w, speed))


def _cable_item(du: dict[str, Any], dv: dict[str, Any], e: dict[str, Any], prices: PriceSpec) -> _Item | None:
    """One cable of edge `e` between nodes `du` and `dv`; none inside a server or over PCIe."""
    if _same_server(du, dv) or e["medium"] == "pcie":
        return None
    reach = e.get("reach")
    if reach not in REACHES:
        top = (
            max(int(x.get("tier", 0)) for x in (du, dv) if x.get("kind") == "switch")
            if du.get("kind") == "switch" or dv.get("kind") == "switch"
            else 1
        )
        reach = "optics" if top >= 2 else "aoc"
    speed = _gbps(e)
    return (
        "cables",
        f"{reach} {speed:g}G",
        lookup(prices.cable_usd[reach], speed),
        lookup(prices.cable_power_w[reach], speed),
    )


def estimate_cost(g: nx.Graph, prices: PriceSpec) -> pd.DataFrame:
    """Line items of the network's capex and power.

    Returns:
        DataFrame with columns category (switches, nics, cables), item, quantity,
        unit_usd, capex_usd, unit_power_w, power_w; one row per distinct item.
    """
    items: Counter[_Item] = Counter()
    for n, d in g.nodes(data=True):
        if _is_scale_out_switch(d):
            item = _switch_item(g, n, d, prices)
        elif d.get("kind") == "nic":
            item = _nic_item(g, n, prices)
        else:
            item = None
        if item is not None:
            items[item] += 1
    for u, v, e in g.edges(data=True):
        item = _cable_item(g.nodes[u], g.nodes[v], e, prices)
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
    rows.sort(key=lambda r: (_CATEGORY_ORDER[r["category"]], r["item"]))
    return pd.DataFrame(rows, columns=COLUMNS)


def cost_summary(items: pd.DataFrame, gpus: int | None = None) -> dict[str, float]:
    """Totals of `estimate_cost` line items: capex and power, overall and by category.

    Keys: capex_usd, power_w, capex_<category>_usd, power_<category>_w, and
    capex_per_gpu_usd when `gpus` is given.
    """
    out: dict[str, float] = {
        "capex_usd": float(items["capex_usd"].sum()),
        "power_w": float(items["power_w"].sum()),
    }
    for cat, grp in items.groupby("category", sort=False):
        out[f"capex_{cat}_usd"] = float(grp["capex_usd"].sum())
        out[f"power_{cat}_w"] = float(grp["power_w"].sum())
    if gpus:
        out["capex_per_gpu_usd"] = out["capex_usd"] / gpus
    return out
