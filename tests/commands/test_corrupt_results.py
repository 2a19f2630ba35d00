"""`dashboard` and `trace` on run folders: a failure run is a run, not a study; a corrupt folder
is one line and exit 2."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(scope="module")
def failure_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """quickstart-failures: a run with a run level, so it has a `runs` frame beside summary.json."""
    out = tmp_path_factory.mktemp("fr") / "run"
    r = runner.invoke(
        app, ["run", str(ROOT / "scenarios/quickstart-failures.yaml"), "-o", str(out), "--no-dashboard"]
    )
    assert r.exit_code == 0, r.output
    assert (out / "runs.parquet").is_file()
    return out


def test_a_failure_run_rebuilds_as_a_run_dashboard(failure_run: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["dashboard", str(failure_run), "-o", str(tmp_path / "d.html")])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("run dashboard:")
    r = runner.invoke(app, ["trace", str(failure_run), "-o", str(tmp_path / "t.json")])
    assert r.exit_code == 0, r.output


def _garbage(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).write_bytes(b"PAR1 not really")


def _truncate(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).write_bytes((d / name).read_bytes()[:100])


CORRUPTIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "garbage ops": (_garbage("ops.parquet"), "ops.parquet: cannot read saved frame"),
    "truncated segments": (_truncate("segments.parquet"), "segments.parquet: cannot read saved frame"),
    "garbage runs": (_garbage("runs.parquet"), "runs.parquet: cannot read saved frame"),
    "missing steps": (lambda d: (d / "steps.parquet").unlink(), "steps frame missing"),
    "missing segments": (lambda d: (d / "segments.parquet").unlink(), "segments frame missing"),
    "summary not JSON": (lambda d: (d / "summary.json").write_text("{"), "summary.json:1: malformed JSON"),
    "summary a list": (
        lambda d: (d / "summary.json").write_text("[]"),
        "summary.json:1: expected a JSON object of summary figures",
    ),
    "topology not JSON": (lambda d: (d / "topology.json").write_text("{"), "topology.json:1: malformed JSON"),
    "ops of another frame": (
        lambda d: shutil.copy(d / "runs.parquet", d / "ops.parquet"),
        "ops.parquet: not a ops frame: missing column(s) step",
    ),
    "empty steps": (
        lambda d: pd.read_parquet(d / "steps.parquet").iloc[:0].to_parquet(d / "steps.parquet"),
        "steps frame is empty",
    ),
}


@pytest.mark.parametrize("command", ["dashboard", "trace"])
@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_run_folder_is_one_line_exit_2(
    failure_run: Path, tmp_path: Path, command: str, case: str
) -> None:
    folder = tmp_path / "run"
    shutil.copytree(failure_run, folder)
    corrupt, message = CORRUPTIONS[case]
    corrupt(folder)
    r = runner.invoke(app, [command, str(folder), "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.output
    assert not (tmp_path / "out").exists()


def test_a_corrupt_frame_fails_only_the_queries_that_read_it(failure_run: Path, tmp_path: Path) -> None:
    """Every view was made before the query ran, so a truncated `ops` failed a query of
    `steps` too; now the others answer, and a query of `ops` (in any case) names the frame."""
    folder = tmp_path / "run"
    shutil.copytree(failure_run, folder)
    _truncate("ops.parquet")(folder)
    r = runner.invoke(app, ["query", str(folder), "select count(*) as n from steps", "--csv"])
    assert r.exit_code == 0, r.output
    assert r.output.split() == ["n", str(len(pd.read_parquet(failure_run / "steps.parquet")))]
    for sql in ("select count(*) from ops", "select * from OPS"):
        r = runner.invoke(app, ["query", str(folder), sql])
        assert r.exit_code == 2, r.output
        line = " ".join(r.output.split())
        assert line.startswith(f"error: {folder}: query failed: frame ops cannot be read ("), line
