"""Model workloads: a model and its parallel layout turned into the step program the engine runs.

```yaml
# workloads/llama3-70b-tp8-pp4-dp32.yaml
name: llama3-70b-tp8-pp4-dp32
model: {file: models/llama3-70b.yaml}          # resolved relative to this file
layout: {tp: 8, pp: 4, dp: 32, global_batch_size: 512, sequence_parallel: true, ...}
fidelity: {representatives: true, mirrors: auto}
```

What one step is, per pipeline rank:
    * its forward and backward tasks in the order of the pipeline schedule (GPipe, 1F1B or
      interleaved 1F1B: `schedule.stage_schedule`);
    * a forward (backward) of one micro-batch on one chunk runs its layers' `layer_program`
      items in order (backward: reversed, with the recompute items of a layer right before
      that layer's backward), plus `embedding_program` on the first virtual stage and
      `output_program` on the last. With uneven stages (`first_stage_layers`,
      `last_stage_layers`) the first and last stage run their own layer counts (with
      interleaving, in their first and last chunk; a chunk may hold only the embedding or
      the output layer); the schedule is unchanged. Stage boundaries are p2p ops of `pp_send_bytes`
      (activations forward, gradients backward) on a stream per direction;
    * how items become ops (fused compute segments, blocking or overlapped communication)
      is `emit`; the gradient reduction and optimizer step after the backward are
      `gradients`; which ranks are simulated and which mirrors their collectives carry is
      `placement`.

The workload file is checked against the model and the cluster (`layout_rules.check_layout`,
`memory.check_memory`) before the program is built.

Simplifies: uniform routing across experts; the forward of the last virtual stage is
followed at once by the output layer's backward (no loss-scaling or logging ops); stage
boundaries carry activations of one fixed size (`pp_send_bytes`). What `emit`,
`gradients` and `placement` simplify is said there.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from pydantic import Field

from simulator.config.base import FileRef, Spec
from simulator.config.loader import Document, read_document, validate
from simulator.errors import InputError
from simulator.network.topology import Topology, resolve
from simulator.units import factor
from simulator.workload.emit import OpEmitter, StageState
from simulator.workload.flops import pp_send_bytes
from simulator.workload.gradients import (
    emit_end_stages_sync,
    emit_gradient_sync,
    emit_param_prefetch,
    syncs_tied_embedding,
)
from simulator.workload.layout import LayoutSpec, stage_layer_counts
from simulator.workload.layout_rules import check_layout
from simulator.workload.memory import check_memory
from simulator.workload.model import ModelSpec, load_model
from simulator.workload.placement import CollectiveGroup, SimulatedRanks, gpus_per_server, server_major_gpus
from simulator.workload.program import StepProgram, comm_op
from simulator.workload.schedule import Task, bubble_fraction, chunk_layers, stage_schedule
from simulator.workload.step_flops import mfu_flops_per_step, step_flops

# ---- the workload file ------------------------------------------------------------------


class FidelitySpec(Spec):
    """How much of the job is simulated rank by rank."""

    representatives: bool = Field(
        True,
        description="Simulate one rank per (pipeline stage, cp, ep position) of one data-parallel "
        "replica at tensor rank 0; the rest load the fabric as mirrors. false: every rank.",
    )
    mirrors: Literal["auto", "all", "leaf"] = Field(
        "auto",
        description="Which mirrors of non-DP collectives are kept: all; leaf (only those touching "
        "the simulated group's leaf groups); auto (all up to 4096 GPUs, else leaf).",
    )
    intra_node: Literal["flow", "analytic"] = Field(
        "flow",
        description="Collectives inside one server: flow (on the fabric like the rest) or analytic "
        "(each solved alone on the fabric; see docs/fidelity.md).",
    )


class WorkloadSpec(Spec):
    """A model workload file: a model, its parallel layout, and the simulation fidelity."""

    name: str | None = Field(None, description="Name shown in results (default: model name and layout).")
    description: str = Field("", description="Free text: what this workload follows.")
    model: FileRef = Field(description="Model file (workloads/models/*.yaml), relative to this file.")
    layout: LayoutSpec = Field(description="Parallel layout and batch (Megatron-LM vocabulary).")
    fidelity: FidelitySpec = Field(default_factory=FidelitySpec, description="Simulation fidelity.")
    causal_skip: bool = Field(
        True,
        description="Attention kernels skip the masked half of causal attention (FlashAttention).",
    )
    memory_overhead_gb: float = Field(
        0.0,
        ge=0,
        description="Per-GPU memory outside the model (CUDA context, allocator), GB; added to the fit check.",
    )


def layout_label(layout: LayoutSpec, model: ModelSpec | None = None) -> str:
    """Short text of a layout, e.g. 'tp8 pp4 dp32 cp1 ep1 sp mbs1 gbs512 1f1b zero1 recompute=selective'.

    Uneven stages add the layers per stage when `model` is given ('layers=7+14x8+7'), else
    the given counts ('first_stage_layers=7 last_stage_layers=7').
    """
    L = layout
    parts = [f"tp{L.tp}", f"pp{L.pp}", f"dp{L.dp}", f"cp{L.cp}", f"ep{L.ep}"]
    if L.sequence_parallel:
        parts.append("sp")
    parts += [f"mbs{L.micro_batch_size}", f"gbs{L.global_batch_size}", L.pp_schedule]
    if L.virtual_stages > 1:
        parts.append(f"v{L.virtual_stages}")
    if L.uneven_stages:
        if model is not None:
            counts = stage_layer_counts(model, L)
            middle = counts[1:-1]
            split = [str(counts[0])] + ([f"{len(middle)}x{middle[0]}"] if middle else [])
            parts.append("layers=" + "+".join([*split, str(counts[-1])]))
        else:
            parts += [
                f"{k}={n}"
                for k, n in (
                    ("first_stage_layers", L.first_stage_layers),
                    ("last_stage_layers", L.last_stage_layers),
                )
                if n is not None
            ]
    parts += [f"zero{L.zero_stage}", f"recompute={L.recompute}"]
    if L.attention != "auto":
        parts.append(f"attention={L.attention}")
    return " ".join(parts)


# ---- one pipeline stage ---------------------------------------------------------------------


def transfer_id(phase: str, mb: int, vs: int, src: int, dst: int) -> str:
    """Id of the p2p op carrying micro-batch `mb` out of virtual stage `vs` (F: forward
    activation to vs+1; B: gradient to vs-1) from rank `src` to rank `dst`."""
    return f"pp.{phase}{mb}.v{vs}@{src}>{dst}"


def emit_stage(em: OpEmitter, s: int, schedule: list[Task]) -> StageState:
    """Emit every op of the simulated ranks of pipeline stage `s`, in schedule order.

    Args:
        em: the emitter holding the program so far.
        s: the pipeline stage.
        schedule: its tasks (`schedule.stage_schedule`).

    Returns:
        The record of the stage's emission, for its gradient reduction.
    """
    L = em.layout
    p, v = L.pp, L.virtual_stages
    ranks = em.ranks.stage_ranks[s]
    layers_of = chunk_layers(em.model, L, s)  # uneven first/last stages hold fewer layers
    st = StageState()
    emit_param_prefetch(em, s, st)  # overlap_param_gather: the weights' all-gather first
    last_vs = p * v - 1
    peers = _Peers(em)
    for phase, mb, c in schedule:
        vs = c * p + s
        deps: dict[int, tuple[str, ...]] = {r: () for r in ranks}
        src_vs = vs - 1 if phase == "F" else vs + 1
        if 0 <= src_vs <= last_vs:  # wait for the transfer from the neighbouring virtual stage
            src_stage = src_vs % p
            for r in ranks:
                deps[r] = (transfer_id(phase, mb, src_vs, peers.rank(r, src_stage), r),)
        if phase == "F":
            _emit_forward(em, ranks, mb, vs, layers_of[vs], deps, st, peers)
        else:
            _emit_backward(em, ranks, mb, vs, layers_of[vs], deps, st, peers)
    return st


class _Peers:
    """The rank of each simulated rank's position in another pipeline stage, and the
    transfer to it (looked up once, used by every micro-batch)."""

    def __init__(self, em: OpEmitter) -> None:
        self.em = em
        self._rank: dict[tuple[int, int], int] = {}
        self._send: dict[tuple[int, int], tuple[int, CollectiveGroup, str]] = {}
        self.send_bytes = pp_send_bytes(em.model, em.layout)

    def rank(self, r: int, stage: int) -> int:
        """The rank at `r`'s dp, tp and cp coordinates in pipeline stage `stage`."""
        got = self._rank.get((r, stage))
        if got is None:
            c = self.em.ranks.coords[r]
            got = self._rank[(r, stage)] = self.em.ranks.grid.rank(dp=c.dp, pp=stage, tp=c.tp, cp=c.cp)
        return got

    def send(self, r: int, dst_stage: int) -> tuple[int, CollectiveGroup, str]:
        """(peer rank, p2p group, stream) of `r`'s transfers to pipeline stage `dst_stage`."""
        got = self._send.get((r, dst_stage))
        if got is None:
            dst = self.rank(r, dst_stage)
            s = self.em.ranks.coords[r].pp
            got = self._send[(r, dst_stage)] = (dst, self.em.ranks.p2p_group(r, dst), f"pp{s}>{dst_stage}")
        return got


