"""A results folder is replaced whole or not at all: staged writes, the lock, signals, unwritable outputs."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest
from filelock import FileLock
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.errors import InputError
from simulator.io import (
    RESULTS_INDEX,
    FolderBusy,
    Interrupted,
    ResultsFolder,
    check_output_file,
    foreign_folder_problem,
    stop_signals_raise,
    write_atomic,
)
from simulator.study.store import StudyStore

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_kill_write", ROOT / "benchmarks" / "bench_kill_write.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _old_folder(tmp_path: Path) -> Path:
    """An old results folder (a run's folders hold a summary.json, and the list of what the
    run wrote)."""
    out = tmp_path / "res"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "summary.json").write_text("old b")
    (out / RESULTS_INDEX).write_text("a.txt\nsummary.json\n")
    return out


def _contents(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir()) if p.name != RESULTS_INDEX}


def test_commit_swaps_the_new_folder_in_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    out = _old_folder(tmp_path)
    with ResultsFolder(out) as folder:
        (folder.stage() / "a.txt").write_text("new a")
        assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}  # untouched until the swap
        folder.commit()
    assert _contents(out) == {"a.txt": "new a"}
    assert (out / RESULTS_INDEX).read_text() == "a.txt\n"  # what the new results hold
    assert sorted(p.name for p in tmp_path.iterdir()) == [".res.lock", "res"]


def test_a_results_folder_with_files_no_run_wrote_is_refused(tmp_path: Path) -> None:
    """A folder with a summary.json is replaced only when it holds nothing but what its run
    wrote (its index; before the index existed, the names a run writes) and the pages
    written into it later (dashboard, trace); a file added by hand stops the run."""
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "summary.json").write_text("{}")
    (papers / "thesis.tex").write_text("keep")
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(papers), "--steps", "1"])
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1 and "holds 'thesis.tex', which no run wrote" in lines[0]
    assert (papers / "thesis.tex").read_text() == "keep"
    res = tmp_path / "res"
    for args in (
        ["run", str(QUICKSTART), "-o", str(res), "--steps", "1", "--no-dashboard"],
        ["dashboard", str(res)],
        ["trace", str(res)],
    ):
        assert CliRunner().invoke(app, args).exit_code == 0
    assert {"dashboard.html", "trace.json", RESULTS_INDEX} <= {p.name for p in res.iterdir()}
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(res), "--steps", "1", "--no-dashboard"])
    assert r.exit_code == 0, r.output  # its own files and pages: replaced
    (res / "notes.txt").write_text("keep")
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(res), "--steps", "1", "--no-dashboard"])
    assert r.exit_code == 2 and "holds 'notes.txt', which no run wrote" in r.output
    assert (res / "notes.txt").read_text() == "keep"
    legacy = tmp_path / "legacy"  # written before the index: the names a run writes
    legacy.mkdir()
    for name in ("summary.json", "ops.parquet", "scenario.resolved.yaml", "dashboard.html"):
        (legacy / name).write_text("old")
    assert foreign_folder_problem(legacy) is None
    (legacy / "draft.docx").write_text("keep")
    assert "draft.docx" in str(foreign_folder_problem(legacy))


def test_a_data_file_beside_a_summary_without_an_index_is_not_a_frame(tmp_path: Path) -> None:
    """In a folder with no index, only the frames a run writes count as its own: someone's
    `mydata.csv` beside a `summary.json` of theirs was taken for a frame and deleted."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text("{}")
    (mine / "mydata.csv").write_text("keep")
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(mine), "--steps", "1"])
    assert r.exit_code == 2 and "holds 'mydata.csv', which no run wrote" in r.output
    assert (mine / "mydata.csv").read_text() == "keep"
    (mine / "mydata.csv").rename(mine / "steps.csv")  # a frame of the run, as CSV
    assert foreign_folder_problem(mine) is None


