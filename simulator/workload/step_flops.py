"""Whole-step FLOP counts: the hardware FLOPs a step executes (summed from the per-layer
programs of `simulator.workload.flops`, recompute included) and the model FLOPs MFU is
defined on (PaLM's formula, recompute not counted)."""

from __future__ import annotations

from collections.abc import Iterable

from simulator.workload.costs import Item, OpCost
from simulator.workload.flops import layer_program, output_program
from simulator.workload.layout import LayoutSpec, stage_layers
from simulator.workload.model import ModelSpec


def _sum_flops(items: Iterable[Item], kinds: tuple[str, ...] = ("gemm", "attention")) -> float:
    return sum(x.flops for x in items if isinstance(x, OpCost) and x.kind in kinds)


def stage_flops(model: ModelSpec, layout: LayoutSpec, stage: int, *, causal_skip: bool = True) -> float:
    """Matmul FLOPs (GEMM + attention) one rank of pipeline stage `stage` executes per
    micro-batch, recompute included: its own layers (`stage_layers`, so uneven first/last
    stages count fewer) plus the output layer on the last stage."""
    per_mb = 0.0
    for i in stage_layers(model, layout, stage):
        for ph in ("fwd", "bwd", "recompute"):
            per_mb += _sum_flops(layer_program(model, layout, i, ph, causal_skip=causal_skip))
    if stage == layout.pp - 1:
        per_mb += _sum_flops(output_program(model, layout, "fwd"))
        per_mb += _sum_flops(output_program(model, layout, "bwd"))
    return per_mb


def step_flops(model: ModelSpec, layout: LayoutSpec, *, causal_skip: bool = True) -> float:
    """Matmul FLOPs (GEMM + attention) the whole job executes per step, recompute included
    ("hardware FLOPs"): per-op sums over every layer, micro-batch and replica."""
    one_replica = sum(
        # every rank of the stage does this
        stage_flops(model, layout, s, causal_skip=causal_skip) * layout.tp * layout.cp
        for s in range(layout.pp)
    )
    return one_replica * layout.micro_batches * layout.dp


def attention_flops_per_token(model: ModelSpec, *, causal_halving: bool = False) -> float:
    """Attention score + value FLOPs per token, forward + backward (3× forward).

    Per layer `6·s·a·(d_qk + d_v)`; for standard heads (d = h/a) this is PaLM's `12·s·h`
    per layer. `causal_halving` halves it (PaLM does not).
    """
    per_layer = 6.0 * model.seq_len * model.attention_heads * (model.qk_head_dim + model.v_head_dim)
    return per_layer * model.layers * (0.5 if causal_halving else 1.0)


def mfu_flops_per_step(model: ModelSpec, tokens: int, *, causal_halving: bool = False) -> float:
    """Model FLOPs for MFU: `(6·N + 12·l·h·s)·tokens` (PaLM, Chowdhery et al. 2022, App. B).

    N is `ModelSpec.matmul_params()` (active parameters that enter a matmul: routed experts
    at top_k/experts, input-embedding lookups excluded); the attention term is
    `attention_flops_per_token` (no causal halving by default, as PaLM). Recomputation is
    not counted (that is what makes it *model* FLOPs).
    """
    return (
        6.0 * model.matmul_params() + attention_flops_per_token(model, causal_halving=causal_halving)
    ) * tokens
