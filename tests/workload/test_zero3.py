"""ZeRO-3 as DeepSpeed runs it: bucketed parameter gathers with a bounded prefetch, bucketed
gradient reduce-scatters, a per-call overhead (layout fields `zero3_*`).

The mechanism behind the published fall of ZeRO-3 throughput with scale at a fixed global
batch (Narayanan et al. SC'21, Table 2: 144 -> 88 -> 44 TFLOP/s per GPU for 175B on 384 ->
768 -> 1,536 A100; `benchmarks/zero3_scaling.py` runs those rows): a layer far larger than
the prefetch window has its gathers on the critical path, and a ring all-gather over n ranks
costs n - 1 latency steps per call, so the exposed gather time grows with n while each
GPU's compute shrinks.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.workload.layout import LayoutSpec, layer_rank_params
from simulator.workload.memory import comm_buffer_bytes
from simulator.workload.model import load_model
from tests.workload.test_generate import _scenario

ROOT = Path(__file__).resolve().parents[2]
TOPO_4N = ROOT / "topologies" / "h100-rail-clos-4n.yaml"
BASE = {"dp": 16, "global_batch_size": 16, "zero_stage": 3, "recompute": "full"}


def _run(tmp: Path, name: str, **layout: object) -> tuple[object, dict]:
    d = tmp / name
    d.mkdir()
    prep = prepare(_scenario(d, {**BASE, **layout}))
    return prep, execute(prep).summary


def test_defaults_are_deepspeeds_buckets() -> None:
    L = LayoutSpec(global_batch_size=1)
    assert L.zero3_gather_bucket_bytes == 5e7 * 2  # stage3_prefetch_bucket_size, bf16
    assert L.zero3_reduce_bucket_bytes == 5e8 * 2  # reduce_bucket_size, bf16
    assert L.zero3_prefetch_buckets == 1 and L.zero3_call_overhead_s == 0.0
    human = LayoutSpec(global_batch_size=1, zero3_gather_bucket_mb=1, zero3_call_overhead_us=50)
    assert human.zero3_gather_bucket_bytes == 2**20 and human.zero3_call_overhead_s == pytest.approx(5e-5)


def test_layer_gathers_and_reduce_scatters_are_split_into_bucket_calls(tmp_path: Path) -> None:
    """Per micro-batch and layer: ceil(bytes / bucket) equal gathers forward and backward,
    ceil(bytes / reduce bucket) reduce-scatters; their bytes add up to the layer's."""
    (tmp_path / "m").mkdir()
    prep = prepare(
        _scenario(tmp_path / "m", {**BASE, "zero3_gather_bucket_mb": 4, "zero3_reduce_bucket_mb": 16})
    )
    model = load_model(tmp_path / "m" / "model.yaml")
    layer_bytes = layer_rank_params(model, LayoutSpec(**BASE), 0).dense * 2
    n_gather = math.ceil(layer_bytes / (4 * 2**20))
    n_rs = math.ceil(layer_bytes / (16 * 2**20))
    assert n_gather > n_rs > 1
    ops = [op for op in prep.program.ops if ".L1." in op.id or ".R1." in op.id]
    fwd = [op for op in ops if op.id.startswith("F0v0.") and "zero3_gather_dp_cp[" in op.id]
    bwd = [op for op in ops if op.id.startswith("B0v0.") and "zero3_gather_dp_cp_bwd[" in op.id]
    rs = [op for op in ops if op.id.startswith("B0v0.") and "zero3_grad_rs" in op.id]
    assert (len(fwd), len(bwd), len(rs)) == (n_gather, n_gather, n_rs)
    for calls in (fwd, bwd, rs):
        assert sum(op.size_bytes for op in calls) == pytest.approx(layer_bytes)
    # the backward gather comes before the layer's recompute, which waits for it
    recompute = next(op for op in ops if op.id.startswith("B0v0.R1.") and op.kind == "compute")
    assert bwd[-1].id in recompute.deps


