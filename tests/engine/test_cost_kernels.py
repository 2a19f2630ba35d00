"""ComputeCost prices generated ops kernel by kernel; GPU files lacking a field fail in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.calibration.compute import ComputeCalibration
from simulator.commands.app import app
from simulator.engine.cost import ComputeCost
from simulator.network.hardware import GPUSpec
from simulator.scenario.prepare import prepare
from simulator.workload.costs import OpCost
from simulator.workload.kernels import KernelModel
from simulator.workload.program import Op

ROOT = Path(__file__).resolve().parents[2]
H100_FILE = ROOT / "topologies" / "gpus" / "h100-sxm.yaml"
TINY = {
    "name": "tiny-gpt",
    "layers": 2,
    "hidden_size": 1024,
    "ffn_hidden_size": 4096,
    "attention_heads": 16,
    "vocab_size": 8192,
    "seq_len": 1024,
    "gated_ffn": False,
    "dropout": True,
}


def _scenario(tmp: Path, gpu: dict, attention: str = "auto") -> Path:
    (tmp / "gpu.yaml").write_text(yaml.safe_dump(gpu, sort_keys=False))
    topo = {
        "name": "two-node",
        "gpu": {"file": "gpu.yaml"},
        "generator": "rail_clos",
        "nodes": 2,
        "gpus_per_node": 8,
        "scale_up": "nvswitch",
        "scale_up_gbyte_per_s": 450,
        "nic_gbps": 400,
        "nic_medium": "ib",
        "servers_per_leaf": 32,
    }
    (tmp / "topo.yaml").write_text(yaml.safe_dump(topo, sort_keys=False))
    (tmp / "model.yaml").write_text(yaml.safe_dump(TINY))
    layout = {"tp": 2, "pp": 2, "dp": 4, "global_batch_size": 16, "attention": attention}
    wl = {"model": {"file": "model.yaml"}, "layout": layout}
    (tmp / "workload.yaml").write_text(yaml.safe_dump(wl, sort_keys=False))
    sc = {
        "name": "t",
        "topology": {"file": "topo.yaml"},
        "workload": {"file": "workload.yaml"},
        "run": {"steps": 1},
    }
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(sc, sort_keys=False))
    return path


def _h100() -> dict:
    return yaml.safe_load(H100_FILE.read_text())


@pytest.mark.parametrize("attention", ["auto", "unfused"])
def test_generated_ops_carry_their_kernels_and_are_priced_by_them(tmp_path: Path, attention: str) -> None:
    prep = prepare(_scenario(tmp_path, _h100(), attention))
    gpu = prep.topology.gpu
    cost, model = ComputeCost(gpu), KernelModel(gpu)
    fused = [op for op in prep.program.ops if op.kind == "compute" and op.kernels]
    assert len(fused) > 10
    for op in fused:
        items = [k for k in op.kernels if isinstance(k, OpCost)]
        assert len(items) == len(op.kernels)
        assert sum(k.flops for k in items) == pytest.approx(op.flops, rel=1e-12)
        assert sum(k.bytes for k in items) == pytest.approx(op.bytes_accessed, rel=1e-12)
        expected = sum(model.time_s(k, op.dtype) for k in items)
        assert cost.roofline_s(op) == pytest.approx(expected, rel=1e-12)
        assert cost.roofline_s(op) == cost.roofline_s(op)  # cached answer is the same


def test_gpu_without_kernel_fields_keeps_the_flat_roofline() -> None:
    legacy = {k: v for k, v in _h100().items() if k in ("name", "peak_tflops", "hbm_tbyte_per_s", "hbm_mib")}
    gpu = GPUSpec.model_validate(legacy)
    assert not gpu.has_kernel_model
    item = OpCost("qkv", "gemm", 2.0 * 4096**3, 2.0 * 3 * 4096**2, gemm=(4096, 4096, 4096))
    op = Op("x", "compute", (0,), flops=item.flops, bytes_accessed=item.bytes, kernels=(item,))
    # flat roofline: flops / (peak · 0.7)
    assert ComputeCost(gpu).roofline_s(op) == pytest.approx(2.0 * 4096**3 / (989.4e12 * 0.7), rel=1e-12)


def test_calibration_without_one_side_keeps_the_spec_factor_for_it() -> None:
    """A trace op (no kernels) under a profile that timed only GEMMs is priced: its memory
    side keeps the GPU spec's factor (it raised KeyError out of the run), and a profile that
    timed only memory kernels keeps the spec's factor for the FLOPs."""
    from simulator.calibration.compute import RateFit
    from simulator.workload.kernels import ComputeEfficiency

    gpu = GPUSpec.model_validate(_h100())
    fit = {"overhead_s": 0.0, "n_points": 2, "min_work": 1e6, "max_work": 1e12, "max_abs_error": 0.0}
    gemm, mem = RateFit(rate_per_s=500e12, **fit), RateFit(rate_per_s=2e12, **fit)
    op = Op("fwd", "compute", (0,), flops=2e12, bytes_accessed=1e11)  # memory-bound at 3.35 TB/s
    only_gemm: ComputeEfficiency = ComputeCalibration(gemm={"bf16": gemm})
    assert ComputeCost(gpu, only_gemm).roofline_s(op) == pytest.approx(1e11 / (3.35e12 * 0.8), rel=1e-12)
    only_mem: ComputeEfficiency = ComputeCalibration(memory=mem)
    assert ComputeCost(gpu, only_mem).roofline_s(op) == pytest.approx(1e11 / 2e12, rel=1e-9)
    flops_op = Op("gemm", "compute", (0,), flops=2e15)
    flat = 2e15 / (989.4e12 * 0.7)
    assert ComputeCost(gpu, only_mem).roofline_s(flops_op) == pytest.approx(flat, rel=1e-12)


def test_gpu_file_missing_a_kernel_field_exits_2_naming_field_and_op(tmp_path: Path) -> None:
    gpu = _h100()
    del gpu["gemm_tile"]
    r = CliRunner().invoke(app, ["run", str(_scenario(tmp_path, gpu)), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    assert f"{tmp_path / 'gpu.yaml'}:1: gemm_tile: " in lines[0] and "op '" in lines[0]
    assert not (tmp_path / "out").exists()
