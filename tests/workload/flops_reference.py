"""Views and reference models of `simulator.workload.flops` that only the tests use.

`layer_ops` / `layer_comms` split a layer's program into its compute ops and its
communications; `pp_comms` is the pipeline send of one micro-batch; `dp_comms` is an
independent statement of the data-parallel traffic per rank and step (bucketed gradients
per ZeRO stage) that the tests hold the generated step programs against.
"""

from __future__ import annotations

import math

from simulator.workload.flops import CommCost, OpCost, Phase, layer_program, pp_send_bytes
from simulator.workload.layout import LayoutSpec, end_rank_params, stage_rank_params
from simulator.workload.model import ModelSpec


def layer_ops(
    model: ModelSpec,
    layout: LayoutSpec,
    layer_index: int,
    phase: Phase = "fwd",
    *,
    causal_skip: bool = True,
) -> list[OpCost]:
    """Compute ops only of `layer_program` (per rank, per micro-batch)."""
    items = layer_program(model, layout, layer_index, phase, causal_skip=causal_skip)
    return [x for x in items if isinstance(x, OpCost)]


def layer_comms(
    model: ModelSpec, layout: LayoutSpec, layer_index: int, phase: Phase = "fwd"
) -> list[CommCost]:
    """Communications only of `layer_program`: TP (all-reduce, or all-gather +
    reduce-scatter with SP), CP ring, EP dispatch/combine, ZeRO-3 gathers/reduce-scatters."""
    items = layer_program(model, layout, layer_index, phase)
    return [x for x in items if isinstance(x, CommCost)]


def pp_comms(model: ModelSpec, layout: LayoutSpec, phase: Phase = "fwd") -> list[CommCost]:
    """Pipeline send of one micro-batch at a stage boundary (fwd: activation; bwd: grad)."""
    if layout.pp == 1 or phase == "recompute":
        return []
    name = "pp_send_act" if phase == "fwd" else "pp_send_grad"
    return [CommCost(name, "send_recv", "pp", pp_send_bytes(model, layout))]


def _buckets(total: float, bucket: float) -> list[float]:
    if total <= 0:
        return []
    n = max(1, math.ceil(total / bucket))
    return [total / n] * n


def dp_comms(model: ModelSpec, layout: LayoutSpec, stage: int) -> list[CommCost]:
    """Data-parallel gradient (and parameter) traffic of one rank of `stage` per step.

    Dense parameters reduce over `dp_cp`, routed experts over `edp`; gradients are split in
    buckets of `layout.grad_bucket_bytes`:
        * ZeRO 0: all-reduce of the gradients.
        * ZeRO 1/2: reduce-scatter of the gradients, then all-gather of the updated
          weights after the optimizer step.
        * ZeRO 3: the per-layer gathers and reduce-scatters are in `layer_program`; here
          only the embedding/output parameters (all-gather + reduce-scatter).
    A group of one rank moves nothing and is left out.
    """
    L = layout
    p = model.element_bytes
    params = end_rank_params(model, L, stage) if L.zero_stage == 3 else stage_rank_params(model, L, stage)
    sizes = {"dp_cp": L.dp * L.cp, "edp": L.edp * L.cp}
    out: list[CommCost] = []
    for group, n in (("dp_cp", params.dense), ("edp", params.expert)):
        if n <= 0 or sizes[group] == 1:
            continue
        buckets = _buckets(n * p, L.grad_bucket_bytes)
        if L.zero_stage == 0:
            out += [
                CommCost(f"dp_grad_ar_{group}[{i}]", "all_reduce", group, b) for i, b in enumerate(buckets)
            ]
        else:
            out += [
                CommCost(f"dp_grad_rs_{group}[{i}]", "reduce_scatter", group, b)
                for i, b in enumerate(buckets)
            ]
            out += [
                CommCost(f"dp_param_ag_{group}[{i}]", "all_gather", group, b) for i, b in enumerate(buckets)
            ]
    return out
