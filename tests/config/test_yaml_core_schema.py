"""Plain YAML scalars are read by YAML 1.2's core schema, not YAML 1.1's rules.

YAML 1.1 (PyYAML's default) changes values without a word: `010` is octal 8, `1:30` is
90 (base 60), `yes`/`no`/`on`/`off` are booleans (`name: no` is False), and a date is a
date. The core schema (YAML 1.2.2, §10.3.2) reads decimal integers as decimal, 0o and 0x
as octal and hexadecimal, only true/false as booleans and leaves the rest as text, so that
a wrong value is reported instead of changed; `1e9` is a number (1.1 reads it as text).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.config.loader import read_document
from simulator.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("010", 10),
        ("-010", -10),
        ("._", "._"),  # no digit: text (it was a float of "." and a ValueError traceback)
        ("._1", "._1"),
        (".5_0", 0.5),
        ("1_000", 1000),
        ("0o17", 15),
        ("0x0A", 10),
        ("1:30", "1:30"),
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("0b11", "0b11"),
        ("2024-01-01", "2024-01-01"),
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("", None),
        ("1e9", 1e9),
        ("2.5", 2.5),
        ("-.inf", float("-inf")),
        ("-.5", -0.5),
        ("!!int -0x10", -16),
    ],
)
def test_plain_scalars_follow_the_core_schema(tmp_path: Path, text: str, value: object) -> None:
    p = tmp_path / "x.yaml"
    p.write_text(f"a: {text}\nb: [1, {{c: 2}}]\n")
    data = read_document(p).data
    assert data["a"] == value and type(data["a"]) is type(value)
    assert data["b"] == [1, {"c": 2}]


def test_a_sexagesimal_repair_time_is_refused_not_read_as_90_hours(tmp_path: Path) -> None:
    """`repair_h: 1:30` was read as 90 hours; it is now a wrong value, named at its line."""
    src = (ROOT / "scenarios" / "quickstart-failures.yaml").read_text()
    assert src.count("repair_h: 4}") == 1
    line = next(i for i, ln in enumerate(src.splitlines(), 1) if "repair_h: 4}" in ln)
    bad = tmp_path / "failures.yaml"
    bad.write_text(src.replace("repair_h: 4}", "repair_h: 1:30}").replace("file: ../", f"file: {ROOT}/"))
    r = CliRunner().invoke(app, ["validate", str(bad)])
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert r.exit_code == 2 and len(errors) == 1, r.output
    assert f"{bad}:{line}:" in errors[0] and "repair_h" in errors[0]


def test_an_explicit_integer_that_is_not_one_is_a_line_not_a_traceback(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nseed: !!int 0b101\n")
    with pytest.raises(InputError, match=r"x\.yaml:2: .*'0b101' is not an integer"):
        read_document(p)
