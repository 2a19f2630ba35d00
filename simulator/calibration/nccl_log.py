"""An nccl-tests / rccl-tests log, scanned line by line into the result tables it holds.

What is read: the result tables of every nccl-tests binary (all_reduce_perf,
all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf,
sendrecv_perf) and its rccl-tests fork (rows: `simulator.calibration.nccl_rows`), plus what the
lines around each table say: the `#  Rank  N ... on HOST device ...` lines (ranks and their
hosts), the `Collective test starting/concluded: X_perf` lines and command lines naming
`X_perf`, the `# nThread ... maxBytes N step: ...` run header, `# Avg bus bandwidth`, and the
markdown (`### All Reduce - 2 Nodes`) or `==== 2-node ====` headings that separate several
tables pasted into one file.

Tolerated, because real logs have them: launcher prefixes (`0: ` from `srun --label`,
`[1,0]<stdout>:` from Open MPI, `host: ` from pdsh, ISO timestamps), `#` stripped from the
header, tables without any header, `NCCL INFO` and MPI noise inside the table, rows elided
with `...`, several tables in one file.

Refused: `# Out of bounds values : N FAILED` with N above 0 (nccl-tests' data check found
wrong results, so the times are not of a correct run; the `#wrong` count of each row is
checked in `simulator.calibration.row_checks`).

Simplified: a table ends at its `# Avg bus bandwidth` or `Out of bounds values` line, at the
next run's header (`# nccl-tests ...`, `# nThread ...`, `Collective test starting`, the
`#  size count type ...` column header), rank lines or heading; any other line is noise. A new
table starts only after such a line: inside a table every size is larger than the one above
it (nccl-tests steps sizes up), so a smaller or repeated size is refused as out of order
rather than read as the start of another table, unless its data type or reduction op
changes (`-d all`, `-o all`: one sweep per type or op under one header). What the scan
gathers is raw (`RawTable`): which of the clues settles the collective, GPU and node counts
is decided by `simulator.calibration.inference`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from simulator.calibration.collective import kinds_in
from simulator.calibration.nccl_rows import (
    BYTES_PER_GB,
    DEFAULT_HALF,
    header_layout,
    measured_width,
    parse_row,
    row_records,
)
from simulator.errors import InputError

_PREFIXES = (
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:"),  # Open MPI --tag-output
    re.compile(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s"),
    re.compile(r"^\s*\d+:\s"),  # srun --label
    re.compile(r"^[A-Za-z][\w.\-]*:\s(?=\s*[#\d])"),  # pdsh 'host: '
)
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([A-Za-z_][\w]*)(?:\s|$)")
_RANK = re.compile(
    r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s*(?:\[[^\]]*\])?\s*(.*)$"
)
_PERF = re.compile(r"\b([a-z0-9_]+)_perf\b")
_AVG = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+\-]+)")
_RANGE = re.compile(r"\bmaxBytes\s+(\d+)(?:.*?\bstep:\s*(\d+)\s*\((factor|bytes)\))?")
_NGPUS = re.compile(r"\bnGpus\s+(\d+)")
_HEADING = re.compile(r"^\s*(?:#{2,}\s+(\S.*)|={3,}\s*(.*?)\s*=*\s*)$")
_OUT_OF_BOUNDS = re.compile(r"Out of bounds values\s*:\s*(\d+)")
_ELISION = re.compile(r"^\s*#?\s*(?:\.\.\.|…|<.*truncated.*>)\s*$")


def strip_prefix(line: str) -> str:
    """Remove launcher prefixes and timestamps (any order, repeated) from one log line."""
    changed = True
    while changed:
        changed = False
        for pat in _PREFIXES:
            m = pat.match(line)
            if m:
                line = line[m.end() :]
                changed = True
    return line.rstrip("\r\n")


def kind_of_perf(line: str) -> str | None:
    """The collective of the first `X_perf` binary named in `line` that names exactly one."""
    for m in _PERF.finditer(line.lower()):
        kinds = kinds_in(m.group(1))
        if len(kinds) == 1:
            return kinds.pop()
    return None


def nodes_in(text: str) -> int | None:
    """The node count a heading states (`2 Nodes`, `4-node`, `single node`), or None."""
    t = text.lower()
    if re.search(r"\bsingle[\s\-]*node\b", t):
        return 1
    m = re.search(r"\b(\d+)[\s\-]*nodes?\b", t)
    return int(m.group(1)) if m else None


def _next_sweep(cur: RawTable, tokens: list[str], size_bytes: int) -> bool:
    """Whether the row starts the sweep of another data type or reduction op under the same
    header, as nccl-tests prints for `-d all` or `-o all`: its size is not above the last and
    its type or op is not the last row's."""
    if size_bytes > cur.last_size_bytes or len(tokens) < 3:
        return False
    op = tokens[3] if len(tokens) > 3 and re.fullmatch(r"[A-Za-z_]\w*", tokens[3]) else None
    last = cur.rows[-1]
    return (tokens[2], op) != (last.get("dtype"), last.get("redop"))


