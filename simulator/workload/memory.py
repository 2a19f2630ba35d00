"""Memory one GPU needs to train a model under a parallel layout, and a fit check.

Models, per rank of each pipeline stage (the ranks of one stage are alike):
    * weights, gradients and optimizer states of mixed-precision Adam: 16 bytes per
      parameter before sharding (ZeRO paper, Rajbhandari et al. 2020, §3.1: 2 bf16 weight +
      2 bf16 gradient + 4 fp32 master weight + 4 fp32 momentum + 4 fp32 variance). ZeRO
      stage 1 divides the 12 optimizer bytes by the data-parallel degree, stage 2 also the
      2 gradient bytes, stage 3 (FSDP) also the 2 weight bytes. The degree is dp·cp for
      dense parameters and (dp/ep)·cp for routed experts (their replica groups). fp32 main
      gradients (`main_grads: fp32`, Megatron-LM's default for bf16) take 4 gradient bytes.
    * activations by Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
      Transformer Models" (§4): per layer and micro-batch `s·b·h·(34 + 5·a·s/h)` bytes
      without parallelism; with tensor parallelism `s·b·h·(10 + 24/t + 5·a·s/(h·t))`; with
      sequence parallelism everything divides by t; selective recomputation drops the
      `5·a·s/h` attention-score terms, and so does a fused attention kernel
      (`layout.attention` flash2, flash3, or auto, which is always one of them: the s×s
      scores stay on chip, Dao et al. 2022 §3.1), so they count only for `unfused`
      attention without recomputation; full recomputation keeps only the layer input
      `2·s·b·h` (÷t with SP). We compute the same breakdown term by term so it extends to
      GQA, gated MLPs, MoE and MLA, and equals the paper's formula for a GPT block with
      dropout (`ModelSpec.dropout`). Stages multiply by their in-flight micro-batches
      (`schedule.in_flight_micro_batches`: 1F1B's first stage holds pp). Each stage counts
      its own layers (`layout.stage_layers`), so uneven first/last stages differ.
    * communication buffers (an estimate, see `comm_buffer_bytes`).

Simplifies: no allocator fragmentation, CUDA context or NCCL channel buffers (add them as
`overhead_bytes`); with full recomputation one layer's full activations are added as the
working set of the layer being recomputed; routed-expert inputs/outputs are held whole by
every tp rank (gathered for expert tensor parallelism), their intermediates split over
tp; balanced routing (T·top_k expert tokens per rank); FlashAttention's softmax
statistics (fp32, one per query row and head) are ignored. Low-precision training (fp8,
Transformer Engine) keeps the dense GEMMs' inputs for the weight gradient as their cast
(1-byte) copies: the QKV and MLP inputs and the down-projection input take 1 byte, the
out-projection adds a 1-byte copy beside the attention output the kernel keeps in bf16;
routed-expert GEMMs and norms keep the stored dtype.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from simulator.errors import InputError
from simulator.workload.costs import LOW_PRECISION_BYTES
from simulator.workload.layout import (
    LayoutSpec,
    RankGrid,
    kv_heads_per_rank,
    layer_rank_params,
    stage_layers,
    stage_rank_params,
)
from simulator.workload.model import ModelSpec
from simulator.workload.schedule import in_flight_micro_batches

#: Mixed-precision Adam bytes per parameter before sharding (ZeRO paper §3.1).
WEIGHT_BYTES = 2
GRAD_BYTES = 2
OPTIMIZER_BYTES = 12  # fp32 master weight 4 + momentum 4 + variance 4
ADAM_BYTES_PER_PARAM = WEIGHT_BYTES + GRAD_BYTES + OPTIMIZER_BYTES

GB = 1e9


@dataclass(frozen=True)
class MemoryBreakdown:
    """Peak memory of one rank of pipeline stage `stage`, bytes."""

    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    comm_buffers_bytes: float
    overhead_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """Sum of all parts."""
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.comm_buffers_bytes
            + self.overhead_bytes
        )

    def as_dict(self) -> dict[str, float]:
        """Plain dict (with `total_bytes`), e.g. for a DataFrame row."""
        return {**asdict(self), "total_bytes": self.total_bytes}


@dataclass(frozen=True)
class StateBytes:
    """Weights, gradients and optimizer states of one rank, bytes."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float


def model_state_bytes(
    model: ModelSpec,
    layout: LayoutSpec,
    stage: int,
    *,
    weight_bytes: float = WEIGHT_BYTES,
    grad_bytes: float | None = None,
    optimizer_bytes: float = OPTIMIZER_BYTES,
) -> StateBytes:
    """Weights, gradients and Adam states of one rank of `stage`, after ZeRO sharding.

    Gradients are `GRAD_BYTES` per parameter, or 4 with fp32 main gradients
    (`layout.main_grads`: Megatron-LM's 18 bytes per parameter for bf16) unless
    `grad_bytes` is given.
    """
    if grad_bytes is None:
        grad_bytes = layout.grad_element_bytes(GRAD_BYTES)
    params = stage_rank_params(model, layout, stage)
    z = layout.zero_stage
    out = [0.0, 0.0, 0.0]
    for n, d in ((params.dense, layout.dp * layout.cp), (params.expert, layout.edp * layout.cp)):
        out[0] += n * weight_bytes / (d if z >= 3 else 1)
        out[1] += n * grad_bytes / (d if z >= 2 else 1)
        out[2] += n * optimizer_bytes / (d if z >= 1 else 1)
    return StateBytes(*out)


