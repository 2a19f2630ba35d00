"""Cost items of one rank: a compute op (`OpCost`) or a communication (`CommCost`).

Plain records that `flops` writes per layer and micro-batch and that the step-program
emitter and the kernel model (`kernels`) read. Quantities SI (FLOPs, bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Phase = Literal["fwd", "bwd", "recompute"]
OpKind = Literal["gemm", "attention", "elementwise"]
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]

#: FLOPs per element charged to elementwise ops (norm ≈ 4-5, SwiGLU ≈ 4, softmax ≈ 5).
ELEMENTWISE_FLOPS = 4.0

#: Bytes per element of the low-precision GEMM dtypes (fp4 packs two per byte).
LOW_PRECISION_BYTES = {"fp8": 1.0, "int8": 1.0, "fp4": 0.5}


@dataclass(frozen=True)
class OpCost:
    """One compute op of one rank for one micro-batch.

    Attributes:
        name: op name, unique within a layer and phase (`qkv`, `mlp_up_wgrad`, ...).
        kind: `gemm`, `attention` or `elementwise` (picks the cost model).
        flops: floating-point operations.
        bytes: HBM bytes read plus written (weights, inputs, outputs).
        gemm: (m, n, k) of a GEMM (of each product of a batched GEMM), for the shape-aware
            kernel model; None for other ops. For grouped expert GEMMs m is the total
            routed tokens over the local experts.
        batch: independent products of a batched GEMM (unfused attention: batch x heads).
        variant: attention kernel of an `attention` op: `auto`, `flash2`, `flash3` (fused)
            or `unfused` (then `gemm` is set and the op is a batched GEMM).
        launches: kernels the op launches (0 when fused into its neighbour's kernel).
    """

    name: str
    kind: OpKind
    flops: float
    bytes: float
    gemm: tuple[int, int, int] | None = None
    batch: int = 1
    variant: str | None = None
    launches: int = 1


@dataclass(frozen=True)
class CommCost:
    """One communication of one rank (see the module docstring for `bytes`).

    Attributes:
        name: e.g. `tp_attn_out`, `ep_dispatch`, `cp_kv_ring`, `dp_grad[3]`.
        collective: all_reduce | all_gather | reduce_scatter | all_to_all | send_recv.
        group: the `RankGrid` group kind it runs over (tp, cp, ep, pp, dp_cp, edp).
        bytes: buffer size per the nccl-tests convention (per message for send_recv).
        count: how many times it happens back to back (ring steps for cp send_recv).
    """

    name: str
    collective: Collective
    group: str
    bytes: float
    count: int = 1


Item = OpCost | CommCost
