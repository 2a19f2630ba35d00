"""Data-parallel gradient reduction and the optimizer step of one pipeline stage.

Models what follows the last backward of a step on the simulated ranks of a stage:
    * Gradients are bucketed (`grad_bucket_bytes`) in the order their last micro-batch's
      backward finishes; a bucket is issued on the dp stream when the last of its layers
      is done (or after the whole backward when `overlap_grad_reduce` is false). Dense
      gradients reduce over dp·cp ranks, routed-expert gradients over (dp/ep)·cp.
    * Gradients travel in their precision (`main_grads`: the model's dtype, or fp32 main
      gradients, twice the bytes of bf16); the weights' all-gather in the weights' dtype.
    * All-reduce (ZeRO 0) or reduce-scatter then, after the optimizer, all-gather of the
      updated weights (ZeRO 1/2; ZeRO 3: embedding and output weights only, the layers'
      gathers and reduce-scatters are per layer, see `emit`). ZeRO-1 with
      `zero1_grad_collective: all_reduce` all-reduces the whole gradient and then gathers
      the updated weights (DeepSpeed's BF16_Optimizer under pipeline parallelism). ZeRO-2
      with `zero2_reduce_per_micro_batch` reduce-scatters every layer after each
      micro-batch's backward (`flops._zero2_reduce`, issued like ZeRO-3's); only the
      embedding and output weights' gradients are left for the end of the step.
    * Tied embeddings with pp > 1: the first stage's input embedding and the last stage's
      copy of it (the output projection) are kept equal by an all-reduce of its gradient
      (vocab·h/tp elements, in the gradients' precision) between the two stages' ranks at
      the same dp, tp and cp coordinates (Megatron-LM `_allreduce_embedding_grads`,
      DeepSpeed's `ReduceTiedGrads`). It runs on the dp stream after both stages' gradient
      buckets (`tied_embedding_sync: after_dp`, Megatron-LM's order) or before them
      (`before_dp`, DeepSpeed's pipeline schedule), and both optimizer steps wait for it
      (`emit_end_stages_sync`).
    * With `overlap_param_gather` (ZeRO 1/2) that all-gather belongs to the next step: one
      step in steady state starts with the all-gather of the previous optimizer's weights,
      in buckets (same element count as the gradient buckets) in the order the forward
      first uses their layers, on the dp stream, and each layer's first forward waits for
      its bucket (`emit_param_prefetch`; Megatron-LM `--overlap-param-gather`, MegaScale
      §3.2). Nothing follows the optimizer.
    * The optimizer step is a memory-bound compute op (mixed-precision Adam, 28 bytes read
      and written per local parameter) after the reduction.

Simplifies: the prefetched buckets are all issued at the step's start and run one after
another on the dp stream (Megatron issues the next bucket from the current one's forward
hook; with one stream the order and overlap are the same); the tied embedding's all-reduce
carries the whole vocab·h/tp gradient whatever the ZeRO stage (Megatron-LM all-reduces the
whole embedding gradient after its distributed optimizer's reduce-scatter; DeepSpeed's
pipeline engine refuses ZeRO-2/3); ZeRO-3 embedding/output weights are
gathered after the optimizer (as ZeRO-1/2 do) rather than before the forward; the
optimizer's FLOPs are a fixed count per parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.workload.emit import OpEmitter, StageState
from simulator.workload.layout import end_rank_params, layer_rank_params, stage_layers, stage_rank_params
from simulator.workload.placement import CollectiveGroup
from simulator.workload.program import COMPUTE_STREAM, Op
from simulator.workload.schedule import chunk_layers

#: Mixed-precision Adam bytes read + written per local parameter in the optimizer step:
#: fp32 master weight, momentum, variance read and written (24), bf16 gradient read (2),
#: bf16 weight written (2).
OPTIMIZER_BYTES_PER_PARAM = 28.0
#: FLOPs per parameter of an Adam update (moments, bias correction, sqrt, divide, update).
OPTIMIZER_FLOPS_PER_PARAM = 12.0


@dataclass(frozen=True)
class _ReadyGradients:
    """Gradients that become final when the last backward of one layer (or end) is done.

    Attributes:
        pos: completion position of that backward in the stage's schedule.
        name: the layer (`L<i>`) or end (`emb`, `out`).
        dense_params: dense parameters of one rank whose gradients are ready.
        expert_params: routed-expert parameters of one rank whose gradients are ready.
        ready_ops: rank -> the compute op after which they are ready.
    """

    pos: int
    name: str
    dense_params: float
    expert_params: float
    ready_ops: dict[int, str]


def emit_gradient_sync(em: OpEmitter, stage: int, st: StageState) -> None:
    """Emit the gradient reduction, optimizer step and weight gathers of pipeline `stage`.

    Args:
        em: the emitter holding the program so far.
        stage: the pipeline stage.
        st: the record of the stage's forward and backward emission.
    """
    emit_optimizer(em, stage, emit_gradient_reduction(em, stage, st))


def emit_gradient_reduction(em: OpEmitter, stage: int, st: StageState) -> list[tuple[str, float]]:
    """Emit the data-parallel gradient buckets of pipeline `stage`; return (group kind,
    weight bytes) of what the weights' all-gather moves after the optimizer (`emit_optimizer`)."""
    ranks = em.ranks.stage_ranks[stage]
    L = em.layout
    ready = _ready_gradients(em, stage, st, with_layers=not L.reduces_layers_per_micro_batch)
    last_ops = {r: st.last_compute[r] for r in ranks}
    gathers = _reduce_gradients(em, stage, ready, last_ops)
    if L.zero_stage == 2 and L.reduces_layers_per_micro_batch:
        # the layers were reduced per micro-batch; the updated weights are gathered whole
        gathers = _weight_buckets(em, _ready_gradients(em, stage, st, with_layers=True))
    return gathers


