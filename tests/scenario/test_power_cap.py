"""A power cap below the lowest point of the price table's power_cap_curve is refused at its
line: the curve was held at that point, so 1% of TDP computed at the 30% cap's speed while
the energy fell with the cap."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
HEAD = f"""\
name: capped
topology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}
workload: {{file: {ROOT}/workloads/traces/dp16-gpt1p3b-step.yaml}}
run: {{steps: 1}}
"""


@pytest.mark.parametrize("cap", ["0.01", "1.0e-300", "0.29"])
def test_a_cap_below_the_curve_is_one_line(tmp_path: Path, cap: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + f"compute: {{power_cap_fraction: {cap}}}\n")
    r = CliRunner().invoke(app, ["validate", str(path)])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert "s.yaml:5: compute.power_cap_fraction:" in lines[0] and "(0.3)" in lines[0]


def test_the_lowest_cap_of_the_curve_runs(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "compute: {power_cap_fraction: 0.3}\n")
    assert CliRunner().invoke(app, ["validate", str(path)]).exit_code == 0
