"""Read nccl-tests / rccl-tests output into tables with SI units.

What is read: the result table that every nccl-tests binary (all_reduce_perf,
all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf,
sendrecv_perf) and its rccl-tests fork prints:

    #       size    count   type  redop  root |  time  algbw  busbw #wrong | time algbw busbw #wrong
    #        (B) (elements)                   |  (us) (GB/s) (GB/s)        | (us) ...

plus what the header around it says: the `#  Rank  N ... on HOST device ...` lines (GPU count
= distinct ranks, node count = distinct hosts), the `Collective test starting/concluded:
X_perf` lines and command lines naming `X_perf`, `# Avg bus bandwidth`, and the markdown
(`### All Reduce - 2 Nodes`) or `==== 2-node ====` headings that separate several tables
pasted into one file. Times are microseconds and bandwidths GB/s (1e9 B/s) in the log;
the returned frames hold seconds and bytes/s.

Tolerated, because real logs have them: launcher prefixes (`0: ` from `srun --label`,
`[1,0]<stdout>:` from Open MPI, `host: ` from pdsh, ISO timestamps), `#` stripped from the
header, tables without any header, the older layout without a `root` (or `redop`) column,
`N/A` in the error column, extra columns (rccl-tests builds with more per-half columns are
read by the header's names), `NCCL INFO` and MPI noise inside the table, rows elided with
`...`, several tables in one file.

Simplifications: the out-of-place half is the first half of a row and the in-place half the
second, as nccl-tests prints them; the `type` column is kept as printed (`float`, `half`,
`bfloat16`, ...).

Where the collective, GPU count and node count come from, in order (the `notes` of each
table say which applied):
    collective: the log (heading, `Collective test starting`, a command line naming
        `*_perf`, `Collective test concluded`) > the `collective` argument > the file name;
    GPUs: `# Rank` lines > the `n_gpus` argument > a `<n>gpu` token in the file name >
        size/count (all_gather, reduce_scatter, all_to_all print the total buffer) >
        busbw/algbw ratio (last resort; stated in the notes);
    nodes: distinct hosts of the `# Rank` lines > a section heading (`2 Nodes`) > the
        `n_nodes` argument > a `<n>node` token in the file name.
When none gives a value, `InputError` asks for the CLI option.

A table that looks cut short is read, but its `warnings` say so (`cut_warnings`): largest
size under 1 MiB, or a complete run header (`# nThread ... maxBytes N`) whose rows stop
before maxBytes with no `# Avg bus bandwidth` trailer.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration.collective import KINDS, busbw_factor, ranks_from_factor
from simulator.errors import InputError

log = logging.getLogger(__name__)

US = 1e-6
GB = 1e9

ROW_COLUMNS = (
    "size_bytes",
    "count",
    "dtype",
    "redop",
    "root",
    "time_s",
    "algbw_bytes_per_s",
    "busbw_bytes_per_s",
    "wrong",
    "in_place",
    "line",
)

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
_HEADING = re.compile(r"^\s*(?:#{2,}\s+(\S.*)|={3,}\s*(.*?)\s*=*\s*)$")
_ELISION = re.compile(r"^\s*#?\s*(?:\.\.\.|…|<.*truncated.*>)\s*$")
_KIND_WORDS = re.compile(
    r"allreduce|allgather|reducescatter|alltoall|all2all|sendrecv|broadcast|bcast|reduce"
)
_WORD_KIND = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all2all": "all_to_all",
    "sendrecv": "send_recv",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
}
_DTYPE_BYTES = {
    "int8": 1, "char": 1, "uint8": 1, "fp8": 1, "f8e4m3": 1, "f8e5m2": 1,
    "half": 2, "float16": 2, "bfloat16": 2, "bf16": 2, "fp16": 2,
    "int32": 4, "int": 4, "uint32": 4, "float": 4, "float32": 4,
    "int64": 8, "uint64": 8, "double": 8, "float64": 8,
}  # fmt: skip


@dataclass(frozen=True)
class BenchmarkTable:
    """One result table of an nccl-tests log, with what is known about the run.

    Attributes:
        source: file name (no folders), as recorded in profiles.
        sha256: checksum of the whole file.
        collective: engine kind (`all_reduce`, `all_to_all`, ...).
        n_gpus: ranks taking part.
        n_nodes: hosts taking part.
        rows: one row per table row and half (out-of-place, in-place); columns
            `ROW_COLUMNS`, SI units.
        avg_busbw_bytes_per_s: the log's `# Avg bus bandwidth`, if printed.
        section: heading of the table in files that hold several, else None.
        index: 0-based position of the table in its file.
        first_line: 1-based line of the first data row.
        elided: rows were elided (`...`, `<smaller message sizes truncated>`).
        gpu_name: device name from the `# Rank` lines, if printed.
        notes: how collective, GPU and node counts were found (one sentence each).
        warnings: signs that the table was cut short (see `cut_warnings`), each one line
            `FILE:LINE: message`; the calibrate command prints them.
        max_bytes: the `maxBytes` of the run's `# nThread ...` header line, if printed.
    """

    source: str
    sha256: str
    collective: str
    n_gpus: int
    n_nodes: int
    rows: pd.DataFrame
    avg_busbw_bytes_per_s: float | None = None
    section: str | None = None
    index: int = 0
    first_line: int = 0
    elided: bool = False
    gpu_name: str | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    max_bytes: int | None = None

    @property
    def max_size_bytes(self) -> int:
        """Largest measured message size."""
        return int(self.rows["size_bytes"].max())

    @property
    def label(self) -> str:
        """Short unique name: the file name, plus `#i (section)` for files with several tables."""
        if self.section is None and self.index == 0:
            return self.source
        extra = f" ({self.section})" if self.section else ""
        return f"{self.source}#{self.index + 1}{extra}"

    @property
    def scope(self) -> str:
        """`intra` for one node, `inter` for several."""
        return "intra" if self.n_nodes == 1 else "inter"

    def frame(self) -> pd.DataFrame:
        """The rows plus metadata columns (`source`, `label`, `collective`, `n_gpus`, `n_nodes`).

        The same metadata (and sha256, avg busbw) is also in `DataFrame.attrs`.
        """
        df = self.rows.copy()
        df.insert(0, "source", self.source)
        df.insert(1, "label", self.label)
        df.insert(2, "collective", self.collective)
        df.insert(3, "n_gpus", self.n_gpus)
        df.insert(4, "n_nodes", self.n_nodes)
        df.attrs.update(
            source=self.source,
            sha256=self.sha256,
            collective=self.collective,
            n_gpus=self.n_gpus,
            n_nodes=self.n_nodes,
            avg_busbw_bytes_per_s=self.avg_busbw_bytes_per_s,
            notes=list(self.notes),
        )
        return df

    def sizes(self) -> pd.DataFrame:
        """One row per message size: `size_bytes`, `time_s` (the smaller of the out-of-place
        and in-place times; benchmark noise only adds time), `busbw_bytes_per_s` (the log's,
        out-of-place) and `n_rows`."""
        g = self.rows.groupby("size_bytes", sort=True)
        oop = self.rows[~self.rows["in_place"]].groupby("size_bytes")["busbw_bytes_per_s"].max()
        out = pd.DataFrame(
            {"time_s": g["time_s"].min(), "n_rows": g.size(), "busbw_bytes_per_s": oop}
        ).reset_index()
        return out


@dataclass
class _Table:
    """A table while it is being read."""

    layout: list[str] | None
    half: list[str] | None
    n_rest: int | None
    section: str | None
    heading_kind: str | None
    heading_nodes: int | None
    start_kind: str | None
    ranks: dict[int, tuple[str, str]]
    rows: list[dict[str, object]] = field(default_factory=list)
    first_line: int = 0
    last_size: int = -1
    avg_busbw: float | None = None
    ended: bool = False
    elided: bool = False
    end_kind: str | None = None
    max_bytes: int | None = None
    step: tuple[int, str] | None = None
    last_line: int = 0


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


def _kinds_in(text: str) -> set[str]:
    squashed = re.sub(r"[\s_\-.]", "", text.lower())
    return {_WORD_KIND[w] for w in _KIND_WORDS.findall(squashed)}


def _kind_of_perf(line: str) -> str | None:
    for m in _PERF.finditer(line.lower()):
        kinds = _kinds_in(m.group(1))
        if len(kinds) == 1:
            return kinds.pop()
    return None


def _nodes_in(text: str) -> int | None:
    t = text.lower()
    if re.search(r"\bsingle[\s\-]*node\b", t):
        return 1
    m = re.search(r"\b(\d+)[\s\-]*nodes?\b", t)
    return int(m.group(1)) if m else None


def _file_token(stem: str, suffix: str) -> int | None:
    """A `<n>gpu` / `<n>node` token of a file name, unless it ends a list like `1-2-4-8node`."""
    tokens = re.split(r"[-_.\s]+", stem.lower())
    found = []
    for i, tok in enumerate(tokens):
        m = re.fullmatch(rf"(\d+){suffix}s?", tok)
        if m and not (i > 0 and tokens[i - 1].isdigit()):
            found.append(int(m.group(1)))
    return found[0] if len(set(found)) == 1 else None


def _number(tok: str, path: Path, lineno: int, what: str) -> float:
    t = tok.rstrip("*")
    if t.upper() in ("N/A", "NA", "-"):
        return float("nan")
    try:
        return float(t)
    except ValueError:
        raise InputError(
            f"expected a number for {what}, found {tok!r} (row cut or not nccl-tests output?)",
            file=path,
            line=lineno,
        ) from None


def _header_layout(text: str) -> tuple[list[str], list[str]] | None:
    """Leading column names and per-half column names from a `size count type ...` header."""
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


def _parse_row(
    tokens: list[str], table: _Table, path: Path, lineno: int
) -> tuple[dict[str, object], list[list[float]]]:
    """Leading fields and the halves of one data row (the halves read from the right)."""
    if table.n_rest is None:
        # no header: 8 measured fields (two halves of 4) unless only one half fits
        n = len(tokens)
        table.n_rest = 8 if n - 8 >= 3 else 4
        table.half = ["time", "algbw", "busbw", "wrong"]
    n_rest = table.n_rest
    half = table.half or ["time", "algbw", "busbw", "wrong"]
    lead, rest = tokens[:-n_rest], tokens[-n_rest:]
    if len(tokens) < n_rest + 3:
        raise InputError(
            f"table row has {len(tokens)} fields, expected {n_rest + 3} to {n_rest + 5} (row cut mid-way?)",
            file=path,
            line=lineno,
        )
    if len(lead) > 5:
        raise InputError(
            f"table row has {len(tokens)} fields, expected at most {n_rest + 5}",
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
    for h in range(n_rest // width):
        part = rest[h * width : (h + 1) * width]
        vals = [_number(t, path, lineno, f"{half[i]}") for i, t in enumerate(part)]
        halves.append(vals)
    return out, halves


def parse_text(
    text: str,
    path: str | Path,
    *,
    collective: str | None = None,
    n_gpus: int | None = None,
    n_nodes: int | None = None,
    sha256: str | None = None,
) -> list[BenchmarkTable]:
    """Parse the text of an nccl-tests / rccl-tests log (see the module docstring).

    Args:
        text: the whole log.
        path: the file it came from (named in errors; its name is the table's `source`).
        collective: engine kind to use where the log does not say it.
        n_gpus: rank count to use where the log does not say it.
        n_nodes: node count to use where the log does not say it.
        sha256: checksum to record (computed from `text` when None).

    Returns:
        One `BenchmarkTable` per result table, in file order.

    Raises:
        InputError: no table, a row cut mid-way, a value that is not a number, or a
            collective / GPU count / node count that nothing tells.
    """
    p = Path(path)
    if sha256 is None:
        sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if collective is not None and collective not in KINDS:
        raise InputError(f"unknown collective {collective!r}; expected one of {list(KINDS)}")
    tables: list[_Table] = []
    cur: _Table | None = None
    # header state waiting for the next table
    ranks: dict[int, tuple[str, str]] = {}
    layout: tuple[list[str], list[str]] | None = None
    section: str | None = None
    heading_kind: str | None = None
    heading_nodes: int | None = None
    start_kind: str | None = None
    pending_elided = False
    run_range: tuple[int, tuple[int, str] | None] | None = None  # maxBytes, step of `# nThread`

    def close() -> None:
        nonlocal cur
        if cur is not None and cur.rows:
            tables.append(cur)
        cur = None

    def new_table(lineno: int) -> _Table:
        lead_half = layout
        t = _Table(
            layout=lead_half[0] if lead_half else None,
            half=lead_half[1] if lead_half else None,
            n_rest=None,
            section=section,
            heading_kind=heading_kind,
            heading_nodes=heading_nodes,
            start_kind=start_kind,
            ranks=dict(ranks),
            first_line=lineno,
        )
        if run_range is not None:
            t.max_bytes, t.step = run_range
        if lead_half:
            t.n_rest = 2 * len(lead_half[1])
        return t

    lines = text.splitlines()
    for lineno, raw in enumerate(lines, start=1):
        line = strip_prefix(raw)
        body = line.strip()
        if not body:
            continue
        m = _ROW.match(line)
        if m and not body.startswith("#"):
            tokens = body.split()
            size = int(m.group(1))
            if cur is None or cur.ended or (cur.rows and size < cur.last_size):
                close()
                cur = new_table(lineno)
                cur.elided = pending_elided
                pending_elided = False
            row, halves = _parse_row(tokens, cur, p, lineno)
            if cur.rows and (len(halves) != cur.rows[-1]["_halves"] or row["_lead"] != cur.rows[-1]["_lead"]):
                raise InputError(
                    f"table row has {len(tokens)} fields, unlike the rows above (row cut mid-way?)",
                    file=p,
                    line=lineno,
                )
            half_names = cur.half or ["time", "algbw", "busbw", "wrong"]
            idx = {name: half_names.index(name) for name in ("time", "algbw", "busbw") if name in half_names}
            if len(idx) < 3:
                raise InputError("table header lacks time, algbw or busbw columns", file=p, line=lineno)
            wrong_i = next((i for i, n in enumerate(half_names) if n in ("#wrong", "wrong", "error")), None)
            for h, vals in enumerate(halves):
                _check_algbw(size, vals[idx["time"]], vals[idx["algbw"]], p, lineno)
                rec = dict(row)
                rec.update(
                    time_s=vals[idx["time"]] * US,
                    algbw_bytes_per_s=vals[idx["algbw"]] * GB,
                    busbw_bytes_per_s=vals[idx["busbw"]] * GB,
                    wrong=vals[wrong_i] if wrong_i is not None else float("nan"),
                    in_place=h == 1,
                    line=lineno,
                    _halves=len(halves),
                )
                for i, name in enumerate(half_names):
                    if i not in idx.values() and i != wrong_i:
                        rec[f"extra_{name.lstrip('#')}"] = vals[i]
                cur.rows.append(rec)
            cur.last_size = size
            cur.last_line = lineno
            continue
        if _ELISION.match(line):
            if cur is not None and not cur.ended:
                cur.elided = True
            else:
                pending_elided = True
            continue
        text_ = body.lstrip("#").strip()
        if text_.startswith("nThread") and (rg := _RANGE.search(text_)):
            step = (int(rg.group(2)), rg.group(3)) if rg.group(2) else None
            run_range = (int(rg.group(1)), step)
            continue
        rk = _RANK.search(text_)
        if rk and text_.startswith("Rank"):
            if cur is not None and cur.rows:
                close()
                ranks = {}
            ranks[int(rk.group(1))] = (rk.group(2), rk.group(3).strip())
            continue
        hl = _header_layout(text_)
        if hl is not None and "count" in text_:
            close()
            layout = hl
            continue
        avg = _AVG.search(text_)
        if avg:
            target = cur if cur is not None else (tables[-1] if tables else None)
            if target is not None:
                target.avg_busbw = float(avg.group(1)) * GB
                target.ended = True
            continue
        if text_.startswith("Out of bounds values"):
            if cur is not None:
                cur.ended = True
            continue
        if "Collective test concluded" in text_:
            kind = _kind_of_perf(text_)
            target = cur if cur is not None else (tables[-1] if tables else None)
            if target is not None and kind:
                target.end_kind = kind
                target.ended = True
            start_kind = None
            continue
        hd = _HEADING.match(body)
        if hd and not body.startswith("# "):
            title = (hd.group(1) or hd.group(2) or "").strip().strip("=#").strip()
            if title:
                close()
                section = title
                kinds = _kinds_in(title)
                heading_kind = kinds.pop() if len(kinds) == 1 else None
                heading_nodes = _nodes_in(title)
                ranks, layout, start_kind, run_range = {}, None, None, None
            continue
        kind = _kind_of_perf(text_)
        if kind is not None:
            if cur is not None and cur.rows:
                cur.ended = True
            start_kind = kind
            continue
        # anything else (NCCL INFO, MPI warnings, version lines) is noise
    close()

    if not tables:
        first = next((i for i, ln in enumerate(lines, 1) if ln.strip()), 1)
        raise InputError(
            "no nccl-tests result table found (expected rows of: size count type [redop root] "
            "time algbw busbw #wrong ...); is this nccl-tests / rccl-tests output?",
            file=p,
            line=first,
        )
    out = []
    several = len(tables) > 1
    for i, t in enumerate(tables):
        out.append(_finish(t, p, sha256, i, several, collective=collective, n_gpus=n_gpus, n_nodes=n_nodes))
    return out


def _finish(
    t: _Table,
    p: Path,
    sha256: str,
    index: int,
    several: bool,
    *,
    collective: str | None,
    n_gpus: int | None,
    n_nodes: int | None,
) -> BenchmarkTable:
    notes: list[str] = []
    rows = pd.DataFrame(t.rows).drop(columns=["_halves", "_lead"])
    rows["root"] = rows["root"].astype("Int64")
    rows["in_place"] = rows["in_place"].astype(bool)
    where = f"table at line {t.first_line}"

    # collective
    kind = t.heading_kind or t.start_kind or t.end_kind
    if kind is not None:
        notes.append(f"collective {kind} from the log")
    elif collective is not None:
        kind = collective
        notes.append(f"collective {kind} from the argument")
    else:
        kinds = _kinds_in(p.stem)
        if len(kinds) == 1:
            kind = kinds.pop()
            notes.append(f"collective {kind} from the file name")
    if kind is None:
        raise InputError(
            "the log does not say which collective it measured; "
            f"pass --collective (one of {', '.join(KINDS)})",
            file=p,
            line=t.first_line,
        )

    # GPUs
    gpus: int | None = None
    if t.ranks:
        gpus = len(t.ranks)
        notes.append(f"{gpus} GPUs from the '# Rank' lines")
    elif n_gpus is not None:
        gpus = n_gpus
        notes.append(f"{gpus} GPUs from the argument")
    elif (g := _file_token(p.stem, "gpu")) is not None:
        gpus = g
        notes.append(f"{gpus} GPUs from the file name")
    else:
        gpus = _ranks_from_sizes(rows, kind)
        if gpus is not None:
            notes.append(f"{gpus} GPUs inferred from size / (count x type size)")
        else:
            gpus = _ranks_from_ratio(rows, kind)
            if gpus is not None:
                notes.append(f"{gpus} GPUs inferred from the busbw/algbw ratio (last resort)")
    if gpus is None:
        raise InputError(
            "the log does not say how many GPUs took part; pass --gpus",
            file=p,
            line=t.first_line,
        )
    check = _ranks_from_ratio(rows, kind)
    if check is not None and check != gpus:
        msg = f"busbw/algbw ratio implies {check} ranks, not {gpus}"
        notes.append(msg)
        log.warning("%s: %s: %s", p.name, where, msg)

    # nodes
    nodes: int | None = None
    if t.ranks:
        nodes = len({host for host, _ in t.ranks.values()})
        notes.append(f"{nodes} node(s) from the hosts of the '# Rank' lines")
    elif t.heading_nodes is not None:
        nodes = t.heading_nodes
        notes.append(f"{nodes} node(s) from the section heading")
    elif n_nodes is not None:
        nodes = n_nodes
        notes.append(f"{nodes} node(s) from the argument")
    elif (nn := _file_token(p.stem, "node")) is not None:
        nodes = nn
        notes.append(f"{nodes} node(s) from the file name")
    if nodes is None:
        raise InputError(
            "the log does not say how many nodes took part (no '# Rank ... on HOST' lines); pass --nodes",
            file=p,
            line=t.first_line,
        )
    if nodes < 1 or gpus < 1 or nodes > gpus:
        raise InputError(f"impossible layout of {gpus} GPUs on {nodes} nodes", file=p, line=t.first_line)
    gpu_names = {name for _, name in t.ranks.values() if name}
    warnings = cut_warnings(
        int(rows["size_bytes"].max()),
        t.max_bytes,
        t.step,
        t.avg_busbw is not None,
        header=t.layout is not None,
    )
    return BenchmarkTable(
        source=p.name,
        sha256=sha256,
        collective=kind,
        n_gpus=gpus,
        n_nodes=nodes,
        rows=rows,
        avg_busbw_bytes_per_s=t.avg_busbw,
        section=t.section if several or t.section else None,
        index=index,
        first_line=t.first_line,
        elided=t.elided,
        gpu_name=gpu_names.pop() if len(gpu_names) == 1 else None,
        notes=tuple(notes),
        warnings=tuple(f"{p}:{t.last_line}: {w}" for w in warnings),
        max_bytes=t.max_bytes,
    )


#: below this largest size a table cannot show the bandwidth of the links
MIN_FULL_SIZE_BYTES = 2**20


def format_bytes(n: float) -> str:
    """`4 KiB`, `1.5 MiB`, `16 GiB`, `512 B`: a size in binary units, 3 significant digits."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def cut_warnings(
    largest: int,
    max_bytes: int | None,
    step: tuple[int, str] | None,
    trailer: bool,
    *,
    header: bool,
) -> list[str]:
    """Signs that a result table was cut short (a log copied or captured part-way).

    * The largest measured size is under `MIN_FULL_SIZE_BYTES` (1 MiB): the fit then sees
      only latency-bound messages and its bandwidth is far below the links' (the first 10
      rows of an H100 log, up to 4 KiB, fit 5.8 GB/s instead of about 480).
    * The run's header is complete (column header and a `# nThread ... maxBytes N` line)
      but no `# Avg bus bandwidth` trailer follows the rows and they stop before maxBytes
      (the next size, by the header's `step`, would still fit under it).

    Excerpts that keep only some large sizes (no `# nThread` line, or with the trailer)
    are legitimate and do not warn.
    """
    out = []
    if largest < MIN_FULL_SIZE_BYTES:
        out.append(
            f"largest measured size is {format_bytes(largest)}, under 1 MiB: the table looks cut "
            "short and its fitted bandwidth only reflects small messages"
        )
    elif header and not trailer and max_bytes is not None:
        if step is None:
            following = largest + 1
        elif step[1] == "factor":
            following = largest * max(step[0], 2)
        else:
            following = largest + max(step[0], 1)
        if following <= max_bytes:
            out.append(
                f"rows stop at {format_bytes(largest)}, before the maxBytes {format_bytes(max_bytes)} "
                "of the header, and no '# Avg bus bandwidth' line follows: the log looks cut short"
            )
    return out


