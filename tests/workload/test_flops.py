"""Per-op FLOPs and communication volumes against closed-form formulas."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.workload.flops import (
    CommCost,
    OpCost,
    layer_program,
    output_program,
)
from simulator.workload.layout import LayoutSpec, end_rank_params, stage_rank_params
from simulator.workload.model import ModelSpec, load_model
from simulator.workload.step_flops import mfu_flops_per_step, step_flops
from tests.workload.flops_reference import dp_comms, layer_comms, layer_ops, pp_comms

MODELS = Path(__file__).resolve().parents[2] / "workloads" / "models"
GPT3 = load_model(MODELS / "gpt3-175b.yaml")
MIXTRAL = load_model(MODELS / "mixtral-8x7b.yaml")
DSV3 = load_model(MODELS / "deepseek-v3.yaml")


def narayanan_flops_per_step(model: ModelSpec, batch_size: int) -> float:
    """Model FLOPs per step by Narayanan et al., SC'21, eq. 3.

    `96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`: GPT blocks (MHA, ffn = 4h, non-gated), full
    activation recomputation (four forward passes per layer: fwd, recompute, 2× in bwd),
    logits counted without recomputation, attention without causal halving.
    """
    B, s, layers, h, V = batch_size, model.seq_len, model.layers, model.hidden_size, model.vocab_size
    return 96.0 * B * s * layers * h * h * (1 + s / (6 * h) + V / (16 * layers * h))


def _matmul(ops: list) -> float:
    return sum(o.flops for o in ops if isinstance(o, OpCost) and o.kind in ("gemm", "attention"))


@pytest.mark.parametrize(
    "layout",
    [
        LayoutSpec(global_batch_size=4, micro_batch_size=4, recompute="full"),
        LayoutSpec(
            dp=2,
            tp=8,
            pp=4,
            sequence_parallel=True,
            global_batch_size=16,
            micro_batch_size=2,
            recompute="full",
        ),
    ],
)
def test_per_op_sum_equals_narayanan_eq3(layout: LayoutSpec) -> None:
    """Narayanan et al., SC'21, eq. 3: `96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))` for GPT-3
    175B with full recomputation. Our per-op sum (every layer fwd + bwd + recompute, logits
    fwd + bwd, no causal halving) over all ranks matches within 1% (exactly, in fact)."""
    ours = step_flops(GPT3, layout, causal_skip=False)
    eq3 = narayanan_flops_per_step(GPT3, layout.global_batch_size)
    assert ours == pytest.approx(eq3, rel=0.01)
    assert ours == pytest.approx(eq3, rel=1e-9)


def test_layer_forward_is_24bsh2_plus_4bs2h() -> None:
    """Narayanan et al. SC'21 §5.1: a GPT layer's forward is 24·B·s·h² + 4·B·s²·h FLOPs."""
    L = LayoutSpec(global_batch_size=1)
    s, h = GPT3.seq_len, GPT3.hidden_size
    ops = layer_ops(GPT3, L, 0, "fwd", causal_skip=False)
    assert _matmul(ops) == pytest.approx(24 * s * h * h + 4 * s * s * h, rel=1e-12)
    causal = layer_ops(GPT3, L, 0, "fwd", causal_skip=True)
    assert _matmul(causal) == pytest.approx(24 * s * h * h + 2 * s * s * h, rel=1e-12)


def test_backward_is_twice_forward_and_tp_divides() -> None:
    L1 = LayoutSpec(global_batch_size=1)
    L8 = LayoutSpec(tp=8, global_batch_size=1)
    fwd = _matmul(layer_ops(GPT3, L1, 5, "fwd"))
    assert _matmul(layer_ops(GPT3, L1, 5, "bwd")) == pytest.approx(2 * fwd)
    assert _matmul(layer_ops(GPT3, L8, 5, "fwd")) == pytest.approx(fwd / 8)
    # cp divides the attention core and the GEMMs alike (each rank has s/cp queries)
    L2 = LayoutSpec(cp=2, global_batch_size=1)
    assert _matmul(layer_ops(GPT3, L2, 5, "fwd")) == pytest.approx(fwd / 2)


def test_mfu_convention_palm() -> None:
    """PaLM (Chowdhery et al. 2022) App. B: model FLOPs per token = 6·N + 12·l·h·s (no
    causal halving); for GPT-3 that is ≈ 3/4 of eq. 3 per token (eq. 3 adds recompute)."""
    tokens = 1000 * GPT3.seq_len
    per_token = mfu_flops_per_step(GPT3, tokens) / tokens
    N = GPT3.matmul_params()
    layers, h, s = GPT3.layers, GPT3.hidden_size, GPT3.seq_len
    assert per_token == pytest.approx(6 * N + 12 * layers * h * s)
    eq3 = narayanan_flops_per_step(GPT3, 1000) / tokens
    assert per_token == pytest.approx(0.75 * eq3, rel=0.01)


def test_moe_layer_flops_follow_top_k() -> None:
    """Mixtral MoE block forward: router 2·T·h·E plus top-2 SwiGLU experts 2·T·k·3·h·f."""
    L = LayoutSpec(global_batch_size=1)
    T, h = MIXTRAL.seq_len, MIXTRAL.hidden_size
    ops = {o.name: o for o in layer_ops(MIXTRAL, L, 0, "fwd")}
    assert ops["router"].flops == 2 * T * h * 8
    experts = ops["experts_up"].flops + ops["experts_down"].flops
    assert experts == 2 * T * 2 * 3 * h * 14336
    assert "mlp_up" not in ops


def test_deepseek_mla_flops_cover_active_params() -> None:
    """DeepSeek-V3 MoE block forward GEMMs ≈ 2·T·(active block params) (dense-equivalent)."""
    L = LayoutSpec(global_batch_size=1)
    T = DSV3.seq_len
    ops = layer_ops(DSV3, L, 10, "fwd")
    gemm = sum(o.flops for o in ops if o.kind == "gemm")
    k = DSV3.layer_params(10)
    active = k["attention"] + k["router"] + k["shared_experts"] + k["moe_experts"] * 8 / 256
    assert gemm == pytest.approx(2 * T * active, rel=1e-3)


def test_tp_comms_with_and_without_sequence_parallel() -> None:
    """Megatron TP: 2 all-reduces fwd and 2 bwd of b·s·h·2 bytes; with SP each becomes an
    all-gather + reduce-scatter of the same buffer, and the backward gathers each region's
    stored (sharded) input again for its weight gradient before the GEMM that reads it
    (Korthikanti et al. 2022 §4.2.2): 3 collectives per region in the backward, not 2."""
    act = 2 * GPT3.seq_len * GPT3.hidden_size
    L = LayoutSpec(tp=8, global_batch_size=1)
    fwd = layer_comms(GPT3, L, 0, "fwd")
    assert [(c.collective, c.bytes) for c in fwd] == [("all_reduce", act)] * 2
    assert [c.collective for c in layer_comms(GPT3, L, 0, "bwd")] == ["all_reduce"] * 2
    SP = LayoutSpec(tp=8, sequence_parallel=True, global_batch_size=1)
    fwd_sp = layer_comms(GPT3, SP, 0, "fwd")
    assert [c.collective for c in fwd_sp] == [
        "all_gather",
        "reduce_scatter",
        "all_gather",
        "reduce_scatter",
    ]
    assert all(c.bytes == act and c.group == "tp" for c in fwd_sp)
    bwd_sp = layer_comms(GPT3, SP, 0, "bwd")
    assert [(c.name, c.collective) for c in bwd_sp] == [
        ("tp_mlp_out_rs_bwd", "all_gather"),
        ("tp_mlp_in_ag_wgrad", "all_gather"),
        ("tp_mlp_in_ag_bwd", "reduce_scatter"),
        ("tp_attn_out_rs_bwd", "all_gather"),
        ("tp_attn_in_ag_wgrad", "all_gather"),
        ("tp_attn_in_ag_bwd", "reduce_scatter"),
    ]
    assert all(c.bytes == act and c.group == "tp" for c in bwd_sp)
    names = [o.name for o in layer_program(GPT3, SP, 0, "bwd")]  # just before the GEMM that reads it
    assert names[names.index("tp_attn_in_ag_wgrad") + 1 : names.index("tp_attn_in_ag_wgrad") + 3] == [
        "qkv_dgrad",
        "qkv_wgrad",
    ]


def test_sp_gathers_of_an_fp8_gemms_input_move_its_fp8_copy() -> None:
    """Transformer Engine casts a column-parallel GEMM's input (the norm's output) to fp8
    and then all-gathers it, forward and again for the weight gradient: 1 byte per element.
    The reduce-scatters, the output gradient's gathers and the bf16 logits' input stay at
    the stored 2 bytes. (Every gather counted 2 bytes before.)"""
    fp8 = GPT3.model_copy(update={"dtype": "fp8"})
    act = 2 * GPT3.seq_len * GPT3.hidden_size
    SP = LayoutSpec(tp=8, sequence_parallel=True, global_batch_size=1)
    fwd = {c.name: c.bytes for c in layer_comms(fp8, SP, 0, "fwd")}
    assert fwd == {
        "tp_attn_in_ag": act / 2, "tp_attn_out_rs": act, "tp_mlp_in_ag": act / 2, "tp_mlp_out_rs": act,
    }  # fmt: skip
    bwd = {c.name: c.bytes for c in layer_comms(fp8, SP, 0, "bwd")}
    assert bwd["tp_attn_in_ag_wgrad"] == bwd["tp_mlp_in_ag_wgrad"] == act / 2
    assert bwd["tp_attn_in_ag_bwd"] == bwd["tp_attn_out_rs_bwd"] == bwd["tp_mlp_out_rs_bwd"] == act
    logits = {o.name: o.bytes for o in output_program(fp8, SP, "fwd") if o.name.startswith("tp_")}
    assert logits["tp_logits_in_ag"] == act
    bf16 = {c.name: c.bytes for c in layer_comms(GPT3, SP, 0, "fwd")}
    assert bf16["tp_attn_in_ag"] == bf16["tp_mlp_in_ag"] == act


def test_ep_cp_pp_volumes() -> None:
    L = LayoutSpec(dp=8, ep=8, cp=2, global_batch_size=8)
    comms = {c.name: c for c in layer_comms(MIXTRAL, L, 0, "fwd")}
    T = MIXTRAL.seq_len // 2
    assert comms["ep_dispatch"].bytes == 2 * T * 2 * MIXTRAL.hidden_size  # p·T·k·h
    assert comms["ep_combine"].collective == "all_to_all"
    ring = comms["cp_kv_ring"]
    assert (ring.count, ring.bytes) == (1, 2 * T * 8 * 128 * 2)  # K and V of 8 kv heads
    P = LayoutSpec(pp=4, tp=8, sequence_parallel=True, global_batch_size=4)
    (send,) = pp_comms(GPT3, P, "fwd")
    assert send.bytes == 2 * GPT3.seq_len * GPT3.hidden_size / 8


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_dp_gradient_traffic_by_zero_stage(zero: int) -> None:
    """ZeRO (Rajbhandari et al. 2020): stage 0 all-reduces gradients (2Ψ bytes); 1/2
    reduce-scatter them and all-gather the weights; 3 does it per layer (fwd gather, bwd
    gather + reduce-scatter)."""
    L = LayoutSpec(dp=4, tp=2, pp=2, zero_stage=zero, grad_bucket_mb=64, global_batch_size=8)
    comms = dp_comms(GPT3, L, 0)
    grad_bytes = 2 * stage_rank_params(GPT3, L, 0).total
    kinds = {c.collective for c in comms}
    if zero == 0:
        assert kinds == {"all_reduce"}
        assert sum(c.bytes for c in comms) == pytest.approx(grad_bytes)
        assert max(c.bytes for c in comms) <= 64 * 2**20
    elif zero in (1, 2):
        assert kinds == {"reduce_scatter", "all_gather"}
        rs = sum(c.bytes for c in comms if c.collective == "reduce_scatter")
        assert rs == pytest.approx(grad_bytes)
    else:
        fwd = [c.collective for c in layer_comms(GPT3, L, 0, "fwd")]
        bwd = [c.collective for c in layer_comms(GPT3, L, 0, "bwd")]
        assert fwd[0] == "all_gather" and bwd[-2:] == ["all_gather", "reduce_scatter"]
        # only the embedding (and learned positions) of stage 0 remain here
        rs = sum(c.bytes for c in comms if c.collective == "reduce_scatter")
        assert rs == pytest.approx(2 * end_rank_params(GPT3, L, 0).total)


def test_recompute_phase() -> None:
    none = LayoutSpec(global_batch_size=1)
    sel = LayoutSpec(recompute="selective", global_batch_size=1)
    full = LayoutSpec(recompute="full", tp=2, global_batch_size=1)
    assert layer_program(GPT3, none, 0, "recompute") == []
    assert {o.name for o in layer_program(GPT3, sel, 0, "recompute")} == {
        "recompute_attn_score",
        "recompute_attn_softmax",
        "recompute_attn_value",
    }
    rec = layer_program(GPT3, full, 0, "recompute")
    fwd = layer_program(GPT3, full, 0, "fwd")
    assert [x.name for x in rec] == [f"recompute_{x.name}" for x in fwd]
    assert any(isinstance(x, CommCost) for x in rec)
    assert output_program(GPT3, full, "recompute") == []
