"""Scenario names are folder names; an output folder that cannot be written is an error
before any work starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.scenario.prepare import output_problem
from simulator.scenario.spec import check_name


@pytest.mark.parametrize(
    "name", ["../../../x", "/tmp/x", "a/b", "a\\b", ".", "..", "", ".hidden", "~x", "a:b"]
)
def test_a_name_is_one_folder_name(name: str) -> None:
    with pytest.raises(ValueError):
        check_name(name)


@pytest.mark.parametrize("name", ["quickstart", "llama3-405b_16k.v2", "a+b"])
def test_plain_names_pass(name: str) -> None:
    assert check_name(name) == name


def test_output_problems(tmp_path: Path) -> None:
    f = tmp_path / "f.txt"
    f.write_text("x")
    assert output_problem(tmp_path / "new" / "deeper") is None
    # a folder holding other files would be replaced whole: refused; empty or a run's: taken
    assert "not a run's results (no summary.json)" in (output_problem(tmp_path) or "")
    (tmp_path / "empty").mkdir()
    assert output_problem(tmp_path / "empty") is None
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "summary.json").write_text("{}")
    assert output_problem(tmp_path / "old") is None
    assert output_problem(f) == f"output path {str(f)!r} exists and is not a folder"
    assert (
        output_problem(f / "x")
        == f"output path {str(f / 'x')!r} lies under {str(f)!r}, which is not a folder"
    )
    assert "not a folder" in (output_problem(Path("/dev/null/x")) or "")


@pytest.mark.parametrize(
    "name", ["\U0001f680" * 128, "\u00e9" * 65, "a\ud800b"], ids=["emoji", "two-byte", "surrogate"]
)
def test_a_name_fits_a_folder_name_in_utf8(name: str) -> None:
    """128 characters of 4 UTF-8 bytes each are 512 bytes, over a file system's 255-byte
    name limit (the run stopped with OSError 'File name too long'); an unpaired surrogate
    is no file name at all (UnicodeEncodeError)."""
    with pytest.raises(ValueError, match="UTF-8"):
        check_name(name)
    assert check_name("\u00e9" * 64) == "\u00e9" * 64


@pytest.mark.parametrize("where", ["name", "variant"])
def test_a_comparison_name_too_long_for_a_folder_is_a_line(tmp_path: Path, where: str) -> None:
    from typer.testing import CliRunner

    from simulator.commands.app import app

    root = Path(__file__).resolve().parents[2]
    long = "a" * 300
    names = (long, "v") if where == "name" else ("c", long)
    f = tmp_path / "cmp.yaml"
    f.write_text(
        f"name: {names[0]}\nbase: {{file: {root}/scenarios/quickstart.yaml}}\n"
        f"variants:\n  - name: {names[1]}\n    run: {{steps: 1}}\n"
    )
    r = CliRunner().invoke(app, ["validate", str(f)])
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2 and len(errors) == 1, r.output
    assert "should match pattern" in errors[0] and "{0,127}" in errors[0]
