"""Read PyTorch profiler (Kineto) JSON traces of one or more ranks into a step trace.

One file per rank (Chrome trace JSON, `.json` or `.json.gz`, as `torch.profiler` exports
it); the rank is `distributedInfo.rank`, else the file's position. Read with the `json`
module (the trace is a flat event list; Holistic Trace Analysis is not needed for it).

* **Step.** The CPU annotation `ProfilerStep#N` chosen (default: the first); the GPU
  events of the step are those whose launch (`cuda_runtime`/`cuda_driver` event of the
  same `correlation`) falls in its window, or, for a trace without launches, that start
  in it. No `ProfilerStep#` at all: the whole trace, with a warning.
* **Compute.** `kernel`, `gpu_memcpy` and `gpu_memset` events become compute ops of their
  measured `dur` on a stream per CUDA stream (`s7`), which keeps their order.
* **Collectives.** A kernel is NCCL/RCCL when its args carry `Collective name` (what
  `record_param_comms` copies onto it) or its name starts with `nccl`/`rccl`. Kind from
  `Collective name`, else from the kernel name (`AllReduce`, `AllGather`, ...). Bytes from
  `In msg nelems`/`Out msg nelems` times the size of `dtype`, following clustersim's size
  convention (`simulator.network.collective`). Group from `Process Group Ranks`, else the
  group of `Process Group Name` in `distributedInfo.pg_config`. Members' k-th collective of a
  group is one collective. Send/recv (`Src Rank`/`Dst Rank`) between profiled ranks
  become a transfer.
* **Dependencies.** Stream order, plus `cuda_sync` "Stream Wait Event"s: the next op on
  the waiting stream waits for the last op launched before the recorded event
  (`wait_on_cuda_event_record_corr_id`) on `wait_on_stream`.

Ranks of `world_size` with no file take part in collectives only (a warning says so).

* **Host launches (opt-in, `host_launches=True`).** A step whose GPU idles while the CPU
  issues work (Python overhead, data loading) is host-bound: without its launch times the
  imported step is only its kernels back to back. With the option, each profiled rank gets
  a `host` stream of measured delays, one per kernel in launch order: the time from the
  previous launch to this one, minus what the CPU spent in `*Synchronize` calls in between
  (those become dependencies on the last kernel launched before the call instead, so
  waiting for re-simulated communication is not counted twice). Each kernel waits for its
  delay. The first delay is the launch of the rank's first kernel after the earliest GPU
  start of the step over all ranks. Simplified: a launch that blocked because the GPU's
  queue was full looks like host time, so use it for host-bound steps only; the 5-10 us
  from a launch to its kernel's start is not modelled.

Fallbacks, each a warning naming the kernel: a collective with no size, or a send/recv
whose peer was not profiled, keeps its measured duration as a compute op (not
re-simulated); a collective with no group information runs over `Group size` consecutive
ranks holding this rank (all ranks when that is unknown too); a trace without `cuda_sync`
events makes each collective wait for the last compute op that ended before it started.

Refused, one line naming the trace file (and the event, `traceEvents[i].dur`): a `ts`,
`dur` or numeric arg (`correlation`, `stream`, ...) that is not a finite number, a `dur`
below 0 or missing on a GPU event, a GPU event's `tid` that is not a stream number when it
has no `stream` arg, a `distributedInfo` that is not a mapping, a world size over
`MAX_RANKS` (also times `dp_replicas`), a collective that the profiled members of its group
do not all run, and a `.json.gz` cut short or nested too deeply to read.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.errors import InputError, shown
from simulator.workload.interchange.kineto_file import GPU_CATS, MAX_RANKS, load_events
from simulator.workload.interchange.tracebuild import RankOp, replicate_data_parallel, trace_dict
from simulator.workload.program import HOST_STREAM

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
DTYPE_BYTES = {
    "float": 4, "float32": 4, "bfloat16": 2, "half": 2, "float16": 2, "double": 8, "int": 4, "long": 8,
    "byte": 1, "char": 1, "bool": 1, "short": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
}  # fmt: skip
KIND_OF_NAME = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce", "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather", "all_gather": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter": "reduce_scatter", "broadcast": "broadcast", "reduce": "reduce",
    "all_to_all": "all_to_all", "alltoall": "all_to_all", "all_to_allv": "all_to_all",
    "alltoall_base": "all_to_all", "barrier": "all_reduce", "send": "send", "recv": "recv",
}  # fmt: skip
KERNEL_KIND = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AllToAll|SendRecv|Send|Recv)")
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass
class KinetoImport:
    """An imported Kineto step: trace data, warnings, and the recorded step time."""

    data: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    recorded_step_s: float = 0.0
    step: int | None = None


@dataclass
class _Kernel:
    index: int  # position in traceEvents
    name: str
    stream: int
    ts_us: float
    dur_us: float
    corr: int
    args: dict[str, Any]
    cat: str
    launch_us: float | None = None


def _same_world_size(traces: dict[int, _RankTrace]) -> None:
    """Refuse rank files that disagree on `distributedInfo.world_size` (files of two jobs)."""
    said = [(rank, rt) for rank, rt in sorted(traces.items()) if "world_size" in rt.info]
    for rank, rt in said[1:]:
        first_rank, first = said[0]
        if rt.info["world_size"] != first.info["world_size"]:
            raise InputError(
                f"world_size {rt.info['world_size']} (rank {rank}), but {first.info['world_size']} in "
                f"{first.path.name} (rank {first_rank}); expected the files of one job",
                file=rt.path,
                field="distributedInfo.world_size",
            )


class _RankTrace:
    """The GPU events of one rank's chosen step."""

    def __init__(self, path: Path, data: dict[str, Any], step: int | None, warn: list[str]) -> None:
        self.path = path
        self.info = data.get("distributedInfo") or {}
        events: list[dict[str, Any]] = data["traceEvents"]
        window, self.step = self._window(events, step, warn)
        launches = {
            ev.get("args", {}).get("correlation"): float(ev.get("ts", 0))
            for ev in events
            if ev.get("cat") in LAUNCH_CATS and ev.get("ph") == "X"
        }
        #: (start, duration) of the host's synchronize calls in the step, us
        self.syncs: list[tuple[float, float]] = sorted(
            (float(ev.get("ts", 0)), float(ev.get("dur", 0)))
            for ev in events
            if ev.get("cat") in LAUNCH_CATS
            and ev.get("ph") == "X"
            and "Synchronize" in str(ev.get("name", ""))
            and (window is None or window[0] <= float(ev.get("ts", 0)) <= window[1])
        )
        self.kernels: list[_Kernel] = []
        self.waits: list[dict[str, Any]] = []
        for i, ev in enumerate(events):
            cat, args = ev.get("cat"), ev.get("args") or {}
            if ev.get("ph") != "X" or cat not in (*GPU_CATS, "cuda_sync"):
                continue
            corr = int(args.get("correlation", -1))
            t = launches.get(corr, float(ev.get("ts", 0)))
            if window is not None and not window[0] <= t <= window[1]:
                continue
            if cat == "cuda_sync":
                if ev.get("name") == "Stream Wait Event" or args.get("cuda_sync_kind") == "Stream Wait Event":
                    self.waits.append({**args, "ts": float(ev.get("ts", 0)), "index": i})
                continue
            stream = int(args.get("stream", ev.get("tid", 0)))
            self.kernels.append(
                _Kernel(
                    i,
                    str(ev.get("name", "")),
                    stream,
                    float(ev["ts"]),
                    float(ev.get("dur", 0)),
                    corr,
                    args,
                    cat,
                    launches.get(corr),
                )
            )
        if not self.kernels:
            raise InputError(
                "no GPU events (kernel, gpu_memcpy, gpu_memset) in the profiled step; expected a trace "
                "recorded with ProfilerActivity.CUDA",
                file=path,
            )
        self.kernels.sort(key=lambda k: (k.ts_us, k.index))

    def _window(
        self, events: list[dict[str, Any]], step: int | None, warn: list[str]
    ) -> tuple[tuple[float, float] | None, int | None]:
        steps = {}
        for ev in events:
            m = STEP_NAME.match(str(ev.get("name", "")))
            if m and ev.get("ph") == "X" and ev.get("cat") in ("user_annotation", "cpu_op", None):
                steps[int(m.group(1))] = (float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0)))
        if step is not None and step not in steps:
            has = f"steps {sorted(steps)}" if steps else "no ProfilerStep# annotation"
            raise InputError(f"no ProfilerStep#{step}; the trace has {has}", file=self.path)
        if not steps:
            warn.append(f"{self.path}: no ProfilerStep# annotation; the whole trace is taken as one step")
            return None, None
        step = min(steps) if step is None else step
        return steps[step], step


