"""FP8 training's cast kernels and the GEMMs kept in bf16, against closed-form byte counts.

Formula (Transformer Engine's cast_transpose; `simulator/workload/flops.py`): per GEMM
(m×k)·(k×n) of a transformer layer, with q = 1 byte (fp8) and p = 2 bytes (bf16 storage),
forward casts move `(p + 2q)·m·k` bytes (read the bf16 input, write it as fp8 and as fp8
transposed), `2q·m·k` when a norm feeds the GEMM (TE's LayerNormLinear casts in the norm
kernel), and backward casts move `(p + 2q)·m·n` (the output gradient). The router and the
logits stay in bf16 (Megatron runs them outside fp8 autocast).
"""

from __future__ import annotations

from pathlib import Path

from simulator.workload.emit import OpEmitter
from simulator.workload.flops import OpCost, layer_program, output_program
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import load_model

MODELS = Path(__file__).resolve().parents[2] / "workloads" / "models"
LLAMA = load_model(MODELS / "llama3-8b.yaml")
FP8 = LLAMA.model_copy(update={"dtype": "fp8"})
LAYOUT = LayoutSpec(tp=2, sequence_parallel=True, global_batch_size=1)


def _ops(items: list) -> dict[str, OpCost]:
    return {o.name: o for o in items if isinstance(o, OpCost)}


def test_fp8_forward_casts_match_cast_transpose_bytes() -> None:
    fwd = _ops(layer_program(FP8, LAYOUT, 0, "fwd"))
    T, h, f = LLAMA.seq_len, LLAMA.hidden_size, LLAMA.ffn_hidden_size
    # norm-fed: only the two fp8 writes of the (gathered) input
    assert fwd["qkv_cast"].bytes == 2.0 * T * h
    assert fwd["mlp_up_cast"].bytes == 2.0 * T * h
    # fed by another kernel: read bf16 + write fp8 twice = 4 bytes per element
    attn_in = fwd["attn_out"].gemm
    assert attn_in is not None and fwd["attn_out_cast"].bytes == 4.0 * attn_in[0] * attn_in[2]
    assert fwd["mlp_down_cast"].bytes == 4.0 * T * (f / LAYOUT.tp)
    assert all(o.kind == "elementwise" for n, o in fwd.items() if n.endswith("_cast"))


def test_fp8_backward_casts_the_output_gradient() -> None:
    bwd = _ops(layer_program(FP8, LAYOUT, 0, "bwd"))
    T, h, f = LLAMA.seq_len, LLAMA.hidden_size, LLAMA.ffn_hidden_size
    assert bwd["mlp_down_cast_bwd"].bytes == 4.0 * T * h
    assert bwd["mlp_up_cast_bwd"].bytes == 4.0 * T * 2 * f / LAYOUT.tp  # gated: 2·f/tp
    assert bwd["attn_out_cast_bwd"].bytes == 4.0 * T * h


def test_bf16_has_no_casts_and_fp8_keeps_matmul_flops() -> None:
    for phase in ("fwd", "bwd", "recompute"):
        bf16 = layer_program(LLAMA, LAYOUT, 0, phase)
        fp8 = layer_program(FP8, LAYOUT, 0, phase)
        assert not any(n.endswith(("_cast", "_cast_bwd")) for n in _ops(bf16))

        def mm(items: list) -> float:
            return sum(o.flops for o in _ops(items).values() if o.kind in ("gemm", "attention"))

        assert mm(fp8) == mm(bf16)
    # the forward casts are not part of what selective recomputation redoes
    assert not any(n.endswith("_cast") for n in _ops(layer_program(FP8, LAYOUT, 0, "recompute")))
    assert "logits_cast" not in _ops(output_program(FP8, LAYOUT, "fwd"))


def test_fp8_logits_gemm_is_priced_at_bf16() -> None:
    em = OpEmitter.__new__(OpEmitter)  # only the dtype routing of `compute` is exercised
    em.dtype, em.attn_dtype, em.ops, em._n = "fp8", "bf16", [], 0
    items = [o for o in output_program(FP8, LAYOUT, "fwd") if isinstance(o, OpCost)]
    em.compute(0, items, (), "compute", "out")
    dtypes = {k.name: op.dtype for op in em.ops for k in op.kernels}
    assert dtypes["logits"] == "bf16"
    assert dtypes["cross_entropy"] == "fp8"  # memory-bound class: priced by bytes only