def layer_activation_bytes(
    model: ModelSpec, layout: LayoutSpec, layer_index: int, recompute: str | None = None
) -> float:
    """Activation bytes one rank stores for one block and one micro-batch.

    Korthikanti et al. 2022 term by term (p = bytes per element, masks 1 byte, T = b·s/cp
    tokens, t = tp). Replicated over tp unless sequence-parallel: norm inputs, the QKV and
    MLP input, dropout masks after the out projection and MLP. Split over tp: Q, K, V, the
    out-projection input, MLP intermediates. Attention scores (÷t; only for `unfused`
    attention without recomputation, as fused kernels never write them to HBM): softmax
    output, and with dropout its mask and output. For GPT (ffn = 4h, MHA, dropout)
    this is `T·h·(10 + 24/t) + 5·a·s·T/t` (÷t for the first term with SP).

    Args:
        recompute: none | selective | full; defaults to `layout.recompute`.
    """
    m, L = model, layout
    rc = recompute or L.recompute
    t = L.tp
    sp = L.sequence_parallel and t > 1
    p = m.element_bytes
    mask = 1.0 if m.dropout else 0.0
    b, h = L.micro_batch_size, m.hidden_size
    T = b * m.seq_len / L.cp
    rep_div = t if sp else 1
    if rc == "full":
        return p * T * h / rep_div

    a_t = m.attention_heads / t
    dq, dv = m.qk_head_dim, m.v_head_dim
    kv_r = a_t if m.mla is not None else kv_heads_per_rank(m, t)

    # GEMM inputs kept for the weight gradient: in the GEMM dtype under low precision
    # (Transformer Engine saves the cast copy), else as stored
    q = LOW_PRECISION_BYTES.get(m.dtype, p)
    # attention block
    rep = (p + q) * T * h + mask * T * h  # norm input, QKV input, out-proj dropout mask
    shard = p * T * (a_t * dq + kv_r * dq + kv_r * dv + a_t * dv)  # Q, K, V, attention output
    if q != p:
        shard += q * T * a_t * dv  # out-proj input (its cast copy; the kernel keeps O in bf16)
    if m.mla is not None:
        ranks = m.mla.kv_lora_rank + m.mla.qk_rope_head_dim + (m.mla.q_lora_rank or 0)
        rep += 2 * p * T * ranks  # latent norm inputs and up-projection inputs (replicated)
    scores = b * a_t * (m.seq_len / L.cp) * m.seq_len * (p + mask + (p if m.dropout else 0))

    # MLP block
    rep += (p + q) * T * h + mask * T * h  # norm input, MLP input, dropout mask
    gate = 2 if m.gated_ffn else 1
    if m.is_moe_layer(layer_index):
        moe = m.moe
        if moe is None:  # unreachable: is_moe_layer is False without moe
            raise ValueError("no MoE block")
        k, f = moe.top_k, moe.expert_ffn_hidden_size
        rep += 4.0 * T * moe.experts / rep_div  # fp32 router probabilities
        routed = T * k
        # expert input and output (kept for the weighted combine) are gathered over tp,
        # so each tp rank holds them whole; intermediates are split over tp
        shard += 2 * p * routed * h
        shard += p * routed * (gate * f + f) / t
        if moe.shared_experts:
            fs = moe.shared_experts * moe.shared_ffn
            shard += p * T * (gate * fs + fs) / t
    else:
        f = m.ffn_hidden_size
        shard += (p * gate * f + q * f) * T / t  # activation input, down-projection input
    total = rep / rep_div + shard
    if rc == "none" and L.attention == "unfused":
        total += scores
    return total


def end_activation_bytes(model: ModelSpec, layout: LayoutSpec, stage: int) -> float:
    """Activations outside the blocks per micro-batch: embedding output on the first stage
    (plus its dropout mask), final-norm input and fp32 logits on the last."""
    t = layout.tp
    sp = layout.sequence_parallel and t > 1
    p = model.element_bytes
    T = layout.micro_batch_size * model.seq_len / layout.cp
    h = model.hidden_size
    out = 0.0
    if stage == 0:
        out += (p + (1 if model.dropout else 0)) * T * h / (t if sp else 1)
    if stage == layout.pp - 1:
        out += p * T * h / (t if sp else 1) + 4.0 * T * model.vocab_size / t
    return out


