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
