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
