"""Study resume: a study stopped part-way and resumed gives the same tables as one run straight.

1. `clustersim sweep STUDY -o A` straight through (timed; peak memory of the process).
2. `clustersim sweep STUDY -o B`, stopped by a signal (SIGINT by default; `--signal KILL`
   for SIGKILL) once B/manifest.json lists `--stop-after` finished tasks (default: half).
3. `clustersim sweep STUDY -o B --resume` (timed): runs only the missing tasks.
4. runs.parquet, summary.parquet and summary.csv of A and B compared byte for byte.

Default study: scenarios/study-llama3-405b-policies.yaml (5 policies x 16 seeds = 80 runs
of 54 days of a 16,384-GPU job; long: each run is seconds to minutes of CPU, so budget an
hour or more on two cores). `--seeds` shrinks it for a quick check.

    .venv/bin/python benchmarks/bench_study_resume.py [--study FILE] [--seeds N]
        [--workers N] [--stop-after K] [--signal INT|TERM|KILL]

Exits 1 if the tables differ or a step fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "scenarios" / "study-llama3-405b-policies.yaml"
TABLES = ("runs.parquet", "summary.parquet", "summary.csv")


def sweep_args(study: Path, out: Path, seeds: int | None, workers: int | None, *extra: str) -> list[str]:
    args = [sys.executable, "-m", "simulator.commands.app", "sweep", str(study), "-o", str(out), *extra]
    if seeds is not None:
        args += ["--seeds", str(seeds)]
    if workers is not None:
        args += ["--workers", str(workers)]
    return args


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}


def finished(out: Path) -> int:
    """Tasks the folder's manifest lists as finished (0 before the first)."""
    try:
        return len(json.loads((out / "manifest.json").read_text())["tasks"])
    except (OSError, ValueError, KeyError):
        return 0


def total_tasks(study: Path, seeds: int | None) -> int:
    sys.path.insert(0, str(REPO))
    from simulator.study.sweep import load_study

    s = load_study(study)
    return len(s.variants) * (seeds or s.spec.seeds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", type=Path, default=STUDY)
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--stop-after", type=int, default=None)
    ap.add_argument("--signal", choices=("INT", "TERM", "KILL"), default="INT")
    a = ap.parse_args()
    n = total_tasks(a.study, a.seeds)
    stop_after = a.stop_after or n // 2
    with tempfile.TemporaryDirectory() as tmp:
        straight, resumed = Path(tmp) / "A", Path(tmp) / "B"
        t = time.perf_counter()
        subprocess.run(
            sweep_args(a.study, straight, a.seeds, a.workers), env=env(), check=True, capture_output=True
        )
        straight_s = time.perf_counter() - t
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"straight: {n} runs in {straight_s:.0f} s (largest process peak RSS {peak_mib:.0f} MiB)",
            flush=True,
        )

        t = time.perf_counter()
        proc = subprocess.Popen(
            sweep_args(a.study, resumed, a.seeds, a.workers), env=env(), stdout=subprocess.DEVNULL
        )
        while finished(resumed) < stop_after and proc.poll() is None:
            time.sleep(0.2)
        proc.send_signal(getattr(signal, f"SIG{a.signal}"))
        code = proc.wait()
        kept = finished(resumed)
        print(
            f"stopped by SIG{a.signal} after {time.perf_counter() - t:.0f} s: "
            f"exit {code}, {kept}/{n} runs kept"
        )

        t = time.perf_counter()
        res = subprocess.run(
            sweep_args(a.study, resumed, a.seeds, a.workers, "--resume"), env=env(), capture_output=True
        )
        print(f"resumed: exit {res.returncode}, {n - kept} runs in {time.perf_counter() - t:.0f} s")
        same = {name: (straight / name).read_bytes() == (resumed / name).read_bytes() for name in TABLES}
    print("tables identical: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in same.items()))
    sys.exit(0 if res.returncode == 0 and all(same.values()) else 1)


if __name__ == "__main__":
    main()
