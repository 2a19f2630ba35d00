"""A collective benchmark table kept as CSV, in nccl-tests' columns.

Many people keep nccl-tests / rccl-tests results as a table rather than as the raw log.
The CSV form read here has one row per message size and the columns

    size_bytes, time_us_oop, busbw_oop[, time_us_ip, busbw_ip]

(time in microseconds, bus bandwidth in GB/s = 1e9 B/s, as nccl-tests prints them; `_oop`
is the out-of-place half, `_ip` the in-place half), and optionally `algbw_oop` / `algbw_ip`
(algorithm bandwidth, GB/s), `collective`, `n_gpus`, `n_nodes`, `count` and `type` (constant
over the file, except count). The in-place pair is optional but comes as a pair. Collective,
GPU and node counts come from the columns, else the CLI arguments, else the file name
(`simulator.calibration.inference`).

Read as the log parser reads the same rows: size-0 rows (nccl-tests prints some; NCCL
returns early for them) are left out, and a bus bandwidth of 0 (nccl-tests prints 0.00 for
the smallest sizes) is a value.

Checked, one line `file:line: column: message` each: missing columns, a row with more cells
than the header has columns, a size that is not a whole number or not larger than the one
above it, a time that is not a finite positive number, a bandwidth that is not a finite
number of at least 0, two collectives (or GPU / node counts) in one file, a collective, GPU
or node count nothing tells (naming the column that would), fewer than 2 GPUs, a table
without rows above 0 bytes, a size above 1e18 bytes or a bandwidth above 1e6 GB/s (a
profile's limits), and busbw against the collective's factor times algbw: the algbw column
where given, else size / time, each value taken as rounded twice, by nccl-tests and by the
CSV (`simulator.calibration.row_checks`). Without algbw columns the algorithm bandwidth is
size / time.
"""

from __future__ import annotations

import csv
import decimal
import hashlib
import math
from pathlib import Path

import pandas as pd

from simulator.calibration.collective import KINDS, normalize_kind
from simulator.calibration.inference import infer_collective, infer_gpus, infer_nodes
from simulator.calibration.nccl_rows import check_bandwidth, check_size
from simulator.calibration.row_checks import TimedRow, check_gpus, check_ratios, check_time_ratios
from simulator.calibration.table import BenchmarkTable
from simulator.config.loader import read_input_bytes
from simulator.errors import InputError

REQUIRED = ("size_bytes", "time_us_oop", "busbw_oop")
IN_PLACE = ("time_us_ip", "busbw_ip")
#: optional algorithm bandwidth of each half (GB/s)
ALGBW = {False: "algbw_oop", True: "algbw_ip"}
SECONDS_PER_MICROSECOND = 1e-6
BYTES_PER_GB = 1e9


def is_collective_csv(path: Path) -> bool:
    """True when the first line of `path` names a `size_bytes` column (a collective table,
    not a GEMM or memory-kernel CSV); False for unreadable files and anything but a regular
    file, which is not opened (read errors come later)."""
    if not path.is_file():
        return False
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:  # a spreadsheet's byte-order mark
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError):
        return False
    return "size_bytes" in [h.strip().lower() for h in header]


def _positive(row: dict[str, str], col: str, path: Path, line: int, *, zero: bool = False) -> float:
    """The number in `col`: finite and above 0 (at least 0 with `zero`)."""
    raw = (row.get(col) or "").strip()
    try:
        val = float(raw)
    except ValueError:
        raise InputError(f"expected a number, found {raw!r}", file=path, line=line, field=col) from None
    if not math.isfinite(val) or val < 0 or (val == 0 and not zero):
        what = "of at least 0" if zero else "above 0"
        raise InputError(f"expected a finite number {what}, found {raw}", file=path, line=line, field=col)
    return val


def _constant(rows: list[tuple[int, dict[str, str]]], col: str, path: Path) -> str | None:
    """The one value a column holds on every row (None without the column)."""
    first: str | None = None
    for line, row in rows:
        val = (row.get(col) or "").strip()
        if col == "collective":
            val = normalize_kind(val) or val
        if first is None:
            first = val
        elif val != first:
            what = "collectives" if col == "collective" else f"values of {col}"
            raise InputError(
                f"mixed {what} in one table ({first!r} above, {val!r} here); expected one per file",
                file=path,
                line=line,
                field=col,
            )
    return first


