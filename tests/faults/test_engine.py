"""Run-level engine: laws of the failure process, accounting, policies, common random numbers."""

import math

import numpy as np
import pytest
from scipy import stats

from simulator.faults.engine import simulate_run
from simulator.faults.failure import sample_failures
from simulator.faults.state import ClusterState, ConstantOracle, ScalingOracle, TableOracle

from .helpers import degradations, failures, job, policy

ORACLE = ConstantOracle(step_s=1.0, write_s=300.0, snapshot_s=10.0, load_storage_s=40.0, load_peer_s=5.0)


def test_interruptions_match_poisson_count():
    """N components with exponential MTBF m fail N·T/m times in T on average (Poisson):
    the total over 20 seeds lies in the 99.9% Poisson interval of 20·N·T/m."""
    shape, m_h, t_h = job(), 64 * 10.0, 500.0
    fl = failures({"kind": "exponential", "target": "gpu", "mtbf_h": m_h})
    pol = policy(kind="checkpoint_restart", interval_s=3000)
    counts = [simulate_run(shape, ORACLE, fl, pol, t_h * 3600, s).summary["interruptions"] for s in range(20)]
    mean = 20 * 64 * t_h / m_h
    lo, hi = stats.poisson.ppf([0.0005, 0.9995], mean)
    assert lo <= sum(counts) <= hi


def test_weibull_and_scheduled_failures_sample():
    """Weibull with shape 1 has the exponential's mean count; scheduled failures land at at_h."""
    shape = job()
    fl = failures(
        {"kind": "weibull", "target": "host", "mtbf_h": 80.0, "shape": 1.0},
        {"kind": "scheduled", "target": "switch", "node": "leaf-0", "at_h": [1.5, 7]},
    )
    n = [
        sum(e.component_class == "host" for e in sample_failures(fl, shape, 1000 * 3600, s))
        for s in range(20)
    ]
    assert np.mean(n) == pytest.approx(8 * 1000 / 80, rel=0.1)
    sched = [e for e in sample_failures(fl, shape, 1000 * 3600, 0) if e.component_class == "switch"]
    assert [e.time_s for e in sched] == [5400.0, 25200.0]
    assert sched[0].n_gpus == 64  # a switch takes the GPUs behind it


def test_lost_work_is_half_interval_plus_partial_write():
    """With failures rare relative to the interval τ and write δ, the failure point is uniform
    over a (τ + δ) cycle: lost work averages (τ + δ)/2 (half the interval plus the partial write)."""
    shape = job()
    fl = failures({"kind": "exponential", "target": "gpu", "mtbf_h": 64 * 50.0})
    pol = policy(kind="checkpoint_restart", interval_s=1800)
    lost = []
    for s in range(10):
        inc = simulate_run(shape, ORACLE, fl, pol, 3000 * 3600, s).incidents
        lost += list(inc[(inc.kind == "failure") & inc.interrupted.astype(bool)].lost_work_s)
    assert np.mean(lost) == pytest.approx((1800 + 300) / 2, rel=0.05)
    assert max(lost) <= 1800 + 300 + 1e-6


def test_restart_parts_add_up():
    """Restart = detection + queue + init + load (the oracle's storage load)."""
    shape = job()
    fl = failures({"kind": "scheduled", "target": "gpu", "component": 3, "at_h": 2})
    res = simulate_run(shape, ORACLE, fl, policy(kind="checkpoint_restart", interval_s=1000), 5 * 3600, 0)
    r = res.incidents[res.incidents.kind == "restart"].iloc[0]
    assert r.duration_s == pytest.approx(60 + 300 + 200 + 40)
    assert (r.detect_s, r.queue_s, r.init_s, r.load_s) == (60, 300, 200, 40)
    f = res.incidents[res.incidents.kind == "failure"].iloc[0]
    # cycles of 1000 s compute + 300 s write: the 5th checkpoint commits at 6500 s, the failure
    # at 7200 s loses the 700 s computed since
    assert f.resume_step == 5000 and f.lost_work_s == pytest.approx(7200 - 6500)


