"""Facility power over days of training: the swings when the job stops and restarts together.

What is modelled: the run level's `segments` (compute, checkpoint, restart, rejoin stretches
in one cluster state) turned into piecewise-constant facility power. While computing, the
job draws its mean IT power over the simulated steps (`run_cost`: GPUs at their timeline
draw, hosts, network, storage), scaled to the GPUs in use; GPUs left out and every GPU
during a blocking checkpoint, a restart or a rejoin draw the idle figure (GPU idle draw,
hosts, static network power, idle storage), and storage draws its rated power while a
checkpoint writes. Facility power is IT power x PUE.

The Llama 3 report (Dubey et al., 2024, §3.3.4) describes data-centre power swinging by
tens of megawatts when thousands of GPUs stop at once for a checkpoint or a failure. The
largest change between consecutive stretches is `run_power_swing_w`; its rate is that
swing over `power.gpu_power_ramp_s` of the price table (an assumption: the model has no
power transients of its own).

What is simplified: power inside a stretch is constant (no per-step oscillation); the
asynchronous part of a checkpoint does not change power.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from simulator.network.prices import PriceSpec

COLUMNS = ["start_s", "end_s", "phase", "gpus_in_use", "facility_w"]


def run_power_frame(segments: pd.DataFrame, summary: dict[str, Any], prices: PriceSpec) -> pd.DataFrame:
    """Facility power of every run-level segment.

    Args:
        segments: the run level's `segments` frame (start_s, end_s, phase, gpus_in_use).
        summary: the run's summary with `it_power_computing_w`, `it_power_idle_w`,
            `storage_checkpoint_extra_w` and `gpus_in_job` (from `run_cost`).
        prices: the table with PUE.

    Returns:
        One row per segment: start_s, end_s, phase, gpus_in_use, facility_w.
    """
    if segments.empty or "it_power_computing_w" not in summary:
        return pd.DataFrame(columns=COLUMNS)
    n_job = float(summary.get("gpus_in_job") or 1)
    busy, idle = float(summary["it_power_computing_w"]), float(summary["it_power_idle_w"])
    share = segments["gpus_in_use"].to_numpy(dtype=float) / n_job
    computing = (segments["phase"] == "compute").to_numpy()
    it_w = np.where(computing, idle + (busy - idle) * share, idle)
    it_w = it_w + np.where(
        segments["phase"] == "checkpoint", float(summary["storage_checkpoint_extra_w"]), 0.0
    )
    out = segments[["start_s", "end_s", "phase", "gpus_in_use"]].copy()
    out["facility_w"] = it_w * prices.facility.pue.value
    return out.reset_index(drop=True)


def run_power_summary(power: pd.DataFrame, prices: PriceSpec) -> dict[str, float]:
    """Peak, minimum and mean facility power over the run, and its largest swing.

    Keys: run_facility_peak_w, run_facility_min_w, run_facility_mean_w, run_energy_j,
    run_power_swing_w (largest change between consecutive stretches) and
    run_power_swing_w_per_s (that swing over `power.gpu_power_ramp_s`).
    """
    if power.empty:
        return {}
    dur = (power["end_s"] - power["start_s"]).to_numpy(dtype=float)
    w = power["facility_w"].to_numpy(dtype=float)
    energy = float((w * dur).sum())
    swing = float(np.abs(np.diff(w)).max()) if len(w) > 1 else 0.0
    return {
        "run_facility_peak_w": float(w.max()),
        "run_facility_min_w": float(w.min()),
        "run_facility_mean_w": energy / float(dur.sum()) if dur.sum() > 0 else 0.0,
        "run_energy_j": energy,
        "run_power_swing_w": swing,
        "run_power_swing_w_per_s": swing / prices.power.gpu_power_ramp_s.value,
    }
