"""Applying profiles in a run: clamps and collectives no profile speaks for are said, not hidden."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from simulator.calibration.apply import MAX_EFFICIENCY, ProfileTuning
from simulator.calibration.fit import fit_table
from simulator.calibration.parser import parse_text
from simulator.calibration.profile import CalibrationProfile, build_profile
from tests.calibration.logs import synthetic_log
from tests.conftest import ROOT

SIZES = [2**k for k in range(10, 31)]
BUSBW = 400e9


def _intra_profile() -> CalibrationProfile:
    table = parse_text(synthetic_log("all_reduce", 8, 8, 15e-6, BUSBW, SIZES), "intra-allreduce.log")[0]
    return build_profile("intra", [fit_table(table)])


def test_unmatched_collective_is_a_warning_naming_the_entries() -> None:
    tuning = ProfileTuning([("intra", _intra_profile())])
    assert tuning.tune("all_reduce", 16, 2, 2**20, BUSBW) is None
    assert tuning.tune("all_gather", 8, 1, 2**20, BUSBW) is None
    assert tuning.warnings == [
        "no calibration for all_gather on 8 ranks on 1 node(s): intra has no all_gather entry; "
        "the uncalibrated model is used",
        "no calibration for all_reduce on 16 ranks on 2 node(s): intra's all_reduce entries "
        "(all_reduce 8 GPUs/1 node(s) from intra-allreduce.log) are all intra-node, not inter-node; "
        "the uncalibrated model is used",
    ]


def test_efficiency_cap_is_reported() -> None:
    tuning = ProfileTuning([("intra", _intra_profile())])
    # the fitted busbw at 1 GiB is ~400 GB/s; a model reaching 50 GB/s asks for 8x, capped at 4x
    res = tuning.tune("all_reduce", 8, 1, 2**30, 50e9)
    assert res is not None and res[1] == MAX_EFFICIENCY
    ok = tuning.tune("all_reduce", 8, 1, 2**30, 400e9)
    assert ok is not None and 0.95 < ok[1] < 1.05  # no clamp: fitted busbw / model busbw ~ 1
    (warning,) = tuning.warnings
    assert warning.startswith("all_reduce on 8 ranks on 1 node(s): calibrated bandwidth efficiency 8")
    assert "capped at 4x (1 size(s); profile entry intra: " in warning


def test_run_summary_and_screen_name_unmatched_profile(app: typer.Typer, tmp_path: Path) -> None:
    prof = tmp_path / "intra.yaml"
    prof.write_text(_intra_profile().to_yaml())
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"""name: s
seed: 7
topology: {{file: {ROOT / "topologies/h100-rail-clos-2n.yaml"}}}
workload: {{file: {ROOT / "workloads/traces/dp16-gpt1p3b-step.yaml"}}}
calibration: [{{file: {prof}}}]
network: {{fidelity: flow, algorithms: {{all_reduce: ring}}}}
run: {{steps: 1}}
"""
    )
    r = CliRunner().invoke(app, ["run", str(scenario), "-o", str(tmp_path / "out"), "--no-dashboard"])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (warning,) = summary["calibration_warnings"]
    assert "no calibration for all_reduce on 16 ranks on 2 node(s)" in warning
    assert "warning: no calibration for all_reduce on 16 ranks on 2 node(s)" in " ".join(r.output.split())


def test_speaking_beyond_the_measurement_is_a_warning() -> None:
    tuning = ProfileTuning([("intra", _intra_profile())])
    assert tuning.tune("all_reduce", 4, 1, 2**20, BUSBW) is not None  # 4 GPUs: predicted from 8
    assert tuning.tune("all_reduce", 8, 1, 2**34, BUSBW) is not None  # 16 GiB: beyond 1 GiB x 4
    assert tuning.tune("all_reduce", 8, 1, 2**30, BUSBW) is not None  # measured: no warning
    assert tuning.warnings == [
        "all_reduce on 4 ranks on 1 node(s): beyond what the profile measured; using intra: predicted "
        "all_reduce 4 GPUs/1 node(s) from all_reduce 8 GPUs/1 node(s) from intra-allreduce.log: "
        "alpha x 0.429 (ring steps), busbw kept",
        "all_reduce on 8 ranks on 1 node(s): beyond what the profile measured; using intra: measured "
        "all_reduce 8 GPUs/1 node(s) from intra-allreduce.log; extrapolated beyond 1 GiB, the largest "
        "size measured",
    ]


def test_a_profile_fitted_on_another_gpu_is_named_in_the_summary_and_warned(tmp_path: Path) -> None:
    """The MI300X profile's fitted parameters price an H100 run's all-reduce: the summary
    says which profile priced it (`calibration_applied`) and warns that it was fitted on
    another GPU (it used to change the step time with neither)."""
    from simulator import api
    from tests.conftest import ROOT

    scenario = {
        "name": "x",
        "seed": 1,
        "topology": {"file": str(ROOT / "topologies" / "h100-rail-clos-2n.yaml")},
        "workload": {"file": str(ROOT / "workloads" / "traces" / "dp16-gpt1p3b-step.yaml")},
        "calibration": [{"file": str(ROOT / "topologies" / "calibration" / "mi300x-xgmi.yaml")}],
        "run": {"steps": 1},
    }
    s = api.run(scenario).summary
    assert s["calibration_applied"] == {
        "all_reduce": "mi300x-xgmi: fitted collective parameters (collective_params)"
    }
    assert (
        "mi300x-xgmi: collective_params were fitted on AMD Instinct MI300X tables; this run's GPU is "
        "H100 SXM5 80GB, and they are applied to it as they are"
    ) in s["calibration_warnings"]


def test_collective_params_under_a_fixed_algorithm_without_protocol_are_said_not_to_apply() -> None:
    """`all_reduce: ring` runs the textbook model, which no fitted parameter prices: a
    profile of parameters only leaves the step as it is uncalibrated, and the summary says
    so instead of listing the kind as priced by them (it did, with the same step time);
    `ring/simple` applies them."""
    from simulator import api
    from tests.conftest import ROOT

    def run(algorithm: str, profile: bool) -> dict:
        scenario = {
            "name": "x",
            "seed": 1,
            "topology": {"file": str(ROOT / "topologies" / "h100-rail-clos-2n.yaml")},
            "workload": {"file": str(ROOT / "workloads" / "traces" / "dp16-gpt1p3b-step.yaml")},
            "network": {"algorithms": {"all_reduce": algorithm}},
            "run": {"steps": 1},
        }
        if profile:
            scenario["calibration"] = [
                {"file": str(ROOT / "topologies" / "calibration" / "mi300x-xgmi.yaml")}
            ]
        return api.run(scenario).summary

    fixed = run("ring", True)
    assert fixed["step_time_s"] == run("ring", False)["step_time_s"]
    assert "calibration_applied" not in fixed
    assert (
        "all_reduce runs the textbook model (path latencies, full link rate): its algorithm is fixed "
        "without a protocol, or is not one NCCL's tuning model prices; no collective_params field "
        "prices it, so mi300x-xgmi's collective_params do not apply to it; name one of NCCL's "
        "algorithms with its protocol (e.g. `ring/simple`) or leave the algorithm `auto`"
    ) in fixed["calibration_warnings"]
    with_protocol = run("ring/simple", True)
    assert with_protocol["calibration_applied"] == {
        "all_reduce": "mi300x-xgmi: fitted collective parameters (collective_params)"
    }
    assert not any("textbook" in w for w in with_protocol["calibration_warnings"])
    # the fit's clamped fields, and its GPU being another than the run's, are warned only where
    # its parameters price something (the profile was fitted on MI300X, the run is on H100)
    for said in ("physical bound", "collective_params were fitted on"):
        assert not any(said in w for w in fixed["calibration_warnings"])
        assert any(said in w for w in with_protocol["calibration_warnings"])
    # an algorithm NCCL's model does not price runs the textbook model with a protocol too
    other = run("hierarchical/simple", True)
    assert "calibration_applied" not in other
    assert any("is not one NCCL's tuning model prices" in w for w in other["calibration_warnings"])


def test_a_curve_entry_measured_on_another_gpu_model_is_warned_in_the_run(tmp_path: Path) -> None:
    """A profile fitted (curves only) on an MI300X rccl-tests log prices an H100 server's
    all-reduce: the entry records the log's GPU and the run names it (it said nothing); the
    same log's profile on an MI300X server is not warned."""
    from simulator import api
    from simulator.calibration.parser import read_benchmark
    from tests.calibration.logs import SAMPLES
    from tests.conftest import ROOT

    table = read_benchmark(SAMPLES / "mi300x-8gpu-1node-allreduce-rccl.txt")[0]
    profile = build_profile("mi", [fit_table(table)])
    assert profile.collectives[0].gpu == "AMD Instinct MI300X"
    assert CalibrationProfile.from_yaml(profile.to_yaml()) == profile

    def warnings(topology: str, tmp: Path) -> list[str]:
        tmp.mkdir()
        (tmp / "mi.yaml").write_text(profile.to_yaml())
        scenario = {
            "name": "x",
            "seed": 1,
            "topology": {"file": str(ROOT / "topologies" / topology)},
            "workload": {"file": str(ROOT / "workloads" / "traces" / "collective-sweep-allreduce-8.yaml")},
            "calibration": [{"file": str(tmp / "mi.yaml")}],
            "run": {"steps": 1},
        }
        return api.run(scenario).summary.get("calibration_warnings", [])

    assert warnings("h100-dgx-node.yaml", tmp_path / "h") == [
        "all_reduce on 8 ranks on 1 node(s): priced by mi: measured all_reduce 8 GPUs/1 node(s) from "
        "mi300x-8gpu-1node-allreduce-rccl.txt, whose table ran on AMD Instinct MI300X; this run's GPU is "
        "H100 SXM5 80GB, another model, and the entry is applied to it as it is"
    ]
    assert warnings("mi300x-xgmi-node.yaml", tmp_path / "m") == []


