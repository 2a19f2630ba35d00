"""Gradient precision (`main_grads`) and the activations FP8 training keeps.

Golden figures:
    * Megatron-LM accumulates and all-reduces bf16 gradients in fp32
      (`megatron/training/arguments.py`: "bfloat16 requires gradient accumulation and
      all-reduce to be done in fp32"), Llama 3 405B accumulates in fp32 and reduce-scatters
      in fp32 (Dubey et al. 2024, §3.3.2): the gradient reduction carries 4 bytes per
      parameter instead of 2, the weights' all-gather still 2, and the gradient state is
      4 bytes per parameter (Megatron's 18 bytes per parameter with Adam, not 16).
    * Accumulated by its own kernel (no fused wgrad epilogue), each layer and micro-batch
      reads its bf16 weight gradients and the fp32 buffer and writes the buffer back:
      (2 + 4 + 4) bytes per local parameter.
    * Transformer Engine keeps an FP8 GEMM's input for the weight gradient as its 1-byte
      cast: per layer and token the QKV, MLP and down-projection inputs drop from 2 to 1
      byte per element and the out-projection input adds a 1-byte copy beside the bf16
      attention output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.workload.flops import layer_program
from simulator.workload.generate import build_program
from simulator.workload.layout import LayoutSpec, layer_rank_params
from simulator.workload.memory import layer_activation_bytes, model_state_bytes
from simulator.workload.model import load_model
from tests.workload.test_schedule import GPU, TINY

MODELS = Path(__file__).resolve().parents[2] / "workloads" / "models"
LLAMA8 = load_model(MODELS / "llama3-8b.yaml")


def _dp_bytes(main_grads: str) -> tuple[float, float]:
    """(gradient reduce-scatter bytes, weight all-gather bytes) of rank 0's step, ZeRO-1, DP2."""
    layout = LayoutSpec(dp=2, zero_stage=1, global_batch_size=2, main_grads=main_grads)
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=2, link_gbyte_per_s=10, latency_us=0), GPU), GPU
    )
    program = build_program(TINY, layout, cluster.gpus, cluster.graph)
    dp = [op for op in program.ops if op.tag == "dp" and 0 in op.ranks]
    rs = sum(op.size_bytes for op in dp if op.collective == "reduce_scatter")
    ag = sum(op.size_bytes for op in dp if op.collective == "all_gather")
    return rs, ag


def test_fp32_main_grads_double_the_gradient_reduction_not_the_weight_gather() -> None:
    rs_model, ag_model = _dp_bytes("model")
    rs_fp32, ag_fp32 = _dp_bytes("fp32")
    assert rs_model > 0 and ag_model == pytest.approx(rs_model)
    assert rs_fp32 == pytest.approx(2 * rs_model)
    assert ag_fp32 == pytest.approx(ag_model)


def test_fp32_main_grads_hold_four_gradient_bytes_per_parameter() -> None:
    base = LayoutSpec(tp=2, pp=2, dp=2, zero_stage=1, global_batch_size=4)
    fp32 = base.model_copy(update={"main_grads": "fp32"})
    s16, s18 = model_state_bytes(LLAMA8, base, 0), model_state_bytes(LLAMA8, fp32, 0)
    assert s18.gradients_bytes == pytest.approx(2 * s16.gradients_bytes)
    assert (s18.weights_bytes, s18.optimizer_bytes) == (s16.weights_bytes, s16.optimizer_bytes)


@pytest.mark.parametrize("fused", [True, False])
def test_unfused_accumulation_is_one_memory_bound_op_per_layer(fused: bool) -> None:
    layout = LayoutSpec(tp=2, global_batch_size=1, main_grads="fp32", grad_accumulation_fusion=fused)
    bwd = layer_program(LLAMA8, layout, 3, "bwd")
    acc = [x for x in bwd if x.name == "main_grad_acc"]
    if fused:
        assert acc == []
        return
    (op,) = acc
    assert bwd[-1] is op  # after the layer's weight gradients
    assert op.kind == "elementwise"
    assert op.bytes == pytest.approx((2 + 4 + 4) * layer_rank_params(LLAMA8, layout, 3).total)
    assert all(x.name != "main_grad_acc" for x in layer_program(LLAMA8, layout, 3, "fwd"))


def test_fp8_keeps_gemm_inputs_as_one_byte_casts() -> None:
    fp8 = LLAMA8.model_copy(update={"dtype": "fp8"})
    layout = LayoutSpec(tp=2, sequence_parallel=True, recompute="selective", global_batch_size=1)
    T, h, f, t = LLAMA8.seq_len, LLAMA8.hidden_size, LLAMA8.ffn_hidden_size, 2
    out_proj_in = LLAMA8.attention_heads * LLAMA8.v_head_dim / t
    saved = T * (2 * h / t + f / t) - T * out_proj_in  # 1 byte less each; + a 1-byte copy
    got = layer_activation_bytes(LLAMA8, layout, 0) - layer_activation_bytes(fp8, layout, 0)
    assert got == pytest.approx(saved)
