"""The validation table (benchmarks/data/published_training.csv) and its seed scenarios.

Fast checks only, nothing is simulated: the table parses and keeps fit and held-out rows
apart; every row's scenario (generated from its layout, or the catalog scenario it names)
loads, and its layout passes the layout rules and the memory check on its GPU; a row that
names a catalog scenario states the same layout as that scenario. Rows that need a feature
the simulator may not have yet (column `needs`) either pass or are refused with a one-line
input error naming the field.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.config.base import FileRef
from simulator.config.loader import read_document, validate
from simulator.errors import InputError
from simulator.network.topology import load_gpu
from simulator.scenario.spec import load_scenario
from simulator.workload.generate import WorkloadSpec
from simulator.workload.layout import LayoutSpec
from simulator.workload.layout_rules import check_layout
from simulator.workload.memory import check_memory
from simulator.workload.model import load_model

ROOT = Path(__file__).resolve().parents[2]
SEED_SCENARIOS = (
    "scenarios/validation/megascale-175b-12k.yaml",
    "scenarios/validation/llama3-405b-8k-meta.yaml",
    "scenarios/validation/llama3-405b-16k-meta.yaml",
    "scenarios/validation/deepseek-v3-2048-h800.yaml",
    "scenarios/validation/zaya1-like-mi300x-1024.yaml",
    "scenarios/validation/fireflyer2-7b-dp512.yaml",
)
#: Layout fields a row states and its catalog scenario must repeat.
COMPARED = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "pp_schedule",
    "virtual_stages",
    "first_stage_layers",
    "last_stage_layers",
    "micro_batch_size",
    "global_batch_size",
    "recompute",
    "zero_stage",
    "sequence_parallel",
    "attention",
    "main_grads",
    "grad_accumulation_fusion",
    "overlap_param_gather",
    "overlap_grad_reduce",
    "zero2_reduce_per_micro_batch",
    "tp_comm_overlap",
)


def _script() -> Any:
    spec = importlib.util.spec_from_file_location("step_validation", ROOT / "benchmarks/step_validation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["step_validation"] = module
    spec.loader.exec_module(module)
    return module


SV = _script()
ROWS = SV.load_rows()


def _check_scenario(path: Path) -> LayoutSpec:
    """Load a scenario and its model workload; apply the layout and memory rules (8 GPUs
    per server, as in every topology the table uses). Raises InputError like `prepare`."""
    sc = load_scenario(path)
    doc = read_document(sc.workload_path)
    spec = validate(WorkloadSpec, doc)
    model = load_model(sc.workload_path.parent / spec.model.file)
    topo = yaml.safe_load(sc.topology_path.read_text())
    gpu = load_gpu(FileRef(file=topo["gpu"]["file"]), sc.topology_path)
    try:
        check_layout(model, spec.layout, spec.layout.world_size, 8)
        check_memory(model, spec.layout, gpu.hbm_capacity_bytes)
    except InputError as exc:
        loc = tuple(exc.field.split(".")) if exc.field else ("layout",)
        raise doc.error(exc.message, loc) from None
    return spec.layout


def test_table_keeps_fit_and_held_out_apart_over_independent_sources() -> None:
    splits = {r["split"] for r in ROWS}
    assert {"fit", "held_out"} <= splits
    fit_ids = {r["id"] for r in ROWS if r["split"] == "fit"}
    held = {r["id"] for r in ROWS if r["split"] == "held_out"}
    assert not fit_ids & held
    assert len(fit_ids) < len(held), "the fit subset is meant to be small"
    assert len({r["source"] for r in ROWS}) >= 4


def test_bad_row_is_named_by_line_and_column(tmp_path: Path) -> None:
    text = (ROOT / "benchmarks/data/published_training.csv").read_text().splitlines()
    bad = text[1].replace(",held_out,", ",train,", 1)
    (tmp_path / "t.csv").write_text("\n".join([text[0], bad]) + "\n")
    with pytest.raises(SV.RowError, match=r"t\.csv:2: split: 'train'"):
        SV.load_rows(tmp_path / "t.csv")


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row_scenario_validates_without_simulating(row: dict[str, str], tmp_path: Path) -> None:
    path = SV.write_row_scenario(row, tmp_path)
    try:
        layout = _check_scenario(path)
    except InputError as exc:
        if not row["needs"]:
            raise
        assert exc.file is not None and exc.field, f"{row['id']}: {exc}"
        return
    if row["scenario"]:
        stated = LayoutSpec(**SV.layout_of(row))
        for name in COMPARED:
            assert getattr(layout, name) == getattr(stated, name), f"{row['id']}: {name}"


@pytest.mark.parametrize("path", SEED_SCENARIOS)
def test_seed_scenario_loads(path: str) -> None:
    row_needs = {r["scenario"]: r["needs"] for r in ROWS if r["scenario"]}
    try:
        _check_scenario(ROOT / path)
    except InputError:
        if not row_needs.get(path):
            raise


def test_attention_column_picks_the_kernel() -> None:
    """Rows whose kernels wrote the s×s scores to HBM run the `unfused` attention core;
    rows run with FlashAttention-2 (the fused kernel of their time) run `flash2`; the rest
    the GPU's best fused kernel (`auto`)."""
    by_id = {r["id"]: r for r in ROWS}
    assert SV.layout_of(by_id["korthikanti-22b"])["attention"] == "unfused"
    assert SV.layout_of(by_id["bloom-176b-384"])["attention"] == "unfused"
    assert SV.layout_of(by_id["megascale-175b-12k"])["attention"] == "flash2"
    assert SV.layout_of(by_id["llama3-405b-16k"])["attention"] == "flash2"
    assert SV.layout_of(by_id["nemo-llama3-8b-8"])["attention"] == "auto"