def _emit_forward(
    em: OpEmitter,
    ranks: list[int],
    mb: int,
    vs: int,
    layers: list[int],
    deps: dict[int, tuple[str, ...]],
    st: StageState,
    peers: _Peers,
) -> None:
    """Forward of micro-batch `mb` on virtual stage `vs`: embedding on the first, output
    layer forward and backward on the last, else the send to the next virtual stage."""
    L = em.layout
    base = f"F{mb}v{vs}"
    if vs == 0:
        deps = _await_params(ranks, "emb", deps, st)
        deps = em.run_items(ranks, em.end_items("emb", "fwd"), "fwd", base + ".emb", deps, st)
    for i in layers:
        deps = _await_params(ranks, i, deps, st)
        deps = em.run_items(ranks, em.layer_items(i, "fwd"), "fwd", f"{base}.L{i}", deps, st)
    if vs == L.pp * L.virtual_stages - 1:
        deps = _await_params(ranks, "out", deps, st)
        deps = em.run_items(ranks, em.end_items("out", "fwd"), "fwd", base + ".out", deps, st)
        deps = em.run_items(ranks, em.end_items("out", "bwd"), "bwd", base + ".outb", deps, st)
        for r in ranks:
            st.end_bwd[(r, "out")] = (st.pos, st.last_compute[r])
        st.pos += 1
    else:
        _send(em, ranks, "F", mb, vs, (vs + 1) % L.pp, st, deps, peers)


