"""Time every case of the bad-input corpus: the slowest must end well within 10 s.

The corpus test (`tests/inputs/test_corpus.py`) checks what each case prints and that it
writes nothing; this script measures how long each takes, which a test must not assert.
Each case runs through the same commands as the test (`validate`, then the command that
acts on it), in process; the wall time of the whole case is reported, slowest first.

    .venv/bin/python benchmarks/bench_bad_inputs.py [--top N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.inputs.corpus_cli import run_case  # noqa: E402

MANIFEST = REPO / "tests" / "inputs" / "expected.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many of the slowest cases to print")
    args = parser.parse_args()
    entries = yaml.safe_load(MANIFEST.read_text())
    times: list[tuple[float, str]] = []
    for entry in entries:
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            run_case(
                entry["case"],
                Path(tmp),
                entry.get("env"),
                entry.get("only"),
                output_flag=not entry.get("no_o"),
            )
            times.append((time.perf_counter() - start, entry["case"]))
    times.sort(reverse=True)
    print(f"{len(times)} cases; total {sum(t for t, _ in times):.1f} s wall; slowest {times[0][0]:.2f} s")
    for t, case in times[: args.top]:
        print(f"  {t:7.2f} s  {case}")


if __name__ == "__main__":
    main()
