"""A synthetic PyTorch profiler (Kineto) trace of a data-parallel step, for examples and tests.

It writes what `torch.profiler` exports for a DDP step on one rank, written here from the
format, not from the importer: a `ProfilerStep#N` CPU annotation per step; per kernel, a
`cudaLaunchKernel` runtime event and a `kernel` event sharing a `correlation`; NCCL
all-reduce kernels (`ncclDevKernel_AllReduce_Sum_bf16_RING_LL`) on their own stream,
carrying the `record_param_comms` args (`Collective name`, `In msg nelems`, `Out msg
nelems`, `dtype`, `Group size`, `Process Group Name`, `Process Group Ranks`); and the
cross-stream waits as `cuda_sync` "Stream Wait Event"s naming the waited stream and the
correlation of the `cudaEventRecord` (the events `enable_cuda_sync_events` adds).

The step: LAYERS forward GEMMs on the compute stream, then LAYERS backward GEMMs; after
each backward GEMM the NCCL stream waits for it and all-reduces that layer's gradients;
the compute stream waits for the last all-reduce before the optimizer kernel. Kernel
times are parameters (`fwd_us`, `bwd_us`, `allreduce_us`, `optim_us`): the generator lays
the kernels out on a timeline with those durations (a collective starts when its gradient
is ready and the NCCL stream is free), so the trace's step time is whatever they imply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COMPUTE_STREAM, NCCL_STREAM = 7, 20


@dataclass
class SyntheticDDP:
    """Parameters of the synthetic step (module docstring). Times in microseconds."""

    world: int = 4
    layers: int = 4
    grad_elems: int = 25_000_000  # bf16 gradient elements per layer
    fwd_us: float = 900.0
    bwd_us: float = 1800.0
    allreduce_us: float = 1500.0
    optim_us: float = 400.0
    steps: tuple[int, ...] = (1, 2)


class _Timeline:
    def __init__(self, rank: int) -> None:
        self.events: list[dict[str, Any]] = []
        self.rank = rank
        self.corr = 100
        self.cpu_us = 1000.0
        self.free = {COMPUTE_STREAM: 0.0, NCCL_STREAM: 0.0}

    def launch(
        self, name: str, stream: int, dur_us: float, after_us: float = 0.0, args: Any = None
    ) -> tuple[int, float]:
        self.corr += 1
        self.cpu_us += 5.0
        pid, tid = 1000 + self.rank, 1000 + self.rank
        self.events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
             "ts": self.cpu_us, "dur": 4.0, "args": {"correlation": self.corr}}
        )  # fmt: skip
        start = max(self.free[stream], self.cpu_us + 8.0, after_us)
        self.free[stream] = start + dur_us
        kernel_args = {"device": self.rank, "stream": stream, "correlation": self.corr, "grid": [132, 1, 1],
                       "block": [256, 1, 1], **(args or {})}  # fmt: skip
        self.events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": self.rank, "tid": stream, "ts": start,
             "dur": dur_us, "args": kernel_args}
        )  # fmt: skip
        return self.corr, start + dur_us

    def record_event(self) -> int:
        self.corr += 1
        self.cpu_us += 2.0
        self.events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaEventRecord", "pid": 1000 + self.rank,
             "tid": 1000 + self.rank, "ts": self.cpu_us, "dur": 1.0, "args": {"correlation": self.corr}}
        )  # fmt: skip
        return self.corr

    def wait(self, stream: int, on_stream: int, record_corr: int, ready_us: float) -> None:
        self.corr += 1
        self.cpu_us += 2.0
        self.events.append(
            {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": self.rank, "tid": stream,
             "ts": max(self.cpu_us, self.free[stream]), "dur": 0.0,
             "args": {"cuda_sync_kind": "Stream Wait Event", "stream": stream, "correlation": self.corr,
                      "device": self.rank, "wait_on_stream": on_stream,
                      "wait_on_cuda_event_record_corr_id": record_corr}}
        )  # fmt: skip
        self.free[stream] = max(self.free[stream], ready_us)


def synthetic_kineto(rank: int, p: SyntheticDDP) -> dict[str, Any]:
    """The Kineto JSON object of rank `rank` (module docstring)."""
    t = _Timeline(rank)
    ranks = list(range(p.world))
    comm_args = {
        "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": p.grad_elems,
        "Out msg nelems": p.grad_elems, "Group size": p.world, "Process Group Name": "0",
        "Process Group Description": "default_pg", "Process Group Ranks": str(ranks), "Rank": rank,
    }  # fmt: skip
    for step in p.steps:
        start = t.cpu_us
        for i in range(p.layers):
            t.launch(f"sm90_xmma_gemm_bf16bf16_bf16f32_fwd_layer{i}", COMPUTE_STREAM, p.fwd_us)
        ar_end = 0.0
        for i in reversed(range(p.layers)):
            _, end = t.launch(f"sm90_xmma_gemm_bf16bf16_bf16f32_bwd_layer{i}", COMPUTE_STREAM, p.bwd_us)
            t.wait(NCCL_STREAM, COMPUTE_STREAM, t.record_event(), end)
            _, ar_end = t.launch(
                "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                NCCL_STREAM,
                p.allreduce_us,
                args=comm_args,
            )
        t.wait(COMPUTE_STREAM, NCCL_STREAM, t.record_event(), ar_end)
        _, end = t.launch("multi_tensor_apply_kernel_adam", COMPUTE_STREAM, p.optim_us)
        t.cpu_us = max(t.cpu_us, end) + 50.0
        t.events.append(
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1000 + rank,
             "tid": 1000 + rank, "ts": start, "dur": t.cpu_us - start, "args": {}}
        )  # fmt: skip
    pg = {
        "pg_name": "0",
        "pg_desc": "default_pg",
        "backend_config": "cuda:nccl",
        "pg_size": p.world,
        "ranks": ranks,
    }
    return {
        "schemaVersion": 1,
        "distributedInfo": {
            "backend": "nccl",
            "rank": rank,
            "world_size": p.world,
            "pg_count": 1,
            "pg_config": [pg],
        },
        "traceEvents": sorted(t.events, key=lambda e: e["ts"]),
        "traceName": f"rank{rank}.pt.trace.json",
    }