@pytest.mark.parametrize("stop", [RuntimeError("boom"), Interrupted(signal.SIGTERM)])
def test_an_error_or_a_signal_before_the_swap_keeps_the_old_folder(
    tmp_path: Path, stop: BaseException
) -> None:
    out = _old_folder(tmp_path)
    with pytest.raises(type(stop)), ResultsFolder(out) as folder:
        (folder.stage() / "a.txt").write_text("new a")
        raise stop
    assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".res.lock", "res"]


def test_sigterm_inside_the_guard_raises_interrupted_and_cleans_up(tmp_path: Path) -> None:
    out = _old_folder(tmp_path)
    with pytest.raises(Interrupted) as caught, ResultsFolder(out) as folder:
        (folder.stage() / "a.txt").write_text("new a")
        os.kill(os.getpid(), signal.SIGTERM)
    assert caught.value.exit_code == 128 + signal.SIGTERM
    again = type(caught.value)(*caught.value.args)  # as SimPy raises a process's exception again
    assert again.exit_code == caught.value.exit_code and str(again) == "stopped by SIGTERM"
    assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # handlers restored


def test_a_signal_wrapped_by_compiled_code_is_the_clean_stop(tmp_path: Path, monkeypatch) -> None:
    """A SIGTERM handled while numba's code calls back into Python reaches the command as a
    SystemError caused by `Interrupted`: still one line, exit 143, the old folder kept; any
    other error is not taken for a stop."""
    import simulator.scenario.execute as execute

    def stopped(*_a, **_k):
        try:
            raise Interrupted(signal.SIGTERM)
        except Interrupted as stop:
            raise SystemError("CPUDispatcher(...) returned a result with an exception set") from stop

    out = _old_folder(tmp_path)
    monkeypatch.setattr(execute, "execute", stopped)
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(out)])
    assert r.exit_code == 128 + signal.SIGTERM, r.output
    assert [ln for ln in r.stderr.splitlines() if ln.strip()] == [
        f"interrupted (stopped by SIGTERM): {out} left as it was"
    ]
    assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}
    monkeypatch.setattr(execute, "execute", lambda *_a, **_k: 1 / 0)
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(out)])
    assert isinstance(r.exception, ZeroDivisionError)


def test_a_second_writer_is_refused_while_the_lock_is_held(tmp_path: Path) -> None:
    out = _old_folder(tmp_path)
    with FileLock(str(tmp_path / ".res.lock")), pytest.raises(FolderBusy, match="another clustersim"):
        ResultsFolder(out).__enter__()
    assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}


def test_a_folder_left_aside_by_a_killed_swap_is_put_back(tmp_path: Path) -> None:
    out = _old_folder(tmp_path)
    out.rename(tmp_path / ".res.old")  # what a SIGKILL between the two renames leaves
    with ResultsFolder(out):
        pass
    assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}
    assert not (tmp_path / ".res.old").exists()


def test_temporary_folders_a_killed_writer_left_are_dropped_by_the_next(tmp_path: Path) -> None:
    """A SIGKILL while the frames were written leaves `.res.tmp-*`; the next writer of the
    folder (holding its lock) removes it, and only its own folder's."""
    out = _old_folder(tmp_path)
    (tmp_path / ".res.tmp-k1ll3d").mkdir()
    (tmp_path / ".res.tmp-k1ll3d" / "ops.parquet").write_text("partial")
    (tmp_path / ".other.tmp-k1ll3d").mkdir()
    with ResultsFolder(out):
        pass
    assert not (tmp_path / ".res.tmp-k1ll3d").exists() and (tmp_path / ".other.tmp-k1ll3d").is_dir()
    assert _contents(out) == {"a.txt": "old a", "summary.json": "old b"}


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("/dev/null/res", "error: output path '/dev/null/res' lies under '/dev/null', which is not a folder"),
        ("FILE", "exists and is not a folder"),
    ],
)
def test_unwritable_output_is_one_line_before_anything_runs(
    tmp_path: Path, target: str, message: str
) -> None:
    if target == "FILE":
        target = str(tmp_path / "file")
        Path(target).write_text("x")
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", target])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.output
    assert "simulating" not in r.output


