"""Fit the shape-aware GEMM model's constants from a GEMM timing table on a known GPU.

The kernel model (`simulator.workload.kernels.gemm_time_s`) prices a GEMM from the GPU's
SM count, tile, peak and HBM bandwidth plus two constants: the achievable fraction of peak
`f` and the fixed cost per kernel `o`. Measured on a GPU (rows `M,N,K,dtype,time_s`), the
compute-bound rows follow `t = o + x / f` with `x = 2·M·N·K / (peak · quantization)` (tile,
wave and K-ramp factors of the shape), a line in `x` fitted like the collectives'
alpha-beta line (`simulator.calibration.fit.fit_line`).

A row the fit cannot use is an input error of its own line (all such rows are reported at
once): dimensions that are not whole numbers, a dtype the GPU has no peak for, a shape
that is memory-bound on that GPU (its bytes at the achieved HBM bandwidth take longer than
its FLOPs at peak, so it says nothing about `f`), or a time faster than the peak allows
for the shape (a wrong GPU file or dtype).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field

from simulator.calibration.fit import fit_line
from simulator.config.base import Spec
from simulator.errors import InputError, InputErrors
from simulator.network.hardware import GPUSpec
from simulator.workload.kernels import DTYPE_BYTES, gemm_time_s


@dataclass(frozen=True)
class GemmRow:
    """One measured GEMM: where it was read, its shape and dtype, and its time."""

    file: Path
    line: int
    m: float
    n: float
    k: float
    dtype: str
    time_s: float


class ShapeFit(Spec):
    """Fitted constants of the GEMM shape model for one dtype on one GPU."""

    gpu: GPUSpec = Field(description="The GPU the table was measured on (SMs, tile, peak, bandwidth).")
    peak_fraction: float = Field(gt=0, le=1, description="Achievable fraction of peak f.")
    overhead_s: float = Field(ge=0, description="Fixed cost per kernel o, seconds.")
    n_points: int = Field(ge=1, description="Rows fitted.")
    median_abs_error: float = Field(ge=0, description="Median |model/measured - 1| on the rows.")
    max_abs_error: float = Field(ge=0, description="Max |model/measured - 1| on the rows.")

    def time_s(self, m: int, n: int, k: int, dtype: str) -> float:
        """Model time of an (m×k)·(k×n) GEMM with the fitted constants."""
        return gemm_time_s(
            self.gpu, (m, n, k), dtype, peak_fraction=self.peak_fraction, overhead_s=self.overhead_s
        )


def _ideal_s(gpu: GPUSpec, row: GemmRow, shape: tuple[int, int, int]) -> tuple[float, float]:
    """(compute time at f = 1 with the shape's quantization, memory time), no fixed cost."""
    at_full = gemm_time_s(gpu, shape, row.dtype, peak_fraction=1.0, overhead_s=0.0)
    m, n, k = shape
    p = DTYPE_BYTES.get(row.dtype, 2.0)
    t_m = p * (m * k + k * n + m * n) / (gpu.hbm_bandwidth_bytes_per_s * gpu.memory_efficiency)
    # at_full = max(t_c, t_m): equal to t_m only when the shape is memory-bound
    return at_full, t_m


def _usable(gpu: GPUSpec, row: GemmRow) -> tuple[float, str | None]:
    """(x = compute time at f = 1, None) for a usable row, else (0, why not)."""
    dims = (row.m, row.n, row.k)
    if any(d != int(d) for d in dims):
        return 0.0, f"GEMM dimensions must be whole numbers, found {row.m:g}x{row.n:g}x{row.k:g}"
    try:
        gpu.peak(row.dtype)
    except KeyError:
        return 0.0, f"GPU {gpu.name!r} has no peak FLOP/s for dtype {row.dtype!r}"
    shape = (int(row.m), int(row.n), int(row.k))
    at_full, t_m = _ideal_s(gpu, row, shape)
    label = f"{shape[0]}x{shape[1]}x{shape[2]} {row.dtype}"
    if at_full <= t_m:
        return 0.0, (
            f"shape {label} is memory-bound on {gpu.name} (its bytes take {t_m * 1e6:.3g} us at the "
            "achieved HBM bandwidth), so it cannot inform the achievable fraction of peak"
        )
    if row.time_s < at_full:
        return 0.0, (
            f"measured {row.time_s * 1e6:.3g} us is faster than {gpu.name}'s peak allows for {label} "
            f"({at_full * 1e6:.3g} us): wrong GPU file or dtype?"
        )
    return at_full, None


def fit_shapes(rows: list[GemmRow], gpu: GPUSpec) -> dict[str, ShapeFit]:
    """Fit `f` and `o` per dtype on `gpu` (module docstring).

    Raises:
        InputErrors: one line per row the fit cannot use (file:line: why).
        InputError: the GPU spec lacks a field the model needs.
    """
    bad: list[InputError] = []
    by_dtype: dict[str, tuple[list[float], list[float], list[GemmRow]]] = {}
    for row in rows:
        x, why = _usable(gpu, row)
        if why is not None:
            bad.append(InputError(why, file=row.file, line=row.line))
            continue
        xs, ts, rs = by_dtype.setdefault(row.dtype, ([], [], []))
        xs.append(x)
        ts.append(row.time_s)
        rs.append(row)
    if bad:
        raise InputErrors(bad)
    out: dict[str, ShapeFit] = {}
    for dtype, (xs, ts, rs) in sorted(by_dtype.items()):
        overhead, frac = fit_line(np.asarray(xs), np.asarray(ts))
        frac = float(min(frac, 1.0))
        fit = ShapeFit(
            gpu=gpu,
            peak_fraction=float(f"{frac:.6g}"),
            overhead_s=float(f"{overhead:.6g}"),
            n_points=len(rs),
            median_abs_error=0.0,
            max_abs_error=0.0,
        )
        err = np.abs([fit.time_s(int(r.m), int(r.n), int(r.k), dtype) / r.time_s - 1.0 for r in rs])
        out[dtype] = fit.model_copy(
            update={
                "median_abs_error": float(f"{np.median(err):.4g}"),
                "max_abs_error": float(f"{err.max():.4g}"),
            }
        )
    return out
