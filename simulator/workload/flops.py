"""Per-layer, per-micro-batch compute and communication costs of a transformer step.

Models what one rank executes for one micro-batch in one transformer block, in execution
order, as plain records a step-program generator can turn into ops:
`OpCost` (compute: FLOPs and HBM bytes moved) and `CommCost` (a collective or a
point-to-point transfer and its buffer size). Costs are per rank: GEMMs divide by tp,
attention by tp and cp, experts by tp with ep spreading whole experts.

Counting conventions:
    * A GEMM (m×k)·(k×n) is 2·m·n·k FLOPs; its backward is two GEMMs of the same size
      (input gradient `dgrad`, weight gradient `wgrad`). Bias adds are not counted.
    * Attention scores Q·Kᵀ and the value product P·V are 2·b·heads·s_q·s_k·d FLOPs each;
      backward is twice forward. With `causal_skip=True` (default: what FlashAttention-style
      kernels execute) a causal mask halves them (factor 1/2, ignoring the diagonal);
      `causal_skip=False` counts the full s×s matrix as Narayanan et al. (SC'21) eq. 3 does.
    * The attention core depends on `layout.attention` (`attention.attention_core`): fused
      (flash2/flash3/auto: the s×s scores never reach HBM, the ops move only Q, K, V and O)
      or unfused (batched GEMMs and softmax/dropout kernels that write and read the s×s
      scores; the full matrix is computed whatever `causal_skip` says).
    * Norms, activations, residual adds, router top-k, cross-entropy are `elementwise` ops
      costed by bytes (read + write); their FLOPs are a rough few per element and are not
      part of eq. 3 or 6·N.
    * Low-precision training (`model.dtype` fp8/fp4/int8, Transformer Engine style): every
      transformer-layer GEMM casts its operands to the GEMM dtype with a scaling factor
      (`_low_precision_casts`). Forward: the input is written in the low precision twice,
      as is and transposed (TE's cast_transpose; the transposed copy feeds the weight
      gradient), reading the bf16 input unless a norm feeds the GEMM (TE's LayerNormLinear
      writes the cast from the norm kernel: only the two low-precision writes are extra);
      backward: the output gradient is cast and transposed the same way (read bf16, write
      two low-precision copies). The amax reduction rides in the same kernels. Memory-bound
      `elementwise` ops priced by these bytes; their FLOPs are not matmul FLOPs. The router
      and the vocabulary projection stay in bf16 (Megatron runs them outside TE's fp8
      autocast), so they get no casts. The weights' casts happen once per step (TE caches
      them over the micro-batches) and are left out (≤ 3 bytes per parameter per step).
      Under sequence parallelism the all-gathers of such a GEMM's input (forward, and the
      backward's regather below) move the low-precision copy: TE casts the norm's output
      (or the input) and then gathers it (`layernorm_linear.py` / `linear.py`; a quantized
      all-gather in TE 2.x) (`_gathered`). The reduce-scatters, the gathers of the output
      gradient (TE 1.x casts it after gathering) and the logits' input (a bf16 GEMM) move
      the stored dtype; block scales are left out (1/32 of the gathered bytes for MXFP8,
      1/8 for NVFP4: one 1-byte scale per 16 fp4 values).
    * Ring context parallelism (`cp_comm: ring`) with fused kernels runs one kernel per
      ring step and merges their partial outputs and softmax statistics in separate
      memory-bound kernels (Transformer Engine's ring attention): `_cp_merge`.
    * Sequence parallelism keeps a column-parallel layer's input sharded over tp for the
      backward (Korthikanti et al. 2022, §4.2.2: the memory model's 34·s·b·h/t), so the
      backward gathers it again for the weight gradient: one all-gather of the region's
      input (`<region>_ag_wgrad`) just before the backward of the last GEMM that reads it
      (QKV, or MLA's down-projections; FC-1; the shared experts' FC-1; the logits)
      (`_regather_for_wgrad`). Megatron-LM issues it asynchronously under the input-gradient
      GEMM (`megatron/core/tensor_parallel/layers.py`, the linear layer's backward), so the
      program overlaps it with that GEMM segment and awaits it after (`emit`).
    * Collective `bytes` follow the nccl-tests "size" convention: all-reduce: the buffer;
      all-gather: the gathered (output) buffer; reduce-scatter: the full (input) buffer;
      all-to-all: one rank's send buffer; send/recv: one message (`count` messages).

Simplifies: routing is perfectly balanced (each rank's experts see tokens·top_k pairs); with
tp > 1 and no sequence parallelism the tp ranks split the (replicated) tokens for dispatch;
shared experts are TP-sharded like a dense MLP; hidden dropout (when the model trains with
it) is part of the fused residual add (a one-byte mask per element). fp32 main gradients
(`layout.main_grads`) accumulated by a separate kernel add one memory-bound op per layer
and micro-batch to the backward (`_main_grad_accumulation`); the first micro-batch's copy
is priced as an add, and the embedding and output layers' accumulation is left out.
Accumulated in the wgrad GEMM's epilogue (Megatron's fusion) the fp32 read and write of
the output is not priced: those GEMMs are compute-bound by the kernel model's roofline.
ZeRO-2 with `zero2_reduce_per_micro_batch` adds a reduce-scatter of the layer's gradients
(in their precision) after the layer's backward and its fp32 accumulation, every micro-batch
(`_zero2_reduce`). Simplified: the accumulation is still priced on the whole layer, as if the
fp32 gradient were formed whole and then reduce-scattered, not accumulated on the shard.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simulator.workload.attention import attention_core
from simulator.workload.costs import (
    ELEMENTWISE_FLOPS,
    LOW_PRECISION_BYTES,
    CommCost,
    Item,
    OpCost,
    Phase,
)
from simulator.workload.layout import (
    LayoutSpec,
    kv_heads_per_rank,
    layer_rank_params,
)
from simulator.workload.model import ModelSpec

__all__ = [
    "BF16_GEMMS",
    "CommCost",
    "Item",
    "OpCost",
    "Phase",
    "layer_program",
    "embedding_program",
    "output_program",
    "pp_send_bytes",
]


# ---- building blocks ------------------------------------------------------------------


@dataclass(frozen=True)
class _Pair:
    """A forward item and the item that mirrors it in backward (either may be None)."""

    fwd: Item | None
    bwd: list[Item]
    core: bool = False  # part of the attention core (selective recompute redoes it)


class _Ctx:
    """Shapes of one rank for one micro-batch."""

    def __init__(self, model: ModelSpec, layout: LayoutSpec, causal_skip: bool) -> None:
        self.m, self.L = model, layout
        self.t = layout.tp
        self.sp = layout.sequence_parallel and layout.tp > 1
        self.p = model.element_bytes
        self.b = layout.micro_batch_size
        self.s_q = model.seq_len // layout.cp  # queries per sequence on this rank
        self.s_k = model.seq_len  # keys each query sees over the whole cp ring
        self.T = self.b * self.s_q  # tokens of the micro-batch on this tp group
        self.Tn = self.T / self.t if self.sp else float(self.T)  # tokens in norms etc.
        self.h = model.hidden_size
        self.causal = 0.5 if causal_skip else 1.0


def _gemm(c: _Ctx, name: str, m: float, n: float, k: float) -> _Pair:
    """A GEMM (m×k)·(k×n) and its dgrad + wgrad in backward."""
    f = 2.0 * m * n * k
    byts = c.p * (m * k + k * n + m * n)
    mnk = (int(m), int(n), int(k))
    return _Pair(
        OpCost(name, "gemm", f, byts, mnk),
        [
            OpCost(f"{name}_dgrad", "gemm", f, byts, (int(m), int(k), int(n))),
            OpCost(f"{name}_wgrad", "gemm", f, byts, (int(k), int(n), int(m))),
        ],
    )


#: GEMMs that read the attention block's (gathered) input: MLA's down-projections read it too
_ATTENTION_READERS = ("qkv", "q", "q_a", "kv_a")
#: GEMMs whose input a norm produces (TE's LayerNormLinear fuses the cast into the norm).
_NORM_FED = ("qkv", "q", "q_a", "q_b", "kv_a", "kv_b", "mlp_up", "shared_up")
#: GEMMs Megatron keeps in bf16 under fp8 training (no casts).
BF16_GEMMS = ("router", "logits")


def _low_precision_casts(c: _Ctx, pairs: list[_Pair]) -> list[_Pair]:
    """`pairs` with each GEMM preceded by its low-precision casts (module docstring).

    Per GEMM (m×k)·(k×n), with `q` the low-precision bytes per element and `p` the stored
    (bf16) bytes: forward `(p + 2q)·m·k` bytes (`2q·m·k` when a norm feeds it), backward
    `(p + 2q)·m·n` (under sequence parallelism the copies are of the gathered input, the
    one the GEMM reads). bf16 (or wider) training returns `pairs` unchanged.
    """
    q = LOW_PRECISION_BYTES.get(c.m.dtype)
    if q is None:
        return pairs
    out: list[_Pair] = []
    for pair in pairs:
        g = pair.fwd
        if isinstance(g, OpCost) and g.kind == "gemm" and g.gemm is not None and g.name not in BF16_GEMMS:
            m, n, k = g.gemm
            fwd_bytes = (2 * q if g.name in _NORM_FED else c.p + 2 * q) * m * k
            cast = OpCost(f"{g.name}_cast", "elementwise", ELEMENTWISE_FLOPS * m * k, fwd_bytes)
            grad = (c.p + 2 * q) * m * n
            cast_bwd = OpCost(f"{g.name}_cast_bwd", "elementwise", ELEMENTWISE_FLOPS * m * n, grad)
            out.append(_Pair(cast, [cast_bwd]))
        out.append(pair)
    return out


def _elt(c: _Ctx, name: str, elements: float, rw_bytes: float) -> _Pair:
    """An elementwise op; its backward reads/writes about twice as much."""
    return _Pair(
        OpCost(name, "elementwise", ELEMENTWISE_FLOPS * elements, rw_bytes),
        [OpCost(f"{name}_bwd", "elementwise", 2 * ELEMENTWISE_FLOPS * elements, 2 * rw_bytes)],
    )


def _gathered(c: _Ctx, tokens_h_bytes: float) -> float:
    """The bytes an SP all-gather of a low-precision GEMM's input moves (module docstring)."""
    q = LOW_PRECISION_BYTES.get(c.m.dtype)
    return tokens_h_bytes if q is None else tokens_h_bytes * q / c.p


