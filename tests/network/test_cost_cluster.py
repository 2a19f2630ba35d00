"""Whole-cluster capex by part, and one-line errors for bad price tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.commands.topo import _cost_table
from simulator.config.loader import load
from simulator.errors import InputError
from simulator.network.cost import DEFAULT_PRICES, cost_summary, estimate_cost, load_prices
from simulator.network.design.clos import SuperPodSpec
from simulator.network.design.registry import build_design
from simulator.network.design.storage import StorageSpec
from simulator.network.hardware import GPUSpec
from simulator.network.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
H100 = load(GPUSpec, ROOT / "topologies" / "gpus" / "h100-sxm.yaml")
TEXT = DEFAULT_PRICES.read_text()


@pytest.fixture(scope="module")
def prices():
    return load_prices()


def test_cluster_items_count_every_part(prices) -> None:
    """2 servers x 8 H100 with one storage server: GPUs, slots, storage priced once each."""
    storage = StorageSpec(nodes=1, nics_per_node=2, nic_gbps=400, write_gbyte_per_s=40, read_gbyte_per_s=80)
    g = build_design(SuperPodSpec(nodes=2, su_size=2, storage=storage), H100)
    items = estimate_cost(g, prices, scope="cluster")
    by_cat = items.groupby("category")["quantity"].sum()
    assert by_cat["gpus"] == 16 and by_cat["servers"] == 16 and by_cat["storage"] == 1
    gpu_usd = prices.gpu_usd["H100 SXM5 80GB"].value
    slot_usd = prices.server_per_gpu_usd["H100 SXM5 80GB"].value
    s = cost_summary(items, gpus=16)
    assert s["capex_gpus_usd"] == pytest.approx(16 * gpu_usd)
    assert s["capex_servers_usd"] == pytest.approx(16 * slot_usd)
    assert s["capex_storage_usd"] == pytest.approx(prices.storage_server_usd.value)
    assert s["power_gpus_w"] == pytest.approx(16 * 700)  # tdp_w of the H100 file
    network = cost_summary(estimate_cost(g, prices))  # network scope: the same network parts
    assert s["network_capex_usd"] == pytest.approx(network["capex_usd"])
    parts = sum(
        v for k, v in s.items() if re.fullmatch(r"capex_(gpus|servers|storage|switches|nics|cables)_usd", k)
    )
    assert s["capex_usd"] == pytest.approx(parts)


def test_fixed_radix_switch_is_priced_whole(prices) -> None:
    """A switch with `radix` is bought whole: radix x port price even with ports unused."""
    import networkx as nx

    g = nx.Graph()
    g.add_node("sw", kind="switch", tier=1, role="leaf", ports=3, radix=64)
    for i in range(3):
        g.add_node(f"n{i}.nic0", kind="nic", node=f"n{i}")
        g.add_edge(f"n{i}.nic0", "sw", bandwidth_bytes_per_s=50e9, latency_s=0.0, medium="ib")
    items = estimate_cost(g, prices)
    sw = items[items.category == "switches"].iloc[0]
    assert sw["unit_usd"] == pytest.approx(64 * prices.switch_port_usd["ib"][400].value)
    assert sw["item"] == "leaf switch, 64-port 400G ib"


def _bad(tmp_path: Path, old: str, new: str) -> Path:
    assert old in TEXT, old
    p = tmp_path / "prices.yaml"
    p.write_text(TEXT.replace(old, new, 1))
    return p


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


BAD = [
    (
        "  400: {value: 1800, source: cx7",
        "  400: {value: -1800, source: cx7",
        "nic_usd.400.value",
        "400: {value: -1800",
    ),
    ("pue: {value: 1.2", "pue: {value: 0.95", "facility.pue", "  pue: {"),
    (
        "network_static_fraction: {value: 0.8",
        "network_static_fraction: {value: 3.0",
        "power.network_static_fraction",
        "network_static_fraction: {",
    ),
    (
        "gpu_idle_fraction: {value: 0.12",
        "gpu_idle_fraction: {value: 1.5",
        "power.gpu_idle_fraction",
        "gpu_idle_fraction",
    ),
    ("[0.3, 0.75], [0.6, 1.0]", "[0.3, 0.95], [0.6, 0.8]", "power.gpu_compute_curve.points", "[0.3, 0.95]"),
    (
        "  400: {value: 25, source: cx7",
        "  400: {value: 25, source: nowhere",
        "nic_power_w.400.source",
        "source: nowhere",
    ),
    (  # the pattern YYYY-MM held; month 13 was read as a date
        "H100 SXM5 80GB: {value: 27500, source: gpu-analyst, date: 2024-06}",
        "H100 SXM5 80GB: {value: 27500, source: gpu-analyst, date: 2024-13}",
        "gpu_usd.H100 SXM5 80GB.date",
        "date: 2024-13",
    ),
]


@pytest.mark.parametrize(("old", "new", "field", "needle"), BAD, ids=[b[2] for b in BAD])
def test_bad_price_file_names_file_line_field(tmp_path, old, new, field, needle) -> None:
    p = _bad(tmp_path, old, new)
    with pytest.raises(InputError) as exc:
        load_prices(p)
    err = exc.value
    assert (err.file, err.line, err.field) == (str(p), _line_of(p, needle), field)
    assert err.message[0].islower() and "pUE" not in err.message, err.message


def test_part_with_no_price_names_its_table(tmp_path) -> None:
    p = _bad(tmp_path, "  H100 SXM5 80GB: {value: 27500", "  H100 PCIe: {value: 27500")
    prices = load_prices(p)
    g = build_design(SuperPodSpec(nodes=1), H100)
    with pytest.raises(InputError, match="no price for GPU 'H100 SXM5 80GB'") as exc:
        estimate_cost(g, prices, scope="cluster")
    assert exc.value.line == _line_of(p, "gpu_usd:") and exc.value.field == "gpu_usd"


def test_topo_command_shows_parts_and_exits_2_on_bad_prices(tmp_path, prices) -> None:
    runner = CliRunner()
    topo = str(ROOT / "topologies" / "h100-rail-clos-2n.yaml")
    ok = runner.invoke(app, ["topo", topo, "-o", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    g = load_topology(topo).graph
    items = estimate_cost(g, prices, scope="cluster")
    console = Console(width=200, record=True)
    console.print(_cost_table(items, cost_summary(items, 16), "USD", "prices.yaml"))
    text = console.export_text()
    for part in ("gpus total", "servers total", "switches total", "nics total", "cables total", "network"):
        assert part in text
    p = _bad(tmp_path, "pue: {value: 1.2", "pue: {value: 0.5")
    bad = runner.invoke(app, ["topo", topo, "-o", str(tmp_path), "--prices", str(p)])
    assert bad.exit_code == 2
    assert f"{p}:{_line_of(p, '  pue: {')}: facility.pue:" in bad.output.replace("\n", "")
