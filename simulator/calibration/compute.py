"""Compute calibration: GEMM and memory-bound kernel efficiency from measured timings.

Inputs are CSV files (what `benchmarks/gemm_timings.py` writes):

* GEMM timings, columns `M,N,K,dtype,time_s` (one matmul of an MxK by a KxN matrix);
* memory-bound kernel timings, columns `bytes,time_s` (bytes read plus written).

Model: a kernel takes a fixed launch/ramp-up overhead plus its work at a sustained rate,

    t = overhead_s + flops / flops_per_s        (GEMM, flops = 2 M N K, one line per dtype)
    t = overhead_s + bytes / bytes_per_s        (memory-bound kernels)

fitted like the collectives' alpha-beta line (`simulator.calibration.fit.fit_line`:
least squares in relative error, then a robust refinement). The efficiency the cost
model asks for is the achieved rate over the device's peak:
`gemm_efficiency = (flops / t) / peak_flops_per_s`, clipped to (0, 1].

Given the GPU the table was measured on (`clustersim calibrate --gpu FILE`), the GEMM rows
also fit the shape-aware model's constants (achievable fraction of peak and fixed cost per
kernel; `simulator.calibration.gemm_shape`), and `gemm_efficiency` then answers from that
model (tile and wave quantization, memory-bound skinny shapes) instead of the line.

Simplified away (line fit): the shape of a GEMM beyond its FLOP count and cache effects
of small memory kernels; the fit error per dtype says how much that costs.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import Field

from simulator.calibration.fit import fit_line
from simulator.calibration.gemm_shape import GemmRow, ShapeFit, fit_shapes
from simulator.config.base import Spec
from simulator.config.loader import read_text
from simulator.errors import InputError, InputErrors
from simulator.network.hardware import GPUSpec, other_model

_ALIASES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32",
            "float": "fp32", "float64": "fp64", "double": "fp64", "tf32": "tf32"}  # fmt: skip
MIN_EFFICIENCY = 1e-6
#: How far above the GPU file's HBM bandwidth a memory row's rate may read (`--gpu`) before
#: the row is refused. The check is for rows that cannot be of this GPU: another GPU's table
#: (H100 SXM's 3.35 TB/s against H100 PCIe's 2.0), bytes counted twice or a unit slip, which
#: are off by 1.5x and more. A row a little over the figure is left to the measurement: the
#: file holds the datasheet's nominal, rounded rate, and a row is one timed kernel (timer
#: resolution and run-to-run spread of a few percent on the shortest rows).
HBM_RATE_TOLERANCE = 0.10


def _dtype(name: str) -> str:
    n = name.strip().lower().removeprefix("torch.")
    return _ALIASES.get(n, n)


class RateFit(Spec):
    """t = overhead_s + work / rate, fitted on measured kernels."""

    overhead_s: float = Field(ge=0, description="Fixed time per kernel, seconds.")
    rate_per_s: float = Field(gt=0, description="Sustained rate: FLOP/s (GEMM) or bytes/s.")
    n_points: int = Field(ge=1, description="Measurements fitted.")
    min_work: float = Field(gt=0, description="Smallest measured work (FLOPs or bytes).")
    max_work: float = Field(gt=0, description="Largest measured work (FLOPs or bytes).")
    max_abs_error: float = Field(ge=0, description="Max |model/measured - 1| on the points.")

    def time_s(self, work: float) -> float:
        return self.overhead_s + work / self.rate_per_s


class ComputeCalibration(Spec):
    """Measured GEMM rates per dtype and memory bandwidth; efficiencies against a peak."""

    gemm: dict[str, RateFit] = Field(
        default_factory=dict, description="GEMM fit per dtype (fp16, bf16, fp32, ...)."
    )
    memory: RateFit | None = Field(None, description="Memory-bound kernel fit, if measured.")
    shape: dict[str, ShapeFit] = Field(
        default_factory=dict, description="GEMM shape-model fit per dtype (when the GPU was given)."
    )
    sources: list[str] = Field(default_factory=list, description="CSV file names fitted on.")

    def gemm_efficiency(self, m: int, n: int, k: int, dtype: str, peak_flops_per_s: float) -> float:
        """Achieved / peak FLOP/s of an (m x k) @ (k x n) GEMM, in (0, 1].

        Raises:
            KeyError: the dtype was not calibrated (bf16 and fp16 stand in for each other).
            ValueError: a non-positive peak or dimension.
        """
        if peak_flops_per_s <= 0 or min(m, n, k) <= 0:
            raise ValueError("GEMM dimensions and peak FLOP/s must be positive")
        d = _dtype(dtype)
        shaped = self.shape.get(d)
        if shaped is None and d in ("bf16", "fp16"):
            shaped = self.shape.get("fp16" if d == "bf16" else "bf16")
        if shaped is not None:
            t = shaped.time_s(m, n, k, d)
            return float(np.clip(2.0 * m * n * k / t / peak_flops_per_s, MIN_EFFICIENCY, 1.0))
        fit = self.gemm.get(d)
        if fit is None and d in ("bf16", "fp16"):
            fit = self.gemm.get("fp16" if d == "bf16" else "bf16")
        if fit is None:
            raise KeyError(f"no GEMM calibration for dtype {dtype!r}; have {sorted(self.gemm)}")
        flops = 2.0 * m * n * k
        achieved = flops / fit.time_s(flops)
        return float(np.clip(achieved / peak_flops_per_s, MIN_EFFICIENCY, 1.0))

    def memory_efficiency(self, nbytes: float, peak_bytes_per_s: float) -> float:
        """Achieved / peak bandwidth of a memory-bound kernel moving `nbytes`, in (0, 1].

        Raises:
            KeyError: no memory-bound timings were calibrated.
            ValueError: a non-positive peak or size.
        """
        if peak_bytes_per_s <= 0 or nbytes <= 0:
            raise ValueError("bytes and peak bandwidth must be positive")
        if self.memory is None:
            raise KeyError("no memory-bound kernel calibration in this profile")
        achieved = nbytes / self.memory.time_s(nbytes)
        return float(np.clip(achieved / peak_bytes_per_s, MIN_EFFICIENCY, 1.0))

    def notes_for(self, gpu: GPUSpec) -> list[str]:
        """What a run on `gpu` is told about this calibration, one sentence each: a GEMM
        shape fit measured on another GPU model (`gpu_model`), and a fitted rate above
        `gpu`'s own peak (a table from a faster GPU: its efficiencies are clipped to 1)."""
        notes = []
        for d, fit in sorted(self.shape.items()):
            if other_model(fit.gpu.name, gpu.name):
                notes.append(
                    f"compute: the GEMM {d} shape fit was measured on {fit.gpu.name}; this run's GPU "
                    f"is {gpu.name}, another model, and the fit is applied to it as it is"
                )
        for d, line in sorted(self.gemm.items()):
            try:
                peak = gpu.peak(d)
            except KeyError:
                continue
            if d not in self.shape and line.rate_per_s > peak:
                notes.append(
                    f"compute: GEMM {d} was measured at {line.rate_per_s / 1e12:.0f} TFLOP/s sustained, "
                    f"above the {peak / 1e12:.0f} TFLOP/s peak of this run's GPU ({gpu.name}): "
                    "measured on another GPU? its efficiencies are clipped to 1"
                )
        if self.memory is not None and self.memory.rate_per_s > gpu.hbm_bandwidth_bytes_per_s:
            notes.append(
                f"compute: memory-bound kernels were measured at {self.memory.rate_per_s / 1e9:.0f} GB/s "
                f"sustained, above the {gpu.hbm_bandwidth_bytes_per_s / 1e9:.0f} GB/s HBM bandwidth of "
                f"this run's GPU ({gpu.name}): measured on another GPU? their efficiency is clipped to 1"
            )
        return notes

    @classmethod
    def from_csv(cls, paths: Sequence[str | Path], gpu: GPUSpec | None = None) -> ComputeCalibration:
        """Fit GEMM and memory timings from CSV files (kind told by the columns).

        Args:
            paths: the CSV files.
            gpu: the GPU they were measured on; given, the GEMM rows also fit the shape model.

        Raises:
            InputError: unreadable file, missing columns, or a value that is not a positive
                number (names the file and line).
            InputErrors: with `gpu`, one line per GEMM row the shape fit cannot use.
        """
        rows: list[GemmRow] = []
        gemm: dict[str, tuple[list[float], list[float]]] = {}
        mem: tuple[list[float], list[float]] = ([], [])
        names = []
        too_fast: list[InputError] = []
        for path in paths:
            p = Path(path)
            names.append(p.name)
            for kind, lineno, row in _read_csv(p):
                if kind == "gemm":
                    flops = (
                        2.0
                        * _pos(row, "M", p, lineno)
                        * _pos(row, "N", p, lineno)
                        * _pos(row, "K", p, lineno)
                    )
                    d = _dtype(row["dtype"] or "")
                    if not d:
                        raise InputError("empty dtype", file=p, line=lineno, field="dtype")
                    w, t = gemm.setdefault(d, ([], []))
                    dims = (_pos(row, "M", p, lineno), _pos(row, "N", p, lineno), _pos(row, "K", p, lineno))
                    rows.append(GemmRow(p, lineno, *dims, d, _pos(row, "time_s", p, lineno)))
                else:
                    flops = _pos(row, "bytes", p, lineno)
                    w, t = mem
                    if gpu is not None and (err := _above_hbm(gpu, flops, _pos(row, "time_s", p, lineno))):
                        too_fast.append(InputError(err, file=p, line=lineno))
                w.append(flops)
                t.append(_pos(row, "time_s", p, lineno))
        if too_fast:
            raise InputErrors(too_fast)

        def fit(work: list[float], times: list[float]) -> RateFit:
            w, t = np.asarray(work), np.asarray(times)
            overhead, rate = fit_line(w, t)
            err = np.abs((overhead + w / rate) / t - 1.0)
            return RateFit(
                overhead_s=float(f"{overhead:.6g}"),
                rate_per_s=float(f"{rate:.6g}"),
                n_points=len(w),
                min_work=float(w.min()),
                max_work=float(w.max()),
                max_abs_error=float(f"{err.max():.4g}"),
            )

        if not gemm and not mem[0]:
            raise InputError("no GEMM or memory timings found", file=paths[0] if paths else None)
        return cls(
            gemm={d: fit(*wt) for d, wt in sorted(gemm.items())},
            memory=fit(*mem) if mem[0] else None,
            shape=fit_shapes(rows, gpu) if gpu is not None and rows else {},
            sources=names,
        )


