"""Model workloads: a model and its parallel layout turned into the step program the engine runs.

```yaml
# workloads/llama3-70b-tp8-pp4-dp32.yaml
name: llama3-70b-tp8-pp4-dp32
model: {file: models/llama3-70b.yaml}          # resolved relative to this file
layout: {tp: 8, pp: 4, dp: 32, global_batch_size: 512, sequence_parallel: true, ...}
fidelity: {representatives: true, mirrors: auto}
```

What one step is, per pipeline rank (Megatron-LM's schedules, `stage_schedule`):
    * GPipe: all forwards, then all backwards. 1F1B: `p - stage - 1` warm-up forwards,
      then one-forward-one-backward, then the cool-down backwards. Interleaved 1F1B
      (`virtual_stages` = v chunks per rank): Megatron's order of virtual micro-batches
      (chunk `(k // p) % v`, micro-batch `(k // (p·v))·p + k % p`) with warm-up
      `2·(p - stage - 1) + (v - 1)·p`.
    * A forward (backward) of one micro-batch on one chunk runs its layers' `layer_program`
      items in order (backward: reversed, with the recompute items of a layer right before
      that layer's backward), plus `embedding_program` on the first virtual stage and
      `output_program` on the last. With uneven stages (`first_stage_layers`,
      `last_stage_layers`) the first and last stage run their own layer counts; the
      schedule is unchanged. Stage boundaries are p2p ops of `pp_send_bytes`
      (activations forward, gradients backward) on a stream per direction.

Granularity: the compute items between two blocking communications are fused into one
*segment*, emitted as at most three compute ops (GEMMs at the model dtype, attention at
bf16 when the model trains in fp8, elementwise ops memory-bound) so the roofline prices
compute-bound and memory-bound work apart. Communication placement:
    * TP (all-reduce, or SP all-gather/reduce-scatter) and EP all-to-all are blocking: the
      collective waits for the segment before it, the segment after waits for it (Megatron
      without TP-comm overlap), so their exposure is real.
    * CP ring exchange (modeled as a ring all-gather of the K/V chunks over the cp group:
      cp - 1 steps of one chunk per rank) overlaps the attention core: issued before it,
      awaited after it.
    * ZeRO-3 per-layer all-gathers are prefetched one layer ahead (issued when the previous
      layer's compute starts) on their own stream; gradient reduce-scatters run on the dp
      stream after the layer's backward.
    * DP gradient reduction: gradients are bucketed (`grad_bucket_bytes`) in the order
      their last micro-batch's backward finishes; a bucket is issued on the dp stream when
      the last of its layers is done (or after the whole backward when
      `overlap_grad_reduce` is false). All-reduce (ZeRO 0) or reduce-scatter then, after
      the optimizer, all-gather of the updated weights (ZeRO 1/2; ZeRO 3: embedding and
      output weights only). The optimizer step is a memory-bound compute op (mixed-
      precision Adam, 28 bytes read+written per local parameter) after the reduction.

Representatives (`fidelity.representatives`, default true): only one rank per (pipeline
stage, cp position, ep position) of one data-parallel replica at tensor rank 0 is
simulated; `weight` says each stands for tp·dp/ep ranks. Every collective carries
`mirrors`: the same collective of the ranks it stands for, so their traffic loads the
fabric. Mirrors whose traffic stays inside one server holding no simulated rank are left
out (exact when scale-up links are per GPU, as NVSwitch and full meshes are: disjoint
groups share no link, and scale-out traffic does not use them). With `mirrors: leaf` the
mirrors of non-DP collectives (PP, EP, CP, TP across servers) are kept only when they touch a
server in a leaf group (the servers sharing tier-1 switches) of the simulated group's
servers; DP mirrors (the other tensor ranks, which share the NICs) are always kept.
`auto` is `all` up to 4,096 GPUs, else `leaf`.

Simplifies: uniform routing across experts; tied-embedding gradient sync between the first
and last stage is not modeled; ZeRO-3 embedding/output weights are gathered after the
optimizer (as ZeRO-1/2 do) rather than before the forward; TP communication does not
overlap compute.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import networkx as nx
from pydantic import Field

from simulator.config.base import Spec
from simulator.config.loader import Document, validate
from simulator.errors import InputError
from simulator.network.topology import FileRef, Topology, resolve
from simulator.workload.flops import (
    CommCost,
    OpCost,
    embedding_program,
    layer_program,
    mfu_flops_per_step,
    output_program,
    pp_send_bytes,
    step_flops,
)
from simulator.workload.layout import (
    LayoutSpec,
    RankGrid,
    check_layout,
    end_rank_params,
    layer_rank_params,
    stage_layer_counts,
    stage_layers,
    stage_rank_params,
    virtual_stage_layers,
)
from simulator.workload.memory import check_memory
from simulator.workload.model import ModelSpec, load_model
from simulator.workload.program import COMPUTE_STREAM, Op, StepProgram

#: Mixed-precision Adam bytes read + written per local parameter in the optimizer step:
#: fp32 master weight, momentum, variance read and written (24), bf16 gradient read (2),
#: bf16 weight written (2).
OPTIMIZER_BYTES_PER_PARAM = 28.0
#: FLOPs per parameter of an Adam update (moments, bias correction, sqrt, divide, update).
OPTIMIZER_FLOPS_PER_PARAM = 12.0
#: `mirrors: auto` keeps every mirror up to this many GPUs, then caps them to leaf groups.
AUTO_MIRROR_LIMIT_GPUS = 4096

_LOW_PRECISION = ("fp8", "fp4", "int8")
_CORE = ("attn_score", "attn_softmax", "attn_value")
_TAG = {"tp": "tp", "cp": "cp", "ep": "ep", "dp_cp": "dp", "edp": "dp", "pp": "pp"}


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


# ---- schedules -----------------------------------------------------------------------------

Task = tuple[str, int, int]  # ("F" | "B", micro-batch, chunk)


def stage_schedule(schedule: str, p: int, m: int, v: int, stage: int) -> list[Task]:
    """Order of forward/backward tasks of pipeline rank `stage` (Megatron-LM's schedules).

    Args:
        schedule: gpipe | 1f1b | interleaved_1f1b.
        p: pipeline stages; m: micro-batches; v: chunks per rank (1 unless interleaved).
    """
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if schedule == "1f1b":
        w = min(p - stage - 1, m)
        out: list[Task] = [("F", i, 0) for i in range(w)]
        for i in range(m - w):
            out += [("F", w + i, 0), ("B", i, 0)]
        return out + [("B", i, 0) for i in range(m - w, m)]
    if schedule != "interleaved_1f1b":
        raise ValueError(f"unknown schedule {schedule!r}")
    total = m * v

    def mb(k: int) -> int:
        return (k // (p * v)) * p + k % p

    fwd = [("F", mb(k), (k // p) % v) for k in range(total)]
    bwd = [("B", mb(k), v - 1 - (k // p) % v) for k in range(total)]
    w = min(2 * (p - stage - 1) + (v - 1) * p, total)
    out = list(fwd[:w])
    for i in range(total - w):
        out += [fwd[w + i], bwd[i]]
    return out + bwd[total - w :]


def bubble_fraction(layout: LayoutSpec) -> float:
    """Analytic pipeline bubble: bubble time / pipeline time = (p-1)/(v·m + p - 1).

    For 1F1B and GPipe (v = 1) this is (p-1)/(m+p-1) (Narayanan et al. SC'21 §2.2);
    interleaving divides the bubble *time* by v (ibid. §2.2.2).
    """
    p, m, v = layout.pp, layout.micro_batches, layout.virtual_stages
    return (p - 1) / (v * m + p - 1)


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
    return " ".join(parts)


# ---- placement helpers -------------------------------------------------------------------------


def _natural(s: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def server_major_gpus(g: nx.Graph, gpus: Iterable[str]) -> list[str]:
    """GPUs by server (natural order of server names: n2 before n10), then local rank."""
    return sorted(
        gpus,
        key=lambda n: (
            _natural(str(g.nodes[n].get("node", ""))),
            g.nodes[n].get("local_rank", 0),
            _natural(str(n)),
        ),
    )


def gpus_per_server(g: nx.Graph, gpus: list[str]) -> int:
    """GPUs in the server of the first GPU (servers are alike in generated topologies)."""
    first = g.nodes[gpus[0]].get("node")
    return sum(1 for n in gpus if g.nodes[n].get("node") == first)


class _Leaves:
    """Leaf group of each server: the tier-1 switches its NICs (or GPUs) attach to."""

    def __init__(self, g: nx.Graph) -> None:
        self.g = g
        self._by_server: dict[str, frozenset[str]] = {}
        for n, d in g.nodes(data=True):
            if d.get("kind") not in ("nic", "gpu") or "node" not in d:
                continue
            sw = {
                x
                for x in g.neighbors(n)
                if g.nodes[x].get("kind") == "switch" and int(g.nodes[x].get("tier", 1)) == 1
            }
            if sw:
                key = str(d["node"])
                self._by_server[key] = self._by_server.get(key, frozenset()) | sw

    def of(self, server: str) -> frozenset[str]:
        return self._by_server.get(server, frozenset())


# ---- the generator ---------------------------------------------------------------------------


@dataclass
class _Group:
    """A collective instance: simulated members, the whole group, its mirrors."""

    ranks: tuple[int, ...]
    group: tuple[int, ...]
    mirrors: tuple[tuple[int, ...], ...] = ()


@dataclass
class _StageState:
    last_bwd: dict[tuple[int, int], tuple[int, str]] = field(
        default_factory=dict
    )  # (rank, layer) -> (pos, op)
    end_bwd: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)  # (rank, "emb"/"out")
    last_compute: dict[int, str] = field(default_factory=dict)
    prev_first: dict[int, str] = field(default_factory=dict)  # first compute op of the last items run
    pos: int = 0


class _Generator:
    def __init__(
        self,
        model: ModelSpec,
        layout: LayoutSpec,
        rank_gpus: list[str],
        graph: nx.Graph,
        fidelity: FidelitySpec,
        causal_skip: bool,
    ) -> None:
        self.m, self.L = model, layout
        self.rank_gpus = rank_gpus
        self.g = graph
        self.fid = fidelity
        self.causal_skip = causal_skip
        self.grid = RankGrid(layout)
        self.world = layout.world_size
        self.coords = [self.grid.coords(r) for r in range(self.world)]
        L = layout
        if fidelity.representatives:
            self.rep = [self.grid.rank(dp=c.ep, pp=c.pp, tp=0, cp=c.cp) for c in self.coords]
        else:
            self.rep = list(range(self.world))
        self.simulated = sorted(set(self.rep))
        self.sim_set = set(self.simulated)
        self.weight = {r: 0 for r in self.simulated}
        for r in self.rep:
            self.weight[r] += 1
        scope = fidelity.mirrors
        if scope == "auto":
            scope = "all" if self.world <= AUTO_MIRROR_LIMIT_GPUS else "leaf"
        self.scope = scope
        self.server = [str(graph.nodes[gname].get("node", gname)) for gname in rank_gpus]
        self.sim_servers = {self.server[r] for r in self.simulated}
        self._leaves: _Leaves | None = None
        self.ops: list[Op] = []
        self.dtype = model.dtype
        self.attn_dtype = "bf16" if model.dtype in _LOW_PRECISION else model.dtype
        self._groups: dict[str, dict[int, _Group]] = {}
        self._item_cache: dict[tuple[str, str], list[OpCost | CommCost]] = {}
        self._n = 0
        self.last_on: dict[tuple[int, str], str] = {}
        self._p2p: dict[tuple[int, int], _Group] = {}
        self.stage_ranks = {s: [r for r in self.simulated if self.coords[r].pp == s] for s in range(L.pp)}

    # -- groups and mirrors -------------------------------------------------------------
    def leaves(self) -> _Leaves:
        if self._leaves is None:
            self._leaves = _Leaves(self.g)
        return self._leaves

    def _keep_mirror(self, mirror: tuple[int, ...], sim_group: tuple[int, ...], kind: str) -> bool:
        servers = {self.server[r] for r in mirror}
        if len(servers) == 1 and not servers & self.sim_servers:
            return False  # traffic entirely inside a server no simulated rank uses
        if self.scope == "leaf" and kind not in ("dp_cp", "edp"):
            lv = self.leaves()
            mine = {x for r in sim_group for x in lv.of(self.server[r])}
            if not mine:
                return True
            return any(lv.of(s) & mine for s in servers)
        return True

    def groups_of(self, kind: str) -> dict[int, _Group]:
        """Simulated rank -> the collective instance of `kind` it takes part in."""
        got = self._groups.get(kind)
        if got is not None:
            return got
        by_image: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for grp in self.grid.groups(kind):
            g = tuple(grp)
            image = tuple(sorted({self.rep[r] for r in g}))
            by_image.setdefault(image, []).append(g)
        out: dict[int, _Group] = {}
        for gs in by_image.values():
            sims = [g for g in gs if any(r in self.sim_set for r in g)]
            for g in sims:
                mirrors: tuple[tuple[int, ...], ...] = ()
                if len(sims) == 1:
                    mirrors = tuple(x for x in gs if x is not g and self._keep_mirror(x, g, kind))
                inst = _Group(tuple(r for r in g if r in self.sim_set), g, mirrors)
                for r in inst.ranks:
                    out[r] = inst
        self._groups[kind] = out
        return out

    def p2p_group(self, src: int, dst: int) -> _Group:
        """The pipeline transfer src -> dst (simulated ranks) and its mirrors (cached: the same
        for every micro-batch)."""
        got = self._p2p.get((src, dst))
        if got is None:
            got = self._p2p[(src, dst)] = self._p2p_group(src, dst)
        return got

    def _p2p_group(self, src: int, dst: int) -> _Group:
        if not self.fid.representatives:
            return _Group((src, dst), (src, dst))
        cs, cd = self.coords[src], self.coords[dst]
        L = self.L
        mirrors = []
        for edp in range(L.edp):
            dp = cs.ep + L.ep * edp
            for tp in range(L.tp):
                if edp == 0 and tp == 0:
                    continue
                pair = (
                    self.grid.rank(dp=dp, pp=cs.pp, tp=tp, cp=cs.cp),
                    self.grid.rank(dp=dp, pp=cd.pp, tp=tp, cp=cd.cp),
                )
                if self._keep_mirror(pair, (src, dst), "pp"):
                    mirrors.append(pair)
        return _Group((src, dst), (src, dst), tuple(mirrors))

    # -- emission ---------------------------------------------------------------------
    def _id(self, base: str) -> str:
        self._n += 1
        return f"{base}#{self._n}"

    def compute(
        self, rank: int, items: list[OpCost], deps: tuple[str, ...], tag: str, base: str
    ) -> str | None:
        """Fuse `items` into at most three compute ops on `rank`; return the last op id."""
        classes: dict[tuple[str, str], list[float]] = {}
        for it in items:
            if it.kind == "gemm":
                key = ("mm", self.dtype)
            elif it.kind == "attention":
                key = ("mm", self.attn_dtype)
            else:
                key = ("mem", self.dtype)
            acc = classes.setdefault(key, [0.0, 0.0])
            acc[0] += it.flops
            acc[1] += it.bytes
        last = None
        for (cls, dtype), (fl, by) in classes.items():
            if fl <= 0 and by <= 0:
                continue
            oid = self._id(f"{base}.{cls}@{rank}")
            self.ops.append(
                Op(
                    oid,
                    "compute",
                    (rank,),
                    COMPUTE_STREAM,
                    deps,
                    tag,
                    flops=fl,
                    bytes_accessed=by,
                    dtype=dtype,
                )
            )
            deps = ()
            last = oid
        return last

    def collective(
        self,
        inst: _Group,
        kind: str,
        nbytes: float,
        deps: tuple[str, ...],
        tag: str,
        stream: str,
        base: str,
    ) -> str:
        oid = self._id(f"{base}@g{inst.group[0]}")
        for r in inst.ranks:
            self.last_on[(r, stream)] = oid
        op_kind = "p2p" if kind == "send_recv" else "collective"
        self.ops.append(
            Op(
                oid,
                op_kind,
                inst.ranks,
                stream,
                deps,
                tag,
                collective=kind,
                group=inst.group,
                mirrors=inst.mirrors,
                size_bytes=nbytes,
            )
        )
        return oid

    # -- items -------------------------------------------------------------------------
    def layer_items(self, layer: int, phase: str) -> list[OpCost | CommCost]:
        kind: str = self.m.layer_kind(layer)
        if self.L.zero_stage == 3:
            kind = f"{kind}:{layer}"  # ZeRO-3 gathers depend on the layer's parameters
        key = (kind, phase)
        items = self._item_cache.get(key)
        if items is None:
            items = list(layer_program(self.m, self.L, layer, phase, causal_skip=self.causal_skip))  # type: ignore[arg-type]
            # the CP ring exchange overlaps the attention core: issue it just before the core
            cp = [x for x in items if isinstance(x, CommCost) and x.group == "cp"]
            if cp:
                rest = [x for x in items if x not in cp]
                i = next(
                    (k for k, x in enumerate(rest) if isinstance(x, OpCost) and _is_core(x.name)),
                    len(rest),
                )
                items = rest[:i] + cp + rest[i:]
            self._item_cache[key] = items
        return items

    def run_items(
        self,
        ranks: list[int],
        items: list[OpCost | CommCost],
        tag: str,
        base: str,
        deps: dict[int, tuple[str, ...]],
        st: _StageState,
    ) -> dict[int, tuple[str, ...]]:
        """Emit one layer's (or end's) items for every simulated rank of a stage.

        `deps`: per rank, what the next compute must wait for. Returns the same after.
        """
        seg: list[OpCost] = []
        pending_async: dict[int, tuple[str, ...]] = {}
        in_core = False
        first_op: dict[int, str] = {}

        def flush() -> None:
            nonlocal seg
            if not seg:
                return
            for r in ranks:
                oid = self.compute(r, seg, deps.get(r, ()), tag, base)
                if oid is not None:
                    first_op.setdefault(r, oid)
                    st.last_compute[r] = oid
                    deps[r] = ()
            seg = []

        for it in items:
            if isinstance(it, OpCost):
                core = _is_core(it.name)
                if in_core and not core:
                    flush()
                    for r, d in pending_async.items():
                        deps[r] = (*deps.get(r, ()), *d)
                    pending_async = {}
                    in_core = False
                seg.append(it)
                continue
            group_kind = it.group
            n = {
                "tp": self.L.tp,
                "cp": self.L.cp,
                "ep": self.L.ep,
                "dp_cp": self.L.dp * self.L.cp,
                "edp": self.L.edp * self.L.cp,
            }.get(group_kind, 1)
            if n <= 1:
                continue
            flush()
            insts = self.groups_of(group_kind)
            seen: dict[int, str] = {}
            kind, nbytes = it.collective, it.bytes
            if group_kind == "cp":  # ring exchange of K/V chunks = ring all-gather of cp chunks
                kind, nbytes = "all_gather", it.bytes * self.L.cp
            name = it.name
            if name.startswith("zero3_gather"):
                stream = "zero"
            elif group_kind in ("dp_cp", "edp"):
                stream = "dp"
            else:
                stream = _TAG[group_kind]
            for r in ranks:
                inst = insts[r]
                key = id(inst)
                if key in seen:
                    oid = seen[key]
                else:
                    if name.startswith("zero3_gather"):
                        # prefetched one layer ahead: issued when the previous layer's compute starts
                        cdeps = tuple(x for x in (st.prev_first.get(q) for q in inst.ranks) if x)
                    else:
                        cdeps = tuple(x for x in (st.last_compute.get(q) for q in inst.ranks) if x)
                    oid = self.collective(
                        inst, kind, nbytes, cdeps, _TAG[group_kind], stream, f"{base}.{name}"
                    )
                    seen[key] = oid
                if group_kind == "cp":
                    pending_async[r] = (oid,)
                    in_core = True
                elif (
                    name.startswith("zero3_grad_rs")
                    or group_kind in ("dp_cp", "edp")
                    and not name.startswith("zero3_gather")
                ):
                    pass  # gradient reduce-scatter: nothing waits for it but the optimizer
                else:
                    deps[r] = (*deps.get(r, ()), oid)
        flush()
        for r, d in pending_async.items():
            deps[r] = (*deps.get(r, ()), *d)
        st.prev_first.update(first_op)
        return deps

    # -- one stage ------------------------------------------------------------------------
    @staticmethod
    def transfer_id(phase: str, mb: int, vs: int, src: int, dst: int) -> str:
        """Id of the p2p op carrying micro-batch `mb` out of virtual stage `vs` (F: forward
        activation to vs+1; B: gradient to vs-1) from rank `src` to rank `dst`."""
        return f"pp.{phase}{mb}.v{vs}@{src}>{dst}"

    def emit_stage(self, s: int, schedule: list[Task]) -> _StageState:
        """Emit every op of the simulated ranks of pipeline stage `s`, in schedule order."""
        L, m = self.L, self.m
        p, v = L.pp, L.virtual_stages
        ranks = self.stage_ranks[s]
        chunk_layers = {
            c * p + s: list(virtual_stage_layers(m, L, c * p + s)) for c in range(v)
        }  # uneven first/last stages (layout.stage_layer_counts) hold fewer layers
        st = _StageState()
        last_vs = p * v - 1
        send_bytes = pp_send_bytes(m, L)
        for phase, mb, c in schedule:
            vs = c * p + s
            layers = chunk_layers[vs]
            deps: dict[int, tuple[str, ...]] = {r: () for r in ranks}
            src_vs = vs - 1 if phase == "F" else vs + 1
            if 0 <= src_vs <= last_vs:  # wait for the transfer from the neighbouring virtual stage
                src_stage = src_vs % p
                for r in ranks:
                    cr = self.coords[r]
                    src = self.grid.rank(dp=cr.dp, pp=src_stage, tp=cr.tp, cp=cr.cp)
                    deps[r] = (self.transfer_id(phase, mb, src_vs, src, r),)
            base = f"{phase}{mb}v{vs}"
            if phase == "F":
                if vs == 0:
                    deps = self.run_items(
                        ranks, embedding_program(m, L, "fwd"), "fwd", base + ".emb", deps, st
                    )
                for i in layers:
                    deps = self.run_items(ranks, self.layer_items(i, "fwd"), "fwd", f"{base}.L{i}", deps, st)
                if vs == last_vs:
                    deps = self.run_items(ranks, output_program(m, L, "fwd"), "fwd", base + ".out", deps, st)
                    deps = self.run_items(ranks, output_program(m, L, "bwd"), "bwd", base + ".outb", deps, st)
                    for r in ranks:
                        st.end_bwd[(r, "out")] = (st.pos, st.last_compute[r])
                    st.pos += 1
                else:
                    self._send(ranks, "F", mb, vs, (vs + 1) % p, send_bytes, st, deps)
            else:
                for i in reversed(layers):
                    if L.recompute != "none":
                        deps = self.run_items(
                            ranks,
                            self.layer_items(i, "recompute"),
                            "recompute",
                            f"{base}.R{i}",
                            deps,
                            st,
                        )
                    deps = self.run_items(ranks, self.layer_items(i, "bwd"), "bwd", f"{base}.L{i}", deps, st)
                    for r in ranks:
                        st.last_bwd[(r, i)] = (st.pos, st.last_compute[r])
                    st.pos += 1
                if vs == 0:
                    deps = self.run_items(
                        ranks, embedding_program(m, L, "bwd"), "bwd", base + ".emb", deps, st
                    )
                    for r in ranks:
                        st.end_bwd[(r, "emb")] = (st.pos, st.last_compute[r])
                    st.pos += 1
                else:
                    self._send(ranks, "B", mb, vs, (vs - 1) % p, send_bytes, st, deps)
        return st

    def _send(
        self,
        ranks: list[int],
        phase: str,
        mb: int,
        vs: int,
        dst_stage: int,
        nbytes: float,
        st: _StageState,
        deps: dict[int, tuple[str, ...]],
    ) -> None:
        s = vs % self.L.pp
        for r in ranks:
            c = self.coords[r]
            dst = self.grid.rank(dp=c.dp, pp=dst_stage, tp=c.tp, cp=c.cp)
            inst = self.p2p_group(r, dst)
            d = (*deps.get(r, ()), *((st.last_compute[r],) if r in st.last_compute else ()))
            oid = self.transfer_id(phase, mb, vs, r, dst)
            self.ops.append(
                Op(
                    oid,
                    "p2p",
                    inst.ranks,
                    f"pp{s}>{dst_stage}",
                    tuple(dict.fromkeys(d)),
                    "pp",
                    collective="send_recv",
                    group=inst.group,
                    mirrors=inst.mirrors,
                    size_bytes=nbytes,
                )
            )

    # -- data parallel and optimizer -----------------------------------------------------------
    def emit_dp(self, s: int, st: _StageState) -> None:
        L, m = self.L, self.m
        ranks = self.stage_ranks[s]
        p = m.element_bytes
        # what becomes ready when, in order of completion of the last micro-batch's backward
        events: list[tuple[int, str, float, float, dict[int, str]]] = []  # pos, name, dense, expert, ops
        r0 = ranks[0]
        if L.zero_stage != 3:
            for i in stage_layers(m, L, s):
                pos, _ = st.last_bwd[(r0, i)]
                w = layer_rank_params(m, L, i)
                events.append((pos, f"L{i}", w.dense, w.expert, {r: st.last_bwd[(r, i)][1] for r in ranks}))
        ends = end_rank_params(m, L, s)
        emb = m.embedding_params()
        first_part = (emb["input"] / L.tp + emb["position"]) if s == 0 else 0.0
        end_parts = {"emb": first_part, "out": ends.dense - first_part}
        for kind, n in end_parts.items():
            if n > 0 and (r0, kind) in st.end_bwd:
                pos, _ = st.end_bwd[(r0, kind)]
                events.append((pos, kind, n, 0.0, {r: st.end_bwd[(r, kind)][1] for r in ranks}))
        events.sort(key=lambda e: e[0])
        last_ops = {r: st.last_compute[r] for r in ranks}
        reduce_kind = "all_reduce" if L.zero_stage == 0 else "reduce_scatter"
        sizes = {"dp_cp": L.dp * L.cp, "edp": L.edp * L.cp}
        issued: dict[int, list[str]] = {r: [] for r in ranks}
        gathers: list[tuple[str, float]] = []
        for group_kind in ("dp_cp", "edp"):
            if sizes[group_kind] <= 1:
                continue
            insts = self.groups_of(group_kind)
            acc, acc_ops, b = 0.0, {}, 0
            for ev in events:
                nbytes = (ev[2] if group_kind == "dp_cp" else ev[3]) * p
                if nbytes <= 0:
                    continue
                acc += nbytes
                acc_ops = ev[4]
                if acc >= L.grad_bucket_bytes:
                    self._bucket(ranks, insts, group_kind, reduce_kind, acc, acc_ops, last_ops, s, b, issued)
                    gathers.append((group_kind, acc))
                    acc, b = 0.0, b + 1
            if acc > 0:
                self._bucket(ranks, insts, group_kind, reduce_kind, acc, acc_ops, last_ops, s, b, issued)
                gathers.append((group_kind, acc))
        # optimizer: memory-bound Adam over the local (ZeRO-sharded) parameters
        params = stage_rank_params(m, L, s)
        if L.zero_stage >= 1:
            local = params.dense / (L.dp * L.cp) + params.expert / (L.edp * L.cp)
        else:
            local = params.total
        opt_ids = {}
        for r in ranks:
            d = tuple(x for x in (self.last_on.get((r, "dp")),) if x)
            oid = self._id(f"opt.s{s}@{r}")
            self.ops.append(
                Op(
                    oid,
                    "compute",
                    (r,),
                    COMPUTE_STREAM,
                    d,
                    "optimizer",
                    flops=OPTIMIZER_FLOPS_PER_PARAM * local,
                    bytes_accessed=OPTIMIZER_BYTES_PER_PARAM * local,
                    dtype="fp32",
                )
            )
            opt_ids[r] = oid
        if L.zero_stage >= 1:
            for b, (group_kind, nbytes) in enumerate(gathers):
                insts = self.groups_of(group_kind)
                seen: set[int] = set()
                for r in ranks:
                    inst = insts[r]
                    if id(inst) in seen:
                        continue
                    seen.add(id(inst))
                    self.collective(
                        inst,
                        "all_gather",
                        nbytes,
                        tuple(opt_ids[q] for q in inst.ranks),
                        "dp",
                        "dp",
                        f"s{s}.param_ag_{group_kind}[{b}]",
                    )

    def _bucket(self, ranks, insts, group_kind, kind, nbytes, ready_ops, last_ops, s, b, issued) -> None:
        seen: set[int] = set()
        for r in ranks:
            inst = insts[r]
            if id(inst) in seen:
                continue
            seen.add(id(inst))
            if self.L.overlap_grad_reduce:
                deps = tuple(ready_ops[q] for q in inst.ranks)
            else:
                deps = tuple(last_ops[q] for q in inst.ranks)
            oid = self.collective(inst, kind, nbytes, deps, "dp", "dp", f"s{s}.grad_{group_kind}[{b}]")
            for q in inst.ranks:
                issued[q].append(oid)


def _is_core(name: str) -> bool:
    n = name.removeprefix("recompute_")
    return n.startswith(_CORE)


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
    gen = _Generator(model, layout, rank_gpus, graph, fidelity, causal_skip)
    for s in range(layout.pp):
        sched = stage_schedule(layout.pp_schedule, layout.pp, layout.micro_batches, layout.virtual_stages, s)
        st = gen.emit_stage(s, sched)
        gen.emit_dp(s, st)
    tokens = layout.global_batch_size * model.seq_len
    program = StepProgram(
        name or f"{model.name} {layout_label(layout, model)}",
        list(rank_gpus),
        gen.ops,
        weight=dict(gen.weight),
        role={r: _role(layout, gen.coords[r]) for r in gen.simulated},
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
            "mirror_scope": gen.scope,
            "intra_node_fidelity": fidelity.intra_node,
            "ops": float(len(gen.ops)),
        }
    )
    return program


def _role(layout: LayoutSpec, c: Any) -> str:
    parts = [f"pp{c.pp}"]
    if layout.cp > 1:
        parts.append(f"cp{c.cp}")
    if layout.ep > 1:
        parts.append(f"ep{c.ep}")
    return " ".join(parts)


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
            model, L, topology.gpu.hbm_capacity_bytes, overhead_bytes=spec.memory_overhead_gb * 1e9
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