def _read_rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]], str]:
    data = read_input_bytes(path, bounded=False)
    try:
        text = data.decode("utf-8-sig")  # a spreadsheet's export starts with a byte-order mark
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1  # the line of the first byte that is not UTF-8
        raise InputError(f"not UTF-8 text (byte {exc.start})", file=path, line=line) from None
    reader = csv.DictReader(text.splitlines())
    header = [h.strip().lower() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    rows = [(reader.line_num, dict(r)) for r in reader]
    for line, row in rows:
        extra = row.get(None)  # type: ignore[call-overload]  # cells beyond the header's columns
        if extra:
            raise InputError(
                f"row has {len(header) + len(extra)} cells, the header {len(header)} columns; "
                "expected one cell per column (a column name missing from the header shifts the rest)",
                file=path,
                line=line,
                field=header[-1] if header else "size_bytes",
            )
    return header, rows, hashlib.sha256(data).hexdigest()


def _half_step(raw: str) -> float:
    """Half the last written digit of a number cell (`12.34` -> 0.005, `1.5e3` -> 50)."""
    exponent = decimal.Decimal(raw.strip()).as_tuple().exponent
    return 0.5 * 10.0 ** int(exponent)


def _records(
    header: list[str], rows: list[tuple[int, dict[str, str]]], path: Path
) -> tuple[pd.DataFrame, list[TimedRow]]:
    """Rows in the form of `BenchmarkTable.rows`: one record per size and half; and, where
    no algbw column is given, each half's size, time (and its written precision) and busbw
    for `check_time_ratios`."""
    halves = [("time_us_oop", "busbw_oop", False)]
    if all(c in header for c in IN_PLACE):
        halves.append(("time_us_ip", "busbw_ip", True))
    dtype = _constant(rows, "type", path) if "type" in header else None
    records: list[dict[str, object]] = []
    timed: list[TimedRow] = []
    last = -1
    for line, row in rows:
        raw = (row.get("size_bytes") or "").strip()
        if not raw.isdigit():
            raise InputError(f"expected a whole number of bytes, found {raw!r}", file=path, line=line,
                             field="size_bytes")  # fmt: skip
        size = int(raw)
        if size == 0:  # as in logs: NCCL returns early, so a size-0 row measures nothing
            continue
        check_size(size, path, line, field="size_bytes")
        if size <= last:
            raise InputError(
                f"sizes out of order: {size} after {last}; expected increasing sizes, one row each",
                file=path,
                line=line,
                field="size_bytes",
            )
        last = size
        count = (row.get("count") or "").strip()
        for t_col, bw_col, in_place in halves:
            time_us = _positive(row, t_col, path, line)
            time_s = time_us * SECONDS_PER_MICROSECOND
            busbw_gbps = _bandwidth(row, bw_col, path, line)
            busbw = busbw_gbps * BYTES_PER_GB
            algbw = size / time_s
            if ALGBW[in_place] in header:
                algbw = _bandwidth(row, ALGBW[in_place], path, line) * BYTES_PER_GB
            else:
                steps = (_half_step(row[t_col]), _half_step(row[bw_col]))
                timed.append(TimedRow(line, size, time_us, steps[0], busbw_gbps, steps[1]))
            records.append(
                {"size_bytes": size, "count": int(count) if count.isdigit() else 0, "dtype": dtype or "",
                 "redop": None, "root": None, "time_s": time_s, "algbw_bytes_per_s": algbw,
                 "busbw_bytes_per_s": busbw, "wrong": float("nan"), "in_place": in_place, "line": line}
            )  # fmt: skip
    if not records:
        raise InputError("no row above 0 bytes; expected one row per message size", file=path,
                         line=rows[0][0], field="size_bytes")  # fmt: skip
    frame = pd.DataFrame(records)
    frame["root"] = frame["root"].astype("Int64")
    return frame, timed


def _bandwidth(row: dict[str, str], col: str, path: Path, line: int) -> float:
    """A bandwidth cell (GB/s): finite, 0 to `MAX_GB_PER_S`."""
    val = _positive(row, col, path, line, zero=True)
    check_bandwidth(val, col, path, line)
    return val


def read_csv_table(
    path: str | Path,
    *,
    collective: str | None = None,
    n_gpus: int | None = None,
    n_nodes: int | None = None,
) -> BenchmarkTable:
    """Read one collective CSV (see the module docstring).

    Args:
        path: the CSV file.
        collective: engine kind where the file has no `collective` column.
        n_gpus: rank count where the file has no `n_gpus` column.
        n_nodes: node count where the file has no `n_nodes` column.

    Raises:
        InputError: anything the module docstring lists as checked.
    """
    p = Path(path)
    header, rows, sha256 = _read_rows(p)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; expected {', '.join(REQUIRED + IN_PLACE)} "
            "(nccl-tests columns; the in-place pair is optional)",
            file=p,
            line=1,
            field=missing[0],
        )
    half_ip = [c for c in IN_PLACE if c in header]
    if len(half_ip) == 1:
        other = next(c for c in IN_PLACE if c not in header)
        raise InputError(f"in-place columns come as a pair; {other} is missing", file=p, line=1, field=other)
    if not rows:
        raise InputError("no rows under the header; expected one row per message size", file=p, line=1,
                         field="size_bytes")  # fmt: skip
    first = rows[0][0]
    kind_col = _constant(rows, "collective", p) if "collective" in header else None
    if kind_col is not None and normalize_kind(kind_col) is None:
        raise InputError(f"unknown collective {kind_col!r}", file=p, line=first, field="collective")
    frame, timed = _records(header, rows, p)
    try:
        kind, kind_note = infer_collective(kind_col, collective, p, first)
    except InputError:
        raise _unsaid("collective", p, first) from None
    gpus_col = _constant(rows, "n_gpus", p) if "n_gpus" in header else None
    nodes_col = _constant(rows, "n_nodes", p) if "n_nodes" in header else None
    try:
        gpus, gpus_note = infer_gpus({}, _int(gpus_col, p, first, "n_gpus") or n_gpus, frame, kind, p, first)
    except InputError:
        raise _unsaid("n_gpus", p, first) from None
    if gpus_col is not None:
        gpus_note = f"{gpus} GPUs from the n_gpus column"
    check_gpus(gpus, gpus_note, p, first)
    printed = frame["in_place"].map(lambda ip: ALGBW[bool(ip)] in header)
    check_ratios(frame[printed], kind, gpus, f"{kind_note}, {gpus_note}", p)
    check_time_ratios(timed, kind, gpus, f"{kind_note}, {gpus_note}", p)
    try:
        nodes, nodes_note = infer_nodes({}, None, _int(nodes_col, p, first, "n_nodes") or n_nodes, p, first)
    except InputError:
        raise _unsaid("n_nodes", p, first) from None
    if nodes > gpus:
        raise InputError(f"impossible layout of {gpus} GPUs on {nodes} nodes", file=p, line=first,
                         field="n_nodes")  # fmt: skip
    return BenchmarkTable(
        source=p.name,
        sha256=sha256,
        collective=kind,
        n_gpus=gpus,
        n_nodes=nodes,
        rows=frame,
        first_line=first,
        notes=(kind_note, gpus_note, nodes_note),
    )


#: column -> (what the table does not say, the option that says it)
_UNSAID = {
    "collective": ("which collective it measured", "--collective"),
    "n_gpus": ("how many GPUs took part", "--gpus"),
    "n_nodes": ("how many nodes took part", "--nodes"),
}


def _unsaid(col: str, path: Path, line: int) -> InputError:
    """The error for a CSV whose columns, file name and arguments leave `col` unknown: it names
    the column to add (the log parser's wording names `# Rank` lines, which a CSV has not)."""
    what, option = _UNSAID[col]
    kinds = f" (one of {', '.join(KINDS)})" if col == "collective" else ""
    return InputError(
        f"the CSV does not say {what}: add the {col} column or pass {option}{kinds}",
        file=path,
        line=line,
        field=col,
    )


def _int(val: str | None, path: Path, line: int, col: str) -> int | None:
    if val is None:
        return None
    if not val.isdigit() or int(val) < 1:
        raise InputError(
            f"expected a whole number of at least 1, found {val!r}", file=path, line=line, field=col
        )
    return int(val)
