"""Benchmark: one ring all-reduce of 1 GiB over 1,024 and 16,384 GPUs on rail_clos, flow fidelity.

Prints, per size: topology build time, planning time (routing every ring edge, merging paths
into flows), SimPy run time (rank processes and fabric events), simulated time, and the run's
events per second next to a bare SimPy loop of timeouts measured in the same run (the ratio is
the figure that counts: how much each event costs beyond SimPy's own bookkeeping).

    .venv/bin/python benchmarks/bench_collective.py            # 1,024 and 16,384 GPUs
    .venv/bin/python benchmarks/bench_collective.py --sizes 1024
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import simpy

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.topology import load_topology
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[1]
TOPO = {1024: "h100-rail-clos-128n.yaml", 16384: "h100-rail-clos-2048n.yaml"}


def bare_simpy_events_per_s(n: int = 200_000) -> float:
    """Events per second of SimPy itself: one process yielding n timeouts."""
    env = simpy.Environment()

    def loop():
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(loop())
    t0 = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t0)


class CountingEnv(simpy.Environment):
    """An environment that counts processed events."""

    def __init__(self) -> None:
        super().__init__()
        self.events_processed = 0

    def step(self) -> None:
        self.events_processed += 1
        super().step()


def run(n_gpus: int) -> dict:
    t0 = time.perf_counter()
    topo = load_topology(ROOT / "topologies" / TOPO[n_gpus])
    cluster = Cluster(topo.graph, topo.gpu)
    t1 = time.perf_counter()
    n = len(cluster.gpus)
    op = Op(
        "ar",
        "collective",
        tuple(range(n)),
        "comm",
        collective="all_reduce",
        group=tuple(range(n)),
        size_bytes=2**30,
        algorithm="ring",
    )
    ctx = SimContext(0)
    ctx.env = CountingEnv()
    sim = StepSimulator(
        ctx,
        cluster,
        StepProgram("ar", cluster.gpus, [op]),
        ComputeCost(topo.gpu),
        StepSettings(fidelity="flow", record_links=True),
    )
    sim.prepare(op)  # routing and flow planning
    t2 = time.perf_counter()
    sim.run(1)  # the SimPy run: rank processes, fabric events
    t3 = time.perf_counter()
    return {
        "gpus": n,
        "build_s": t1 - t0,
        "plan_s": t2 - t1,
        "run_s": t3 - t2,
        "simulate_s": t3 - t1,
        "simulated_s": sim.step_rows[0].finished_at_s,
        "events": ctx.env.events_processed,
        "events_per_s": ctx.env.events_processed / (t3 - t2),
        "flows": len(sim.fabric.flow_records),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 16384], choices=sorted(TOPO))
    args = ap.parse_args()
    bare = bare_simpy_events_per_s()
    print(f"bare SimPy loop: {bare:,.0f} events/s")
    targets = {1024: 2.0, 16384: 30.0}
    for n in args.sizes:
        r = run(n)
        total = r["build_s"] + r["simulate_s"]
        ok = "OK" if total < targets[n] else "OVER"
        print(
            f"{r['gpus']:>6} GPUs: build {r['build_s']:.2f} s + plan {r['plan_s']:.2f} s "
            f"+ run {r['run_s']:.2f} s = {total:.2f} s (target < {targets[n]:.0f} s: {ok}); "
            f"simulated {r['simulated_s'] * 1e3:.2f} ms; "
            f"run: {r['events']} events, {r['events_per_s']:,.0f} events/s "
            f"({r['events_per_s'] / bare:.3f} of bare SimPy); {r['flows']} flows"
        )


if __name__ == "__main__":
    main()
