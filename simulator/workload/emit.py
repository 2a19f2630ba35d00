"""Ops of the step program from per-rank cost items: fused compute and placed communication.

Turns the items of one layer (or of the embedding or output layer) from `flops` into ops
of the simulated ranks of one pipeline stage.

Granularity: the compute items between two blocking communications are fused into one
*segment*, emitted as at most three compute ops (GEMMs at the model dtype; attention, the
router and the logits at bf16 when the model trains in fp8; elementwise ops memory-bound)
so the roofline prices compute-bound and memory-bound work apart. Communication placement:
    * TP (all-reduce, or SP all-gather/reduce-scatter) and EP all-to-all are blocking: the
      collective waits for the segment before it, the segment after waits for it (Megatron
      without TP-comm overlap), so their exposure is real.
    * CP ring exchange (modeled as a ring all-gather of the K/V chunks over the cp group:
      cp - 1 steps of one chunk per rank) overlaps the attention core: issued before it,
      awaited after it.
    * ZeRO-3: a layer's parameter all-gather is split into calls of at most
      `zero3_gather_bucket_bytes` on their own stream; the first `zero3_prefetch_buckets`
      calls are issued when the previous layer's compute starts (prefetch), the others
      when it ends, and the layer's compute waits for all of them, so a layer larger than
      the prefetch window has its gathers on the critical path (DeepSpeed's
      stage3_prefetch_bucket_size). The backward gather precedes the layer's recompute
      (or its backward). Gradient reduce-scatters, in calls of at most
      `zero3_reduce_bucket_bytes`, run on the dp stream after the layer's backward and
      nothing but the optimizer waits for them. Every ZeRO-3 call carries
      `zero3_call_overhead_s` of software time.
    * A collective over a group of one rank is left out.

Each fused op carries its items (`Op.kernels`), so the engine prices it kernel by kernel
(`simulator.workload.kernels`) as if they ran back to back.

TP communication overlap (`layout.tp_comm_overlap`):
    * none (default): TP collectives block, as above.
    * t3 (Pati et al., ASPLOS'24): a reduce-scatter / all-reduce starts with the GEMM that
      produces its data (forward: attention output and FC-2 projections; backward: the
      FC-1 and QKV input-gradient GEMMs) and the next segment waits for both; all-gathers
      stay blocking (T3 fuses producer-side collectives only).
    * megatron (`--tp-comm-overlap`): as t3 for reduce-scatters, and each all-gather runs
      under the GEMM segment that consumes it, awaited after that segment.
    Either way the overlapped GEMMs are followed by a `tp_contention` compute op of
    `layout.tp_contention_share` × their FLOPs and bytes: the time the GEMM loses to the
    collective's use of compute units and HBM, a category of its own in the ops frame.
    In every mode, sequence parallelism's backward all-gather of a layer's input
    (`<region>_ag_wgrad`, `flops`) runs under the segment of the GEMMs that read it (their
    dgrad and wgrad), awaited after it, as Megatron-LM's linear layer issues it
    asynchronously; with no overlap mode its contention share is 0.

Simplifies: an overlapped collective may start with its GEMM (ideal fine-grained overlap;
the last chunk's tail is not modelled); the ring exchange of CP is one
all-gather rather than cp - 1 separate steps; the weight gradient of a regathered input
may start before the gather ends (it is awaited after the dgrad and wgrad together).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from simulator.workload.flops import (
    BF16_GEMMS,
    CommCost,
    OpCost,
    Phase,
    embedding_program,
    layer_program,
    output_program,
)
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import ModelSpec
from simulator.workload.placement import CollectiveGroup, SimulatedRanks
from simulator.workload.program import Op, comm_op, compute_op

_LOW_PRECISION = ("fp8", "fp4", "int8")
_CORE = ("attn_score", "attn_softmax", "attn_value")
#: Megatron's f/g collectives entering and leaving a TP region (what TP overlap applies to;
#: not e.g. the vocab-parallel cross-entropy's statistics all-reduce).
_TP_REGION_SUFFIXES = ("_rs", "_ar", "_ag", "_rs_bwd", "_ag_bwd", "_ar_bwd")
_REGATHER_SUFFIX = "_ag_wgrad"  # sequence parallelism's backward all-gather (`flops`)
_TAG = {"tp": "tp", "cp": "cp", "ep": "ep", "dp_cp": "dp", "edp": "dp", "pp": "pp"}


def _is_core(name: str) -> bool:
    """Whether compute item `name` is part of the attention core (recomputed or not)."""
    n = name.removeprefix("recompute_")
    return n.startswith(_CORE)


def _is_zero3_gather(item: OpCost | CommCost) -> bool:
    """Whether `item` is a ZeRO-3 parameter all-gather (forward or backward)."""
    return isinstance(item, CommCost) and item.name.startswith("zero3_gather")


def _is_gradient_reduction(item: CommCost) -> bool:
    """Whether `item` reduces gradients (nothing but the optimizer waits for it)."""
    name = item.name
    return name.startswith("zero3_grad_rs") or (
        item.group in ("dp_cp", "edp") and not name.startswith("zero3_gather")
    )


#: the fused compute ops of a segment: (class, dtype, flops, bytes, kernels) of each
Fused = list[tuple[str, str, float, float, tuple[OpCost, ...]]]
#: one step of a compiled item run (`_compile`): a code, then its operands
Step = tuple


class CommPlan(NamedTuple):
    """How one communication item is issued (the same for every micro-batch)."""

    insts: dict[int, CollectiveGroup]  # simulated rank -> its collective instance
    kind: str  # the collective
    calls: tuple[tuple[float, str], ...]  # (size in bytes, op id suffix) of each call
    overhead_s: float
    tag: str
    stream: str
    prefetch: bool  # a ZeRO-3 gather: its first calls start with the previous compute
    awaited: bool  # the next compute waits for it (not a gradient reduction)


def _latest(last: dict[int, str], ranks: tuple[int, ...]) -> tuple[str, ...]:
    """The ops `last` records for `ranks` (those it has), in rank order."""
    if len(ranks) == 1:
        x = last.get(ranks[0])
        return (x,) if x else ()
    return tuple(x for x in map(last.get, ranks) if x)


@dataclass
class StageState:
    """What the emission of one pipeline stage has recorded so far.

    Attributes:
        last_bwd: (rank, layer) -> (completion position, last compute op of its backward).
        end_bwd: (rank, "emb" | "out") -> the same for the embedding and output layers.
        last_compute: rank -> its latest compute op.
        prev_first: rank -> first compute op of the items run last (ZeRO-3 prefetch point:
            a prefetched gather starts with the previous layer's compute).
        pos: the next completion position.
        param_gather: (rank, layer index or "emb" / "out") -> the prefetched weight
            all-gathers its first forward waits for (`overlap_param_gather`; consumed there).
    """

    last_bwd: dict[tuple[int, int], tuple[int, str]] = field(default_factory=dict)
    end_bwd: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)
    last_compute: dict[int, str] = field(default_factory=dict)
    prev_first: dict[int, str] = field(default_factory=dict)
    pos: int = 0
    param_gather: dict[tuple[int, int | str], tuple[str, ...]] = field(default_factory=dict)


class OpEmitter:
    """Writes the ops of the step program, in program order.

    Args:
        model: the model.
        layout: its parallel layout.
        ranks: the simulated ranks and their collective groups.
        causal_skip: attention kernels skip the masked half of causal attention.
    """

    #: segment (ids of its items) -> (its items, kept alive so the ids stay theirs; its fused
    #: ops); made on first use
    _fused: dict[tuple[int, ...], tuple[tuple[OpCost, ...], Fused]] | None = None
    #: rank -> (rank,): the `ranks` of its compute ops, one tuple shared by all of them;
    #: made on first use
    _alone: dict[int, tuple[int]] | None = None

    def __init__(
        self, model: ModelSpec, layout: LayoutSpec, ranks: SimulatedRanks, causal_skip: bool
    ) -> None:
        self.model, self.layout = model, layout
        self.ranks = ranks
        self.causal_skip = causal_skip
        self.ops: list[Op] = []
        self.dtype = model.dtype
        self.attn_dtype = "bf16" if model.dtype in _LOW_PRECISION else model.dtype
        self._item_cache: dict[tuple[str, str], list[OpCost | CommCost]] = {}
        self._n = 0
        L = layout
        self.group_sizes = {"tp": L.tp, "cp": L.cp, "ep": L.ep, "dp_cp": L.dp * L.cp, "edp": L.edp * L.cp}
        #: id of a communication item -> (the item, kept alive; how it is issued)
        self._plans: dict[int, tuple[CommCost, CommPlan]] = {}
        #: id of an item list -> (the list, kept alive; its steps, `_compile`)
        self._runs: dict[int, tuple[list[OpCost | CommCost], list[Step]]] = {}
        #: (rank, stream) -> the latest collective issued there.
        self.last_on: dict[tuple[int, str], str] = {}

    def op_id(self, base: str) -> str:
        """A fresh op id: `base` and a running number."""
        self._n += 1
        return f"{base}#{self._n}"

    def compute(
        self, rank: int, items: list[OpCost], deps: tuple[str, ...], tag: str, base: str
    ) -> tuple[str, str] | None:
        """Fuse `items` into at most three compute ops on `rank`; return the first and the
        last op id (None when nothing is left to compute)."""
        return self.compute_fused(rank, self.fused(items), deps, tag, base)

    def fused(self, items: list[OpCost]) -> Fused:
        """The fused ops of segment `items` (`_fuse`), computed once per segment: items are
        the emitter's cached items, so a segment recurs as the same objects, and each fused
        op's kernel tuple is shared by all its ops."""
        if self._fused is None:
            self._fused = {}
        key = tuple(map(id, items))
        hit = self._fused.get(key)
        if hit is None:
            hit = self._fused[key] = (tuple(items), self._fuse(items))
        return hit[1]

    def compute_fused(
        self, rank: int, fused: Fused, deps: tuple[str, ...], tag: str, base: str
    ) -> tuple[str, str] | None:
        """Emit the fused ops `fused` of a segment on `rank` (see `compute`)."""
        if self._alone is None:
            self._alone = {}
        alone = self._alone.get(rank)
        if alone is None:
            alone = self._alone[rank] = (rank,)
        ops = self.ops
        first = last = None
        for cls, dtype, flops, bytes_accessed, kernels in fused:
            self._n += 1
            oid = f"{base}.{cls}@{rank}#{self._n}"
            ops.append(compute_op(oid, alone, deps, tag, flops, bytes_accessed, dtype, kernels))
            deps = ()
            if first is None:
                first = oid
            last = oid
        return None if first is None or last is None else (first, last)

    def _fuse(self, items: list[OpCost]) -> Fused:
        """The fused ops of a segment: (class, dtype, flops, bytes, kernels) of each class
        with any work, in order of first appearance."""
        classes: dict[tuple[str, str], list[float]] = {}
        kernels: dict[tuple[str, str], list[OpCost]] = {}
        for it in items:
            if it.kind == "attention" or it.name.removeprefix("recompute_") in BF16_GEMMS:
                key = ("mm", self.attn_dtype)
            elif it.kind == "gemm":
                key = ("mm", self.dtype)
            else:
                key = ("mem", self.dtype)
            acc = classes.setdefault(key, [0.0, 0.0])
            acc[0] += it.flops
            acc[1] += it.bytes
            kernels.setdefault(key, []).append(it)
        return [
            (cls, dtype, flops, bytes_accessed, tuple(kernels[(cls, dtype)]))
            for (cls, dtype), (flops, bytes_accessed) in classes.items()
            if flops > 0 or bytes_accessed > 0
        ]

    def collective(
        self,
        inst: CollectiveGroup,
        kind: str,
        size_bytes: float,
        deps: tuple[str, ...],
        tag: str,
        stream: str,
        base: str,
        overhead_s: float = 0.0,
    ) -> str:
        """Emit collective `kind` of `size_bytes` on instance `inst`; return its op id."""
        self._n += 1
        oid = f"{base}@g{inst.group[0]}#{self._n}"
        last_on = self.last_on
        for r in inst.ranks:
            last_on[(r, stream)] = oid
        op_kind = "p2p" if kind == "send_recv" else "collective"
        group, mirrors = inst.group, inst.mirrors
        self.ops.append(
            comm_op(oid, op_kind, inst.ranks, stream, deps, tag, kind, group, mirrors, size_bytes, overhead_s)
        )
        return oid

    def group_size(self, group_kind: str) -> int:
        """Ranks in one group of `group_kind` (1 for a kind the layer items never use)."""
        return self.group_sizes.get(group_kind, 1)

    def end_items(self, end: str, phase: Phase) -> list[OpCost | CommCost]:
        """Items of the embedding (`end` "emb") or output ("out") layer in `phase`, made once
        (the same objects every micro-batch, as `layer_items`)."""
        key = (end, phase)
        items = self._item_cache.get(key)
        if items is None:
            program = embedding_program if end == "emb" else output_program
            items = self._item_cache[key] = list(program(self.model, self.layout, phase))
        return items

    def layer_items(self, layer: int, phase: Phase) -> list[OpCost | CommCost]:
        """Items of block `layer` in `phase`, the CP exchange moved right before the core and
        the ZeRO-3 backward gathers to the front of the layer's backward (of its recompute
        when the layer is recomputed: one gather serves both)."""
        kind: str = self.model.layer_kind(layer)
        if self.layout.zero_stage == 3:
            kind = f"{kind}:{layer}"  # ZeRO-3 gathers depend on the layer's parameters
        key = (kind, phase)
        items = self._item_cache.get(key)
        if items is None:
            items = self._ordered_items(layer, phase)
            self._item_cache[key] = items
        return items

    def _ordered_items(self, layer: int, phase: Phase) -> list[OpCost | CommCost]:
        """`layer_program` items in issue order (see `layer_items`)."""
        items = list(layer_program(self.model, self.layout, layer, phase, causal_skip=self.causal_skip))
        # the CP ring exchange overlaps the attention core: issue it just before the core
        cp = [x for x in items if isinstance(x, CommCost) and x.group == "cp"]
        if cp:
            rest = [x for x in items if x not in cp]
            i = next(
                (k for k, x in enumerate(rest) if isinstance(x, OpCost) and _is_core(x.name)),
                len(rest),
            )
            items = rest[:i] + cp + rest[i:]
        if self.layout.zero_stage != 3 or phase == "fwd":
            return items
        if phase == "bwd":
            gathers = [x for x in items if _is_zero3_gather(x)]
            rest = [x for x in items if not _is_zero3_gather(x)]
            recomputed = self.layout.recompute != "none" and self.layer_items(layer, "recompute")
            return rest if recomputed else gathers + rest
        if not items:
            return items
        bwd = layer_program(self.model, self.layout, layer, "bwd", causal_skip=self.causal_skip)
        return [x for x in bwd if _is_zero3_gather(x)] + items

    def zero3_calls(self, item: CommCost) -> list[float]:
        """Sizes of the calls a ZeRO-3 gather or reduce-scatter item is split into: equal
        calls of at most `zero3_gather_bucket_bytes` / `zero3_reduce_bucket_bytes`."""
        L = self.layout
        bucket = L.zero3_gather_bucket_bytes if _is_zero3_gather(item) else L.zero3_reduce_bucket_bytes
        n = max(1, math.ceil(item.bytes / bucket))
        return [item.bytes / n] * n

    def issue_collective(self, ranks: list[int], item: CommCost, base: str, st: StageState) -> dict[int, str]:
        """Emit communication `item` once per instance over `ranks`; rank -> its (last) op id.

        ZeRO-3 items become `zero3_calls` calls: the first `zero3_prefetch_buckets` gathers
        are issued when the previous layer's compute starts, the others when it ends (the
        layer waits for all); reduce-scatters follow the layer's backward.
        """
        plan = self.comm_plan(item)
        insts = plan.insts
        n_early = self.layout.zero3_prefetch_buckets if plan.prefetch else 0
        seen: dict[int, str] = {}
        out: dict[int, str] = {}
        for r in ranks:
            inst = insts[r]
            key = id(inst)
            if key not in seen:
                early = _latest(st.prev_first, inst.ranks) if n_early else ()
                after = _latest(st.last_compute, inst.ranks)
                for k, (size, suffix) in enumerate(plan.calls):
                    cdeps = early if k < n_early else after
                    seen[key] = self.collective(
                        inst, plan.kind, size, cdeps, plan.tag, plan.stream, base + suffix, plan.overhead_s
                    )
            out[r] = seen[key]
        return out

    def comm_plan(self, item: CommCost) -> CommPlan:
        """How `item` is issued (`issue_collective`), worked out once per item."""
        got = self._plans.get(id(item))
        if got is not None:
            return got[1]
        kind, size_bytes = item.collective, item.bytes
        if item.group == "cp":  # ring exchange of K/V chunks = ring all-gather of cp chunks
            kind, size_bytes = "all_gather", item.bytes * self.layout.cp
        prefetch = _is_zero3_gather(item)
        zero3 = prefetch or item.name.startswith("zero3_grad_rs")
        sizes = self.zero3_calls(item) if zero3 else [size_bytes]
        suffixes = [f".{item.name}" + (f"[{k}]" if len(sizes) > 1 else "") for k in range(len(sizes))]
        if prefetch:
            stream = "zero"
        elif item.group in ("dp_cp", "edp"):
            stream = "dp"
        else:
            stream = _TAG[item.group]
        plan = CommPlan(
            self.ranks.groups_of(item.group),
            kind,
            tuple(zip(sizes, suffixes, strict=True)),
            self.layout.zero3_call_overhead_s if zero3 else 0.0,
            _TAG[item.group],
            stream,
            prefetch,
            not _is_gradient_reduction(item),
        )
        self._plans[id(item)] = (item, plan)
        return plan

    def run_items(
        self,
        ranks: list[int],
        items: list[OpCost | CommCost],
        tag: str,
        base: str,
        deps: dict[int, tuple[str, ...]],
        st: StageState,
    ) -> dict[int, tuple[str, ...]]:
        """Emit one layer's (or end's) items for every simulated rank of a stage.

        Args:
            ranks: the simulated ranks of the stage.
            items: compute and communication items, in issue order.
            tag: category of the compute ops (fwd, bwd, recompute).
            base: prefix of the op ids.
            deps: per rank, what the next compute must wait for (updated in place).
            st: the stage's emission record (updated).

        Returns:
            `deps` after the items: what the next compute of each rank must wait for.
        """
        got = self._runs.get(id(items))
        if got is None:
            got = self._runs[id(items)] = (items, _compile(self, items))
        run = _ItemRun(self, ranks, tag, base, deps, st)
        run.execute(got[1])
        st.prev_first.update(run.first_op)
        return deps


#: the steps of a compiled item run (`_compile`), each a tuple led by one of these codes
_SEGMENT, _AWAIT, _CONTENTION, _AWAIT_KEPT = range(4)
_ISSUE, _ISSUE_AWAITED, _ISSUE_ASYNC, _ISSUE_CONSUMER, _ISSUE_KEPT = range(4, 9)


def _compile(em: OpEmitter, items: list[OpCost | CommCost]) -> list[Step]:
    """What `OpEmitter.run_items` does with `items`, as steps: the segments, where they are
    cut, which collective is awaited when. It depends on the items and the layout only, not
    on the ranks or the ops emitted before, so it is worked out once per item list.

    Compute items are gathered into a segment until a communication item (or, after a CP
    ring exchange, the first item past the attention core) closes it:
        * blocking (TP, EP, CP all-gather): the next compute waits for the collective;
        * a CP ring exchange overlaps the core and is awaited after it;
        * a gradient reduction is awaited by nothing here;
        * TP overlap (`layout.tp_comm_overlap`): a reduce-scatter or all-reduce is issued
          with the last GEMM of the segment, followed by that GEMM's contention op, and
          awaited after the segment; a Megatron all-gather runs under the next segment, which
          adds its contention op, and is awaited after it.
        * a collective over a group of one rank is left out.
    """
    steps: list[Step] = []
    segment: list[OpCost] = []
    in_core = False
    mode = em.layout.tp_comm_overlap

    def close(part: list[OpCost]) -> None:
        if part:
            steps.append((_SEGMENT, em.fused(part), tuple(x for x in part if x.kind == "gemm")))

    for it in items:
        if isinstance(it, OpCost):
            if in_core and not _is_core(it.name):  # leaving the attention core
                close(segment)
                segment = []
                steps.append((_AWAIT,))
                in_core = False
            segment.append(it)
            continue
        if em.group_sizes.get(it.group, 1) <= 1:
            continue
        if it.name.endswith(_REGATHER_SUFFIX):  # SP's backward regather, under the GEMMs that use it
            close(segment)
            segment = []
            steps.append((_ISSUE_CONSUMER, it))
            continue
        if it.group == "tp" and mode != "none" and it.name.endswith(_TP_REGION_SUFFIXES):
            k = max((i for i, x in enumerate(segment) if x.kind == "gemm"), default=-1)
            if it.collective in ("reduce_scatter", "all_reduce") and k >= 0:
                # the producer GEMM and the collective together (T3; Megatron's reduce-scatter)
                close(segment[:k])
                steps.append((_ISSUE_KEPT, it))
                close([segment[k]])
                steps.append((_CONTENTION, (segment[k],)))
                close(segment[k + 1 :])
                steps.append((_AWAIT_KEPT,))
                segment = []
                continue
            if it.collective == "all_gather" and mode == "megatron":
                close(segment)
                segment = []
                steps.append((_ISSUE_CONSUMER, it))
                continue
        close(segment)
        segment = []
        if it.group == "cp" and em.layout.cp_comm == "ring":
            steps.append((_ISSUE_ASYNC, it))
            in_core = True
        else:
            steps.append((_ISSUE_AWAITED if em.comm_plan(it).awaited else _ISSUE, it))
    close(segment)
    steps.append((_AWAIT,))
    return steps


class _ItemRun:
    """One `OpEmitter.run_items` call: its compiled steps carried out on the stage's ranks,
    and what is awaited later."""

    def __init__(
        self,
        emitter: OpEmitter,
        ranks: list[int],
        tag: str,
        base: str,
        deps: dict[int, tuple[str, ...]],
        st: StageState,
    ) -> None:
        self.emitter, self.ranks, self.tag, self.base = emitter, ranks, tag, base
        self.deps, self.st = deps, st
        self.pending_async: dict[int, tuple[str, ...]] = {}  # CP exchange, awaited after the core
        self.pending_consumer: dict[int, tuple[str, ...]] = {}  # TP all-gather under the next GEMMs
        self.first_op: dict[int, str] = {}

    def execute(self, steps: list[Step]) -> None:
        """Carry out `steps` (`_compile`) on every rank of the run."""
        em, ranks, deps, st = self.emitter, self.ranks, self.deps, self.st
        kept: dict[int, str] = {}
        for step in steps:
            code = step[0]
            if code == _SEGMENT:
                self.segment(step[1], step[2])
            elif code == _AWAIT:
                for r, d in self.pending_async.items():
                    deps[r] = (*deps.get(r, ()), *d)
                self.pending_async = {}
            elif code == _CONTENTION:
                self.contention(step[1])
            elif code == _AWAIT_KEPT:
                for r in ranks:
                    deps[r] = (*deps.get(r, ()), kept[r])
            else:
                issued = em.issue_collective(ranks, step[1], self.base, st)
                if code == _ISSUE_AWAITED:
                    for r in ranks:
                        deps[r] = (*deps.get(r, ()), issued[r])
                elif code == _ISSUE_ASYNC:
                    for r in ranks:
                        self.pending_async[r] = (issued[r],)
                elif code == _ISSUE_CONSUMER:
                    self.pending_consumer = {r: (issued[r],) for r in ranks}
                elif code == _ISSUE_KEPT:
                    kept = issued

    def segment(self, fused: Fused, gemms: tuple[OpCost, ...]) -> None:
        """Emit a compute segment (its fused ops) on every rank; a TP all-gather overlapped
        with it (Megatron, consumer side) adds its contention op and is awaited after."""
        em, deps, last_compute, first_op = self.emitter, self.deps, self.st.last_compute, self.first_op
        for r in self.ranks:
            ids = em.compute_fused(r, fused, deps.get(r, ()), self.tag, self.base)
            if ids is not None:
                first_op.setdefault(r, ids[0])
                last_compute[r] = ids[1]
                deps[r] = ()
        if self.pending_consumer:
            if em.layout.tp_comm_overlap != "none":  # none: only SP's regather, no contention share
                self.contention(gemms)
            for r, d in self.pending_consumer.items():
                deps[r] = (*deps.get(r, ()), *d)
            self.pending_consumer = {}

    def contention(self, gemms: tuple[OpCost, ...]) -> None:
        """The compute/memory contention of a collective overlapped with `gemms`: a compute
        op tagged `tp_contention` of `tp_overlap_contention` × their FLOPs and bytes, priced
        as that share of their time (their kernels, `Op.kernel_scale`), after them on the
        compute stream."""
        share = self.emitter.layout.tp_contention_share
        flops = share * sum(g.flops for g in gemms)
        nbytes = share * sum(g.bytes for g in gemms)
        if flops <= 0 and nbytes <= 0:
            return
        em = self.emitter
        for r in self.ranks:
            oid = em.op_id(f"{self.base}.contention@{r}")
            deps = self.deps.get(r, ())
            em.ops.append(compute_op(oid, (r,), deps, "tp_contention", flops, nbytes, em.dtype, gemms, share))
            self.st.last_compute[r] = oid
            self.deps[r] = ()
