"""Ring context parallelism's merge kernels around the fused attention kernel (`cp_merge`).

Golden figures from the per-step work of Transformer Engine's ring attention
(`AttnFuncWithCPAndKVP2P`, TE 1.11-1.13, bf16, sbhd, causal with load-balanced chunks) on
the ring's last rank, step by step as the source runs them (not the closed form the model
uses, which the test checks against this enumeration):

forward, every step j = 0..cp-1 has its kernel's K/V chunk local or received; around them:
    packed K/V copy                          R KV, W KV
    out zeroed, lse cloned, lse to fp64      W O;  R L, W L;  R L, W 2L
    steps 1..cp-1: lse merged (fp64)         R 3L, W 2L each
    lse back to fp32 after the loop          R 2L, W L
    every step's output correction           R 2O + 2L, W O each
backward:
    lse second half made contiguous          R L/2, W L/2
    K/V into the ring buffer                 R KV, W KV
    step 0 (full K/V): dK/dV cat R KV W KV; dQ add R 2dQ W dQ; dK/dV add R 2KV W KV
    steps 1..cp-2 (half K/V): cat R KV/2 W KV/2; dK/dV half add R KV W KV/2; dQ add R 2dQ W dQ
    step cp-1 (half K/V): cat R KV/2 W KV/2; dK/dV half copy R KV/2 W KV/2; dQ copy R dQ W dQ
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.workload.flops import CommCost, OpCost, layer_program
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import load_model

#: Llama 3 8B: 32 query heads, 8 KV heads of 128, 8K tokens
LLAMA3_8B = load_model(Path(__file__).resolve().parents[2] / "workloads" / "models" / "llama3-8b.yaml")


def _enumerated(cp: int, o: float, kv: float, lse: float) -> tuple[float, float]:
    """(forward, backward) bytes of the last rank, summed step by step (module docstring)."""
    fwd = 2 * kv + o + 2 * lse + 3 * lse
    fwd += sum(5 * lse for _ in range(1, cp))
    fwd += 3 * lse
    fwd += sum(3 * o + 2 * lse for _ in range(cp))
    bwd = lse + 2 * kv
    for j in range(cp):
        if j == 0:
            bwd += 2 * kv + 3 * o + 3 * kv
        elif j < cp - 1:
            bwd += kv + 1.5 * kv + 3 * o
        else:
            bwd += kv + kv + 2 * o
    return fwd, bwd


def _merge(layout: LayoutSpec, phase: str) -> list[OpCost]:
    items = layer_program(LLAMA3_8B, layout, 0, phase)  # type: ignore[arg-type]
    return [x for x in items if isinstance(x, OpCost) and x.name.startswith("cp_merge")]


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_merge_bytes_follow_the_ring_step_by_step(cp: int) -> None:
    layout = LayoutSpec(cp=cp, dp=1, global_batch_size=1)
    s_l = 8192 // cp
    o = 2.0 * s_l * 32 * 128  # the bf16 output (and dQ) of one rank
    kv = 2.0 * s_l * 8 * (128 + 128)  # its bf16 K and V chunk
    lse = 4.0 * 32 * s_l  # its fp32 softmax statistics
    fwd, bwd = _enumerated(cp, o, kv, lse)
    (f,) = _merge(layout, "fwd")
    (b,) = _merge(layout, "bwd")
    assert (f.bytes, b.bytes) == (fwd, bwd)  # sums of multiples of powers of two: exact
    assert (f.kind, b.kind) == ("elementwise", "elementwise")
    assert (f.launches, b.launches) == (2 * cp + 3, 3 * cp + 2)


def test_cp2_golden_figures() -> None:
    """cp = 2 at 8K: O = 33,554,432 B, KV = 16,777,216 B, L = 524,288 B; forward
    2KV + 7O + 17L, backward 9KV + 5dQ + L."""
    (f,) = _merge(LayoutSpec(cp=2, dp=1, global_batch_size=1), "fwd")
    (b,) = _merge(LayoutSpec(cp=2, dp=1, global_batch_size=1), "bwd")
    assert f.bytes == 277_348_352
    assert b.bytes == 319_291_392


@pytest.mark.parametrize(
    "layout",
    [
        LayoutSpec(cp=1, dp=1, global_batch_size=1),
        LayoutSpec(cp=2, dp=1, global_batch_size=1, cp_comm="all_gather"),
        LayoutSpec(cp=2, dp=1, global_batch_size=1, attention="unfused"),
    ],
    ids=["no-cp", "all-gather-cp", "unfused-kernels"],
)
def test_no_merge_without_a_ring_of_fused_kernels(layout: LayoutSpec) -> None:
    """All-gathered K/V feed one kernel (nothing to merge); unfused kernels are not TE's ring."""
    assert _merge(layout, "fwd") == [] and _merge(layout, "bwd") == []


def test_selective_recompute_does_not_redo_the_merge() -> None:
    layout = LayoutSpec(cp=2, dp=1, global_batch_size=1, recompute="selective")
    names = [x.name for x in layer_program(LLAMA3_8B, layout, 0, "recompute")]
    assert "recompute_attn_score" in names and not any("cp_merge" in n for n in names)


def test_the_merge_runs_after_the_ring_and_the_core() -> None:
    """Forward: the corrections run after the loop, so after the core and its exchange."""
    items = layer_program(LLAMA3_8B, LayoutSpec(cp=2, dp=1, global_batch_size=1), 0, "fwd")
    names = [x.name for x in items]
    ring = next(i for i, x in enumerate(items) if isinstance(x, CommCost) and x.name == "cp_kv_ring")
    assert ring < names.index("attn_value") < names.index("cp_merge") < names.index("attn_out")
