"""Job traces: the jobs that arrive at a cluster, read from a CSV file or generated.

The CSV format (`clustersim-jobs/1`; a header row, then one job per row; `#` starts a
comment line):

| column | meaning |
| --- | --- |
| `job` | job name (unique) |
| `submit_h` | submit time, hours from the start of the run |
| `gpus` | GPUs the job asks for |
| `duration_h` | compute time the job needs when it runs uninterrupted, hours; or empty, with |
| `steps` | training steps, priced by the step time of `model` on the cluster |
| `model` | optional workload file (a step trace or a model with its layout), relative to the CSV |
| `priority` | optional integer, higher first (default 0) |

A row gives `duration_h`, or `steps` and `model`. Errors name the file, the line and the
column (`jobs.csv:7: gpus: ...`).

The synthetic generator draws arrivals as a Poisson process (exponential gaps of mean
`mean_interarrival_h`), GPU counts from a discrete distribution over sizes (powers of two
by default, small jobs commonest, after the job-size mix reported for Microsoft's Philly
cluster: Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
Workloads", USENIX ATC 2019) and run times from a lognormal of median `median_duration_h`
and log-sd `sigma` (heavy-tailed, as in the same study). What is simplified: sizes and
durations are independent of each other.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.config.loader import MAX_INT, not_a_file, read_text
from simulator.errors import InputError, shown
from simulator.streams import stream

FORMAT = "clustersim-jobs/1"
COLUMNS = ("job", "submit_h", "gpus", "duration_h", "steps", "model", "priority")
REQUIRED = ("job", "submit_h", "gpus")
H_S = 3600.0


@dataclass(frozen=True)
class JobRow:
    """One job of a trace (SI): when it arrives, its size and how much work it needs."""

    name: str
    submit_s: float
    gpus: int
    duration_s: float | None = None
    steps: int | None = None
    model: Path | None = None
    priority: int = 0
    line: int = 0


def _number(text: str, path: Path, line: int, col: str, kind: type) -> float:
    try:
        v = kind(text)
    except ValueError:
        raise InputError(
            f"expected {'an integer' if kind is int else 'a number'}, found {text!r}",
            file=path,
            line=line,
            field=col,
        ) from None
    if (kind is int and v > MAX_INT) or not math.isfinite(v) or v < 0:
        raise InputError(
            f"must be a finite number >= 0, found {shown(text)}", file=path, line=line, field=col
        )
    return v


def _priority(text: str, path: Path, line: int) -> int:
    """The optional priority column: an integer (negative allowed), 0 when empty."""
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise InputError(
            f"expected an integer, found {shown(text)}", file=path, line=line, field="priority"
        ) from None
    if not -MAX_INT <= value <= MAX_INT:
        raise InputError(
            f"expected an integer of at most 2**63 - 1, found {shown(text)}",
            file=path,
            line=line,
            field="priority",
        )
    return value


def _row(rec: dict[str, str], path: Path, line: int) -> JobRow:
    for col in REQUIRED:
        if not (rec.get(col) or "").strip():
            raise InputError("missing value", file=path, line=line, field=col)
    gpus = int(_number(rec["gpus"], path, line, "gpus", int))
    if gpus < 1:
        raise InputError("a job needs at least 1 GPU", file=path, line=line, field="gpus")
    dur = (rec.get("duration_h") or "").strip()
    steps = (rec.get("steps") or "").strip()
    model = (rec.get("model") or "").strip()
    if bool(dur) == bool(steps):
        raise InputError(
            "give duration_h, or steps with a model, not both or neither",
            file=path,
            line=line,
            field="duration_h",
        )
    if steps and not model:
        raise InputError(
            "steps need a model (a workload file) to price them", file=path, line=line, field="model"
        )
    model_path = (path.parent / model) if model else None
    if model_path is not None and (why := not_a_file(model_path, " (relative to the job trace)")):
        raise InputError(why, file=path, line=line, field="model")
    pri = (rec.get("priority") or "").strip()
    return JobRow(
        name=rec["job"].strip(),
        submit_s=_number(rec["submit_h"], path, line, "submit_h", float) * H_S,
        gpus=gpus,
        duration_s=_number(dur, path, line, "duration_h", float) * H_S if dur else None,
        steps=int(_number(steps, path, line, "steps", int)) if steps else None,
        model=model_path,
        priority=_priority(pri, path, line),
        line=line,
    )


def read_job_trace(path: str | Path) -> list[JobRow]:
    """Read and check a job trace CSV (see the module docstring).

    Raises:
        InputError: `file:line: column: message` for a bad header, value or duplicate name.
    """
    path = Path(path)
    text = read_text(path, bounded=False).removeprefix("\ufeff")  # a spreadsheet's byte-order mark
    numbered = [
        (i + 1, ln)
        for i, ln in enumerate(text.splitlines())
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not numbered:
        raise InputError("the job trace is empty", file=path)
    # one record per line: a quoted field holding a line break is refused below, so every
    # error names the line it is on
    records = [(line, next(csv.reader([ln]), [])) for line, ln in numbered]
    header = [c.strip() for c in records[0][1]]
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise InputError(
            f"unknown column {unknown[0]!r}; expected some of {list(COLUMNS)}", file=path, line=numbered[0][0]
        )
    twice = [c for k, c in enumerate(header) if c in header[:k]]
    if twice:
        raise InputError(f"column {twice[0]!r} is given twice", file=path, line=numbered[0][0])
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"missing column {missing[0]!r}", file=path, line=numbered[0][0])
    if len(records) == 1:
        raise InputError("the job trace has a header and no jobs", file=path, line=numbered[0][0])
    rows: list[JobRow] = []
    seen: set[str] = set()
    for line, fields in records[1:]:
        if len(fields) != len(header):
            raise InputError(
                f"expected {len(header)} fields (one per header column), found {len(fields)}"
                " (a field may not hold a line break)",
                file=path,
                line=line,
            )
        row = _row(dict(zip(header, fields, strict=True)), path, line)
        if row.name in seen:
            raise InputError(f"job name {row.name!r} is given twice", file=path, line=line, field="job")
        seen.add(row.name)
        rows.append(row)
    return rows


def synthetic_jobs(
    count: int,
    seed: int,
    *,
    mean_interarrival_h: float,
    median_duration_h: float,
    sigma: float = 1.0,
    sizes: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512),
    weights: tuple[float, ...] = (0.35, 0.2, 0.15, 0.12, 0.08, 0.06, 0.04),
) -> list[JobRow]:
    """`count` jobs with Poisson arrivals, sizes drawn from `sizes` with `weights`, lognormal
    run times (see the module docstring); the same seed gives the same jobs."""
    rng = stream(seed, "jobs/synthetic")
    gaps = rng.exponential(mean_interarrival_h * H_S, count)
    submit = np.cumsum(gaps) - gaps[0]
    p = np.asarray(weights, dtype=float)
    gpus = rng.choice(np.asarray(sizes), size=count, p=p / p.sum())
    dur = median_duration_h * H_S * np.exp(sigma * rng.standard_normal(count))
    return [
        JobRow(f"job{i:04d}", float(submit[i]), int(gpus[i]), duration_s=float(dur[i])) for i in range(count)
    ]


def format_job_trace(rows: list[JobRow], base: Path | None = None) -> str:
    """The CSV text of `rows` (models relative to `base`, the folder the CSV will sit in);
    hours are written in full (shortest round-trip form), so the CSV reads back as `rows`."""
    out = io.StringIO()
    out.write(f"# {FORMAT}: job, submit_h, gpus, duration_h or (steps, model), priority\n")
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        model = ""
        if r.model is not None:
            model = (
                str(r.model.relative_to(base))
                if base is not None and r.model.is_relative_to(base)
                else str(r.model)
            )
        w.writerow(
            [
                r.name,
                repr(r.submit_s / H_S),
                r.gpus,
                repr(r.duration_s / H_S) if r.duration_s is not None else "",
                r.steps if r.steps is not None else "",
                model,
                r.priority,
            ]
        )
    return out.getvalue()