ALL_POLICIES = [
    dict(kind="checkpoint_restart", interval_s=2000),
    dict(kind="checkpoint_restart", interval="daly", wait_for_repair=True),
    dict(kind="async_checkpoint", interval_s=600),
    dict(kind="in_memory", interval_s=300, storage_every=5),
    dict(kind="hot_spares", pool_hosts=1, interval="young"),
    dict(kind="hot_spares", pool_hosts=0, when_empty="wait_repair", interval_s=2000),
    dict(kind="elastic", min_replicas=6, interval_s=2000),
    dict(kind="elastic", min_replicas=2, resume_from="checkpoint", interval_s=2000),
]

MIXED = [
    {
        "kind": "exponential",
        "target": "gpu",
        "mtbf_h": 64 * 20.0,
        "repair": {"kind": "exponential", "mean_h": 6},
    },
    {"kind": "weibull", "target": "host", "shape": 0.8, "mtbf_h": 8 * 60.0, "repair_h": 4},
    {"kind": "exponential", "target": "software", "mtbf_h": 64 * 100.0},
    {
        "kind": "exponential",
        "target": "switch",
        "mtbf_h": 200.0,
        "blast_gpus": 16,
        "repair": {"kind": "lognormal", "median_h": 2, "sigma": 0.5},
    },
]
DEGR = [
    {"kind": "straggler", "mtbe_h": 64 * 50.0, "duration_h": 2, "slowdown": 1.5},
    {
        "kind": "degraded_link",
        "mtbe_h": 64 * 80.0,
        "duration_h": 3,
        "bandwidth_factor": 0.5,
        "duration_dist": "exponential",
    },
    {"kind": "flapping_link", "at_h": [30], "component": 5, "duration_h": 1, "down_min": 5, "up_min": 10},
]


def _run(pol, seed=3, hours=400.0):
    shape = job()
    oracle = ScalingOracle(full_dp_replicas=shape.dp_replicas, compute_s=8.0, comm_s=2.0)
    return simulate_run(
        shape, oracle, failures(*MIXED), policy(**pol), hours * 3600, seed, degradations=degradations(*DEGR)
    )


@pytest.fixture(scope="module")
def runs():
    return [(p, _run(p)) for p in ALL_POLICIES]


def test_failures_and_degradations_name_their_component_alike(runs):
    """A failure's component was its bare index (`6`), a degradation's its class and index
    (`gpu13`): a query for `gpu6` missed the failures. Both are class and index now."""
    inc = runs[0][1].incidents
    named = inc[inc.kind.isin(["failure", "degradation"])]
    assert set(named.kind) == {"failure", "degradation"}
    assert len(named) > 10
    for cls, comp in zip(named.component_class, named.component, strict=True):
        assert comp.startswith(cls) and comp[len(cls) :].isdigit(), (cls, comp)


def test_same_seed_same_failures_whatever_the_policy(runs):
    """Common random numbers: failure arrivals (time, class, component) do not depend on the policy."""
    cols = ["time_s", "component_class", "component", "cause", "gpus"]
    tables = [r.incidents[r.incidents.kind == "failure"][cols].reset_index(drop=True) for _, r in runs]
    assert len(tables[0]) > 10
    for t in tables[1:]:
        assert t.equals(tables[0])
    degr = [
        r.incidents[r.incidents.kind == "degradation"][["time_s", "component"]].reset_index(drop=True)
        for _, r in runs
    ]
    for t in degr[1:]:
        assert t.equals(degr[0])


def test_wall_time_is_partitioned(runs):
    """Segments tile the run: contiguous, no overlap, ending at the run's end."""
    for _, r in runs:
        seg = r.segments
        assert seg.start_s.iloc[0] == 0
        assert np.allclose(seg.start_s.iloc[1:].to_numpy(), seg.end_s.iloc[:-1].to_numpy())
        assert seg.end_s.iloc[-1] == pytest.approx(400 * 3600)
        assert (seg.steps_kept <= seg.steps + 1e-9).all()
        assert 0 < r.summary["goodput"] <= r.summary["ettr"] <= 1


