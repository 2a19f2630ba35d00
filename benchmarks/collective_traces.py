"""Write the collective-sweep traces of `workloads/traces/collective-*.yaml`.

A collective sweep is the simulator's form of an nccl-tests run: one collective op per
message size, each waiting for the one before (as nccl-tests times one size after another),
over every rank of the trace, and no compute. The op ids say kind and size
(`all_reduce-1048576`), so a result's ops frame reads as a busbw-vs-size curve
(`simulator.calibration.curve.busbw_curve`).

    python benchmarks/collective_traces.py      # rewrites the traces in workloads/traces/
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "workloads" / "traces"

#: 1 KiB ... 1 GiB by powers of 2 (nccl-tests -b 1K -e 1G -f 2)
EVERY_OCTAVE = [2**k for k in range(10, 31)]
#: 1 KiB ... 16 GiB by powers of 2 (the two-node samples reach 8-16 GiB)
TO_16_GIB = [2**k for k in range(10, 35)]
#: 1 KiB ... 1 GiB by powers of 4 (fewer ops, for the large rank counts)
EVERY_TWO_OCTAVES = [2**k for k in range(10, 31, 2)]

SWEEPS: dict[str, tuple[int, tuple[str, ...], list[int], str]] = {
    "collective-sweep-allreduce-8": (8, ("all_reduce",), EVERY_OCTAVE, "one node of 8 GPUs"),
    "collective-sweep-allreduce-16": (16, ("all_reduce",), TO_16_GIB, "two nodes of 8 GPUs"),
    "collective-sweep-allgather-16": (16, ("all_gather",), TO_16_GIB, "two nodes of 8 GPUs"),
    "collective-sweep-allreduce-allgather-16": (
        16, ("all_reduce", "all_gather"), TO_16_GIB, "two nodes of 8 GPUs",
    ),
    **{
        f"collective-sweep-4kinds-{n}": (
            n, ("all_reduce", "reduce_scatter", "all_gather", "broadcast"), EVERY_TWO_OCTAVES,
            f"{max(1, n // 8)} node(s) of 8 GPUs",
        )
        for n in (8, 16, 128, 1024)
    },
}  # fmt: skip


def trace_text(name: str, ranks: int, kinds: tuple[str, ...], sizes: list[int], where: str) -> str:
    """The YAML of one sweep trace."""
    lines = [
        f"# Collective sweep on {ranks} ranks ({where}): {', '.join(kinds)} at "
        f"{len(sizes)} sizes from {sizes[0]} B to {sizes[-1]} B, one after another, no compute",
        "# (the simulator's form of an nccl-tests run). Written by benchmarks/collective_traces.py.",
        "format: clustersim-step/1",
        f"name: {name}",
        f"ranks: {ranks}",
        "groups:",
        "  world: all",
        "ops:",
    ]
    prev = None
    for kind in kinds:
        for size in sizes:
            op_id = f"{kind}-{size}"
            deps = f", deps: [{prev}]" if prev else ""
            lines.append(
                f"  - {{id: {op_id}, kind: collective, collective: {kind}, group: world, "
                f"size_bytes: {size}{deps}, tag: {kind}}}"
            )
            prev = op_id
    return "\n".join(lines) + "\n"


def main() -> None:
    for name, (ranks, kinds, sizes, where) in SWEEPS.items():
        (TRACES / f"{name}.yaml").write_text(trace_text(name, ranks, kinds, sizes, where))
        print(f"wrote workloads/traces/{name}.yaml")


if __name__ == "__main__":
    main()
