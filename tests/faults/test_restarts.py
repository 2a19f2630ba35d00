"""Restarts interrupted or overlapped by more failures: where replacements come from, and
how their parts (above all the wait for repairs) are counted."""

import pytest

from simulator.faults.engine import simulate_run
from simulator.faults.state import ConstantOracle

from .helpers import failures, job, policy

# helpers.RESTART: detection 60 s, queue 300 s, initialization 200 s; the load is 40 s
ORACLE = ConstantOracle(step_s=1.0, write_s=300.0, snapshot_s=10.0, load_storage_s=40.0, load_peer_s=5.0)
DETECT_S, QUEUE_S, INIT_S, LOAD_S = 60.0, 300.0, 200.0, 40.0
T1_S = 3600.0


def _restarts(result):
    inc = result.incidents
    return inc[inc.kind == "restart"]


def test_failure_during_restart_is_replaced_from_the_queue():
    """Host 0 fails at T1 (restart: 60 + 300 + 200 + 40 = 600 s); host 1, in the same replica
    (2 hosts per replica), fails 100 s later, during the restart. Both hosts have 48 h
    repairs, and checkpoint_restart queues for replacements instead of waiting for repairs,
    so host 1 is replaced from the same queue: out until T1 + 100 + 60 + 300, and the
    restart ends 240 s (init + load) after that, at T1 + 700, not 48 h later."""
    fl = failures(
        {"kind": "scheduled", "target": "host", "component": 0, "at_s": T1_S, "repair_h": 48},
        {"kind": "scheduled", "target": "host", "component": 1, "at_s": T1_S + 100, "repair_h": 48},
    )
    r = simulate_run(
        job(gpus_per_replica=16), ORACLE, fl, policy(kind="checkpoint_restart", interval_s=1000), 6 * 3600, 0
    )
    rs = _restarts(r)
    assert len(rs) == 1 and bool(rs.committed.iloc[0])
    assert rs.duration_s.iloc[0] == pytest.approx(700.0)
    assert rs.wait_s.iloc[0] == pytest.approx(100.0)
    second = r.incidents[(r.incidents.kind == "failure") & (r.incidents.time_s == T1_S + 100)].iloc[0]
    assert not second.interrupted
    assert second.out_until_s == pytest.approx(T1_S + 100 + DETECT_S + QUEUE_S)
    assert r.summary["restart_s"] == pytest.approx(700.0)


def test_failure_during_restart_waits_for_repair_when_the_policy_does():
    """With wait_for_repair the second host is kept until its repair, as the first one is."""
    fl = failures(
        {"kind": "scheduled", "target": "host", "component": 0, "at_s": T1_S, "repair_h": 2},
        {"kind": "scheduled", "target": "host", "component": 1, "at_s": T1_S + 100, "repair_h": 3},
    )
    pol = policy(kind="checkpoint_restart", interval_s=1000, wait_for_repair=True)
    r = simulate_run(job(gpus_per_replica=16), ORACLE, fl, pol, 9 * 3600, 0)
    rs = _restarts(r)
    # ready when host 1 is back (T1 + 100 + 3 h), then init + load
    assert rs.duration_s.iloc[0] == pytest.approx(100 + 3 * 3600 + INIT_S + LOAD_S)


def test_wait_of_an_interrupted_restart_is_counted_once():
    """wait_for_repair: host 0 fails at T1 with a 10 h repair, so the restart waits about 10 h;
    host 4 (another replica) fails 1 h into that wait and interrupts it; the new restart waits
    for the same repair. The restart phase lasts from T1 to T1 + 10 h + init + load, and
    the time spent waiting is all of it but two detections, one init and one load: the cut
    restart records only the part of its wait that had passed."""
    fl = failures(
        {"kind": "scheduled", "target": "host", "component": 0, "at_s": T1_S, "repair_h": 10},
        {"kind": "scheduled", "target": "host", "component": 4, "at_s": 2 * T1_S, "repair_h": 1},
    )
    pol = policy(kind="checkpoint_restart", interval_s=1000, wait_for_repair=True)
    r = simulate_run(job(), ORACLE, fl, pol, 15 * 3600, 0)
    rs = _restarts(r)
    assert list(rs.committed.astype(bool)) == [False, True]
    assert r.summary["restart_s"] == pytest.approx(10 * 3600 + INIT_S + LOAD_S)
    assert r.summary["restart_wait_s"] == pytest.approx(10 * 3600 - 2 * DETECT_S)
    # every restart's recorded parts add up to its recorded length
    parts = rs[["detect_s", "queue_s", "wait_s", "init_s", "load_s"]].sum(axis=1)
    assert list(parts) == pytest.approx(list(rs.duration_s))