def _tp_enter(c: _Ctx, name: str, tokens_h_bytes: float, gathered: float | None = None) -> list[_Pair]:
    """Megatron's `f` (entering a TP region): SP all-gather (of `gathered` bytes when the
    input is gathered in a low precision); else identity (bwd all-reduce)."""
    if c.t == 1:
        return []
    if c.sp:
        return [
            _Pair(
                CommCost(f"{name}_ag", "all_gather", "tp", tokens_h_bytes if gathered is None else gathered),
                [CommCost(f"{name}_ag_bwd", "reduce_scatter", "tp", tokens_h_bytes)],
            )
        ]
    return [_Pair(None, [CommCost(f"{name}_ar_bwd", "all_reduce", "tp", tokens_h_bytes)])]


def _regather_for_wgrad(
    c: _Ctx, name: str, tokens_h_bytes: float, pairs: list[_Pair], readers: tuple[str, ...]
) -> list[_Pair]:
    """`pairs` (a TP region's ops after `_tp_enter`) with, under sequence parallelism, the
    backward all-gather of the region's input placed after the last GEMM of `readers` (the
    GEMMs that read that input): in the reversed backward it comes just before their
    dgrads and wgrads (module docstring)."""
    if c.t == 1 or not c.sp:
        return pairs
    last = max(i for i, x in enumerate(pairs) if isinstance(x.fwd, OpCost) and x.fwd.name in readers)
    regather = _Pair(None, [CommCost(f"{name}_ag_wgrad", "all_gather", "tp", tokens_h_bytes)])
    return [*pairs[: last + 1], regather, *pairs[last + 1 :]]


