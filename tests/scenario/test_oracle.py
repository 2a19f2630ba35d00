"""The run level on top of the step simulation: checkpoint costs from the fabric, step times
per cluster state, and a scenario's run-level results."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simulator.faults.state import ClusterState
from simulator.scenario.execute import execute
from simulator.scenario.oracle import SimulatedOracle
from simulator.scenario.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]


def _graph_file(tmp_path: Path, n: int, gpu_gbps: float, stor_nic_gbps: float, write_gbyte: float) -> Path:
    nodes = [{"id": f"g{i}", "kind": "gpu", "node": f"s{i}", "local_rank": 0} for i in range(n)]
    nodes += [
        {"id": "sw", "kind": "switch", "tier": 1},
        {
            "id": "stor0",
            "kind": "storage",
            "write_bandwidth_bytes_per_s": write_gbyte * 1e9,
            "read_bandwidth_bytes_per_s": 2 * write_gbyte * 1e9,
        },
    ]
    links = [
        {"source": f"g{i}", "target": "sw", "bandwidth_gbps": gpu_gbps, "medium": "ib"} for i in range(n)
    ]
    links.append({"source": "stor0", "target": "sw", "bandwidth_gbps": stor_nic_gbps, "medium": "ib"})
    p = tmp_path / "g.json"
    p.write_text(
        json.dumps({"directed": False, "multigraph": False, "graph": {}, "nodes": nodes, "links": links})
    )
    return p


def _scenario(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "t.yaml").write_text(
        f"name: t\ngpu: {{file: {ROOT}/topologies/gpus/h100-sxm.yaml}}\ngraph: {{file: g.json}}\n"
    )
    (tmp_path / "w.yaml").write_text(
        "format: clustersim-step/1\nranks: 4\ngroups: {world: all}\nops:\n"
        "  - {id: c, kind: compute, ranks: all, duration_ms: 100}\n"
        "  - {id: ar, kind: collective, collective: all_reduce, group: world, size_mib: 64, deps: [c]}\n"
    )
    p = tmp_path / "s.yaml"
    p.write_text("name: s\nseed: 3\ntopology: {file: t.yaml}\nworkload: {file: w.yaml}\n" + extra)
    return p


@pytest.mark.parametrize("stor_gbps, write_gbyte, expected_bw", [(400, 20.0, 20e9), (80, 20.0, 10e9)])
def test_checkpoint_write_is_size_over_the_bottleneck(tmp_path, stor_gbps, write_gbyte, expected_bw):
    """Checkpoint write: T = size / min(storage NIC, storage media, sum of GPU links) (fluid model);
    here the GPUs' links (4 x 50 GB/s) are never the bottleneck."""
    _graph_file(tmp_path, 4, 400, stor_gbps, write_gbyte)
    prep = prepare(_scenario(tmp_path, "reliability: {checkpoint_gbyte: 100}\n"))
    oracle = SimulatedOracle(prep)
    state = ClusterState(dp_replicas=1)
    assert oracle.checkpoint_write_s(state) == pytest.approx(100e9 / expected_bw, rel=1e-6)
    assert oracle.checkpoint_snapshot_s(state) == pytest.approx(25e9 / 25e9)  # 100 GB / 4 GPUs at 25 GB/s


def test_step_time_per_state(tmp_path):
    _graph_file(tmp_path, 4, 400, 400, 20.0)
    prep = prepare(_scenario(tmp_path, "reliability: {checkpoint_gbyte: 100}\n"))
    oracle = SimulatedOracle(prep)
    healthy = oracle.step_time_s(ClusterState(dp_replicas=1))
    slow = oracle.step_time_s(ClusterState(dp_replicas=1, stragglers=frozenset({("gpu2", 1.5)})))
    # a synchronous step waits for the straggler: 100 ms of compute becomes 150 ms
    assert slow - healthy == pytest.approx(0.05, rel=1e-6)
    # the same slowdown on another GPU is the same state by symmetry: no new simulation
    n = oracle.simulations
    oracle.step_time_s(ClusterState(dp_replicas=1, stragglers=frozenset({("gpu0", 1.5)})))
    assert oracle.simulations == n
    drained = oracle.step_time_s(ClusterState(dp_replicas=1, draining=True))
    assert drained >= healthy


def test_scenario_with_policy_reports_goodput_and_is_deterministic(tmp_path):
    _graph_file(tmp_path, 4, 400, 400, 20.0)
    extra = (
        "failures: [{kind: exponential, target: gpu, mtbf_h: 500, repair_h: 2}]\n"
        "policy: {kind: checkpoint_restart, interval: daly}\n"
        "reliability: {duration_days: 10, seeds: 3, checkpoint_gbyte: 100}\n"
    )
    path = _scenario(tmp_path, extra)
    a = execute(prepare(path))
    b = execute(prepare(path))
    assert 0 < a.summary["goodput"] < 1 and len(a.frames["runs"]) == 3
    assert {"incidents", "segments", "runs"} <= set(a.frames)
    pd.testing.assert_frame_equal(a.frames["incidents"], b.frames["incidents"])
    pd.testing.assert_frame_equal(a.frames["runs"], b.frames["runs"])