def _check_algbw(size: int, time_us: float, algbw_gbs: float, path: Path, lineno: int) -> None:
    """nccl-tests prints algbw = size / time; a mismatch means misread columns."""
    if not time_us > 0:
        raise InputError(f"time must be positive, found {time_us}", file=path, line=lineno)
    expect = size / time_us / 1e3
    if abs(expect - algbw_gbs) > 0.011 + 0.02 * expect:
        raise InputError(
            f"algbw {algbw_gbs} GB/s does not match size/time = {expect:.3g} GB/s "
            "(columns misread or row cut?)",
            file=path,
            line=lineno,
        )


def _ranks_from_sizes(rows: pd.DataFrame, kind: str) -> int | None:
    """all_gather, reduce_scatter, all_to_all print size = count per rank x ranks x type size."""
    if kind not in ("all_gather", "reduce_scatter", "all_to_all"):
        return None
    r = rows[(rows["count"] > 0) & (rows["size_bytes"] > 0)]
    if r.empty:
        return None
    width = r["dtype"].map(_DTYPE_BYTES)
    if width.isna().any():
        return None
    ratio = r["size_bytes"] / (r["count"] * width)
    vals = set(np.round(ratio.to_numpy(), 6))
    if len(vals) == 1:
        n = float(vals.pop())
        if n.is_integer() and n >= 2:
            return int(n)
    return None


