"""A scenario with `cluster`: the shipped example runs, prices steps by the step simulation,
is deterministic, and rejects a job bigger than the cluster on one line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "scenarios" / "jobs" / "cluster-example.yaml"


def test_the_example_cluster_runs_and_prices_steps_by_the_step_simulation() -> None:
    prep = prepare(EXAMPLE)
    a, b = execute(prep), execute(prep)
    jobs = a.frames["cluster_jobs"].set_index("job")
    priced = jobs[jobs["step_time_s"].notna()]
    assert list(priced.index) == ["gpt1p3b-dp16", "gpt1p3b-dp16-b"]
    # work = steps x the step time of the workload alone (200,000 and 100,000 steps)
    assert list(priced["work_s"] / priced["step_time_s"]) == pytest.approx([200000, 100000], rel=1e-12)
    assert 0 < a.summary["gpu_utilization"] <= 1
    assert (jobs["work_done_s"] <= jobs["work_s"] + 1e-6).all()
    assert (jobs.loc[jobs["finished"], "work_done_s"] == jobs.loc[jobs["finished"], "work_s"]).all()
    for name in ("cluster_jobs", "occupancy", "cluster_incidents"):
        pd.testing.assert_frame_equal(a.frames[name], b.frames[name], check_exact=True)
    occ = a.frames["occupancy"]
    assert (occ["busy_gpus"] + occ["down_gpus"] <= a.summary["gpus_in_topology"]).all()


def test_cluster_goodput_weighs_each_job_by_its_gpus() -> None:
    """docs/metrics.md: cluster `goodput` = work done / GPU-time allocated over all jobs,
    i.e. sum(work_done_s x gpus) / sum(allocated_s x gpus), the GPU-time weighting of
    `gpu_utilization` and `lost_work_gpu_h`. On the example (seed 3) the 96-GPU
    pretrain-b loses work to two failures: GPU-weighted 0.941, while a plain ratio of job
    seconds, which counts an 8-GPU sweep like it, gave 0.958."""
    result = execute(prepare(EXAMPLE))
    jobs = result.frames["cluster_jobs"]
    weighted = (jobs["work_done_s"] * jobs["gpus"]).sum() / (jobs["allocated_s"] * jobs["gpus"]).sum()
    assert result.summary["goodput"] == pytest.approx(weighted, rel=1e-12)
    assert result.summary["goodput"] == pytest.approx(0.9415, abs=5e-4)


def test_a_job_bigger_than_the_cluster_is_an_error(tmp_path: Path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text("job,submit_h,gpus,duration_h\nsmall,0,8,1\nhuge,1,4096,1\n")
    text = EXAMPLE.read_text().replace("../../workloads/jobs/example-jobs.csv", str(trace))
    text = text.replace("../../topologies/", str(ROOT / "topologies") + "/")
    sc = tmp_path / "c.yaml"
    sc.write_text(text)
    with pytest.raises(InputError) as exc:
        prepare(sc)
    assert str(exc.value) == f"{trace}:3: gpus: job 'huge' asks for 4096 GPUs and the cluster has 128"


def test_a_job_that_never_starts_counts_its_wait_to_the_end_of_the_run(tmp_path: Path) -> None:
    """Hand-worked: FIFO, no failures, 1 day on 128 GPUs. `big` (128 GPUs, 48 h) starts at 0
    and holds every GPU to the end; `small` (submitted at 1 h) never starts. Its wait is at
    least 24 h - 1 h = 23 h, so the mean queueing delay is (0 + 23) / 2 = 11.5 h."""
    trace = tmp_path / "jobs.csv"
    trace.write_text("job,submit_h,gpus,duration_h\nbig,0,128,48\nsmall,1,8,1\n")
    sc = tmp_path / "c.yaml"
    sc.write_text(
        "name: starve\n"
        f"topology: {{file: {ROOT}/topologies/h100-rail-clos-16n-4to1.yaml}}\n"
        f"cluster: {{trace: {{file: {trace}}}, scheduler: fifo}}\n"
        "policy: {kind: checkpoint_restart, interval: daly}\n"
        "reliability: {duration_days: 1}\n"
    )
    summary = execute(prepare(sc)).summary
    assert summary["jobs_never_started"] == 1 and summary["jobs_finished"] == 0
    assert summary["mean_queueing_delay_s"] == pytest.approx(11.5 * 3600, rel=1e-12)
    assert summary["gpu_utilization"] == pytest.approx(1.0, rel=1e-12)
    # a job submitted after the end of the run never queued in it: not a negative wait, and
    # not a job that never started either (both figures are over the jobs submitted in the run)
    trace.write_text("job,submit_h,gpus,duration_h\nbig,0,128,48\nsmall,1,8,1\nlate,30,8,1\n")
    summary = execute(prepare(sc)).summary
    assert summary["n_jobs"] == 3 and summary["jobs_never_started"] == 1
    assert summary["mean_queueing_delay_s"] == pytest.approx(11.5 * 3600, rel=1e-12)


def test_synthetic_sizes_bigger_than_the_cluster_are_an_error_before_any_draw(tmp_path: Path) -> None:
    sc = tmp_path / "c.yaml"
    sc.write_text(
        "name: big-draws\n"
        f"topology: {{file: {ROOT}/topologies/h100-rail-clos-16n-4to1.yaml}}\n"
        "cluster:\n"
        "  synthetic: {count: 5, mean_interarrival_h: 1, median_duration_h: 2,\n"
        "              sizes: [8, 256], weights: [1.0, 0.0]}\n"
        "policy: {kind: checkpoint_restart, interval: daly}\n"
        "reliability: {duration_days: 1}\n"
    )
    with pytest.raises(InputError) as exc:
        prepare(sc)
    assert str(exc.value) == (
        f"{sc}:5: cluster.synthetic.sizes.1: a job of 256 GPUs may be drawn and the cluster has 128"
    )


def test_run_steps_beside_a_cluster_is_refused_at_its_line(tmp_path: Path) -> None:
    """A cluster runs every job for its length over the run: `run.steps` was accepted and
    ignored without a word."""
    sc = tmp_path / "c.yaml"
    sc.write_text(
        "name: steps-beside-cluster\n"
        f"topology: {{file: {ROOT}/topologies/h100-rail-clos-16n-4to1.yaml}}\n"
        "cluster:\n"
        "  synthetic: {count: 5, mean_interarrival_h: 1, median_duration_h: 2}\n"
        "reliability: {duration_days: 1}\n"
        "run: {steps: 3}\n"
    )
    with pytest.raises(InputError) as exc:
        prepare(sc)
    assert str(exc.value).startswith(f"{sc}:6: run.steps: a `cluster` runs every job for its length")
