"""Benchmark: import a 64-rank, ~50,000-node Chakra trace and simulate its step.

The trace is written by clustersim's exporter from a synthetic step built here: 64 ranks
as 8 tensor-parallel groups of 8 (one server each) times 8 data-parallel replicas; per
rank, LAYERS layers of forward compute + tensor-parallel all-reduce, the same backward,
then BUCKETS data-parallel gradient all-reduces overlapping the backward pass, and an
optimizer step. Nodes per rank: 4 * LAYERS + BUCKETS + 1.

The target: reading the ET files, building the step trace, validating it into a
step program, and simulating one step (flow fidelity, on the 64 first GPUs of the
`gpt13b-tp8-dp32-rail-clos` scenario's topology) under 30 s. Printed: node count and the
CPU and wall seconds of each phase (CPU seconds of the process, so other load on the
machine does not count).

    .venv/bin/python benchmarks/bench_chakra_import.py
    .venv/bin/python benchmarks/bench_chakra_import.py --layers 50   # smaller
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from simulator.scenario.prepare import prepare, step_simulator
from simulator.workload.interchange.chakra_read import import_chakra
from simulator.workload.interchange.chakra_write import export_chakra
from simulator.workload.interchange.tracebuild import program_from_dict
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[1]
RANKS, TP = 64, 8


def synthetic_step(layers: int, buckets: int, gpus: list[str]) -> StepProgram:
    """The step described in the module docstring (times and sizes of a ~13B model's layer)."""
    ops: list[Op] = []
    tp_groups = [tuple(range(g * TP, (g + 1) * TP)) for g in range(RANKS // TP)]
    dp_groups = [tuple(range(t, RANKS, TP)) for t in range(TP)]

    def layer(phase: str, i: int, deps_of: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
        for r in range(RANKS):
            ops.append(
                Op(f"{phase}{i}@{r}", "compute", (r,), deps=deps_of.get(r, ()), duration_s=1.1e-3, tag=phase)
            )
        after: dict[int, tuple[str, ...]] = {}
        for g, grp in enumerate(tp_groups):
            cid = f"tp{phase}{i}g{g}"
            ops.append(
                Op(
                    cid,
                    "collective",
                    grp,
                    "comm",
                    tuple(f"{phase}{i}@{r}" for r in grp),
                    "tp",
                    collective="all_reduce",
                    group=grp,
                    size_bytes=2.0e7,
                )
            )
            after.update({r: (cid,) for r in grp})
        return after

    deps: dict[int, tuple[str, ...]] = {}
    for i in range(layers):
        deps = layer("fwd", i, deps)
    per_bucket = max(1, layers // buckets)
    for i in range(layers):
        deps = layer("bwd", i, deps)
        if (i + 1) % per_bucket == 0 and (i + 1) // per_bucket <= buckets:
            b = (i + 1) // per_bucket - 1
            for t, grp in enumerate(dp_groups):
                ops.append(
                    Op(
                        f"dp{b}g{t}",
                        "collective",
                        grp,
                        "dp",
                        tuple(f"bwd{i}@{r}" for r in grp),
                        "dp",
                        collective="all_reduce",
                        group=grp,
                        size_bytes=5.0e8,
                    )
                )
    last = {r: tuple(f"dp{b}g{r % TP}" for b in range(buckets)) for r in range(RANKS)}
    ops.extend(
        Op(f"optim@{r}", "compute", (r,), deps=last[r], duration_s=4e-3, tag="optimizer")
        for r in range(RANKS)
    )
    return StepProgram("synthetic-64", gpus[:RANKS], ops)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=192)
    parser.add_argument("--buckets", type=int, default=12)
    args = parser.parse_args()
    prep = prepare(ROOT / "scenarios" / "gpt13b-tp8-dp32-rail-clos.yaml")
    gpus = prep.cluster.gpus
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "et"
        export_chakra(synthetic_step(args.layers, args.buckets, gpus), folder)
        size_mb = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        c0, w0 = time.process_time(), time.perf_counter()
        result = import_chakra(folder)
        c1, w1 = time.process_time(), time.perf_counter()
        program = program_from_dict(result.data, folder / "trace.yaml", gpus)
        c2, w2 = time.process_time(), time.perf_counter()
    sim = step_simulator(dataclasses.replace(prep, program=program), seed=1, record_links=False)
    sim.run(1)
    c3, w3 = time.process_time(), time.perf_counter()
    step = sim.step_rows[0]
    nodes = f"{result.node_count} nodes, {size_mb:.1f} MB of ET files"
    print(f"trace: {RANKS} ranks, {nodes} -> {len(program.ops)} ops")
    print(f"read + build trace : {c1 - c0:6.2f} s CPU ({w1 - w0:6.2f} s wall)")
    print(f"validate -> program: {c2 - c1:6.2f} s CPU ({w2 - w1:6.2f} s wall)")
    print(f"simulate one step  : {c3 - c2:6.2f} s CPU ({w3 - w2:6.2f} s wall)")
    print(f"total              : {c3 - c0:6.2f} s CPU ({w3 - w0:6.2f} s wall); bar 30 s")
    print(f"simulated step time: {step.finished_at_s - step.started_at_s:.6f} s")


if __name__ == "__main__":
    main()
