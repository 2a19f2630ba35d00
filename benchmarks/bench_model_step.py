"""Benchmark: one training step of a model workload, generated and simulated at flow level.

Cases:
    70b:  Llama 3 70B, TP8 (SP) / PP4 1F1B / DP32 ZeRO-1 on topologies/h100-rail-clos-128n.yaml
          (the catalog scenario scenarios/llama3-70b-tp8-pp4-dp32.yaml). Target < 10 s wall.
    405b: Llama 3 405B, TP8 (SP) / PP16 interleaved (8 chunks of one layer per rank) /
          DP128 ZeRO-2 on 16,384 GPUs (topologies/h100-rail-clos-2048n.yaml; the catalog
          scenario scenarios/llama3-405b-16k-step.yaml): the real 126 layers split
          7 + 14x8 + 7 as in the Llama 3 paper, the first and last chunk holding only the
          embedding and the output layer, 2,048 x 8,192-token sequences per step, selective
          recomputation. Target < 60 s wall and < 4 GiB peak RSS.

Both run with `record_links: false` (no per-link rate intervals; the dashboard's link
figures need them, the step time does not).

Usage:
    .venv/bin/python benchmarks/bench_model_step.py [70b] [405b] [--profile]
"""

from __future__ import annotations

import cProfile
import pstats
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "70b": (
        "llama3-70b tp8/pp4/dp32 on 1,024 GPUs",
        ROOT / "scenarios/llama3-70b-tp8-pp4-dp32.yaml",
    ),
    "405b": (
        "llama3-405b tp8/pp16 v8 (7+14x8+7)/dp128 on 16,384 GPUs",
        ROOT / "scenarios/llama3-405b-16k-step.yaml",
    ),
}


def run_case(name: str, path: Path, profile: bool) -> None:
    from simulator.scenario.execute import execute
    from simulator.scenario.prepare import prepare

    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    t0 = time.perf_counter()
    prep = prepare(path)
    t1 = time.perf_counter()
    res = execute(prep)
    t2 = time.perf_counter()
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    s = res.summary
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is KiB on Linux
    print(
        f"{name}: wall {t2 - t0:.1f} s (prepare {t1 - t0:.1f} s, simulate {t2 - t1:.1f} s) | "
        f"step {s['step_time_s']:.3f} s | MFU {s.get('mfu', float('nan')):.1%} | "
        f"ops {len(prep.program.ops)} | simulated ranks {s['simulated_ranks']} of {s['gpus_in_job']} | "
        f"flows {s['flows']} | peak RSS {rss_gib:.2f} GiB"
    )
    print(f"  exposed by tag (s): { {k: round(v, 4) for k, v in s['exposed_comm_by_tag_s'].items()} }")


def main(argv: list[str]) -> None:
    profile = "--profile" in argv
    cases = [a for a in argv if not a.startswith("--")] or ["70b", "405b"]
    for case in cases:
        if case not in CASES:
            raise SystemExit(f"unknown case {case!r}; expected one of {', '.join(CASES)}")
        label, path = CASES[case]
        run_case(label, path, profile)


if __name__ == "__main__":
    main(sys.argv[1:])
