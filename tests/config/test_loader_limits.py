"""Whole numbers too large for any field are refused where they are written."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.config.loader import read_document
from simulator.errors import InputError


@pytest.mark.parametrize("value", ["9" * 400, "-" + "9" * 400, str(2**63)])
def test_a_whole_number_beyond_64_bits_is_refused_at_its_line(tmp_path: Path, value: str) -> None:
    """Such a number used to reach a float conversion (OverflowError, a traceback) or a
    Parquet column (a crash while writing the frames)."""
    p = tmp_path / "t.yaml"
    p.write_text(f"ranks: 2\nops:\n  - {{id: a, kind: compute, ranks: all, duration_ms: {value}}}\n")
    with pytest.raises(InputError) as exc:
        read_document(p)
    assert str(exc.value).startswith(f"{p}:3: ops.0.duration_ms: ")
    assert "is too large; expected a whole number of at most 2**63 - 1" in str(exc.value)


def test_the_largest_64_bit_number_reads(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text(f"seed: {2**63 - 1}\n")
    assert read_document(p).data == {"seed": 2**63 - 1}


def test_a_seed_whose_study_runs_would_leave_64_bits_is_refused(tmp_path: Path, app) -> None:
    """Seeds seed, seed + 1, ... of a run level are stored as 64-bit integers: a seed near
    2**64 used to be simulated, then crash while writing the frames."""
    from typer.testing import CliRunner

    from tests.conftest import ROOT

    scenario = ROOT / "scenarios" / "quickstart-failures.yaml"
    res = CliRunner().invoke(app, ["run", str(scenario), "--seed", str(2**64 - 7), "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--seed" in res.output and not (tmp_path / "o").exists()
    text = scenario.read_text()
    bad = tmp_path / "s.yaml"
    bad.write_text(
        "\n".join(ln if not ln.startswith("seed:") else f"seed: {2**62 + 1}" for ln in text.splitlines())
    )
    res = CliRunner().invoke(app, ["validate", str(bad)])
    assert (
        res.exit_code == 2 and "seed: input should be less than or equal to 4611686018427387904" in res.output
    )
