"""Pipeline schedules of generated step programs: task order and the measured bubble.

Golden formula (Narayanan et al., SC'21, §2.2): with communication free and identical
stages, the bubble is (p-1)·(t_f+t_b) of a pipeline time (m+p-1)·(t_f+t_b), i.e. a fraction
(p-1)/(m+p-1) for GPipe and 1F1B; interleaving v chunks per rank divides the bubble *time*
by v, so the fraction is (p-1)/(v·m+p-1).
"""

from __future__ import annotations

import pytest

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.network.hardware import GPUSpec
from simulator.workload.generate import build_program
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import ModelSpec
from simulator.workload.schedule import bubble_fraction, stage_schedule

GPU = GPUSpec(
    name="t",
    peak_flops_per_s={"bf16": 1e15, "fp32": 1e15},
    hbm_bandwidth_bytes_per_s=1e12,
    hbm_capacity_bytes=8e10,
    compute_efficiency=1.0,
    memory_efficiency=1.0,
)
TINY = ModelSpec(
    name="tiny",
    layers=16,
    hidden_size=1024,
    ffn_hidden_size=4096,
    attention_heads=8,
    vocab_size=64,
    seq_len=1024,
)


@pytest.mark.parametrize(
    "schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved_1f1b", 2), ("interleaved_1f1b", 4)]
)
@pytest.mark.parametrize("stage", [0, 1, 3])
def test_every_task_once_forward_before_backward(schedule: str, v: int, stage: int) -> None:
    p, m = 4, 8
    tasks = stage_schedule(schedule, p, m, v, stage)
    assert sorted(tasks) == sorted((ph, i, c) for ph in "FB" for i in range(m) for c in range(v))
    pos = {t: k for k, t in enumerate(tasks)}
    assert all(pos[("F", i, c)] < pos[("B", i, c)] for i in range(m) for c in range(v))


def test_1f1b_warm_up_is_p_minus_stage_minus_1() -> None:
    p, m = 4, 8
    for s in range(p):
        tasks = stage_schedule("1f1b", p, m, 1, s)
        first_b = next(k for k, t in enumerate(tasks) if t[0] == "B")
        assert first_b == (p - s - 1) + 1  # warm-up forwards, then one more forward, then B


def test_interleaved_warm_up_follows_megatron() -> None:
    p, m, v = 4, 8, 2
    for s in range(p):
        tasks = stage_schedule("interleaved_1f1b", p, m, v, s)
        first_b = next(k for k, t in enumerate(tasks) if t[0] == "B")
        assert first_b == 2 * (p - s - 1) + (v - 1) * p + 1


def free_comm_bubble(p: int, m: int, schedule: str = "1f1b", v: int = 1) -> tuple[list[float], list[float]]:
    """Simulate with every transfer of 0 bytes on a zero-latency switch and the embedding and
    output ops made free (so stages are identical). Returns per stage the bubble fraction
    (1 - busy / pipeline time) and the bubble time."""
    layout = LayoutSpec(pp=p, global_batch_size=m, pp_schedule=schedule, virtual_stages=v)
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=p, link_gbyte_per_s=10, latency_us=0), GPU),
        GPU,
    )
    program = build_program(TINY, layout, cluster.gpus, cluster.graph)
    for op in program.ops:
        if op.kind != "compute":
            op.size_bytes = 0.0
        elif any(k in op.id for k in (".emb.", ".out.", ".outb.")):
            op.flops = op.bytes_accessed = 0.0
    ctx = SimContext(0)
    sim = StepSimulator(ctx, cluster, program, ComputeCost(GPU, None, 0.0, ctx.rng("compute")))
    sim.run(1)
    rows = [r for r in sim.op_rows if r.kind == "compute" and r.tag in ("fwd", "bwd", "recompute")]
    t0, t1 = min(r.started_at_s for r in rows), max(r.finished_at_s for r in rows)
    fractions, times = [], []
    for s in range(p):
        busy = sum(r.finished_at_s - r.started_at_s for r in rows if r.rank == s)
        fractions.append(1 - busy / (t1 - t0))
        times.append((t1 - t0) - busy)
    return fractions, times


@pytest.mark.parametrize("m", [8, 16])
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_bubble_fraction_matches_formula(schedule: str, m: int) -> None:
    p = 4
    fractions, _ = free_comm_bubble(p, m, schedule)
    expected = (p - 1) / (m + p - 1)
    assert bubble_fraction(LayoutSpec(pp=p, global_batch_size=m, pp_schedule=schedule)) == pytest.approx(
        expected
    )
    for f in fractions:
        assert f == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("v,m", [(2, 8), (4, 16)])
def test_interleaving_divides_bubble_time_by_v(v: int, m: int) -> None:
    p = 4
    _, plain = free_comm_bubble(p, m, "1f1b")
    fractions, inter = free_comm_bubble(p, m, "interleaved_1f1b", v)
    for a, b in zip(plain, inter, strict=False):
        assert a / b == pytest.approx(v, rel=0.03)
    expected = (p - 1) / (v * m + p - 1)
    lay = LayoutSpec(pp=p, global_batch_size=m, pp_schedule="interleaved_1f1b", virtual_stages=v)
    assert bubble_fraction(lay) == pytest.approx(expected)
    for f in fractions:
        assert f == pytest.approx(expected, rel=0.01)