def _await_params(
    ranks: list[int], name: int | str, deps: dict[int, tuple[str, ...]], st: StageState
) -> dict[int, tuple[str, ...]]:
    """`deps` plus the prefetched weight all-gathers of layer (or end) `name`, which only
    its first forward waits for (`overlap_param_gather`; `gradients.emit_param_prefetch`)."""
    if not st.param_gather:
        return deps
    return {r: (*deps.get(r, ()), *st.param_gather.pop((r, name), ())) for r in ranks}


def _emit_backward(
    em: OpEmitter,
    ranks: list[int],
    mb: int,
    vs: int,
    layers: list[int],
    deps: dict[int, tuple[str, ...]],
    st: StageState,
    peers: _Peers,
) -> None:
    """Backward of micro-batch `mb` on virtual stage `vs`, layer by layer (recompute first);
    the embedding on the first virtual stage, else the send to the previous one."""
    L = em.layout
    base = f"B{mb}v{vs}"
    for i in reversed(layers):
        if L.recompute != "none":
            deps = em.run_items(ranks, em.layer_items(i, "recompute"), "recompute", f"{base}.R{i}", deps, st)
        deps = em.run_items(ranks, em.layer_items(i, "bwd"), "bwd", f"{base}.L{i}", deps, st)
        for r in ranks:
            st.last_bwd[(r, i)] = (st.pos, st.last_compute[r])
        st.pos += 1
    if vs == 0:
        deps = em.run_items(ranks, em.end_items("emb", "bwd"), "bwd", base + ".emb", deps, st)
        for r in ranks:
            st.end_bwd[(r, "emb")] = (st.pos, st.last_compute[r])
        st.pos += 1
    else:
        _send(em, ranks, "B", mb, vs, (vs - 1) % L.pp, st, deps, peers)


