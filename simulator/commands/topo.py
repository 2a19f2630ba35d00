"""`clustersim topo FILE [-o DIR]`: facts, cost and an offline drawing of a topology file;
and `clustersim schema topology`: every generator's parameters with descriptions and units,
and the NIC presets a topology file may name (`topology_schema_tables`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from simulator.commands.common import fail, frame_records, print_tables, say
from simulator.errors import ClustersimError
from simulator.io import check_output_file, check_writable_folder, write_atomic


def _si(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _fact_rows(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts as printed (`fact`, `value`) and as data (`key` in `topology_facts`,
    `si_value`: its number or text, counts by kind as an object; `unit`), in print order."""
    rows: list[dict[str, Any]] = []

    def add(fact: str, shown: str, key: str, value: Any, unit: str) -> None:
        rows.append({"fact": fact, "value": shown, "key": key, "si_value": value, "unit": unit})

    for key in ("gpus", "servers", "nics", "storage", "switches", "scale_out_switches"):
        add(key, str(facts[key]), key, facts[key], "count")
    for key in ("switches_by_tier", "switches_by_role", "links_by_medium"):
        by = {str(k): v for k, v in facts[key].items()}
        add(key, ", ".join(f"{k}: {v}" for k, v in facts[key].items()) or "-", key, by, "count")
    for fact, key in (
        ("bisection", "bisection_bytes_per_s"),
        ("bisection per GPU", "bisection_per_gpu_bytes_per_s"),
    ):
        add(fact, _si(facts[key], "B/s"), key, facts[key], "B/s")
    add("bisection method", facts["bisection_method"], "bisection_method", facts["bisection_method"], "")
    for fact, key, unit in (
        ("diameter (switch hops)", "diameter_switch_hops", "hops"),
        ("diameter (links)", "diameter_links", "links"),
    ):
        add(fact, str(facts[key]), key, facts[key], unit)
    add("diameter method", facts["diameter_method"], "diameter_method", facts["diameter_method"], "")
    over_by = {str(k): v for k, v in facts["oversubscription_by_tier"].items() if v is not None}
    over = ", ".join(
        f"tier {k}: {v:.2f}:1" for k, v in facts["oversubscription_by_tier"].items() if v is not None
    )
    add("oversubscription", over or "-", "oversubscription_by_tier", over_by, "ratio")
    return rows


def _facts_table(name: str, rows: list[dict[str, Any]]) -> Table:
    """The facts as printed: one row per `_fact_rows` record (fact, value as shown)."""
    t = Table(title=f"Topology facts: {name}", show_header=True)
    t.add_column("fact")
    t.add_column("value", justify="right")
    for r in rows:
        t.add_row(r["fact"], r["value"])
    return t


def _cost_records(items: Any) -> list[dict[str, Any]]:
    """The cost line items as data (`--format csv|json`): one record per item, the numbers
    of `estimate_cost` (prices in the price table's currency, watts), without the totals."""
    return frame_records(items)


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
    write an offline HTML drawing.

    With --format json, one object with a "title" and "tables", a list of two tables: the facts
    and the cost line items (facts:
    fact, value, key, si_value, unit; items: category, item, quantity, unit_usd, capex_usd,
    unit_power_w, power_w, prices in the price table's currency). With --format csv, the cost
    line items only (the facts table goes to stderr); totals are their sums.
    """
    # heavy imports here keep `clustersim --help` fast
    from simulator.network.cost import cost_summary, estimate_cost, load_prices
    from simulator.network.facts import topology_facts
    from simulator.network.topology import load_topology
    from simulator.viz.topology import topology_figure

    target = out / f"{file.stem}.html"
    try:
        g = load_topology(file).graph
        price_spec = load_prices(prices)
        items = estimate_cost(g, price_spec, scope="cluster")
        check_writable_folder(out)  # once the inputs are read: a bad one leaves no folder behind
        check_output_file(target, [file])
    except ClustersimError as err:
        fail(err)
    facts = topology_facts(g)
    summary = cost_summary(items, facts["gpus"])
    fact_rows = _fact_rows(facts)
    cost = _cost_table(items, summary, price_spec.currency, str(prices or "topologies/prices.yaml"))
    print_tables(
        f"topology {facts['name']}",
        [(_facts_table(facts["name"], fact_rows), fact_rows), (cost, _cost_records(items))],
        1,
    )
    html = topology_figure(g).to_html(include_plotlyjs=True, full_html=True)
    try:
        write_atomic(target, html)
    except ClustersimError as err:
        fail(err)
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
    from simulator.network.topology import TopologyHeader

    tables = [_params_table("every topology file, beside its generator's parameters", TopologyHeader)]
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
