"""`clustersim topo FILE [-o DIR]`: facts, cost and an offline drawing of a topology file;
and `clustersim schema topology`: every generator's parameters with descriptions and units,
and the NIC presets a topology file may name (`topology_schema_tables`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from simulator.commands.common import fail, print_table, say
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


def _cost_table(items: Any, summary: dict[str, float], currency: str, prices_file: str) -> Table:
    t = Table(title=f"Cluster capex and rated power by part ({currency}, prices: {prices_file})")
    for col in ("category", "item", "quantity", "unit", "capex", "share", "power"):
        t.add_column(col, justify="left" if col in ("category", "item") else "right")
    total = summary["capex_usd"] or 1.0
    for cat, grp in items.groupby("category", sort=False):
        for r in grp.itertuples():
            t.add_row(
                r.category,
                r.item,
                str(r.quantity),
                f"{r.unit_usd:,.0f}",
                f"{r.capex_usd:,.0f}",
                "",
                f"{r.power_w / 1e3:,.1f} kW",
            )
        t.add_row(
            f"{cat} total",
            "",
            "",
            "",
            f"{summary[f'capex_{cat}_usd']:,.0f}",
            f"{summary[f'capex_{cat}_usd'] / total:.1%}",
            f"{summary[f'power_{cat}_w'] / 1e3:,.1f} kW",
            style="italic",
        )
    if "network_capex_usd" in summary:
        t.add_row(
            "network",
            "switches + NICs + cables",
            "",
            "",
            f"{summary['network_capex_usd']:,.0f}",
            f"{summary['network_capex_usd'] / total:.1%}",
            f"{summary['network_power_w'] / 1e3:,.1f} kW",
            style="italic",
        )
    t.add_row(
        "total",
        "",
        "",
        "",
        f"{summary['capex_usd']:,.0f}",
        "100%",
        f"{summary['power_w'] / 1e3:,.1f} kW",
        style="bold",
    )
    if "capex_per_gpu_usd" in summary:
        t.add_row("per GPU", "", "", "", f"{summary['capex_per_gpu_usd']:,.0f}", "", "")
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
    """Print a topology's facts and its capex by part (GPUs, servers, storage, network), and
    write an offline HTML drawing."""
    # heavy imports here keep `clustersim --help` fast
    from simulator.network.cost import cost_summary, estimate_cost, load_prices
    from simulator.network.facts import topology_facts
    from simulator.network.topology import load_topology
    from simulator.viz.topology import topology_figure

    try:
        g = load_topology(file).graph
        price_spec = load_prices(prices)
        items = estimate_cost(g, price_spec, scope="cluster")
    except ClustersimError as err:
        fail(err)
    facts = topology_facts(g)
    summary = cost_summary(items, facts["gpus"])
    print_table(_facts_table(facts))
    print_table(_cost_table(items, summary, price_spec.currency, str(prices or "topologies/prices.yaml")))
    html = topology_figure(g).to_html(include_plotlyjs=True, full_html=True)
    target = out / f"{file.stem}.html"
    write_atomic(target, html)
    say(f"drawing: {target}")


#: display unit of a parameter, from its name's suffix (the human units of topology files)
_UNIT_OF_SUFFIX = (
    ("_gbyte_per_s", "GB/s"),
    ("_tbyte_per_s", "TB/s"),
    ("_gbps", "Gbit/s"),
    ("_us", "µs"),
    ("_ms", "ms"),
    ("_gbyte", "GB"),
    ("_tbyte", "TB"),
    ("_w", "W"),
)


def unit_of(name: str) -> str:
    """The unit a topology parameter is given in, read from its name ('' when unitless)."""
    return next((unit for suffix, unit in _UNIT_OF_SUFFIX if name.endswith(suffix)), "")


def _type_text(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " | ".join(map(str, prop["enum"]))
    if "const" in prop:
        return str(prop["const"])
    if "anyOf" in prop:
        return " | ".join(_type_text(p) for p in prop["anyOf"])
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if prop.get("type") == "array":
        return f"list[{_type_text(prop.get('items', {}))}]"
    return str(prop.get("type", "any"))


def _params_table(title: str, model: Any) -> Table:
    """One row per parameter of a spec model: name, type, default, unit, description."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    t = Table(title=title, show_header=True, title_justify="left")
    for col in ("parameter", "type", "default", "unit", "description"):
        t.add_column(col, overflow="fold")
    for name, prop in schema.get("properties", {}).items():
        default = "(required)" if name in required else str(prop.get("default"))
        t.add_row(name, _type_text(prop), default, unit_of(name), prop.get("description", ""))
    return t


def topology_schema_tables() -> list[Table]:
    """Tables of every topology generator's parameters, the storage block and the NIC presets."""
    from simulator.network.design.registry import GENERATORS
    from simulator.network.design.storage import StorageSpec
    from simulator.network.hardware import nic_presets

    tables = []
    for name in sorted(GENERATORS):
        spec = GENERATORS[name].spec
        doc = (spec.__doc__ or "").strip().splitlines()[0]
        tables.append(_params_table(f"generator: {name} — {doc}", spec))
    tables.append(_params_table("storage: (inside a design) — StorageSpec", StorageSpec))
    t = Table(title="NIC presets (nic: NAME; topologies/nics/presets.yaml, sources.md beside it)")
    for col in ("nic", "Gbit/s per GPU", "ports x Gbit/s per server", "medium", "latency µs", "description"):
        t.add_column(col, overflow="fold")
    for name, p in sorted(nic_presets().items()):
        lat = "-" if p.latency_us is None else f"{p.latency_us:g}"
        t.add_row(
            name, f"{p.gbps_per_gpu:g}", f"{p.nics_per_node} x {p.port_gbps:g}", p.medium, lat, p.description
        )
    tables.append(t)
    return tables


def register(app: typer.Typer) -> None:
    """Add the `topo` command to the CLI."""
    app.command("topo")(topo)