def _tp_exit(c: _Ctx, name: str, tokens_h_bytes: float) -> list[_Pair]:
    """Megatron's `g` (leaving a TP region): SP reduce-scatter; else all-reduce (bwd none)."""
    if c.t == 1:
        return []
    if c.sp:
        return [
            _Pair(
                CommCost(f"{name}_rs", "reduce_scatter", "tp", tokens_h_bytes),
                [CommCost(f"{name}_rs_bwd", "all_gather", "tp", tokens_h_bytes)],
            )
        ]
    return [_Pair(CommCost(f"{name}_ar", "all_reduce", "tp", tokens_h_bytes), [])]


def _norm(c: _Ctx, name: str, width: float, tokens: float) -> _Pair:
    return _elt(c, name, tokens * width, 2 * c.p * tokens * width)


def _zero3_gather(model: ModelSpec, layout: LayoutSpec, layer_index: int) -> list[_Pair]:
    """ZeRO-3/FSDP: gather the layer's weights before use; reduce-scatter its gradients."""
    if layout.zero_stage != 3:
        return []
    w = layer_rank_params(model, layout, layer_index)
    p = model.element_bytes
    g = layout.grad_element_bytes(p)
    out: list[_Pair] = []
    for group, n in (("dp_cp", w.dense), ("edp", w.expert)):
        if n <= 0:
            continue
        out.append(
            _Pair(
                CommCost(f"zero3_gather_{group}", "all_gather", group, n * p),
                [
                    CommCost(f"zero3_gather_{group}_bwd", "all_gather", group, n * p),
                    CommCost(f"zero3_grad_rs_{group}", "reduce_scatter", group, n * g),
                ],
            )
        )
    return out