@dataclass
class RawTable:
    """A result table as scanned, with the clues of the lines before and after it.

    Attributes:
        layout: leading column names of the column header, None without header.
        half: column names of one measured half (the default 4 without header).
        n_measured: measured fields per row (both halves).
        section: the heading above the table, if any.
        heading_kind: the collective that heading names, if exactly one.
        heading_nodes: the node count that heading states, if any.
        start_kind: the collective of a `Collective test starting` or command line before it.
        ranks: rank -> (host, device name) from the `# Rank` lines before it.
        rows: one record per row and half (`simulator.calibration.nccl_rows.row_records`).
        first_line: 1-based line of the first data row.
        last_size_bytes: size of the last row read.
        avg_busbw_bytes_per_s: the `# Avg bus bandwidth` after it, if printed.
        ended: a line after the rows closed the table.
        elided: rows were elided (`...`, `<smaller message sizes truncated>`).
        end_kind: the collective of the `Collective test concluded` line after it.
        max_bytes: `maxBytes` of the run's `# nThread` line, if printed.
        step: `step:` of that line as (value, `factor` or `bytes`), if printed.
        last_line: 1-based line of the last data row.
        gpus_per_thread: `nGpus` of that line (GPUs each benchmark thread drives), if printed.
    """

    layout: list[str] | None
    half: list[str] | None
    n_measured: int | None
    section: str | None
    heading_kind: str | None
    heading_nodes: int | None
    start_kind: str | None
    ranks: dict[int, tuple[str, str]]
    rows: list[dict[str, object]] = field(default_factory=list)
    first_line: int = 0
    last_size_bytes: int = -1
    avg_busbw_bytes_per_s: float | None = None
    ended: bool = False
    elided: bool = False
    end_kind: str | None = None
    max_bytes: int | None = None
    step: tuple[int, str] | None = None
    last_line: int = 0
    gpus_per_thread: int | None = None


@dataclass
class _NextTable:
    """What the lines read since the last table say about the next one."""

    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    layout: tuple[list[str], list[str]] | None = None
    section: str | None = None
    heading_kind: str | None = None
    heading_nodes: int | None = None
    start_kind: str | None = None
    elided: bool = False
    run_range: tuple[int, tuple[int, str] | None] | None = None  # maxBytes, step of `# nThread`
    gpus_per_thread: int | None = None  # nGpus of `# nThread`