def test_study_from_scenario_asks_the_step_simulation(tmp_path):
    from simulator.study.sweep import load_study, run_study

    _graph_file(tmp_path, 4, 400, 400, 20.0)
    _scenario(tmp_path, "reliability: {checkpoint_gbyte: 100}\n")
    (tmp_path / "study.yaml").write_text(
        "name: st\njob: {n_gpus: 4, gpus_per_node: 1, gpus_per_replica: 4}\n"
        "step: {from_scenario: s.yaml}\n"
        "failures: [{kind: exponential, target: gpu, mtbf_h: 500}]\n"
        "policy: {kind: checkpoint_restart, interval_min: 10}\n"
        "duration_days: 5\nseeds: 2\n"
        "axes: [{param: policy.interval_min, values: [5, 20]}]\n"
    )
    runs = run_study(load_study(tmp_path / "study.yaml"), executor="serial")
    assert len(runs) == 4 and runs["goodput"].between(0, 1).all()
    # the step time the run level used is the simulated one (compute 100 ms + all-reduce)
    prep = prepare(tmp_path / "s.yaml")
    step = execute(prep).summary["step_time_s"]
    assert SimulatedOracle(prep).step_time_s(ClusterState(dp_replicas=1)) == pytest.approx(step, rel=1e-12)


def test_missing_checkpoint_size_is_a_clear_error(tmp_path):
    _graph_file(tmp_path, 4, 400, 400, 20.0)
    path = _scenario(tmp_path, "policy: {kind: checkpoint_restart, interval: daly}\n")
    with pytest.raises(Exception, match="reliability.checkpoint_gbyte"):
        execute(prepare(path))


def test_study_warms_its_oracle_on_the_pool_with_the_same_answers(tmp_path):
    """The step simulations a study starts with run on its process pool (healthy step, checkpoint
    transfers and the drain step side by side) and give the answers warming here gives."""
    from simulator.study.sweep import load_study, study_oracles

    _graph_file(tmp_path, 4, 400, 400, 20.0)
    _scenario(tmp_path, "reliability: {checkpoint_gbyte: 100}\n")
    (tmp_path / "study.yaml").write_text(
        "name: st\njob: {n_gpus: 4, gpus_per_node: 1, gpus_per_replica: 4}\n"
        "step: {from_scenario: s.yaml}\n"
        "policy: {kind: async_checkpoint, interval_min: 10}\nduration_days: 1\n"
    )
    study = load_study(tmp_path / "study.yaml")
    here, ticks = study_oracles(study), []
    pooled = study_oracles(study, lambda done, total: ticks.append((done, total)), "pool", 2)
    a, b = here[0], pooled[0]
    # healthy and drained steps, write, snapshot, two loads (the compute share is not a cache key)
    assert len(a._cache) == 6 and a._cache == b._cache
    assert a._compute_s == b._compute_s is not None
    assert ticks[-1] == (7, 7) and len(ticks) == 7


@pytest.mark.parametrize(
    "gpu_gbps, write_gbyte, reserved",
    [
        (400, 20.0, True),  # storage media (20 GB/s over 4 drains) bound the drain: a reservation
        (40, 100.0, False),  # the GPUs' own 5 GB/s links bound it: simulated as flows
    ],
)
def test_drain_reservation_equals_drain_flows(tmp_path, gpu_gbps, write_gbyte, reserved):
    """The step during a drain, with the drain as a bandwidth reservation, is the step with one
    unbounded drain flow per GPU beside the training flows (max-min over both): same time to
    1e-12 (only the order of the rounding differs). Where the drain saturates a link training
    also crosses, the oracle simulates the flows themselves."""
    from simulator.scenario import oracle as oracle_module

    _graph_file(tmp_path, 4, gpu_gbps, 400, write_gbyte)
    prep = prepare(_scenario(tmp_path, "reliability: {checkpoint_gbyte: 100}\n"))
    oracle = SimulatedOracle(prep)
    cluster = prep.cluster
    drains = oracle_module._drain_paths(cluster, sorted(set(prep.program.rank_gpus)))
    load = oracle_module._drain_load(cluster, cluster.links.capacity_bytes_per_s, drains)
    assert (load is not None) == reserved
    times = []
    for as_flows in (False, True):
        row = oracle._run_step(cluster, drain=True, drain_as_flows=as_flows).step_rows[0]
        times.append(row.finished_at_s - row.started_at_s)
    healthy = oracle.step_time_s(ClusterState(dp_replicas=1))
    # reserved: the two paths agree to rounding; not reserved: the oracle fell back to the
    # flows, so the two calls are the same simulation and agree exactly
    assert times[0] == pytest.approx(times[1], rel=1e-12 if reserved else 0, abs=0)
    assert times[0] > healthy  # the drain takes bandwidth from the all-reduce
