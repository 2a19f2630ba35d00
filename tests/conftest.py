"""Shared fixtures: paths to the catalogs, the shipped calibration samples, a small compare
file and the CLI app with a wide console."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def samples() -> Path:
    """The folder of the shipped sample logs."""
    return ROOT / "topologies" / "calibration" / "samples"


QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def compare_without_the_gpus_price(tmp_path: Path, cost: str = "") -> Path:
    """A one-variant comparison of the quickstart (1 step) whose own price table is the
    shipped one without the H100's price; `cost` adds keys to its `cost` mapping."""
    table = (ROOT / "topologies/prices.yaml").read_text()
    line = "  H100 SXM5 80GB: {value: 27500, source: gpu-analyst, date: 2024-06}\n"
    assert table.count(line) == 1
    (tmp_path / "prices.yaml").write_text(table.replace(line, ""))
    path = tmp_path / "c.yaml"
    path.write_text(
        f"name: t\nbase: {{file: {QUICKSTART}}}\n"
        f"cost: {{prices: {{file: prices.yaml}}{cost}}}\n"
        "variants:\n  - name: a\n    run: {steps: 1}\n"
    )
    return path


SMALL = f"""\
name: small
description: quickstart with three all-reduce algorithms
base: {{file: {QUICKSTART}}}
variants:
  - name: ring
  - name: tree
    network: {{algorithms: {{all_reduce: tree}}}}
  - name: hier-1step
    network: {{algorithms: {{all_reduce: hierarchical}}}}
    run: {{steps: 1}}
"""


@pytest.fixture
def small_compare(tmp_path: Path) -> Path:
    path = tmp_path / "compare-small.yaml"
    path.write_text(SMALL)
    return path


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> Iterator[typer.Typer]:
    """The `clustersim` app, with a console wide enough that CliRunner output is not wrapped;
    a `--format` given to it does not outlive the test (apps built without the root option
    print tables)."""
    from simulator.commands import common
    from simulator.commands.app import app as clustersim

    monkeypatch.setattr(common.console, "width", 250)  # CliRunner has no terminal
    monkeypatch.setattr(common.err_console, "width", 250)
    yield clustersim
    common.set_output_format("table")
