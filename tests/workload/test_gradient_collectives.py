"""The tied embedding's gradient all-reduce and ZeRO-1's all-reduce of the whole gradient.

Tied embeddings with pp > 1: the first stage's input embedding and the last stage's copy
(the output projection) are kept equal by an all-reduce of the embedding's gradient,
vocab·h/tp elements in the gradients' precision, between the two stages' ranks at the same
dp, tp and cp coordinates (Megatron-LM `_allreduce_embedding_grads`, DeepSpeed's
`ReduceTiedGrads`). It waits for the last micro-batch's embedding backward on the first
stage and output-layer backward on the last; it runs on the dp stream after both stages'
gradient buckets (`tied_embedding_sync: after_dp`, Megatron-LM) or before them
(`before_dp`, DeepSpeed); both ends' optimizers wait for it. Untied models and pp = 1 have
none.

`zero1_grad_collective: all_reduce` (DeepSpeed's BF16_Optimizer under pipeline parallelism):
ZeRO-1 all-reduces the whole gradient instead of reduce-scattering it, with the same bytes
per bucket, keeps the optimizer sharded and still all-gathers the updated weights.
"""

from __future__ import annotations

import pytest

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.workload.generate import FidelitySpec, build_program
from simulator.workload.layout import LayoutSpec, RankGrid
from simulator.workload.model import ModelSpec
from simulator.workload.program import Op, StepProgram
from tests.workload.test_schedule import GPU, TINY

TIED = TINY.model_copy(update={"tied_embeddings": True, "vocab_size": 4096})
UNTIED = TIED.model_copy(update={"tied_embeddings": False})
MICRO_BATCHES = 8


def _setup(
    model: ModelSpec = TIED, pp: int = 4, dp: int = 2, tp: int = 2, reps: bool = True, **layout: object
) -> tuple[Cluster, LayoutSpec, StepProgram]:
    cp = int(layout.get("cp", 1))  # type: ignore[call-overload]
    gpus = pp * dp * tp * cp
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=gpus, link_gbyte_per_s=1000, latency_us=0), GPU), GPU
    )
    spec = LayoutSpec(tp=tp, pp=pp, dp=dp, global_batch_size=MICRO_BATCHES * dp, **layout)  # type: ignore[arg-type]
    fidelity = FidelitySpec(representatives=reps)
    return cluster, spec, build_program(model, spec, cluster.gpus, cluster.graph, fidelity)


def _program(model: ModelSpec = TIED, pp: int = 4, **kw: object) -> StepProgram:
    return _setup(model, pp, **kw)[2]  # type: ignore[arg-type]


def _tied(program: StepProgram) -> list[Op]:
    return [op for op in program.ops if op.id.startswith("tied_embedding_grad")]


def _run(cluster: Cluster, program: StepProgram) -> dict[tuple[str, int], tuple[float, float]]:
    """(op id, rank) -> (started_at_s, finished_at_s) of one simulated step."""
    ctx = SimContext(0)
    sim = StepSimulator(ctx, cluster, program, ComputeCost(GPU, None, 0.0, ctx.rng("compute")))
    sim.run(1)
    return {(r.op_id, r.rank): (r.started_at_s, r.finished_at_s) for r in sim.op_rows}


@pytest.mark.parametrize("main_grads,element_bytes", [("model", 2), ("fp32", 4)])
def test_one_all_reduce_of_the_embedding_gradient_between_first_and_last_stage(
    main_grads: str, element_bytes: int
) -> None:
    program = _program(main_grads=main_grads)
    tied = _tied(program)
    assert len(tied) == 1  # one simulated pair (representatives); the others are its mirrors
    op = tied[0]
    first, last = op.ranks
    assert (program.role[first], program.role[last]) == ("pp0", "pp3")
    assert op.collective == "all_reduce" and op.tag == "dp"
    assert op.size_bytes == pytest.approx(TIED.vocab_size * TIED.hidden_size / 2 * element_bytes)


@pytest.mark.parametrize(
    "pp,reps,layout",
    [(4, True, {}), (2, True, {}), (4, False, {}), (2, True, {"cp": 2}), (2, False, {"cp": 2})],
)
def test_the_pairs_cover_every_dp_tp_cp_position_once(pp: int, reps: bool, layout: dict[str, int]) -> None:
    """Simulated pairs and their mirrors are exactly the (first-stage, last-stage) rank pairs
    at equal dp, tp and cp coordinates, each once."""
    _, spec, program = _setup(TIED, pp, reps=reps, **layout)
    grid = RankGrid(spec)
    pairs = [p for op in _tied(program) for p in (op.group, *op.mirrors)]
    expected = {
        (grid.rank(dp=d, pp=0, tp=t, cp=c), grid.rank(dp=d, pp=pp - 1, tp=t, cp=c))
        for d in range(spec.dp)
        for t in range(spec.tp)
        for c in range(spec.cp)
    }
    assert len(pairs) == len(expected) and set(pairs) == expected
    assert len(_tied(program)) == (1 if reps else spec.dp * spec.tp) * spec.cp