def emit_optimizer(em: OpEmitter, stage: int, gathers: list[tuple[str, float]]) -> None:
    """Emit the optimizer step of pipeline `stage` (after everything on its ranks' dp
    streams) and, ZeRO 1-3, the all-gather of the updated weights `gathers`."""
    optimizer_ops = _optimizer_step(em, stage)
    if em.layout.zero_stage >= 1 and not prefetches_params(em):
        _gather_weights(em, stage, gathers, optimizer_ops)


def syncs_tied_embedding(em: OpEmitter) -> bool:
    """Whether the step all-reduces a tied embedding's gradient between first and last stage."""
    return em.model.tied_embeddings and em.layout.pp > 1


def emit_end_stages_sync(em: OpEmitter, first: StageState, last: StageState) -> None:
    """`emit_gradient_sync` of the first and the last pipeline stage of a tied model (pp > 1):
    both stages' gradient buckets, the tied embedding's all-reduce before or after them
    (`tied_embedding_sync`), then both optimizer steps, which wait for it."""
    before = em.layout.tied_embedding_sync == "before_dp"
    if before:
        _tied_embedding_all_reduce(em, first, last)
    gathers = [emit_gradient_reduction(em, stage, st) for stage, st in ((0, first), (em.layout.pp - 1, last))]
    if not before:
        _tied_embedding_all_reduce(em, first, last)
    for stage, stage_gathers in zip((0, em.layout.pp - 1), gathers, strict=True):
        emit_optimizer(em, stage, stage_gathers)


def _tied_embedding_all_reduce(em: OpEmitter, first: StageState, last: StageState) -> None:
    """Emit the all-reduce of the tied embedding's gradient between the first and the last
    pipeline stage (see the module docstring) on the ranks' dp streams.

    One op per simulated first-stage rank and its peer at the same dp, tp and cp
    coordinates in the last stage (those pairs are the groups, as Megatron-LM's embedding
    groups); the pairs the representatives stand for are its mirrors, kept as a gradient
    collective's are. It waits for the embedding's last backward on the first stage and the
    output layer's on the last.
    """
    L, ranks = em.layout, em.ranks
    last_stage = L.pp - 1
    size_bytes = em.model.embedding_params()["input"] / L.tp * L.grad_element_bytes(em.model.element_bytes)
    for r in ranks.stage_ranks[0]:
        c = ranks.coords[r]
        peer = ranks.grid.rank(dp=c.dp, pp=last_stage, tp=c.tp, cp=c.cp)
        deps = (first.end_bwd[(r, "emb")][1], last.end_bwd[(peer, "out")][1])
        inst = ranks.p2p_group(r, peer, "dp_cp")
        em.collective(inst, "all_reduce", size_bytes, deps, "dp", "dp", "tied_embedding_grad")


def prefetches_params(em: OpEmitter) -> bool:
    """Whether the weights' all-gather is prefetched under the forward (ZeRO 1/2 only)."""
    return em.layout.overlap_param_gather and em.layout.zero_stage in (1, 2)


def _end_parts(em: OpEmitter, stage: int) -> dict[str, float]:
    """Dense parameters of one rank of `stage` outside its layers: "emb" (input embedding
    and positions, first stage) and "out" (final norm, output projection, tied copy)."""
    ends = end_rank_params(em.model, em.layout, stage)
    emb = em.model.embedding_params()
    first_part = (emb["input"] / em.layout.tp + emb["position"]) if stage == 0 else 0.0
    return {"emb": first_part, "out": ends.dense - first_part}


