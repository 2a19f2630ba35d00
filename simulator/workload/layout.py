"""Parallel layouts of a training job: degrees, schedules, and where each rank sits.

The task order a schedule implies is `schedule`; this module holds the layout itself,
its rank grid and how layers and parameters are split; the rules a layout must meet to
run a model are `layout_rules.check_layout`.

Models Megatron-LM style 5-D parallelism: data (dp), tensor (tp, optionally with sequence
parallelism), pipeline (pp, optionally interleaved with virtual stages), context (cp) and
expert (ep) parallelism. Following Megatron-Core, ep is *folded into* dp: the world is
`dp·tp·pp·cp` GPUs and the dp ranks of one (tp, cp, pp) slot are split into `ep` expert
ranks times `dp/ep` expert-data-parallel ranks. Dense weights are replicated over dp (and
their gradients reduced over dp·cp, since cp ranks hold the same weights); expert weights
are replicated over the `dp/ep` expert-data-parallel ranks only.

Rank placement: global ranks are laid out by the `placement` order, innermost first
(default "tp,cp,ep,pp,dp": tensor-parallel peers are consecutive ranks, so they share a
node). In the order, `ep` is the expert index inside dp and `dp` the remaining dp/ep
factor; a rank's dp coordinate is `ep + ep_size·(outer dp index)`.

Pipeline stages hold equal numbers of layers unless `first_stage_layers` /
`last_stage_layers` are given (Megatron-LM's `decoder_first_pipeline_num_layers` /
`decoder_last_pipeline_num_layers`): then those stages hold that many and the other stages
split the rest evenly. Llama 3 405B trained 126 layers on 16 stages as 7 + 14×8 + 7, one
layer fewer on the first and last stage to balance the embedding and the output layer
(Dubey et al. 2024, §3.3.2). See `stage_layer_counts`.

With interleaving, uneven stages follow Llama 3: the middle stages' chunks are equal and
the first stage's first chunk and the last stage's last chunk are the lighter ones
(`virtual_stage_layer_counts`).

Simplifies: expert tensor parallelism equals tp (no separate etp); the embedding lives on
the first virtual stage and the output projection on the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from operator import attrgetter
from typing import Literal

from pydantic import Field, field_validator, model_validator

from simulator.errors import FieldError, InputError
from simulator.workload.framework import FrameworkSettings, check_batch
from simulator.workload.model import ModelSpec

DIMS = ("tp", "cp", "ep", "pp", "dp")
#: Group kinds `RankGrid.groups` knows: the five dims, plus `dp_cp` (dense gradient
#: reduction: dp×cp) and `edp` (expert data parallel: the (dp/ep)×cp replicas of one expert
#: shard, where expert gradients are reduced).
GROUP_KINDS = ("tp", "cp", "ep", "pp", "dp", "dp_cp", "edp")


class LayoutSpec(FrameworkSettings):
    """How one model is split over GPUs and batched (Megatron-LM vocabulary)."""

    dp: int = Field(1, ge=1, description="Data-parallel degree (expert parallelism folds into it).")
    tp: int = Field(1, ge=1, description="Tensor-parallel degree.")
    sequence_parallel: bool = Field(
        False,
        description="Megatron sequence parallelism: norms/dropout sharded over tp; TP "
        "all-reduces become reduce-scatter + all-gather.",
    )
    pp: int = Field(1, ge=1, description="Pipeline-parallel degree (stages).")
    pp_schedule: Literal["gpipe", "1f1b", "interleaved_1f1b"] = Field(
        "1f1b", description="Pipeline schedule."
    )
    virtual_stages: int = Field(
        1, ge=1, description="Model chunks per pipeline rank (interleaved_1f1b only; else 1)."
    )
    first_stage_layers: int | None = Field(
        None,
        ge=1,
        description="Transformer layers on the first pipeline stage (Megatron-LM "
        "decoder_first_pipeline_num_layers); null = even split. The other stages split the "
        "rest evenly. With interleaved_1f1b the first stage's first chunk is the lighter one "
        "(Llama 3).",
    )
    last_stage_layers: int | None = Field(
        None,
        ge=1,
        description="Transformer layers on the last pipeline stage (Megatron-LM "
        "decoder_last_pipeline_num_layers); null = even split. The other stages split the "
        "rest evenly. With interleaved_1f1b the last stage's last chunk is the lighter one "
        "(Llama 3).",
    )
    ep: int = Field(1, ge=1, description="Expert-parallel degree; must divide dp.")
    cp: int = Field(1, ge=1, description="Context-parallel degree (ring attention over sequence).")
    micro_batch_size: int = Field(1, ge=1, description="Sequences per micro-batch per rank.")
    global_batch_size: int = Field(
        ge=1,
        description="Sequences per optimizer step over the whole job: at most 16,777,216, and at "
        "most 4,096 micro-batches per pipeline (global_batch_size / (micro_batch_size·dp); framework.py).",
    )
    attention: Literal["auto", "unfused", "flash2", "flash3"] = Field(
        "auto",
        description="Attention kernels: unfused (s×s scores in HBM, Megatron-LM 2021), flash2 or "
        "flash3 (fused); auto = flash3 where the GPU lists it, else flash2.",
    )
    placement: str = Field(
        "tp,cp,ep,pp,dp",
        description="Rank placement order, innermost (fastest-varying) first; a "
        "permutation of tp,cp,ep,pp,dp.",
    )

    @field_validator("placement")
    @classmethod
    def _check_placement(cls, v: str) -> str:
        parts = [p.strip() for p in v.split(",")]
        if sorted(parts) != sorted(DIMS):
            raise ValueError(f"placement {v!r} must be a permutation of {','.join(DIMS)}")
        return ",".join(parts)

    @model_validator(mode="after")
    def _check_schedule(self) -> LayoutSpec:
        """Schedule and overlap settings that contradict each other, each refused at the key
        that asks for the impossible (`FieldError`, so the message names its line)."""
        check_batch(self.global_batch_size, self.micro_batch_size, self.dp)
        if self.pp_schedule == "interleaved_1f1b":
            if self.virtual_stages < 2:
                raise FieldError("interleaved_1f1b needs virtual_stages >= 2", field="pp_schedule")
            if self.pp < 2:
                raise FieldError(
                    f"interleaved_1f1b needs pp >= 2 (pp = {self.pp}): its model chunks pass "
                    "activations between pipeline ranks (Megatron-LM refuses it on one stage)",
                    field="pp_schedule",
                )
        elif self.virtual_stages != 1:
            raise FieldError("virtual_stages > 1 needs pp_schedule interleaved_1f1b", field="virtual_stages")
        if self.tp_comm_overlap == "megatron" and not self.sequence_parallel:
            raise FieldError(
                "tp_comm_overlap megatron needs sequence_parallel (Megatron-LM's rule)",
                field="tp_comm_overlap",
            )
        return self

    @property
    def world_size(self) -> int:
        """GPUs the layout uses: dp·tp·pp·cp (ep folds into dp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step: global_batch / (micro_batch · dp)."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    @property
    def edp(self) -> int:
        """Expert-data-parallel degree: replicas of one expert shard (dp / ep)."""
        return self.dp // self.ep

    @property
    def uneven_stages(self) -> bool:
        """Whether first_stage_layers or last_stage_layers is given."""
        return self.first_stage_layers is not None or self.last_stage_layers is not None

    @property
    def placement_order(self) -> tuple[str, ...]:
        """The placement dims, innermost first."""
        return tuple(self.placement.split(","))


def _fail(message: str, field: str) -> InputError:
    return InputError(message, field=f"layout.{field}")


# ---- rank placement -----------------------------------------------------------------


@dataclass(frozen=True)
class RankCoord:
    """Where one global rank sits. `dp` is the full data-parallel index (0..dp-1); `ep`
    (= dp % ep_size) and `edp` (= dp // ep_size) are its expert split."""

    dp: int
    pp: int
    tp: int
    cp: int
    ep: int
    edp: int


class RankGrid:
    """Maps global ranks to (dp, pp, tp, cp, ep) coordinates and back, and lists groups.

    Args:
        layout: the parallel layout; its `placement` fixes the order of dims.
    """

    def __init__(self, layout: LayoutSpec) -> None:
        self.layout = layout
        self.sizes = {
            "tp": layout.tp,
            "cp": layout.cp,
            "ep": layout.ep,
            "pp": layout.pp,
            "dp": layout.edp,  # the outer dp factor (dp / ep)
        }
        self.order = layout.placement_order
        strides: dict[str, int] = {}
        stride = 1
        for d in self.order:
            strides[d] = stride
            stride *= self.sizes[d]
        self.strides = strides
        self.world_size = stride

    def coords(self, rank: int) -> RankCoord:
        """Coordinates of global `rank`."""
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} outside 0..{self.world_size - 1}")
        idx = {d: (rank // self.strides[d]) % self.sizes[d] for d in DIMS}
        dp = idx["ep"] + self.layout.ep * idx["dp"]
        return RankCoord(dp=dp, pp=idx["pp"], tp=idx["tp"], cp=idx["cp"], ep=idx["ep"], edp=idx["dp"])

    def rank(self, *, dp: int, pp: int, tp: int, cp: int) -> int:
        """Global rank at the given coordinates (ep follows from dp)."""
        L = self.layout
        for name, v, n in (("dp", dp, L.dp), ("pp", pp, L.pp), ("tp", tp, L.tp), ("cp", cp, L.cp)):
            if not 0 <= v < n:
                raise IndexError(f"{name} = {v} outside 0..{n - 1}")
        idx = {"tp": tp, "cp": cp, "pp": pp, "ep": dp % L.ep, "dp": dp // L.ep}
        return sum(idx[d] * self.strides[d] for d in DIMS)

    @cached_property
    def all_coords(self) -> list[RankCoord]:
        """`coords` of every rank, rank 0 first (the same arithmetic, once; do not modify)."""
        s_tp, s_cp, s_ep, s_pp, s_dp = (self.strides[d] for d in DIMS)
        z_tp, z_cp, z_ep, z_pp, z_dp = (self.sizes[d] for d in DIMS)
        ep, out = self.layout.ep, []
        for r in range(self.world_size):
            e, edp = (r // s_ep) % z_ep, (r // s_dp) % z_dp
            out.append(
                RankCoord(e + ep * edp, (r // s_pp) % z_pp, (r // s_tp) % z_tp, (r // s_cp) % z_cp, e, edp)
            )
        return out

    def groups(self, kind: str) -> list[list[int]]:
        """All groups of one kind (see `GROUP_KINDS`), each a sorted list of global ranks.

        `tp`, `cp`, `pp`: ranks differing only in that coordinate. `dp`: same (pp, tp, cp).
        `dp_cp`: same (pp, tp) — where dense gradients are reduced (cp ranks hold the same
        weights). `ep`: same (pp, tp, cp, edp) — the all-to-all group. `edp`: same (pp, tp,
        ep) — the replicas of one expert shard (dp/ep · cp ranks), where expert gradients
        are reduced.
        """
        keys = {
            "tp": ("dp", "pp", "cp"),
            "cp": ("dp", "pp", "tp"),
            "pp": ("dp", "tp", "cp"),
            "dp": ("pp", "tp", "cp"),
            "dp_cp": ("pp", "tp"),
            "ep": ("pp", "tp", "cp", "edp"),
            "edp": ("pp", "tp", "ep"),
        }
        if kind not in keys:
            raise ValueError(f"unknown group kind {kind!r}; expected one of {GROUP_KINDS}")
        out: dict[tuple[int, ...], list[int]] = {}
        key = attrgetter(*keys[kind])  # a tuple: every kind has two keys or more
        for r, c in enumerate(self.all_coords):
            out.setdefault(key(c), []).append(r)
        return sorted(out.values())

    def group_of(self, kind: str, rank: int) -> list[int]:
        """The group of `kind` that holds `rank`."""
        for g in self.groups(kind):
            if rank in g:
                return g
        raise IndexError(f"rank {rank} outside 0..{self.world_size - 1}")

    def stage_ranks(self, stage: int) -> list[int]:
        """All global ranks of pipeline stage `stage`."""
        return [r for r, c in enumerate(self.all_coords) if c.pp == stage]


def stage_layer_counts(model: ModelSpec, layout: LayoutSpec) -> list[int]:
    """Transformer layers each pipeline rank holds (all its chunks), first stage first.

    Even split: `layers / pp` each, and `layers % (pp·virtual_stages) == 0`. With
    `first_stage_layers` and/or `last_stage_layers` (Megatron-LM's
    `decoder_first_pipeline_num_layers` / `decoder_last_pipeline_num_layers`) those stages
    hold the given counts and the layers left split evenly over the other stages, e.g.
    Llama 3 405B on pp 16: 126 = 7 + 14×8 + 7 (Dubey et al. 2024, §3.3.2). How a rank's
    layers split over its chunks is `virtual_stage_layer_counts`.

    Raises:
        InputError: field `layout.pp` for an even split that does not divide;
            `layout.first_stage_layers` (or `last_stage_layers`) when uneven stages are
            asked for with pp < 2, the layers left do not divide evenly over the other
            stages (at least one layer each), or an interleaved split does not fit.
    """
    vs = virtual_stage_layer_counts(model, layout)
    p = layout.pp
    return [sum(vs[c * p + s] for c in range(layout.virtual_stages)) for s in range(p)]


def _uneven_split(model: ModelSpec, L: LayoutSpec) -> list[int]:
    """Per-stage layer counts when first_stage_layers / last_stage_layers are given."""
    first, last = L.first_stage_layers, L.last_stage_layers
    field = "first_stage_layers" if first is not None else "last_stage_layers"
    if L.pp < 2:
        raise _fail(f"{field} needs pp >= 2 (pp = {L.pp} has a single stage)", field)
    given = {s: n for s, n in ((0, first), (L.pp - 1, last)) if n is not None}
    others = L.pp - len(given)
    left = model.layers - sum(given.values())
    shown = " + ".join(
        f"{k} ({n})" for k, n in (("first_stage_layers", first), ("last_stage_layers", last)) if n is not None
    )
    if others == 0:
        if L.virtual_stages > 1:
            raise _fail(
                f"interleaved_1f1b with {shown} needs pp >= 3: the chunk size comes from the "
                "stages in between",
                field,
            )
        if left != 0:
            raise _fail(
                f"with pp = 2, {shown} must equal the {model.layers} layers of {model.name}",
                field,
            )
    elif left < others or left % others:
        raise _fail(
            f"{model.name} has {model.layers} layers; {shown} leave {left} for the other "
            f"{others} stages, which must split them evenly with at least one layer each",
            field,
        )
    middle = left // others if others else 0
    return [given.get(s, middle) for s in range(L.pp)]


def virtual_stage_layer_counts(model: ModelSpec, layout: LayoutSpec) -> list[int]:
    """Transformer layers of every virtual stage (chunk·pp + pipeline rank), in model order.

    Without interleaving a virtual stage is a pipeline rank (`stage_layer_counts`). With
    `virtual_stages` = v and an even split every chunk holds layers / (pp·v) (Megatron).
    With interleaving and uneven stages (Llama 3's layout, Dubey et al. 2024, §3.3.2: "the
    first model chunk on the first stage has only the embedding, and the last model chunk
    on the last stage has only output projection and loss calculation") every chunk of the
    middle stages holds n = (middle stage layers) / v; the first stage's *first* chunk and
    the last stage's *last* chunk take what their stage lacks, so they may hold no layer at
    all. Llama 3 405B on pp 16 with v 8: n = 1, virtual stage 0 and 127 hold none, 126
    layers in all. (Megatron-Core instead spreads `decoder_first_pipeline_num_layers` evenly
    over the first stage's chunks; that is the even case of this rule only.)

    Raises:
        InputError: as `stage_layer_counts`; for interleaving, also when a middle stage's
            layers do not split into v equal chunks, or the first (last) stage holds more
            than v chunks of n or fewer than (v - 1)·n.
    """
    L = layout
    p, v = L.pp, L.virtual_stages
    if not L.uneven_stages:
        if model.layers % (p * v):
            raise _fail(
                f"layers ({model.layers}) of {model.name} must be divisible by "
                f"pp·virtual_stages = {p}·{v} = {p * v}, or give first_stage_layers / "
                "last_stage_layers for uneven stages",
                "pp",
            )
        return [model.layers // (p * v)] * (p * v)
    per_stage = _uneven_split(model, L)
    if v == 1:
        return per_stage
    middle = per_stage[1] if L.first_stage_layers is not None else per_stage[0]
    if middle % v:
        raise _fail(
            f"interleaved_1f1b with virtual_stages = {v}: the {middle} layers of each middle "
            f"stage must split into {v} equal chunks",
            "virtual_stages",
        )
    n = middle // v
    counts = [n] * (p * v)
    for field, stage, vs in (("first_stage_layers", 0, 0), ("last_stage_layers", p - 1, p * v - 1)):
        short = (v - 1) * n
        if getattr(L, field) is not None:
            if not short <= per_stage[stage] <= v * n:
                raise _fail(
                    f"{field} ({per_stage[stage]}) with virtual_stages = {v} and {n} layers per "
                    f"middle chunk must lie in {short}..{v * n} (its other {v - 1} chunks hold "
                    f"{n} each)",
                    field,
                )
            counts[vs] = per_stage[stage] - short
    return counts


def virtual_stage_layers(model: ModelSpec, layout: LayoutSpec, virtual_stage: int) -> range:
    """Layer indices of virtual stage `virtual_stage` = chunk·pp + pipeline rank, in order.

    Without interleaving a virtual stage is a pipeline rank. With interleaving chunk v of
    rank p holds layers `[(v·pp + p)·n, (v·pp + p + 1)·n)` where n = layers /
    (pp·virtual_stages) (Megatron). Uneven stages take consecutive runs of their counts
    (`virtual_stage_layer_counts`).
    """
    n_vs = layout.pp * layout.virtual_stages
    if not 0 <= virtual_stage < n_vs:
        raise IndexError(f"virtual stage {virtual_stage} outside 0..{n_vs - 1}")
    counts = virtual_stage_layer_counts(model, layout)
    start = sum(counts[:virtual_stage])
    return range(start, start + counts[virtual_stage])


def stage_layers(model: ModelSpec, layout: LayoutSpec, stage: int) -> list[int]:
    """Layer indices held by pipeline rank `stage`, in execution order of its chunks
    (`virtual_stage_layers` of chunks stage, pp + stage, ...)."""
    if not 0 <= stage < layout.pp:
        raise IndexError(f"stage {stage} outside 0..{layout.pp - 1}")
    out: list[int] = []
    for v in range(layout.virtual_stages):
        out.extend(virtual_stage_layers(model, layout, v * layout.pp + stage))
    return out


# ---- sharding of parameters ---------------------------------------------------------


@dataclass(frozen=True)
class RankParams:
    """Parameters one rank holds (before ZeRO sharding), split by the group that
    replicates them: `dense` over dp·cp ranks, `expert` (routed experts) over (dp/ep)·cp."""

    dense: float
    expert: float

    @property
    def total(self) -> float:
        """dense + expert."""
        return self.dense + self.expert

    def __add__(self, other: RankParams) -> RankParams:
        return RankParams(self.dense + other.dense, self.expert + other.expert)


def kv_heads_per_rank(model: ModelSpec, tp: int) -> float:
    """KV heads one tp rank holds: kv/tp, or 1 (replicated) when kv < tp."""
    kv = model.n_kv_heads
    return kv / tp if kv >= tp else 1.0


def layer_rank_params(model: ModelSpec, layout: LayoutSpec, layer_index: int) -> RankParams:
    """Parameters of block `layer_index` held by one rank of its stage.

    Sharding (Megatron): Q/KV/out projections, MLP and shared experts split over tp (KV
    replicated when kv_heads < tp); MLA's q_a/kv_a down-projections, norms and the router
    replicated; routed experts split over ep (whole experts) and tp.
    """
    t = layout.tp
    kinds = model.layer_params(layer_index)
    dense = kinds["norms"] + kinds["router"] + (kinds["dense_mlp"] + kinds["shared_experts"]) / t
    for name, n in model.attention_params().items():
        if name in ("q_a", "kv_a"):
            dense += n
        elif name == "kv":
            dense += n * kv_heads_per_rank(model, t) / model.n_kv_heads
        else:
            dense += n / t
    expert = kinds["moe_experts"] / (layout.ep * t)
    return RankParams(dense, expert)


def end_rank_params(model: ModelSpec, layout: LayoutSpec, stage: int) -> RankParams:
    """Embedding/output/final-norm parameters on one rank of `stage` (vocab split over tp).

    The first stage holds the input embedding (and learned positions, replicated); the last
    holds the final norm and the output projection. With tied embeddings and pp > 1 the last
    stage keeps its own copy of the embedding matrix (Megatron), kept equal by an extra
    all-reduce of its gradient between first and last stage.
    """
    emb = model.embedding_params()
    t = layout.tp
    n = 0.0
    if stage == 0:
        n += emb["input"] / t + emb["position"]
    if stage == layout.pp - 1:
        n += model.hidden_size * (2 if model.norm == "layernorm" else 1)
        if model.tied_embeddings:
            n += emb["input"] / t if layout.pp > 1 else 0.0
        else:
            n += emb["output"] / t
    return RankParams(n, 0.0)


def stage_rank_params(model: ModelSpec, layout: LayoutSpec, stage: int) -> RankParams:
    """All parameters one rank of pipeline stage `stage` holds (before ZeRO sharding)."""
    total = end_rank_params(model, layout, stage)
    for i in stage_layers(model, layout, stage):
        total = total + layer_rank_params(model, layout, i)
    return total