def test_param_gather_prefetch_only_where_the_source_states_it() -> None:
    prefetched = {r["id"] for r in ROWS if SV.layout_of(r)["overlap_param_gather"]}
    stated = {r["id"] for r in ROWS if r["id"].startswith(("nemo-", "llama3-405b"))}
    # MegaScale §3.2; NeMo-Framework-Launcher 24.07 configs (overlap_param_sync true);
    # Llama 3 §3.3.2 (FSDP prefetches the sharded weights asynchronously)
    assert prefetched == {"megascale-175b-12k"} | stated


def test_grad_reduce_after_backward_only_for_deepspeeds_pipeline_engine(tmp_path: Path) -> None:
    """BLOOM's DeepSpeed pipeline schedule issues ReduceGrads after the last micro-batch's
    backward; every other row overlaps its buckets. A bad value is named by line and column."""
    after = {r["id"] for r in ROWS if not SV.layout_of(r)["overlap_grad_reduce"]}
    assert after == {"bloom-176b-384"}
    # its BF16_Optimizer all-reduces the whole gradient, after the tied embedding's
    # all-reduce (ReduceTiedGrads before ReduceGrads); every other row: the defaults
    deepspeed = {
        r["id"]
        for r in ROWS
        if (SV.layout_of(r)["zero1_grad_collective"], SV.layout_of(r)["tied_embedding_sync"])
        == ("all_reduce", "before_dp")
    }
    assert deepspeed == after
    others = {
        (SV.layout_of(r)["zero1_grad_collective"], SV.layout_of(r)["tied_embedding_sync"]) for r in ROWS
    }
    assert others - {("all_reduce", "before_dp")} == {("reduce_scatter", "after_dp")}
    text = (ROOT / "benchmarks/data/published_training.csv").read_text().splitlines()
    bad = text[1].replace(",overlapped,", ",sometimes,", 1)
    (tmp_path / "t.csv").write_text("\n".join([text[0], bad]) + "\n")
    with pytest.raises(SV.RowError, match=r"t\.csv:2: grad_reduce: 'sometimes'"):
        SV.load_rows(tmp_path / "t.csv")


def test_fit_scales_only_the_compute_dtypes_gemm_fraction() -> None:
    """`--fit`'s constant: f' = m·f for the family's dtype (H100 fp8: 0.654·m), others kept."""
    gpu = load_gpu(FileRef(file="topologies/gpus/h100-sxm.yaml"), ROOT / "x.yaml")
    scaled = SV.scaled_gpu(gpu, "fp8", 0.8)
    assert scaled.gemm_fraction("fp8") == pytest.approx(0.654 * 0.8)
    assert scaled.gemm_fraction("bf16") == gpu.gemm_fraction("bf16") == 0.708
    assert SV.scaled_gpu(gpu, "bf16", 0.5).gemm_fraction("bf16") == pytest.approx(0.708 * 0.5)
    assert SV.FIT_BOUNDS[1] == 1.0  # never above the measured large-GEMM fraction


