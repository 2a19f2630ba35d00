"""`validate` rejects what `run`, `sweep` and `compare` reject, with the same one line
(`file:line: field: message`) and exit code, before any results folder is touched: the
checkpoints of a run level, the kernel-model fields of a GPU spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
cli = CliRunner()

NO_SIZE = (
    "reliability.checkpoint_gbyte",
    "the run level needs the checkpoint size: set reliability.checkpoint_gbyte "
    "(a trace workload does not say how many parameters the model has)",
)
NO_STORAGE = (
    "reliability.storage_gbyte_per_s",
    "the topology has no storage nodes: set reliability.storage_gbyte_per_s "
    "(aggregate storage bandwidth) or add storage to the topology",
)


def _errors(args: list[str]) -> tuple[int, list[str]]:
    r = cli.invoke(app, args)
    assert "Traceback" not in r.output
    return r.exit_code, [ln for ln in r.stderr.splitlines() if ln.strip()]


def _same_as_validate(file: Path, command: list[str], out: Path) -> tuple[int, list[str]]:
    """The exit code and stderr of `validate file`, checked equal to the command's (which
    writes no `out`)."""
    checked = _errors(["validate", str(file)])
    assert _errors([*command, str(file), "-o", str(out)]) == checked
    assert not out.exists()
    return checked


def _run_level(tmp_path: Path, reliability: str) -> Path:
    p = tmp_path / "v1.yaml"
    p.write_text(
        "name: v1\n"
        f"topology: {{file: {ROOT / 'topologies/h100-rail-clos-2n.yaml'}}}\n"
        f"workload: {{file: {ROOT / 'workloads/traces/dp16-gpt1p3b-step.yaml'}}}\n"
        "run: {steps: 1}\n"
        "failures: [{kind: exponential, target: gpu, mtbf_h: 2000, repair_h: 4}]\n"
        "policy: {kind: checkpoint_restart}\n"
        f"reliability: {{duration_days: 1, seeds: 1{reliability}}}\n"
    )
    return p


@pytest.mark.parametrize(("reliability", "problem"), [("", NO_SIZE), (", checkpoint_gbyte: 10", NO_STORAGE)])
def test_a_run_level_without_checkpoint_size_or_storage_is_refused_first(tmp_path, reliability, problem):
    """A trace workload gives no parameter count and the topology no storage nodes: the
    run level cannot price its checkpoints. The scenario, a study on it and a compare of it
    are refused before anything runs, the same way by every command, at the reliability
    line (a study's step scenario was checked for storage only, at no line, so a study
    failed once its runs had started)."""
    v1 = _run_level(tmp_path, reliability)
    field, message = problem
    want = (2, [f"error: {v1}:7: {field}: {message}"])
    assert _same_as_validate(v1, ["run", "--no-dashboard"], tmp_path / "out-run") == want
    study = tmp_path / "st.yaml"
    study.write_text(
        "name: st\njob: {n_gpus: 16, gpus_per_node: 8, gpus_per_replica: 16}\n"
        "step: {from_scenario: v1.yaml}\npolicy: {kind: checkpoint_restart, interval_min: 10}\n"
        "duration_days: 1\nseeds: 1\naxes:\n  - {param: policy.interval_min, values: [10, 30]}\n"
    )
    assert _same_as_validate(study, ["sweep", "--serial"], tmp_path / "out-sweep") == want
    compare = tmp_path / "cmp.yaml"
    compare.write_text("name: cmp\nbase: {file: v1.yaml}\nvariants:\n  - name: a\n  - name: b\n    seed: 3\n")
    in_variant = (2, [f"error: {v1}:7: {field}: variant 'a': {message}"])
    assert _same_as_validate(compare, ["compare", "--serial"], tmp_path / "out-compare") == in_variant


def _on_gpu(tmp_path: Path, gpu_text: str, inline: bool = False) -> Path:
    """The Llama 3 8B TP2/DP8 scenario on two servers of the GPU `gpu_text` (a GPU file, or
    the topology's inline `gpu` mapping)."""
    (tmp_path / "gpu.yaml").write_text(gpu_text)
    topology = (ROOT / "topologies/h100-rail-clos-2n.yaml").read_text()
    gpu = "{" + ", ".join(gpu_text.splitlines()) + "}" if inline else f"{{file: {tmp_path / 'gpu.yaml'}}}"
    (tmp_path / "topology.yaml").write_text(topology.replace("{file: gpus/h100-sxm.yaml}", gpu))
    scenario = (ROOT / "scenarios/llama3-8b-tp2-dp8.yaml").read_text()
    p = tmp_path / "s.yaml"
    p.write_text(
        scenario.replace("../topologies/h100-rail-clos-2n.yaml", str(tmp_path / "topology.yaml")).replace(
            "../workloads/", f"{ROOT}/workloads/"
        )
    )
    return p


#: the GPU file's keys and what an op of the Llama step says when one is missing
KERNEL_FIELDS = {
    "sm_count": "sm_count; op 'qkv' needs it for GEMM wave quantization",
    "gemm_tile": "gemm_tile; op 'qkv' needs it for GEMM tile quantization",
    "gemm_peak_fraction": "gemm_peak_fraction; op 'qkv' needs it for the GEMM achievable peak",
    "kernel_overhead_us": "kernel_overhead_s; op 'embedding' needs it for the per-kernel fixed cost",
    "attention_efficiency": "attention_efficiency.flash2; op 'attn_score' needs it for flash2 attention",
}


@pytest.mark.parametrize("key", sorted(KERNEL_FIELDS))
def test_a_gpu_lacking_a_kernel_model_field_is_refused_at_its_file(tmp_path, key):
    """A GPU file without a kernel-model field an op's kernels need passed validate; run
    failed when the step priced the op, on a line naming no file. Both now say it at the
    GPU file (a key it does not give: its first key's line), exit 2."""
    text = "\n".join(
        ln
        for ln in (ROOT / "topologies/gpus/h100-sxm.yaml").read_text().splitlines()
        if not ln.startswith(f"{key}:")
    )
    p = _on_gpu(tmp_path, text + "\n")
    first = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("name:"))
    field = KERNEL_FIELDS[key].split(";")[0]
    gives = f"GPU 'H100 SXM5 80GB' gives no {KERNEL_FIELDS[key]} (add it to the GPU file)"
    want = f"error: {tmp_path / 'gpu.yaml'}:{first}: {field}: {gives}"
    assert _same_as_validate(p, ["run", "--no-dashboard"], tmp_path / "out") == (2, [want])


