"""`clustersim topo FILE -o DIR` through typer's CliRunner."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from simulator.commands.topo import register

TOPOLOGIES = Path(__file__).resolve().parents[2] / "topologies"


def make_app() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:
        """Test app."""

    return app


def test_topo_prints_facts_and_cost_and_writes_html(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        make_app(), ["topo", str(TOPOLOGIES / "h100-rail-only-32n.yaml"), "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "Topology facts" in result.output and "bisection" in result.output
    assert "total" in result.output
    html = (tmp_path / "h100-rail-only-32n.html").read_text()
    assert "plotly" in html and "<script" in html
    assert '<script src="https://cdn' not in html  # plotly.js embedded, works offline


def test_topo_bad_file_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    gpu = TOPOLOGIES / "gpus/h100-sxm.yaml"
    bad.write_text(f"name: bad\ngenerator: fat_tree\ngpu: {{file: {gpu}}}\nk: 5\n")
    result = CliRunner().invoke(make_app(), ["topo", str(bad), "-o", str(tmp_path)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "k must be even" in lines[0]
    assert "Traceback" not in result.output
    assert not list(tmp_path.glob("*.html"))


def test_topo_accepts_spine_topology_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        make_app(), ["topo", str(TOPOLOGIES / "h100-rail-clos-2n.yaml"), "-o", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "max-flow" in result.output


def test_topo_missing_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(make_app(), ["topo", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2
    assert "file not found" in result.output
