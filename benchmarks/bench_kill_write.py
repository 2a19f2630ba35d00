"""Kill test: SIGINT / SIGTERM at random points of a run writing over an old results folder.

An old results folder is made once (quickstart, seed 1, one step) and a reference new one
(seed 2, two steps). For each point, a copy of the old folder is overwritten by
`clustersim -v run` in a subprocess that receives SIGINT or SIGTERM (alternately) at a
random point of its write phase: once it logs "writing results", after a delay drawn
uniformly from [0, 1.5 x the shorter write phase of the two uninterrupted runs] (so some
points fall just after the write, when the folder must be wholly new). Afterwards
the folder must be wholly old (every file byte-identical to the old one) or wholly new (the
same files as the reference, each identical to it; `summary.json` compared without
`wall_time_s` and `dashboard.html` only checked complete, as both carry the wall time),
and no temporary or set-aside folder may be left.

    .venv/bin/python benchmarks/bench_kill_write.py [--points 20] [--seed 0]

Prints one line per point (signal, delay, outcome, exit code) and the counts; exits 1 on
any mixed folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "quickstart.yaml"
#: Files whose bytes carry the wall time of the run (compared by content, not bytes).
TIMED = ("summary.json", "dashboard.html")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "simulator.commands.app", *args]


def run_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}


def manifest(folder: Path) -> dict[str, str]:
    """File name -> sha256 of every file of a folder (summary.json without its wall time)."""
    out = {}
    for p in sorted(folder.iterdir()):
        data = p.read_bytes()
        if p.name == "summary.json":
            summary = json.loads(data)
            summary.pop("wall_time_s", None)
            data = json.dumps(summary, sort_keys=True).encode()
        elif p.name == "dashboard.html":
            data = str(data.rstrip().endswith(b"</html>")).encode()
        out[p.name] = hashlib.sha256(data).hexdigest()
    return out


def start_writer(folder: Path, seed: int, steps: int) -> subprocess.Popen[bytes]:
    """`clustersim -v run` into `folder`, returned once it logs that it starts writing."""
    args = cli("-v", "run", str(SCENARIO), "-o", str(folder), "--seed", str(seed), "--steps", str(steps))
    proc = subprocess.Popen(args, env=run_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for line in proc.stderr or ():
        if b"writing results" in line:
            break
    return proc


def make_run(folder: Path, seed: int, steps: int) -> float:
    """An uninterrupted run into `folder`; returns the wall time of its write phase in seconds."""
    proc = start_writer(folder, seed, steps)
    t = time.perf_counter()
    for line in proc.stderr or ():
        if b"results written" in line:
            break
    write_s = time.perf_counter() - t
    if proc.wait() != 0:
        raise RuntimeError(f"reference run into {folder} failed")
    return write_s


def leftovers(parent: Path, name: str) -> list[str]:
    """Temporary or set-aside folders of `name` left in `parent`."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}.") and p.is_dir())


def one_point(
    work: Path, old: Path, new: dict[str, str], delay_s: float, signum: int
) -> tuple[str, int, list[str]]:
    """Overwrite a copy of `old` and signal the writer after `delay_s`: (outcome, exit code, leftovers)."""
    parent = Path(tempfile.mkdtemp(dir=work))
    target = parent / "q"
    shutil.copytree(old, target)
    proc = start_writer(target, seed=2, steps=2)
    try:
        proc.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    got = manifest(target) if target.is_dir() else {}
    outcome = "old" if got == manifest(old) else "new" if got == new else "MIXED"
    if b"Traceback" in err:
        outcome += "+traceback"
    return outcome, proc.returncode, leftovers(parent, "q")


def trials(
    points: int, seed: int, work: Path, make: Callable[[Path, int, int], float] = make_run
) -> list[tuple[str, float, str, int, list[str]]]:
    """Run the kill test; one (signal name, delay s, outcome, exit code, leftovers) per point.

    Args:
        make: makes the old and the reference new folder (folder, seed, steps) and returns
            the write phase in seconds (default: `make_run`, a subprocess).
    """
    old, new = work / "old", work / "new"
    # the shorter of the two write phases: on a busy machine one of them may be stretched
    write_s = min(make(old, 1, 1), make(new, 2, 2))
    new_files = manifest(new)
    rng = random.Random(seed)
    rows = []
    for k in range(points):
        signum = (signal.SIGINT, signal.SIGTERM)[k % 2]
        delay_s = rng.uniform(0.0, 1.5 * write_s)
        outcome, code, left = one_point(work, old, new_files, delay_s, signum)
        rows.append((signal.Signals(signum).name, delay_s, outcome, code, left))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = trials(a.points, a.seed, Path(tmp))
    for name, delay_s, outcome, code, left in rows:
        print(f"{name:8s} after {delay_s:5.2f} s: {outcome:6s} exit {code:3d} leftovers {left}")
    counts = {k: sum(r[2] == k for r in rows) for k in ("old", "new")}
    bad = [r for r in rows if r[2] not in ("old", "new") or r[4]]
    print(f"{len(rows)} points: {counts['old']} wholly old, {counts['new']} wholly new, {len(bad)} bad")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
