"""`execute(..., release_ops=True)`: the ops are released once simulated, the results are the same."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


def test_released_ops_give_the_same_frames_and_summary():
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
