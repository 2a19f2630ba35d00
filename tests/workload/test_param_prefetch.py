"""Prefetching the updated weights' all-gather under the next step's forward (ZeRO-1/2).

`overlap_param_gather` (Megatron-LM `--overlap-param-gather`; MegaScale, Jiang et al.
NSDI'24 §3.2: the all-gather of the next iteration's parameters is prefetched during the
first micro-batches' forward). Checked: the same bytes are gathered either way; with the
prefetch the gathers start the step (no dependency) and each layer's first forward waits
for its bucket, nothing follows the optimizer, and the step is shorter by the gather time
the forward hides: every bucket's but the first (the first layer has nothing to run under).
"""

from __future__ import annotations

import pytest

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.workload.generate import build_program
from simulator.workload.layout import LayoutSpec
from simulator.workload.program import StepProgram
from tests.workload.test_schedule import GPU, TINY

MB = 1024 * 1024


def _program(prefetch: bool, zero: int = 1) -> tuple[Cluster, StepProgram]:
    """TINY (16 layers of 12.6M parameters) at DP2 over a 1,000 GB/s switch: two layers
    (50 MB of bf16 gradients) per 40 MiB bucket, whose all-gather (25 MB per rank, 25 us)
    takes about half the forward of the two layers of micro-batch 0 (2 x 26 us)."""
    layout = LayoutSpec(
        dp=2,
        zero_stage=zero,
        global_batch_size=8,
        grad_bucket_bytes=40 * MB,
        overlap_param_gather=prefetch,
    )
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=2, link_gbyte_per_s=1000, latency_us=0), GPU), GPU
    )
    return cluster, build_program(TINY, layout, cluster.gpus, cluster.graph)


def _run(cluster: Cluster, program: StepProgram) -> list:  # type: ignore[type-arg]
    ctx = SimContext(0)
    sim = StepSimulator(ctx, cluster, program, ComputeCost(GPU, None, 0.0, ctx.rng("compute")))
    sim.run(1)
    return list(sim.op_rows)


def _gathers(program: StepProgram) -> list:  # type: ignore[type-arg]
    return [op for op in program.ops if op.collective == "all_gather" and 0 in op.ranks]


def test_prefetch_gathers_the_same_bytes_before_the_forward_that_needs_them() -> None:
    _, off = _program(False)
    _, on = _program(True)
    gathered_bytes = sum(op.size_bytes for op in _gathers(off))
    assert sum(op.size_bytes for op in _gathers(on)) == pytest.approx(gathered_bytes)
    gathers = {op.id for op in _gathers(on)}
    assert len(gathers) > 1
    assert all(op.deps == () for op in _gathers(on))
    waiting = [op for op in on.ops if op.kind == "compute" and set(op.deps) & gathers]
    assert {op.tag for op in waiting} == {"fwd"}
    assert len({g for op in waiting for g in op.deps if g in gathers}) == len(gathers)  # each awaited
    optimizer = {op.id for op in on.ops if op.tag == "optimizer"}
    assert not [op for op in on.ops if set(op.deps) & optimizer]  # nothing follows the optimizer
    assert [op for op in off.ops if set(op.deps) & {o.id for o in off.ops if o.tag == "optimizer"}]


def test_prefetch_hides_all_but_the_first_buckets_gather() -> None:
    rows_off = _run(*_program(False))
    rows_on = _run(*_program(True))
    step_off = max(r.finished_at_s for r in rows_off)
    step_on = max(r.finished_at_s for r in rows_on)
    gathers_on = sorted((r for r in rows_on if r.collective == "all_gather"), key=lambda r: r.started_at_s)
    gathers_off = [r for r in rows_off if r.collective == "all_gather"]
    total_s = sum(r.finished_at_s - r.started_at_s for r in gathers_off if r.rank == 0)
    first_s = gathers_on[0].finished_at_s - gathers_on[0].started_at_s
    assert gathers_on[0].started_at_s == 0.0
    # off: the gathers follow the optimizer back to back; on: the first bucket delays the
    # forward by its own time, the rest run under the forward (4 micro-batches per layer)
    assert step_off - step_on == pytest.approx(total_s - first_s, rel=1e-6)


def test_prefetch_is_ignored_without_sharded_optimizer_or_with_zero3() -> None:
    for zero in (0, 3):
        _, off = _program(False, zero)
        _, on = _program(True, zero)
        assert [op.id for op in on.ops] == [op.id for op in off.ops]
