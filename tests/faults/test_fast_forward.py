"""The run-level engine crosses checkpoint boundaries without SimPy events: same run, bit for bit.

`RunLevelEngine._fast_forward` handles the boundaries that come before the next event of any
other process in a plain loop. These tests run the same jobs with it switched off (every
boundary a SimPy timeout, as the engine did before) and require identical frames and summary.
"""

import pandas as pd
import pytest

from simulator.errors import SimulationError
from simulator.faults.engine import RunLevelEngine, simulate_run
from simulator.faults.run_core import RunClock
from simulator.faults.state import ScalingOracle

from .helpers import degradations, failures, job, policy
from .test_engine import DEGR, MIXED

POLICIES = [
    {"kind": "checkpoint_restart", "interval_s": 300},
    {"kind": "async_checkpoint", "interval_steps": 2},
    {"kind": "in_memory", "interval_steps": 3, "storage_every": 4},
    {"kind": "hot_spares", "pool_hosts": 2, "interval_steps": 5},
    {"kind": "elastic", "min_replicas": 4, "interval_steps": 4},
]


def _run(pol: dict, seed: int) -> object:
    shape = job()
    oracle = ScalingOracle(
        full_dp_replicas=shape.dp_replicas, compute_s=8.0, comm_s=2.0, write_s=40.0, snapshot_s=0.5
    )
    return simulate_run(
        shape, oracle, failures(*MIXED), policy(**pol), 48 * 3600, seed, degradations=degradations(*DEGR)
    )


@pytest.mark.parametrize("pol", POLICIES, ids=[p["kind"] for p in POLICIES])
def test_fast_forward_gives_the_event_loop_run(pol, monkeypatch):
    fast = [_run(pol, seed) for seed in (1, 2)]
    monkeypatch.setattr(RunLevelEngine, "_fast_forward", lambda self: None)
    slow = [_run(pol, seed) for seed in (1, 2)]
    for f, s in zip(fast, slow, strict=True):
        assert f.summary["interruptions"] > 0  # failures did cut the checkpoint cycles
        pd.testing.assert_frame_equal(f.segments, s.segments, check_exact=True)
        pd.testing.assert_frame_equal(f.incidents, s.incidents, check_exact=True)
        assert f.summary == s.summary


def test_clock_never_jumps_over_a_scheduled_event():
    env = RunClock()
    env.timeout(5.0)
    env.advance(4.0)
    assert env.now == 4.0
    with pytest.raises(SimulationError):
        env.advance(5.0)
    with pytest.raises(SimulationError):
        env.advance(3.0)
