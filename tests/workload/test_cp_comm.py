"""How context parallelism exchanges K/V (`cp_comm`): a ring under the attention core, or an
all-gather the core waits for (Llama 3, Dubey et al. 2024 §3.3.2: all-gather based CP, its
latency exposed on the critical path).

Checked on TINY at CP2 over one switch, with unfused attention kernels (so that the two
modes differ only in the exchange: a ring of fused kernels also adds its merge kernels,
`tests/workload/test_cp_merge.py`): the same CP bytes either way; with `ring` the
compute op holding the attention core does not wait for the exchange and the op after the
core does; with `all_gather` the core's op waits for it; the all-gather step is longer, by
no more than the CP transfers' own time (what the ring hid).
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


def _program(mode: str) -> tuple[Cluster, StepProgram]:
    """TINY at CP2 (512 queries per rank), one micro-batch, over a 100 GB/s switch."""
    layout = LayoutSpec(cp=2, global_batch_size=1, cp_comm=mode, attention="unfused")
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=2, link_gbyte_per_s=100, latency_us=5), GPU), GPU
    )
    return cluster, build_program(TINY, layout, cluster.gpus, cluster.graph)


def _core_ops(program: StepProgram) -> set[str]:
    """Compute ops of rank 0 whose kernels include the attention core's score product."""
    return {
        op.id
        for op in program.ops
        if op.kind == "compute" and 0 in op.ranks and any(k.name.startswith("attn_score") for k in op.kernels)
    }


def _cp_ops(program: StepProgram) -> set[str]:
    return {op.id for op in program.ops if op.tag == "cp" and 0 in op.ranks}


@pytest.mark.parametrize("mode", ["ring", "all_gather"])
def test_the_core_waits_for_the_exchange_only_when_all_gathered(mode: str) -> None:
    _, program = _program(mode)
    cp, core = _cp_ops(program), _core_ops(program)
    assert len(cp) == 2 * TINY.layers and len(core) == 2 * TINY.layers  # fwd + bwd per layer
    core_waits = {op.id for op in program.ops if op.id in core and set(op.deps) & cp}
    waiting = {op.id for op in program.ops if set(op.deps) & cp}
    if mode == "all_gather":
        assert core_waits == core
    else:
        assert not core_waits
        assert len(waiting) >= len(cp)  # the op after each core awaits its exchange


def _run(cluster: Cluster, program: StepProgram) -> list:  # type: ignore[type-arg]
    ctx = SimContext(0)
    sim = StepSimulator(ctx, cluster, program, ComputeCost(GPU, None, 0.0, ctx.rng("compute")))
    sim.run(1)
    return list(sim.op_rows)


def test_all_gather_exposes_what_the_ring_hid() -> None:
    (c_ring, p_ring), (c_ag, p_ag) = _program("ring"), _program("all_gather")
    cp_bytes = [sum(op.size_bytes for op in p.ops if op.tag == "cp") for p in (p_ring, p_ag)]
    assert cp_bytes[0] == pytest.approx(cp_bytes[1]) and cp_bytes[0] > 0
    rows_ring, rows_ag = _run(c_ring, p_ring), _run(c_ag, p_ag)
    step_ring = max(r.finished_at_s for r in rows_ring)
    step_ag = max(r.finished_at_s for r in rows_ag)
    cp_s = sum(r.finished_at_s - r.started_at_s for r in rows_ag if r.tag == "cp" and r.rank == 0)
    assert step_ag > step_ring
    assert step_ag - step_ring <= cp_s * (1 + 1e-9)
