"""Benchmark: one all-reduce of 1 GiB over 1,024 and 16,384 GPUs on rail_clos, flow fidelity.

Two cases per size: the textbook ring (`ring`) and the scenario default (`auto`: algorithm
and protocol chosen by the NCCL-shaped cost model, then expanded into flows). The bar for
`auto` at 16,384 GPUs is planning plus simulating under 10 s (CPU seconds of the process,
so that other load on the machine does not count; wall seconds are printed beside).

Prints, per size: topology build time, planning time (routing every ring edge, merging paths
into flows), SimPy run time (rank processes and fabric events), simulated time, and the run's
events per second next to a bare SimPy loop of timeouts measured in the same run (the ratio is
the figure that counts: how much each event costs beyond SimPy's own bookkeeping).

    .venv/bin/python benchmarks/bench_collective.py            # 1,024 and 16,384 GPUs
    .venv/bin/python benchmarks/bench_collective.py --sizes 1024
    .venv/bin/python benchmarks/bench_collective.py --sizes 16384 --algorithms auto
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


def run(n_gpus: int, algorithm: str = "ring") -> dict:
    t0 = time.perf_counter()
    topo = load_topology(ROOT / "topologies" / TOPO[n_gpus])
    cluster = Cluster(topo.graph, topo.gpu)
    t1 = time.perf_counter()
    c1 = time.process_time()
    n = len(cluster.gpus)
    op = Op(
        "ar",
        "collective",
        tuple(range(n)),
        "comm",
        collective="all_reduce",
        group=tuple(range(n)),
        size_bytes=2**30,
        algorithm=algorithm,
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
    c3 = time.process_time()
    plan = sim.prepare(op).plan
    return {
        "gpus": n,
        "ran": f"{plan.algorithm}/{plan.protocol}" if plan else "",
        "build_s": t1 - t0,
        "plan_s": t2 - t1,
        "run_s": t3 - t2,
        "simulate_s": t3 - t1,
        "simulate_cpu_s": c3 - c1,  # CPU seconds of plan + run (a loaded machine inflates wall time)
        "simulated_s": sim.step_rows[0].finished_at_s,
        "events": ctx.env.events_processed,
        "events_per_s": ctx.env.events_processed / (t3 - t2),
        "flows": len(sim.fabric.flow_records),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1024, 16384], choices=sorted(TOPO))
    ap.add_argument("--algorithms", nargs="*", default=["ring", "auto"])
    args = ap.parse_args()
    bare = bare_simpy_events_per_s()
    print(f"bare SimPy loop: {bare:,.0f} events/s")
    # ring: build + plan + run, wall; auto: plan + run, CPU (the collective bar)
    targets = {("ring", 1024): 2.0, ("ring", 16384): 30.0, ("auto", 1024): 2.0, ("auto", 16384): 10.0}
    for n, algorithm in [(n, a) for n in args.sizes for a in args.algorithms]:
        r = run(n, algorithm)
        # auto: plan + run in CPU seconds (equal to wall seconds on an idle machine; a shared
        # machine inflates wall time, which is printed beside it)
        total = r["simulate_cpu_s"] if algorithm == "auto" else r["build_s"] + r["simulate_s"]
        target = targets.get((algorithm, n), float("inf"))
        ok = "OK" if total < target else "OVER"
        print(
            f"{r['gpus']:>6} GPUs {algorithm} ({r['ran']}): build {r['build_s']:.2f} s "
            f"+ plan {r['plan_s']:.2f} s "
            f"+ run {r['run_s']:.2f} s; counted {total:.2f} s (target < {target:.0f} s: {ok}); "
            f"plan + run CPU {r['simulate_cpu_s']:.2f} s; "
            f"simulated {r['simulated_s'] * 1e3:.2f} ms; "
            f"run: {r['events']} events, {r['events_per_s']:,.0f} events/s "
            f"({r['events_per_s'] / bare:.3f} of bare SimPy); {r['flows']} flows"
        )


if __name__ == "__main__":
    main()