def test_a_compute_calibration_from_a_faster_or_other_gpu_is_warned_in_the_run(tmp_path: Path) -> None:
    """GEMM timings of 600 TFLOP/s (bf16, 2·M·N·K / t) and 3,000 GB/s of memory-bound kernels
    price an A100 run (peaks 312 TFLOP/s and 2,039 GB/s, topologies/gpus/a100-80gb.yaml):
    their efficiencies are clipped to 1 there, and the run says so (it said nothing). A
    shape fit names the GPU it was measured on; an H100 one on the A100 run is warned."""
    from simulator.calibration.compute import ComputeCalibration
    from simulator.config.base import FileRef
    from simulator.network.topology import load_gpu

    def load_gpu_file(path: Path):  # noqa: ANN202
        return load_gpu(FileRef(file=path.name), path)  # relative to a file of its folder

    n = 8192
    rows = [f"{m},{n},{n},bf16,{2.0 * m * n * n / 600e12}" for m in (2048, 4096, 8192)]
    gemm = tmp_path / "gemm.csv"
    gemm.write_text("M,N,K,dtype,time_s\n" + "\n".join(rows) + "\n")
    mem = tmp_path / "mem.csv"
    mem.write_text("bytes,time_s\n" + "".join(f"{b},{b / 3000e9}\n" for b in (1e8, 1e9, 4e9)))
    a100 = load_gpu_file(ROOT / "topologies" / "gpus" / "a100-80gb.yaml")
    line = ComputeCalibration.from_csv([gemm, mem])
    assert line.notes_for(a100) == [
        "compute: GEMM bf16 was measured at 600 TFLOP/s sustained, above the 312 TFLOP/s peak of this "
        "run's GPU (A100 SXM4 80GB): measured on another GPU? its efficiencies are clipped to 1",
        "compute: memory-bound kernels were measured at 3000 GB/s sustained, above the 2039 GB/s HBM "
        "bandwidth of this run's GPU (A100 SXM4 80GB): measured on another GPU? their efficiency is "
        "clipped to 1",
    ]
    h100 = load_gpu_file(ROOT / "topologies" / "gpus" / "h100-sxm.yaml")
    assert line.notes_for(h100) == []  # below the H100's peaks: nothing to say
    shaped = ComputeCalibration.from_csv([gemm], gpu=h100)
    assert shaped.notes_for(a100) == [
        "compute: the GEMM bf16 shape fit was measured on H100 SXM5 80GB; this run's GPU is "
        "A100 SXM4 80GB, another model, and the fit is applied to it as it is"
    ]

    from simulator import api

    (tmp_path / "c.yaml").write_text(CalibrationProfile(name="c", compute=line).to_yaml())
    scenario = {
        "name": "x",
        "seed": 1,
        "topology": {"file": str(ROOT / "topologies" / "a100-p4de-efa-2n.yaml")},
        "workload": {"file": str(ROOT / "workloads" / "traces" / "dp16-gpt1p3b-step.yaml")},
        "calibration": [{"file": str(tmp_path / "c.yaml")}],
        "run": {"steps": 1},
    }
    assert set(line.notes_for(a100)) <= set(api.run(scenario).summary["calibration_warnings"])
