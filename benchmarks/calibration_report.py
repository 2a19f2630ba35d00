"""Error of the calibrated simulator on every sample (the calibration validation table).

For each table of each nccl-tests / rccl-tests sample, fit a profile on that file and replay
it through the engine; print the median absolute error for sizes >= 1 MiB and the maximum.

    .venv/bin/python benchmarks/calibration_report.py [SAMPLES_DIR]

SAMPLES_DIR defaults to the samples shipped in `topologies/calibration/samples/`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from simulator.calibration.build import DEFAULT_SAMPLES
from simulator.calibration.fit import fit_table
from simulator.calibration.parser import read_benchmark
from simulator.calibration.profile import build_profile
from simulator.calibration.replay import replay


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SAMPLES
    print(f"{'file':<72} {'collective':<15} {'nodes':>5} {'median>=1MiB':>12} {'max':>7}")
    for path in sorted(folder.glob("*.txt")):
        for table in read_benchmark(path):
            res = replay(table, build_profile("p", [fit_table(table)]))
            err = res["rel_error"].abs()
            big = err[res["size_bytes"] >= 2**20]
            med = float(np.median(big)) if len(big) else float("nan")
            print(f"{path.name:<72} {table.collective:<15} {table.n_nodes:>5} {med:>12.1%} {err.max():>7.1%}")


if __name__ == "__main__":
    main()