def _zero2_reduce(model: ModelSpec, layout: LayoutSpec, layer_index: int) -> list[_Pair]:
    """ZeRO-2 with `zero2_reduce_per_micro_batch`: reduce-scatter the layer's gradients after
    its backward, every micro-batch (the gradients are sharded, so they are not kept whole)."""
    if layout.zero_stage != 2 or not layout.zero2_reduce_per_micro_batch:
        return []
    w = layer_rank_params(model, layout, layer_index)
    g = layout.grad_element_bytes(model.element_bytes)
    return [
        _Pair(None, [CommCost(f"zero2_grad_rs_{group}", "reduce_scatter", group, n * g)])
        for group, n in (("dp_cp", w.dense), ("edp", w.expert))
        if n > 0
    ]


def _attention(c: _Ctx) -> list[_Pair]:
    """Projections, attention core and output projection (after the input norm)."""
    m, L, t, h, T, p = c.m, c.L, c.t, c.h, c.T, c.p
    a_t = m.attention_heads / t
    dq, dv = m.qk_head_dim, m.v_head_dim
    pairs: list[_Pair] = []
    if m.mla is None:
        kv_r = kv_heads_per_rank(m, t)
        pairs.append(_gemm(c, "qkv", T, a_t * dq + kv_r * (dq + dv), h))
    else:
        mla = m.mla
        kv_r = a_t  # MLA expands the latent into one K and V per query head
        if mla.q_lora_rank is None:
            pairs.append(_gemm(c, "q", T, a_t * dq, h))
        else:
            # down-projections are replicated over tp (as in Megatron's MLA)
            pairs.append(_gemm(c, "q_a", T, mla.q_lora_rank, h))
            pairs.append(_norm(c, "q_a_norm", mla.q_lora_rank, T))
            pairs.append(_gemm(c, "q_b", T, a_t * dq, mla.q_lora_rank))
        pairs.append(_gemm(c, "kv_a", T, mla.kv_lora_rank + mla.qk_rope_head_dim, h))
        pairs.append(_norm(c, "kv_a_norm", mla.kv_lora_rank, T))
        pairs.append(_gemm(c, "kv_b", T, a_t * (mla.qk_nope_head_dim + mla.v_head_dim), mla.kv_lora_rank))
    # context parallelism: each rank's K/V chunk travels the ring (cp - 1 steps)
    kv_chunk = p * T * kv_r * (dq + dv)
    if L.cp > 1:
        pairs.append(
            _Pair(
                CommCost("cp_kv_ring", "send_recv", "cp", kv_chunk, L.cp - 1),
                # backward: K/V travel again and dK/dV travel back
                [CommCost("cp_kv_ring_bwd", "send_recv", "cp", 2 * kv_chunk, L.cp - 1)],
                core=True,
            )
        )
    core = attention_core(
        L.attention,
        b=c.b,
        heads=a_t,
        kv_heads=kv_r,
        s_q=c.s_q,
        s_k=c.s_k,
        d_qk=dq,
        d_v=dv,
        element_bytes=p,
        causal=c.causal,
        dropout=m.dropout,
    )
    pairs += [_Pair(fwd, list(bwd), core=True) for fwd, bwd in core]
    if L.cp > 1 and L.cp_comm == "ring" and L.attention != "unfused":
        pairs.append(_cp_merge(c, a_t, kv_r, dq, dv))
    pairs.append(_gemm(c, "attn_out", T, h, a_t * dv))
    return pairs


