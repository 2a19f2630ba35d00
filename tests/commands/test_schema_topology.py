"""`clustersim schema topology` and NIC presets in topology files."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from simulator.commands.topo import unit_of
from simulator.errors import InputError
from simulator.network.design.registry import GENERATORS
from simulator.network.hardware import nic_presets
from simulator.network.topology import load_topology

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def test_schema_topology_lists_every_generator_parameter_with_description(app: typer.Typer) -> None:
    r = CliRunner().invoke(app, ["schema", "topology"], terminal_width=400)
    assert r.exit_code == 0, r.output
    out = r.output
    for name, gen in GENERATORS.items():
        assert f"generator: {name}" in out
        for field, info in gen.spec.model_fields.items():
            assert info.description, f"{name}.{field} has no description"
            assert f" {field} " in out
    for preset in nic_presets():
        assert preset in out
    # units are read from the names' suffixes and printed
    assert unit_of("nic_gbps") == "Gbit/s" and unit_of("hop_latency_us") == "µs"
    assert unit_of("xgmi_gbyte_per_s") == "GB/s" and unit_of("nodes") == ""
    assert "Gbit/s" in out and "µs" in out


def test_schema_topology_lists_the_keys_every_topology_file_has(app: typer.Typer) -> None:
    """name, description and gpu (required by every file, whatever its generator) are listed
    once, in a section of their own, with whether each is required."""
    import csv
    import io

    r = CliRunner().invoke(app, ["--format", "csv", "schema", "topology"])
    assert r.exit_code == 0, r.output
    table = csv.DictReader(io.StringIO(r.output))
    rows = [row for row in table if row["section"].startswith("every topology")]
    by_name = {row["parameter"]: row for row in rows}
    assert set(by_name) == {"name", "description", "gpu", "graph"}
    assert by_name["gpu"]["default"] == "(required)" and by_name["name"]["default"] == "(required)"


def test_every_preset_states_its_per_gpu_rate_consistently() -> None:
    for name, p in nic_presets().items():
        # gbps_per_gpu = port rate x ports per 8-GPU server / 8 (sources.md)
        assert p.gbps_per_gpu == pytest.approx(p.port_gbps * p.nics_per_node / 8), name
    sources = (TOPOLOGIES / "nics" / "sources.md").read_text()
    assert all(f"`{name}`" in sources for name in nic_presets())


def _topology(tmp_path: Path, extra: str) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(
        f"name: t\ngenerator: mi300x_cluster\ngpu: {{file: {TOPOLOGIES / 'gpus/mi300x.yaml'}}}\n"
        f"nodes: 2\nsu_size: 2\n{extra}"
    )
    return p


def _nic_rate_bytes_per_s(path: Path) -> float:
    g = load_topology(path).graph
    return next(d["bandwidth_bytes_per_s"] for u, v, d in g.edges(data=True) if d.get("medium") == "ethernet"
                and "nic" in u + v)  # fmt: skip


def test_nic_preset_sets_rate_and_explicit_numbers_still_work(tmp_path: Path) -> None:
    # efa-p4d: 4 x 100 Gb/s for 8 GPUs = 50 Gb/s per GPU = 6.25e9 B/s
    assert _nic_rate_bytes_per_s(_topology(tmp_path, "nic: efa-p4d\nmedium: ethernet\n")) == 50e9 / 8
    assert _nic_rate_bytes_per_s(_topology(tmp_path, "nic_gbps: 200\nmedium: ethernet\n")) == 200e9 / 8


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("nic: pollara-400\nnic_gbps: 400\n", "give either nic (pollara-400) or nic_gbps, not both"),
        ("nic: connectx7-400g-ib\nmedium: ethernet\n", "medium 'ethernet' contradicts NIC preset"),
        ("nic: connectx9\n", "unknown NIC preset 'connectx9'; expected one of"),
    ],
)
def test_bad_nic_preset_is_one_line_error(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(InputError) as exc:
        load_topology(_topology(tmp_path, extra))
    assert message in str(exc.value) and str(exc.value).startswith(str(tmp_path / "t.yaml"))


def test_rail_clos_takes_a_preset(tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text(
        f"name: r\ngenerator: rail_clos\ngpu: {{file: {TOPOLOGIES / 'gpus/h100-sxm.yaml'}}}\n"
        "nodes: 2\nservers_per_leaf: 2\nnic: gcp-tcpxo\n"
    )
    g = load_topology(p).graph
    rates = {d["bandwidth_bytes_per_s"] for u, v, d in g.edges(data=True) if d.get("medium") == "ethernet"}
    assert 200e9 / 8 in rates
