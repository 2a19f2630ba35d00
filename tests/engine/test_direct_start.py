"""Concurrent collectives with no deps start directly (no process per rank), with the same
records, flows and steps as through the per-(rank, stream) processes."""

from __future__ import annotations

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.workload.program import Op, StepProgram
from tests.engine.test_step import GPU


def _run(direct: bool):  # noqa: ANN202
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=6, link_gbyte_per_s=10, latency_us=1), GPU), GPU
    )
    groups = [(0, 1, 2, 3, 4, 5), (0, 1, 2), (3, 4, 5), (0, 1, 2, 3, 4, 5)]
    ops = [
        Op(f"c{i}", "collective", g, f"s{i}", collective="all_reduce", group=g,
           size_bytes=1e6 * (i + 1), algorithm="ring/simple", overhead_s=1e-6 * (i % 2))
        for i, g in enumerate(groups)
    ]  # fmt: skip
    program = StepProgram("k", cluster.gpus, ops)
    sim = StepSimulator(SimContext(0), cluster, program, ComputeCost(GPU), StepSettings(fidelity="flow"))
    assert sim._direct
    sim._direct = direct
    sim.run(2)
    return (
        sorted(tuple(r) for r in sim.op_rows),
        [tuple(r) for r in sim.fabric.flow_records],
        [a.tolist() for a in sim.fabric.link_intervals()],
        [tuple(s) for s in sim.step_rows],
        sim.fabric.recomputations,
    )


def test_direct_start_gives_the_records_of_the_rank_processes():
    direct, processes = _run(True), _run(False)
    assert len(direct[0]) == 2 * (6 + 3 + 3 + 6) and len(direct[1]) > 0
    assert direct == processes
