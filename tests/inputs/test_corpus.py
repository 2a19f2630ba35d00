"""The bad-input corpus: every case gives exactly its expected one line, exit 2 or 3, no
traceback, and writes nothing; `validate` says what `run` (or `sweep`, `compare`) says.

The default suite runs every sixth case (each kind is hit); the slow suite runs them all.
A few cases that once hung run as subprocesses under a hang guard (`HANG_GUARD_S`); how long
every case takes (the target is well under 10 s each) is measured by
`benchmarks/bench_bad_inputs.py`, not asserted here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.commands.app import app
from tests.inputs.corpus_cli import CORPUS, run_case

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MANIFEST = yaml.safe_load((HERE / "expected.yaml").read_text())
# git keeps no empty folder: the empty results-folder case is made on a fresh clone
(CORPUS / "results" / "empty-folder").mkdir(exist_ok=True)
KINDS = {"scenario", "topology", "gpu", "graph", "trace", "workload", "profile", "log", "study", "compare"}
KINDS |= {"results"}
#: a case still running after this long hangs; generous, so a loaded machine does not fail it
HANG_GUARD_S = 120


def _check(entry: dict, tmp: Path) -> None:
    rel = entry["case"]
    before = sorted(p.name for p in (CORPUS / rel).parent.iterdir())
    outcomes = run_case(rel, tmp, entry.get("env"), entry.get("only"), output_flag=not entry.get("no_o"))
    assert outcomes, rel
    for o in outcomes:
        assert o.exit_code in (2, 3), (rel, o)
        assert len(o.stderr_lines) == 1, (rel, o)
        assert o.stderr_lines[0].startswith("error: "), (rel, o)
        assert not o.traceback, (rel, o)
        assert not o.wrote, (rel, o)
    first = outcomes[0]
    assert (first.exit_code, first.stderr_lines[0]) == (entry["exit"], entry["line"]), rel
    if not rel.startswith("results/"):  # validate and the command that acts agree
        assert {o.stderr_lines[0] for o in outcomes} == {entry["line"]}, (rel, outcomes)
        assert {o.exit_code for o in outcomes} == {entry["exit"]}, (rel, outcomes)
    assert sorted(p.name for p in (CORPUS / rel).parent.iterdir()) == before, rel


def test_corpus_covers_every_kind_with_400_cases() -> None:
    kinds: dict[str, int] = {}
    for e in MANIFEST:
        kinds[e["case"].split("/")[0]] = kinds.get(e["case"].split("/")[0], 0) + 1
    assert len(MANIFEST) >= 400
    assert set(kinds) == KINDS, kinds
    assert len({e["case"] for e in MANIFEST}) == len(MANIFEST)
    for e in MANIFEST:
        assert (CORPUS / e["case"]).exists(), e["case"]


@pytest.mark.parametrize("entry", MANIFEST[::6], ids=lambda e: e["case"])
def test_corpus_sample(entry: dict, tmp_path: Path) -> None:
    _check(entry, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("entry", MANIFEST, ids=lambda e: e["case"])
def test_corpus_all(entry: dict, tmp_path: Path) -> None:
    _check(entry, tmp_path)


def _cli(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "simulator.commands.app", *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=CORPUS,
        env=full_env,
    )


@pytest.mark.parametrize(
    "case",
    ["scenario/alias-bomb.yaml", "scenario/deep-nesting.yaml", "trace/duration-inf.yaml"],
)
def test_former_hangs_end_in_one_line(case: str, tmp_path: Path) -> None:
    """Cases that once hung (alias bomb, deep nesting, infinite durations), in a real process."""
    entry = next(e for e in MANIFEST if e["case"] == case)
    target = CORPUS / case
    if case.startswith("trace/"):
        target = tmp_path / "s.yaml"
        target.write_text(
            f"name: s\ntopology: {{file: {CORPUS / '_base/topology.yaml'}}}\n"
            f"workload: {{file: {CORPUS / case}}}\n"
        )
    r = _cli(["run", str(target), "-o", str(tmp_path / "out")])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == entry["exit"] and len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def test_a_file_over_the_size_limit_is_refused_and_the_flag_sets_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("name: big\n" + "# padding\n" * 1_000_000)  # about 10 MB of comments
    r = CliRunner().invoke(app, ["validate", str(big)])
    assert r.exit_code == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: {big}: file is {big.stat().st_size:,} bytes, over the limit of 8,388,608 bytes "
        "(raise it with --max-file-mb or CLUSTERSIM_MAX_FILE_MB)"
    ]
    small = CORPUS / "_base/scenario.yaml"
    r = CliRunner().invoke(app, ["--max-file-mb", "0.0001", "validate", str(small)])
    assert r.exit_code == 2 and "over the limit of 104 bytes" in r.stderr, r.stderr
    r = CliRunner().invoke(app, ["--max-file-mb", "1", "validate", str(small)])
    assert r.exit_code == 0, r.output


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/zero").exists(), reason="POSIX special files")
def test_a_device_or_a_pipe_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A device's or a pipe's size says 0: reading /dev/zero never ends, opening a pipe with no
    writer never returns. Each is one line and exit 2, for a scenario, a calibration log and a
    job trace alike."""
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    csv_fifo = tmp_path / "pipe.csv"
    os.mkfifo(csv_fifo)
    for args in (
        ["validate", "/dev/zero"],
        ["validate", str(fifo)],
        ["calibrate", str(fifo), "-o", str(tmp_path / "p.yaml")],
        ["calibrate", str(csv_fifo), "-o", str(tmp_path / "p.yaml")],  # sniffed as CSV first
        ["import", "kineto", str(fifo), "-o", str(tmp_path / "t.yaml")],
    ):
        r = _cli(args)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1, (args, r.stderr)
        assert "not a regular file (a device, pipe or socket)" in lines[0], r.stderr
    assert not (tmp_path / "p.yaml").exists()


def test_data_files_are_read_whole_whatever_the_input_limit(tmp_path: Path, monkeypatch) -> None:
    """The size limit is for the files a user writes (scenarios, topologies): a benchmark
    log or a job trace is data, read whole, as before the limit was shared."""
    from simulator.calibration.parser import read_benchmark
    from simulator.jobs.trace import read_job_trace

    monkeypatch.setenv("CLUSTERSIM_MAX_FILE_MB", "0.0001")  # 104 bytes
    log = ROOT / "topologies/calibration/samples/h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt"
    assert log.stat().st_size > 104 and read_benchmark(log)
    trace = tmp_path / "jobs.csv"
    trace.write_text("job,submit_h,gpus,duration_h\n" + "".join(f"j{i},{i},8,1\n" for i in range(50)))
    assert trace.stat().st_size > 104 and len(read_job_trace(trace)) == 50
