"""ZeRO-2 gradients reduce-scattered after every micro-batch (`zero2_reduce_per_micro_batch`).

Sharded gradients cannot be accumulated whole, so PyTorch FSDP's SHARD_GRAD_OP (what Llama 3
405B ran, Dubey et al. 2024 §3.3.2) reduce-scatters each layer's gradients after every
micro-batch's backward. Checked on TINY (16 layers) at DP2 with 4 micro-batches: with the
setting every layer is reduce-scattered once per micro-batch, in the gradients' precision,
each after that layer's backward; the layers' bytes are the once-per-step reduction's times
the micro-batches; only the embedding / output gradients remain for the step's end.
"""

from __future__ import annotations

import pytest

from simulator.workload.generate import build_program
from simulator.workload.layout import LayoutSpec, layer_rank_params
from simulator.workload.program import StepProgram
from tests.workload.test_param_prefetch import _program as _switch_program
from tests.workload.test_schedule import TINY

MICRO_BATCHES = 4


def _program(per_micro_batch: bool, main_grads: str = "model", fused: bool = True) -> StepProgram:
    cluster, _ = _switch_program(False)
    layout = LayoutSpec(
        dp=2,
        zero_stage=2,
        global_batch_size=2 * MICRO_BATCHES,
        zero2_reduce_per_micro_batch=per_micro_batch,
        main_grads=main_grads,
        grad_accumulation_fusion=fused,
    )
    return build_program(TINY, layout, cluster.gpus, cluster.graph)


def _reductions(program: StepProgram) -> list:  # type: ignore[type-arg]
    return [op for op in program.ops if op.collective == "reduce_scatter" and 0 in op.ranks]


@pytest.mark.parametrize("main_grads,element_bytes", [("model", 2), ("fp32", 4)])
def test_every_layer_is_reduced_after_each_micro_batch(main_grads: str, element_bytes: int) -> None:
    once, every = _program(False, main_grads), _program(True, main_grads)
    per_layer = [op for op in _reductions(every) if "zero2_grad_rs" in op.id]
    assert len(per_layer) == TINY.layers * MICRO_BATCHES
    layer_params = layer_rank_params(TINY, LayoutSpec(dp=2, global_batch_size=2), 0).dense
    assert layer_params > 12 * TINY.hidden_size**2  # a whole block (no tp split)
    assert all(op.size_bytes == pytest.approx(layer_params * element_bytes) for op in per_layer)
    once_bytes = sum(op.size_bytes for op in _reductions(once))
    ends_bytes = sum(op.size_bytes for op in _reductions(every) if "zero2_grad_rs" not in op.id)
    assert ends_bytes < once_bytes / TINY.layers  # only the embedding / output weights remain
    assert sum(op.size_bytes for op in per_layer) == pytest.approx(MICRO_BATCHES * (once_bytes - ends_bytes))
    bwd = {op.id: op for op in every.ops if op.tag == "bwd"}
    assert all(any(d in bwd for d in op.deps) for op in per_layer)  # each after a backward


def test_the_updated_weights_are_still_gathered_whole() -> None:
    """Reducing per micro-batch changes when gradients move, not the weights' all-gather
    after the optimizer (ZeRO-2 keeps whole weights)."""

    def gathered(program: StepProgram) -> float:
        return sum(op.size_bytes for op in program.ops if op.collective == "all_gather" and 0 in op.ranks)

    once, every = _program(False), _program(True)
    assert gathered(once) > 0
    assert gathered(every) == pytest.approx(gathered(once))


def test_the_reduce_scatter_waits_for_the_fp32_accumulation_it_reduces() -> None:
    """With fp32 main gradients accumulated by a separate kernel, each layer's
    per-micro-batch reduce-scatter waits for a compute op that follows (in the rank's
    compute-stream order, `workload/program.py`) the op holding that layer's accumulation."""
    program = _program(True, "fp32", fused=False)
    compute = [op for op in program.ops if 0 in op.ranks and op.kind == "compute"]
    position = {op.id: i for i, op in enumerate(compute)}
    per_layer = [op for op in _reductions(program) if "zero2_grad_rs" in op.id]
    assert len(per_layer) == TINY.layers * MICRO_BATCHES
    for op in per_layer:
        prefix = op.id.split(".zero2_grad_rs")[0] + "."  # e.g. B0v0.L15.
        acc = [
            i
            for i, c in enumerate(compute)
            if c.id.startswith(prefix) and any(k.name == "main_grad_acc" for k in c.kernels)
        ]
        waits = [position[d] for d in op.deps if d in position]
        assert len(acc) == 1 and waits and max(waits) >= acc[0], (op.id, acc, waits)


def test_per_micro_batch_reduction_without_overlap_is_refused() -> None:
    with pytest.raises(ValueError, match="needs overlap_grad_reduce: true"):
        LayoutSpec(
            dp=2,
            zero_stage=2,
            global_batch_size=8,
            zero2_reduce_per_micro_batch=True,
            overlap_grad_reduce=False,
        )
