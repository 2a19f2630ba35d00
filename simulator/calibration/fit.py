"""Fit a latency-bandwidth line plus a size-dependent efficiency curve to one table.

Model of the time of one collective of S bytes (S as nccl-tests prints it):

    t_line(S) = alpha + S / beta               (beta: algorithm bandwidth, bytes/s)
    t(S)      = t_line(S) / e(S)

* `alpha`, `beta`: first fitted on every measured size S > 0 by minimizing the *relative*
  error `(t_line(S_i) - t_i) / t_i` (weighted least squares with weights 1/t_i^2, linear
  in alpha and 1/beta, non-negative, then a robust soft-L1 refinement at a 5 % scale);
  then pinned to the two regimes the line stands for (`refine_asymptotes`): beta to the
  sizes within 4 octaves of the largest, alpha to the sizes whose transfer term is under
  10 % of alpha. So `busbw = beta * factor(n)` is the large-message plateau nccl-tests
  users quote and alpha the small-message latency.
* The bus bandwidth is `busbw = beta * factor(n)` (nccl-tests doc/PERFORMANCE.md,
  `simulator.calibration.collective.busbw_factor`); profiles store busbw because it is the
  quantity that stays put when the rank count changes.
* `e(S)`: NCCL switches protocol (LL, LL128, Simple) and algorithm (ring, tree, NVLS) with
  the size, so no single line fits the middle sizes (a 1-node H100 all-reduce is 2x slower
  than the line near 4 MiB). A protocol-switch model (NCCL's own tuner takes the minimum of
  alpha_p + S/beta_p over protocols) is concave in S, but measured curves are not (on the
  GCP A3 Mega all-reduce the time barely grows from 16 to 32 MiB). We therefore fit
  log e(S) as a piecewise-linear function of log2 S by least squares, with knots at both
  ends, one octave inside each end, and at most 2 octaves (x4) apart in between; where a
  size is still reproduced worse than 10 %, a knot is added at the worst size and the fit
  repeated (adaptive refinement within a tolerance). Sizes between knots are interpolated,
  not stored, so the error reported there is a real test of the curve. Outside the
  measured range e is held at its end values. `e` = line time / measured time: 1 where
  the line holds, below 1 where it is too optimistic.
* The measured time of a size is the smaller of its out-of-place and in-place times
  (noise only ever adds time; a single 5x outlier in one half is common in the samples).
  Size-0 rows are left out: NCCL returns early for them, so they measure no latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.calibration.collective import busbw_factor
from simulator.calibration.table import BenchmarkTable
from simulator.errors import InputError

KNOT_SPACING_OCTAVES = 2.0  # grid of efficiency-curve knots
ROBUST_SCALE = 0.05
KNOT_TOLERANCE = 0.10


@dataclass(frozen=True)
class EfficiencyCurve:
    """e(S) = line time / measured time, piecewise linear in (log2 S, log e)."""

    sizes_bytes: tuple[float, ...]
    efficiency: tuple[float, ...]

    def __call__(self, size_bytes: float | np.ndarray) -> np.ndarray:
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        if not self.sizes_bytes:
            return np.ones_like(s)
        x = np.log2(np.maximum(s, self.sizes_bytes[0]))
        kx = np.log2(np.asarray(self.sizes_bytes))
        ky = np.log(np.asarray(self.efficiency))
        return np.exp(np.interp(x, kx, ky))


def line_time_s(alpha_s: float, algbw_bytes_per_s: float, size_bytes: float | np.ndarray) -> np.ndarray:
    """t_line(S) = alpha + S / beta."""
    return alpha_s + np.asarray(size_bytes, dtype=float) / algbw_bytes_per_s


def fit_line(sizes_bytes: np.ndarray, times_s: np.ndarray) -> tuple[float, float]:
    """alpha (s) and beta (algorithm bandwidth, bytes/s) minimizing relative error.

    Weighted least squares in relative error (non-negative), then a robust soft-L1
    refinement. One size gives alpha = 0 and beta = S/t.
    """
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if len(s) == 0:
        raise ValueError("no sizes to fit")
    if len(s) == 1:
        return 0.0, float(s[0] / t[0])
    # imported here: scipy.optimize is loaded only by runs that fit (not by every `run`)
    from scipy.optimize import least_squares, nnls

    a = np.column_stack([1.0 / t, s / t])
    (alpha, gamma), _ = nnls(a, np.ones_like(t))
    if gamma <= 0:  # time does not grow with size: bound the bandwidth by the data
        gamma = 1.0 / float(np.max(s / t))
    alpha = max(alpha, 1e-3 * float(np.min(t)))

    def resid(p: np.ndarray) -> np.ndarray:
        return (math.exp(p[0]) + s * math.exp(p[1])) / t - 1.0

    res = least_squares(
        resid,
        x0=[math.log(alpha), math.log(gamma)],
        loss="soft_l1",
        f_scale=ROBUST_SCALE,
        method="trf",
    )
    alpha, gamma = math.exp(res.x[0]), math.exp(res.x[1])
    return alpha, 1.0 / gamma


def refine_asymptotes(
    sizes_bytes: np.ndarray, times_s: np.ndarray, alpha_s: float, algbw_bytes_per_s: float
) -> tuple[float, float]:
    """Pin the line to the two regimes it stands for: beta to the largest sizes, alpha to
    the smallest.

    beta: relative least squares (alpha held) over the sizes within 4 octaves of the
    largest; alpha: median of t - S/beta over the sizes whose transfer term is at most 10 %
    of alpha. Repeated three times; tables with fewer than 4 sizes keep the whole-range fit.
    The efficiency curve then reads as an efficiency: about 1 at both ends, below 1 where
    NCCL is between protocols.
    """
    s = np.asarray(sizes_bytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if len(s) < 4:
        return alpha_s, algbw_bytes_per_s
    alpha, beta = alpha_s, algbw_bytes_per_s
    top = s >= s.max() / 16
    for _ in range(3):
        u = s[top] / t[top]
        gamma = float(np.sum(u * (1.0 - alpha / t[top])) / np.sum(u * u))
        if gamma > 0:
            beta = 1.0 / gamma
        small = s / beta <= 0.1 * alpha
        if small.sum() >= 2:
            alpha = max(float(np.median(t[small] - s[small] / beta)), 0.0)
    return alpha, beta


def _knots(lo: float, hi: float) -> np.ndarray:
    """Knots in log2 S: both ends, one octave in from each end, and an even grid at most
    `KNOT_SPACING_OCTAVES` apart between them.

    The end values are what the model holds outside the measured range, so they are pinned
    by a knot one octave inside as well.
    """
    if hi - lo <= 2 * 1.0 + KNOT_SPACING_OCTAVES:
        n = int(math.ceil((hi - lo) / 1.0)) + 1
        return np.linspace(lo, hi, n)
    inner_lo, inner_hi = lo + 1.0, hi - 1.0
    n_inner = int(math.ceil((inner_hi - inner_lo) / KNOT_SPACING_OCTAVES)) + 1
    return np.concatenate([[lo], np.linspace(inner_lo, inner_hi, n_inner), [hi]])


def _lstsq_curve(x: np.ndarray, y: np.ndarray, kx: np.ndarray) -> np.ndarray:
    basis = np.empty((len(x), len(kx)))
    for k in range(len(kx)):
        unit = np.zeros(len(kx))
        unit[k] = 1.0
        basis[:, k] = np.interp(x, kx, unit)
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    return coef


def fit_efficiency(
    sizes_bytes: np.ndarray, ratio: np.ndarray, tolerance: float = KNOT_TOLERANCE
) -> EfficiencyCurve:
    """Least-squares piecewise-linear log e(log2 S).

    Knots: see `_knots`; then, while some size is reproduced worse than `tolerance`
    (relative), a knot is added at the worst such size (adaptive refinement, as in
    piecewise-linear approximation within a tolerance).
    """
    s = np.asarray(sizes_bytes, dtype=float)
    y = np.log(np.asarray(ratio, dtype=float))
    x = np.log2(s)
    lo, hi = float(x.min()), float(x.max())
    if hi - lo <= 0:
        return EfficiencyCurve((float(s[0]),), (float(np.exp(y.mean())),))
    kx = _knots(lo, hi)
    for _ in range(len(x)):
        coef = _lstsq_curve(x, y, kx)
        fitted = np.interp(x, kx, coef)
        err = np.abs(np.exp(y - fitted) - 1.0)  # model/measured - 1 (model = line / e)
        worst = int(np.argmax(err))
        if err[worst] <= tolerance or np.any(np.isclose(kx, x[worst])):
            break
        kx = np.sort(np.append(kx, x[worst]))
    return EfficiencyCurve(tuple(float(v) for v in np.exp2(kx)), tuple(float(v) for v in np.exp(coef)))


@dataclass(frozen=True)
class TableFit:
    """The fit of one table: line, efficiency curve and the error at every size.

    `errors` columns: size_bytes, measured_time_s, line_time_s, model_time_s,
    line_rel_error, rel_error (model/measured - 1), measured_busbw_bytes_per_s,
    model_busbw_bytes_per_s.
    """

    table: BenchmarkTable
    alpha_s: float
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    curve: EfficiencyCurve
    errors: pd.DataFrame

    def time_s(self, size_bytes: float | np.ndarray) -> np.ndarray:
        return line_time_s(self.alpha_s, self.algbw_bytes_per_s, size_bytes) / self.curve(size_bytes)

    def summary(self) -> dict[str, object]:
        """Headline numbers: median |error| for sizes >= 1 MiB, max |error| over all sizes."""
        e = self.errors
        big = e[e["size_bytes"] >= 2**20]
        return {
            "label": self.table.label,
            "collective": self.table.collective,
            "n_gpus": self.table.n_gpus,
            "n_nodes": self.table.n_nodes,
            "n_sizes": len(e),
            "alpha_us": self.alpha_s * 1e6,
            "busbw_gbps": self.busbw_bytes_per_s / 1e9,
            "median_abs_error_ge_1mib": float(big["rel_error"].abs().median()) if len(big) else float("nan"),
            "max_abs_error": float(e["rel_error"].abs().max()),
            "line_median_abs_error_ge_1mib": float(big["line_rel_error"].abs().median())
            if len(big)
            else float("nan"),
            "line_max_abs_error": float(e["line_rel_error"].abs().max()),
        }


def error_frame(
    table: BenchmarkTable,
    time_fn: Callable[[np.ndarray], np.ndarray],
    line_fn: Callable[[np.ndarray], np.ndarray] | None = None,
    half: str = "faster",
) -> pd.DataFrame:
    """Measured vs modeled time and busbw at every size > 0 of `table`.

    Args:
        table: the measured table.
        time_fn: modeled time (seconds) of an array of sizes (bytes).
        line_fn: the fitted line's time of an array of sizes, to add `line_time_s` and
            `line_rel_error` columns; None to leave them out.
        half: which measured time is scored (`BenchmarkTable.sizes`).
    """
    m = table.sizes(half)
    m = m[m["size_bytes"] > 0].reset_index(drop=True)
    s = m["size_bytes"].to_numpy(dtype=float)
    t = m["time_s"].to_numpy(dtype=float)
    model = np.asarray(time_fn(s), dtype=float)
    factor = busbw_factor(table.collective, table.n_gpus)
    out = pd.DataFrame(
        {
            "size_bytes": s,
            "measured_time_s": t,
            "model_time_s": model,
            "rel_error": model / t - 1.0,
            "measured_busbw_bytes_per_s": s / t * factor,
            "model_busbw_bytes_per_s": s / model * factor,
        }
    )
    if line_fn is not None:
        line = np.asarray(line_fn(s), dtype=float)
        out.insert(2, "line_time_s", line)
        out.insert(4, "line_rel_error", line / t - 1.0)
    return out


def fit_table(table: BenchmarkTable) -> TableFit:
    """Fit line and efficiency curve to one table (see the module docstring).

    Raises:
        InputError: the table has no size above 0 bytes.
    """
    m = table.sizes()
    m = m[m["size_bytes"] > 0]
    if m.empty:
        raise InputError(
            f"{table.label}: no message size above 0 bytes to fit",
            file=table.source,
            line=table.first_line,
        )
    s = m["size_bytes"].to_numpy(dtype=float)
    t = m["time_s"].to_numpy(dtype=float)
    alpha, beta = refine_asymptotes(s, t, *fit_line(s, t))
    curve = fit_efficiency(s, line_time_s(alpha, beta, s) / t)
    factor = busbw_factor(table.collective, table.n_gpus)
    fit = TableFit(table, alpha, beta, beta * factor, curve, pd.DataFrame())

    errors = error_frame(table, fit.time_s, lambda x: line_time_s(alpha, beta, x))
    return TableFit(table, alpha, beta, beta * factor, curve, errors)
