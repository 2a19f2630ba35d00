"""Run the performance suite and print each benchmark's figures (`make bench`).

Each benchmark is its own script (run one alone for details):
    bench_collective.py    ring all-reduce of 1 GiB on 1,024 and 16,384 GPUs, events/s vs bare SimPy
    bench_model_step.py    Llama-3-70B on 1,024 GPUs and Llama-3-405B on 16,384 GPUs, one step
    bench_runlevel.py      54 days on 16,384 GPUs with the Llama 3 failure preset, 1 and 100 seeds
    bench_dashboard.py     dashboard size and build time for a 1,024-GPU step
    bench_design_build.py  graph build time of the 16,384-GPU catalog designs
    calibration_report.py  error of the calibrated simulator on every nccl-tests / rccl-tests sample
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE = [
    "bench_collective.py",
    "bench_model_step.py",
    "bench_runlevel.py",
    "bench_dashboard.py",
    "bench_design_build.py",
    "calibration_report.py",
]


def main() -> int:
    failed = 0
    for name in SUITE:
        print(f"\n== {name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(HERE / name)])
        print(f"== {name}: exit {rc}, {time.perf_counter() - t0:.1f} s", flush=True)
        failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
