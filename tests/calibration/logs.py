"""Helpers of the calibration tests: the shipped sample folder and a synthetic-log writer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "topologies" / "calibration" / "samples"
DATA = Path(__file__).resolve().parent / "data"

PERF_NAME = {
    "all_reduce": "all_reduce_perf",
    "all_gather": "all_gather_perf",
    "reduce_scatter": "reduce_scatter_perf",
    "broadcast": "broadcast_perf",
    "reduce": "reduce_perf",
    "all_to_all": "alltoall_perf",
    "send_recv": "sendrecv_perf",
}


def sample_files() -> list[Path]:
    """The nccl-tests / rccl-tests logs shipped in `topologies/calibration/samples/`."""
    return sorted(SAMPLES.glob("*.txt"))


def nccl_time(us: float) -> str:
    """Time formatted as nccl-tests prints it (common.cu: %7.0f / %7.1f / %7.2f)."""
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def synthetic_log(
    kind: str,
    n_gpus: int,
    gpus_per_node: int,
    alpha_s: float,
    busbw_bytes_per_s: float,
    sizes: Sequence[int],
    *,
    prefix: str = "",
) -> str:
    """An nccl-tests log whose times follow t = alpha + S * factor(n) / busbw exactly
    (up to nccl-tests' printed precision)."""
    from simulator.calibration.collective import busbw_factor

    f = busbw_factor(kind, n_gpus)
    redop = "sum" if kind in ("all_reduce", "reduce_scatter", "reduce") else "none"
    root = 0 if kind in ("broadcast", "reduce") else -1
    lines = [
        f"# Collective test starting: {PERF_NAME[kind]}",
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 "
        "iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for r in range(n_gpus):
        host = f"node-{r // gpus_per_node}"
        lines.append(
            f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on {host} device {r % gpus_per_node:2d} "
            "[0000:19:00] NVIDIA H100 80GB HBM3"
        )
    lines += [
        "#",
        "#                                                    "
        "          out-of-place                       in-place",
        "#       size         count      type   redop    root     time"
        "   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                            "
        "   (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
    ]
    for s in sizes:
        us = (alpha_s + s * f / busbw_bytes_per_s) * 1e6
        t = nccl_time(us)
        algbw = s / float(t) / 1e3
        count = s // 4 // (n_gpus if kind in ("all_gather", "reduce_scatter", "all_to_all") else 1)
        half = f"{t}  {algbw:6.2f}  {algbw * f:6.2f}  {0:5d}"
        lines.append(f"{s:12d}  {count:12d}  {'float':>8s}  {redop:>6s}  {root:6d}  {half}  {half}")
    lines += [
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 1.0",
        "#",
        f"# Collective test concluded: {PERF_NAME[kind]}",
    ]
    return "\n".join(prefix + ln for ln in lines) + "\n"
