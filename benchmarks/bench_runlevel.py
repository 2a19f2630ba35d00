"""Run-level benchmark: Llama 3 405B (16,384 H100, 54 days) with the Table 5 failure preset.

A `TableOracle` stands in for the step simulation (healthy step from the table, other states
from a `ScalingOracle`). Prints the wall time per seed (target < 10 s) and of 100 seeds
through the local process pool (target < 10 min), with the headline figures.

    .venv/bin/python benchmarks/bench_runlevel.py [--seeds 100] [--workers N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import TypeAdapter  # noqa: E402

from simulator.faults.degradation import DegradationSpec
from simulator.faults.engine import simulate_run
from simulator.faults.metrics import aggregate
from simulator.faults.policy import PolicySpec
from simulator.faults.preset import (
    llama3_405b,
    reference_job,  # noqa: E402
)
from simulator.faults.state import ScalingOracle, TableOracle
from simulator.study.sweep import run_seeds

DAYS = 54


def setup():  # type: ignore[no-untyped-def]
    job = reference_job()
    scaling = ScalingOracle(
        full_dp_replicas=job.dp_replicas,
        compute_s=20.0,
        comm_s=5.0,
        write_s=120.0,
        snapshot_s=15.0,
        load_storage_s=180.0,
        load_peer_s=30.0,
    )
    oracle = TableOracle(fallback=scaling, step_times_s={job.healthy_state(): 25.0})
    failures = llama3_405b(include_planned=True)
    degradations = TypeAdapter(list[DegradationSpec]).validate_python(
        [
            {
                "kind": "straggler",
                "mtbe_h": 16384 * 200.0,
                "duration_h": 3,
                "slowdown": 1.4,
                "duration_dist": "exponential",
            },
            {"kind": "degraded_link", "mtbe_h": 16384 * 500.0, "duration_h": 6, "bandwidth_factor": 0.5},
        ]
    )
    policy = TypeAdapter(PolicySpec).validate_python({"kind": "checkpoint_restart", "interval": "daly"})
    return job, oracle, failures, degradations, policy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    job, oracle, failures, degradations, policy = setup()
    duration = DAYS * 86400.0

    walls = []
    for seed in range(3):
        t = time.perf_counter()
        r = simulate_run(job, oracle, failures, policy, duration, seed, degradations=degradations)
        walls.append(time.perf_counter() - t)
    s = r.summary
    print(
        f"one seed (16,384 GPUs, {DAYS} days): {statistics.median(walls):.3f} s wall "
        f"(median of 3; target < 10 s); {len(r.segments)} segments, {len(r.incidents)} incidents, "
        f"{s['oracle_states']:.0f} oracle states"
    )
    print(
        f"  interruptions {s['interruptions']:.0f}, job MTTI {s['job_mtti_s'] / 3600:.2f} h, "
        f"interval {s['interval_s'] / 60:.1f} min, goodput {s['goodput']:.3f}, ETTR {s['ettr']:.3f}"
    )

    t = time.perf_counter()
    runs = run_seeds(
        job,
        oracle,
        failures,
        policy,
        duration,
        range(args.seeds),
        executor="pool",
        max_workers=args.workers,
        degradations=degradations,
    )
    wall = time.perf_counter() - t
    print(f"{args.seeds} seeds on a local pool of {args.workers}: {wall:.1f} s wall (target < 600 s)")
    agg = aggregate(runs).iloc[0]
    for m in (
        "goodput",
        "ettr",
        "interruptions",
        "lost_work_per_interruption_s",
        "restart_per_interruption_s",
        "checkpoint_s",
        "degraded_s",
    ):
        print(f"  {m:32s} {agg[m + '_mean']:12.4f}  95% CI [{agg[m + '_lo']:.4f}, {agg[m + '_hi']:.4f}]")


if __name__ == "__main__":
    main()
