"""The per-kernel compute model: GEMM shape model, attention variants, memory-bound ops."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from simulator.config.loader import load
from simulator.errors import InputError
from simulator.network.hardware import GPUSpec
from simulator.workload.costs import OpCost
from simulator.workload.flops import layer_program
from simulator.workload.kernels import KernelModel, gemm_efficiency, gemm_time_s, resolve_attention
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import ModelSpec
from simulator.workload.step_flops import step_flops

GPUS = Path(__file__).resolve().parents[2] / "topologies" / "gpus"
A100 = load(GPUSpec, GPUS / "a100-80gb.yaml")
H100 = load(GPUSpec, GPUS / "h100-sxm.yaml")
KERNEL_FIELDS = ("sm_count", "gemm_tile", "gemm_peak_fraction", "kernel_overhead_s", "boost_clock_ghz")


def _gpt(hidden: int, heads: int, layers: int = 2) -> ModelSpec:
    """A GPT block in the Narayanan et al. style (ffn 4h, non-gated, dropout)."""
    return ModelSpec(
        name=f"gpt-h{hidden}",
        layers=layers,
        hidden_size=hidden,
        ffn_hidden_size=4 * hidden,
        attention_heads=heads,
        vocab_size=51200,
        seq_len=2048,
        gated_ffn=False,
        dropout=True,
        norm="layernorm",
        position_embedding="learned",
    )


def test_shipped_gpu_files_carry_every_kernel_field() -> None:
    names = sorted(p.stem for p in GPUS.glob("*.yaml"))
    for want in ("a100-40gb", "a100-80gb", "b200", "h100-sxm", "h800", "mi300x", "mi355x"):
        assert want in names
    for path in GPUS.glob("*.yaml"):
        gpu = load(GPUSpec, path)
        missing = [
            f
            for f in KERNEL_FIELDS
            if getattr(gpu, f) is None and not (f == "boost_clock_ghz" and gpu.arch == "blackwell")
        ]
        assert missing == [], f"{path.name} lacks {missing}"
        assert "flash2" in gpu.attention_efficiency, path.name
        assert 0 < gpu.gemm_peak_fraction <= 1  # type: ignore[operator]


def test_gemm_golden_compute_bound() -> None:
    # Shape model (simulator.workload.kernels docstring) on the A100 file: 108 SMs, tile
    # 128x256, f = 0.869 (MAMF 271.2 / 312, sources.md), 3 us per kernel.
    # 4096^3 bf16: 32·16 = 512 tiles (tile_eff 1), ⌈512/108⌉ = 5 waves -> wave_eff 512/540;
    # k_eff = 4096 / (4096 + 64).
    t_c = 2 * 4096**3 / (312e12 * 0.869 * (512 / 540) * (4096 / 4160))
    t_m = 2 * 3 * 4096**2 / (2.039e12 * 0.8)
    assert t_c > t_m
    assert gemm_time_s(A100, (4096, 4096, 4096), "bf16") == pytest.approx(t_c + 3e-6, rel=1e-12)


def test_gemm_golden_tile_quantization_picks_the_better_orientation() -> None:
    # m = 2048, n = 96 (a head dim): 128x256 tiles give 16·1 tiles at 96/256 use; 256x128
    # gives 8·1 tiles at 96/128 use -> the better one: tile_eff 0.75, 8 tiles on 108 SMs
    # (wave_eff 8/108), batch 96 -> 768 tiles, ⌈768/108⌉ = 8 waves -> wave_eff 768/864.
    batch, m, n, k = 96, 2048, 96, 2048
    quant = (batch * m * n / (768 * 256 * 128)) * (768 / 864)
    t_c = 2 * batch * m * n * k / (312e12 * 0.869 * quant * (k / (k + 64)))
    t_m = 2 * batch * (m * k + k * n + m * n) / (2.039e12 * 0.8)
    expected = max(t_c, t_m) + 3e-6
    assert gemm_time_s(A100, (m, n, k), "bf16", batch=batch) == pytest.approx(expected, rel=1e-12)


def test_skinny_gemm_is_memory_bound() -> None:
    # (8 x 8192)·(8192 x 8192): 32 tiles split 4-way along K over 132 SMs, and still the
    # weight read dominates; roofline memory side
    # t = p·(m·k + k·n + m·n) / (hbm_bw · memory_efficiency) + overhead.
    t_m = 2 * (8 * 8192 + 8192 * 8192 + 8 * 8192) / (3.35e12 * 0.8)
    assert gemm_time_s(H100, (8, 8192, 8192), "bf16") == pytest.approx(t_m + 3e-6, rel=1e-12)


@pytest.mark.parametrize("gpu", [A100, H100], ids=["a100", "h100"])
def test_gemm_efficiency_rises_with_size_and_saturates(gpu: GPUSpec) -> None:
    # square, 128 .. 32768 by 4x steps (between them wave quantization makes dips, as the
    # NVIDIA Matrix Multiplication Background guide shows; the trend is what is checked)
    sizes = [128 * 4**i for i in range(5)]
    effs = [gemm_efficiency(gpu, (s, s, s), "bf16") for s in sizes]
    assert all(b >= a for a, b in zip(effs, effs[1:], strict=False)), effs
    assert effs[0] < 0.1 * effs[-1]
    frac = gpu.gemm_peak_fraction or 0.0
    # saturation: within 1% of the family's fraction at the largest sizes, never above it
    assert frac * 0.99 <= effs[-1] <= frac
    assert effs[-2] >= 0.95 * frac


def _layer_mfu(model: ModelSpec, gpu: GPUSpec, attention: str, mbs: int = 1) -> float:
    """Matmul FLOPs of one block (fwd + bwd) over its kernel-model time, per peak."""
    layout = LayoutSpec(micro_batch_size=mbs, global_batch_size=mbs, attention=attention)
    km = KernelModel(gpu)
    t = flops = 0.0
    for phase in ("fwd", "bwd"):
        for it in layer_program(model, layout, 0, phase, causal_skip=False):  # type: ignore[arg-type]
            if isinstance(it, OpCost):
                t += km.time_s(it, model.dtype)
                flops += it.flops if it.kind != "elementwise" else 0.0
    return flops / (t * gpu.peak(model.dtype))


@pytest.mark.parametrize(("gpu", "attention"), [(A100, "unfused"), (A100, "flash2"), (H100, "auto")])
def test_small_hidden_models_reach_lower_mfu(gpu: GPUSpec, attention: str) -> None:
    small = _layer_mfu(_gpt(1024, 16), gpu, attention)
    mid = _layer_mfu(_gpt(4096, 32), gpu, attention)
    large = _layer_mfu(_gpt(12288, 96), gpu, attention)
    assert small < mid < large <= (gpu.gemm_peak_fraction or 0.0)


def test_unfused_attention_writes_and_reads_the_scores() -> None:
    model = _gpt(2304, 24)
    layout = LayoutSpec(micro_batch_size=4, global_batch_size=4, attention="unfused")
    fwd = {it.name: it for it in layer_program(model, layout, 0, "fwd") if isinstance(it, OpCost)}
    scores = 4 * 24 * 2048 * 2048  # b·a·s² elements, fp16/bf16 (2 bytes)
    assert fwd["attn_softmax"].bytes == 2 * 2 * scores  # read + write the scores
    assert fwd["attn_softmax_dropout"].bytes == (2 * 2 + 1) * scores  # + one-byte mask
    assert fwd["attn_score"].gemm == (2048, 2048, 96) and fwd["attn_score"].batch == 96
    assert fwd["attn_value"].gemm == (2048, 96, 2048)
    # hidden dropout: the fused bias-dropout-add reads x and the residual, writes y and a
    # one-byte mask per element of the (b·s × h) activation
    assert fwd["attn_residual"].bytes == (3 * 2 + 1) * 4 * 2048 * 2304
    # the full s×s matrix is computed: the FLOPs equal the non-causal-skip count (eq. 3)
    unfused = step_flops(model, layout.model_copy(update={"dp": 1}), causal_skip=True)
    flash = step_flops(model, layout.model_copy(update={"attention": "flash2"}), causal_skip=False)
    assert unfused == pytest.approx(flash, rel=1e-12)


def test_unfused_attention_costs_more_than_flash_on_a100() -> None:
    model = _gpt(2304, 24)
    assert _layer_mfu(model, A100, "unfused", mbs=4) < _layer_mfu(model, A100, "flash2", mbs=4)


def test_attention_auto_resolves_per_gpu() -> None:
    assert resolve_attention(A100, "auto") == "flash2"
    assert resolve_attention(H100, "auto") == "flash3"
    assert resolve_attention(H100, "flash2") == "flash2"


def test_flash3_on_a_gpu_without_it_names_the_field_and_op() -> None:
    item = OpCost("attn_score", "attention", 1e12, 1e6, variant="flash3")
    with pytest.raises(InputError) as exc:
        KernelModel(A100).time_s(item, "bf16")
    msg = str(exc.value)
    assert "attention_efficiency.flash3" in msg and "'attn_score'" in msg and "\n" not in msg


def test_gpu_missing_a_gemm_field_names_the_field_and_op() -> None:
    partial = A100.model_copy(update={"gemm_tile": None})
    item = OpCost("mlp_up", "gemm", 2.0 * 8 * 8 * 8, 1.0, gemm=(8, 8, 8))
    with pytest.raises(InputError) as exc:
        KernelModel(partial).time_s(item, "bf16")
    assert exc.value.field == "gpu.gemm_tile"
    assert "'mlp_up'" in str(exc.value)


def test_memory_bound_op_golden() -> None:
    # t = bytes / (hbm_bw · memory_efficiency) + launches · overhead
    item = OpCost("mlp_act", "elementwise", 4e6, 3e8)
    assert KernelModel(H100).time_s(item, "bf16") == pytest.approx(3e8 / (3.35e12 * 0.8) + 3e-6, rel=1e-12)
    fused = OpCost("attn_softmax", "elementwise", 4e6, 0.0, launches=0)
    assert KernelModel(H100).time_s(fused, "bf16") == 0.0


def test_fused_attention_golden() -> None:
    # t = max(flops / (peak · attention_efficiency[variant]), bytes / (hbm · mem_eff)) + overhead;
    # H100 file: FlashAttention-3 / -2 published 0.55 / 0.35 of peak (Shah et al. 2024) at the
    # sustained-to-burst ratio 698.6 / 841.9 of BF16 tensor work (topologies/gpus/sources.md)
    item = OpCost("attn_score", "attention", 1e12, 1e8, variant="flash3")
    expected = max(1e12 / (989.4e12 * 0.456), 1e8 / (3.35e12 * 0.8)) + 3e-6
    assert KernelModel(H100).time_s(item, "bf16") == pytest.approx(expected, rel=1e-12)
    assert math.isclose(
        KernelModel(H100).time_s(OpCost("a", "attention", 1e12, 1e8, variant="flash2"), "bf16"),
        1e12 / (989.4e12 * 0.29) + 3e-6,
        rel_tol=1e-12,
    )


def test_fp8_gemms_saturate_at_their_own_measured_fraction() -> None:
    # H100 file: the GH100 die's sustained rates at 700 W (sources.md): bf16 0.708
    # (698.6 of 989.4 TFLOP/s, a node's 8 GPUs all computing), fp8 0.654 (1288.7 of 1978.9),
    # each over its shape's K ramp
    big = (32768, 32768, 32768)
    assert gemm_efficiency(H100, big, "fp8") == pytest.approx(0.654, rel=0.01)
    assert gemm_efficiency(H100, big, "bf16") == pytest.approx(0.708, rel=0.01)
    assert gemm_efficiency(H100, big, "fp8") <= 0.654 < gemm_efficiency(H100, big, "bf16")
