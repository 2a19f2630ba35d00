"""Read nccl-tests / rccl-tests output into `BenchmarkTable`s with SI units.

The entry points: `read_benchmark` (one file), `read_benchmarks` (several) and `parse_text`
(the text of one log). Reading goes in three steps, each in its own module:

1. `simulator.calibration.nccl_log` scans the log into raw tables: the rows
   (`simulator.calibration.nccl_rows`: sizes, times, bandwidths, both halves) and the clues
   of the lines around them (rank lines, run header, headings, trailers). It says which
   launcher prefixes and noise are tolerated.
2. `simulator.calibration.inference` settles each table's collective, GPU count and node
   count from those clues, the caller's arguments and the file name, in a fixed order.
3. `simulator.calibration.truncation` adds warnings when a table looks cut short.

Times are microseconds and bandwidths GB/s (1e9 B/s) in the log; the returned tables hold
seconds and bytes/s (`simulator.calibration.table.ROW_COLUMNS`).

Simplifications: the out-of-place half is the first half of a row and the in-place half the
second, as nccl-tests prints them; the `type` column is kept as printed (`float`, `half`,
`bfloat16`, ...).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from simulator.calibration.collective import KINDS
from simulator.calibration.csv_table import is_collective_csv, read_csv_table
from simulator.calibration.inference import infer_collective, infer_gpus, infer_nodes, ratio_disagreement
from simulator.calibration.nccl_log import RawTable, scan_log
from simulator.calibration.row_checks import check_gpus, check_ratios, check_wrong
from simulator.calibration.table import BenchmarkTable
from simulator.calibration.truncation import cut_warnings
from simulator.config.loader import read_input_bytes
from simulator.errors import InputError

#: where the shipped profiles and their sample logs live (`simulator.calibration.build`)
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "topologies" / "calibration"
DEFAULT_SAMPLES = DEFAULT_OUT / "samples"

log = logging.getLogger(__name__)


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
    tables = scan_log(text, p)
    several = len(tables) > 1
    return [
        _benchmark_table(t, p, sha256, i, several, collective=collective, n_gpus=n_gpus, n_nodes=n_nodes)
        for i, t in enumerate(tables)
    ]


def _rows_frame(raw: RawTable) -> pd.DataFrame:
    """The scanned records as the `rows` frame of a `BenchmarkTable`."""
    rows = pd.DataFrame(raw.rows).drop(columns=["_halves", "_lead"])
    rows["root"] = rows["root"].astype("Int64")
    rows["in_place"] = rows["in_place"].astype(bool)
    return rows


def _one_kind(raw: RawTable, p: Path) -> None:
    """Reject a table the log attributes to two collectives (heading, start and end lines).

    Raises:
        InputError: two of them name different collectives.
    """
    named = {"heading": raw.heading_kind, "start line": raw.start_kind, "end line": raw.end_kind}
    said = {where: kind for where, kind in named.items() if kind is not None}
    if len(set(said.values())) > 1:
        what = ", ".join(f"{where} {kind}" for where, kind in said.items())
        raise InputError(
            f"mixed collectives in one table ({what}); expected one collective per table",
            file=p,
            line=raw.first_line,
            field="collective",
        )


def _benchmark_table(
    raw: RawTable,
    p: Path,
    sha256: str,
    index: int,
    several: bool,
    *,
    collective: str | None,
    n_gpus: int | None,
    n_nodes: int | None,
) -> BenchmarkTable:
    """Settle what a scanned table measured (see `simulator.calibration.inference`).

    Raises:
        InputError: the collective, GPU or node count is unknown, the GPUs cannot sit on
            the nodes, or a row disagrees with them (`simulator.calibration.row_checks`).
    """
    rows = _rows_frame(raw)
    _one_kind(raw, p)
    log_kind = raw.heading_kind or raw.start_kind or raw.end_kind
    kind, kind_note = infer_collective(log_kind, collective, p, raw.first_line)
    gpus, gpus_note = infer_gpus(raw.ranks, n_gpus, rows, kind, p, raw.first_line)
    check_gpus(gpus, gpus_note, p, raw.first_line)
    if raw.half is None or {"#wrong", "wrong"} & set(raw.half):  # a count, not an `error` column
        check_wrong(rows, p)
    check_ratios(rows, kind, gpus, f"{kind_note}, {gpus_note}", p)
    notes = [kind_note, gpus_note]
    disagreement = ratio_disagreement(rows, kind, gpus)
    if disagreement is not None:
        notes.append(disagreement)
        log.warning("%s: %s: %s", p.name, f"table at line {raw.first_line}", disagreement)
    nodes, nodes_note = infer_nodes(raw.ranks, raw.heading_nodes, n_nodes, p, raw.first_line)
    notes.append(nodes_note)
    if nodes < 1 or gpus < 1 or nodes > gpus:
        raise InputError(f"impossible layout of {gpus} GPUs on {nodes} nodes", file=p, line=raw.first_line)
    gpu_names = {name for _, name in raw.ranks.values() if name}
    warnings = cut_warnings(
        int(rows["size_bytes"].max()),
        raw.max_bytes,
        raw.step,
        raw.avg_busbw_bytes_per_s is not None,
        header=raw.layout is not None,
    )
    return BenchmarkTable(
        source=p.name,
        sha256=sha256,
        collective=kind,
        n_gpus=gpus,
        n_nodes=nodes,
        rows=rows,
        avg_busbw_bytes_per_s=raw.avg_busbw_bytes_per_s,
        section=raw.section if several or raw.section else None,
        index=index,
        first_line=raw.first_line,
        elided=raw.elided,
        gpu_name=gpu_names.pop() if len(gpu_names) == 1 else None,
        notes=tuple(notes),
        warnings=tuple(f"{p}:{raw.last_line}: {w}" for w in warnings),
        max_bytes=raw.max_bytes,
        gpus_per_thread=raw.gpus_per_thread,
    )


def read_benchmark(
    path: str | Path,
    *,
    collective: str | None = None,
    n_gpus: int | None = None,
    n_nodes: int | None = None,
) -> list[BenchmarkTable]:
    """Read one nccl-tests / rccl-tests log file (see `parse_text`) or collective CSV table
    (a `.csv` whose header names `size_bytes`; see `simulator.calibration.csv_table`).

    Raises:
        InputError: missing or unreadable file, or anything `parse_text` rejects.
    """
    p = Path(path)
    if p.suffix.lower() == ".csv" and is_collective_csv(p):
        return [read_csv_table(p, collective=collective, n_gpus=n_gpus, n_nodes=n_nodes)]
    data = read_input_bytes(p, bounded=False)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1  # the line of the first byte that is not UTF-8
        raise InputError(
            f"not UTF-8 text (byte {exc.start}; not nccl-tests output?)", file=p, line=line
        ) from None
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
