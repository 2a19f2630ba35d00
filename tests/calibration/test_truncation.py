"""Logs cut short warn (and the profile says how far it measured); `--check` that checks
nothing fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from simulator.calibration.fit import fit_table
from simulator.calibration.parser import parse_text, read_benchmark
from simulator.calibration.profile import build_profile, load_profile
from simulator.calibration.truncation import format_bytes
from tests.calibration.logs import sample_files, synthetic_log

SIZES = [2**k for k in range(3, 31)]
DGX = "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt"


def _cut(text: str, last_size: int, *, trailer: bool = False) -> str:
    """The log with rows above `last_size` removed (and its trailer, unless `trailer`)."""
    keep = []
    for ln in text.splitlines():
        tok = ln.split()
        if tok and tok[0].isdigit() and int(tok[0]) > last_size:
            continue
        if not trailer and ("Avg bus" in ln or "Out of bounds" in ln or "concluded" in ln):
            continue
        keep.append(ln)
    return "\n".join(keep) + "\n"


def _first_lines(samples: Path, n: int, tmp_path: Path) -> Path:
    p = tmp_path / DGX.replace(".txt", "-cut.txt")
    p.write_text("".join((samples / DGX).read_text().splitlines(keepends=True)[:n]))
    return p


def test_format_bytes() -> None:
    assert [format_bytes(x) for x in (512, 4096, 1.5 * 2**20, 2**34)] == [
        "512 B",
        "4 KiB",
        "1.5 MiB",
        "16 GiB",
    ]


def test_first_25_lines_of_a_sample_warn_and_record_max_size(samples: Path, tmp_path: Path) -> None:
    """The review case: rows up to 4 KiB fit about 5.8 GB/s instead of about 480."""
    p = _first_lines(samples, 25, tmp_path)
    (t,) = read_benchmark(p)
    assert t.max_size_bytes == 4096 and t.max_bytes == 2**34
    assert len(t.warnings) == 1
    w = t.warnings[0]
    assert w.startswith(f"{p}:25: ") and "4 KiB" in w and "under 1 MiB" in w
    entry = build_profile("cut", [fit_table(t)]).collectives[0]
    assert entry.max_size_bytes == 4096 and entry.busbw_bytes_per_s < 10e9


def test_rows_stopping_before_max_bytes_without_trailer_warn() -> None:
    full = synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, [2**k for k in range(3, 34)])
    (t,) = parse_text(_cut(full, 2**27), "cut.log")
    assert len(t.warnings) == 1 and "128 MiB" in t.warnings[0] and "maxBytes 8 GiB" in t.warnings[0]
    # the same rows with the trailer: a finished run (sizes elided or limited), no warning
    assert parse_text(_cut(full, 2**27, trailer=True), "ok.log")[0].warnings == ()
    # every row up to maxBytes, trailer lost: complete, no warning
    assert parse_text(_cut(full, 2**33), "ok.log")[0].warnings == ()


def test_excerpts_without_run_header_do_not_warn() -> None:
    """An excerpt of large sizes (no `# nThread` line, no trailer) is legitimate."""
    full = synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES)
    excerpt = "\n".join(ln for ln in _cut(full, 2**27).splitlines() if "nThread" not in ln)
    (t,) = parse_text(excerpt, "excerpt.log")
    assert t.max_bytes is None and t.warnings == ()


def test_small_sizes_warn_even_with_trailer() -> None:
    full = synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES)
    (t,) = parse_text(_cut(full, 2**19, trailer=True), "small.log")
    assert len(t.warnings) == 1 and "512 KiB" in t.warnings[0]


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.name)
def test_no_sample_warns(path: Path) -> None:
    assert [w for t in read_benchmark(path) for w in t.warnings] == []


def test_calibrate_prints_the_warning_and_exits_0(app: typer.Typer, samples: Path, tmp_path: Path) -> None:
    p = _first_lines(samples, 25, tmp_path)
    out = tmp_path / "cut.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(p), "-o", str(out)])
    assert r.exit_code == 0, r.output
    warning = next(ln for ln in r.output.splitlines() if ln.startswith("warning:"))
    assert p.name in warning and "4 KiB" in warning and "GB/s" in warning
    assert load_profile(out).collectives[0].max_size_bytes == 4096


def test_full_log_prints_no_warning(app: typer.Typer, tmp_path: Path) -> None:
    log = tmp_path / "full.log"
    log.write_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES))
    r = CliRunner().invoke(app, ["calibrate", str(log), "-o", str(tmp_path / "p.yaml")])
    assert r.exit_code == 0 and "warning" not in r.output


def test_profile_says_when_it_extrapolates() -> None:
    small = [2**k for k in range(3, 13)]  # up to 4 KiB
    intra = parse_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, small), "cut.log")
    profile = build_profile("cut", [fit_table(t) for t in intra])
    assert profile.collectives[0].max_size_bytes == 4096
    assert "extrapolated" not in profile.collective("all_reduce", 8, 1, 4 * 4096).source
    fit = profile.collective("all_reduce", 8, 1, 2**30)
    assert "extrapolated beyond 4 KiB" in fit.source and fit.source.startswith("measured ")
    # predictions across scales say it too
    assert "extrapolated beyond 4 KiB" in profile.collective("all_reduce", 4, 1, 2**20).source
    full = parse_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES), "full.log")
    assert (
        "extrapolated"
        not in build_profile("full", [fit_table(full[0])]).collective("all_reduce", 8, 1, 4 * 2**30).source
    )


@pytest.fixture
def profile(app: typer.Typer, tmp_path: Path) -> Path:
    log = tmp_path / "intra-allreduce.log"
    log.write_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES))
    out = tmp_path / "intra.yaml"
    assert CliRunner().invoke(app, ["calibrate", str(log), "-o", str(out)]).exit_code == 0
    return out


def test_check_that_checks_nothing_fails(app: typer.Typer, profile: Path, tmp_path: Path) -> None:
    gather = tmp_path / "gather.log"
    gather.write_text(synthetic_log("all_gather", 8, 8, 15e-6, 400e9, SIZES))
    r = CliRunner().invoke(app, ["calibrate", "--check", str(profile), str(gather)])
    assert r.exit_code == 2, r.output
    errors = [ln for ln in r.output.splitlines() if ln.strip()]
    assert errors == [f"error: {gather}: no entry of {profile} matches all_gather on 8 GPUs / 1 nodes"]


def test_check_that_checks_something_notes_the_rest(app: typer.Typer, profile: Path, tmp_path: Path) -> None:
    gather = tmp_path / "gather.log"
    gather.write_text(synthetic_log("all_gather", 8, 8, 15e-6, 400e9, SIZES))
    inter = tmp_path / "inter.log"
    inter.write_text(synthetic_log("all_reduce", 16, 8, 60e-6, 400e9, SIZES))
    same = tmp_path / "same.log"
    same.write_text(synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES))
    r = CliRunner().invoke(app, ["calibrate", "--check", str(profile), str(gather), str(inter), str(same)])
    assert r.exit_code == 0, r.output
    assert "max |error|" in r.output and "same.log" in r.output
    notes = [ln for ln in r.output.splitlines() if ln.startswith("note:")]
    assert notes == [
        f"note: {gather}: no entry of {profile} matches all_gather on 8 GPUs / 1 nodes; not checked",
        f"note: {inter}: no entry of {profile} matches all_reduce on 16 GPUs / 2 nodes; not checked",
    ]