def _send(
    em: OpEmitter,
    ranks: list[int],
    phase: str,
    mb: int,
    vs: int,
    dst_stage: int,
    st: StageState,
    deps: dict[int, tuple[str, ...]],
    peers: _Peers,
) -> None:
    """The p2p transfers of micro-batch `mb` out of virtual stage `vs` to `dst_stage`."""
    size_bytes = peers.send_bytes
    for r in ranks:
        dst, inst, stream = peers.send(r, dst_stage)
        d = (*deps.get(r, ()), *((st.last_compute[r],) if r in st.last_compute else ()))
        em.ops.append(
            comm_op(
                transfer_id(phase, mb, vs, r, dst),
                "p2p",
                inst.ranks,
                stream,
                tuple(dict.fromkeys(d)),
                "pp",
                "send_recv",
                inst.group,
                inst.mirrors,
                size_bytes,
            )
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the ops are made: a step of a deep pipeline
    allocates millions of objects (ops, ids, dep tuples) that all live on, and each pass of
    the collector over them would be wasted (~10% of the generation of a 1T step). Nothing
    made here is cyclic garbage; no result depends on this."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


# ---- public API ---------------------------------------------------------------------------------


def build_program(
    model: ModelSpec,
    layout: LayoutSpec,
    rank_gpus: list[str],
    graph: nx.Graph,
    fidelity: FidelitySpec | None = None,
    *,
    causal_skip: bool = True,
    name: str | None = None,
) -> StepProgram:
    """The step program of `model` under `layout`, ranks placed on `rank_gpus` (rank r on
    `rank_gpus[r]`; checks are the caller's: see `program_from_workload`)."""
    fidelity = fidelity or FidelitySpec()
    ranks = SimulatedRanks(
        layout, rank_gpus, graph, representatives=fidelity.representatives, mirrors=fidelity.mirrors
    )
    em = OpEmitter(model, layout, ranks, causal_skip)
    tied = syncs_tied_embedding(em)
    first = StageState()
    with _collector_paused():
        for s in range(layout.pp):
            sched = stage_schedule(
                layout.pp_schedule, layout.pp, layout.micro_batches, layout.virtual_stages, s
            )
            st = emit_stage(em, s, sched)
            if not tied or 0 < s < layout.pp - 1:
                emit_gradient_sync(em, s, st)
            elif s == 0:  # its gradients wait for the tied embedding's, known at the last stage
                first = st
            else:
                emit_end_stages_sync(em, first, st)
    tokens = layout.global_batch_size * model.seq_len
    program = StepProgram(
        name or f"{model.name} {layout_label(layout, model)}",
        list(rank_gpus),
        em.ops,
        weight=dict(ranks.weight),
        role={r: ranks.role(r) for r in ranks.simulated},
    )
    program.meta.update(
        {
            "model": model.name,
            "layout": layout_label(layout, model),
            "model_flops_per_step": mfu_flops_per_step(model, tokens),
            "model_flops_formula": "(6·N_matmul + 6·s·a·(d_qk+d_v)·layers)·tokens (PaLM App. B)",
            "hardware_flops_per_step": step_flops(model, layout, causal_skip=causal_skip),
            "tokens_per_step": float(tokens),
            "parameters": float(model.total_params()),
            "dp": float(layout.dp),
            "dtype": model.dtype,
            "micro_batches": float(layout.micro_batches),
            "pipeline_bubble_fraction": bubble_fraction(layout),
            "representatives": "yes" if fidelity.representatives else "no",
            "mirror_scope": ranks.scope,
            "intra_node_fidelity": fidelity.intra_node,
            "ops": float(len(em.ops)),
        }
    )
    return program


def _check_dtypes(program: StepProgram, topology: Topology, model_path: Path, dtype: str) -> None:
    """Every dtype the program computes in has a peak on the GPU; else one line at the model
    file's `dtype` (its line, or the file's first where the default bf16 is taken)."""
    used = sorted({op.dtype for op in program.ops if op.kind == "compute" and op.flops > 0})
    gpu = topology.gpu
    missing = [d for d in used if d not in gpu.peak_flops_per_s]
    if not missing:
        return
    has = sorted(gpu.peak_flops_per_s)
    give = f"give {missing[0]} in the GPU's peak_tflops"
    raise read_document(model_path).error(
        f"the model computes in {', '.join(missing)} (dtype {dtype}), and the GPU {gpu.name!r} has "
        f"no peak FLOP/s for it (it has {', '.join(has) or 'none'}); "
        + (f"compute in one of those or {give}" if has else give),
        ("dtype",),
    )


def program_from_workload(doc: Document, topology: Topology, cluster: Any) -> StepProgram:
    """Validate a model workload file, check it against the cluster, and build its program.

    Raises:
        InputError: naming the workload file, the line and the field (e.g. `layout.tp`), for
            a bad key, a layout the model or cluster cannot take, or a model that does not fit
            in GPU memory.
    """
    spec = validate(WorkloadSpec, doc)
    model = load_model(resolve(doc.path, spec.model.file))
    L = spec.layout
    g = cluster.graph
    gpus = server_major_gpus(g, cluster.gpus)
    if L.world_size > len(gpus):
        raise doc.error(
            f"the layout needs dp·tp·pp·cp = {L.dp}·{L.tp}·{L.pp}·{L.cp} = {L.world_size} GPUs but "
            f"topology {topology.name!r} has {len(gpus)}",
            ("layout", "dp"),
        )
    per_node = gpus_per_server(g, gpus)
    try:
        check_layout(model, L, L.world_size, per_node)
        memory = check_memory(
            model,
            L,
            topology.gpu.hbm_capacity_bytes,
            overhead_bytes=spec.memory_overhead_gb * factor("_gbyte"),
        )
    except InputError as exc:
        loc = tuple(exc.field.split(".")) if exc.field else ("layout",)
        raise doc.error(exc.message, loc) from None
    program = build_program(
        model,
        L,
        gpus[: L.world_size],
        g,
        spec.fidelity,
        causal_skip=spec.causal_skip,
        name=spec.name,
    )
    _check_dtypes(program, topology, resolve(doc.path, spec.model.file), model.dtype)
    peak = max(memory, key=lambda b: b.total_bytes)
    program.meta["peak_memory_bytes"] = peak.total_bytes
    program.meta["peak_memory_stage"] = float(peak.stage)
    program.meta["memory_capacity_bytes"] = topology.gpu.hbm_capacity_bytes
    program.meta["memory_bytes_by_stage"] = {  # type: ignore[assignment]
        f"pp{b.stage}": {k: v for k, v in b.as_dict().items() if k != "stage"} for b in memory
    }
    try:
        program.validate()
    except ValueError as exc:  # a generator bug, not a user mistake; keep the file in the message
        raise InputError(f"generated program is inconsistent: {exc}", file=doc.path) from None
    return program
