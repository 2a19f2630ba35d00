"""`clustersim calibrate` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from simulator.calibration.fit import fit_table
from simulator.calibration.parser import parse_text
from simulator.calibration.profile import load_profile
from simulator.viz.calibration import calibration_figure, fit_frame
from tests.calibration.logs import DATA, synthetic_log

SIZES = [2**k for k in range(3, 31)]


@pytest.fixture
def logs(tmp_path: Path) -> list[Path]:
    a = tmp_path / "intra-allreduce.log"
    a.write_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES))
    b = tmp_path / "inter-allreduce.log"
    b.write_text(synthetic_log("all_reduce", 16, 8, 60e-6, 400e9, SIZES, prefix="0: "))
    return [a, b]


def test_fit_writes_profile_and_html(app: typer.Typer, logs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "prof" / "machine.yaml"
    r = CliRunner().invoke(
        app, ["calibrate", *map(str, logs), str(DATA / "gemm-synthetic.csv"), "-o", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert "intra-allreduce.log" in r.output and "GEMM bf16" in r.output
    p = load_profile(out)
    assert p.name == "machine" and len(p.collectives) == 2 and p.compute is not None
    assert all("/" not in s.file for s in p.sources)
    assert yaml.safe_load(out.read_text())["sources"][0]["sha256"]
    html = out.with_suffix(".html").read_text()
    assert html.count("plotly.js v") >= 1 and "<script" in html
    assert not list(out.parent.glob(".*"))  # no temp files left behind


def test_check_prints_error_per_size(app: typer.Typer, logs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "intra.yaml"
    assert CliRunner().invoke(app, ["calibrate", str(logs[0]), str(logs[1]), "-o", str(out)]).exit_code == 0
    other = tmp_path / "four-nodes.log"
    other.write_text(synthetic_log("all_reduce", 32, 8, 90e-6, 400e9, SIZES))
    r = CliRunner().invoke(app, ["calibrate", "--check", str(out), str(other)])
    assert r.exit_code == 0, r.output
    assert "predicted all_reduce 32 GPUs/4 node(s)" in r.output
    assert "1073741824" in r.output and "max |error|" in r.output


def test_cli_errors_and_exit_codes(app: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "p.yaml"
    r = runner.invoke(app, ["calibrate", str(DATA / "truncated-allreduce.txt"), "-o", str(out)])
    assert r.exit_code == 2 and "truncated-allreduce.txt:18:" in r.output
    assert not out.exists()
    r = runner.invoke(app, ["calibrate", str(DATA / "foreign.csv"), "-o", str(out)])
    assert r.exit_code == 2 and "foreign.csv:1:" in r.output
    log = tmp_path / "table-only.txt"
    log.write_text("\n".join(ln for ln in synthetic_log("send_recv", 2, 1, 1e-5, 2e10, SIZES).splitlines()
                             if "Rank" not in ln and "Collective" not in ln))  # fmt: skip
    r = runner.invoke(app, ["calibrate", str(log), "-o", str(out)])
    assert r.exit_code == 2 and "--collective" in r.output
    r = runner.invoke(app, ["calibrate", str(log), "-o", str(out), "--collective", "sendrecv", "--gpus", "2"])
    assert r.exit_code == 2 and "--nodes" in r.output
    r = runner.invoke(
        app,
        ["calibrate", str(log), "-o", str(out), "--collective", "sendrecv", "--gpus", "2", "--nodes", "1"],
    )
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["calibrate", str(log), "-o", str(out), "--collective", "gossip"])
    assert r.exit_code == 2 and "unknown collective" in r.output
    r = runner.invoke(app, ["calibrate", str(log)])
    assert r.exit_code == 2 and "-o/--output" in r.output
    r = runner.invoke(app, ["calibrate", "--check", str(tmp_path / "none.yaml"), str(log)])
    assert r.exit_code == 2 and "file not found" in r.output
    assert "Traceback" not in r.output


def test_figure_is_a_pure_function_of_the_frame() -> None:
    fits = [fit_table(parse_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES), "a.log")[0])]
    frame = fit_frame(fits)
    assert list(frame.columns) == ["file", "size_bytes", "measured_busbw_bytes_per_s",
                                   "model_busbw_bytes_per_s", "rel_error"]  # fmt: skip
    fig = calibration_figure(frame)
    assert len(fig.data) == 2 and fig.layout.xaxis.type == "log"
    assert calibration_figure(frame).to_dict() == fig.to_dict()
    with pytest.raises(ValueError):
        calibration_figure(frame.drop(columns="rel_error"))


def test_gemm_timings_alone_print_no_collective_table(app: typer.Typer, tmp_path: Path) -> None:
    """A GEMM CSV alone fits compute only: the screen shows its lines, not an empty
    collective fit table with its legend (it did); as data (--format json) the empty table
    stays, so the output's shape does not depend on the inputs."""
    out = tmp_path / "g.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(DATA / "gemm-synthetic.csv"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "GEMM bf16" in r.output and "fit error per table" not in r.output and "med:" not in r.output
    args = ["--format", "json", "calibrate", str(DATA / "gemm-synthetic.csv"), "-o", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"] == []
