"""Study files: a bad axis value is reported at its own line (`FILE:LINE: axes.N.values.K: ...`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator import api
from simulator.errors import InputError, InputErrors
from simulator.study.sweep import load_study

DATA = Path(__file__).parent / "data" / "interval_study.yaml"
TEXT = DATA.read_text()
INTERVALS = "values: [10, 30, 90]"  # axes.0, line 15 of interval_study.yaml
HOT_SPARES = "- {kind: hot_spares, pool_hosts: 1,"  # axes.1.values.1, line 20


def _errors(tmp_path: Path, text: str) -> tuple[Path, list[str]]:
    p = tmp_path / "st.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as exc:
        load_study(p)
    err = exc.value
    return p, err.lines() if isinstance(err, InputErrors) else [str(err)]


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_sample_lines_are_where_the_tests_expect():
    assert _line(TEXT, INTERVALS) == 15 and _line(TEXT, HOT_SPARES) == 20
    assert _line(TEXT, "policy: {kind: checkpoint_restart") == 11


def test_bad_number_points_at_its_axis_value_not_the_base_policy(tmp_path):
    p, lines = _errors(tmp_path, TEXT.replace(INTERVALS, "values: [10, -30, 90]"))
    assert lines == [
        f"{p}:15: axes.0.values.1: policy.interval_min=-30: policy.interval_min: "
        "input should be greater than 0"
    ]


def test_value_that_is_not_a_number_points_at_its_axis_value(tmp_path):
    p, lines = _errors(tmp_path, TEXT.replace(INTERVALS, "values: [10, 30, abc]"))
    assert len(lines) == 1
    assert lines[0].startswith(f"{p}:15: axes.0.values.2: policy.interval_min=abc: ")
    assert "must be a number" in lines[0]


def test_bad_key_in_a_mapping_value_points_at_that_value(tmp_path):
    p, lines = _errors(tmp_path, TEXT.replace(HOT_SPARES, "- {kind: hot_spares, pool_hostz: 1,"))
    assert f"{p}:20: axes.1.values.1: policy=hot_spares: policy.pool_hostz: unknown key" in " ".join(lines)
    assert all(ln.startswith(f"{p}:20: axes.1.values.1: ") for ln in lines)


def test_bad_key_in_a_block_mapping_value_points_at_the_key(tmp_path):
    old = (
        "      - {kind: hot_spares, pool_hosts: 1, interval_min: 30, "
        "restart: {detection_min: 2, queue_min: 5}}\n"
    )
    assert old in TEXT
    text = TEXT.replace(
        old,
        (
            "      - kind: hot_spares\n"
            "        pool_hosts: 1\n"
            "        colour: red\n"
            "        restart: {detection_min: 2, queue_min: 5}\n"
        ),
    )
    assert _line(text, "colour: red") == 22
    p, lines = _errors(tmp_path, text)
    expected = (
        f"{p}:22: axes.1.values.1: policy=hot_spares: policy.colour: "
        "unknown key (not in the schema; check its spelling)"
    )
    assert lines == [expected]


def test_misspelt_param_points_at_each_value(tmp_path):
    p, lines = _errors(tmp_path, TEXT.replace("param: policy.interval_min", "param: policy.intervl_min"))
    assert lines[0].startswith(
        f"{p}:15: axes.0.values.0: policy.intervl_min=10: policy.intervl_min: unknown key"
    )
    assert {ln.split(": ")[1] for ln in lines} == {"axes.0.values.0", "axes.0.values.1", "axes.0.values.2"}


def test_empty_param_is_rejected(tmp_path):
    p, lines = _errors(tmp_path, TEXT.replace("param: policy.interval_min", 'param: ""'))
    assert lines == [f"{p}:15: axes.0.param: string should have at least 1 character"]


def test_param_that_cannot_be_set_points_at_the_param(tmp_path):
    p, lines = _errors(tmp_path, TEXT.replace("param: policy.interval_min", "param: seeds.x"))
    assert lines == [f"{p}:15: axes.0.param: cannot set 'seeds.x' in the study"]


def test_valid_sample_still_loads():
    assert len(load_study(DATA).variants) == 6


def test_a_step_scenario_without_storage_is_refused_by_validate_and_sweep_alike(tmp_path):
    """Every study loads a checkpoint from storage: a step scenario whose topology has no
    storage and no `reliability.storage_gbyte_per_s` is one line, exit 2, from `validate`
    as from `sweep`, and `sweep` writes nothing."""
    from typer.testing import CliRunner

    from simulator.commands.app import app

    root = Path(__file__).resolve().parents[2]
    quickstart = (root / "scenarios" / "quickstart.yaml").read_text().replace("../", f"{root}/")
    step = tmp_path / "step.yaml"  # the checkpoint's size given: a trace does not say it
    step.write_text(quickstart + "reliability: {checkpoint_gbyte: 10}\n")
    study = tmp_path / "st.yaml"
    study.write_text(TEXT.replace(_step_line(TEXT), f"step: {{from_scenario: {step}}}"))
    out = tmp_path / "out"
    for args in (["validate", str(study)], ["sweep", str(study), "-o", str(out), "--serial", "--seeds", "1"]):
        r = CliRunner().invoke(app, args)
        lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 2 and len(lines) == 1, r.output
        assert "reliability.storage_gbyte_per_s: the topology has no storage nodes" in lines[0]
    assert not out.exists()


def _step_line(text: str) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith("step:"))


@pytest.mark.parametrize(("values", "shown"), [("[10, 30, 10]", "10"), ("[10, 30, 10.0]", "10.0")])
def test_an_axis_value_given_twice_is_refused_at_the_second(tmp_path, values, shown):
    """Two variants of one label would be pooled by any grouping on the axis."""
    p, lines = _errors(tmp_path, TEXT.replace(INTERVALS, f"values: {values}"))
    assert lines == [
        f"{p}:15: axes.0.values.2: values 0 and 2 are the same value {shown}; list each value once"
    ]


def test_a_job_that_is_not_the_step_scenarios_is_refused_by_validate_and_sweep_alike(tmp_path):
    """A study of 1,024 GPUs over the 16,384-GPU step scenario ran silently: the oracle read
    its 8 replicas as the scenario's 128 shrunk (healthy step 67 s instead of 5.8 s) and kept
    the big job's checkpoint. The job must be the scenario's, at `job` or at the axis."""
    from typer.testing import CliRunner

    from simulator.commands.app import app

    root = Path(__file__).resolve().parents[2]
    step = root / "scenarios" / "quickstart-failures.yaml"  # 16 GPUs, one replica
    base = (
        "name: st\njob: {n_gpus: 16, gpus_per_node: 8, gpus_per_replica: 16}\n"
        f"step: {{from_scenario: {step}}}\nfailures: [{{kind: exponential, target: gpu, mtbf_h: 1000}}]\n"
        "policy: {kind: checkpoint_restart, interval: daly}\nduration_days: 1\nseeds: 1\n"
    )
    study = tmp_path / "st.yaml"
    study.write_text(base)
    assert CliRunner().invoke(app, ["validate", str(study)]).exit_code == 0
    cases = [
        (base.replace("n_gpus: 16,", "n_gpus: 32,"), "st.yaml:2: job: a job of 32 GPUs in 2 data-parallel"),
        (
            base + "axes: [{param: job.n_gpus, values: [16, 64]}]\n",
            "st.yaml:8: axes.0.values.1: a job of 64 GPUs",
        ),
        (  # the axis that makes the job differ, not the first axis over the job
            base + "axes:\n  - {param: job.gpus_per_replica, values: [16, 8]}\n"
            "  - {param: job.n_gpus, values: [16, 32]}\n",
            "st.yaml:10: axes.1.values.1: a job of 32 GPUs in 2 data-parallel replicas",
        ),
    ]
    for text, expected in cases:
        study.write_text(text)
        out = tmp_path / "out"
        for args in (["validate", str(study)], ["sweep", str(study), "-o", str(out), "--serial"]):
            r = CliRunner().invoke(app, args)
            lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
            assert r.exit_code == 2 and len(lines) == 1 and expected in lines[0], r.output
            assert "runs 16 GPUs: the study's job must be the scenario's" in lines[0]
        assert not out.exists()
        with pytest.raises(InputError, match="the study's job must be the scenario's"):
            api.sweep(study)  # `clustersim sweep` without writing: the same checks


def test_far_too_many_checkpoints_with_constant_costs_are_refused_before_the_folder_is_touched(tmp_path):
    """A checkpoint every step of 1 ms over 30 days: `validate` said ok, and `sweep` cleared
    the folder's earlier study before each run refused it. Known from the file: exit 3 from
    both, the earlier study kept."""
    from typer.testing import CliRunner

    from simulator.commands.app import app

    base = (
        "name: c1\njob: {n_gpus: 64, gpus_per_node: 8, gpus_per_replica: 8}\n"
        "step: {step_time_s: 10, checkpoint_write_s: 1}\n"
        "failures: [{kind: exponential, target: gpu, mtbf_h: 10000}]\n"
        "policy: {kind: checkpoint_restart, interval_steps: 1}\nduration_days: 1\nseeds: 1\n"
    )
    study = tmp_path / "c1.yaml"
    study.write_text(base)
    out = tmp_path / "out"
    assert CliRunner().invoke(app, ["sweep", str(study), "-o", str(out), "--serial"]).exit_code == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    study.write_text(
        base.replace("step_time_s: 10", "step_time_s: 0.001").replace("duration_days: 1", "duration_days: 30")
    )
    for args in (["validate", str(study)], ["sweep", str(study), "-o", str(out), "--serial"]):
        r = CliRunner().invoke(app, args)
        lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 3 and len(lines) == 1, r.output
        assert "a checkpoint every 1 step(s) of 0.001 s makes about 2,592,000,000 checkpoints" in lines[0]
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_a_policy_given_twice_on_an_axis_is_refused_whatever_its_key_order(tmp_path):
    """Two equal mappings (a copied line) were two labelled variants of one run, each
    simulated over every seed; they are refused like two equal numbers."""
    again = (
        "      - {interval_min: 30, kind: hot_spares, restart: {queue_min: 5, detection_min: 2}, "
        "pool_hosts: 1}"
    )
    text = TEXT.rstrip("\n") + "\n" + again + "\n"
    p, lines = _errors(tmp_path, text)
    assert lines == [f"{p}:21: axes.1.values.2: values 1 and 2 are the same setting; list each value once"]
    # a different value in the copy is a different variant
    study = load_study(_write(tmp_path, text.replace("pool_hosts: 1}", "pool_hosts: 2}")))
    assert len(study.variants) == 3 * 3  # interval_min x policy


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "ok.yaml"
    p.write_text(text)
    return p
