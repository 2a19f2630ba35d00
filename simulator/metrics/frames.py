"""The run's DataFrames, built once from the engine's records. Columns are SI.

Glossary of frames (one row per ...):
    ops:   op instance on one rank in one step. `ready_at_s` is when the rank reached the op
           (deps done, stream free), `started_at_s` when it began (a collective begins when
           its last member is ready), `finished_at_s` when it ended. `wait_s` = started - ready.
    flows: fabric flow. `size_bytes` is per edge of the flow; `link_crossings` how many
           directed links (with multiplicity) it loads.
    links: interval of constant rate on one directed link. `utilization` = rate / capacity.
    steps: (step, simulated rank). `compute_s` time the compute stream was busy,
           `comm_s` time any communication stream was busy, `exposed_comm_s` communication
           not hidden under compute, `idle_s` the rest: compute + exposed + idle = step time.
           `exposed_<tag>_s` splits exposed communication by op tag (tp, dp, pp, ...).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import pandas as pd

from simulator.metrics import step_breakdown as sb
from simulator.network.flow_table import FlowRecord, FlowTable
from simulator.workload.program import HOST_STREAM

#: A set printed by Python: `frozenset({...})` (elements without braces: names, numbers, tuples).
_FROZENSET = re.compile(r"frozenset\(\{([^{}]*)\}\)")


def _sorted_frozenset(match: re.Match[str]) -> str:
    items = ast.literal_eval("[" + match.group(1) + "]")
    return "frozenset({" + ", ".join(repr(x) for x in sorted(items, key=repr)) + "})"


def canonical_text(text: str) -> str:
    """`text` with every printed frozenset's elements in sorted order.

    A set prints in hash order, which for strings changes with PYTHONHASHSEED; sorted, the
    same state prints the same way in every process.
    """
    return _FROZENSET.sub(_sorted_frozenset, text) if "frozenset({" in text else text


class RecordColumns(Protocol):
    """Records kept as columns (the engine's `OpTable`): named arrays, in row order."""

    def columns(self) -> dict[str, np.ndarray]: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[NamedTuple]: ...


class StepSpan(Protocol):
    """What `steps_frame` reads of a step record: the step and when it began and ended."""

    @property
    def step(self) -> int: ...

    @property
    def started_at_s(self) -> float: ...

    @property
    def finished_at_s(self) -> float: ...


def _records_frame(rows: Sequence[NamedTuple], columns: Sequence[str] | None) -> pd.DataFrame:
    """One row per record, one column per record field, named and ordered as the fields."""
    if columns is None:
        if not rows:
            raise ValueError("no records to take column names from; pass the record type's _fields")
        columns = rows[0]._fields
    return pd.DataFrame.from_records(rows, columns=list(columns))


def ops_frame(
    rows: Sequence[NamedTuple] | RecordColumns | dict[str, np.ndarray],
    rank_gpus: list[str],
    role: dict[int, str],
    columns: Sequence[str] | None = None,
) -> pd.DataFrame:
    """The `ops` frame: the engine's op records plus duration, wait, GPU and role.

    Args:
        rows: op records (named tuples with the fields step, op_id, rank, ready_at_s,
            started_at_s, finished_at_s, ...), or the same as columns (an `OpTable`, or
            its `columns()` handed over: that mapping is emptied as the frame is built, so
            each column is released once framed); their field names become the columns.
        rank_gpus: GPU of every rank.
        role: label of a rank, if any.
        columns: the records' field names; needed only when `rows` is empty.
    """
    cols = _handed_columns(rows)
    if cols is not None:
        # an engine `OpTable`: its columns sorted, and the frame built once from them
        order = _ops_order(cols["step"], cols["rank"], cols["started_at_s"], cols["op_id"])
        data = {k: _column(cols.pop(k), order) for k in list(cols)}
        data["duration_s"] = data["finished_at_s"] - data["started_at_s"]
        data["wait_s"] = data["started_at_s"] - data["ready_at_s"]
        rank = data["rank"]
    else:
        records: list[NamedTuple] = [] if isinstance(rows, dict) else list(rows)
        if isinstance(rows, dict):  # columns without rows
            columns = list(rows)
        df = _records_frame(records, columns)
        df = df.sort_values(["step", "rank", "started_at_s", "op_id"], kind="stable").reset_index(drop=True)
        df["duration_s"] = df["finished_at_s"] - df["started_at_s"]
        df["wait_s"] = df["started_at_s"] - df["ready_at_s"]
        data, rank = {k: df[k] for k in df.columns}, df["rank"].to_numpy()
    # per distinct rank, then taken for its rows
    ranks, row_of = np.unique(rank, return_inverse=True)
    row_of = row_of.reshape(-1)
    data["gpu"] = _column(_objects([rank_gpus[r] for r in ranks.tolist()]), row_of)
    data["role"] = _column(_objects([role.get(r, "") for r in ranks.tolist()]), row_of)
    return pd.DataFrame(data, copy=False)


def _handed_columns(rows: object) -> dict[str, np.ndarray] | None:
    """The records' columns, when they come as columns and there are rows: a mapping handed
    over is used itself (and emptied by the caller as it frames them), a table is asked."""
    if isinstance(rows, dict):
        return rows if len(next(iter(rows.values()), ())) else None
    if not isinstance(rows, Sequence) and len(rows):  # type: ignore[arg-type]
        return rows.columns()  # type: ignore[attr-defined, no-any-return]
    return None


def _objects(values: list[str]) -> np.ndarray:
    """The Python objects themselves in a NumPy object array."""
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


#: Rows of a text column sampled to judge whether its values repeat (`_column`).
_SAMPLE_ROWS = 4096


def _column(
    values: np.ndarray | pd.api.extensions.ExtensionArray, rows: np.ndarray
) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """`values[rows]`, as the column pandas makes of it in a frame.

    Text (an object array whose values all are strings: op ids, tags, labels, ...) is
    built from its distinct values: they are found by hashing (`pd.factorize`), given the
    text type pandas gives them (pyarrow strings when pandas uses them), and taken for
    the rows by that array (Arrow's take), so no string is converted per row; the column
    is the one pandas makes of `values[rows]`. Anything else (numbers, mostly distinct
    text, text already converted by `text_array`) is `values[rows]`, which pandas then
    types as it would.
    """
    if values.dtype != object:
        return values[rows]
    repeated = _repeated_text(values)  # type: ignore[arg-type]
    if repeated is None:
        return values[rows]
    codes, distinct = repeated
    return distinct.take(codes[rows])


def text_array(values: np.ndarray) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """Strings of an object array as the text column pandas makes of them in a frame
    (pyarrow strings when pandas uses them: their bytes in Arrow's buffers, no Python object
    per row), or `values` itself when pandas would keep them as objects.

    A record column converted so holds none of the engine's string objects: a run that
    drops its program (`execute(release_ops=True)`) then frees the memory those shared.
    `_column` takes rows of either, with the same result. Repeated values (a flow's op id)
    are converted once each and taken for the rows, as `_column` does.
    """
    if values.dtype != object or not len(values):
        return values
    repeated = _repeated_text(values)
    if repeated is not None:
        codes, distinct = repeated
        return distinct.take(codes)
    text = pd.Series(values, copy=False).array  # converted row by row
    return text if isinstance(text, pd.arrays.ArrowStringArray) else values


def _repeated_text(values: np.ndarray) -> tuple[np.ndarray, pd.arrays.ArrowStringArray] | None:
    """(code of every row, the distinct values as pandas types them) of an object array of
    mostly repeated strings (judged on a sample of `_SAMPLE_ROWS`) that pandas makes Arrow
    text of; None for mostly distinct values (hashing would not pay), a missing value, or
    values pandas keeps as objects."""
    sample = values[:: max(1, len(values) // _SAMPLE_ROWS)]
    if 2 * len(pd.unique(sample)) > len(sample):
        return None
    codes, distinct = pd.factorize(values)
    kind = pd.Series(distinct).array  # the type pandas infers for these values
    if len(codes) and codes.min() >= 0 and isinstance(kind, pd.arrays.ArrowStringArray):
        return codes, kind
    return None


def _equals(col: pd.Series, value: str) -> np.ndarray:
    """`col.to_numpy(dtype=object) == value`, compared on the distinct values."""
    codes, distinct = pd.factorize(col)
    hit = np.append(np.asarray(distinct, dtype=object) == value, False)  # code -1 (missing): False
    return hit[codes]


def _objects_of(col: pd.Series) -> np.ndarray:
    """`col.to_numpy(dtype=object)`, the rows sharing one Python object per distinct value
    (a column of a few tags over millions of rows is not converted row by row)."""
    codes, distinct = pd.factorize(col)
    if len(codes) and codes.min() < 0:
        return col.to_numpy(dtype=object)
    return np.asarray(distinct, dtype=object)[codes]


def _ops_order(step: np.ndarray, rank: np.ndarray, started: np.ndarray, op_id: np.ndarray) -> np.ndarray:
    """The rows' order of a stable sort by (step, rank, started_at_s, op_id), as pandas's.

    The rows are sorted stably by start, then by (step, rank) (`_by_group_then`); op ids
    are compared (as strings) only among rows equal in the first three keys: each run of
    such rows (in row order, as the stable sort left them) is sorted stably by the ids'
    ranks, so rows equal in all four keys keep their order.
    """
    order = _by_group_then(step, rank, started)
    s, r, t = step[order], rank[order], started[order]
    tie = (s[1:] == s[:-1]) & (r[1:] == r[:-1]) & (t[1:] == t[:-1])
    if not tie.any():
        return order
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= tie
    tied[:-1] |= tie
    at = np.flatnonzero(tied)  # positions in `order` of the tied rows, run after run
    run = np.cumsum(np.concatenate(([True], ~tie))[at])  # a run starts where no tie links back
    # dense ranks in string order: pandas ranks its Arrow strings in compiled code (UTF-8
    # bytes sort as code points, Python's order), Python objects as `np.unique` would
    code = pd.Series(op_id[order[at]]).rank(method="dense").to_numpy(dtype=np.int64)
    order[at] = order[at][np.lexsort((code, run))]
    return order


def _by_group_then(step: np.ndarray, rank: np.ndarray, started: np.ndarray) -> np.ndarray:
    """`np.lexsort((started, rank, step))`: a stable sort by start (merging the runs of
    starts the records hold), then a stable sort by (step, rank) as one integer key (a
    radix sort when it fits 16 bits)."""
    if not len(step):
        return np.lexsort((started, rank, step))
    order = np.argsort(started, kind="stable")
    s, r = step[order], rank[order]
    r_lo, r_span = int(r.min()), int(r.max()) - int(r.min()) + 1
    key = (s - int(s.min())).astype(np.int64) * r_span + (r - r_lo)
    small = np.uint16 if int(key.max()) < 1 << 16 else np.int64
    return order[np.argsort(key.astype(small), kind="stable")]  # type: ignore[no-any-return]


def flows_frame(rows: Sequence[FlowRecord] | FlowTable | dict[str, np.ndarray]) -> pd.DataFrame:
    """The `flows` frame: the fabric's flow records plus duration and rate (`rows`: records,
    a `FlowTable`, or its `columns()` handed over, emptied as the frame is built)."""
    cols = _handed_columns(rows)
    if cols is not None:
        # the same columns and dtypes as from the rows, put in flow id order before the frame
        # is built (ids are unique: any sort gives the order `sort_values("flow_id")` gives)
        order = np.argsort(cols["flow_id"], kind="stable")
        data = {k: _column(cols.pop(k), order) for k in list(cols)}
    else:
        df = _records_frame([] if isinstance(rows, dict) else list(rows), FlowRecord._fields)
        df = df.sort_values("flow_id").reset_index(drop=True)
        data = {k: df[k] for k in df.columns}
    duration = np.asarray(data["finished_at_s"] - data["started_at_s"])
    data["duration_s"] = duration
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # as pandas divides
        data["rate_bytes_per_s"] = np.where(duration > 0, np.asarray(data["size_bytes"]) / duration, np.nan)
    return pd.DataFrame(data, copy=False)


def links_frame(  # noqa: ANN001
    intervals: tuple[np.ndarray, ...], links, factors: np.ndarray | None = None
) -> pd.DataFrame:
    """The `links` frame: one row per interval of constant rate on a directed link, with the
    link's name, ends, medium, tier and capacity from the link table (`links`), times its
    degradation factor (`factors`, one per directed link) where the run degrades it: the
    capacity the fabric shared, so that a saturated degraded link reads utilization 1."""
    idx, start, end, rate = intervals
    cap = links.capacity_bytes_per_s[idx] if len(idx) else np.empty(0)
    if factors is not None and len(idx):
        cap = cap * factors[idx]
    df = pd.DataFrame(
        {
            "link_id": idx.astype(np.int64),
            "link": [links.name(i) for i in idx],
            "src": [links.src[i] for i in idx],
            "dst": [links.dst[i] for i in idx],
            "medium": [links.medium[i] for i in idx],
            "tier": links.tier[idx].astype(np.int64) if len(idx) else np.empty(0, dtype=np.int64),
            "started_at_s": start,
            "finished_at_s": end,
            "rate_bytes_per_s": rate,
            "capacity_bytes_per_s": cap,
        }
    )
    df["utilization"] = df["rate_bytes_per_s"] / df["capacity_bytes_per_s"]
    df["bytes"] = df["rate_bytes_per_s"] * (df["finished_at_s"] - df["started_at_s"])
    return df.sort_values(["started_at_s", "link_id"], kind="stable").reset_index(drop=True)


def interval_coverage(bounds: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many of the intervals cover each elementary segment between `bounds` (sweep line)."""
    diff = np.zeros(len(bounds))
    np.add.at(diff, np.searchsorted(bounds, starts), 1)
    np.add.at(diff, np.searchsorted(bounds, ends), -1)
    return np.cumsum(diff)[:-1]


def steps_frame(ops: pd.DataFrame, step_rows: Sequence[StepSpan], weight: dict[int, int]) -> pd.DataFrame:
    """The `steps` frame: one row per (step, simulated rank) with its time breakdown.

    The ops are sorted once by (step, rank) (stable, so each group keeps the frame's order)
    and the breakdown is computed for all groups at once on the sorted arrays
    (`simulator.metrics.step_breakdown`): no per-rank filtering, no loop over groups.
    """
    bounds = {r.step: (r.started_at_s, r.finished_at_s) for r in step_rows}
    step_col = ops["step"].to_numpy()
    rank_col = ops["rank"].to_numpy()
    order = np.lexsort((rank_col, step_col))  # stable: ties keep the frame's order
    step_col, rank_col = step_col[order], rank_col[order]
    start = ops["started_at_s"].to_numpy(dtype=float)[order]
    end = ops["finished_at_s"].to_numpy(dtype=float)[order]
    compute_op = _equals(ops["kind"], "compute")[order]
    host = _equals(ops["stream"], HOST_STREAM)[order] if "stream" in ops else np.zeros(len(order), dtype=bool)
    is_comp = compute_op & ~host  # a host wait is not GPU work: its time is idle
    is_comm = ~compute_op & (end > start)
    tag = _objects_of(ops["tag"])[order]
    # the (step, rank) groups of the sorted arrays: group id of every op, first op of each
    new_group = np.ones(len(order), dtype=bool)
    new_group[1:] = (step_col[1:] != step_col[:-1]) | (rank_col[1:] != rank_col[:-1])
    gid = np.cumsum(new_group) - 1
    firsts = np.flatnonzero(new_group)
    n = len(firsts)
    steps, ranks = step_col[firsts].tolist(), rank_col[firsts].tolist()
    spans = [bounds[s] for s in steps]
    t0 = [t for t, _ in spans]
    t1 = [t for _, t in spans]
    compute = sb.union_lengths(gid[is_comp], start[is_comp], end[is_comp], n)
    exposed = sb.exposed_breakdown(gid, is_comp, is_comm, start, end, tag, n)
    idle = (np.asarray(t1, dtype=float) - np.asarray(t0, dtype=float)) - compute - exposed["exposed_comm_s"]
    by_tag = {k: v for k, v in exposed.items() if k != "exposed_comm_s"}
    return pd.DataFrame(
        {
            "step": steps,
            "rank": ranks,
            "started_at_s": t0,
            "finished_at_s": t1,
            "step_time_s": [b - a for a, b in spans],
            "compute_s": compute,
            "comm_s": sb.union_lengths(gid[is_comm], start[is_comm], end[is_comm], n),
            "exposed_comm_s": exposed["exposed_comm_s"],
            "idle_s": np.where(idle > 0.0, idle, 0.0),  # max(0.0, idle)
            "weight": [weight.get(r, 1) for r in ranks],
            **{k: by_tag[k] for k in sorted(by_tag)},
        }
    )
