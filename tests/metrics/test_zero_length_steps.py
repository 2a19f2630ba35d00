"""A step whose ops all take no time (a compute op of 0 ms, an all-to-all over one rank) is a
valid run: it completes with 0 J per step, 0 W facility power (mean and peak: no simulated
time passes) and no NaN or inf in the summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from simulator.metrics.energy import TIMELINE_COLUMNS, power_timeline
from simulator.metrics.run_cost import power_inputs
from simulator.metrics.summary import summarize
from simulator.network.cost import estimate_cost
from simulator.network.prices import load_prices
from simulator.scenario.execute import RunResult, execute
from simulator.scenario.prepare import prepare
from tests.conftest import ROOT

TOPOLOGY = ROOT / "topologies" / "h100-rail-clos-2n.yaml"

ZERO_COMPUTE = "ops:\n  - {id: c0, kind: compute, ranks: all, duration_ms: 0}\n"
ONE_RANK_ALL_TO_ALL = (
    "ops:\n  - {id: a0, kind: collective, collective: all_to_all, group: one, size_bytes: 1048576}\n"
)


def _run(tmp_path: Path, ops: str, meta: str = "", steps: int = 2) -> RunResult:
    trace = tmp_path / "trace.yaml"
    trace.write_text(
        f"format: clustersim-step/1\nname: zero\nranks: 16\ngroups:\n  world: all\n  one: [0]\n{meta}{ops}"
    )
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        f"name: zero\nseed: 7\ntopology: {{file: {TOPOLOGY}}}\nworkload: {{file: {trace}}}\n"
        f"network: {{fidelity: flow}}\nrun: {{steps: {steps}}}\n"
    )
    return execute(prepare(scenario))


def _non_finite(summary: dict[str, Any]) -> list[str]:
    return [k for k, v in summary.items() if isinstance(v, float) and not math.isfinite(v)]


@pytest.mark.parametrize("ops", [ZERO_COMPUTE, ONE_RANK_ALL_TO_ALL], ids=["compute-0ms", "all_to_all-1-rank"])
def test_zero_length_step_runs_with_zero_energy_and_power(tmp_path: Path, ops: str) -> None:
    result = _run(tmp_path, ops)
    s = result.summary
    assert s["step_time_s"] == 0.0
    assert s["energy_per_step_j"] == 0.0
    assert s["energy_run_j"] == 0.0
    assert s["timeline_energy_j"] == 0.0
    assert s["mean_facility_power_w"] == 0.0
    assert s["peak_facility_power_w"] == 0.0
    assert s["usd_per_step"] == 0.0
    assert s["it_power_idle_w"] > 0.0  # the rated idle figure is still stated
    assert _non_finite(s) == []
    out = result.write(tmp_path / "out", dashboard=False)
    written = json.loads((out / "summary.json").read_text())
    assert written["peak_facility_power_w"] == 0.0
    assert (out / "steps.parquet").is_file()


def test_zero_length_step_stated_meta_leaves_no_nan(tmp_path: Path) -> None:
    """Tokens, model FLOPs and a schedule's bubble stated for a step of no time: no rate
    over zero time, and a measured bubble of 0 (no idle time), not 0 / 0."""
    meta = "meta: {tokens_per_step: 1000, model_flops_per_step: 1.0e12, pipeline_bubble_fraction: 0.1}\n"
    s = _run(tmp_path, ZERO_COMPUTE, meta, steps=1).summary
    assert s["pipeline_bubble_measured"] == 0.0
    assert "tokens_per_s" not in s and "mfu" not in s
    assert _non_finite(s) == []


def test_power_timeline_of_zero_length_steps_has_its_columns() -> None:
    """No segment at all: an empty timeline with every column (facility_w included)."""
    ops = pd.DataFrame(
        {
            "step": [0, 0],
            "rank": [0, 1],
            "kind": ["compute", "compute"],
            "started_at_s": [0.0, 0.0],
            "finished_at_s": [0.0, 0.0],
            "duration_s": [0.0, 0.0],
            "flops": [0.0, 0.0],
        }
    )
    steps = pd.DataFrame(
        {"step": [0, 0], "rank": [0, 1], "started_at_s": 0.0, "finished_at_s": 0.0, "weight": 1}
    )
    prices = load_prices()
    prep_gpu = prepare(ROOT / "scenarios" / "quickstart.yaml").topology
    items = estimate_cost(prep_gpu.graph, prices, scope="cluster", gpu=prep_gpu.gpu)
    p = power_inputs(items, prep_gpu.gpu, {"gpus_in_job": 2, "gpus_in_topology": 16})
    for frame in (ops, ops.iloc[:0]):
        tl = power_timeline(frame, steps, p, prices)
        assert tl.empty
        assert list(tl.columns) == list(TIMELINE_COLUMNS)


def test_measured_bubble_of_a_zero_length_step_is_zero() -> None:
    steps = pd.DataFrame(
        {
            "step": [0, 1, 1],
            "rank": [0, 0, 1],
            "started_at_s": [0.0, 0.0, 0.0],
            "finished_at_s": [0.0, 2.0, 2.0],
            "step_time_s": [0.0, 2.0, 2.0],
            "compute_s": [0.0, 1.0, 1.5],
            "comm_s": 0.0,
            "exposed_comm_s": 0.0,
            "idle_s": [0.0, 1.0, 0.5],
            "weight": 1,
        }
    )
    frames = {"steps": steps, "links": pd.DataFrame()}
    s = summarize(frames, {"pipeline_bubble_fraction": 0.25})
    assert s["pipeline_bubble_measured"] == pytest.approx((0.0 + 0.5 + 0.25) / 3)
