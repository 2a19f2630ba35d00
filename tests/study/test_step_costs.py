"""A study's step costs: constants, or a scenario's step simulation, never both."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.study.step_costs import StepCostsSpec

DATA = Path(__file__).parent / "data" / "interval_study.yaml"
QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart-failures.yaml"


def test_constants_beside_a_scenario_are_refused_not_ignored():
    with pytest.raises(ValidationError) as err:
        StepCostsSpec.model_validate(
            {"from_scenario": "s.yaml", "step_time_s": 5.0, "checkpoint_write_min": 2}
        )
    assert "so step_time_s, checkpoint_write_min would be ignored" in str(err.value)
    with pytest.raises(ValidationError, match="comm_fraction would be ignored"):
        StepCostsSpec.model_validate({"from_scenario": "s.yaml", "comm_fraction": 0.3})
    # either source alone is fine
    assert StepCostsSpec.model_validate({"from_scenario": "s.yaml"}).step_time_s is None
    assert (
        StepCostsSpec.model_validate({"step_time_s": 5.0, "checkpoint_write_min": 2}).checkpoint_write_s
        == 120
    )


def test_validate_and_sweep_say_it_in_one_line(tmp_path):
    text = DATA.read_text()
    step = next(ln for ln in text.splitlines() if ln.startswith("step:"))
    study = tmp_path / "st.yaml"
    study.write_text(text.replace(step, f"step: {{from_scenario: {QUICKSTART}, step_time_s: 2.0}}"))
    line = next(i for i, ln in enumerate(study.read_text().splitlines(), 1) if ln.startswith("step:"))
    out = tmp_path / "out"
    for args in (["validate", str(study)], ["sweep", str(study), "-o", str(out), "--serial"]):
        r = CliRunner().invoke(app, args)
        errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 2 and errors == [
            f"error: {study}:{line}: step: give from_scenario or constants, not both: the scenario's "
            "step simulation answers every step cost, so step_time_s would be ignored"
        ], r.output
    assert not out.exists()