def test_an_inline_gpu_lacking_a_field_is_refused_at_the_topology(tmp_path):
    gpu = (
        "name: G\npeak_tflops: {bf16: 989.4, fp32: 66.9}\nhbm_tbyte_per_s: 3.35\nhbm_gbyte: 80\n"
        "gemm_tile: [128, 256]\ngemm_peak_fraction: 0.7\nkernel_overhead_us: 3\n"
        "attention_efficiency: {flash2: 0.3}"
    )
    p = _on_gpu(tmp_path, gpu, inline=True)
    topology = tmp_path / "topology.yaml"
    line = next(i for i, ln in enumerate(topology.read_text().splitlines(), 1) if ln.startswith("gpu:"))
    want = (
        f"error: {topology}:{line}: gpu.sm_count: GPU 'G' gives no sm_count; op 'qkv' needs it "
        "for GEMM wave quantization (add it to the GPU file)"
    )
    assert _same_as_validate(p, ["run", "--no-dashboard"], tmp_path / "out") == (2, [want])


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("{flash2: 0.29, flash3: 0.456}", "{flash9: 0.29, flsh3: 0.456}", "attention_efficiency.flash9"),
        ("{fp8: 0.654}", "{fp3: 0.654}", "gemm_peak_fraction_by_dtype.fp3"),
    ],
)
def test_a_misspelt_attention_variant_or_dtype_is_refused_at_its_line(tmp_path, old, new, key):
    """A misspelt key of `attention_efficiency` or `gemm_peak_fraction_by_dtype` was read
    as absent (the figure it gave silently unused)."""
    text = (ROOT / "topologies/gpus/h100-sxm.yaml").read_text()
    assert old in text
    p = _on_gpu(tmp_path, text.replace(old, new))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if old in ln)
    known = (
        "['flash2', 'flash3']"
        if "attention" in key
        else "['fp64', 'fp32', 'tf32', 'fp16', 'bf16', 'fp8', 'fp4', 'int8']"
    )
    unknown = f"unknown key {key.split('.')[1]!r}; expected one of {known}"
    want = f"error: {tmp_path / 'gpu.yaml'}:{line}: {key}: {unknown}"
    assert _same_as_validate(p, ["run", "--no-dashboard"], tmp_path / "out") == (2, [want])


