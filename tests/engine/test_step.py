"""The step engine: event logs in SimPy's style, DAG order, overlap, determinism."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.context import RUN_GC_THRESHOLD, SimContext, run_gc
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.metrics import frames as fr
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.network.hardware import GPUSpec
from simulator.workload.program import Op, StepProgram

GPU = GPUSpec(
    name="t",
    peak_flops_per_s={"bf16": 1e15},
    hbm_bandwidth_bytes_per_s=1e12,
    hbm_capacity_bytes=8e10,
    compute_efficiency=1.0,
    memory_efficiency=1.0,
)


def _cluster(n=4):
    return Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=n, link_gbyte_per_s=10, latency_us=0), GPU), GPU
    )


def _run(program, cluster=None, steps=1, jitter=0.0, seed=0):
    cluster = cluster or _cluster(len(program.rank_gpus))
    ctx = SimContext(seed)
    # textbook ring (full link rate, path latency) so the event times stay round numbers
    settings = StepSettings(algorithms={"all_reduce": "ring"})
    sim = StepSimulator(ctx, cluster, program, ComputeCost(GPU, None, jitter, ctx.rng("compute")), settings)
    sim.run(steps)
    return sim


def _compute_then_allreduce(**ar: float) -> list[Op]:
    """Two ranks compute 1 s each, then all-reduce 10 GB together (op `ar`, extra fields `ar`)."""
    return [
        Op("fwd@0", "compute", (0,), duration_s=1.0),
        Op("fwd@1", "compute", (1,), duration_s=1.0),
        Op(
            "ar",
            "collective",
            (0, 1),
            "comm",
            ("fwd@0", "fwd@1"),
            "dp",
            collective="all_reduce",
            group=(0, 1),
            size_bytes=10e9,
            **ar,
        ),
    ]


def test_event_log_compute_then_allreduce_then_optimizer():
    """Two ranks: compute 1 s, all-reduce of 10 GB (ring n=2 moves S per edge at 10 GB/s: 1 s),
    optimizer 0.5 s. Log of (op, rank, start, end)."""
    ops = [
        *_compute_then_allreduce(),
        Op("opt@0", "compute", (0,), deps=("ar",), duration_s=0.5),
        Op("opt@1", "compute", (1,), deps=("ar",), duration_s=0.5),
    ]
    sim = _run(StepProgram("t", _cluster(2).gpus, ops), _cluster(2))
    log = sorted((r.op_id, r.rank, r.started_at_s, r.finished_at_s) for r in sim.op_rows)
    assert log == [
        ("ar", 0, 1.0, 2.0),
        ("ar", 1, 1.0, 2.0),
        ("fwd@0", 0, 0.0, 1.0),
        ("fwd@1", 1, 0.0, 1.0),
        ("opt@0", 0, 2.0, 2.5),
        ("opt@1", 1, 2.0, 2.5),
    ]
    assert sim.step_rows == [(0, 0.0, 2.5)]


def test_collective_waits_for_the_slowest_member():
    ops = [
        Op("c@0", "compute", (0,), duration_s=1.0),
        Op("c@1", "compute", (1,), duration_s=3.0),
        Op(
            "ar",
            "collective",
            (0, 1),
            "comm",
            ("c@0", "c@1"),
            collective="all_reduce",
            group=(0, 1),
            size_bytes=0.0,
        ),
    ]
    sim = _run(StepProgram("t", _cluster(2).gpus, ops), _cluster(2))
    rows = {(r.op_id, r.rank): r for r in sim.op_rows}
    assert (
        rows[("ar", 0)].ready_at_s == 1.0 and rows[("ar", 0)].started_at_s == 3.0
    )  # ready at 1, started at 3


def test_communication_overlaps_independent_compute():
    """An all-reduce (1 s) runs while the next compute (2 s) proceeds: step = 1 + 2."""
    ops = [
        Op("a@0", "compute", (0,), duration_s=1.0),
        Op("a@1", "compute", (1,), duration_s=1.0),
        Op(
            "ar",
            "collective",
            (0, 1),
            "comm",
            ("a@0", "a@1"),
            "dp",
            collective="all_reduce",
            group=(0, 1),
            size_bytes=10e9,
        ),
        Op("b@0", "compute", (0,), duration_s=2.0),
        Op("b@1", "compute", (1,), duration_s=2.0),
    ]
    sim = _run(StepProgram("t", _cluster(2).gpus, ops), _cluster(2))
    assert sim.step_rows[0].finished_at_s == pytest.approx(3.0)
    ops_df = fr.ops_frame(sim.op_rows, sim.program.rank_gpus, {})
    steps = fr.steps_frame(ops_df, sim.step_rows, {})
    assert steps["exposed_comm_s"].tolist() == [0.0, 0.0]
    assert steps["compute_s"].tolist() == [3.0, 3.0]


def test_roofline_prices_compute_and_memory_bound_ops():
    """t = max(flops / peak, bytes / hbm_bw) with efficiency 1."""
    cost = ComputeCost(GPU)
    assert cost.roofline_s(Op("x", "compute", (0,), flops=2e15)) == pytest.approx(2.0)
    assert cost.roofline_s(Op("x", "compute", (0,), flops=1e12, bytes_accessed=3e12)) == pytest.approx(3.0)


def _random_program(n_ranks, spec, seed):
    rng = np.random.default_rng(seed)
    ops, ids = [], []
    for i, (kind, dur) in enumerate(spec):
        deps = (
            tuple(sorted({ids[j] for j in rng.integers(0, len(ids), size=min(2, len(ids)))})) if ids else ()
        )
        if kind == 0:
            r = int(rng.integers(0, n_ranks))
            ops.append(Op(f"c{i}", "compute", (r,), deps=deps, duration_s=dur, tag="fwd"))
        else:
            ops.append(
                Op(
                    f"k{i}",
                    "collective",
                    tuple(range(n_ranks)),
                    "comm",
                    deps,
                    "dp",
                    collective="all_reduce",
                    group=tuple(range(n_ranks)),
                    size_bytes=dur * 1e9,
                )
            )
        ids.append(ops[-1].id)
    return StepProgram("r", _cluster(n_ranks).gpus, ops)


program_spec = st.lists(st.tuples(st.integers(0, 1), st.floats(0.001, 2.0)), min_size=1, max_size=15)


@settings(max_examples=40, deadline=None)
@given(spec=program_spec, seed=st.integers(0, 1000))
def test_starts_respect_dependencies_and_breakdown_adds_up(spec, seed):
    """Property: no op starts before its deps end; compute + exposed comm + idle = step time."""
    prog = _random_program(3, spec, seed)
    sim = _run(prog, _cluster(3))
    ops = fr.ops_frame(sim.op_rows, prog.rank_gpus, {})
    end = ops.groupby("op_id")["finished_at_s"].max()
    start = ops.groupby("op_id")["started_at_s"].min()
    for op in prog.ops:
        for d in op.deps:
            assert start[op.id] >= end[d] - 1e-12
    steps = fr.steps_frame(ops, sim.step_rows, {})
    total = steps["compute_s"] + steps["exposed_comm_s"] + steps["idle_s"]
    assert np.allclose(total, steps["step_time_s"], rtol=1e-9, atol=1e-12)
    tags = [c for c in steps.columns if c.startswith("exposed_") and c != "exposed_comm_s"]
    assert np.allclose(steps[tags].sum(axis=1), steps["exposed_comm_s"], rtol=1e-9, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(spec=program_spec, seed=st.integers(0, 1000))
def test_same_program_and_seed_give_equal_frames(spec, seed):
    prog = _random_program(3, spec, seed)
    a = _run(prog, _cluster(3), steps=2, jitter=0.1, seed=seed)
    b = _run(prog, _cluster(3), steps=2, jitter=0.1, seed=seed)
    pd.testing.assert_frame_equal(
        fr.ops_frame(a.op_rows, prog.rank_gpus, {}), fr.ops_frame(b.op_rows, prog.rank_gpus, {})
    )
    pd.testing.assert_frame_equal(
        fr.flows_frame(a.fabric.flow_records), fr.flows_frame(b.fabric.flow_records)
    )


def test_straggler_slows_the_synchronous_step():
    ops = [Op(f"c@{r}", "compute", (r,), duration_s=1.0) for r in range(2)]
    ops.append(
        Op(
            "ar",
            "collective",
            (0, 1),
            "comm",
            ("c@0", "c@1"),
            collective="all_reduce",
            group=(0, 1),
            size_bytes=0,
        )
    )
    g = _cluster(2)
    slow = Cluster(g.graph, GPU, stragglers={g.gpus[1]: 1.5})
    assert _run(StepProgram("t", g.gpus, ops), slow).step_rows[0].finished_at_s == pytest.approx(1.5)


def test_collective_overhead_delays_its_data_by_exactly_the_overhead():
    """A framework's per-call software time (`Op.overhead_s`) comes after every member is
    ready and before the data moves: the 1 s all-reduce of the first test ends 0.25 s later."""
    ops = _compute_then_allreduce(overhead_s=0.25)
    sim = _run(StepProgram("t", _cluster(2).gpus, ops), _cluster(2))
    rows = {(r.op_id, r.rank): r for r in sim.op_rows}
    assert (rows[("ar", 0)].started_at_s, rows[("ar", 0)].finished_at_s) == (1.0, 2.25)


def test_run_gc_raises_the_young_threshold_and_restores_it():
    before = gc.get_threshold()
    with run_gc():
        inside = gc.get_threshold()
    assert inside == (max(RUN_GC_THRESHOLD, before[0]), before[1], before[2])
    assert gc.get_threshold() == before
