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
