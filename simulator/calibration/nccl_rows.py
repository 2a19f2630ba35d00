"""Columns and data rows of an nccl-tests / rccl-tests result table.

Every nccl-tests binary prints one row per message size:

    #       size    count   type  redop  root |  time  algbw  busbw #wrong | time algbw busbw #wrong
    #        (B) (elements)                   |  (us) (GB/s) (GB/s)        | (us) ...

that is, leading fields (size, element count, type, then `redop` and `root` where the binary
has them) and the same measured fields twice: out-of-place, then in-place. Times are
microseconds and bandwidths GB/s (1e9 B/s); the records made here hold seconds and bytes/s.

Tolerated: the older layout without a `root` (or `redop`) column, `N/A` in the error column,
extra per-half columns (rccl-tests builds print more; they are read by the header's names and
kept as `extra_<name>`), tables without a column header (then 4 measured fields per half, and
one half only when a row is too short for two).

Simplified: the measured halves are read from the right end of a row, so the leading fields
are whatever precedes them; every printed row is checked against algbw = size / time, which
catches misread columns and rows cut mid-way.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from simulator.errors import InputError

SECONDS_PER_MICROSECOND = 1e-6
BYTES_PER_GB = 1e9

#: the largest message size and bandwidth a row may give (a profile's own limits: 1 EB, 1 PB/s)
MAX_SIZE_BYTES = 10**18
MAX_GB_PER_S = 1e6

#: measured fields of one half when the table has no column header
DEFAULT_HALF = ("time", "algbw", "busbw", "wrong")


def header_layout(text: str) -> tuple[list[str], list[str]] | None:
    """Read a `size count type ... time algbw busbw ...` column header.

    Args:
        text: one log line, launcher prefix removed (`#` marks may be present or stripped).

    Returns:
        The leading column names and the column names of one measured half, or None when
        the line is no column header.
    """
    tokens = [t.lstrip("#").lower() for t in text.replace("#", " #").split()]
    tokens = [t for t in tokens if t]
    if "size" not in tokens or "time" not in tokens:
        return None
    first = tokens.index("time")
    lead = tokens[:first]
    rest = tokens[first:]
    if "count" not in lead:
        return None
    times = [i for i, t in enumerate(rest) if t == "time"]
    half = rest[: times[1]] if len(times) > 1 else rest
    return lead, half


def measured_width(n_fields: int) -> int:
    """Measured fields per row of a table without column header: two halves of 4, unless a row
    of `n_fields` fields is too short to also hold the 3 leading fields (then one half)."""
    return 8 if n_fields - 8 >= 3 else 4


def _number(tok: str, path: Path, lineno: int, what: str) -> float:
    t = tok.rstrip("*")
    if t.upper() in ("N/A", "NA", "-"):
        return float("nan")
    try:
        val = float(t)
    except ValueError:
        val = float("nan")
    else:
        if math.isfinite(val):
            return val
    raise InputError(
        f"expected a finite number for {what}, found {tok!r} (row cut or not nccl-tests output?)",
        file=path,
        line=lineno,
        field=what.lstrip("#"),
    )


def parse_row(
    tokens: list[str], n_measured: int, half: list[str], path: Path, lineno: int
) -> tuple[dict[str, object], list[list[float]]]:
    """Split one data row into its leading fields and its measured halves.

    Args:
        tokens: the row's whitespace-separated fields.
        n_measured: measured fields in the row (both halves).
        half: column names of one measured half.
        path: the log file, named in errors.
        lineno: 1-based line of the row, named in errors.

    Returns:
        The leading fields (`size_bytes`, `count`, `dtype`, `redop`, `root`, and `_lead`,
        their number) and the values of each half, in order.

    Raises:
        InputError: too few or too many fields, or a field that is not what its column holds.
    """
    lead, rest = tokens[:-n_measured], tokens[-n_measured:]
    if len(tokens) < n_measured + 3:
        raise InputError(
            f"table row has {len(tokens)} fields, expected {n_measured + 3} to {n_measured + 5} "
            "(row cut mid-way?)",
            file=path,
            line=lineno,
        )
    if len(lead) > 5:
        raise InputError(
            f"table row has {len(tokens)} fields, expected at most {n_measured + 5}",
            file=path,
            line=lineno,
        )
    out: dict[str, object] = {
        "size_bytes": int(lead[0]),
        "count": int(lead[1]),
        "dtype": lead[2],
        "redop": None,
        "root": None,
        "_lead": len(lead),
    }
    for tok in lead[3:]:
        if re.fullmatch(r"-?\d+", tok):
            out["root"] = int(tok)
        elif re.fullmatch(r"[A-Za-z_]\w*", tok):
            out["redop"] = tok
        else:
            raise InputError(f"unexpected field {tok!r} before the time column", file=path, line=lineno)
    width = len(half)
    halves = []
    for h in range(n_measured // width):
        part = rest[h * width : (h + 1) * width]
        vals = [_number(t, path, lineno, f"{half[i]}") for i, t in enumerate(part)]
        halves.append(vals)
    return out, halves


def check_size(size_bytes: int, path: Path, lineno: int, field: str = "size") -> None:
    """Refuse a message size above `MAX_SIZE_BYTES` (what a profile can hold)."""
    if size_bytes > MAX_SIZE_BYTES:
        size = f"{size_bytes:.3e}" if size_bytes < 10**300 else f"a number of {len(str(size_bytes))} digits"
        raise InputError(
            f"message size {size} bytes is above {MAX_SIZE_BYTES:.0e} bytes; expected a measured size",
            file=path,
            line=lineno,
            field=field,
        )


def check_bandwidth(gb_per_s: float, name: str, path: Path, lineno: int) -> None:
    """Refuse a bandwidth (GB/s) that is not finite, below 0 or above `MAX_GB_PER_S`."""
    if not (0 <= gb_per_s <= MAX_GB_PER_S):
        raise InputError(
            f"expected a finite {name} of 0 to {MAX_GB_PER_S:.0e} GB/s, found {gb_per_s}",
            file=path,
            line=lineno,
            field=name,
        )


def check_count(value: float, name: str, path: Path, lineno: int) -> None:
    """Refuse a count that is printed (not N/A) but not a whole number of at least 0."""
    if not math.isnan(value) and (value < 0 or value != int(value)):
        raise InputError(f"expected a whole count of at least 0, found {value:g}", file=path, line=lineno,
                         field=name)  # fmt: skip


def check_algbw(size_bytes: int, time_us: float, algbw_gb_per_s: float, path: Path, lineno: int) -> None:
    """nccl-tests prints algbw = size / time; a mismatch means misread columns.

    Raises:
        InputError: the time is not positive, or algbw differs from size / time by more
            than the printed rounding allows (0.011 GB/s plus 2 %).
    """
    if not (time_us > 0 and time_us < float("inf")):
        raise InputError(f"expected a time above 0 us, found {time_us}", file=path, line=lineno, field="time")
    check_size(size_bytes, path, lineno)
    expect = size_bytes / time_us / 1e3
    if abs(expect - algbw_gb_per_s) > 0.011 + 0.02 * expect:
        raise InputError(
            f"algbw {algbw_gb_per_s} GB/s does not match size/time = {expect:.3g} GB/s "
            "(columns misread or row cut?)",
            file=path,
            line=lineno,
            field="algbw",
        )


def row_records(
    size_bytes: int,
    lead: dict[str, object],
    halves: list[list[float]],
    half: list[str],
    path: Path,
    lineno: int,
) -> list[dict[str, object]]:
    """One record per measured half of a row, in SI units (the columns of `ROW_COLUMNS`).

    Args:
        size_bytes: the row's message size.
        lead: the leading fields from `parse_row`.
        halves: the measured values of each half from `parse_row`.
        half: column names of one measured half.
        path: the log file, named in errors.
        lineno: 1-based line of the row, recorded and named in errors.

    Returns:
        The records; the second half is the in-place run. Columns the header names beyond
        time, algbw, busbw and the error count are kept as `extra_<name>`.

    Raises:
        InputError: the header lacks time, algbw or busbw, or a half fails `check_algbw`.
    """
    idx = {name: half.index(name) for name in ("time", "algbw", "busbw") if name in half}
    if len(idx) < 3:
        raise InputError("table header lacks time, algbw or busbw columns", file=path, line=lineno)
    wrong_i = next((i for i, n in enumerate(half) if n in ("#wrong", "wrong", "error")), None)
    records = []
    for h, vals in enumerate(halves):
        check_algbw(size_bytes, vals[idx["time"]], vals[idx["algbw"]], path, lineno)
        for name in ("algbw", "busbw"):
            check_bandwidth(vals[idx[name]], name, path, lineno)
        if wrong_i is not None and half[wrong_i] != "error":  # a count; `error` is a largest error
            check_count(vals[wrong_i], "wrong", path, lineno)
        rec = dict(lead)
        rec.update(
            time_s=vals[idx["time"]] * SECONDS_PER_MICROSECOND,
            algbw_bytes_per_s=vals[idx["algbw"]] * BYTES_PER_GB,
            busbw_bytes_per_s=vals[idx["busbw"]] * BYTES_PER_GB,
            wrong=vals[wrong_i] if wrong_i is not None else float("nan"),
            in_place=h == 1,
            line=lineno,
            _halves=len(halves),
        )
        for i, name in enumerate(half):
            if i not in idx.values() and i != wrong_i:
                rec[f"extra_{name.lstrip('#')}"] = vals[i]
        records.append(rec)
    return records
