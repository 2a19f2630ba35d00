"""Measure GEMM and memory-bound kernel timings with PyTorch, for compute calibration.

    python benchmarks/gemm_timings.py -o gemm.csv [--memory-csv memory.csv] \
        [--device cuda|cpu] [--dtype bf16 --dtype fp32] [--sizes 1024,2048,4096] \
        [--shapes 8192x6912x2304,8192x2304x9216] [--repeats 20]

Writes the CSV files `clustersim calibrate` reads (`simulator.calibration.compute`):
GEMM rows `M,N,K,dtype,time_s` (square and a few skinny shapes, plus `--shapes`, e.g. a
model's own GEMMs; median of `--repeats` timed runs after warm-up) and memory-bound rows
`bytes,time_s` (a tensor copy; bytes = read + written). On CPU (`--device cpu`) it uses
small default sizes and fp32 so that it runs anywhere in seconds.
`clustersim calibrate gemm.csv --gpu topologies/gpus/X.yaml -o P.yaml` fits the
shape-aware GEMM model's achievable fraction of peak and per-kernel cost from the GEMM
rows (rows that are memory-bound on that GPU are named and refused). PyTorch is optional:
without it the script exits with code 3 and says how to install it. GPU timing uses CUDA
events after `torch.cuda.synchronize()`.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "tf32": "float32"}


def _timer(torch, device: str):  # type: ignore[no-untyped-def]
    def run(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
        for _ in range(3):
            fn()
        samples = []
        for _ in range(repeats):
            if device.startswith("cuda"):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
        return statistics.median(samples)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, required=True, help="GEMM CSV to write.")
    parser.add_argument("--memory-csv", type=Path, help="Memory-bound kernel CSV to write.")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda if present).")
    parser.add_argument("--dtype", action="append", choices=sorted(DTYPES), help="Repeatable.")
    parser.add_argument("--sizes", help="Comma-separated square sizes (default by device).")
    parser.add_argument("--shapes", help="Comma-separated MxNxK shapes to add (e.g. 8192x6912x2304).")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print(
            "error: PyTorch is not installed; install it (https://pytorch.org/get-started/) "
            "to measure GEMM timings, e.g. `pip install torch`.",
            file=sys.stderr,
        )
        return 3
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    on_cpu = device == "cpu"
    dtypes = args.dtype or (["fp32"] if on_cpu else ["bf16", "fp16", "fp32"])
    sizes = (
        [int(s) for s in args.sizes.split(",")]
        if args.sizes
        else ([64, 128, 256, 512] if on_cpu else [256, 512, 1024, 2048, 4096, 8192, 16384])
    )
    repeats = args.repeats or (3 if on_cpu else 20)
    timed = _timer(torch, device)
    if not on_cpu:
        torch.backends.cuda.matmul.allow_tf32 = "tf32" in dtypes

    shapes = [(s, s, s) for s in sizes] + [(sizes[-1], sizes[0], sizes[-1])]
    for text in (args.shapes or "").split(","):
        if text.strip():
            m, n, k = (int(x) for x in text.lower().split("x"))
            shapes.append((m, n, k))
    rows = []
    for name in dtypes:
        dt = getattr(torch, DTYPES[name])
        for m, n, k in shapes:
            a = torch.randn(m, k, device=device, dtype=dt)
            b = torch.randn(k, n, device=device, dtype=dt)
            rows.append((m, n, k, name, timed(lambda a=a, b=b: a @ b, repeats)))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["M", "N", "K", "dtype", "time_s"])
        w.writerows((m, n, k, d, f"{t:.6g}") for m, n, k, d, t in rows)
    print(f"wrote {args.output} ({len(rows)} GEMMs on {device})")

    if args.memory_csv:
        mem = []
        top = 24 if on_cpu else 32
        for p in range(16, top + 1, 2):
            x = torch.empty(2**p // 4, device=device, dtype=torch.float32)
            y = torch.empty_like(x)
            mem.append((2 * x.numel() * 4, timed(lambda x=x, y=y: y.copy_(x), repeats)))
        with args.memory_csv.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["bytes", "time_s"])
            w.writerows((b, f"{t:.6g}") for b, t in mem)
        print(f"wrote {args.memory_csv} ({len(mem)} copies on {device})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
