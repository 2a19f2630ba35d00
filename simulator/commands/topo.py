"""`clustersim topo FILE [-o DIR]`: facts, cost and an offline drawing of a topology file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from simulator.commands.common import console, fail
from simulator.errors import ClustersimError
from simulator.io import write_atomic


def _si(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _facts_table(facts: dict[str, Any]) -> Table:
    t = Table(title=f"Topology facts: {facts['name']}", show_header=True)
    t.add_column("fact")
    t.add_column("value", justify="right")
    for key in ("gpus", "servers", "nics", "storage", "switches", "scale_out_switches"):
        t.add_row(key, str(facts[key]))
    for key in ("switches_by_tier", "switches_by_role", "links_by_medium"):
        t.add_row(key, ", ".join(f"{k}: {v}" for k, v in facts[key].items()) or "-")
    t.add_row("bisection", _si(facts["bisection_bytes_per_s"], "B/s"))
    t.add_row("bisection per GPU", _si(facts["bisection_per_gpu_bytes_per_s"], "B/s"))
    t.add_row("bisection method", facts["bisection_method"])
    t.add_row("diameter (switch hops)", str(facts["diameter_switch_hops"]))
    t.add_row("diameter (links)", str(facts["diameter_links"]))
    t.add_row("diameter method", facts["diameter_method"])
    over = ", ".join(
        f"tier {k}: {v:.2f}:1" for k, v in facts["oversubscription_by_tier"].items() if v is not None
    )
    t.add_row("oversubscription", over or "-")
    return t


def _cost_table(items: Any, summary: dict[str, float], currency: str) -> Table:
    t = Table(title=f"Network capex and power ({currency}, illustrative prices)")
    for col in ("category", "item", "quantity", "unit", "capex", "power"):
        t.add_column(col, justify="left" if col in ("category", "item") else "right")
    for r in items.itertuples():
        t.add_row(
            r.category,
            r.item,
            str(r.quantity),
            f"{r.unit_usd:,.0f}",
            f"{r.capex_usd:,.0f}",
            f"{r.power_w / 1e3:,.1f} kW",
        )
    t.add_row(
        "total",
        "",
        "",
        "",
        f"{summary['capex_usd']:,.0f}",
        f"{summary['power_w'] / 1e3:,.1f} kW",
        style="bold",
    )
    if "capex_per_gpu_usd" in summary:
        t.add_row("per GPU", "", "", "", f"{summary['capex_per_gpu_usd']:,.0f}", "")
    return t


def topo(
    file: Annotated[Path, typer.Argument(help="Topology file (any generator, or a graph file).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the HTML drawing.")] = Path(
        "results/topo"
    ),
    prices: Annotated[
        Path | None,
        typer.Option("--prices", help="Price table (default: topologies/prices.yaml)."),
    ] = None,
) -> None:
    """Print a topology's facts and network cost, and write an offline HTML drawing."""
    # heavy imports here keep `clustersim --help` fast
    from simulator.network.cost import cost_summary, estimate_cost, load_prices
    from simulator.network.facts import topology_facts
    from simulator.network.topology import load_topology
    from simulator.viz.topology import topology_figure

    try:
        g = load_topology(file).graph
        price_spec = load_prices(prices)
    except ClustersimError as err:
        fail(err)
    facts = topology_facts(g)
    items = estimate_cost(g, price_spec)
    summary = cost_summary(items, facts["gpus"])
    console.print(_facts_table(facts))
    console.print(_cost_table(items, summary, price_spec.currency))
    html = topology_figure(g).to_html(include_plotlyjs=True, full_html=True)
    target = out / f"{file.stem}.html"
    write_atomic(target, html)
    console.print(f"drawing: {target}")


def register(app: typer.Typer) -> None:
    """Add the `topo` command to the CLI."""
    app.command("topo")(topo)
