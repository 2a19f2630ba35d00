"""A bound of a quantity given in a human unit is said in that unit, not in SI."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.study.sweep import load_study

DATA = Path(__file__).resolve().parents[1] / "study" / "data" / "interval_study.yaml"


def _error(tmp_path: Path, duration: str) -> str:
    path = tmp_path / "st.yaml"
    path.write_text(DATA.read_text().replace("duration_days: 20", duration))
    with pytest.raises(InputError) as exc:
        load_study(path)
    return str(exc.value).split(": ", 1)[1]


@pytest.mark.parametrize(
    ("duration", "message"),
    [
        # the limit is 10 years: 315,576,000 s = 3652.5 days = 87,660 h
        ("duration_days: 1.0e7", "duration_days: input should be less than or equal to 3652.5 days"),
        ("duration_h: 1.0e9", "duration_h: input should be less than or equal to 87660 h"),
        ("duration_s: 1.0e12", "duration_s: input should be less than or equal to 315576000"),
        # a bound of 0 needs no unit
        ("duration_days: 0", "duration_days: input should be greater than 0"),
    ],
)
def test_duration_limit_in_the_keys_unit(tmp_path: Path, duration: str, message: str) -> None:
    assert _error(tmp_path, duration) == message
