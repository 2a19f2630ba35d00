"""Compute cost: how long an op occupies a GPU's compute stream.

An op generated from a model carries its kernels (`Op.kernels`, `OpCost` items); its time
is the sum of their times under the per-kernel model of `simulator.workload.kernels`
(shape-aware GEMMs, fused or unfused attention, memory-bound ops at achieved HBM
bandwidth, a fixed cost per launched kernel), with a compute calibration's GEMM and memory
efficiencies where one is given. An op without kernels (from a recorded trace, or the
optimizer step), or any op on a GPU spec that gives none of the kernel model's fields,
falls back to the roofline
`t = max(flops / (peak[dtype] * eff_c), bytes / (hbm_bw * eff_m))` with the GPU spec's flat
factors (or the calibration's for a square GEMM of the same FLOPs, and its memory-bound
kernels' bandwidth; a side the calibration did not measure keeps the spec's factor). An
op's given duration wins over both. A GPU marked as a straggler multiplies every duration
by its slowdown factor; optional jitter multiplies by a lognormal factor of mean 1 drawn
from the run's `compute` stream.
"""

from __future__ import annotations

import contextlib

import numpy as np

from simulator.network.hardware import GPUSpec
from simulator.workload.costs import OpCost
from simulator.workload.kernels import ComputeEfficiency, KernelModel
from simulator.workload.program import Op

__all__ = ["ComputeCost", "ComputeEfficiency"]


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
        self.kernels = KernelModel(gpu, calibration)
        self.jitter_cv = jitter_cv
        self.rng = rng or np.random.default_rng(0)
        self.slowdown: dict[str, float] = {}
        # id of an op's kernel tuple -> (the tuple, kept alive so the id stays unique; time)
        self._kernel_cache: dict[int, tuple[tuple[object, ...], str, float]] = {}
        if jitter_cv > 0:
            self._sigma = float(np.sqrt(np.log1p(jitter_cv**2)))
        else:
            self._sigma = 0.0

    def kernels_s(self, op: Op) -> float:
        """Sum of the per-kernel times of `op`'s kernels (cached per kernel tuple and dtype)."""
        hit = self._kernel_cache.get(id(op.kernels))
        if hit is not None and hit[1] == op.dtype:
            return hit[2]
        t = 0.0
        for item in op.kernels:
            if not isinstance(item, OpCost):
                raise TypeError(f"op {op.id!r} carries a kernel of type {type(item).__name__}")
            t += self.kernels.time_s(item, op.dtype)
        self._kernel_cache[id(op.kernels)] = (op.kernels, op.dtype, t)
        return t

    def roofline_s(self, op: Op) -> float:
        """Time of `op` from its kernels, or from the flat roofline (module docstring)."""
        if op.kernels and self.gpu.has_kernel_model:
            return self.kernels_s(op) * op.kernel_scale
        gpu = self.gpu
        eff_c, eff_m = gpu.compute_efficiency, gpu.memory_efficiency
        peak = gpu.peak(op.dtype)
        if self.calibration is not None:
            # a profile that measured no GEMM of this dtype (or no memory-bound kernel) keeps
            # the GPU spec's factor for that side, as the kernel model does
            if op.flops > 0:
                # a square GEMM of the same FLOPs stands in when the shape is unknown
                side = max(1, int(round((op.flops / 2) ** (1 / 3))))
                with contextlib.suppress(KeyError):
                    eff_c = self.calibration.gemm_efficiency(side, side, side, op.dtype, peak)
            if op.bytes_accessed > 0:
                with contextlib.suppress(KeyError):
                    eff_m = self.calibration.memory_efficiency(
                        op.bytes_accessed, gpu.hbm_bandwidth_bytes_per_s
                    )
        t_c = op.flops / (peak * eff_c) if op.flops else 0.0
        t_m = op.bytes_accessed / (gpu.hbm_bandwidth_bytes_per_s * eff_m) if op.bytes_accessed else 0.0
        return max(t_c, t_m)

    def compute_s(self, op: Op, gpu_name: str) -> float:
        """Duration of compute op `op` on GPU `gpu_name` (slowdown and jitter applied)."""
        base = op.duration_s if op.duration_s is not None else self.roofline_s(op)
        factor = self.slowdown.get(gpu_name, 1.0)
        if self._sigma > 0:
            factor *= float(self.rng.lognormal(-0.5 * self._sigma**2, self._sigma))
        return base * factor
