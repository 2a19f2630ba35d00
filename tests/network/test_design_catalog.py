"""Catalog: every design topology file in topologies/ validates, builds and has sane facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.network.design.registry import DESIGN_SPECS, build_design_file, load_design_file
from simulator.network.facts import topology_facts

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"
TAGS = {cls.model_fields["generator"].default for cls in DESIGN_SPECS}
# files written for the design generators (other topology files belong to the main loader)
DESIGN_FILES = sorted(
    p
    for p in TOPOLOGIES.glob("*.yaml")
    if p.name != "prices.yaml" and any(f"generator: {t}\n" in p.read_text() for t in TAGS)
)


def test_catalog_covers_every_design() -> None:
    used = {load_design_file(p)[0].generator for p in DESIGN_FILES}
    assert used == TAGS


@pytest.mark.parametrize("path", DESIGN_FILES, ids=lambda p: p.name)
def test_design_file_validates_and_builds(path: Path) -> None:
    spec, gpu = load_design_file(path)
    assert spec.name == path.stem
    g = build_design_file(path)
    assert g.graph["gpu"] == gpu
    facts = topology_facts(g)
    assert facts["gpus"] > 0 and facts["bisection_bytes_per_s"] > 0


@pytest.mark.parametrize("path", DESIGN_FILES, ids=lambda p: p.name)
def test_design_file_loads_through_the_main_topology_loader(path: Path) -> None:
    from simulator.network.topology import load_topology

    topo = load_topology(path)
    assert topo.name == path.stem
    assert topo.graph.graph["structure"]["design"] == load_design_file(path)[0].generator


def test_bad_design_file_names_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        f"generator: fat_tree\ngpu: {{file: {TOPOLOGIES / 'gpus/h100-sxm.yaml'}}}\nk: 4\nlink_gbs: 1\n"
    )
    with pytest.raises(InputError) as err:
        load_design_file(bad)
    assert str(err.value).startswith(f"{bad}:4: link_gbs: unknown key")


def test_missing_gpu_file_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("generator: torus\ngpu: {file: nowhere.yaml}\n")
    with pytest.raises(InputError, match="nowhere.yaml: file not found"):
        load_design_file(bad)


@pytest.mark.parametrize(
    ("text", "line", "field", "named", "message"),
    [
        ("gpu: {file: nowhere.yaml}\n", 2, "gpu.file", "nowhere.yaml", "file {p!r} not found"),
        ("gpu: {file: .}\n", 2, "gpu.file", "", "{p!r} is a folder; expected a file"),
        ("gpu: {file: GPU}\ngraph: {file: a.json}\n", 3, "graph.file", "a.json", "file {p!r} not found"),
    ],
)
def test_a_topology_naming_a_missing_file_says_where(
    tmp_path: Path, text: str, line: int, field: str, named: str, message: str
) -> None:
    """The GPU or graph file a topology names is missing: one line at the key naming it (it
    was `nowhere.yaml: file not found`, without the topology file, line or key)."""
    from simulator.network.topology import load_topology

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\n" + text.replace("GPU", str(TOPOLOGIES / "gpus/h100-sxm.yaml")))
    with pytest.raises(InputError) as err:
        load_topology(bad)
    expected = message.format(p=str(tmp_path / named) if named else str(tmp_path))
    assert str(err.value) == f"{bad}:{line}: {field}: {expected} (resolved relative to the topology file)"


def test_unbuildable_parameters_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    gpu = TOPOLOGIES / "gpus/h100-sxm.yaml"
    bad.write_text(f"generator: superpod\ngpu: {{file: {gpu}}}\nnodes: 64\nsu_size: 64\nswitch_radix: 64\n")
    with pytest.raises(InputError, match=r"bad.yaml: switch_radix: a leaf needs"):
        build_design_file(bad)
