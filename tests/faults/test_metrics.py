"""Aggregates over seeds: the job MTTI is a ratio estimator, the other metrics means."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from simulator.faults.metrics import aggregate, ratio_interval

RUNS = pd.DataFrame(
    {
        "wall_s": [100.0, 100.0, 100.0],
        "interruptions": [0.0, 1.0, 4.0],
        "job_mtti_s": [math.inf, 100.0, 25.0],  # each seed's own W / interruptions
        "goodput": [0.9, 0.8, 0.7],
    }
)


def test_job_mtti_is_total_wall_time_over_total_interruptions():
    """The mean of per-seed ratios is infinite here (one seed never stops); the ratio
    estimator is 300 s / 5 interruptions = 60 s, with the delta-method interval."""
    row = aggregate(RUNS).iloc[0]
    assert row["job_mtti_s_mean"] == 60.0
    # residuals 100 - 60*y: 100, 40, -140 (sum 0); s_d = sqrt(15600); mean interruptions 5/3
    half = stats.t.ppf(0.975, 2) * math.sqrt(15600) / (math.sqrt(3) * 5 / 3)
    assert row["job_mtti_s_hi"] == pytest.approx(60 + half, rel=1e-12)
    assert row["job_mtti_s_lo"] == 0.0  # 60 - 186 s, clipped to the physical range
    # the other metrics stay means over seeds, and the per-seed column is untouched
    assert row["goodput_mean"] == pytest.approx(0.8, rel=1e-12)
    assert list(RUNS["job_mtti_s"])[1:] == [100.0, 25.0]


def test_ratio_interval_edges():
    assert ratio_interval([100.0, 100.0], [0.0, 0.0])[0] == math.inf
    mean, lo, hi = ratio_interval([100.0], [4.0])
    assert mean == 25.0 and math.isnan(lo) and math.isnan(hi)
    # equal ratios in every run: no spread, a zero-width interval
    assert ratio_interval([100.0, 200.0], [2.0, 4.0]) == (50.0, 50.0, 50.0)


def test_without_wall_time_the_per_seed_mean_is_kept():
    row = aggregate(RUNS[["job_mtti_s"]].iloc[1:]).iloc[0]
    assert row["job_mtti_s_mean"] == 62.5


def test_lost_work_and_restart_per_interruption_are_ratios_over_all_interruptions():
    """Σ lost work / Σ interruptions, not the mean of the seeds' own ratios: here seeds of
    0, 1 and 4 interruptions lose 0, 300 and 1200 s, 1500 s in 5 interruptions = 300 s each
    (the seeds' mean, (0 + 300 + 300) / 3 = 200 s, counts the never-interrupted seed as a
    loss of 0 s per interruption)."""
    runs = RUNS.assign(
        lost_work_s=[0.0, 300.0, 1200.0],
        lost_work_per_interruption_s=[0.0, 300.0, 300.0],
        restart_s=[0.0, 500.0, 2000.0],
        restart_per_interruption_s=[0.0, 500.0, 500.0],
    )
    row = aggregate(runs).iloc[0]
    assert row["lost_work_per_interruption_s_mean"] == 300.0
    assert row["restart_per_interruption_s_mean"] == 500.0
    # residuals x - R*y are 0 in every seed: no spread
    assert (row["lost_work_per_interruption_s_lo"], row["lost_work_per_interruption_s_hi"]) == (300.0, 300.0)


def test_per_interruption_figures_of_runs_never_interrupted_are_undefined():
    runs = pd.DataFrame(
        {
            "wall_s": [10.0, 10.0],
            "interruptions": [0.0, 0.0],
            "lost_work_s": [0.0, 0.0],
            "lost_work_per_interruption_s": [0.0, 0.0],
        }
    )
    row = aggregate(runs).iloc[0]
    assert math.isnan(row["lost_work_per_interruption_s_mean"])
    assert row["job_mtti_s_mean"] == math.inf


def test_recomputed_time_is_never_negative():
    """A run with no rollback keeps all its compute: compute_s - useful_s is then rounding
    alone, which came out as -9.6e-10 s of recomputed work; it is 0."""
    from simulator.faults.records import SEGMENT_COLUMNS, incident_frame, summarize

    row: dict[str, object] = {c: 0 for c in SEGMENT_COLUMNS}
    row.update(
        start_s=0.0, end_s=0.3, phase="compute", step_time_s=0.1, steps=3.0, steps_kept=3.0,
        useful_s=3.0 * 0.1,  # 0.30000000000000004: one ulp over the stretch, as kept x step gives
        degraded=False, draining=False, state="healthy", excluded_replicas="",
    )  # fmt: skip
    got = summarize(pd.DataFrame([row], columns=SEGMENT_COLUMNS), incident_frame([]), 0.3, 0.1)
    assert got["useful_s"] > got["compute_s"] and got["recompute_s"] == 0.0
