"""Calibration view: `profile_frame` numbers against the profile, source lookup by sha256,
and the page written by `calibrate -o` / rebuilt by `dashboard PROFILE.yaml`."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from simulator.calibration.profile import CollectiveFit, load_profile
from simulator.commands.app import app
from simulator.viz.calibration import (
    PROFILE_COLUMNS,
    locate_sources,
    profile_cards,
    profile_dashboard_html,
    profile_file_figure,
    profile_frame,
    read_sources,
    search_dirs,
)
from tests.calibration.logs import synthetic_log

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "topologies" / "calibration" / "h100-nvswitch-efa.yaml"
SIZES = [2**k for k in range(3, 31)]


def _frame(profile_path: Path, samples: list[Path] | None = None):
    profile = load_profile(profile_path)
    located = locate_sources(profile, search_dirs(profile_path, samples or []))
    tables, notes = read_sources(profile, located)
    return profile, located, profile_frame(profile, tables), notes


def test_fitted_busbw_is_the_profile_entry_and_errors_match_the_recorded_ones() -> None:
    profile, located, frame, notes = _frame(H100)
    assert all(s.path is not None for s in located.values()) and notes == []
    assert list(frame.columns) == list(PROFILE_COLUMNS) and frame["measured"].all()
    for e in profile.collectives:
        g = frame[frame["table"] == e.source]
        assert len(g) == len(e.errors)  # every measured size above 0
        fit = CollectiveFit.from_entry(e)
        for s, bw in zip(g["size_bytes"], g["model_busbw_bytes_per_s"], strict=True):
            assert bw == pytest.approx(fit.busbw_bytes_per_s(s), rel=1e-9)
        # errors recomputed from the verified data agree with the ones the profile recorded
        # (4 significant digits, fitted on unrounded parameters)
        recorded = np.asarray([r for _, r in e.errors])
        assert np.allclose(g["rel_error"].to_numpy(), recorded, atol=2e-4)
        # measured busbw = model busbw / (1 + error), by definition of the error
        assert np.allclose(
            g["measured_busbw_bytes_per_s"], g["model_busbw_bytes_per_s"] * (1 + g["rel_error"]), rtol=1e-12
        )
    fig = profile_file_figure(frame[frame["file"] == profile.sources[0].file])
    fitted = next(t for t in fig.data if t.name.endswith("fitted"))
    e0 = profile.collectives[0]
    assert np.allclose(
        np.asarray(fitted.y) * 1e9,
        [CollectiveFit.from_entry(e0).busbw_bytes_per_s(s) for s in fitted.x],
        rtol=1e-9,
    )
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    cards = {k: v for k, v in profile_cards(frame)}
    assert cards["entries"] == "4" and cards["source files (data found)"].startswith("4 ")
    big = frame[frame["size_bytes"] >= 2**20]["rel_error"].abs().median()
    assert cards["median |error|, sizes >= 1 MiB"] == f"{big * 100:.2f}%"
    assert cards["max |error|"].startswith(f"{frame['rel_error'].abs().max() * 100:.2f}%")


def test_missing_or_different_source_gives_fitted_curve_and_recorded_errors(tmp_path: Path) -> None:
    data = yaml.safe_load(H100.read_text())
    data["sources"][0]["sha256"] = "0" * 64  # a file of that name exists, but another run
    data["sources"][1]["file"] = "gone.txt"
    for e in data["collectives"]:
        e["source"] = e["source"].replace("h100-8gpu-1node-allreduce-aws-p5-batch.txt", "gone.txt")
    p = tmp_path / "edited.yaml"
    p.write_text(yaml.safe_dump(data))
    profile, located, frame, _ = _frame(p)
    assert located["gone.txt"].path is None and "not found" in located["gone.txt"].note
    first = profile.sources[0].file
    assert located[first].path is None and "sha256 differs" in located[first].note
    lost = frame[frame["file"].isin([first, "gone.txt"])]
    assert not lost["measured"].any() and lost["measured_busbw_bytes_per_s"].isna().all()
    e = profile.collectives[0]
    assert lost[lost["table"] == e.source]["rel_error"].tolist() == [r for _, r in e.errors]
    html = profile_dashboard_html(p)
    assert "gone.txt: not found" in html and "sha256 differs" in html
    assert "fitted curve, error as recorded in the profile" in html
    fig = profile_file_figure(frame[frame["file"] == "gone.txt"])
    assert [t.name.split()[-1] for t in fig.data] == ["fitted", "profile)"]  # no measured markers


def test_figures_are_pure_functions_of_the_frame() -> None:
    _profile, _, frame, _ = _frame(H100, [])
    a = profile_file_figure(frame)
    assert a.to_dict() == profile_file_figure(frame.copy()).to_dict()
    with pytest.raises(ValueError):
        profile_file_figure(frame.drop(columns="rel_error"))


def _logs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    a = folder / "intra-allreduce.log"
    a.write_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES))
    b = folder / "inter-allreduce.log"
    b.write_text(synthetic_log("all_reduce", 16, 8, 60e-6, 400e9, SIZES))
    return [a, b]


def test_calibrate_writes_the_page_and_dashboard_rebuilds_it(tmp_path: Path) -> None:
    logs = _logs(tmp_path / "logs")
    out = tmp_path / "prof" / "machine.yaml"
    runner = CliRunner()
    r = runner.invoke(app, ["calibrate", *map(str, logs), "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.with_suffix(".html").read_text(encoding="utf-8")
    assert "<meta name='clustersim-figures' content='3'>" in page  # entries table + 2 files
    assert "Source files: 2 of 2 found" in page
    # rebuild from the profile file (logs found through --samples) and from its folder
    again = tmp_path / "again.html"
    r = runner.invoke(app, ["dashboard", str(out), "--samples", str(tmp_path / "logs"), "-o", str(again)])
    assert r.exit_code == 0 and "calibration dashboard" in r.output, r.output
    assert again.read_text(encoding="utf-8") == page
    out.with_suffix(".html").unlink()
    r = runner.invoke(app, ["dashboard", str(out.parent), "--samples", str(tmp_path / "logs")])
    assert r.exit_code == 0, r.output
    assert out.with_suffix(".html").read_text(encoding="utf-8") == page
    # without the logs: fitted curves only, said on the page
    r = runner.invoke(app, ["dashboard", str(out), "-o", str(again)])
    assert r.exit_code == 0, r.output
    text = again.read_text(encoding="utf-8")
    assert "Source files: 0 of 2 found" in text and "intra-allreduce.log: not found" in text
    # a folder with two profiles is ambiguous; a YAML that is no profile is a user error
    shutil.copy(out, out.parent / "other.yaml")
    r = runner.invoke(app, ["dashboard", str(out.parent)])
    assert r.exit_code == 2 and "2 calibration profiles" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsources: []\ncollectives: 3\n")
    r = runner.invoke(app, ["dashboard", str(bad)])
    assert r.exit_code == 2 and "collectives" in r.output and "Traceback" not in r.output


def test_headline_cards_without_rows() -> None:
    import pandas as pd

    cards = profile_cards(pd.DataFrame(columns=list(PROFILE_COLUMNS)))
    assert [k for k, _ in cards] == [
        "entries",
        "source files (data found)",
        "median |error|, sizes >= 1 MiB",
        "max |error|",
    ]
    assert [v for _, v in cards][2:] == ["-", "-"]


def test_a_pipe_or_a_device_beside_a_profile_is_not_opened(tmp_path: Path) -> None:
    """`dashboard FOLDER` reads the head of each *.yaml to find the profile: a FIFO named
    a-pipe.yaml waited for a writer forever, /dev/zero linked as one was read without end.
    (In a child process, so that a hang ends as a failure, not as a stuck suite.)"""
    import os
    import subprocess
    import sys

    folder = tmp_path / "profiles"
    folder.mkdir()
    shutil.copy(H100, folder)
    os.mkfifo(folder / "a-pipe.yaml")
    (folder / "zero.yaml").symlink_to("/dev/zero")
    cmd = [
        sys.executable,
        "-m",
        "simulator.commands.app",
        "dashboard",
        str(folder),
        "-o",
        str(tmp_path / "p.html"),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert r.returncode == 0 and "calibration dashboard" in r.stdout, r.stdout + r.stderr
