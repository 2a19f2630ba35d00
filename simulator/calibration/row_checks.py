"""Checks of a benchmark table's rows against what the table is said to have measured.

Once the collective and the GPU count of a table are settled
(`simulator.calibration.inference`), its rows can be held to them. Checked, one line
`file:line: field: message` each (exit 2):

* the GPU count: a collective needs at least 2 ranks. On one GPU nothing crosses a link:
  nccl-tests' busbw factor of all_reduce, all_gather, reduce_scatter and all_to_all is 0
  there, and the engine never prices a collective of one rank.
* busbw / algbw of every row and half against the factor of the collective on that GPU
  count (`simulator.calibration.collective.busbw_factor`). nccl-tests computes busbw =
  algbw x factor and prints both with 2 decimals (GB/s), each within 0.005 of its value, so
  a row agrees when |busbw - factor x algbw| <= 0.005 (1 + factor); rows where both print
  0.00 tell nothing and are skipped. A row that disagrees is a table of another collective
  (or GPU count) than the one read from the heading, argument or file name: the message
  names the collective (or GPU count) its ratio fits.
* the `#wrong` count of every half: nccl-tests' data check found that many wrong elements,
  so the run did not compute the collective correctly and its times are not of a correct
  run.

Simplified: an `error` column (older nccl-tests and some rccl-tests builds print the largest
error there, not a count, and judge it against a tolerance of the data type) is not checked
per row; such runs say `Out of bounds values : N FAILED` after the table
(`simulator.calibration.nccl_log`). A CSV table without algbw columns is held to algbw =
size / time (`check_time_ratios`), each value taken as rounded twice (by nccl-tests, then
by the CSV).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from simulator.calibration.collective import KINDS, busbw_factor, ranks_from_factor
from simulator.errors import InputError

#: half the last printed digit of a bandwidth (GB/s, printed with 2 decimals)
PRINTED_HALF_STEP_GBPS = 0.005


def _printed_time_half_step_us(time_us: float) -> float:
    """Half the step nccl-tests prints a time with (`%7.2f` below 100 us, `%7.1f` below
    10,000 us, `%7.0f` above: its `common.cu`)."""
    return 0.005 if time_us < 100 else 0.05 if time_us < 10_000 else 0.5


def check_gpus(n_gpus: int, note: str, path: Path | str, line: int) -> None:
    """Refuse a table of fewer than 2 ranks.

    Args:
        n_gpus: the table's rank count.
        note: where that count came from (`infer_gpus`), named in the message.
        path: the benchmark file, named in errors.
        line: line of the table's first row, named in errors.

    Raises:
        InputError: `n_gpus` is below 2.
    """
    if n_gpus >= 2:
        return
    raise InputError(
        f"{n_gpus} ({note}): a collective needs at least 2 GPUs; on one GPU nothing crosses a link "
        "(nccl-tests' busbw factor 2(n-1)/n is 0)",
        file=path,
        line=line,
        field="n_gpus",
    )


def check_wrong(rows: pd.DataFrame, path: Path | str) -> None:
    """Refuse a row whose `#wrong` count is above 0 (column `wrong`, NaN where not printed).

    Raises:
        InputError: at the first such row.
    """
    bad = rows[rows["wrong"] > 0]
    if bad.empty:
        return
    r = bad.iloc[0]
    half = "in-place" if r["in_place"] else "out-of-place"
    raise InputError(
        f"{r['wrong']:g} wrong elements ({half}, size {int(r['size_bytes'])}): nccl-tests' data "
        "check failed, so these times are not of a correct run; rerun until #wrong is 0",
        file=path,
        line=int(r["line"]),
        field="wrong",
    )


def agrees(busbw_gbps: float, algbw_gbps: float, factor: float) -> bool:
    """busbw = factor x algbw within the printed rounding of both (see the module docstring)."""
    return abs(busbw_gbps - factor * algbw_gbps) <= PRINTED_HALF_STEP_GBPS * (1.0 + factor) * (1 + 1e-9)


def _fits(
    busbw_gbps: float, algbw_gbps: float, kind: str, n_gpus: int, fit: Callable[[float], bool] | None = None
) -> str:
    """The collectives (on `n_gpus`) or GPU counts (of `kind`) whose factor the row fits:
    `fit(factor)`, by default `agrees` with the row's printed busbw and algbw."""
    if fit is None:
        fit = partial(agrees, busbw_gbps, algbw_gbps)
    kinds = [k for k in KINDS if fit(busbw_factor(k, n_gpus))]
    if kinds:
        # broadcast, reduce and send_recv share factor 1; so do all_gather, reduce_scatter, all_to_all
        return f"{', '.join(kinds[:-1])} or {kinds[-1]}" if len(kinds) > 1 else kinds[0]
    m = ranks_from_factor(kind, busbw_gbps / algbw_gbps) if algbw_gbps > 0 else None
    if m is not None and m >= 1.5 and fit(busbw_factor(kind, round(m))):
        return f"{kind} on {round(m)} GPUs"
    return f"no collective on {n_gpus} GPUs"


