"""A study as a durable store: tasks written as they finish, resume, identical tables, query."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.io import Interrupted
from simulator.metrics.store import read_manifest
from simulator.study.store import open_store, run_into_store
from simulator.study.sweep import load_study, run_study

STUDY = Path(__file__).parent / "data" / "interval_study.yaml"
runner = CliRunner()


def _sweep(out: Path, *extra: str):
    return runner.invoke(app, ["sweep", str(STUDY), "-o", str(out), "--seeds", "1", "--serial", *extra])


def _stop_after(n: int):
    seen = []

    def on_done(i: int, _result: object) -> None:
        seen.append(i)
        if len(seen) == n:
            raise Interrupted(2)

    return on_done


def test_a_stopped_study_keeps_its_finished_tasks_and_resumes_to_identical_tables(tmp_path: Path) -> None:
    """6 variants x 1 seed: stopped after 2 tasks, resumed; tables equal a straight run's bytes."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert _sweep(straight).exit_code == 0
    study = load_study(STUDY)
    with pytest.raises(Interrupted), open_store(resumed, study, 1, resume=False) as (store, done):
        run_into_store(store, study, 1, done, "serial", on_done=_stop_after(2))
    manifest = read_manifest(resumed)
    assert manifest is not None and sorted(manifest["tasks"]) == ["v0000-s0", "v0001-s0"]
    assert not (resumed / "runs.parquet").exists()
    r = _sweep(resumed, "--resume")
    assert r.exit_code == 0, r.output
    assert "(2 done already)" in r.output
    for name in ("runs.parquet", "summary.parquet", "summary.csv"):
        assert (resumed / name).read_bytes() == (straight / name).read_bytes(), name
    # the stored runs are the in-memory study's rows
    expected = run_study(study, seeds=1, executor="serial")
    got = pd.read_parquet(straight / "runs.parquet")
    pd.testing.assert_frame_equal(got[expected.columns], expected, check_dtype=False)


def test_resume_refuses_another_study_and_an_empty_folder(tmp_path: Path) -> None:
    out = tmp_path / "s"
    r = _sweep(out, "--resume")
    assert r.exit_code == 2 and "nothing to resume" in r.output
    study = load_study(STUDY)
    with pytest.raises(Interrupted), open_store(out, study, 1, resume=False) as (store, done):
        run_into_store(store, study, 1, done, "serial", on_done=_stop_after(1))
    r = runner.invoke(app, ["sweep", str(STUDY), "-o", str(out), "--seeds", "2", "--serial", "--resume"])
    assert r.exit_code == 2, r.output
    assert "holds a different study" in r.output and len(r.output.strip().splitlines()) == 1


def test_resume_with_other_frames_is_refused(tmp_path: Path) -> None:
    """A folder stopped while keeping only `runs`, resumed keeping every frame: the finished
    runs have no incidents or segments, so the resume is refused (it used to report every
    run done, and `query` then found no incidents table)."""
    out = tmp_path / "s"
    study = load_study(STUDY)
    with (
        pytest.raises(Interrupted),
        open_store(out, study, 1, resume=False, frames=("runs",)) as (store, done),
    ):
        run_into_store(store, study, 1, done, "serial", on_done=_stop_after(1), frames=("runs",))
    r = _sweep(out, "--resume")
    assert r.exit_code == 2, r.output
    assert "holds a different study (or other seeds, or other --frames)" in r.output
    r = _sweep(out, "--resume", "--frames", "runs")
    assert r.exit_code == 0, r.output


def test_query_reads_the_dataset_of_a_stopped_study(tmp_path: Path) -> None:
    out = tmp_path / "s"
    study = load_study(STUDY)
    with pytest.raises(Interrupted), open_store(out, study, 1, resume=False) as (store, done):
        run_into_store(store, study, 1, done, "serial", on_done=_stop_after(3))
    r = runner.invoke(
        app, ["query", str(out), "select count(*) as n, count(distinct variant) as v from runs", "--csv"]
    )
    assert r.exit_code == 0, r.output
    assert r.output.split() == ["n,v", "3,3"]
    sql = "select count(*) from segments s join runs r using (variant, seed) where s.variant = 0"
    r = runner.invoke(app, ["query", str(out), sql, "--csv"])
    assert r.exit_code == 0 and int(r.output.split()[-1]) > 0
    r = runner.invoke(app, ["query", str(out), "select nope from runs"])
    assert r.exit_code == 2 and "query failed" in r.output
    # the dashboard of a stopped study draws the runs that finished
    r = runner.invoke(app, ["dashboard", str(out)])
    assert r.exit_code == 0 and r.output.startswith("study dashboard:"), r.output
    assert "3 runs: 3 variants x 1 seeds" in (out / "sweep.html").read_text()