@pytest.mark.parametrize("schedule,v", [("1f1b", 1), ("interleaved_1f1b", 2)])
def test_it_waits_for_the_last_micro_batch_of_both_ends(schedule: str, v: int) -> None:
    """Its deps are the last micro-batch's backward of the embedding (virtual stage 0) and of
    the output layer (the last virtual stage), the last such ops of their ranks."""
    program = _program(pp_schedule=schedule, virtual_stages=v)
    op = _tied(program)[0]
    first, last = op.ranks
    by_id = {o.id: o for o in program.ops}
    end = MICRO_BATCHES - 1
    emb, out = (by_id[d] for d in op.deps)
    assert emb.ranks == (first,) and out.ranks == (last,)
    assert emb.id.startswith(f"B{end}v0.emb") and out.id.startswith(f"F{end}v{4 * v - 1}.outb")
    assert emb.tag == "bwd" and out.tag == "bwd"


@pytest.mark.parametrize("order", ["after_dp", "before_dp"])
def test_simulated_it_runs_where_its_order_says_and_the_optimizers_wait(order: str) -> None:
    cluster, _, program = _setup(TIED, zero_stage=1, tied_embedding_sync=order)
    times = _run(cluster, program)
    op = _tied(program)[0]
    for r in op.ranks:
        tied_start, tied_end = times[(op.id, r)]
        buckets = [times[(o.id, r)] for o in program.ops if ".grad_dp_cp[" in o.id and r in o.ranks]
        assert buckets
        if order == "after_dp":
            assert tied_start >= max(end for _, end in buckets)
        else:
            assert tied_end <= min(start for start, _ in buckets)
        # the optimizer waits for the last op of the rank's dp stream: this one or a bucket
        opt = next(o for o in program.ops if o.tag == "optimizer" and o.ranks == (r,))
        assert (op.id in opt.deps) == (order == "after_dp")
        assert times[(opt.id, r)][0] >= max(tied_end, *(end for _, end in buckets))


@pytest.mark.parametrize("model,pp", [(UNTIED, 4), (TIED, 1)])
def test_none_for_untied_models_or_one_stage(model: ModelSpec, pp: int) -> None:
    assert _tied(_program(model, pp)) == []


def test_stages_between_the_ends_are_unchanged() -> None:
    """The middle stages' ops are those of the untied model, op for op (ids aside)."""
    tied, untied = _program(TIED), _program(UNTIED)

    def middle(program: StepProgram) -> list[tuple[object, ...]]:
        mid = {r for r, role in program.role.items() if role in ("pp1", "pp2")}
        return [
            (o.kind, o.collective, o.ranks, o.size_bytes, o.tag) for o in program.ops if set(o.ranks) <= mid
        ]

    assert middle(tied) == middle(untied)


def test_zero1_all_reduce_moves_the_same_buckets_keeps_the_shard_and_still_gathers() -> None:
    scatter = _program(UNTIED, zero_stage=1)
    reduce = _program(UNTIED, zero_stage=1, zero1_grad_collective="all_reduce")

    def grads(program: StepProgram, kind: str) -> list[float]:
        return [o.size_bytes for o in program.ops if o.tag == "dp" and o.collective == kind]

    def optimizer_bytes(program: StepProgram) -> list[float]:
        return [o.bytes_accessed for o in program.ops if o.tag == "optimizer"]

    assert grads(reduce, "reduce_scatter") == []
    assert grads(reduce, "all_reduce") == grads(scatter, "reduce_scatter") != []
    assert grads(reduce, "all_gather") == grads(scatter, "all_gather") != []
    assert optimizer_bytes(reduce) == optimizer_bytes(scatter)  # the shard, not the whole
    assert optimizer_bytes(_program(UNTIED, zero_stage=0)) == pytest.approx(
        [2 * b for b in optimizer_bytes(reduce)]
    )


def test_zero1_grad_collective_is_ignored_by_other_stages() -> None:
    for zero in (0, 2):
        base = _program(UNTIED, zero_stage=zero)
        other = _program(UNTIED, zero_stage=zero, zero1_grad_collective="all_reduce")
        assert [(o.collective, o.size_bytes) for o in base.ops] == [
            (o.collective, o.size_bytes) for o in other.ops
        ]