def activation_bytes(model: ModelSpec, layout: LayoutSpec, stage: int) -> float:
    """Peak activations of one rank of `stage`: its layers' activations times the
    micro-batches in flight, plus the stage ends; full recomputation adds one layer's
    full activations (the layer being recomputed)."""
    layers = stage_layers(model, layout, stage)
    per_mb = sum(layer_activation_bytes(model, layout, i) for i in layers)
    per_mb += end_activation_bytes(model, layout, stage)
    total = per_mb * in_flight_micro_batches(layout, stage)
    if layout.recompute == "full" and layers:
        total += max(layer_activation_bytes(model, layout, i, "none") for i in layers)
    return total


def comm_buffer_bytes(model: ModelSpec, layout: LayoutSpec, stage: int) -> float:
    """Estimated communication buffers of one rank of `stage`, bytes.

    Two gradient buckets (the one being reduced and the one filling) when dp·cp > 1;
    ZeRO-3: one layer of gathered weights and the prefetched gather buckets
    (`zero3_prefetch_buckets` × `zero3_gather_bucket_bytes`, at most a layer); TP: one gathered
    activation; CP: two K/V chunks (double buffer); EP: dispatch + combine buffers;
    PP: one send and one receive buffer.
    """
    L, m = layout, model
    p = m.element_bytes
    t = L.tp
    T = L.micro_batch_size * m.seq_len / L.cp
    h = m.hidden_size
    layers = stage_layers(m, L, stage)
    params = stage_rank_params(m, L, stage)
    out = 0.0
    if L.dp * L.cp > 1:
        out += 2 * min(L.grad_bucket_bytes, params.total * GRAD_BYTES)
    if L.zero_stage == 3 and layers:
        layer_bytes = max(layer_rank_params(m, L, i).total for i in layers) * WEIGHT_BYTES
        prefetched = min(layer_bytes, L.zero3_prefetch_buckets * L.zero3_gather_bucket_bytes)
        out += layer_bytes + prefetched
    if t > 1:
        out += p * T * h
    if L.cp > 1:
        kv_r = m.attention_heads / t if m.mla else kv_heads_per_rank(m, t)
        out += 2 * p * T * kv_r * (m.qk_head_dim + m.v_head_dim)
    if m.moe is not None and L.ep > 1 and any(m.is_moe_layer(i) for i in layers):
        out += 2 * p * (T / t) * m.moe.top_k * h
    if L.pp > 1:
        out += 2 * p * T * h / (t if L.sequence_parallel and t > 1 else 1)
    return out


def rank_memory(
    model: ModelSpec,
    layout: LayoutSpec,
    stage: int,
    *,
    overhead_bytes: float = 0.0,
) -> MemoryBreakdown:
    """Memory breakdown of one rank of pipeline stage `stage`."""
    state = model_state_bytes(model, layout, stage)
    return MemoryBreakdown(
        stage=stage,
        weights_bytes=state.weights_bytes,
        gradients_bytes=state.gradients_bytes,
        optimizer_bytes=state.optimizer_bytes,
        activations_bytes=activation_bytes(model, layout, stage),
        comm_buffers_bytes=comm_buffer_bytes(model, layout, stage),
        overhead_bytes=overhead_bytes,
    )


def memory_per_stage(
    model: ModelSpec, layout: LayoutSpec, *, overhead_bytes: float = 0.0
) -> list[MemoryBreakdown]:
    """`rank_memory` for every pipeline stage."""
    return [rank_memory(model, layout, s, overhead_bytes=overhead_bytes) for s in range(layout.pp)]


def check_memory(
    model: ModelSpec,
    layout: LayoutSpec,
    capacity_bytes: float,
    *,
    overhead_bytes: float = 0.0,
) -> list[MemoryBreakdown]:
    """Check that every rank fits in `capacity_bytes` of GPU memory.

    Returns:
        The breakdown of every stage.

    Raises:
        InputError: naming the first stage that does not fit (its ranks and layer count),
            what it needs by part (the overhead too, when there is one, so the parts add
            up to the total), and the capacity.
    """
    rows = memory_per_stage(model, layout, overhead_bytes=overhead_bytes)
    for r in rows:
        if r.total_bytes > capacity_bytes:
            ranks = RankGrid(layout).stage_ranks(r.stage)
            shown = ", ".join(map(str, ranks[:4])) + (", ..." if len(ranks) > 4 else "")
            n_layers = len(stage_layers(model, layout, r.stage))
            overhead = f", overhead {r.overhead_bytes / GB:.1f}" if r.overhead_bytes else ""
            raise InputError(
                f"{model.name} does not fit: pipeline stage {r.stage} (ranks {shown}) needs "
                f"{r.total_bytes / GB:.1f} GB for its {n_layers} layers (weights "
                f"{r.weights_bytes / GB:.1f}, gradients {r.gradients_bytes / GB:.1f}, "
                f"optimizer {r.optimizer_bytes / GB:.1f}, "
                f"activations {r.activations_bytes / GB:.1f}, buffers "
                f"{r.comm_buffers_bytes / GB:.1f}{overhead}) but a GPU holds {capacity_bytes / GB:.1f} GB; "
                "try more tp/pp, a higher zero_stage or recompute",
                field="layout",
            )
    return rows