def test_unknown_frame_to_keep_is_one_line(tmp_path: Path) -> None:
    r = _sweep(tmp_path / "s", "--frames", "runs,ops")
    assert r.exit_code == 2 and r.output.strip().splitlines() == [
        "error: --frames: unknown frame(s) ops; expected runs, incidents, segments"
    ]
    assert not (tmp_path / "s").exists()


def test_a_long_axis_name_is_cut_to_one_folder_name(tmp_path: Path) -> None:
    """An axis name of 200 two-byte characters is 1,200 bytes percent-encoded, over a file
    system's 255-byte name limit: the study stopped with OSError 'File name too long' after
    validate passed. The folder name is cut with a hash of the whole; the rows keep the name."""
    from simulator.study.store import MAX_PARTITION_BYTES, partition

    long = "\u00e9" * 200
    names = {partition({long: v, "b": "/x" * 300 + str(v)}) for v in (10, 90)}
    assert len(names) == 2
    assert all(len(part.encode()) <= MAX_PARTITION_BYTES for p in names for part in p.parts)
    assert partition({"interval_min": 10}) == Path("interval_min=10")  # short names stay as they were
    study = tmp_path / "study.yaml"
    study.write_text(STUDY.read_text().replace("name: interval_min}", f"name: {long}}}"))
    out = tmp_path / "out"
    r = runner.invoke(app, ["sweep", str(study), "-o", str(out), "--seeds", "1", "--serial"])
    assert r.exit_code == 0, r.output
    assert sorted(pd.read_parquet(out / "runs.parquet")[long].unique()) == [10, 30, 90]


def test_query_reads_a_fractional_axis_as_the_numbers_the_runs_hold(tmp_path: Path) -> None:
    """A study's frame files sit in `interval_min=<value>` folders, and DuckDB read the axis
    from the folder names (as text) in place of the files' own column: the least of 2.5, 10
    and 90 came out as '10' (text order), and `where interval_min > 5` failed."""
    text = STUDY.read_text().replace("values: [10, 30, 90]", "values: [2.5, 10, 90]")
    study = tmp_path / "study.yaml"
    study.write_text(text.replace("seeds: 4", "seeds: 1"))
    out = tmp_path / "s"
    r = runner.invoke(app, ["sweep", str(study), "-o", str(out), "--serial"])
    assert r.exit_code == 0, r.output
    sql = (
        "select typeof(max(interval_min)) t, min(interval_min) lo, max(interval_min) hi, "
        "count(*) filter (where interval_min > 5) n from runs"
    )
    r = runner.invoke(app, ["query", str(out), sql, "--csv"])
    assert r.exit_code == 0, r.output
    assert r.output.split() == ["t,lo,hi,n", "DOUBLE,2.5,90.0,4"]


def test_a_frame_file_missing_from_a_study_is_named_as_missing(tmp_path: Path) -> None:
    """One task's `segments` file deleted: every query (of `runs` too) failed with DuckDB's
    permission error, worded as if the query had tried to write a file. It is one line
    naming the missing file."""
    out = tmp_path / "s"
    study = load_study(STUDY)
    with pytest.raises(Interrupted), open_store(out, study, 1, resume=False) as (store, done):
        run_into_store(store, study, 1, done, "serial", on_done=_stop_after(2))
    gone = next((out / "dataset" / "segments").rglob("*.parquet"))
    gone.unlink()
    r = runner.invoke(app, ["query", str(out), "select count(*) from runs"])
    assert r.exit_code == 2, r.output
    line = " ".join(r.output.split())
    assert f"frame file {gone.relative_to(out)} that the folder's manifest lists is missing" in line
    assert "writes no file" not in line
