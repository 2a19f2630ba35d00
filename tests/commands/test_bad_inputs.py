"""Bad input that once slipped through: corrupt or CSV result folders, a missing key's name,
a reserved tag, and validate over a mixed folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.metrics import store
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
cli = CliRunner()


def test_corrupt_frame_is_a_one_line_error(tmp_path):
    out = tmp_path / "res"
    assert cli.invoke(app, ["run", str(ROOT / "scenarios/quickstart.yaml"), "-o", str(out)]).exit_code == 0
    (out / "ops.parquet").write_bytes(b"not parquet at all")
    for args in (
        ["dashboard", str(out), "-o", str(tmp_path / "d.html")],
        ["trace", str(out), "-o", str(tmp_path / "t.json")],
    ):
        r = cli.invoke(app, args)
        assert r.exit_code == 2, r.output
        assert "ops.parquet" in r.output and "cannot read saved frame" in r.output
        assert "Traceback" not in r.output


def test_csv_results_rebuild_like_parquet(tmp_path, monkeypatch):
    """Without pyarrow results are CSV; the dashboard and trace rebuild from them alike."""
    monkeypatch.setattr(store, "_has_pyarrow", lambda: False)
    result = execute(prepare(ROOT / "scenarios/quickstart.yaml"))
    out = result.write(tmp_path / "csv")
    assert (out / "ops.csv").is_file() and not (out / "ops.parquet").exists()
    back = store.read_frames(out)
    assert (back["ops"]["role"] == "").all()
    pd.testing.assert_series_equal(back["steps"]["step_time_s"], result.frames["steps"]["step_time_s"])
    for args in (
        ["dashboard", str(out), "-o", str(tmp_path / "d.html")],
        ["trace", str(out), "-o", str(tmp_path / "t.json")],
    ):
        r = cli.invoke(app, args)
        assert r.exit_code == 0, r.output


def test_missing_required_key_is_named(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("name: s\ntopology: {file: x.yaml}\n")
    r = cli.invoke(app, ["validate", str(p)])
    assert r.exit_code == 2
    assert "workload: required field is missing" in r.output


def test_reserved_tag_is_refused(tmp_path):
    shutil.copytree(ROOT / "topologies", tmp_path / "topologies")
    (tmp_path / "w.yaml").write_text(
        "format: clustersim-step/1\nranks: 2\nops:\n"
        "  - {id: c, kind: collective, collective: all_reduce, group: [0, 1], size_mib: 1, tag: comm}\n"
    )
    (tmp_path / "s.yaml").write_text(
        "name: s\ntopology: {file: topologies/switch-8.yaml}\nworkload: {file: w.yaml}\n"
    )
    r = cli.invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert r.exit_code == 2 and "w.yaml:4: ops.0: " in r.output and "reserved" in r.output


def test_validate_reports_every_bad_file_and_knows_compare_and_study_files(tmp_path):
    bad1, bad2 = tmp_path / "a.yaml", tmp_path / "b.yaml"
    bad1.write_text("name: a\nsede: 1\n")
    bad2.write_text("name: b\nseed: -1\n")
    good = [
        ROOT / "scenarios/compare-oversubscription.yaml",
        ROOT / "scenarios/study-llama3-405b-policies.yaml",
    ]
    r = cli.invoke(app, ["validate", *map(str, good), str(bad1), str(bad2)])
    assert r.exit_code == 2
    assert "compare file, 3 variants" in r.output and "study, 5 variants" in r.output
    assert "a.yaml:2: sede: unknown key" in r.output and "b.yaml:2: seed:" in r.output


@pytest.mark.parametrize(
    "kind", ["scenario", "trace", "workload", "model", "compare", "study", "profile", "gpu"]
)
def test_schema_of_every_input_kind(kind):
    r = cli.invoke(app, ["schema", kind])
    assert r.exit_code == 0 and '"properties"' in r.output


def test_an_error_inside_a_progress_bar_is_one_line_off_a_terminal(tmp_path):
    """A calibrate log that is not text fails inside the fitting bar; piped (not a
    terminal), the bar is off and stderr holds the one line alone (the bar's stop left a
    blank line before it)."""
    junk = tmp_path / "junk.csv"
    junk.write_bytes(b"junk\xff\xfe")
    r = cli.invoke(app, ["calibrate", str(junk), "-o", str(tmp_path / "p.yaml")])
    assert r.exit_code == 2
    assert r.output.splitlines() == [f"error: {junk}:1: not UTF-8 text (byte 4)"]
    assert not (tmp_path / "p.yaml").exists()
