"""Failures and degradations are simulated by the run level: without a `policy` they are
refused, not silently ignored; a `reliability` block alone is only a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
HEAD = f"""\
name: faulty
topology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}
workload: {{file: {ROOT}/workloads/traces/dp16-gpt1p3b-step.yaml}}
"""
RELIABILITY = "reliability: {duration_days: 3, seeds: 1, checkpoint_gbyte: 18.2, storage_gbyte_per_s: 10}\n"


@pytest.mark.parametrize(
    ("block", "key", "what"),
    [
        ("failures:\n  - {kind: exponential, target: gpu, mtbf_h: 1000}\n", "failures", "failures are"),
        (
            "degradations:\n  - {kind: straggler, mtbe_h: 50, duration_h: 1, slowdown: 1.5}\n",
            "degradations",
            "degradations are",
        ),
        ("preset: llama3_405b\n", "preset", "a failure preset is"),
    ],
)
def test_faults_without_a_policy_are_one_line_at_their_key(tmp_path, block, key, what):
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + block + RELIABILITY)
    out = tmp_path / "out"
    for args in (["validate", str(path)], ["run", str(path), "-o", str(out)]):
        r = CliRunner().invoke(app, args)
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert r.exit_code == 2 and lines == [
            f"error: {path}:4: {key}: {what} simulated only under a fault-tolerance `policy` (the "
            "run level): without one this scenario runs the step only; give a policy, e.g. "
            "{kind: checkpoint_restart}, or remove them"
        ], r.output
    assert not out.exists()


def test_reliability_alone_runs_the_step_with_a_warning(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + RELIABILITY)
    r = CliRunner().invoke(app, ["run", str(path), "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    warnings = [ln for ln in r.output.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        "warning: reliability is read by the run level (a `policy`) and by a study's from_scenario, "
        "not by this run: it simulates the step only"
    ]
    assert not (tmp_path / "out" / "runs.parquet").exists()


def test_a_scheduled_failure_after_the_runs_end_is_one_line_at_its_time(tmp_path):
    """A 3-day run (72 h) with a failure scheduled at 100 h: it would be dropped without a
    word; it is refused at its `at_h`, whichever item of the list it is, and so is one at
    72 h. At 70 h it runs."""
    policy = "policy: {kind: checkpoint_restart, interval: daly}\n"
    path = tmp_path / "s.yaml"
    for at_h, code in ((100, 2), (70, 0)):
        failures = (
            "failures:\n  - {kind: exponential, target: gpu, mtbf_h: 1000, repair_h: 4}\n"
            f"  - {{kind: scheduled, target: host, at_h: [1, {at_h}], repair_h: 4}}\n"
        )
        path.write_text(HEAD + failures + policy + RELIABILITY)
        r = CliRunner().invoke(app, ["validate", str(path)])
        assert r.exit_code == code, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1
    path.write_text(HEAD + failures.replace("70]", "100]") + policy + RELIABILITY)
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert [ln for ln in r.output.splitlines() if ln.strip()] == [
        f"error: {path}:6: failures.1.at_h: a failure at 100 h is not before the run's end (72 h): "
        "it would never happen"
    ]
    # at the end itself: the samplers keep times before it (it passed with `>`)
    path.write_text(HEAD + failures.replace("70]", "72]") + policy + RELIABILITY)
    r = CliRunner().invoke(app, ["validate", str(path)])
    assert r.exit_code == 2 and "failures.1.at_h: a failure at 72 h is not before the run's end" in r.output


def test_a_job_that_never_keeps_a_step_says_why_its_mtti_is_long(tmp_path) -> None:
    """Failures every 2 s of the job and a 7-minute restart: the job never runs again after
    its first failure. Its one interruption and an MTTI of the whole run are what the
    definitions give; a note says so (there was none, and exit 0, before)."""
    from simulator import api
    from tests.conftest import ROOT

    scenario = tmp_path / "hopeless.yaml"
    scenario.write_text(
        f"""name: hopeless
seed: 7
topology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}
workload: {{file: {ROOT}/workloads/traces/dp16-gpt1p3b-step.yaml}}
run: {{steps: 1}}
failures:
  - {{kind: exponential, target: gpu, mtbf_h: 0.01, repair_h: 4}}
policy: {{kind: checkpoint_restart, interval: daly, restart: {{detection_min: 2, queue_min: 5}}}}
reliability: {{duration_days: 0.05, seeds: 1, checkpoint_gbyte: 18.2, storage_gbyte_per_s: 10}}
"""
    )
    s = api.run(scenario).summary
    assert s["goodput"] == 0.0
    assert s["run_level"]["notes"] == [
        "in 1 of 1 seeds the job kept no step: failures came faster than it could restart (modelled "
        "job MTBF 2.25 s); interruptions and MTTI count only the failures that stopped it while it ran, "
        "not those during its restarts"
    ]