def _cp_merge(c: _Ctx, heads: float, kv_heads: float, d_qk: int, d_v: int) -> _Pair:
    """The memory-bound work of ring context parallelism around the fused attention kernel.

    What is modelled: Transformer Engine's ring attention (`AttnFuncWithCPAndKVP2P`, TE
    1.11-1.13, the bf16 path, sbhd layout as Megatron calls it; no copies for contiguity)
    runs one kernel per ring step and merges their partial results in separate kernels. On
    the ring's last rank (r = cp - 1, the busiest: every remote step takes the full query
    length), in bytes read plus written, with O = the attention output (bf16, b·s/cp·heads·
    d_v elements, likewise dQ with d_qk), KV = its K and V chunk, L = the fp32 softmax
    statistics (4·b·heads·s/cp bytes):
        * forward, 2·cp + 3 kernels: the packed K/V copy (2·KV), the output zeroed and
          corrected once per step after the loop (out += out_i · exp(lse_i - lse), bf16;
          (3·cp + 1)·O in all), the statistics kept in fp64 and merged step by step
          ((7·cp + 3)·L);
        * backward, 3·cp + 2 kernels: per step dQ added or copied in bf16 ((3·cp - 1)·dQ in
          all), dK/dV concatenated for the ring (cuDNN returns them interleaved) and added
          into the ring buffer, plus the ring buffer's first copy ((2.5·cp + 4)·KV), and the
          statistics' second half made contiguous (L).
    cp = 2 gives 2·KV + 7·O + 17·L forward and 9·KV + 5·dQ + L backward.

    What is simplified: every CP rank is charged the last rank's bytes (the ring's steps
    wait for it); FLOPs are two per output element per step (the merge's multiply-add), the
    ops being priced by their bytes. Not recomputed by `selective` (the fused kernel's own
    recompute of the scores does not redo the merges).
    """
    cp, b, s_l, p = c.L.cp, c.b, c.s_q, c.p
    n_o = b * s_l * heads * d_v
    o, dq = p * n_o, p * b * s_l * heads * d_qk
    kv = p * b * s_l * kv_heads * (d_qk + d_v)
    lse = 4.0 * b * heads * s_l
    fwd = 2 * kv + (3 * cp + 1) * o + (7 * cp + 3) * lse
    bwd = (2.5 * cp + 4) * kv + (3 * cp - 1) * dq + lse
    return _Pair(
        OpCost("cp_merge", "elementwise", 2.0 * cp * n_o, fwd, launches=2 * cp + 3),
        [OpCost("cp_merge_bwd", "elementwise", 2.0 * cp * n_o, bwd, launches=3 * cp + 2)],
    )


def _mlp(c: _Ctx, prefix: str, tokens: float, ffn_total: float) -> list[_Pair]:
    """A (possibly gated) MLP of total intermediate size `ffn_total`, split over tp."""
    f_t = ffn_total / c.t
    gate = 2 if c.m.gated_ffn else 1
    act_in = tokens * f_t * gate
    return [
        _gemm(c, f"{prefix}_up", tokens, gate * f_t, c.h),
        _elt(c, f"{prefix}_act", tokens * f_t, c.p * (act_in + tokens * f_t)),
        _gemm(c, f"{prefix}_down", tokens, c.h, f_t),
    ]


