"""Run-level metrics and their Monte Carlo confidence intervals.

Glossary (one run of wall time W; every second of W is in exactly one phase: compute,
checkpoint stall, restart, elastic rejoin):

- goodput: kept steps × healthy step time / W — the fraction of the run a perfect,
  never-failing, never-checkpointing cluster would have needed for the same progress.
  Slow (degraded, shrunk) steps and lost work both lower it.
- ETTR (effective training time ratio): productive time / W, where productive time is the
  wall time spent computing steps whose progress is kept (not rolled back by a later
  failure). This follows, in our reading, Meta's definition in Kokolis et al. 2024,
  "Revisiting Reliability in Large-Scale Machine Learning Research Clusters" (HPCA 2025):
  the ratio of a job's productive runtime to its available wall-clock time, where the
  unproductive part is the time to notice a failure, wait to be rescheduled, initialize,
  load the checkpoint and recompute the progress lost since it; here blocking checkpoint
  stalls are also unproductive. Unlike goodput, a slow step counts in full.
- job MTTI: mean time to interruption, W / interruptions. Per run (a `runs` row) that is
  the run's own ratio; over several seeds it is the ratio estimator ΣW / Σinterruptions
  (`ratio_interval`), not the mean of the per-seed ratios, which is biased high (Jensen)
  and infinite as soon as one seed has no interruption.
- lost work per interruption: compute time rolled back (recomputed later), plus the part
  of a blocking checkpoint stall the failure aborted (that stall is also checkpoint time).
  Over seeds it is, like restart time per interruption, a ratio estimator: Σ lost work /
  Σ interruptions. The mean of the seeds' own ratios would weigh a seed with one
  interruption like one with twenty, and a seed never interrupted has no ratio at all.
- checkpoint_s, restart_s, restart_wait_s, rejoin_s: wall time in those phases.
- degraded_s: compute time in a state slower than healthy (stragglers, degraded or down
  links, fewer replicas).

Monte Carlo: each metric over N seeds is reported as its mean and the two-sided 95%
Student-t interval mean ± t(0.975, N−1)·s/√N (`t_interval`, the package's one
implementation of it). A ratio of sums (the job MTTI) gets the delta-method interval of the
ratio estimator R = Σx/Σy: R ± t(0.975, N−1)·s_d/(√N·ȳ), s_d the sample standard deviation
of the residuals x_k − R·y_k (`ratio_interval`).

What is simplified: the interval treats the seeds as independent draws of a roughly
normal mean; with few seeds it can leave the physical range, so `aggregate` clips it to
[0, ∞), and to [0, 1] for the goodput and ETTR fractions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

METRICS = (
    "goodput",
    "ettr",
    "interruptions",
    "job_mtti_s",
    "lost_work_per_interruption_s",
    "lost_work_s",
    "checkpoint_s",
    "restart_s",
    "restart_wait_s",
    "degraded_s",
    "restart_per_interruption_s",
    "checkpoints",
)


def t_interval(values: Iterable[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided Student-t confidence interval of the mean of `values`.

    The half-width is t((1 + confidence) / 2, n − 1)·s/√n, with s the sample standard
    deviation (ddof 1) of the n values that are not NaN.

    Args:
        values: one metric's values, one per seed (NaNs are dropped).
        confidence: two-sided confidence level, e.g. 0.95.

    Returns:
        (mean, low, high). All NaN without values; NaN bounds with fewer than 2 values or
        an infinite one.
    """
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2 or not np.isfinite(x).all():
        return mean, math.nan, math.nan
    half = _student_t(confidence, len(x)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean, mean - half, mean + half


#: Metrics of `METRICS` that are a ratio of two per-run sums: aggregated as Σ numerator /
#: Σ denominator over the seeds (`ratio_interval`), when both columns are present.
RATIOS = {
    "job_mtti_s": ("wall_s", "interruptions"),
    "lost_work_per_interruption_s": ("lost_work_s", "interruptions"),
    "restart_per_interruption_s": ("restart_s", "interruptions"),
}


def _student_t(confidence: float, n: int) -> float:
    # imported here: scipy.stats costs about half a second, and a run without failures
    # (or `clustersim --help`) never asks for an interval
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, n - 1))


def ratio_interval(
    numerators: Iterable[float], denominators: Iterable[float], confidence: float = 0.95
) -> tuple[float, float, float]:
    """Ratio estimator Σx/Σy over runs and its two-sided delta-method Student-t interval.

    The half-width is t((1 + confidence) / 2, n − 1)·s_d/(√n·ȳ), with s_d the sample
    standard deviation (ddof 1) of x_k − R·y_k and ȳ the mean denominator.

    Args:
        numerators: one value per run (e.g. its wall time).
        denominators: one value per run (e.g. its interruptions).
        confidence: two-sided confidence level, e.g. 0.95.

    Returns:
        (ratio, low, high). No denominator anywhere gives an infinite ratio (a positive
        numerator) or NaN (0/0: lost work per interruption of runs never interrupted), with
        NaN bounds; so does a single run; no runs give NaNs.
    """
    x = np.asarray(list(numerators), dtype=float)
    y = np.asarray(list(denominators), dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    total = float(y.sum())
    if total == 0:
        return (math.inf if x.sum() > 0 else math.nan), math.nan, math.nan
    ratio = float(x.sum()) / total
    if len(x) < 2:
        return ratio, math.nan, math.nan
    spread = float((x - ratio * y).std(ddof=1))
    half = _student_t(confidence, len(x)) * spread / (math.sqrt(len(x)) * float(y.mean()))
    return ratio, ratio - half, ratio + half


def aggregate(
    runs: pd.DataFrame, by: Sequence[str] = (), metrics: Sequence[str] = METRICS, confidence: float = 0.95
) -> pd.DataFrame:
    """Per group of runs: `n`, and for each metric `<m>_mean`, `<m>_lo`, `<m>_hi` (`t_interval`;
    for a ratio of `RATIOS`, the ratio estimator and its interval, `ratio_interval`; `_mean`
    is then that ratio, not a mean of the runs' ratios).

    Args:
        runs: one row per run (seed) with the metrics as columns.
        by: columns to group by (none: one group).
        metrics: the metrics to aggregate (those missing from `runs` are skipped).
        confidence: two-sided confidence level of the intervals.

    Returns:
        One row per group, the bounds clipped to the metric's physical range.
    """
    groups = runs.groupby(list(by), sort=False, dropna=False) if by else [((), runs)]
    rows = []
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key, strict=True))
        row["n"] = len(g)
        for m in metrics:
            num, den = RATIOS.get(m, ("", ""))
            if num in g and den in g:
                mean, lo, hi = ratio_interval(g[num].astype(float), g[den].astype(float), confidence)
            elif m in g:
                mean, lo, hi = t_interval(g[m].astype(float), confidence)
            else:
                continue
            # a t-interval of few seeds can leave the physical range: clip to it
            lo = max(lo, 0.0)
            if m in ("goodput", "ettr"):
                hi = min(hi, 1.0)
            row[f"{m}_mean"], row[f"{m}_lo"], row[f"{m}_hi"] = mean, lo, hi
        rows.append(row)
    return pd.DataFrame(rows)