def _is_comm(k: _Kernel) -> bool:
    return "Collective name" in k.args or k.name.lower().startswith(("nccl", "rccl"))


def _kind(k: _Kernel) -> str | None:
    name = str(k.args.get("Collective name", "")).lower()
    if name in KIND_OF_NAME:
        return KIND_OF_NAME[name]
    m = KERNEL_KIND.search(k.name)
    if m is None:
        return None
    word = m.group(1)
    return {"SendRecv": "send", "AllToAll": "all_to_all"}.get(word) or KIND_OF_NAME.get(word.lower())


def _ranks_arg(value: Any, path: Path, where: str) -> list[int] | None:
    """The ranks of a list or its text; None if it names none (empty, or cut short by '...')."""
    try:
        value = ast.literal_eval(value) if isinstance(value, str) and "..." not in value else value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, list | tuple) and any(type(r) is not int for r in value):
        raise InputError(
            f"expected a list of whole-number ranks, found {shown(value)}", file=path, field=where
        )
    return list(value) if isinstance(value, list | tuple) and value else None


class _Collector:
    """Turns the ranks' kernels into RankOps (module docstring)."""

    def __init__(self, traces: dict[int, _RankTrace], n: int) -> None:
        self.traces = traces
        self.n = n
        self.warnings: list[str] = []
        self.ops: dict[Any, RankOp] = {}
        self.order: dict[tuple[int, Any], int] = {}
        self.seq: dict[tuple[tuple[int, ...], int], int] = {}

    def warn(self, rt: _RankTrace, k: _Kernel, what: str) -> None:
        self.warnings.append(f"{rt.path}: traceEvents[{k.index}] {k.name[:80]}: {what}")

    def group(self, rank: int, rt: _RankTrace, k: _Kernel) -> tuple[int, ...]:
        where = f"traceEvents[{k.index}].args.Process Group Ranks"
        ranks = _ranks_arg(k.args.get("Process Group Ranks"), rt.path, where)
        if ranks is None:
            pg, cfgs = str(k.args.get("Process Group Name", "")), rt.info.get("pg_config")
            for j, cfg in enumerate(cfgs if isinstance(cfgs, list) else []):
                if isinstance(cfg, dict) and str(cfg.get("pg_name")) == pg:
                    ranks = _ranks_arg(cfg.get("ranks"), rt.path, f"distributedInfo.pg_config[{j}].ranks")
        if ranks is None:
            size = max(int(k.args.get("Group size") or 0), 0) or self.n  # below 1: unknown
            start = rank // size * size
            ranks = list(range(start, min(start + size, self.n + 1)))  # to rank n (refused below), not 1e12
            self.warn(rt, k, f"no group ranks; taken as ranks {ranks[0]}..{ranks[-1]}")
        bad = [r for r in ranks if not 0 <= r < self.n]
        if bad:
            raise InputError(
                f"traceEvents[{k.index}]: group names rank {bad[0]}; expected ranks 0..{self.n - 1} "
                "(distributedInfo.world_size)",
                file=rt.path,
            )
        return tuple(ranks)

    def size_bytes(self, kind: str, k: _Kernel, group_size: int) -> float | None:
        elem = DTYPE_BYTES.get(str(k.args.get("dtype", "")).lower())
        n_in, n_out = k.args.get("In msg nelems"), k.args.get("Out msg nelems")
        if elem is None or n_in is None:
            return None
        if kind == "all_gather":
            return float(n_out) * elem if n_out is not None else float(n_in) * elem * group_size
        return float(n_in) * elem

    def add(self, rank: int, rt: _RankTrace, pos: int, k: _Kernel) -> Any:
        key: Any = (rank, k.index)
        stream = f"s{k.stream}"
        measured = {
            "duration_s": k.dur_us / 1e6,
            "stream": stream,
            "tag": "compute" if k.cat == "kernel" else k.cat,
        }
        kind = _kind(k) if _is_comm(k) else None
        if _is_comm(k) and kind is None:
            self.warn(rt, k, "collective kind unknown; kept as its measured time")
            measured["tag"] = "comm_measured"
        if kind in ("send", "recv"):
            peer = k.args.get("Dst Rank" if kind == "send" else "Src Rank")
            size = self.size_bytes(kind, k, 2)
            if peer is None or int(peer) not in self.traces or (kind == "send" and size is None):
                self.warn(rt, k, f"{kind} peer not profiled or size unknown; kept as its measured time")
                kind, measured["tag"] = None, "comm_measured"
            else:
                fields = {"peer": int(peer), "stream": stream, "tag": "p2p"}
                if kind == "send":
                    fields["size_bytes"] = size
                self.ops[key] = RankOp(key, kind, _short(k.name), (rank,), fields)
        elif kind is not None:
            group = self.group(rank, rt, k)
            size = self.size_bytes(kind, k, len(group))
            if size is None:
                self.warn(rt, k, "no message size (In msg nelems, dtype); kept as its measured time")
                kind, measured["tag"] = None, "comm_measured"
            else:
                key = self._collective(rank, rt, k, kind, group, size, stream)
        if kind is None:
            self.ops[key] = RankOp(key, "compute", _short(k.name), (rank,), measured)
        self.order[(rank, key)] = pos
        return key

    def check_counts(self) -> None:
        """Every profiled member of a group runs as many of its collectives as the others
        (a collective one member never runs would wait for it forever)."""
        runs: dict[tuple[int, ...], dict[int, int]] = {}
        for (group, rank), last in self.seq.items():
            runs.setdefault(group, {})[rank] = last + 1
        for group, by_rank in runs.items():
            for rank in (r for r in group if r in self.traces):
                mine, most = by_rank.get(rank, 0), max(by_rank.values())
                if mine != most:
                    raise InputError(
                        f"rank {rank} runs {mine} collectives of group {_group_text(group)}, another member "
                        f"{most}; expected the same number on every profiled member",
                        file=self.traces[rank].path,
                    )

    def _collective(
        self,
        rank: int,
        rt: _RankTrace,
        k: _Kernel,
        kind: str,
        group: tuple[int, ...],
        size: float,
        stream: str,
    ) -> Any:
        if rank not in group:
            raise InputError(
                f"traceEvents[{k.index}]: rank {rank} is not in its group {list(group)}", file=rt.path
            )
        n = self.seq[(group, rank)] = self.seq.get((group, rank), -1) + 1
        key = ("coll", group, n)
        if key not in self.ops:
            name = f"{kind}.g{group[0]}x{len(group)}.{n}"
            fields = {
                "collective": kind,
                "group": list(group),
                "size_bytes": size,
                "stream": stream,
                "tag": kind,
            }
            self.ops[key] = RankOp(key, "collective", name, group, fields)
        elif (self.ops[key].fields["collective"], self.ops[key].fields["size_bytes"]) != (kind, size):
            first = self.ops[key].fields
            raise InputError(
                f"traceEvents[{k.index}]: collective #{n} of group {list(group)} is {kind} of {size:g} bytes "
                f"here, {first['collective']} of {first['size_bytes']:g} bytes on another rank; "
                "expected the same",
                file=rt.path,
            )
        return key