def _above_hbm(gpu: GPUSpec, nbytes: float, time_s: float) -> str | None:
    """Why a memory row is faster than `gpu`'s HBM allows (`HBM_RATE_TOLERANCE`), or None."""
    rate, hbm = nbytes / time_s, gpu.hbm_bandwidth_bytes_per_s
    if rate <= hbm * (1.0 + HBM_RATE_TOLERANCE):
        return None
    return (
        f"{nbytes:.6g} bytes in {time_s * 1e6:.3g} us is {rate / 1e9:.4g} GB/s, above the "
        f"{hbm / 1e9:.0f} GB/s HBM bandwidth of {gpu.name}: wrong GPU file, or bytes or time miscounted?"
    )


def _pos(row: dict[str, str], key: str, p: Path, lineno: int) -> float:
    raw = (row.get(key) or "").strip()
    try:
        v = float(raw)
    except ValueError:
        raise InputError(f"expected a number, found {raw!r}", file=p, line=lineno, field=key) from None
    if not v > 0:
        raise InputError(f"must be positive, found {raw!r}", file=p, line=lineno, field=key)
    return v


def _read_csv(p: Path) -> list[tuple[str, int, dict[str, str]]]:
    """Rows as (kind, line, row); kind from a `kind` column or from the columns present."""
    text = read_text(p, bounded=False)
    lines = [ln for ln in text.splitlines()]
    reader = csv.DictReader(lines)
    cols = {c.strip() for c in (reader.fieldnames or [])}
    has_gemm = {"M", "N", "K", "dtype", "time_s"} <= cols
    has_mem = {"bytes", "time_s"} <= cols
    if not has_gemm and not has_mem:
        raise InputError(
            "expected CSV columns M,N,K,dtype,time_s (GEMM), bytes,time_s (memory-bound) or "
            "size_bytes,time_us_oop,busbw_oop[,time_us_ip,busbw_ip] (collective)",
            file=p,
            line=1,
        )
    out = []
    for i, row in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "") for k, v in row.items()}
        kind = (row.get("kind") or "").strip().lower()
        if not kind:
            if has_gemm and (row.get("M") or "").strip():
                kind = "gemm"
            elif has_mem and (row.get("bytes") or "").strip():
                kind = "memory"
            else:
                raise InputError("row has neither M,N,K nor bytes", file=p, line=i)
        if kind not in ("gemm", "memory"):
            raise InputError(f"unknown kind {kind!r}; expected gemm or memory", file=p, line=i)
        out.append((kind, i, row))
    return out
