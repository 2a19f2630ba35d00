"""`execute(..., release_ops=True)`: the ops are released once simulated, the results are the same."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.scenario import execute as execute_module
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


@pytest.mark.parametrize("collect_after", [execute_module.COLLECT_AFTER_RECORDS, 0])
def test_released_ops_give_the_same_frames_and_summary(collect_after, monkeypatch):
    """Also with the engine collected first, as a run of more than `COLLECT_AFTER_RECORDS`
    records does (the records' op ids are moved to Arrow strings after that collection)."""
    monkeypatch.setattr(execute_module, "COLLECT_AFTER_RECORDS", collect_after)
    kept_prep = prepare(QUICKSTART)
    kept = execute(kept_prep, overrides={"run.steps": 1})
    released_prep = prepare(QUICKSTART)
    n_ops = len(released_prep.program.ops)
    released = execute(released_prep, overrides={"run.steps": 1}, release_ops=True)
    assert n_ops > 0 and released_prep.program.ops == []
    assert len(kept_prep.program.ops) == n_ops  # the default keeps them (a caller may simulate again)
    assert released_prep.program.rank_gpus == kept_prep.program.rank_gpus
    for key in ("wall_time_s",):
        kept.summary.pop(key, None)
        released.summary.pop(key, None)
    assert released.summary == kept.summary
    assert released.summary["simulated_ranks"] > 0
    assert kept.frames.keys() == released.frames.keys()
    for name, frame in kept.frames.items():
        pd.testing.assert_frame_equal(released.frames[name], frame, check_exact=True)
