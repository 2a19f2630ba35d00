"""Fingerprint every catalog scenario's outputs, to prove a speed-up changed no number.

Runs each file of scenarios/ (top level, at-scale/ and validation/) once through the CLI
(`run --no-dashboard`, `compare --serial --no-dashboards`, `sweep --serial --seeds 2`) and
records the sha256 of every output file, with the same exclusions as
bench_determinism.py (`summary.json` without `wall_time_s`, no HTML). A file slower than
`--timeout` seconds is reported as skipped, not as a difference.

    .venv/bin/python benchmarks/catalog_fingerprint.py --save base.json [FILE ...]
    .venv/bin/python benchmarks/catalog_fingerprint.py --check base.json [FILE ...]

`--check` prints one line per file (identical / DIFFERS with the differing outputs /
skipped) and exits 1 if any file differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_determinism import command, kind_of, manifest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def catalog() -> list[Path]:
    top = sorted((REPO / "scenarios").glob("*.yaml"))
    return top + sorted((REPO / "scenarios").glob("*/*.yaml"))


def fingerprint(path: Path, work: Path, timeout_s: float) -> tuple[dict[str, str] | str, float]:
    """(output manifest, or a reason it has none; wall s) for one catalog file."""
    kind = kind_of(path)
    out = work / path.stem
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"}
    t = time.perf_counter()
    try:
        res = subprocess.run(
            command(kind, path, out, "serial", None, 2), env=env, capture_output=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return f"skipped: over {timeout_s:.0f} s", time.perf_counter() - t
    wall_s = time.perf_counter() - t
    if res.returncode != 0:
        return f"exit {res.returncode}: {res.stderr.decode()[-200:].strip()}", wall_s
    return manifest(out), wall_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", type=Path)
    group.add_argument("--check", type=Path)
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args()
    files = [f.resolve() for f in a.files] or catalog()
    base = json.loads(a.check.read_text()) if a.check else {}
    got: dict[str, object] = {}
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            # a catalog file by its path in scenarios/, any other (a benchmark's input) as given
            name = str(f.relative_to(REPO / "scenarios")) if f.is_relative_to(REPO / "scenarios") else str(f)
            result, wall_s = fingerprint(f, Path(tmp), a.timeout)
            got[name] = result
            if a.save:
                verdict = "saved" if isinstance(result, dict) else str(result)
            elif isinstance(result, str) or isinstance(base.get(name), str) or name not in base:
                verdict = f"skipped ({result if isinstance(result, str) else 'no baseline'})"
            elif result == base[name]:
                verdict = "identical"
            else:
                failed += 1
                diff = sorted(n for n in set(result) | set(base[name]) if result.get(n) != base[name].get(n))
                verdict = "DIFFERS: " + ", ".join(diff)
            print(f"{name:50s} {wall_s:7.1f} s  {verdict}", flush=True)
    if a.save:
        a.save.write_text(json.dumps(got, indent=1, sort_keys=True))
    print(f"{len(files)} files, {failed} differ")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
