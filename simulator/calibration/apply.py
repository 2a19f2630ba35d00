"""Using calibration profiles in a run: the engine's `CollectiveTuning` and compute model.

For a collective of kind k over n ranks on N nodes with size S, the first profile (in the
scenario's order) with a matching entry gives the fitted time
`t(S) = (alpha + S·f/B) / e(S)` (see `CollectiveFit`). The engine keeps its own flows (so
contention stays real) and rescales them:

* the collective's latency becomes `alpha / e(S)`;
* its bandwidth becomes `B·e(S)`: flows carry `S_flow · model_busbw / (B·e(S))` bytes, where
  `model_busbw` is what the uncalibrated flows reach alone on this topology.

Alone on the fabric the calibrated collective therefore takes exactly the fitted time.
An efficiency above 1 means the real library moves less data than the modeled algorithm
(e.g. in-switch reduction); it is allowed up to 4x and said in the summary.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.calibration.compute import ComputeCalibration
from simulator.calibration.profile import CalibrationProfile, load_profile

MAX_EFFICIENCY = 4.0


class ProfileTuning:
    """`CollectiveTuning` backed by one or more calibration profiles."""

    def __init__(self, profiles: list[tuple[str, CalibrationProfile]]) -> None:
        self.profiles = profiles

    def tune(
        self, kind: str, n_ranks: int, n_nodes: int, size_bytes: float, model_busbw_bytes_per_s: float
    ) -> tuple[float | None, float, str] | None:
        for name, profile in self.profiles:
            fit = profile.collective(kind, n_ranks, n_nodes, size_bytes)
            if fit is None:
                continue
            e = float(np.asarray(fit.curve(size_bytes)).reshape(-1)[0]) if size_bytes > 0 else 1.0
            latency = fit.alpha_s / e
            eff = fit.peak_busbw_bytes_per_s * e / model_busbw_bytes_per_s
            return latency, min(eff, MAX_EFFICIENCY), f"{name}: {fit.source}"
        return None


def tuning_from_profiles(paths: list[Path]) -> tuple[ProfileTuning, ComputeCalibration | None, list[str]]:
    """Load profiles; the first one with a `compute:` block calibrates compute."""
    profiles = [(Path(p).stem, load_profile(p)) for p in paths]
    compute = next((p.compute for _, p in profiles if p.compute is not None), None)
    return ProfileTuning(profiles), compute, [str(p) for p in paths]