def _moe(c: _Ctx) -> list[_Pair]:
    """Router, dispatch, routed experts, combine, and shared experts."""
    m, L, t, h, T, p = c.m, c.L, c.t, c.h, c.T, c.p
    moe = m.moe
    if moe is None:
        raise ValueError("not an MoE model")
    k, E = moe.top_k, moe.experts
    routed = T / t  # tokens this rank routes (SP shard, or a 1/tp share of the replicas)
    pairs: list[_Pair] = [
        _gemm(c, "router", c.Tn, E, h),
        _elt(c, "router_topk", c.Tn * E, 4.0 * c.Tn * E + 8.0 * c.Tn * k),
        _elt(c, "moe_permute", routed * k * h, 2 * p * routed * k * h),
    ]
    if L.ep > 1:
        pairs.append(
            _Pair(
                CommCost("ep_dispatch", "all_to_all", "ep", p * routed * k * h),
                [CommCost("ep_dispatch_bwd", "all_to_all", "ep", p * routed * k * h)],
            )
        )
    if t > 1:
        # expert tensor parallelism: gather the routed tokens over tp, reduce-scatter after
        pairs.append(
            _Pair(
                CommCost("moe_tp_ag", "all_gather", "tp", p * T * k * h),
                [CommCost("moe_tp_ag_bwd", "reduce_scatter", "tp", p * T * k * h)],
            )
        )
    pairs += _mlp(c, "experts", T * k, moe.expert_ffn_hidden_size)
    if t > 1:
        pairs.append(
            _Pair(
                CommCost("moe_tp_rs", "reduce_scatter", "tp", p * T * k * h),
                [CommCost("moe_tp_rs_bwd", "all_gather", "tp", p * T * k * h)],
            )
        )
    if L.ep > 1:
        pairs.append(
            _Pair(
                CommCost("ep_combine", "all_to_all", "ep", p * routed * k * h),
                [CommCost("ep_combine_bwd", "all_to_all", "ep", p * routed * k * h)],
            )
        )
    pairs.append(_elt(c, "moe_unpermute", routed * k * h, p * (routed * k * h + routed * h)))
    if moe.shared_experts:
        pairs += _tp_enter(c, "tp_shared", p * T * h, _gathered(c, p * T * h))
        shared = _mlp(c, "shared", T, moe.shared_experts * moe.shared_ffn)
        pairs += _regather_for_wgrad(c, "tp_shared", _gathered(c, p * T * h), shared, ("shared_up",))
        pairs += _tp_exit(c, "tp_shared", p * T * h)
    return pairs


def _main_grad_accumulation(model: ModelSpec, layout: LayoutSpec, layer_index: int) -> list[_Pair]:
    """fp32 main gradients accumulated by a separate kernel (`grad_accumulation_fusion`
    off): after the layer's backward, read its weight gradients (model dtype) and the fp32
    buffer, write the buffer. Fused into the wgrad GEMMs' epilogue it costs nothing here."""
    if layout.main_grads != "fp32" or layout.grad_accumulation_fusion:
        return []
    n = layer_rank_params(model, layout, layer_index).total
    g = layout.FP32_GRAD_BYTES
    acc = OpCost("main_grad_acc", "elementwise", n, (model.element_bytes + 2 * g) * n)
    return [_Pair(None, [acc])]


def _layer_pairs(model: ModelSpec, layout: LayoutSpec, layer_index: int, causal_skip: bool) -> list[_Pair]:
    c = _Ctx(model, layout, causal_skip)
    # first in the list, so last in the (reversed) backward: the per-micro-batch
    # reduce-scatter after the fp32 accumulation it reduces, both after the layer's wgrads
    pairs: list[_Pair] = _zero2_reduce(model, layout, layer_index)
    pairs += _main_grad_accumulation(model, layout, layer_index)
    pairs += _zero3_gather(model, layout, layer_index)
    pairs += _low_precision_casts(c, _layer_body(c, model, layer_index))
    return pairs


def _layer_body(c: _Ctx, model: ModelSpec, layer_index: int) -> list[_Pair]:
    """The block's compute and TP communication (without ZeRO-3 gathers and casts)."""
    h, p, T, Tn = c.h, c.p, c.T, c.Tn
    act = p * T * h  # a full (tokens × h) activation of the tp group
    pairs: list[_Pair] = []
    pairs.append(_norm(c, "attn_norm", h, Tn))
    pairs += _tp_enter(c, "tp_attn_in", act, _gathered(c, act))
    pairs += _regather_for_wgrad(c, "tp_attn_in", _gathered(c, act), _attention(c), _ATTENTION_READERS)
    pairs += _tp_exit(c, "tp_attn_out", act)
    # residual add (with dropout: Megatron's fused bias-dropout-add also writes a 1-byte mask)
    res_bytes = (3 * p + (1 if model.dropout else 0)) * Tn * h
    pairs.append(_elt(c, "attn_residual", Tn * h, res_bytes))
    pairs.append(_norm(c, "mlp_norm", h, Tn))
    if model.is_moe_layer(layer_index):
        pairs += _moe(c)
    else:
        pairs += _tp_enter(c, "tp_mlp_in", act, _gathered(c, act))
        mlp = _mlp(c, "mlp", T, model.ffn_hidden_size)
        pairs += _regather_for_wgrad(c, "tp_mlp_in", _gathered(c, act), mlp, ("mlp_up",))
        pairs += _tp_exit(c, "tp_mlp_out", act)
    pairs.append(_elt(c, "mlp_residual", Tn * h, res_bytes))
    return pairs


