"""Step trace format v1 (`clustersim-step/1`): a recorded or hand-written training step.

```yaml
format: clustersim-step/1
name: dp16-step
ranks: 16                      # rank r runs on the r-th GPU of the topology (server, local rank)
placement: [n0.gpu0, ...]      # optional: explicit GPU of every rank
groups:                        # named rank groups: "all", a list, or {start, stop, step}
  world: all
ops:
  - {id: fwd, kind: compute, ranks: all, duration_ms: 20, tag: fwd}
  - {id: bwd, kind: compute, ranks: all, flops: 4.0e14, bytes: 2.0e10, dtype: bf16, deps: [fwd]}
  - {id: grads, kind: collective, collective: all_reduce, group: world, size_mib: 512,
     algorithm: ring, deps: [bwd], tag: dp}
  - {id: s0, kind: send, ranks: [0], peer: 8, size_mib: 64}
  - {id: r8, kind: recv, ranks: [8], peer: 0}
  - {id: ckpt, kind: checkpoint, ranks: [0], size_gib: 10, target: stor0}
```

Rules:
* An op listing several ranks stands for one op per rank, with id `ID@RANK`.
* A dependency `X` of an op on rank r means X's instance on r (`X@r`); from a collective it
  means X's instances on the collective's members; `X@3` names one instance.
* Ops of one rank and stream run in file order. Compute ops use the `compute` stream,
  communication the `comm` stream, unless `stream` says otherwise.
* The n-th `send` from a to b pairs with the n-th `recv` on b from a; the pair is one
  transfer that starts when both sides are ready. Sizes on the send side.
* Errors (cycles, unknown ops, groups naming missing ranks, unmatched sends) name the file,
  line and field.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.config.loader import Document, read_document, validate
from simulator.errors import FieldError, InputError
from simulator.network.collective import COLLECTIVES, SUPPORTED
from simulator.network.hardware import DTYPES
from simulator.units import to_si
from simulator.workload.program import COMM_STREAM, COMPUTE_STREAM, Op, StepProgram

FORMAT = "clustersim-step/1"


class RangeSpec(Spec):
    """Ranks start, start+step, ... below stop."""

    start: int = Field(0, ge=0, description="First rank.")
    stop: int = Field(description="One past the last rank.")
    step: int = Field(1, ge=1, description="Stride.")


RankSet = Literal["all"] | list[int] | RangeSpec | str


class TraceOpSpec(Spec):
    """One op of a trace (see the module docstring for the rules)."""

    id: str = Field(min_length=1, description="Unique op id (no '@').")
    kind: Literal["compute", "collective", "send", "recv", "checkpoint"] = Field(description="Op kind.")
    ranks: RankSet | None = Field(
        None, description="Ranks running the op: 'all', a list, a range or a group name."
    )
    group: str | list[int] | None = Field(None, description="Collective: group name or rank list.")
    mirrors: list[str | list[int]] = Field(
        default_factory=list, description="Collective: further groups doing the same collective at once."
    )
    collective: str | None = Field(None, description=f"Collective kind, one of {list(COLLECTIVES)}.")
    algorithm: str | None = Field(None, description="Collective algorithm (default: the scenario's).")
    peer: int | None = Field(None, ge=0, description="send/recv: the other rank.")
    deps: list[str] = Field(default_factory=list, description="Ops that must finish first.")
    stream: str | None = Field(None, description="Stream name (default compute or comm by kind).")
    tag: str = Field("", description="Category for breakdowns: fwd, bwd, optimizer, tp, dp, pp, ep, cp, ...")
    duration_s: float | None = Field(
        None, ge=0, description="Compute duration, s (YAML also duration_ms, duration_us)."
    )
    flops: float = Field(0.0, ge=0, description="Compute: floating-point operations.")
    bytes: float = Field(0.0, ge=0, description="Compute: bytes read and written in HBM.")
    dtype: str = Field("bf16", description="Compute: data type of the math.")
    size_bytes: float | None = Field(
        None, ge=0, description="Message/buffer size, bytes (YAML also size_mib, size_gib)."
    )
    target: str | None = Field(None, description="Checkpoint: storage node name (default: nearest).")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return to_si(data, "duration_s", "size_bytes")

    @model_validator(mode="after")
    def _check(self) -> TraceOpSpec:
        if "@" in self.id:
            raise ValueError("op ids may not contain '@'")
        if self.tag == "comm":
            raise ValueError(
                "tag 'comm' is reserved (the total of exposed communication); name the kind, e.g. dp or tp"
            )
        if self.kind == "compute" and self.duration_s is None and self.flops == 0 and self.bytes == 0:
            raise ValueError("a compute op needs a duration or flops/bytes")
        if self.kind == "compute" and self.duration_s is not None and (self.flops or self.bytes):
            raise ValueError("a compute op takes a duration or flops/bytes, not both")
        if self.dtype not in DTYPES:
            raise FieldError(f"unknown dtype {self.dtype!r}; expected one of {list(DTYPES)}", field="dtype")
        self._check_kind_fields()
        if self.kind == "collective":
            if self.collective not in COLLECTIVES:
                raise ValueError(f"collective must be one of {list(COLLECTIVES)}")
            if self.group is None:
                raise ValueError("a collective needs a group")
            if self.algorithm is not None and self.algorithm not in SUPPORTED[self.collective]:
                raise FieldError(
                    f"{self.collective} has no algorithm {self.algorithm!r}; "
                    f"expected one of {list(SUPPORTED[self.collective])}",
                    field="algorithm",
                )
        if self.kind in ("send", "recv") and self.peer is None:
            raise ValueError(f"a {self.kind} needs a peer")
        if self.kind in ("collective", "send", "checkpoint") and self.size_bytes is None:
            raise ValueError(f"a {self.kind} needs size_bytes, size_mib or size_gib")
        if self.kind != "collective" and self.ranks is None:
            raise ValueError("ranks is required (e.g. ranks: all)")
        return self

    def _check_kind_fields(self) -> None:
        """Fields that belong to another kind of op are mistakes, not silently ignored."""
        own = {
            "compute": {"duration_s", "flops", "bytes", "dtype"},
            "collective": {"group", "mirrors", "collective", "algorithm", "size_bytes"},
            "send": {"peer", "size_bytes"},
            "recv": {"peer"},
            "checkpoint": {"size_bytes", "target"},
        }[self.kind]
        foreign = {"group", "mirrors", "collective", "algorithm", "peer", "duration_s", "flops", "bytes"}
        foreign |= {"dtype", "size_bytes", "target"}
        for name in sorted((foreign - own) & self.model_fields_set):
            raise FieldError(f"a {self.kind} op takes no {name!r}", field=name)

    @property
    def duration(self) -> float | None:
        return self.duration_s

    @property
    def size(self) -> float:
        return 0.0 if self.size_bytes is None else self.size_bytes


class TraceSpec(Spec):
    """A step trace file."""

    format: Literal["clustersim-step/1"] = Field(description="Format tag and version.")
    name: str = Field("trace", description="Name shown in results.")
    ranks: int = Field(ge=1, description="Number of ranks.")
    placement: list[str] | None = Field(None, description="GPU node name of every rank (default: packed).")
    groups: dict[str, RankSet] = Field(default_factory=dict, description="Named rank groups.")
    ops: list[TraceOpSpec] = Field(min_length=1, description="Ops in program order.")
    meta: dict[str, float | str] = Field(
        default_factory=dict,
        description="Facts about the step: tokens_per_step, model_flops_per_step, dtype (for the "
        "summary), dp (data-parallel replicas the ranks form, for the run level's elastic and "
        "hot-spare policies; default 1: the whole job one replica).",
    )


def _expand(doc: Document, rs: RankSet, n: int, groups: dict[str, list[int]], loc: tuple) -> list[int]:
    """The ranks of rank set `rs` ("all", a list, a range or a group name) of an `n`-rank trace."""
    if rs == "all":
        return list(range(n))
    if isinstance(rs, RangeSpec):
        whole, inside = range(rs.start, rs.stop, rs.step), range(rs.start, min(rs.stop, n), rs.step)
        if len(whole) > len(inside):  # checked before listing: a stop of 1e12 would fill memory
            raise doc.error(f"rank {whole[len(inside)]} does not exist; this trace has ranks 0..{n - 1}", loc)
        out = list(inside)
    elif isinstance(rs, str):
        if rs not in groups:
            raise doc.error(f"unknown group {rs!r}; defined groups: {sorted(groups)}", loc)
        return groups[rs]
    else:
        out = list(rs)
    bad = [r for r in out if not 0 <= r < n]
    if bad:
        raise doc.error(f"rank {bad[0]} does not exist; this trace has ranks 0..{n - 1}", loc)
    if len(set(out)) != len(out):
        raise doc.error("a rank is listed twice", loc)
    if not out:
        raise doc.error("empty rank set", loc)
    return out


def program_from_trace(spec: TraceSpec, doc: Document, gpus: list[str]) -> StepProgram:
    """Turn a validated trace into a StepProgram placed on `gpus` (topology order).

    Raises:
        InputError: naming the file, line and field of a placement, group, op, dependency or
            send/recv pairing the trace gets wrong, or of an op of a dependency cycle.
    """
    rank_gpus = _place_ranks(spec, doc, gpus)
    groups: dict[str, list[int]] = {}
    for name, rs in spec.groups.items():
        groups[name] = _expand(doc, rs, spec.ranks, groups, ("groups", name))
    refs = _OpRefs(spec, doc, groups)
    ops, transfers = _build_ops(spec, doc, groups, refs)
    transfers.pair(ops, doc)
    # the merged transfer sits at the send's position in program order, for both ranks
    program = StepProgram(spec.name, rank_gpus, ops, meta=dict(spec.meta))
    try:
        program.validate()
    except ValueError as exc:
        raise _program_error(str(exc), program, spec, doc) from None
    transfers.check_deadlock(ops, spec, doc)
    _collect_if_paused()
    return program


def _collect_if_paused() -> None:
    """Collect the cyclic garbage reading a trace leaves (networkx graphs of its checks and
    of an import's ordering, about 1.4 kB an op) when the collector is paused: a caller that
    pauses it while it makes long-lived objects, then freezes them (`clustersim run`,
    `simulator.commands.common.making_long_lived`), would hold that garbage for the whole
    run. The pass walks the objects made since the pause, the trace's among them."""
    if not gc.isenabled():
        gc.collect()


def _place_ranks(spec: TraceSpec, doc: Document, gpus: list[str]) -> list[str]:
    """GPU of every rank: the trace's `placement`, else the first GPUs of the topology."""
    n = spec.ranks
    if spec.placement is None:
        if n > len(gpus):
            raise doc.error(f"{n} ranks do not fit on the topology's {len(gpus)} GPUs", ("ranks",))
        return gpus[:n]
    if len(spec.placement) != n:
        raise doc.error(f"placement lists {len(spec.placement)} GPUs for {n} ranks", ("placement",))
    unknown = [x for x in spec.placement if x not in set(gpus)]
    if unknown:
        raise doc.error(f"GPU {unknown[0]!r} is not in the topology", ("placement",))
    if len(set(spec.placement)) != n:
        raise doc.error("two ranks placed on the same GPU", ("placement",))
    return list(spec.placement)


class _OpRefs:
    """The op ids of a trace (one instance per rank of a rank op; one id per collective)
    and the resolution of dependencies to them."""

    def __init__(self, spec: TraceSpec, doc: Document, groups: dict[str, list[int]]) -> None:
        self.doc = doc
        self.instances: dict[str, dict[int, str]] = {}  # base id -> rank -> instance id
        self.collective_ids: set[str] = set()
        for i, o in enumerate(spec.ops):
            if o.id in self.instances or o.id in self.collective_ids:
                raise doc.error(f"op id {o.id!r} is used twice", ("ops", i, "id"))
            if o.kind == "collective":
                self.collective_ids.add(o.id)
                continue
            if o.ranks is None:
                raise doc.error("ranks is required (e.g. ranks: all)", ("ops", i, "ranks"))
            ranks = _expand(doc, o.ranks, spec.ranks, groups, ("ops", i, "ranks"))
            self.instances[o.id] = {r: f"{o.id}@{r}" for r in ranks}

    def resolve(self, dep: str, ranks: list[int], loc: tuple) -> list[str]:
        """The op ids dependency `dep` of an op on `ranks` stands for (module docstring)."""
        if dep in self.collective_ids:
            return [dep]
        if "@" in dep:
            base, _, r = dep.partition("@")
            if base in self.instances and r.isdigit() and int(r) in self.instances[base]:
                return [dep]
            raise self.doc.error(f"unknown op instance {dep!r}", loc)
        if dep not in self.instances:
            raise self.doc.error(f"unknown op {dep!r} in deps", loc)
        inst = self.instances[dep]
        mine = [inst[r] for r in ranks if r in inst]
        if mine:
            return mine
        if len(inst) == 1:
            return list(inst.values())
        raise self.doc.error(
            f"{dep!r} runs on several ranks, none of them this op's; name one as {dep}@RANK", loc
        )

    def deps(self, o: TraceOpSpec, ranks: list[int], loc: tuple) -> tuple[str, ...]:
        """All dependencies of op `o` on `ranks`, resolved."""
        return tuple(d for dep in o.deps for d in self.resolve(dep, ranks, loc))


class _Transfers:
    """Sends and recvs by (sender, receiver), in file order, to be paired into transfers."""

    def __init__(self) -> None:
        self.sends: dict[tuple[int, int], list[Op]] = {}
        self.recvs: dict[tuple[int, int], list[tuple[str, list[str]]]] = {}
        self.alias: dict[str, str] = {}  # recv instance id -> its send's id
        self.index: dict[str, int] = {}  # op instance id -> index of its op in the file
        #: every op instance of each (rank, stream) in file order, recvs at their own place
        self.order: dict[tuple[int, str], list[tuple[str, int]]] = {}

    def place(self, rank: int, stream: str, iid: str, index: int) -> None:
        self.order.setdefault((rank, stream), []).append((iid, index))
        self.index[iid] = index

    def check_deadlock(self, ops: list[Op], spec: TraceSpec, doc: Document) -> None:
        """Raise if a send waits, in file order on its rank, for a transfer that waits for it.

        The simulation places a transfer at its send's position on both ranks; a recv
        written before the send its peer waits on is a deadlock the real program would
        have, so it is an error rather than something the simulation quietly resolves.
        """
        g = nx.DiGraph()
        for op in ops:
            g.add_edges_from((d, op.id) for d in op.deps)
        where: dict[str, int] = {}
        for seq in self.order.values():
            ids = [(self.alias.get(iid, iid), i) for iid, i in seq]
            for (a, _), (b, _) in zip(ids, ids[1:], strict=False):
                if a != b:
                    g.add_edge(a, b)
            for iid, i in ids:
                where.setdefault(iid, i)
        if nx.is_directed_acyclic_graph(g):
            return
        cycle = [u for u, _ in nx.find_cycle(g)]
        first = min((where[u] for u in cycle if u in where), default=0)
        raise doc.error(
            "send/recv deadlock: " + " -> ".join(cycle) + f" -> {cycle[0]} wait for each other "
            "in file order (post each recv after the send its peer waits for)",
            ("ops", first),
        )

    def pair(self, ops: list[Op], doc: Document) -> None:
        """Merge the n-th recv from a to b into the n-th send: the send waits for the recv's
        deps too, and deps on the recv become deps on the send."""
        alias: dict[str, str] = {}
        for key, sends in self.sends.items():
            recvs = self.recvs.pop(key, [])
            if len(recvs) != len(sends):
                raise doc.error(
                    f"{len(sends)} send(s) from rank {key[0]} to {key[1]} but {len(recvs)} matching recv(s)",
                    (
                        "ops",
                        self.index[sends[len(recvs)].id]
                        if len(sends) > len(recvs)
                        else self.index[recvs[len(sends)][0]],
                    ),
                )
            for op, (rid, rdeps) in zip(sends, recvs, strict=False):
                alias[rid] = op.id
                self.alias[rid] = op.id
                op.deps = tuple(dict.fromkeys((*op.deps, *rdeps)))
        if self.recvs:
            (a, b), unmatched = next(iter(self.recvs.items()))
            raise doc.error(
                f"recv on rank {b} from {a} has no matching send", ("ops", self.index[unmatched[0][0]])
            )
        # a recv's id now names its send; rewrite deps
        for op in ops:
            op.deps = tuple(dict.fromkeys(alias.get(d, d) for d in op.deps))


def _build_ops(
    spec: TraceSpec, doc: Document, groups: dict[str, list[int]], refs: _OpRefs
) -> tuple[list[Op], _Transfers]:
    """The ops of the trace in file order (sends in place, recvs set aside for pairing)."""
    ops: list[Op] = []
    transfers = _Transfers()
    for i, o in enumerate(spec.ops):
        loc = ("ops", i)
        if o.kind == "collective":
            op = _collective_op(o, doc, spec.ranks, groups, refs, loc)
            ops.append(op)
            for r in op.ranks:
                transfers.place(r, op.stream, op.id, i)
            continue
        for r, iid in refs.instances[o.id].items():
            transfers.place(r, o.stream or (COMPUTE_STREAM if o.kind == "compute" else COMM_STREAM), iid, i)
            deps = refs.deps(o, [r], (*loc, "deps"))
            if o.kind == "compute":
                ops.append(
                    Op(
                        iid,
                        "compute",
                        (r,),
                        o.stream or COMPUTE_STREAM,
                        deps,
                        o.tag or "compute",
                        duration_s=o.duration,
                        flops=o.flops,
                        bytes_accessed=o.bytes,
                        dtype=o.dtype,
                    )
                )
            elif o.kind == "checkpoint":
                ops.append(
                    Op(
                        iid,
                        "checkpoint",
                        (r,),
                        o.stream or COMM_STREAM,
                        deps,
                        o.tag or "checkpoint",
                        size_bytes=o.size,
                        target=o.target,
                    )
                )
            elif o.kind == "send":
                peer = _peer(o, doc, loc)
                op = _send_op(o, iid, r, peer, deps, spec.ranks, doc, loc)
                transfers.sends.setdefault((r, peer), []).append(op)
                ops.append(op)
            else:  # recv
                peer = _peer(o, doc, loc)
                transfers.recvs.setdefault((peer, r), []).append((iid, list(deps)))
    return ops, transfers


def _peer(o: TraceOpSpec, doc: Document, loc: tuple) -> int:
    """The other rank of send/recv `o`."""
    if o.peer is None:
        raise doc.error(f"a {o.kind} needs a peer", (*loc, "peer"))
    return o.peer


def _send_op(
    o: TraceOpSpec, iid: str, rank: int, peer: int, deps: tuple[str, ...], n: int, doc: Document, loc: tuple
) -> Op:
    """The transfer op of send `o` from `rank` to `peer` (its recv's deps are added when paired)."""
    if peer == rank or not 0 <= peer < n:
        raise doc.error(f"send peer {peer} is not another rank", (*loc, "peer"))
    return Op(
        iid,
        "p2p",
        (rank, peer),
        o.stream or COMM_STREAM,
        deps,
        o.tag or "p2p",
        collective="send_recv",
        group=(rank, peer),
        size_bytes=o.size,
    )


def _collective_op(
    o: TraceOpSpec, doc: Document, n: int, groups: dict[str, list[int]], refs: _OpRefs, loc: tuple
) -> Op:
    """The op of collective `o`: its group, mirrors of the same size, resolved deps."""
    if o.group is None:
        raise doc.error("a collective needs a group", (*loc, "group"))
    grp = _expand(doc, o.group, n, groups, (*loc, "group"))
    mirrors = tuple(tuple(_expand(doc, m, n, groups, (*loc, "mirrors", j))) for j, m in enumerate(o.mirrors))
    for j, m in enumerate(mirrors):
        if len(m) != len(grp):
            raise doc.error(f"mirror group has {len(m)} ranks, the group {len(grp)}", (*loc, "mirrors", j))
    deps = refs.deps(o, grp, (*loc, "deps"))
    return Op(
        o.id,
        "collective",
        tuple(grp),
        o.stream or COMM_STREAM,
        deps,
        o.tag or o.collective or "",
        collective=o.collective,
        group=tuple(grp),
        mirrors=mirrors,
        size_bytes=o.size,
        algorithm=o.algorithm,
    )


def _program_error(message: str, program: StepProgram, spec: TraceSpec, doc: Document) -> InputError:
    """An InputError for `StepProgram.validate`'s complaint; a dependency cycle names the line
    of the cycle's op that comes first in the file (`ops.I`)."""
    if message.startswith("dependency cycle"):
        graph = program.dependency_graph()
        if not nx.is_directed_acyclic_graph(graph):
            index = {o.id: i for i, o in enumerate(spec.ops)}
            members = {str(u) for u, _ in nx.find_cycle(graph)}
            # instance ids are ID@RANK; a recv's instances were merged into their send's
            found = sorted(index[m.partition("@")[0]] for m in members if m.partition("@")[0] in index)
            if found:
                return doc.error(message, ("ops", found[0]))
    return InputError(message, file=doc.path, field="ops")


def load_trace(path: str | Path, gpus: list[str]) -> StepProgram:
    """Read, validate and place a trace file."""
    doc = read_document(path)
    spec = validate(TraceSpec, doc)
    return program_from_trace(spec, doc, gpus)
