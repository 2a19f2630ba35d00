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
from simulator.faults.steady import SteadyCycles

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


#: non-round times (nothing lands on a whole number of seconds) so that every rounding of
#: the clock and of the progress counts, and a snapshot cycle short enough for thousands
STEADY_ORACLE = {
    "compute_s": 8.3,
    "comm_s": 1.7,
    "write_s": 31.1,
    "snapshot_s": 0.37,
    "drain_slowdown": 0.013,
}
STEADY_POLICIES = [
    {"kind": "async_checkpoint", "interval_steps": 1},
    {"kind": "in_memory", "interval_steps": 1, "storage_every": 3},
]


def _steady_run(pol: dict, seed: int) -> object:
    shape = job()
    oracle = ScalingOracle(full_dp_replicas=shape.dp_replicas, **STEADY_ORACLE)
    return simulate_run(
        shape, oracle, failures(*MIXED), policy(**pol), 12 * 3600, seed, degradations=degradations(*DEGR)
    )


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    pd.testing.assert_frame_equal(a.segments, b.segments, check_exact=True)
    pd.testing.assert_frame_equal(a.incidents, b.incidents, check_exact=True)
    assert a.summary.keys() == b.summary.keys()
    for key, value in a.summary.items():  # NaN (an unused Daly cost) equals itself here
        assert value == b.summary[key] or (value != value and b.summary[key] != b.summary[key]), key


@pytest.mark.parametrize("pol", STEADY_POLICIES, ids=[p["kind"] for p in STEADY_POLICIES])
def test_steady_cycles_give_the_general_loop_run(pol, monkeypatch):
    crossed = []
    close = SteadyCycles._steady_close

    def counting_close(self, *args):  # type: ignore[no-untyped-def]
        crossed.append(args[0])
        close(self, *args)

    monkeypatch.setattr(SteadyCycles, "_steady_close", counting_close)
    steady = _steady_run(pol, 4)
    monkeypatch.setattr(SteadyCycles, "_steady_applies", lambda self: False)
    general = _steady_run(pol, 4)
    monkeypatch.setattr(RunLevelEngine, "_fast_forward", lambda self: None)
    event_loop = _steady_run(pol, 4)
    # the tight loop did the work: thousands of boundaries, and failures cut its cycles
    # (a failure lands inside a stretch of cycles it crossed, not on a boundary)
    assert len(crossed) > 3_000
    fail_s = steady.incidents.loc[steady.incidents["kind"] == "failure", "time_s"]
    assert len(fail_s) > 0
    assert any(min(crossed) < t < max(crossed) and t not in set(crossed) for t in fail_s)
    _same(steady, general)
    _same(steady, event_loop)