def _gpus_of(row, n_gpus=64, per_node=8):
    return {h * per_node + k for h in map(int, str(row.hosts).split(",")) for k in range(per_node)}


def test_no_failed_gpu_ever_computes(runs):
    """Between a failure and the time its hosts are replaced or repaired, no compute segment
    uses a replica holding one of the failed GPUs."""
    for pol, r in runs:
        _check_no_failed_gpu_computes(pol, r)


def _check_no_failed_gpu_computes(pol, r):
    seg = r.segments[r.segments.phase == "compute"]
    fails = r.incidents[(r.incidents.kind == "failure") & r.incidents.interrupted.astype(bool)]
    fails = fails[fails.hosts.astype(str) != ""]
    for _, f in fails.iterrows():
        replicas = {g // 8 for g in _gpus_of(f)}
        during = seg[(seg.end_s > f.time_s + 1e-9) & (seg.start_s < f.out_until_s - 1e-9)]
        for _, s in during.iterrows():
            excluded = {int(x) for x in s.excluded_replicas.split(",") if x}
            assert replicas <= excluded, (pol, f.time_s, s.start_s)
            assert s.gpus_in_use == 64 - 8 * len(excluded)


def test_never_fewer_gpus_than_policy_allows(runs):
    for pol, r in runs:
        seg = r.segments[r.segments.phase == "compute"]
        floor = pol.get("min_replicas", 8) * 8
        assert seg.gpus_in_use.min() >= floor
        assert r.summary["min_gpus_in_use"] >= r.summary["min_gpus_allowed"]


def test_elastic_shrinks_and_rejoins(runs):
    r = dict((p["kind"] + str(p.get("min_replicas", "")), r) for p, r in runs)["elastic6"]
    seg = r.segments[r.segments.phase == "compute"]
    assert (seg.dp_replicas < 8).any() and (seg.dp_replicas == 8).any()
    assert (r.incidents.kind == "rejoin").any()
    # fewer replicas with the global batch kept: longer steps
    assert seg[seg.dp_replicas == 7].step_time_s.min() > seg[seg.dp_replicas == 8].step_time_s.min()


def test_policies_rank_as_expected(runs):
    """Hot spares skip the queue; async stalls less than blocking; in-memory loses less work."""
    by = {i: r.summary for i, (_, r) in enumerate(runs)}
    assert by[4]["restart_s"] < by[0]["restart_s"]
    assert by[2]["checkpoint_s"] < by[0]["checkpoint_s"]
    assert by[3]["lost_work_per_interruption_s"] < by[0]["lost_work_per_interruption_s"]
    assert by[1]["restart_wait_s"] > 0


def test_async_drain_slows_steps():
    shape = job()
    oracle = ScalingOracle(full_dp_replicas=shape.dp_replicas, drain_slowdown=0.1, write_s=500)
    r = simulate_run(shape, oracle, [], policy(kind="async_checkpoint", interval_s=1000), 20000, 0)
    seg = r.segments[r.segments.phase == "compute"]
    assert set(seg.draining) == {True, False}
    assert seg[seg.draining].step_time_s.iloc[0] == pytest.approx(
        1.1 * seg[~seg.draining].step_time_s.iloc[0]
    )
    ck = r.incidents[r.incidents.kind == "checkpoint"]
    assert (ck[ck.cause == "async"].duration_s == 10).all() and (ck.cause == "drain").any()


def test_in_memory_falls_back_to_storage_when_peer_dies():
    """A switch taking host 0 and its peer host 1 forces a storage load; a single host uses the peer."""
    shape = job()
    fl = failures(
        {"kind": "scheduled", "target": "host", "component": 3, "at_h": 1.0},
        {"kind": "scheduled", "target": "switch", "component": 0, "at_h": 3.0, "blast_gpus": 16},
    )
    r = simulate_run(
        shape, ORACLE, fl, policy(kind="in_memory", interval_s=600, storage_every=100), 5 * 3600, 0
    )
    rs = r.incidents[r.incidents.kind == "restart"]
    assert list(rs.load_source) == ["peer", "storage"]
    assert list(rs.cause) == ["memory", "storage"]


def test_oracle_is_asked_once_per_state():
    calls = []

    class Counting(ConstantOracle):
        def step_time_s(self, state):
            calls.append(state)
            return 1.0 + 0.1 * len(state.stragglers)

    shape = job()
    r = simulate_run(
        shape,
        Counting(),
        failures(*MIXED),
        policy(kind="checkpoint_restart", interval_s=900),
        300 * 3600,
        1,
        degradations=degradations(*DEGR[:1]),
    )
    assert len(calls) == len(set(calls)) >= 2  # each distinct state asked once
    assert r.summary["oracle_states"] == len(set(calls))
    assert all(c.failed_gpus == 0 and c.spare_gpus == 0 for c in calls)


def test_table_oracle_lookup():
    healthy = ClusterState(dp_replicas=8)
    t = TableOracle(fallback=ConstantOracle(step_s=2.0), step_times_s={healthy: 1.5})
    assert t.step_time_s(healthy.replace(spare_gpus=8)) == 1.5
    assert t.step_time_s(healthy.replace(dp_replicas=7)) == 2.0


def test_same_seed_same_frames():
    a, b = _run(ALL_POLICIES[6], seed=9, hours=100), _run(ALL_POLICIES[6], seed=9, hours=100)
    assert a.incidents.equals(b.incidents) and a.segments.equals(b.segments)
    c = _run(ALL_POLICIES[6], seed=10, hours=100)
    assert not a.incidents.equals(c.incidents)


def test_no_failures_only_checkpoints():
    """Without failures, goodput = τ/(τ+δ) up to the final partial interval."""
    r = simulate_run(job(), ORACLE, [], policy(kind="checkpoint_restart", interval_s=2700), 300000, 0)
    assert r.summary["interruptions"] == 0 and math.isinf(r.summary["job_mtti_s"])
    assert r.summary["goodput"] == pytest.approx(2700 / 3000, abs=0.01)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), which=st.integers(0, len(ALL_POLICIES) - 1))