class _LogScanner:
    """Reads a log one line at a time; `tables` holds the tables closed so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tables: list[RawTable] = []
        self.current: RawTable | None = None
        self.next = _NextTable()

    def close(self) -> None:
        """End the current table (kept only if it has rows)."""
        if self.current is not None and self.current.rows:
            self.tables.append(self.current)
        self.current = None

    def feed(self, lineno: int, raw: str) -> None:
        """Read line `lineno` (1-based) of the log."""
        line = strip_prefix(raw)
        body = line.strip()
        if not body:
            return
        m = _ROW.match(line)
        if m and not body.startswith("#"):
            self._row(lineno, body.split(), int(m.group(1)))
        elif _ELISION.match(line):
            if self.current is not None and not self.current.ended:
                self.current.elided = True
            else:
                self.next.elided = True
        else:
            self._text(lineno, body)

    def _open(self, lineno: int) -> RawTable:
        nxt = self.next
        lead_half = nxt.layout
        table = RawTable(
            layout=lead_half[0] if lead_half else None,
            half=lead_half[1] if lead_half else None,
            n_measured=None,
            section=nxt.section,
            heading_kind=nxt.heading_kind,
            heading_nodes=nxt.heading_nodes,
            start_kind=nxt.start_kind,
            ranks=dict(nxt.ranks),
            first_line=lineno,
        )
        if nxt.run_range is not None:
            table.max_bytes, table.step = nxt.run_range
        table.gpus_per_thread = nxt.gpus_per_thread
        if lead_half:
            table.n_measured = 2 * len(lead_half[1])
        table.elided = nxt.elided
        nxt.elided = False
        return table

    def _row(self, lineno: int, tokens: list[str], size_bytes: int) -> None:
        cur = self.current
        if cur is not None and not cur.ended and cur.rows:
            if _next_sweep(cur, tokens, size_bytes):
                cur.ended = True  # `-d all` / `-o all`: the next type's or op's sizes, one header
            else:
                self._check_order(lineno, size_bytes, cur)
        if cur is None or cur.ended:
            self.close()
            cur = self.current = self._open(lineno)
        if cur.n_measured is None:
            cur.n_measured, cur.half = measured_width(len(tokens)), list(DEFAULT_HALF)
        half = cur.half or list(DEFAULT_HALF)
        lead, halves = parse_row(tokens, cur.n_measured, half, self.path, lineno)
        if cur.rows and (len(halves) != cur.rows[-1]["_halves"] or lead["_lead"] != cur.rows[-1]["_lead"]):
            raise InputError(
                f"table row has {len(tokens)} fields, unlike the rows above (row cut mid-way?)",
                file=self.path,
                line=lineno,
            )
        cur.rows.extend(row_records(size_bytes, lead, halves, half, self.path, lineno))
        cur.last_size_bytes = size_bytes
        cur.last_line = lineno

    def _check_order(self, lineno: int, size_bytes: int, cur: RawTable) -> None:
        """A row inside a table must be larger than the one above it (size-0 rows may repeat:
        small counts round to 0 bytes); a new table starts only at a header line.

        Raises:
            InputError: a size repeated, or smaller than the one above it.
        """
        last = cur.last_size_bytes
        if size_bytes > last or size_bytes == last == 0:
            return
        what = "again after" if size_bytes == last else f"after {last} on"
        raise InputError(
            f"sizes out of order: {size_bytes} {what} line {cur.last_line}; expected increasing "
            "sizes, one row each (a new table starts at its column header)",
            file=self.path,
            line=lineno,
            field="size",
        )

    def _text(self, lineno: int, body: str) -> None:
        """A line that is no data row: a run header, rank, column header, trailer or heading."""
        text = body.lstrip("#").strip()
        if text.startswith("nccl-tests") or text.startswith("rccl-tests"):
            self._end_current()
        elif text.startswith("nThread") and (rg := _RANGE.search(text)):
            self._end_current()
            step = (int(rg.group(2)), rg.group(3)) if rg.group(2) else None
            self.next.run_range = (int(rg.group(1)), step)
            ng = _NGPUS.search(text)
            self.next.gpus_per_thread = int(ng.group(1)) if ng else None
        elif text.startswith("Rank") and (rk := _RANK.search(text)):
            if self.current is not None and self.current.rows:
                self.close()
                self.next.ranks = {}
            self.next.ranks[int(rk.group(1))] = (rk.group(2), rk.group(3).strip())
        elif (layout := header_layout(text)) is not None and "count" in text:
            self.close()
            self.next.layout = layout
        elif avg := _AVG.search(text):
            target = self._current_or_last()
            if target is not None:
                target.avg_busbw_bytes_per_s = float(avg.group(1)) * BYTES_PER_GB
                target.ended = True
        elif text.startswith("Out of bounds values"):
            self._out_of_bounds(lineno, text)
        elif "Collective test concluded" in text:
            kind = kind_of_perf(text)
            target = self._current_or_last()
            if target is not None and kind:
                target.end_kind = kind
                target.ended = True
            self.next.start_kind = None
        elif (heading := _HEADING.match(body)) and not body.startswith("# "):
            self._heading((heading.group(1) or heading.group(2) or "").strip().strip("=#").strip())
        elif (kind := kind_of_perf(text)) is not None:
            self._end_current()
            self.next.start_kind = kind
        # anything else (NCCL INFO, MPI warnings, version lines) is noise

    def _out_of_bounds(self, lineno: int, text: str) -> None:
        """`# Out of bounds values : N OK|FAILED` ends a table; N above 0 is a failed data check.

        Raises:
            InputError: N is above 0 (the run computed wrong results; its times are not of a
                correct run).
        """
        if self.current is not None:
            self.current.ended = True
        m = _OUT_OF_BOUNDS.search(text)
        if m and int(m.group(1)) > 0:
            raise InputError(
                f"{m.group(1)} values out of bounds: nccl-tests' data check failed, so the times "
                "above are not of a correct run; rerun until it says 0 OK",
                file=self.path,
                line=lineno,
                field="wrong",
            )

    def _end_current(self) -> None:
        """A line that starts a new run: the table above, if it has rows, is complete."""
        if self.current is not None and self.current.rows:
            self.current.ended = True

    def _current_or_last(self) -> RawTable | None:
        if self.current is not None:
            return self.current
        return self.tables[-1] if self.tables else None

    def _heading(self, title: str) -> None:
        """A section heading: it starts a new table and forgets the clues of the last run."""
        if not title:
            return
        self.close()
        nxt = self.next
        nxt.section = title
        kinds = kinds_in(title)
        nxt.heading_kind = kinds.pop() if len(kinds) == 1 else None
        nxt.heading_nodes = nodes_in(title)
        nxt.ranks, nxt.layout, nxt.start_kind, nxt.run_range = {}, None, None, None
        nxt.gpus_per_thread = None


def scan_log(text: str, path: Path) -> list[RawTable]:
    """Every result table of a log, in file order, with the clues around it.

    Args:
        text: the whole log.
        path: the file it came from, named in errors.

    Returns:
        The tables that have at least one row.

    Raises:
        InputError: no table at all, a row cut mid-way or unlike the rows above it, or a
            value that is not a number.
    """
    lines = text.splitlines()
    scanner = _LogScanner(path)
    for lineno, raw in enumerate(lines, start=1):
        scanner.feed(lineno, raw)
    scanner.close()
    if not scanner.tables:
        first = next((i for i, ln in enumerate(lines, 1) if ln.strip()), 1)
        raise InputError(
            "no nccl-tests result table found (expected rows of: size count type [redop root] "
            "time algbw busbw #wrong ...); is this nccl-tests / rccl-tests output?",
            file=path,
            line=first,
        )
    return scanner.tables