def _group_text(group: tuple[int, ...]) -> str:
    """A group's ranks as text: listed when few, else their first and last."""
    return str(list(group)) if len(group) <= 8 else f"[{group[0]}..{group[-1]}] ({len(group)} ranks)"


def _short(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", name.split("(")[0])[:48].strip("_") or "kernel"


def _add_deps(c: _Collector, rank: int, rt: _RankTrace, keys: list[Any]) -> None:
    """Cross-stream waits (module docstring) as deps of the ops they hold back."""
    ks = rt.kernels
    if not rt.waits:
        if any(c.ops[key].kind == "collective" for key in keys):
            c.warnings.append(
                f"{rt.path}: no cuda_sync events; each collective waits for the last compute op before it"
            )
        last_compute: Any = None
        last_end = -1.0
        for k, key in zip(ks, keys, strict=True):
            op = c.ops[key]
            if op.kind == "compute" and k.ts_us + k.dur_us >= last_end:
                last_compute, last_end = key, k.ts_us + k.dur_us
            elif op.kind != "compute" and last_compute is not None and last_end <= k.ts_us:
                op.deps.append(last_compute)
        return
    for w in rt.waits:
        waiting, source = int(w.get("stream", -1)), int(w.get("wait_on_stream", -1))
        corr = int(w.get("wait_on_cuda_event_record_corr_id", -1))
        before = [
            (k, key)
            for k, key in zip(ks, keys, strict=True)
            if k.stream == source and (k.corr < corr if corr >= 0 else k.ts_us + k.dur_us <= w["ts"])
        ]
        after = [
            (k, key) for k, key in zip(ks, keys, strict=True) if k.stream == waiting and k.ts_us >= w["ts"]
        ]
        if before and after:
            target = c.ops[after[0][1]]
            if before[-1][1] != after[0][1]:
                target.deps.append(before[-1][1])


def _add_host_launches(c: _Collector, rank: int, rt: _RankTrace, keys: list[Any], t0_us: float) -> None:
    """The rank's `host` stream of measured launch delays (module docstring)."""
    launched = sorted(
        ((k.launch_us, pos) for pos, k in enumerate(rt.kernels) if k.launch_us is not None),
    )
    prev_us = t0_us
    last_per_stream: dict[int, Any] = {}
    syncs = list(rt.syncs)
    for j, (launch_us, pos) in enumerate(launched):
        k, key = rt.kernels[pos], keys[pos]
        blocked_us, waits_for = 0.0, set[Any]()
        while syncs and syncs[0][0] < launch_us:
            start_us, dur_us = syncs.pop(0)
            if start_us >= prev_us:
                blocked_us += dur_us
                waits_for.update(last_per_stream.values())
        delay_s = max(0.0, launch_us - prev_us - blocked_us) / 1e6
        host_key = (rank, "host", j)
        op = RankOp(
            host_key,
            "compute",
            "host_launch",
            (rank,),
            {"duration_s": delay_s, "stream": HOST_STREAM, "tag": "host"},
        )
        op.deps.extend(sorted(waits_for, key=str))
        c.ops[host_key] = op
        c.order[(rank, host_key)] = -len(launched) + j  # host ops keep launch order on their stream
        c.ops[key].deps.append(host_key)
        last_per_stream[k.stream] = key
        prev_us = max(prev_us, launch_us)


def import_kineto(
    paths: list[Path], step: int | None = None, dp_replicas: int = 1, host_launches: bool = False
) -> KinetoImport:
    """Read the rank traces `paths` into `clustersim-step/1` trace data.

    Args:
        step: the N of `ProfilerStep#N` (default: the first).
        dp_replicas: what-if: run the recorded ranks as this many data-parallel copies
            (`tracebuild.replicate_data_parallel`), measured compute kept.
        host_launches: keep the measured launch times as a `host` stream each kernel waits
            on (module docstring), for host-bound steps.

    Raises:
        InputError: one line naming the file, the event index and what was expected.
    """
    warnings: list[str] = []
    traces: dict[int, _RankTrace] = {}
    for i, p in enumerate(paths):
        data = load_events(p)
        rt = _RankTrace(p, data, step, warnings)
        rank = int(rt.info.get("rank", i))
        if rank in traces:
            raise InputError(
                f"rank {rank} is also the rank of {traces[rank].path}; expected one file per rank", file=p
            )
        traces[rank] = rt
    _same_world_size(traces)
    first = {rt.step: rt for rt in traces.values() if rt.step is not None}
    if step is None and len(first) > 1:  # each file's first step differs: pairs of other steps
        a, b = (first[k] for k in sorted(first)[:2])
        raise InputError(
            f"its first profiled step is ProfilerStep#{b.step}, that of {a.path.name} ProfilerStep#{a.step}; "
            "give --step N to take the same step of every rank",
            file=b.path,
        )
    n = max(max(traces) + 1, *(int(rt.info.get("world_size", 0)) for rt in traces.values()))
    if n * dp_replicas > MAX_RANKS:
        raise InputError(
            f"{n:,} ranks times {dp_replicas:,} replicas is over {MAX_RANKS:,} ranks", field="dp_replicas"
        )
    c = _Collector(traces, n)
    if len(traces) < n:
        missing = sorted(set(range(n)) - set(traces))
        warnings.append(
            f"{len(missing)} of {n} ranks not profiled (first: {missing[0]}); "
            "they take part in collectives only"
        )
    t0_us = min(k.ts_us for rt in traces.values() for k in rt.kernels)
    for rank, rt in sorted(traces.items()):
        keys = [c.add(rank, rt, pos, k) for pos, k in enumerate(rt.kernels)]
        _add_deps(c, rank, rt, keys)
        if host_launches:
            _add_host_launches(c, rank, rt, keys, t0_us)
    c.check_counts()
    for op in c.ops.values():
        op.deps = list(dict.fromkeys(op.deps))
    span = [
        (min(k.ts_us for k in rt.kernels), max(k.ts_us + k.dur_us for k in rt.kernels))
        for rt in traces.values()
    ]
    recorded = (max(e for _, e in span) - min(s for s, _ in span)) * 1e-6
    steps = {rt.step for rt in traces.values()}
    chosen = steps.pop() if len(steps) == 1 else None
    meta: dict[str, float | str] = {
        "source": "pytorch-profiler",
        "measured": "compute kernels, memcpy/memset and unmodelled communication (profiled durations)"
        + (", host launch times" if host_launches else ""),
        "simulated": "collectives and send/recv (re-simulated on the scenario's topology)",
        "recorded_step_s": recorded,
        "recorded_ranks": n,
    }
    ops, order = replicate_data_parallel(list(c.ops.values()), c.order, n, dp_replicas)
    data = trace_dict(
        f"kineto-step{'' if chosen is None else chosen}", n * dp_replicas, ops, order, meta=meta
    )
    return KinetoImport(data, warnings + c.warnings, recorded, chosen)
