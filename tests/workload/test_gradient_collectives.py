"""The tied embedding's gradient all-reduce and ZeRO-1's all-reduce of the whole gradient.

Tied embeddings with pp > 1: the first stage's input embedding and the last stage's copy
(the output projection) are kept equal by an all-reduce of the embedding's gradient,
vocab·h/tp elements in the gradients' precision, between the two stages' ranks at the same
dp, tp and cp coordinates (Megatron-LM `_allreduce_embedding_grads`, DeepSpeed's
`ReduceTiedGrads`). Both ends' optimizers wait for it; untied models and pp = 1 have none.

`zero1_grad_collective: all_reduce` (DeepSpeed's BF16_Optimizer under pipeline parallelism):
ZeRO-1 all-reduces the whole gradient instead of reduce-scattering it, with the same bytes
per bucket, and still all-gathers the updated weights.
"""

from __future__ import annotations

import pytest

from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.workload.generate import build_program
from simulator.workload.layout import LayoutSpec
from simulator.workload.program import StepProgram
from tests.workload.test_schedule import GPU, TINY

TIED = TINY.model_copy(update={"tied_embeddings": True, "vocab_size": 4096})
UNTIED = TIED.model_copy(update={"tied_embeddings": False})


def _program(model=TIED, pp: int = 4, dp: int = 2, tp: int = 2, **layout: object) -> StepProgram:  # type: ignore[no-untyped-def]
    gpus = pp * dp * tp
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=gpus, link_gbyte_per_s=1000, latency_us=0), GPU), GPU
    )
    spec = LayoutSpec(tp=tp, pp=pp, dp=dp, global_batch_size=8 * dp, **layout)  # type: ignore[arg-type]
    return build_program(model, spec, cluster.gpus, cluster.graph)


def _tied(program: StepProgram) -> list:  # type: ignore[type-arg]
    return [op for op in program.ops if op.id.startswith("tied_embedding_grad")]


@pytest.mark.parametrize("main_grads,element_bytes", [("model", 2), ("fp32", 4)])
def test_one_all_reduce_of_the_embedding_gradient_between_first_and_last_stage(
    main_grads: str, element_bytes: int
) -> None:
    program = _program(main_grads=main_grads)
    tied = _tied(program)
    assert len(tied) == 1  # one simulated pair (representatives); the others are its mirrors
    op = tied[0]
    first, last = op.ranks
    stage = {r: role for r, role in program.role.items()}
    assert (stage[first], stage[last]) == ("pp0", "pp3")
    assert op.collective == "all_reduce"
    assert op.size_bytes == pytest.approx(TIED.vocab_size * TIED.hidden_size / 2 * element_bytes)
    # the pairs it stands for: every other (dp, tp) position, each a first- and last-stage rank
    assert len(op.mirrors) == 2 * 2 - 1
    assert all(len(m) == 2 for m in op.mirrors)


def test_both_ends_optimizers_wait_for_it_and_it_waits_for_both_backwards() -> None:
    program = _program()
    op = _tied(program)[0]
    ops = {o.id: o for o in program.ops}
    first, last = op.ranks
    for r in (first, last):
        opt = next(o for o in program.ops if o.tag == "optimizer" and o.ranks == (r,))
        assert op.id in opt.deps  # the last op on the rank's dp stream before the step
    # each dependency is a backward compute op of one end
    assert {ops[d].ranks for d in op.deps} == {(first,), (last,)}
    assert all(ops[d].kind == "compute" for d in op.deps)


@pytest.mark.parametrize("model,pp", [(UNTIED, 4), (TIED, 1)])
def test_none_for_untied_models_or_one_stage(model, pp: int) -> None:  # type: ignore[no-untyped-def]
    assert _tied(_program(model, pp=pp)) == []


def test_stages_between_the_ends_are_unchanged() -> None:
    """The middle stages' ops are those of the untied model, op for op (ids aside)."""
    tied, untied = _program(TIED), _program(UNTIED)

    def middle(program: StepProgram) -> list[tuple[object, ...]]:
        mid = {r for r, role in program.role.items() if role in ("pp1", "pp2")}
        return [
            (o.kind, o.collective, o.ranks, o.size_bytes, o.tag) for o in program.ops if set(o.ranks) <= mid
        ]

    assert middle(tied) == middle(untied)


def test_zero1_all_reduce_moves_the_same_buckets_and_still_gathers() -> None:
    scatter = _program(UNTIED, zero_stage=1)
    reduce = _program(UNTIED, zero_stage=1, zero1_grad_collective="all_reduce")

    def grads(program: StepProgram, kind: str) -> list[float]:
        return [o.size_bytes for o in program.ops if o.tag == "dp" and o.collective == kind]

    assert grads(reduce, "reduce_scatter") == []
    assert grads(reduce, "all_reduce") == grads(scatter, "reduce_scatter") != []
    assert grads(reduce, "all_gather") == grads(scatter, "all_gather") != []


def test_zero1_grad_collective_is_ignored_by_other_stages() -> None:
    for zero in (0, 2):
        base = _program(UNTIED, zero_stage=zero)
        other = _program(UNTIED, zero_stage=zero, zero1_grad_collective="all_reduce")
        assert [(o.collective, o.size_bytes) for o in base.ops] == [
            (o.collective, o.size_bytes) for o in other.ops
        ]