def _phase_items(pairs: list[_Pair], phase: Phase, recompute: str) -> list[Item]:
    if phase == "fwd":
        return [x.fwd for x in pairs if x.fwd is not None]
    if phase == "bwd":
        return [item for x in reversed(pairs) for item in x.bwd]
    if phase == "recompute":
        if recompute == "none":
            return []
        keep = [x for x in pairs if recompute == "full" or x.core]
        # weights are not gathered again for recompute under ZeRO-3: the backward gather
        # (issued first) serves both
        return [
            replace(x.fwd, name=f"recompute_{x.fwd.name}")
            for x in keep
            if x.fwd is not None and not x.fwd.name.startswith("zero3_")
        ]
    raise ValueError(f"unknown phase {phase!r}; expected fwd, bwd or recompute")


# ---- public API -------------------------------------------------------------------------


def layer_program(
    model: ModelSpec,
    layout: LayoutSpec,
    layer_index: int,
    phase: Phase = "fwd",
    *,
    causal_skip: bool = True,
) -> list[Item]:
    """Compute ops and communications of one block for one micro-batch, in issue order.

    Args:
        phase: `fwd`; `bwd` (reverse order: dgrad then wgrad per GEMM, mirrored
            collectives); `recompute` (what `layout.recompute` redoes before the backward:
            nothing, the attention core (selective), or the whole forward (full)).
        causal_skip: halve attention FLOPs for the causal mask (see module docstring).
    """
    pairs = _layer_pairs(model, layout, layer_index, causal_skip)
    return _phase_items(pairs, phase, layout.recompute)


def embedding_program(model: ModelSpec, layout: LayoutSpec, phase: Phase = "fwd") -> list[Item]:
    """Input embedding of one micro-batch on the first stage (vocab-parallel over tp)."""
    c = _Ctx(model, layout, True)
    act = c.p * c.T * c.h
    pairs = [_elt(c, "embedding", c.T * c.h, act + 8.0 * c.T)]
    if c.t > 1:
        # vocab-parallel lookup: each tp rank holds V/tp rows; partial rows are summed
        if c.sp:
            fwd = CommCost("tp_embedding_rs", "reduce_scatter", "tp", act)
            pairs.append(_Pair(fwd, [CommCost("tp_embedding_rs_bwd", "all_gather", "tp", act)]))
        else:
            pairs.append(_Pair(CommCost("tp_embedding_ar", "all_reduce", "tp", act), []))
    if phase == "recompute":
        return []
    return _phase_items(pairs, phase, layout.recompute)


def output_program(model: ModelSpec, layout: LayoutSpec, phase: Phase = "fwd") -> list[Item]:
    """Final norm, logits GEMM (vocab split over tp) and cross-entropy, on the last stage.

    Never recomputed (as in Narayanan et al. eq. 3).
    """
    c = _Ctx(model, layout, True)
    V_t = model.vocab_size / c.t
    pairs = [_norm(c, "final_norm", c.h, c.Tn)]
    pairs += _tp_enter(c, "tp_logits_in", c.p * c.T * c.h)
    logits = [_gemm(c, "logits", c.T, V_t, c.h)]
    pairs += _regather_for_wgrad(c, "tp_logits_in", c.p * c.T * c.h, logits, ("logits",))
    # fp32 softmax cross-entropy over the vocab shard; tp ranks exchange max and sum
    pairs.append(_elt(c, "cross_entropy", c.T * V_t, 4.0 * 2 * c.T * V_t))
    if c.t > 1:
        pairs.append(_Pair(CommCost("tp_xent", "all_reduce", "tp", 4.0 * 2 * c.T), []))
    if phase == "recompute":
        return []
    return _phase_items(pairs, phase, layout.recompute)


def pp_send_bytes(model: ModelSpec, layout: LayoutSpec) -> float:
    """Bytes one rank sends to the next stage per micro-batch (and the gradient back).

    The (micro_batch × seq_len/cp × h) activation; with sequence parallelism each tp rank
    sends its 1/tp slice.
    """
    c = _Ctx(model, layout, True)
    return c.p * c.Tn * c.h