def emit_param_prefetch(em: OpEmitter, stage: int, st: StageState) -> None:
    """`overlap_param_gather`: emit the all-gather of the stage's weights at the step's
    start, in buckets in forward order, and record in `st.param_gather` which gather each
    layer's (and the embedding's / output's) first forward waits for. No-op otherwise.
    """
    if not prefetches_params(em):
        return
    L, model = em.layout, em.model
    ends = _end_parts(em, stage)
    order: list[tuple[int | str, float, float]] = [("emb", ends["emb"], 0.0)]
    for layers in chunk_layers(model, L, stage).values():
        for i in layers:
            w = layer_rank_params(model, L, i)
            order.append((i, w.dense, w.expert))
    order.append(("out", ends["out"], 0.0))
    grad_bytes = L.grad_element_bytes(model.element_bytes)
    sizes = {"dp_cp": L.dp * L.cp, "edp": L.edp * L.cp}
    ranks = em.ranks.stage_ranks[stage]
    for g, group_kind in enumerate(("dp_cp", "edp")):
        if sizes[group_kind] <= 1:
            continue
        insts = em.ranks.groups_of(group_kind)
        pending: list[int | str] = []
        params = 0.0
        for k, (name, *counts) in enumerate(order):
            if counts[g] > 0:
                pending.append(name)
                params += counts[g]
            if pending and (params * grad_bytes >= L.grad_bucket_bytes or k == len(order) - 1):
                _prefetch_bucket(em, ranks, insts, group_kind, params * model.element_bytes, pending, st)
                pending, params = [], 0.0


def _prefetch_bucket(
    em: OpEmitter,
    ranks: list[int],
    insts: dict[int, CollectiveGroup],
    group_kind: str,
    size_bytes: float,
    names: list[int | str],
    st: StageState,
) -> None:
    """One prefetched weight all-gather per collective instance; `names` wait for it."""
    seen: dict[int, str] = {}
    for r in ranks:
        inst = insts[r]
        if id(inst) not in seen:
            base = f"param_prefetch_{group_kind}[{names[0]}..{names[-1]}]"
            seen[id(inst)] = em.collective(inst, "all_gather", size_bytes, (), "dp", "dp", base)
        for name in names:
            key = (r, name)
            st.param_gather[key] = (*st.param_gather.get(key, ()), seen[id(inst)])


def _ready_gradients(em: OpEmitter, stage: int, st: StageState, with_layers: bool) -> list[_ReadyGradients]:
    """What becomes ready when, in order of completion of the last micro-batch's backward
    (the layers only `with_layers`; the embedding and output weights always)."""
    L, model = em.layout, em.model
    ranks = em.ranks.stage_ranks[stage]
    r0 = ranks[0]
    ready: list[_ReadyGradients] = []
    if with_layers:
        for i in stage_layers(model, L, stage):
            pos, _ = st.last_bwd[(r0, i)]
            w = layer_rank_params(model, L, i)
            ops = {r: st.last_bwd[(r, i)][1] for r in ranks}
            ready.append(_ReadyGradients(pos, f"L{i}", w.dense, w.expert, ops))
    for kind, n in _end_parts(em, stage).items():
        if n > 0 and (r0, kind) in st.end_bwd:
            pos, _ = st.end_bwd[(r0, kind)]
            ready.append(_ReadyGradients(pos, kind, n, 0.0, {r: st.end_bwd[(r, kind)][1] for r in ranks}))
    ready.sort(key=lambda e: e.pos)
    return ready


def _reduce_gradients(
    em: OpEmitter, stage: int, ready: list[_ReadyGradients], last_ops: dict[int, str]
) -> list[tuple[str, float]]:
    """Emit the bucketed gradient reductions (in the gradients' precision, `main_grads`);
    return (group kind, weight bytes) of every bucket, what the weight all-gather moves."""
    L = em.layout
    element_bytes = L.grad_element_bytes(em.model.element_bytes)
    to_weight_bytes = em.model.element_bytes / element_bytes
    reduce_kind = L.grad_reduce_kind
    sizes = {"dp_cp": L.dp * L.cp, "edp": L.edp * L.cp}
    buckets: list[tuple[str, float]] = []
    for group_kind in ("dp_cp", "edp"):
        if sizes[group_kind] <= 1:
            continue
        insts = em.ranks.groups_of(group_kind)
        bucket_bytes, bucket_ops, b = 0.0, {}, 0
        for ev in ready:
            size_bytes = (ev.dense_params if group_kind == "dp_cp" else ev.expert_params) * element_bytes
            if size_bytes <= 0:
                continue
            bucket_bytes += size_bytes
            bucket_ops = ev.ready_ops
            if bucket_bytes >= L.grad_bucket_bytes:
                _bucket(em, stage, insts, group_kind, reduce_kind, bucket_bytes, bucket_ops, last_ops, b)
                buckets.append((group_kind, bucket_bytes * to_weight_bytes))
                bucket_bytes, b = 0.0, b + 1
        if bucket_bytes > 0:
            _bucket(em, stage, insts, group_kind, reduce_kind, bucket_bytes, bucket_ops, last_ops, b)
            buckets.append((group_kind, bucket_bytes * to_weight_bytes))
    return buckets


