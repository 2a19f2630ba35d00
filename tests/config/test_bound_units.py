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


def test_a_physical_limit_is_said_in_the_keys_unit_too(tmp_path: Path) -> None:
    """An MTBF of 2e9 h is checked on its SI value (the limit is 1e12 s) and said in hours, as
    it was given: at most 1e12 / 3600 = 2.77778e8 h."""
    path = tmp_path / "st.yaml"
    text = DATA.read_text()
    mtbf = next(
        ln.split("mtbf_h:")[1].split(",")[0].split("}")[0] for ln in text.splitlines() if "mtbf_h:" in ln
    )
    path.write_text(text.replace(f"mtbf_h:{mtbf}", " mtbf_h: 2.0e9", 1))
    with pytest.raises(InputError) as exc:
        load_study(path)
    assert str(exc.value).split(": ", 1)[1].endswith("mtbf_h: must be at most 2.77778e+08 h (found 2e+09 h)")