@pytest.mark.parametrize(
    ("gpu_file", "table", "bf16_tflops", "bf16_k"),
    [
        ("h100-sxm.yaml", "gh100_sustained_gemm.csv", 698.6, 20480),
        ("h800.yaml", "gh100_sustained_gemm.csv", 698.6, 20480),
        ("b200.yaml", "b200_sustained_gemm.csv", 1456.3, 20480),
    ],
)
def test_gpu_gemm_fractions_are_the_calibrators_fit_of_the_published_table(
    gpu_file: str, table: str, bf16_tflops: float, bf16_k: int
) -> None:
    """The GH100 and B200 files' GEMM fractions come from published sustained GEMM rates at
    the power limit (`benchmarks/data/*_sustained_gemm.csv`, `benchmarks/data/sources.md`)
    through `clustersim calibrate`'s shape fit, not from any training row: refitting the
    shipped table must give the shipped values (rounded to 3 places in the files)."""
    from simulator.calibration.compute import ComputeCalibration

    gpu = load_gpu(FileRef(file=f"topologies/gpus/{gpu_file}"), ROOT / "x.yaml")
    cal = ComputeCalibration.from_csv([ROOT / "benchmarks/data" / table], gpu=gpu)
    assert set(cal.shape) == {"bf16", "fp8"}
    for dtype, fit in cal.shape.items():
        assert fit.n_points == 1 and fit.overhead_s == 0.0  # one row: f = ideal time / measured
        assert gpu.gemm_fraction(dtype) == pytest.approx(fit.peak_fraction, abs=5e-4)
    # BF16: the measured TFLOP/s over the dense peak, divided by the K ramp K/(K+64) only:
    # both shapes are whole numbers of waves of 128x256 tiles (16 waves of 132 or 148 SMs)
    want = bf16_tflops * 1e12 / gpu.peak("bf16") / (bf16_k / (bf16_k + 64))
    assert cal.shape["bf16"].peak_fraction == pytest.approx(want, rel=1e-5)


def test_calibrate_cli_on_the_published_gemm_table_names_each_dtypes_file_value(tmp_path: Path) -> None:
    """`clustersim calibrate` on the shipped table prints each dtype's fit beside the GPU
    file's own fraction for that dtype (fp8's entry, not the bf16 default)."""
    from typer.testing import CliRunner

    from simulator.commands.app import app

    table = ROOT / "benchmarks/data/gh100_sustained_gemm.csv"
    gpu = ROOT / "topologies/gpus/h100-sxm.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(table), "--gpu", str(gpu), "-o", str(tmp_path / "p.yaml")])
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "GEMM bf16 shape model on H100 SXM5 80GB: 70.8% of peak achievable (GPU file: 70.8%)" in out
    assert "GEMM fp8 shape model on H100 SXM5 80GB: 65.4% of peak achievable (GPU file: 65.4%)" in out


#: Published burst fractions of fused attention on the H100 (Shah et al. 2024, arXiv
#: 2407.08608: FlashAttention-2 "35% utilization", FlashAttention-3 about 0.55 forward and
#: backward) and the burst BF16 GEMM fraction the same era measured (MAMF 794.5 / 989.4).
H100_BURST = {"flash2": 0.35, "flash3": 0.55, "gemm": 0.803}
#: GH100 BF16 tensor work at burst (MAMF, 1,980 MHz): Bekman, ml-engineering (sources.md).
GH100_BF16_MAMF_TFLOPS = 841.9


@pytest.mark.parametrize("gpu_file", ["h100-sxm.yaml", "h800.yaml", "b200.yaml"])
def test_fused_attention_runs_at_the_sustained_clock_as_the_gemms_do(gpu_file: str) -> None:
    """The GPU files whose GEMMs run at the sustained rate price fused attention at it too:
    GH100 (h100-sxm, h800): the published burst fraction times the die's sustained-to-burst
    ratio of BF16 tensor work, node-mean MSMF / MAMF (the table's bf16 row over 841.9);
    B200 (no attention figure of its own): the H100's burst attention-to-GEMM ratio kept
    against the file's sustained GEMM fraction (topologies/gpus/sources.md)."""
    gpu = load_gpu(FileRef(file=f"topologies/gpus/{gpu_file}"), ROOT / "x.yaml")
    if gpu.arch == "hopper":
        table = (ROOT / "benchmarks/data/gh100_sustained_gemm.csv").read_text().splitlines()
        bf16 = next(line for line in table if ",bf16," in line)
        ratio = float(bf16.split(",")[5]) / GH100_BF16_MAMF_TFLOPS  # 698.6 / 841.9 = 0.830
        want = {v: H100_BURST[v] * ratio for v in ("flash2", "flash3")}
    else:
        gemm = gpu.gemm_fraction("bf16")
        assert gemm is not None
        want = {v: gemm * H100_BURST[v] / H100_BURST["gemm"] for v in ("flash2", "flash3")}
    for variant, value in want.items():  # the files round to 3 places
        assert gpu.attention_efficiency[variant] == pytest.approx(value, abs=1e-3), variant
