"""Compute cost: how long an op occupies a GPU's compute stream.

Roofline: `t = max(flops / (peak[dtype] * eff_c), bytes / (hbm_bw * eff_m))`, where the
efficiencies are the GPU spec's flat factors unless a compute calibration supplies
size-dependent ones. An op's given duration wins over the roofline. A GPU marked as a
straggler multiplies every duration by its slowdown factor; optional jitter multiplies by
a lognormal factor of mean 1 drawn from the run's `compute` stream.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simulator.network.hardware import GPUSpec
from simulator.workload.program import Op


class ComputeEfficiency(Protocol):
    """A calibrated compute model: efficiency in (0, 1] for a GEMM or a memory-bound op."""

    def gemm_efficiency(self, m: int, n: int, k: int, dtype: str, peak_flops_per_s: float) -> float: ...

    def memory_efficiency(self, nbytes: float, peak_bytes_per_s: float) -> float: ...


class ComputeCost:
    """Prices compute ops (see module docstring)."""

    def __init__(
        self,
        gpu: GPUSpec,
        calibration: ComputeEfficiency | None = None,
        jitter_cv: float = 0.0,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.gpu = gpu
        self.calibration = calibration
        self.jitter_cv = jitter_cv
        self.rng = rng or np.random.default_rng(0)
        self.slowdown: dict[str, float] = {}
        if jitter_cv > 0:
            self._sigma = float(np.sqrt(np.log1p(jitter_cv**2)))
        else:
            self._sigma = 0.0

    def roofline_s(self, op: Op) -> float:
        gpu = self.gpu
        eff_c, eff_m = gpu.compute_efficiency, gpu.memory_efficiency
        peak = gpu.peak(op.dtype)
        if self.calibration is not None:
            if op.flops > 0:
                # a square GEMM of the same FLOPs stands in when the shape is unknown
                side = max(1, int(round((op.flops / 2) ** (1 / 3))))
                eff_c = self.calibration.gemm_efficiency(side, side, side, op.dtype, peak)
            if op.bytes_accessed > 0:
                eff_m = self.calibration.memory_efficiency(op.bytes_accessed, gpu.hbm_bandwidth_bytes_per_s)
        t_c = op.flops / (peak * eff_c) if op.flops else 0.0
        t_m = op.bytes_accessed / (gpu.hbm_bandwidth_bytes_per_s * eff_m) if op.bytes_accessed else 0.0
        return max(t_c, t_m)

    def compute_s(self, op: Op, gpu_name: str) -> float:
        base = op.duration_s if op.duration_s is not None else self.roofline_s(op)
        factor = self.slowdown.get(gpu_name, 1.0)
        if self._sigma > 0:
            factor *= float(self.rng.lognormal(-0.5 * self._sigma**2, self._sigma))
        return base * factor
