"""Fixed-duration ops timed by arithmetic (`simulator.engine.chains`) give the records,
flows, link intervals, steps and recomputations of an event per op, bit for bit (the op
records compared as a set: the engine's table may list them in another order, and every
frame sorts them)."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.scenario.prepare import prepare, step_simulator
from simulator.workload.program import Op, StepProgram
from tests.engine.test_step import GPU
from tests.workload.test_generate import _scenario

#: durations and sizes from a few values, so that many events fall at the same instant
DURATIONS_S = (0.0, 0.25, 0.5, 1.0)
SIZES_BYTES = (0.0, 2.5e9, 5e9)


def _program(spec: list[tuple[int, int, int, int]], seed: int) -> StepProgram:
    """Ranks 0-2 simulated, 3-5 only in groups (mirrors' stand-ins): compute, one-member
    collectives, three-member collectives and p2p, with random deps on earlier ops."""
    rng = np.random.default_rng(seed)
    ops: list[Op] = []
    for i, (kind, r, v, overhead) in enumerate(spec):
        n_deps = int(rng.integers(0, 3)) if ops else 0
        deps = tuple(sorted({ops[j].id for j in rng.integers(0, len(ops), size=n_deps)}))
        oh = 1e-3 * overhead
        if kind == 0:
            ops.append(Op(f"c{i}", "compute", (r,), deps=deps, duration_s=DURATIONS_S[v], tag="fwd"))
        elif kind == 1:
            ops.append(Op(f"t{i}", "collective", (r,), "tp", deps, "tp", collective="all_reduce",
                          group=(r, r + 3), size_bytes=SIZES_BYTES[v], overhead_s=oh))  # fmt: skip
        elif kind == 2:
            ops.append(Op(f"d{i}", "collective", (0, 1, 2), "dp", deps, "dp", collective="all_reduce",
                          group=(0, 1, 2), mirrors=((3, 4, 5),), size_bytes=SIZES_BYTES[v],
                          overhead_s=oh))  # fmt: skip
        else:
            peer = (r + 1) % 3
            ops.append(Op(f"p{i}", "p2p", (r, peer), f"pp{r}>{peer}", deps, "pp", group=(r, peer),
                          size_bytes=SIZES_BYTES[v], overhead_s=oh))  # fmt: skip
    return StepProgram("c", [f"gpu{i}" for i in range(6)], ops)


def _outputs(sim: StepSimulator) -> tuple:
    return (
        sorted(tuple(r) for r in sim.op_rows),
        [tuple(r) for r in sim.fabric.flow_records],
        [a.tolist() for a in sim.fabric.link_intervals()],
        [tuple(s) for s in sim.step_rows],
        sim.fabric.recomputations,
        sim.forwarded_bytes,
    )


def _run(program: StepProgram, fidelity: str, chains: bool) -> tuple:
    spec = SwitchSpec(generator="switch", gpus=6, link_gbyte_per_s=10, latency_us=1)
    cluster = Cluster(build_switch(spec, GPU), GPU)
    program.rank_gpus = cluster.gpus
    settings_ = StepSettings(
        fidelity=fidelity, intra_node="analytic", algorithms={"all_reduce": "ring"}, chains=chains
    )
    sim = StepSimulator(SimContext(0), cluster, program, ComputeCost(GPU), settings_)
    sim.run(2)
    assert chains or not sim.chained
    return (*_outputs(sim), sim.chained)


CHAINED = {True: 0, False: 0}
op_spec = st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 2), st.integers(0, 1))


@settings(max_examples=60, deadline=None)
@given(spec=st.lists(op_spec, min_size=1, max_size=24), seed=st.integers(0, 10_000))
def test_chains_give_the_results_of_an_event_per_op(spec, seed):
    for fidelity in ("flow", "analytic"):
        program = _program(spec, seed)
        *fast, chained = _run(program, fidelity, True)
        *slow, _ = _run(program, fidelity, False)
        assert fast == slow
        CHAINED[chained] += 1


def test_the_runner_itself_runs_on_fixed_programs():
    """Fixed random programs (seeded): the same results either way, and the runner carries
    some of them to the end instead of falling back to an event per op on a tie (without
    this, a runner that always fell back would pass the property test above)."""
    chained = 0
    for k in range(12):
        rng = random.Random(k)
        spec = [
            (rng.randint(0, 3), rng.randint(0, 2), rng.randint(0, 2), rng.randint(0, 1)) for _ in range(16)
        ]
        for fidelity in ("flow", "analytic"):
            *fast, ran = _run(_program(spec, k), fidelity, True)
            *slow, _ = _run(_program(spec, k), fidelity, False)
            assert fast == slow
            chained += ran
    assert chained >= 3  # 4 of these 24 runs meet no tie the runner cannot order


def test_generated_pipeline_with_analytic_tensor_parallel_is_unchanged(tmp_path: Path) -> None:
    """An interleaved pipeline (TP inside a server solved in closed form, PP and DP flows on
    the fabric, representatives): the same outputs either way."""
    layout = {"tp": 4, "pp": 2, "dp": 2, "global_batch_size": 8, "micro_batch_size": 1,
              "pp_schedule": "interleaved_1f1b", "virtual_stages": 2, "sequence_parallel": True}  # fmt: skip
    fidelity = {"representatives": True, "intra_node": "analytic"}
    prep = prepare(_scenario(tmp_path, layout, fidelity=fidelity))
    out = {}
    for chains in (True, False):
        sim = step_simulator(prep, 0)
        sim.settings.chains = chains
        sim.run(2)
        assert sim.chained == chains
        out[chains] = _outputs(sim)
    fixed = sum(1 for r in out[True][0] if r[2] == "collective" and r[7] < r[8])
    assert fixed > 0 and len(out[True][1]) > 0  # closed-form collectives and flows both ran
    assert out[True] == out[False]


def test_a_tie_the_chains_cannot_order_runs_again_with_an_event_per_op(caplog):
    """Events of one instant that only SimPy's counter orders (collectives and p2p solved
    in closed form meeting at 0.75 s): the run is made again with an event per op (the same
    results; each step reported once)."""
    spec = [(1, 1, 1, 1), (0, 0, 2, 1), (3, 1, 2, 0), (1, 2, 0, 0), (0, 1, 2, 0)]
    caplog.set_level(logging.DEBUG, logger="simulator.engine.step")
    spec_cluster = SwitchSpec(generator="switch", gpus=6, link_gbyte_per_s=10, latency_us=1)
    out, reported = {}, []
    for chains in (True, False):
        cluster = Cluster(build_switch(spec_cluster, GPU), GPU)
        program = _program(spec, 0)
        program.rank_gpus = cluster.gpus
        settings_ = StepSettings(intra_node="analytic", algorithms={"all_reduce": "ring"}, chains=chains)
        sim = StepSimulator(SimContext(0), cluster, program, ComputeCost(GPU), settings_)
        sim.run(2, reported.append if chains else None)
        assert not sim.chained
        out[chains] = _outputs(sim)
    assert reported == [0, 1]
    assert "an event per op from the start" in caplog.text  # started with chains, then again
    assert out[True] == out[False]