def test_prefetch_window_decides_what_is_exposed(tmp_path: Path) -> None:
    """With the whole layer prefetchable (bucket and window >= layer) the gathers hide
    behind the previous layer; with DeepSpeed's small window most calls wait for the
    previous layer to end and the layer waits for them: exposed time grows and the step
    with it; no prefetch at all exposes still more."""
    big = {"global_batch_size": 128, "micro_batch_size": 8}  # compute-bound: prefetch can hide
    wide = _run(tmp_path, "wide", zero3_gather_bucket_mb=4096, zero3_prefetch_buckets=1, **big)[1]
    narrow = _run(tmp_path, "narrow", zero3_gather_bucket_mb=8, zero3_prefetch_buckets=1, **big)[1]
    none = _run(tmp_path, "none", zero3_gather_bucket_mb=8, zero3_prefetch_buckets=0, **big)[1]
    whole = _run(tmp_path, "whole", zero3_gather_bucket_mb=8, zero3_prefetch_buckets=4, **big)[1]
    assert wide["exposed_comm_s"] < narrow["exposed_comm_s"] < none["exposed_comm_s"]
    assert wide["step_time_s"] < narrow["step_time_s"] < none["step_time_s"]
    # a window of 4 calls of 8 MiB covers the whole (~30 MB) layer: as good as one big call
    # up to the latency of 3 more calls
    assert whole["step_time_s"] < narrow["step_time_s"]
    assert whole["exposed_comm_s"] == pytest.approx(wide["exposed_comm_s"], rel=0.5)


def test_call_overhead_adds_per_call_on_the_critical_path(tmp_path: Path) -> None:
    """No prefetch: every gather call is on the critical path, so a 1 ms overhead per call
    lengthens the step by at least 1 ms per exposed gather call (forward and backward)."""
    prep, base = _run(tmp_path, "base", zero3_gather_bucket_mb=8, zero3_prefetch_buckets=0)
    _, slow = _run(
        tmp_path, "slow", zero3_gather_bucket_mb=8, zero3_prefetch_buckets=0, zero3_call_overhead_us=1000
    )
    gathers = [op for op in prep.program.ops if "zero3_gather" in op.id and 0 in op.ranks]
    assert slow["step_time_s"] - base["step_time_s"] >= len(gathers) * 1e-3 * (1 - 1e-9)


def test_throughput_per_gpu_falls_with_scale_at_fixed_batch(tmp_path: Path) -> None:
    """Fixed global batch, dp 8 -> 32 (micro-batch 4 -> 1): compute per GPU falls 4x while
    each layer's gather calls stay on the critical path and their ring latency grows with
    dp, so per-GPU throughput falls (the sign of the published trend)."""
    rates = []
    for dp, mbs in ((8, 4), (16, 2), (32, 1)):
        d = tmp_path / f"dp{dp}"
        d.mkdir()
        lay = {
            **BASE,
            "dp": dp,
            "micro_batch_size": mbs,
            "global_batch_size": 32,
            "zero3_gather_bucket_mb": 1,
        }
        prep = prepare(_scenario(d, lay, topology=TOPO_4N))
        s = execute(prep).summary
        rates.append(prep.program.meta["hardware_flops_per_step"] / s["step_time_s"] / dp)
    assert rates[0] > rates[1] > rates[2]


def test_gathered_weights_held_are_one_layer_and_the_prefetch_window(tmp_path: Path) -> None:
    """ZeRO-3 buffers: the layer in use plus the prefetched buckets (at most a layer), so a
    wider prefetch window costs memory."""
    (tmp_path / "m").mkdir()
    _scenario(tmp_path / "m", BASE)
    model = load_model(tmp_path / "m" / "model.yaml")
    layer_bytes = layer_rank_params(model, LayoutSpec(**BASE), 0).total * 2

    def buffers(**kw: object) -> float:
        return comm_buffer_bytes(model, LayoutSpec(**{**BASE, **kw}), 0)

    grads = buffers(zero_stage=2)  # the gradient buckets alone
    assert buffers(zero3_prefetch_buckets=0) - grads == pytest.approx(layer_bytes)
    assert buffers(zero3_gather_bucket_mb=1) - grads == pytest.approx(layer_bytes + 2**20)
    assert buffers(zero3_gather_bucket_mb=4096) - grads == pytest.approx(2 * layer_bytes)
