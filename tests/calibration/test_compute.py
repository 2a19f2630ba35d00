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


# ---- the shape-aware GEMM model fitted on a known GPU ------------------------------------

A100_FILE = REPO / "topologies" / "gpus" / "a100-80gb.yaml"
SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
          (8192, 6912, 2304), (8192, 2304, 9216), (16384, 3072, 1024), (3000, 5000, 700)]  # fmt: skip


def _shape_table(path: Path, fraction: float, overhead_s: float, extra: str = "") -> Path:
    """A GEMM table that follows the shape model exactly with the given constants."""
    from simulator.config.loader import load
    from simulator.network.hardware import GPUSpec
    from simulator.workload.kernels import gemm_time_s

    gpu = load(GPUSpec, A100_FILE)
    rows = ["M,N,K,dtype,time_s"]
    for m, n, k in SHAPES:
        t = gemm_time_s(gpu, (m, n, k), "bf16", peak_fraction=fraction, overhead_s=overhead_s)
        rows.append(f"{m},{n},{k},bf16,{t:.9g}")
    path.write_text("\n".join(rows) + "\n" + extra)
    return path


def test_shape_model_fit_recovers_its_constants(tmp_path: Path) -> None:
    """Golden: a table drawn from the model (f = 0.8, o = 5 us on the A100 file) fits back
    within 0.1 % (the times are written to 9 significant digits)."""
    from simulator.calibration.profile import CalibrationProfile
    from simulator.config.loader import load
    from simulator.network.hardware import GPUSpec

    gpu = load(GPUSpec, A100_FILE)
    cal = ComputeCalibration.from_csv([_shape_table(tmp_path / "g.csv", 0.8, 5e-6)], gpu)
    fit = cal.shape["bf16"]
    assert fit.peak_fraction == pytest.approx(0.8, rel=1e-3)
    assert fit.overhead_s == pytest.approx(5e-6, rel=1e-2)
    assert fit.n_points == len(SHAPES) and fit.max_abs_error < 1e-3
    # the efficiency now follows the shape (wave quantization), not only the FLOP count
    square = cal.gemm_efficiency(2048, 2048, 2048, "bf16", 312e12)
    assert square == pytest.approx(2 * 2048**3 / fit.time_s(2048, 2048, 2048, "bf16") / 312e12, rel=1e-9)
    p = CalibrationProfile(name="x", compute=cal)
    assert CalibrationProfile.from_yaml(p.to_yaml()) == p


def test_shape_fit_names_every_row_it_cannot_use(tmp_path: Path) -> None:
    from simulator.config.loader import load
    from simulator.errors import InputErrors
    from simulator.network.hardware import GPUSpec

    extra = "8,8192,8192,bf16,1e-4\n1024.5,1024,1024,bf16,1e-4\n4096,4096,4096,fp8,1e-3\n"
    table = _shape_table(tmp_path / "g.csv", 0.8, 5e-6, extra)
    with pytest.raises(InputErrors) as exc:
        ComputeCalibration.from_csv([table], load(GPUSpec, A100_FILE))
    lines = exc.value.lines()
    first = len(SHAPES) + 2
    assert len(lines) == 3
    assert lines[0].startswith(f"{table}:{first}: ") and "memory-bound" in lines[0]
    assert lines[1].startswith(f"{table}:{first + 1}: ") and "whole numbers" in lines[1]
    assert lines[2].startswith(f"{table}:{first + 2}: ") and "dtype 'fp8'" in lines[2]


def test_calibrate_cli_fits_the_shape_model_or_exits_2(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simulator.commands.app import app

    good = _shape_table(tmp_path / "good.csv", 0.75, 4e-6)
    out = tmp_path / "p.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(good), "-o", str(out), "--gpu", str(A100_FILE)])
    assert r.exit_code == 0, r.output
    assert "75.0% of peak achievable (GPU file: 86.9%)" in " ".join(r.output.split())
    bad = _shape_table(tmp_path / "bad.csv", 0.75, 4e-6, "8,8192,8192,bf16,1e-4\n")
    out2 = tmp_path / "q.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(bad), "-o", str(out2), "--gpu", str(A100_FILE)])
    assert r.exit_code == 2 and "memory-bound" in r.output and not out2.exists()


def test_memory_rows_faster_than_the_gpus_hbm_are_refused_under_gpu(tmp_path: Path) -> None:
    """With --gpu, a memory row moving its bytes faster than the GPU's HBM allows (beyond
    HBM_RATE_TOLERANCE) is an error of its own line, as a GEMM row faster than peak is;
    without --gpu the table is only fitted."""
    from typer.testing import CliRunner

    from simulator.commands.app import app

    rows = (DATA / "memory-synthetic.csv").read_text().replace("5.34953e-06", "1e-20", 1)
    table = tmp_path / "mem.csv"
    table.write_text(rows)
    h100 = REPO / "topologies/gpus/h100-sxm.yaml"
    out = tmp_path / "p.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(table), "-o", str(out), "--gpu", str(h100)])
    assert r.exit_code == 2 and not out.exists()
    assert r.stderr.splitlines() == [
        f"error: {table}:2: 1.04858e+06 bytes in 1e-14 us is 1.049e+17 GB/s, above the 3350 GB/s HBM "
        "bandwidth of H100 SXM5 80GB: wrong GPU file, or bytes or time miscounted?"
    ]
    r = CliRunner().invoke(app, ["calibrate", str(table), "-o", str(out)])
    assert r.exit_code == 0, r.output
    # the shipped table (3 TB/s sustained) is an H100's, and refused on an A100 PCIe (1.555 TB/s)
    good = DATA / "memory-synthetic.csv"
    r = CliRunner().invoke(app, ["calibrate", str(good), "-o", str(tmp_path / "q.yaml"), "--gpu", str(h100)])
    assert r.exit_code == 0, r.output
    a100_pcie = REPO / "topologies/gpus/a100-pcie-40gb.yaml"
    r = CliRunner().invoke(
        app, ["calibrate", str(good), "-o", str(tmp_path / "s.yaml"), "--gpu", str(a100_pcie)]
    )
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {good}:4: ") and "1555 GB/s" in r.stderr