def check_ratios(rows: pd.DataFrame, kind: str, n_gpus: int, notes: str, path: Path | str) -> None:
    """Refuse a row whose busbw / algbw is not the factor of `kind` on `n_gpus` ranks.

    Args:
        rows: the table's rows (`BenchmarkTable.rows`: bytes/s, `line`, `in_place`).
        kind: the table's collective.
        n_gpus: the table's rank count (at least 2).
        notes: where collective and GPU count came from, named in the message.
        path: the benchmark file, named in errors.

    Raises:
        InputError: a row disagrees; the message names the one of the largest algbw (the
            least rounded ratio) and what its ratio fits.
    """
    factor = busbw_factor(kind, n_gpus)
    worst = None  # the disagreeing row of the largest algbw: its ratio is the least rounded
    for r in rows.itertuples(index=False):
        algbw, busbw = r.algbw_bytes_per_s / 1e9, r.busbw_bytes_per_s / 1e9
        if not (math.isfinite(algbw) and math.isfinite(busbw)):
            continue
        if round(algbw, 2) == 0 and round(busbw, 2) == 0:
            continue
        if not agrees(busbw, algbw, factor) and (worst is None or algbw > worst[0]):
            worst = (algbw, busbw, int(r.line))
    if worst is None:
        return
    algbw, busbw, line = worst
    ratio = f"{busbw / algbw:.4g}" if algbw > 0 else "undefined"
    raise InputError(
        f"busbw/algbw = {busbw:.2f}/{algbw:.2f} = {ratio} fits {_fits(busbw, algbw, kind, n_gpus)}, "
        f"not {kind} on {n_gpus} GPUs (factor {factor:.4g}; {notes}); one collective per log, "
        "or --collective / --gpus where the log does not say them",
        file=path,
        line=line,
        field="busbw",
    )


class TimedRow(NamedTuple):
    """One half of a table row whose algbw is size / time (a CSV without algbw columns)."""

    line: int
    size_bytes: int
    time_us: float
    time_half_step_us: float  # half the last written digit of the time
    busbw_gbps: float
    busbw_half_step_gbps: float  # half the last written digit of the busbw


def check_time_ratios(rows: list[TimedRow], kind: str, n_gpus: int, notes: str, path: Path | str) -> None:
    """Refuse a half whose busbw is not the factor of `kind` on `n_gpus` times size / time.

    A value may be rounded twice: as nccl-tests prints it (busbw to 0.01 GB/s; a time to
    0.01 us below 100 us, 0.1 us below 10,000 us, else 1 us) and again as the CSV writes it,
    so each is known to within half its last written digit plus half of nccl-tests' step.
    algbw then lies between size / (time + step) and size / (time - step), and busbw must
    lie between the factor times those, widened by its own step. Halves whose time is not
    larger than its step say nothing and are skipped.

    Raises:
        InputError: a half disagrees; the message names the one of the largest algbw.
    """
    factor = busbw_factor(kind, n_gpus)
    worst = None
    for r in rows:
        if r.time_us <= _time_step_us(r):
            continue
        if _in_band(r, factor):
            continue
        algbw = r.size_bytes / r.time_us / 1e3
        if worst is None or algbw > worst[0]:
            worst = (algbw, r)
    if worst is None:
        return
    algbw, r = worst
    fits = _fits(r.busbw_gbps, algbw, kind, n_gpus, partial(_in_band, r))
    raise InputError(
        f"busbw {r.busbw_gbps:g} GB/s against size/time = {r.size_bytes}/{r.time_us:g} us = {algbw:.4g} "
        f"GB/s algbw: ratio {r.busbw_gbps / algbw:.4g} fits {fits}, "
        f"not {kind} on {n_gpus} GPUs (factor {factor:.4g}; {notes}); "
        "or --collective / --gpus where the table does not say them",
        file=path,
        line=r.line,
        field="busbw",
    )


def _in_band(r: TimedRow, factor: float) -> bool:
    """Whether `r`'s busbw is `factor` x size / time within the rounding of both
    (`check_time_ratios`)."""
    t_step = _time_step_us(r)
    lo = r.size_bytes / (r.time_us + t_step) / 1e3  # GB/s
    hi = r.size_bytes / (r.time_us - t_step) / 1e3
    slack = (r.busbw_half_step_gbps + PRINTED_HALF_STEP_GBPS) * (1 + 1e-9)
    return factor * lo - slack <= r.busbw_gbps <= factor * hi + slack


def _time_step_us(r: TimedRow) -> float:
    """How far `r`'s true time may be from its written one: nccl-tests' rounding plus the CSV's."""
    return r.time_half_step_us + _printed_time_half_step_us(r.time_us)
