"""The attention core of one rank for one micro-batch, per kernel variant.

Given the per-rank shape (b sequences, `heads` query heads, s_q queries that each see s_k
keys, head dims d_qk and d_v, p bytes per element), returns (forward item, backward items)
pairs in forward order. Scores Q·Kᵀ and the value product P·V are `2·b·heads·s_q·s_k·d`
FLOPs each in forward and twice that in backward (Narayanan et al. SC'21, eq. 3 terms).

Variants:
    * `auto`, `flash2`, `flash3`: one fused kernel (FlashAttention-2/3 style, Dao 2023;
      Shah et al. 2024): the s×s scores stay on chip, so the ops move only Q, K, V and O;
      softmax, masking and dropout are inside the kernel (no bytes, no launch of their own).
      The causal mask skips the masked half when `causal` is 0.5.
    * `unfused`: Megatron-LM's 2021 kernels (Narayanan et al. SC'21 §4.2): a strided
      batched GEMM writes the scores (b·heads products of s_q×s_k) to HBM, a fused
      scale-mask-softmax reads and writes them, dropout reads them and writes them and a
      one-byte mask, a second batched GEMM reads them for P·V. The full s×s matrix is
      computed (the mask is applied in the softmax), whatever `causal` says. Backward: two
      batched GEMMs per product (dgrad, wgrad), dropout backward (reads grad and mask,
      writes grad), softmax backward (reads output and grad, writes grad).

Simplified: grouped-query K/V are counted once per query head in the unfused GEMMs (as
those kernels expanded them); FlashAttention's backward preprocessing kernel is folded
into its main kernel.
"""

from __future__ import annotations

from simulator.workload.costs import OpCost

Core = list[tuple[OpCost, list[OpCost]]]


def _flash(
    variant: str, pairs: float, d_qk: int, d_v: int, q_b: float, k_b: float, v_b: float, o_b: float
) -> Core:
    f_score, f_value = 2.0 * pairs * d_qk, 2.0 * pairs * d_v
    return [
        (
            OpCost("attn_score", "attention", f_score, q_b + k_b, variant=variant),
            [OpCost("attn_score_bwd", "attention", 2 * f_score, 2 * (q_b + k_b), variant=variant)],
        ),
        (
            OpCost("attn_softmax", "elementwise", 5.0 * pairs, 0.0, launches=0),
            [OpCost("attn_softmax_bwd", "elementwise", 5.0 * pairs, 0.0, launches=0)],
        ),
        (
            OpCost("attn_value", "attention", f_value, v_b + o_b, variant=variant, launches=0),
            [
                OpCost(
                    "attn_value_bwd", "attention", 2 * f_value, 2 * (v_b + o_b), variant=variant, launches=0
                )
            ],
        ),
    ]


def _batched(name: str, batch: int, m: int, n: int, k: int, p: float) -> OpCost:
    """One strided batched GEMM of `batch` (m×k)·(k×n) products."""
    return OpCost(
        name,
        "attention",
        2.0 * batch * m * n * k,
        p * batch * (m * k + k * n + m * n),
        gemm=(m, n, k),
        batch=batch,
        variant="unfused",
    )


def _unfused(b: int, heads: float, s_q: int, s_k: int, d_qk: int, d_v: int, p: float, dropout: bool) -> Core:
    batch = max(1, round(b * heads))
    scores = float(batch) * s_q * s_k  # elements of the s×s matrices of the micro-batch
    core: Core = [
        (
            _batched("attn_score", batch, s_q, s_k, d_qk, p),
            [
                _batched("attn_score_dgrad", batch, s_q, d_qk, s_k, p),  # dQ = dS·K
                _batched("attn_score_wgrad", batch, s_k, d_qk, s_q, p),  # dK = dSᵀ·Q
            ],
        ),
        (
            OpCost("attn_softmax", "elementwise", 5.0 * scores, 2 * p * scores),
            [OpCost("attn_softmax_bwd", "elementwise", 5.0 * scores, 3 * p * scores)],
        ),
    ]
    if dropout:
        core.append(
            (
                OpCost("attn_softmax_dropout", "elementwise", 2.0 * scores, (2 * p + 1) * scores),
                [OpCost("attn_softmax_dropout_bwd", "elementwise", 2.0 * scores, (2 * p + 1) * scores)],
            )
        )
    core.append(
        (
            _batched("attn_value", batch, s_q, d_v, s_k, p),
            [
                _batched("attn_value_dgrad", batch, s_q, s_k, d_v, p),  # dP = dO·Vᵀ
                _batched("attn_value_wgrad", batch, s_k, d_v, s_q, p),  # dV = Pᵀ·dO
            ],
        )
    )
    return core


def attention_core(
    variant: str,
    *,
    b: int,
    heads: float,
    kv_heads: float,
    s_q: int,
    s_k: int,
    d_qk: int,
    d_v: int,
    element_bytes: float,
    causal: float,
    dropout: bool,
) -> Core:
    """(forward item, backward items) of the attention core, forward order (module docstring).

    Args:
        variant: auto | flash2 | flash3 | unfused.
        b: sequences in the micro-batch.
        heads: query heads on this rank; kv_heads: K/V heads on this rank.
        s_q: queries per sequence on this rank; s_k: keys each query sees.
        d_qk, d_v: head dims of Q/K and of V.
        element_bytes: bytes per activation element.
        causal: fraction of the s×s pairs fused kernels compute (0.5 skips the masked half).
        dropout: attention dropout is trained (a kernel of its own when unfused).
    """
    p = element_bytes
    if variant == "unfused":
        return _unfused(b, heads, s_q, s_k, d_qk, d_v, p, dropout)
    pairs = b * heads * s_q * s_k * causal
    q_b, o_b = p * b * s_q * heads * d_qk, p * b * s_q * heads * d_v
    k_b, v_b = p * b * s_k * kv_heads * d_qk, p * b * s_k * kv_heads * d_v
    return _flash(variant, pairs, d_qk, d_v, q_b, k_b, v_b, o_b)