def test_laws_hold_for_any_seed_and_policy(seed, which):
    """Whatever the seed and policy: phases tile the run; kept <= computed; goodput <= ETTR <= 1;
    lost work >= 0; the job never computes on fewer GPUs than its policy allows, nor on a
    failed GPU."""
    pol = ALL_POLICIES[which]
    r = _run(pol, seed=seed, hours=150.0)
    seg, s = r.segments, r.summary
    assert np.allclose(seg.start_s.iloc[1:].to_numpy(), seg.end_s.iloc[:-1].to_numpy())
    assert seg.end_s.iloc[-1] == pytest.approx(150 * 3600)
    assert ((seg.end_s - seg.start_s).sum()) == pytest.approx(150 * 3600)
    assert (seg.steps_kept <= seg.steps + 1e-9).all() and (seg.steps_kept >= -1e-12).all()
    assert 0 <= s["goodput"] <= s["ettr"] + 1e-12 <= 1 + 1e-12
    assert (r.incidents.lost_work_s >= -1e-9).all()
    comp = seg[seg.phase == "compute"]
    assert comp.gpus_in_use.min() >= pol.get("min_replicas", 8) * 8
    _check_no_failed_gpu_computes(pol, r)


def test_an_incident_row_is_every_column_in_order():
    from simulator.faults.records import INCIDENT_COLUMNS, incident_row

    row = dict(
        zip(INCIDENT_COLUMNS, incident_row("checkpoint", 5.0, cause="async", committed=True), strict=True)
    )
    assert row["time_s"] == 5.0 and row["kind"] == "checkpoint" and row["cause"] == "async"
    assert row["committed"] is True and row["gpus"] == 0 and row["component"] is None
    with pytest.raises(ValueError, match="colour"):
        incident_row("checkpoint", 5.0, colour="red")
