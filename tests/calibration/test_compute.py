"""Compute calibration from GEMM / memory-kernel CSV files, and the benchmark script."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.calibration.compute import ComputeCalibration
from simulator.errors import InputError
from tests.calibration.logs import DATA

REPO = Path(__file__).resolve().parents[2]


def test_synthetic_gemm_and_memory_fit_back() -> None:
    """Golden: the synthetic CSVs follow t = 10 us + 2MNK / 800 TFLOP/s (bf16),
    t = 5 us + 2MNK / 40 TFLOP/s (fp32) and t = 5 us + bytes / 3 TB/s; the fit returns them
    within 1 % and efficiency = (flops / t) / peak."""
    cal = ComputeCalibration.from_csv([DATA / "gemm-synthetic.csv", DATA / "memory-synthetic.csv"])
    bf16 = cal.gemm["bf16"]
    assert bf16.rate_per_s == pytest.approx(800e12, rel=0.01)
    assert bf16.overhead_s == pytest.approx(10e-6, rel=0.01)
    assert cal.gemm["fp32"].rate_per_s == pytest.approx(40e12, rel=0.01)
    assert cal.memory is not None and cal.memory.rate_per_s == pytest.approx(3e12, rel=0.01)
    m = 8192
    flops = 2.0 * m**3
    expect = flops / (10e-6 + flops / 800e12) / 989.4e12
    assert cal.gemm_efficiency(m, m, m, "bf16", 989.4e12) == pytest.approx(expect, rel=0.01)
    assert cal.gemm_efficiency(m, m, m, "fp16", 989.4e12) == pytest.approx(expect, rel=0.01)
    small = cal.gemm_efficiency(64, 64, 64, "bf16", 989.4e12)
    assert 0 < small < 0.01  # launch overhead dominates
    assert cal.gemm_efficiency(m, m, m, "bf16", 1e12) == 1.0  # clipped to (0, 1]
    assert 0 < cal.memory_efficiency(1024, 3.35e12) < cal.memory_efficiency(2**32, 3.35e12) <= 1
    with pytest.raises(KeyError, match="fp8"):
        cal.gemm_efficiency(1, 1, 1, "fp8", 1e15)


def test_compute_round_trips_inside_a_profile() -> None:
    from simulator.calibration.profile import CalibrationProfile

    cal = ComputeCalibration.from_csv([DATA / "gemm-synthetic.csv"])
    p = CalibrationProfile(name="x", compute=cal)
    assert CalibrationProfile.from_yaml(p.to_yaml()) == p
    assert p.compute is not None and p.compute.memory is None


def test_bad_csv_names_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "gemm.csv"
    bad.write_text("M,N,K,dtype,time_s\n128,128,128,bf16,1e-5\n128,x,128,bf16,1e-5\n")
    with pytest.raises(InputError, match=r"gemm\.csv:3: N: expected a number"):
        ComputeCalibration.from_csv([bad])
    with pytest.raises(InputError, match=r"foreign\.csv:1: expected CSV columns"):
        ComputeCalibration.from_csv([DATA / "foreign.csv"])


def test_benchmark_script_without_torch_exits_clearly(tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed; the no-torch path cannot be exercised")
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gemm_timings.py"), "-o", str(tmp_path / "g.csv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 3 and "PyTorch is not installed" in r.stderr


def test_benchmark_script_on_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out, mem = tmp_path / "g.csv", tmp_path / "m.csv"
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gemm_timings.py"), "-o", str(out),
         "--memory-csv", str(mem), "--device", "cpu", "--sizes", "32,64", "--repeats", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    cal = ComputeCalibration.from_csv([out, mem])
    assert "fp32" in cal.gemm and cal.memory is not None
