"""Chrome / Perfetto trace export of a run's step timeline (Trace Event Format, JSON).

Open the file in https://ui.perfetto.dev or chrome://tracing. Mapping:

* one process (`pid`) per rank group: the ops frame's `role`, else the server part of the
  GPU name (as the dashboard groups ranks); one thread (`tid`) per (rank, stream), named
  `r<rank> <stream> (<gpu>)`; a run of several jobs (`jobs:`, whose ops frame has a `job`
  column and numbers each job's ranks from 0) has one per (job, rank, stream), named
  `<job> r<rank> <stream> (<gpu>)`, its events' `args` naming the job;
* one complete event (`ph: "X"`) per op instance, `ts`/`dur` in microseconds of simulated
  time, `name` the op id, `cat` its tag; a communication op that waited for its peers also
  gets a `wait` event from when the rank reached it to when it started;
* a last process "links" with one counter track (`ph: "C"`) per busiest directed link:
  utilization in percent over time (binned past `max_counter_points` per link, as in the
  dashboard);
* given the step program, flow arrows (`ph: "s"` on the source slice, `ph: "f"` bound to
  the enclosing target slice): send -> recv of every transfer (from the sender's lane to
  the receiver's, `cat: "p2p"`), and every dependency of an op on another rank's op
  (from where the dependency ran to the op that waited, `cat: "dependency"`); for several
  jobs, each job's arrows from its own program, between its own ops.

Pure function of the saved frames (and the program's dependency edges, if given);
nothing is sampled on the op side.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.io import write_atomic
from simulator.viz.links import busiest, link_series
from simulator.viz.rank_groups import rank_groups
from simulator.workload.program import StepProgram

US = 1e6


def _num(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


#: Columns of the ops frame an op event is built from.
OP_COLUMNS = [
    "step",
    "op_id",
    "kind",
    "tag",
    "rank",
    "stream",
    "ready_at_s",
    "started_at_s",
    "finished_at_s",
    "size_bytes",
    "flops",
    "collective",
    "algorithm",
    "n_ranks",
]


def _with_lanes(ops: pd.DataFrame) -> pd.DataFrame:
    """`ops` with a `job` column ("" without one) and a `lane` number per (job, rank), jobs
    in frame order and ranks in order within each: the ranks of a run of several jobs all
    start at 0, and without the job two ranks on different GPUs would share a thread."""
    if "job" not in ops.columns:
        return ops.assign(job="", lane=ops["rank"])
    job = ops["job"].astype(str)
    index = {j: i for i, j in enumerate(dict.fromkeys(job))}
    stride = int(ops["rank"].max()) + 1 if not ops.empty else 1
    return ops.assign(job=job, lane=job.map(index).to_numpy(dtype=np.int64) * stride + ops["rank"])


def _edges_by_job(ops: pd.DataFrame, edges: list[Edge] | dict[str, list[Edge]]) -> dict[str, list[Edge]]:
    """The arrows per job: a mapping as given; a list belongs to the run's one job.

    Raises:
        ValueError: a list for a run of several jobs (whose arrows would match no job).
    """
    if isinstance(edges, dict):
        return edges
    jobs = list(dict.fromkeys(ops["job"]))
    if len(jobs) > 1:
        raise ValueError(f"a run of {len(jobs)} jobs takes its arrows per job (a mapping job -> edges)")
    return {jobs[0] if jobs else "": edges}


def _process_events(pid: int, name: str) -> list[dict[str, Any]]:
    """Metadata events naming a process and fixing its place in the track list."""
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]


def _thread_events(
    ops: pd.DataFrame, groups: pd.Series, pid_of: dict[Any, int]
) -> tuple[list[dict[str, Any]], dict[tuple[int, str], int]]:
    """One named thread per (lane, stream), compute stream first within a lane (`ops` with
    the lanes of `_with_lanes`).

    Returns:
        (the metadata events, the thread id of every (lane, stream)).
    """
    events: list[dict[str, Any]] = []
    cols = ["lane", "job", "rank", "stream", "gpu"]
    lanes = ops[cols].drop_duplicates(["lane", "stream"]) if not ops.empty else ops
    order = lanes.assign(o=(lanes["stream"] != "compute").astype(int)).sort_values(["lane", "o", "stream"])
    tid_of: dict[tuple[int, str], int] = {}
    for i, (lane, job, rank, stream, gpu) in enumerate(order[cols].itertuples(index=False, name=None)):
        tid = i + 1
        tid_of[(int(lane), str(stream))] = tid
        pid = pid_of[groups[lane]]
        who = f"{job} r{int(rank)}" if job else f"r{int(rank)}"
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": pid,
                "tid": tid,
                "args": {"name": f"{who} {stream} ({gpu})"},
            }
        )
        events.append(
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}}
        )
    return events, tid_of


def _op_events(
    ops: pd.DataFrame, groups: pd.Series, pid_of: dict[Any, int], tid_of: dict[tuple[int, str], int]
) -> list[dict[str, Any]]:
    """One complete event per op instance, plus a `wait` event before a communication op
    that started after it was ready (its peers were not)."""
    events: list[dict[str, Any]] = []
    for row in ops[[*OP_COLUMNS, "lane", "job"]].itertuples(index=False):
        rank, lane, stream = int(row.rank), int(row.lane), str(row.stream)
        pid, tid = pid_of[groups[lane]], tid_of[(lane, stream)]
        args: dict[str, Any] = {"step": int(row.step), "kind": row.kind, "rank": rank}
        if row.job:
            args["job"] = row.job
        if row.kind == "compute":
            args["flops"] = _num(row.flops)
        else:
            args.update(
                size_bytes=_num(row.size_bytes),
                collective=row.collective,
                algorithm=row.algorithm,
                n_ranks=_num(row.n_ranks),
                wait_us=(row.started_at_s - row.ready_at_s) * US,
            )
        events.append(
            {
                "ph": "X",
                "name": str(row.op_id),
                "cat": str(row.tag or row.kind),
                "pid": pid,
                "tid": tid,
                "ts": row.started_at_s * US,
                "dur": (row.finished_at_s - row.started_at_s) * US,
                "args": args,
            }
        )
        if row.kind != "compute" and row.started_at_s > row.ready_at_s:
            events.append(
                {
                    "ph": "X",
                    "name": f"wait {row.op_id}",
                    "cat": "wait",
                    "pid": pid,
                    "tid": tid,
                    "ts": row.ready_at_s * US,
                    "dur": (row.started_at_s - row.ready_at_s) * US,
                    "args": {"step": int(row.step), "rank": rank, **({"job": row.job} if row.job else {})},
                }
            )
    return events


#: A flow arrow: (category, source op id, source rank, target op id, target rank).
Edge = tuple[str, str, int, str, int]


def flow_edges(program: StepProgram) -> list[Edge]:
    """The arrows of `program`: sender -> receiver of each transfer, and each dependency
    of an op on an op of a rank it does not run on (from that op's first rank; from the
    receiver of a transfer, where its data is when it is done)."""
    owner = {op.id: op.ranks for op in program.ops}
    start = {op.id: op.ranks[-1] if op.kind == "p2p" else op.ranks[0] for op in program.ops if op.ranks}
    edges: list[Edge] = []
    for op in program.ops:
        if op.kind == "p2p" and len(op.ranks) == 2:
            edges.append(("p2p", op.id, op.ranks[0], op.id, op.ranks[1]))
        for d in op.deps:
            src = owner.get(d, ())
            if not src or set(src) & set(op.ranks):
                continue
            edges.extend(("dependency", d, start[d], op.id, r) for r in op.ranks)
    return edges


def _flow_events(
    ops: pd.DataFrame,
    edges: dict[str, list[Edge]],
    groups: pd.Series,
    pid_of: dict[Any, int],
    tid_of: dict[tuple[int, str], int],
) -> list[dict[str, Any]]:
    """Flow start/finish pairs for each job's `edges` (job "" of a one-job run) between
    that job's ops, in every step both ends ran in.

    Both ends sit at the start of their slice, the finish bound to the enclosing slice
    (`bp: "e"`), so viewers attach the arrow to the two slices (an end exactly at a slice's
    end could bind to the next one).
    """
    columns = ["job", "op_id", "rank", "step", "lane", "stream", "started_at_s", "finished_at_s"]
    at = {
        (str(r.job), str(r.op_id), int(r.rank), int(r.step)): (int(r.lane), str(r.stream), r.started_at_s)
        for r in ops[columns].itertuples(index=False)
    }
    events: list[dict[str, Any]] = []
    steps = sorted({int(x) for x in ops["step"].unique()}) if not ops.empty else []
    flow_id = 0
    for job, job_edges in edges.items():
        for step in steps:
            for cat, src_id, src_rank, dst_id, dst_rank in job_edges:
                a, b = at.get((job, src_id, src_rank, step)), at.get((job, dst_id, dst_rank, step))
                if a is None or b is None:
                    continue
                flow_id += 1
                events += _arrow(flow_id, f"{src_id} -> {dst_id}", cat, a, b, groups, pid_of, tid_of)
    return events


def _arrow(
    flow_id: int,
    name: str,
    cat: str,
    a: tuple[int, str, float],
    b: tuple[int, str, float],
    groups: pd.Series,
    pid_of: dict[Any, int],
    tid_of: dict[tuple[int, str], int],
) -> list[dict[str, Any]]:
    """The start (`s`, at source slice `a`) and finish (`f`, bound to target slice `b`) of
    one flow arrow; a slice is (lane, stream, start time)."""
    events: list[dict[str, Any]] = []
    for ph, (lane, stream, start) in (("s", a), ("f", b)):
        ev = {
            "ph": ph,
            "id": flow_id,
            "name": name,
            "cat": cat,
            "pid": pid_of[groups[lane]],
            "tid": tid_of[(lane, stream)],
            "ts": start * US,
        }
        if ph == "f":
            ev["bp"] = "e"
        events.append(ev)
    return events


def _link_counter_events(
    links: pd.DataFrame, pid: int, top_links: int, max_counter_points: int
) -> tuple[list[dict[str, Any]], int]:
    """A "links" process with one utilization counter track (%) per busiest link.

    Returns:
        (the events, how many links got a counter track).
    """
    events = _process_events(pid, f"links (busiest {top_links}, utilization %)")
    n_counters = 0
    for name in busiest(links, top_links) if not links.empty else []:
        xs, ys, _ = link_series(links, name, max_counter_points)
        n_counters += 1
        for x, y in zip(xs, ys, strict=False):
            events.append(
                {
                    "ph": "C",
                    "name": name,
                    "pid": pid,
                    "tid": 0,
                    "ts": float(x) * US,
                    "args": {"utilization_pct": round(float(y) * 100, 4)},
                }
            )
    return events, n_counters


def chrome_trace(
    frames: dict[str, pd.DataFrame],
    steps: list[int] | None = None,
    top_links: int = 8,
    max_counter_points: int = 5000,
    edges: list[Edge] | dict[str, list[Edge]] | None = None,
) -> dict[str, Any]:
    """The trace as a dict (`{"traceEvents": [...], "displayTimeUnit": "ms", ...}`).

    Args:
        frames: the run's frames; `ops` is required, `links` adds counter tracks.
        steps: steps to export (default all).
        top_links: busiest links given a utilization counter track.
        max_counter_points: counter samples per link at most (time-weighted bins beyond).
        edges: flow arrows to draw (`flow_edges(program)`), or for a run of several jobs a
            mapping job name -> its program's arrows; none by default.

    Raises:
        ValueError: the frames have no ops frame, or a list of arrows for several jobs.
    """
    ops = frames.get("ops")
    if ops is None:
        raise ValueError("the results have no ops frame; nothing to trace")
    if steps is not None:
        ops = ops[ops["step"].isin(steps)]
    ops = _with_lanes(ops)
    events: list[dict[str, Any]] = []
    by_lane = ops.assign(rank=ops["lane"])  # grouped by lane: a (job, rank) each
    groups = rank_groups(by_lane, max_groups=10**9) if not ops.empty else pd.Series(dtype=object)
    pid_of = {g: i + 1 for i, g in enumerate(dict.fromkeys(groups.to_numpy()))}
    for g, pid in pid_of.items():
        events += _process_events(pid, str(g))
    thread_events, tid_of = _thread_events(ops, groups, pid_of)
    events += thread_events
    events += _op_events(ops, groups, pid_of, tid_of)
    n_flows = 0
    if edges:
        flows = _flow_events(ops, _edges_by_job(ops, edges), groups, pid_of, tid_of)
        n_flows = len(flows) // 2
        events += flows
    links = frames.get("links")
    n_counters = 0
    if links is not None and not links.empty and top_links > 0:
        if steps is not None and not ops.empty:
            lo, hi = ops["ready_at_s"].min(), ops["finished_at_s"].max()
            links = links[(links["finished_at_s"] > lo) & (links["started_at_s"] < hi)]
        counter_events, n_counters = _link_counter_events(
            links, len(pid_of) + 1, top_links, max_counter_points
        )
        events += counter_events
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "clustersim",
            "time_unit": "us of simulated time",
            "link_counters": n_counters,
            "flows": n_flows,
        },
    }


def write_chrome_trace(frames: dict[str, pd.DataFrame], path: str | Path, **kwargs: Any) -> dict[str, int]:
    """Write the trace JSON atomically; returns counts (events, ops, counters)."""
    trace = chrome_trace(frames, **kwargs)
    write_atomic(path, json.dumps(trace, separators=(",", ":")))
    ev = trace["traceEvents"]
    return {
        "events": len(ev),
        "ops": sum(1 for e in ev if e["ph"] == "X" and e["cat"] != "wait"),
        "counter_samples": sum(1 for e in ev if e["ph"] == "C"),
        "link_counters": trace["otherData"]["link_counters"],
        "flows": trace["otherData"]["flows"],
    }