def _weight_buckets(em: OpEmitter, ready: list[_ReadyGradients]) -> list[tuple[str, float]]:
    """(group kind, weight bytes) of the buckets `_reduce_gradients` would form from `ready`,
    without emitting anything: what the weights' all-gather moves."""
    L = em.layout
    element_bytes = L.grad_element_bytes(em.model.element_bytes)
    sizes = {"dp_cp": L.dp * L.cp, "edp": L.edp * L.cp}
    buckets: list[tuple[str, float]] = []
    for group_kind in ("dp_cp", "edp"):
        if sizes[group_kind] <= 1:
            continue
        params = 0.0
        for ev in ready:
            params += ev.dense_params if group_kind == "dp_cp" else ev.expert_params
            if params > 0 and params * element_bytes >= L.grad_bucket_bytes:
                buckets.append((group_kind, params * em.model.element_bytes))
                params = 0.0
        if params > 0:
            buckets.append((group_kind, params * em.model.element_bytes))
    return buckets


def _bucket(
    em: OpEmitter,
    stage: int,
    insts: dict[int, CollectiveGroup],
    group_kind: str,
    kind: str,
    size_bytes: float,
    ready_ops: dict[int, str],
    last_ops: dict[int, str],
    index: int,
) -> None:
    """Emit bucket `index` of `group_kind` once per collective instance of the stage."""
    seen: set[int] = set()
    for r in em.ranks.stage_ranks[stage]:
        inst = insts[r]
        if id(inst) in seen:
            continue
        seen.add(id(inst))
        if em.layout.overlap_grad_reduce:
            deps = tuple(ready_ops[q] for q in inst.ranks)
        else:
            deps = tuple(last_ops[q] for q in inst.ranks)
        em.collective(inst, kind, size_bytes, deps, "dp", "dp", f"s{stage}.grad_{group_kind}[{index}]")


def _optimizer_step(em: OpEmitter, stage: int) -> dict[int, str]:
    """Emit memory-bound Adam over the local (ZeRO-sharded) parameters; rank -> its op."""
    L = em.layout
    params = stage_rank_params(em.model, L, stage)
    if L.zero_stage >= 1:
        local = params.dense / (L.dp * L.cp) + params.expert / (L.edp * L.cp)
    else:
        local = params.total
    # the Adam step reads the gradients in their precision (2 bf16 bytes counted above)
    grad_extra = L.grad_element_bytes(2) - 2
    optimizer_ops = {}
    for r in em.ranks.stage_ranks[stage]:
        deps = tuple(x for x in (em.last_on.get((r, "dp")),) if x)
        oid = em.op_id(f"opt.s{stage}@{r}")
        em.ops.append(
            Op(
                oid,
                "compute",
                (r,),
                COMPUTE_STREAM,
                deps,
                "optimizer",
                flops=OPTIMIZER_FLOPS_PER_PARAM * local,
                bytes_accessed=(OPTIMIZER_BYTES_PER_PARAM + grad_extra) * local,
                dtype="fp32",
            )
        )
        optimizer_ops[r] = oid
    return optimizer_ops


def _gather_weights(
    em: OpEmitter, stage: int, buckets: list[tuple[str, float]], optimizer_ops: dict[int, str]
) -> None:
    """ZeRO 1-3: all-gather the updated weights of every bucket after the optimizer."""
    for b, (group_kind, size_bytes) in enumerate(buckets):
        insts = em.ranks.groups_of(group_kind)
        seen: set[int] = set()
        for r in em.ranks.stage_ranks[stage]:
            inst = insts[r]
            if id(inst) in seen:
                continue
            seen.add(id(inst))
            em.collective(
                inst,
                "all_gather",
                size_bytes,
                tuple(optimizer_ops[q] for q in inst.ranks),
                "dp",
                "dp",
                f"s{stage}.param_ag_{group_kind}[{b}]",
            )
