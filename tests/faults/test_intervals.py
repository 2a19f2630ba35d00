"""Checkpoint intervals from Young and Daly: without failures, and for snapshot policies
whose background drain slows training."""

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.faults.engine import simulate_run
from simulator.faults.formulas import daly_interval_s, effective_checkpoint_cost_s
from simulator.faults.state import ConstantOracle, ScalingOracle

from .helpers import failures, job, policy

ORACLE = ConstantOracle(step_s=1.0, write_s=300.0, snapshot_s=10.0, load_storage_s=40.0, load_peer_s=5.0)


@pytest.mark.parametrize("interval", ["daly", "young"])
def test_no_failures_means_no_checkpoints_and_says_so(interval):
    """Daly's τ grows as √M: with no failure (M infinite) the best run never checkpoints.
    The run says so, reports an infinite interval (not a huge finite one) and its goodput
    is that of a run without checkpoints: 1 on a healthy cluster."""
    r = simulate_run(job(), ORACLE, [], policy(kind="checkpoint_restart", interval=interval), 10 * 3600, 0)
    assert math.isinf(r.summary["interval_s"]) and math.isinf(r.summary["interval_steps"])
    assert r.summary["checkpoints"] == 0 and r.summary["checkpoint_s"] == 0
    assert r.summary["goodput"] == pytest.approx(1.0, rel=1e-12)
    assert len(r.notes) == 1 and "no failures" in r.notes[0] and "no checkpoints" in r.notes[0]


def test_scheduled_failures_alone_give_a_daly_interval():
    """Three scheduled failures in a 30 h run: M = 30 h / 3 for Daly, not infinity."""
    fl = failures({"kind": "scheduled", "target": "gpu", "component": 0, "at_h": [5, 15, 25]})
    r = simulate_run(job(), ORACLE, fl, policy(kind="checkpoint_restart", interval="daly"), 30 * 3600, 0)
    assert r.summary["model_job_mtbf_s"] == pytest.approx(10 * 3600)
    assert r.summary["interval_steps"] == round(daly_interval_s(300.0, 10 * 3600))
    assert r.summary["checkpoints"] > 0 and not r.notes


def test_effective_checkpoint_cost_formula():
    """δ = δ_snap + (D/k)·(1 − t/t_d): 10 s snapshot, 500 s drain, steps 10 % slower while it
    runs: the drain takes 500·(1 − 1/1.1) = 45.45 s of compute per drain."""
    assert effective_checkpoint_cost_s(10.0, 500.0, 12.0, 13.2) == pytest.approx(10 + 500 / 11)
    assert effective_checkpoint_cost_s(10.0, 500.0, 12.0, 13.2, 5) == pytest.approx(10 + 100 / 11)
    # a drain that does not slow training costs nothing beyond the snapshot
    assert effective_checkpoint_cost_s(10.0, 500.0, 12.0, 12.0) == 10.0
    with pytest.raises(ValueError):
        effective_checkpoint_cost_s(10.0, 500.0, 0.0, 12.0)


@pytest.mark.parametrize(
    ("kind", "extra", "k"), [("async_checkpoint", {}, 1), ("in_memory", {"storage_every": 5}, 5)]
)
def test_snapshot_policies_pay_for_their_drain(kind, extra, k):
    """Async and in-memory checkpoints choose Daly's interval from the snapshot stall plus
    the compute the drain takes from training, not from the stall alone."""
    shape = job()
    oracle = ScalingOracle(
        full_dp_replicas=shape.dp_replicas, compute_s=10.0, comm_s=2.0, drain_slowdown=0.1, write_s=500.0
    )
    mtbf_s = 20 * 3600.0
    fl = failures({"kind": "exponential", "target": "gpu", "mtbf_s": shape.n_gpus * mtbf_s})
    r = simulate_run(shape, oracle, fl, policy(kind=kind, interval="daly", **extra), 48 * 3600, 0)
    delta_s = 10.0 + 500.0 / k * (1 - 1 / 1.1)  # snapshot 10 s; step 12 s, 13.2 s while draining
    assert r.summary["checkpoint_cost_s"] == pytest.approx(delta_s)
    assert r.summary["interval_steps"] == round(daly_interval_s(delta_s, mtbf_s) / 12.0)
    # the stall alone would checkpoint every ~ √(2·10·M)/12 ≈ 100 steps
    assert r.summary["interval_steps"] > round(daly_interval_s(10.0, mtbf_s) / 12.0)


def test_scenario_summary_notes_a_run_without_checkpoints(tmp_path):
    """The scenario's summary.json carries the note and a null interval, not 4e19 s."""
    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: calm\n"
        f"topology: {{file: {root}/topologies/h100-rail-clos-2n.yaml}}\n"
        f"workload: {{file: {root}/workloads/traces/dp16-gpt1p3b-step.yaml}}\n"
        "policy: {kind: checkpoint_restart, interval: daly}\n"
        "reliability: {duration_days: 1, seeds: 2, checkpoint_gbyte: 18.2, storage_gbyte_per_s: 10}\n"
    )
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["run", str(path), "-o", str(out), "--no-dashboard"])
    assert r.exit_code == 0, r.output
    assert "note: no failures are modelled" in r.output  # the note is printed, not only saved
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run_level"]["checkpoint_interval_s"] is None
    assert any("takes no checkpoints" in n for n in summary["run_level"]["notes"])
    assert summary["goodput"] == pytest.approx(1.0, rel=1e-12)
