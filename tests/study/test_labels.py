"""Axis labels and column names: every axis value has its own label, and an axis cannot be
named like a column the study writes itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.study.labels import RESERVED_COLUMNS, axis_labels
from simulator.study.sweep import (
    load_study,
    run_study,
    store_task,
    study_from_data,
    study_oracles,
    summarize_study,
)

DATA = Path(__file__).parent / "data" / "interval_study.yaml"
RESTART = {"detection_min": 2, "queue_min": 5}
WAITING = {"kind": "checkpoint_restart", "interval_min": 30, "wait_for_repair": True, "restart": RESTART}
PLAIN = {"kind": "checkpoint_restart", "interval_min": 30, "restart": RESTART}


def _base(**extra: object) -> dict:
    data = yaml.safe_load(DATA.read_text())
    data.pop("axes")
    data.update(seeds=2, duration_days=10, **extra)
    return data


def test_labels_tell_apart_values_that_share_a_kind():
    assert axis_labels([PLAIN, WAITING]) == ["checkpoint_restart", "checkpoint_restart wait_for_repair=true"]
    nested = [{**PLAIN, "restart": {**RESTART, "queue_min": q}} for q in (5, 60)]
    assert axis_labels(nested) == [
        "checkpoint_restart restart.queue_min=5",
        "checkpoint_restart restart.queue_min=60",
    ]
    assert axis_labels([PLAIN, dict(PLAIN)]) == ["checkpoint_restart#0", "checkpoint_restart#1"]
    # distinct kinds, numbers and strings keep the labels they always had
    assert axis_labels([PLAIN, {**PLAIN, "kind": "in_memory"}]) == ["checkpoint_restart", "in_memory"]
    assert axis_labels([10, 30.5, "a"]) == [10, 30.5, "a"]


def test_a_position_label_never_takes_a_label_another_value_has():
    assert axis_labels(["a#1", {"kind": "a"}, {"kind": "a"}]) == ["a#1", "a#4", "a#2"]
    labels = axis_labels([{"kind": "a", "name": "x#1"}, {"kind": "x"}, {"kind": "x"}])
    assert labels == ["x#1", "x#4", "x#2"] and len(set(labels)) == 3


def test_list_values_get_text_labels():
    gpu = [{"kind": "exponential", "target": "gpu", "mtbf_h": 5000}]
    host = [{"kind": "exponential", "target": "host", "mtbf_h": 5000}]
    assert axis_labels([gpu, host]) == ["[exponential] 0.target=gpu", "[exponential] 0.target=host"]


def test_policies_of_one_kind_are_separate_variants_in_the_summary():
    study = study_from_data(_base(axes=[{"param": "policy", "name": "policy", "values": [PLAIN, WAITING]}]))
    runs = run_study(study, executor="serial")
    summary = summarize_study(runs)
    assert list(summary["policy"]) == ["checkpoint_restart", "checkpoint_restart wait_for_repair=true"]
    assert list(summary["n"]) == [2, 2]
    # the same seeds see the same failures: waiting for repairs can only cost time
    means = runs.groupby("policy", sort=False)["goodput"].mean()
    assert means.iloc[1] < means.iloc[0]
    assert summary["goodput_mean"].tolist() == pytest.approx(means.tolist(), rel=1e-12)


def test_a_failure_list_axis_runs_and_summarizes():
    lists = [[{"kind": "exponential", "target": t, "mtbf_h": 2000, "repair_h": 2}] for t in ("gpu", "host")]
    study = study_from_data(_base(axes=[{"param": "failures", "name": "mix", "values": lists}]))
    runs = run_study(study, executor="serial")
    summary = summarize_study(runs)
    assert list(summary["mix"]) == ["[exponential] 0.target=gpu", "[exponential] 0.target=host"]
    assert list(runs["seed"]) == [0, 1, 0, 1]


def test_reserved_columns_cover_every_frame_a_study_writes():
    """The reserved names are read off the code's column lists: a run's frames carry no
    column outside them (besides the axes), so no axis can overwrite one."""
    study = load_study(DATA)
    v = study.variants[0]
    frames = store_task(
        (v.index, v.labels, v.spec, 0, study_oracles(study)[v.index], ("incidents", "segments"))
    )
    for name, df in frames.items():
        extra = set(df.columns) - RESERVED_COLUMNS - set(v.labels)
        assert not extra, (name, extra)
        assert len(df) > 0
    runs = frames["runs"].assign(**{"seed": [0]})
    assert set(summarize_study(runs).columns) <= RESERVED_COLUMNS | set(v.labels)


@pytest.mark.parametrize(
    ("axis", "where"),
    [
        ({"param": "policy.restart.queue_min", "name": "seed", "values": [5, 60]}, "axes.0.name"),
        ({"param": "policy.restart.queue_min", "name": "goodput", "values": [5, 60]}, "axes.0.name"),
        ({"param": "policy.restart.queue_min", "name": "kind", "values": [5, 60]}, "axes.0.name"),
        ({"param": "policy.restart.queue_min", "name": "variant", "values": [5, 60]}, "axes.0.name"),
        ({"param": "failures", "values": [[], [{"kind": "exponential"}]]}, "axes.0.param"),
    ],
)
def test_an_axis_named_like_a_result_column_is_one_line_from_validate_and_sweep(tmp_path, axis, where):
    study = tmp_path / "st.yaml"
    study.write_text(yaml.safe_dump(_base(axes=[axis]), sort_keys=False))
    column = axis.get("name", axis["param"])
    line = next(
        i
        for i, ln in enumerate(study.read_text().splitlines(), 1)
        if f": {column}" in ln and "axes" not in ln
    )
    out = tmp_path / "out"
    for args in (["validate", str(study)], ["sweep", str(study), "-o", str(out), "--serial"]):
        r = CliRunner().invoke(app, args)
        lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 2 and len(lines) == 1, r.output
        assert lines[0].startswith(
            f"error: {study}:{line}: {where}: '{column}' is a column the study writes"
        ), lines
    assert not out.exists()