def test_hot_spares_waiting_for_repairs_take_a_spare_back_from_repair_first():
    """One spare host, `when_empty: wait_repair`. Host 0 fails at T1 (1 h repair): the spare
    replaces it and returns to the pool at T1 + 1 h. Host 1 fails at T1 + 1000 s (3 h
    repair) with the pool empty: the job takes the spare back at T1 + 3600 (not host 1's
    repair at T1 + 1000 + 3 h), so the restart waits 3600 - 1000 - 60 = 2540 s beyond
    detection and lasts 2600 + 200 + 40 s. The spare then stays until host 1 is repaired."""
    fl = failures(
        {"kind": "scheduled", "target": "host", "component": 0, "at_s": T1_S, "repair_h": 1},
        {"kind": "scheduled", "target": "host", "component": 1, "at_s": T1_S + 1000, "repair_h": 3},
    )
    pol = policy(kind="hot_spares", pool_hosts=1, when_empty="wait_repair", interval_s=1000)
    r = simulate_run(job(), ORACLE, fl, pol, 6 * 3600, 0)
    second = _restarts(r).iloc[1]
    assert second.wait_s == pytest.approx(3600.0 - 1000.0 - DETECT_S)
    assert second.duration_s == pytest.approx(3600.0 - 1000.0 + INIT_S + LOAD_S)


@pytest.mark.parametrize(
    ("kind", "stall_s"), [("checkpoint_restart", 300.0), ("async_checkpoint", 10.0), ("in_memory", 10.0)]
)
def test_a_checkpoint_the_run_ends_in_is_recorded_as_cut_short(kind: str, stall_s: float) -> None:
    """No failures; a checkpoint every 2,700 steps of 1 s, each stalling `stall_s` (the write
    or the snapshot). The run ends 4 s into the second checkpoint: it is recorded as cut
    short (not committed, 4 s long, from the step it captured), as a checkpoint a failure
    cuts is, and is not counted among the checkpoints; the first is committed."""
    second_s = 2 * 2700 + stall_s  # the second checkpoint starts here
    r = simulate_run(job(), ORACLE, [], policy(kind=kind, interval_s=2700), second_s + 4, 0)
    ckpt = r.incidents[(r.incidents.kind == "checkpoint") & (r.incidents.cause != "drain")]
    assert list(ckpt.committed.astype(bool)) == [True, False]
    assert list(ckpt.time_s) == pytest.approx([2700.0, second_s])
    assert list(ckpt.duration_s) == pytest.approx([stall_s, 4.0])
    assert list(ckpt.step) == pytest.approx([2700.0, 5400.0])
    assert r.summary["checkpoints"] == 1.0
    assert r.summary["checkpoint_s"] == pytest.approx(stall_s + 4.0)


@pytest.mark.parametrize("at_s", [3600.1, 65194.138])
def test_a_restart_that_waits_for_no_host_records_no_wait(at_s: float) -> None:
    """The replaced host is back exactly when detection and the queue end: the restart waits
    0 s for hosts, not the rounding of `ready - now - detect - queue` (7.3e-12 s when the
    failure is at 65,194.138 s, which made `restart_wait_s` of a study nonzero)."""
    fl = failures({"kind": "scheduled", "target": "host", "component": 0, "at_s": at_s, "repair_h": 48})
    r = simulate_run(job(), ORACLE, fl, policy(kind="checkpoint_restart", interval_s=1000), 24 * 3600, 0)
    rs = _restarts(r)
    assert len(rs) == 1 and rs.wait_s.iloc[0] == 0.0
    assert r.summary["restart_wait_s"] == 0.0
