"""Cluster benchmark: one week of a 2,048-GPU H100 cluster shared by 200 jobs, with failures.

Runs `scenarios/jobs/cluster-week-2048.yaml` (200 synthetic jobs, the Llama 3 failure preset,
four shared spare servers) once per scheduler in this process, and prints per scheduler the
wall time of the whole run (topology build, job pricing, failures, scheduling, frames) with
the headline figures. The target (under 60 s wall) is for the whole CLI process, timed
from outside:

    time .venv/bin/clustersim run scenarios/jobs/cluster-week-2048.yaml -o /tmp/cluster-week

    .venv/bin/python benchmarks/bench_cluster_week.py
    .venv/bin/python benchmarks/bench_cluster_week.py --jobs 2000 --interarrival-min 1

`--jobs N --interarrival-min M`: N synthetic jobs arriving every M minutes on average instead
(a long queue: what the scheduler's cost grows with).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.scenario.cluster_level import run_cluster  # noqa: E402
from simulator.scenario.prepare import prepare  # noqa: E402

SCENARIO = ROOT / "scenarios" / "jobs" / "cluster-week-2048.yaml"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, help="synthetic jobs (default: the scenario's 200)")
    ap.add_argument("--interarrival-min", type=float, help="mean minutes between arrivals")
    a = ap.parse_args()
    t0 = time.perf_counter()
    prep = prepare(SCENARIO)
    spec = prep.scenario.spec.cluster
    if spec is None or spec.synthetic is None:
        return 1
    gap_s = None if a.interarrival_min is None else a.interarrival_min * 60.0
    changes = {"count": a.jobs, "mean_interarrival_s": gap_s}
    synthetic = spec.synthetic.model_copy(update={k: v for k, v in changes.items() if v is not None})
    prep.scenario.spec = prep.scenario.spec.model_copy(
        update={"cluster": spec.model_copy(update={"synthetic": synthetic})}
    )
    print(f"prepare (topology of {len(prep.cluster.gpus):,} GPUs): {time.perf_counter() - t0:.2f} s")
    print(
        f"{'scheduler':>15} {'wall s':>7} {'util':>6} {'done':>5} {'queue h':>8} {'median JCT h':>13} "
        f"{'lost GPU-h':>10} {'>1 leaf':>7}"
    )
    for scheduler in ("fifo", "backfill", "topology_aware"):
        spec = prep.scenario.spec.cluster
        if spec is None:
            return 1
        prep.scenario.spec = prep.scenario.spec.model_copy(
            update={"cluster": spec.model_copy(update={"scheduler": scheduler})}
        )
        t = time.perf_counter()
        _, s = run_cluster(prep, prep.scenario.spec.seed)
        wall = time.perf_counter() - t
        print(
            f"{scheduler:>15} {wall:7.2f} {s['gpu_utilization'] * 100:5.1f}% {s['jobs_finished']:>5} "
            f"{s['mean_queueing_delay_s'] / 3600:8.2f} {s['median_jct_s'] / 3600:13.2f} "
            f"{s['lost_work_gpu_h']:10.0f} {s['jobs_spanning_leaf_groups']:>7}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