def test_a_folder_of_other_files_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    """`-o` at a folder that is not a run's results (no summary.json) would be replaced whole:
    one line, exit 2, nothing simulated, every file still there; an empty folder is taken."""
    mine = tmp_path / "papers"
    (mine / "sub").mkdir(parents=True)
    (mine / "notes.txt").write_text("keep")
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(mine), "--steps", "1"])
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "not a run's results (no summary.json)" in lines[0], r.output
    assert "simulating" not in r.output
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "sub"]
    assert (mine / "notes.txt").read_text() == "keep"
    with pytest.raises(InputError, match="not a run's results"):  # the guard itself, for the API
        ResultsFolder(mine).__enter__()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(empty), "--steps", "1", "--no-dashboard"])
    assert r.exit_code == 0, r.output
    assert (empty / "summary.json").is_file()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_parent_is_one_line(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    with pytest.raises(InputError, match="cannot write here"):
        ResultsFolder(ro / "res").__enter__()


def _make_in_process(folder: Path, seed: int, steps: int) -> float:
    """The old and reference new folders, made here (same bytes as a subprocess run, no
    interpreter start-up); returns the run's wall time as the write-phase window."""
    t = time.perf_counter()
    args = ["run", str(QUICKSTART), "-o", str(folder), "--seed", str(seed), "--steps", str(steps)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return time.perf_counter() - t


def _assert_points(n: int, seed: int, in_process: bool) -> None:
    bench = _bench()
    with tempfile.TemporaryDirectory() as tmp:
        if in_process:
            rows = bench.trials(n, seed, Path(tmp), _make_in_process)
        else:
            rows = bench.trials(n, seed, Path(tmp))
    for name, delay_s, outcome, code, left in rows:
        assert outcome in ("old", "new"), (name, delay_s, outcome)
        assert left == [], (name, delay_s, left)
        # stopped inside the guard: 128 + signal (wholly old, or wholly new when it landed
        # after the swap); outside it the default action (-signal; before the guard on a
        # loaded machine, the folder is then the old one), or the CLI framework's one-line
        # "Aborted!" for an INT (exit 1); finished: 0, and the folder is the new one
        signum = signal.Signals[name].value
        allowed = (0, 128 + signum, -signum, *((1,) if signum == signal.SIGINT else ()))
        assert code in allowed, (name, delay_s, code)
        if code == 0:
            assert outcome == "new", (name, delay_s, code)


@pytest.mark.slow  # ~5 CPU s of subprocess runs; the 20-point version below is in the slow suite too
def test_kill_during_the_write_phase_leaves_wholly_old_or_wholly_new_3_points() -> None:
    """SIGINT/SIGTERM at 3 random points of the write phase of a subprocess run (about 9 s CPU)."""
    _assert_points(3, seed=3, in_process=True)


@pytest.mark.slow
def test_kill_during_the_write_phase_leaves_wholly_old_or_wholly_new_20_points() -> None:
    _assert_points(20, seed=0, in_process=False)


def test_compare_refuses_a_variant_folder_of_other_files(small_compare: Path, tmp_path: Path) -> None:
    """Each variant's run folder is replaced whole: a folder of that name holding other files
    stops the comparison before anything runs, one line, exit 2, and the files stay."""
    out = tmp_path / "cmp"
    (out / "tree").mkdir(parents=True)
    (out / "tree" / "thesis.txt").write_text("keep")
    (out / "manifest.json").write_text('{"kind": "compare", "tasks": {}}')  # an old comparison
    r = CliRunner().invoke(app, ["compare", str(small_compare), "-o", str(out), "--serial"])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and "not a run's results (no summary.json)" in lines[-1], r.output
    assert (out / "tree" / "thesis.txt").read_text() == "keep"
    assert not (out / "ring").exists()  # nothing ran


def test_compare_and_sweep_refuse_a_folder_that_is_not_theirs(small_compare: Path, tmp_path: Path) -> None:
    """A comparison writes its tables into its folder and a study clears its dataset: a
    non-empty folder without their manifest is someone else's (one line, exit 2, kept)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "comparison.csv").write_text("my table")
    (mine / "summary.csv").write_text("my summary")
    r = CliRunner().invoke(app, ["compare", str(small_compare), "-o", str(mine), "--serial"])
    assert r.exit_code == 2 and "not a comparison's results (no compare manifest.json)" in r.output
    with pytest.raises(InputError, match="not a study's results"):
        StudyStore(mine, "x", []).open(resume=False)
    assert sorted(p.name for p in mine.iterdir()) == ["comparison.csv", "summary.csv"]
    assert (mine / "comparison.csv").read_text() == "my table"


def test_an_output_file_never_replaces_an_input_a_device_a_folder_or_a_runs_results(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("data")
    with pytest.raises(InputError, match="would overwrite the input"):
        check_output_file(log, [tmp_path / "other.txt", log])
    with pytest.raises(InputError, match="is a folder"):
        check_output_file(tmp_path)
    with pytest.raises(InputError, match="device or a pipe"):
        check_output_file("/dev/null")
    res = tmp_path / "res"
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(res), "--steps", "1", "--no-dashboard"])
    assert r.exit_code == 0, r.output
    for name in ("summary.json", "ops.parquet", "topology.json"):
        with pytest.raises(InputError, match="would overwrite a run's results"):
            check_output_file(res / name)
    assert check_output_file(res / "trace.json") == res / "trace.json"  # a page: written into it
    r = CliRunner().invoke(app, ["trace", str(res), "-o", str(res / "summary.json")])
    assert r.exit_code == 2 and "would overwrite a run's results" in r.output
    r = CliRunner().invoke(app, ["export", "chrome", str(QUICKSTART), "-o", str(QUICKSTART)])
    assert r.exit_code == 2 and "would overwrite the input" in r.output
    with pytest.raises(InputError, match="cannot write a file here"):
        write_atomic(tmp_path / "log.txt" / "x.yaml", "x")


def test_a_refused_folder_keeps_a_folder_left_aside(tmp_path: Path) -> None:
    """The check comes before the recovery of a killed swap, which would drop `.NAME.old`."""
    mine = tmp_path / "res"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    aside = tmp_path / ".res.old"
    aside.mkdir()
    (aside / "summary.json").write_text("{}")
    with pytest.raises(InputError, match="not a run's results"):
        ResultsFolder(mine).__enter__()
    assert (aside / "summary.json").exists() and (mine / "notes.txt").exists()


def test_a_page_the_user_put_there_is_refused_clutter_is_not_and_a_symlink_is_one_line(
    tmp_path: Path,
) -> None:
    """Pages count as the run's only when a command wrote them (the index lists them): a
    `trace.json` of the user's own stops the run; a desktop's `.DS_Store` does not; an output
    folder given as a symbolic link is one line, and nothing is left beside it."""
    res = tmp_path / "res"
    args = ["run", str(QUICKSTART), "-o", str(res), "--steps", "1", "--no-dashboard"]
    assert CliRunner().invoke(app, args).exit_code == 0
    (res / "trace.json").write_text('{"traceEvents": []}')
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "holds 'trace.json', which no run wrote" in r.output
    (res / "trace.json").unlink()
    (res / ".DS_Store").write_text("")
    assert CliRunner().invoke(app, args).exit_code == 0
    link = tmp_path / "link"
    link.symlink_to(res)
    r = CliRunner().invoke(app, ["run", str(QUICKSTART), "-o", str(link), "--steps", "1"])
    assert r.exit_code == 2 and "is a symbolic link" in r.output
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == [".res.lock", "link", "res"]


def test_two_outputs_of_one_command_are_not_the_same_file_nor_a_studys_data(tmp_path: Path) -> None:
    sample = ROOT / "topologies/calibration/samples/h100-8gpu-1node-allreduce-aws-p5-batch.txt"
    prof = tmp_path / "p.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(sample), "-o", str(prof), "--html", str(prof)])
    assert r.exit_code == 2 and "would overwrite the input" in r.output and not prof.exists()
    study = tmp_path / "study"
    study.mkdir()
    (study / "manifest.json").write_text('{"kind": "study"}')
    (study / "summary.csv").write_text("a,b\n")
    with pytest.raises(InputError, match="comparison's or study's results"):
        check_output_file(study / "summary.csv")


def test_every_frame_a_priced_run_level_run_writes_is_its_own_without_an_index(tmp_path: Path) -> None:
    """A run level with prices writes `power.parquet`: in a folder with no index it is the
    run's own frame (it was taken for someone's file and the run into it refused), and it
    reads back with the other frames."""
    import yaml

    from simulator import api
    from simulator.metrics.store import read_frames

    sc = yaml.safe_load((ROOT / "scenarios" / "quickstart-failures.yaml").read_text())
    sc["reliability"].update(seeds=1, duration_days=2)
    r = api.run(sc, base_dir=ROOT / "scenarios", output=tmp_path / "out")
    assert "power" in r.frames and (tmp_path / "out" / "power.parquet").is_file()
    (tmp_path / "out" / RESULTS_INDEX).unlink()  # as a folder written before the index
    assert foreign_folder_problem(tmp_path / "out") is None
    assert set(read_frames(tmp_path / "out")) == set(r.frames)


def test_a_study_without_o_writes_to_results_slash_its_name(tmp_path: Path, monkeypatch) -> None:
    """As `run` and `compare` do: two studies run one after the other without `-o` keep
    both results (a shared default folder let the second replace the first)."""
    study = Path(__file__).resolve().parents[1] / "study" / "data" / "interval_study.yaml"
    other = tmp_path / "other.yaml"
    other.write_text(study.read_text().replace("name: interval-vs-policy", "name: other-study"))
    monkeypatch.chdir(tmp_path)
    for file in (study, other):
        r = CliRunner().invoke(app, ["sweep", str(file), "--seeds", "1", "--serial", "--frames", "runs"])
        assert r.exit_code == 0, r.output
    assert (tmp_path / "results" / "interval-vs-policy" / "runs.parquet").is_file()
    assert (tmp_path / "results" / "other-study" / "runs.parquet").is_file()


def test_a_study_name_that_is_no_folder_name_is_refused(tmp_path: Path) -> None:
    study = Path(__file__).resolve().parents[1] / "study" / "data" / "interval_study.yaml"
    bad = tmp_path / "bad.yaml"
    bad.write_text(study.read_text().replace("name: interval-vs-policy", "name: ../elsewhere"))
    r = CliRunner().invoke(app, ["sweep", str(bad), "--seeds", "1", "--serial"])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and lines == [
        f"error: {bad}:2: name: string should match pattern '^[A-Za-z0-9][A-Za-z0-9._+-]{{0,127}}$'"
    ], r.output
    assert not (tmp_path / "elsewhere").exists()


class _SignalsInFinalizer:
    """An object whose finalizer receives SIGTERM (as the collector may run one anywhere)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(100))  # bytecode: the handler runs here, inside the finalizer


@pytest.mark.parametrize("then_more_work", [True, False])
def test_a_stop_signal_handled_inside_a_finalizer_still_stops_the_write(capfd, then_more_work: bool) -> None:
    """A SIGTERM handled in a `__del__` raised there: Python printed "Exception ignored"
    with a traceback and the run went on (a kill test saw 'new+traceback'). It stops the
    block as it ends now, with no traceback, whether the block goes on or ends right after."""
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), sys.unraisablehook)
    with pytest.raises(Interrupted) as caught, stop_signals_raise():
        obj = _SignalsInFinalizer()
        del obj
        if then_more_work:
            for _ in range(200_000):
                pass
    assert caught.value.signum == signal.SIGTERM
    assert "Exception ignored" not in capfd.readouterr().err
    # the handlers and the hook are given back
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT), sys.unraisablehook) == before
