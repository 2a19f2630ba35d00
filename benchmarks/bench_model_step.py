"""Benchmark: one training step of a model workload, generated and simulated at flow level.

Cases:
    70b:  Llama 3 70B, TP8 (SP) / PP4 1F1B / DP32 ZeRO-1 on topologies/h100-rail-clos-128n.yaml
          (the catalog scenario scenarios/llama3-70b-tp8-pp4-dp32.yaml). Target < 10 s wall.
    405b: Llama 3 405B, TP8 (SP) / PP16 1F1B / DP128 ZeRO-1 on 16,384 GPUs
          (topologies/h100-rail-clos-2048n.yaml), 2,048 x 8,192-token sequences per step, full recomputation (selective does not fit: 16 micro-batches in flight on stage 0 need 84 GB).
          Target < 60 s wall and < 4 GiB peak RSS. Stand-in: the layout checks need layers
          divisible by pp, so the model is padded to 128 layers (Llama 3 ran 126 layers on 16
          stages with one layer fewer on the first and last stage; uneven stages are not yet
          supported by `layout.py`): about 1.6% more compute than the real model.

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
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _scenario_405b(tmp: Path) -> Path:
    model = yaml.safe_load((ROOT / "workloads/models/llama3-405b.yaml").read_text())
    model["layers"] = 128
    model["name"] = "llama3-405b-128l"
    (tmp / "model.yaml").write_text(yaml.safe_dump(model))
    workload = {
        "name": "llama3-405b-tp8-pp16-dp128",
        "model": {"file": "model.yaml"},
        "layout": {
            "tp": 8,
            "sequence_parallel": True,
            "pp": 16,
            "pp_schedule": "1f1b",
            "dp": 128,
            "zero_stage": 1,
            "micro_batch_size": 1,
            "global_batch_size": 2048,
            "recompute": "full",
            "grad_bucket_mb": 256,
        },
        "fidelity": {"representatives": True, "mirrors": "auto", "intra_node": "analytic"},
    }
    (tmp / "workload.yaml").write_text(yaml.safe_dump(workload, sort_keys=False))
    scenario = {
        "name": "llama3-405b-16k",
        "topology": {"file": str(ROOT / "topologies/h100-rail-clos-2048n.yaml")},
        "workload": {"file": "workload.yaml"},
        "network": {"fidelity": "flow", "record_links": False},
        "run": {"steps": 1},
    }
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


def run_case(name: str, path: Path, profile: bool) -> None:
    from simulator.runner import execute, prepare

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
    rss_gib = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    )  # ru_maxrss is KiB on Linux
    print(
        f"{name}: wall {t2 - t0:.1f} s (prepare {t1 - t0:.1f} s, simulate {t2 - t1:.1f} s) | "
        f"step {s['step_time_s']:.3f} s | MFU {s.get('mfu', float('nan')):.1%} | "
        f"ops {len(prep.program.ops)} | simulated ranks {s['simulated_ranks']} of {s['gpus_in_job']} | "
        f"flows {s['flows']} | peak RSS {rss_gib:.2f} GiB"
    )
    print(
        f"  exposed by tag (s): { {k: round(v, 4) for k, v in s['exposed_comm_by_tag_s'].items()} }"
    )


def main(argv: list[str]) -> None:
    profile = "--profile" in argv
    cases = [a for a in argv if not a.startswith("--")] or ["70b", "405b"]
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            if case == "70b":
                run_case(
                    "llama3-70b tp8/pp4/dp32 on 1,024 GPUs",
                    ROOT / "scenarios/llama3-70b-tp8-pp4-dp32.yaml",
                    profile,
                )
            elif case == "405b":
                run_case(
                    "llama3-405b tp8/pp16/dp128 on 16,384 GPUs", _scenario_405b(Path(tmp)), profile
                )
            else:
                raise SystemExit(f"unknown case {case!r}; expected 70b or 405b")


if __name__ == "__main__":
    main(sys.argv[1:])
