"""Time to build the largest catalog designs (graph generation alone, no simulation).

    .venv/bin/python benchmarks/bench_design_build.py

Target: a 16,384-GPU three-tier SuperPOD-like fabric (2,048 nodes, 64-port switches) builds
in under 5 s on a 2-core machine, and the 32,768-GPU designs of the rail-only comparison
(fixed-radix three-tier rail-optimized Clos, rail-only with two-tier rails, 128-port
switches) in under 10 s. Prints the median of several builds of each design.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.network.design.clos import RailClosSpec, RailOnlySpec, SuperPodSpec  # noqa: E402
from simulator.network.design.rail_optimized import RailOptimizedClosSpec  # noqa: E402
from simulator.network.design.registry import build_design  # noqa: E402

DESIGNS = {
    "superpod 2,048 nodes (16,384 GPUs)": (SuperPodSpec(nodes=2048), 5.0),
    "rail_clos 2,048 nodes (16,384 GPUs)": (RailClosSpec(generator="rail_clos", nodes=2048), 5.0),
    "rail_optimized_clos 4,096 nodes (32,768 GPUs), radix 128": (
        RailOptimizedClosSpec(nodes=4096, switch_radix=128),
        10.0,
    ),
    "rail_only 4,096 nodes (32,768 GPUs), radix 128": (RailOnlySpec(nodes=4096, switch_radix=128), 10.0),
}
REPEATS = 3


def main() -> int:
    for label, (spec, target_s) in DESIGNS.items():
        times = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            graph = build_design(spec)
            times.append(time.perf_counter() - t0)
        median_s = statistics.median(times)
        verdict = "OK" if median_s < target_s else "OVER"
        print(
            f"{label}: {graph.number_of_nodes():,} nodes, {graph.number_of_edges():,} links; "
            f"build median {median_s:.2f} s over {REPEATS} (target < {target_s:.0f} s: {verdict})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
