"""A straggler or a degraded link is slow, not down: a slowdown past 1e6 or a bandwidth
factor under 1e-6 is refused at its line (1e300 and 1e-300 simulated a step of 1e299 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
HEAD = f"""\
name: slow
topology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}
workload: {{file: {ROOT}/workloads/traces/dp16-gpt1p3b-step.yaml}}
"""
POLICY = (
    "policy: {kind: checkpoint_restart, interval: daly}\n"
    "reliability: {duration_days: 3, seeds: 1, checkpoint_gbyte: 18.2, storage_gbyte_per_s: 10}\n"
)


@pytest.mark.parametrize(
    ("block", "where"),
    [
        ("state:\n  stragglers: [{gpu: n1.gpu2, slowdown: 1.0e300}]\n", "5: state.stragglers.0.slowdown"),
        (
            "state:\n  degraded_links: [{link: [n0.nic3, leaf3.0], factor: 1.0e-300}]\n",
            "5: state.degraded_links.0.factor",
        ),
        (
            "degradations:\n  - {kind: straggler, mtbe_h: 50, duration_h: 1, slowdown: 1.0e300}\n" + POLICY,
            "5: degradations.0.slowdown",
        ),
        (
            "degradations:\n  - {kind: degraded_link, mtbe_h: 50, duration_h: 1, "
            "bandwidth_factor: 1.0e-300}\n" + POLICY,
            "5: degradations.0.bandwidth_factor",
        ),
    ],
)
def test_a_slowdown_beyond_any_machine_is_one_line(tmp_path: Path, block: str, where: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + block)
    r = CliRunner().invoke(app, ["validate", str(path)])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and f"s.yaml:{where}:" in lines[0], r.output
    path.write_text(HEAD + block.replace("1.0e300", "1.0e6").replace("1.0e-300", "1.0e-6"))
    assert CliRunner().invoke(app, ["validate", str(path)]).exit_code == 0