@pytest.mark.parametrize("algorithm", ["", ", algorithm: auto", ", algorithm: direct"])
def test_an_all_to_all_over_too_many_ranks_is_refused_under_auto_too(tmp_path, algorithm):
    """`auto` stands for direct on an all-to-all (its only algorithm): over more than 1024
    ranks validate said ok and run then refused it; both now refuse it, exit 3, as they
    did for an explicit `direct`."""
    trace = tmp_path / "a2a.yaml"
    trace.write_text(
        "format: clustersim-step/1\nname: a2a\nranks: 2048\ngroups: {world: all}\nops:\n"
        f"  - {{id: a, kind: collective, collective: all_to_all, group: world, size_mib: 1024{algorithm}}}\n"
    )
    p = tmp_path / "s.yaml"
    p.write_text(
        f"name: a2a\ntopology: {{file: {ROOT / 'topologies/h100-rail-clos-256n.yaml'}}}\n"
        f"workload: {{file: {trace}}}\nnetwork: {{fidelity: flow}}\n"
    )
    want = (
        f"error: {p}: direct all_to_all over 2048 ranks would be 4192256 flows; "
        "split it into groups of at most 1024 ranks"
    )
    assert _same_as_validate(p, ["run", "--no-dashboard"], tmp_path / "out") == (3, [want])


STEP = ROOT / "workloads/traces/dp16-gpt1p3b-step.yaml"
NOT_A_WORKLOAD = "a workload needs 'format: clustersim-step/1' (a trace) or 'model:' (a model and layout)"


@pytest.mark.parametrize(
    ("model", "gpus", "says"),
    [
        (str(STEP), 8, "job 'gpt1p3b-dp16' has gpus: 8, and its workload has 16 ranks"),
        ("{bad}", 16, "{bad}:2: malformed YAML: expected ',' or ']', but got '<stream end>'"),
        ("{topology}", 16, "{topology}:1: " + NOT_A_WORKLOAD),
    ],
)
def test_a_bad_model_of_a_cluster_job_trace_is_refused_by_validate(tmp_path, model, gpus, says):
    """The models a cluster's job trace names were loaded only when run priced their step:
    validate said ok to a row whose model has another rank count, or is malformed, or is
    not a workload. Each distinct model is now built before anything runs, the error at
    its row of the trace."""
    bad, topology = tmp_path / "bad.yaml", ROOT / "topologies/h100-rail-clos-2n.yaml"
    bad.write_text("name: [unclosed\n")
    model, says = (x.format(bad=bad, topology=topology) for x in (model, says))
    csv = (ROOT / "workloads/jobs/example-jobs.csv").read_text().replace("../traces/", f"{STEP.parent}/")
    row = f"gpt1p3b-dp16,1,16,,200000,{STEP},0"
    assert row in csv
    trace = tmp_path / "jobs.csv"
    trace.write_text(csv.replace(row, f"gpt1p3b-dp16,1,{gpus},,200000,{model},0"))
    scenario = (ROOT / "scenarios/jobs/cluster-example.yaml").read_text()
    p = tmp_path / "cluster.yaml"
    p.write_text(
        scenario.replace("../../workloads/jobs/example-jobs.csv", str(trace)).replace("../../", f"{ROOT}/")
    )
    line = next(i for i, ln in enumerate(csv.splitlines(), 1) if ln.startswith("gpt1p3b-dp16,"))
    want = f"error: {trace}:{line}: model: the model of job 'gpt1p3b-dp16': {says}"
    assert _same_as_validate(p, ["run", "--no-dashboard"], tmp_path / "out") == (2, [want])
