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