def _ranks_from_ratio(rows: pd.DataFrame, kind: str) -> int | None:
    """Rank count from busbw/algbw of the rows with the largest bandwidths.

    Each printed bandwidth is rounded to 0.01 GB/s; a rank count is returned only when its
    factor matches the ratio within three times that rounding.
    """
    r = rows[rows["algbw_bytes_per_s"] >= 1e9]
    if r.empty or kind not in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return None
    r = r.nlargest(4, "algbw_bytes_per_s")
    ratio = float((r["busbw_bytes_per_s"] / r["algbw_bytes_per_s"]).median())
    n_real = ranks_from_factor(kind, ratio)
    if n_real is None or n_real < 1.5 or n_real > 1e6:
        return None
    n = int(round(n_real))
    tol = 3 * float((0.005e9 / r["algbw_bytes_per_s"] + 0.005e9 / r["busbw_bytes_per_s"]).max())
    if abs(busbw_factor(kind, n) - ratio) <= tol * ratio:
        return n
    return None


def read_benchmark(
    path: str | Path,
    *,
    collective: str | None = None,
    n_gpus: int | None = None,
    n_nodes: int | None = None,
) -> list[BenchmarkTable]:
    """Read one nccl-tests / rccl-tests log file; see `parse_text`.

    Raises:
        InputError: missing or unreadable file, or anything `parse_text` rejects.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", file=p) from None
    except IsADirectoryError:
        raise InputError("expected a file, found a folder", file=p) from None
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", file=p) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not a text file (not nccl-tests output?)", file=p, line=1) from None
    return parse_text(
        text,
        p,
        collective=collective,
        n_gpus=n_gpus,
        n_nodes=n_nodes,
        sha256=hashlib.sha256(data).hexdigest(),
    )


def read_benchmarks(
    paths: Sequence[str | Path],
    *,
    collective: str | None = None,
    n_gpus: int | None = None,
    n_nodes: int | None = None,
) -> list[BenchmarkTable]:
    """Read several logs; all tables in order."""
    out: list[BenchmarkTable] = []
    for path in paths:
        out.extend(read_benchmark(path, collective=collective, n_gpus=n_gpus, n_nodes=n_nodes))
    return out
