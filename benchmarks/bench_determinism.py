"""Determinism: every catalog scenario gives identical bytes across PYTHONHASHSEED and executors.

For each file of scenarios/*.yaml, in a subprocess per run:

* a scenario: `clustersim run` under PYTHONHASHSEED 0, 1 and 12345;
* a compare file: `clustersim compare --serial` under the three hash seeds, then the
  process pool and a local Dask cluster under PYTHONHASHSEED 0;
* a study file: `clustersim sweep --serial` under the three hash seeds, then the pool and
  local Dask under PYTHONHASHSEED 0.

Every output file is compared byte for byte with the first run's, except the ones that
carry wall time: `summary.json` (compared without `wall_time_s`) and the HTML pages (not
compared; runs use --no-dashboard where the command has it).

    .venv/bin/python benchmarks/bench_determinism.py [--steps N] [--seeds N] [FILE ...]

`--steps` caps run.steps (default: each file's own); `--seeds` sets the seeds of a study
(default 2). Prints one line per file and exits 1 if any differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
HASH_SEEDS = ("0", "1", "12345")


def kind_of(path: Path) -> str:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if "variants" in data:
        return "compare"
    if "job" in data and "step" in data:
        return "study"
    return "scenario"


def manifest(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every output file (see the module docstring for exceptions)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.suffix == ".html" or p.name.startswith("."):
            continue
        data = p.read_bytes()
        if p.name == "summary.json":
            summary = json.loads(data)
            summary.pop("wall_time_s", None)
            data = json.dumps(summary, sort_keys=True).encode()
        out[str(p.relative_to(folder))] = hashlib.sha256(data).hexdigest()
    return out


def command(kind: str, path: Path, out: Path, executor: str, steps: int | None, seeds: int) -> list[str]:
    args = [sys.executable, "-m", "simulator.commands.app"]
    if kind == "scenario":
        args += ["run", str(path), "-o", str(out), "--no-dashboard"]
    elif kind == "compare":
        args += ["compare", str(path), "-o", str(out), "--no-dashboards"]
    else:
        args += ["sweep", str(path), "-o", str(out), "--seeds", str(seeds)]
    if steps is not None and kind != "study":
        args += ["--steps", str(steps)]
    if executor == "serial" and kind != "scenario":
        args.append("--serial")
    elif executor == "dask":
        args += ["--dask", "local"]
    return args


def check(path: Path, steps: int | None, seeds: int, work: Path) -> tuple[str, int, list[str], float]:
    """(kind, runs made, differing runs, wall s) for one catalog file."""
    kind = kind_of(path)
    runs = [(h, "serial") for h in HASH_SEEDS]
    if kind != "scenario":
        runs += [("0", "pool"), ("0", "dask")]
    t = time.perf_counter()
    first: dict[str, str] | None = None
    bad = []
    for k, (hash_seed, executor) in enumerate(runs):
        out = work / f"{path.stem}-{k}"
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": hash_seed}
        res = subprocess.run(command(kind, path, out, executor, steps, seeds), env=env, capture_output=True)
        label = f"PYTHONHASHSEED={hash_seed} {executor}"
        if res.returncode != 0:
            bad.append(f"{label}: exit {res.returncode}: {res.stderr.decode()[-300:]}")
            continue
        got = manifest(out)
        if first is None:
            first = got
        elif got != first:
            diff = sorted(n for n in set(got) | set(first) if got.get(n) != first.get(n))
            bad.append(f"{label}: {', '.join(diff)}")
    return kind, len(runs), bad, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--seeds", type=int, default=2)
    a = ap.parse_args()
    files = a.files or sorted((REPO / "scenarios").glob("*.yaml"))
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            kind, n, bad, wall_s = check(f, a.steps, a.seeds, Path(tmp))
            failed += bool(bad)
            verdict = "identical" if not bad else "DIFFERS"
            print(f"{f.name:45s} {kind:8s} {n} runs {verdict:9s} ({wall_s:.0f} s)", flush=True)
            for line in bad:
                print(f"    {line}")
    print(f"{len(files)} files, {failed} differ")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
