"""A scenario's `cluster`: days of jobs arriving, scheduled, failing and restarting.

`cluster_jobs(prep)` reads the job trace (or draws the synthetic jobs) and checks every job
fits the cluster; `run_cluster(prep, seed)` prices each job's work, samples the cluster's
failures and runs `simulator.jobs.scheduler.ClusterRun`.

A job's work is its `duration`, or `steps` x the step time of its `model` workload
simulated alone on the cluster (packed, flow fidelity, the scenario's network settings;
one step simulation per distinct (workload, GPUs), cached). Its checkpoint interval
follows the scenario's `policy`: fixed (`interval_s`, or `interval_steps` x its step time),
or Young's / Daly's optimum for the checkpoint stall `cluster.checkpoint_s` and the job's
MTBF (the cluster's failure rate per GPU x its GPUs); with no policy, Daly's. Restart costs
(detection, initialization) are the policy's `restart` (defaults without a policy).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pandas as pd

from simulator.errors import InputError
from simulator.faults.failure import interruption_rate_per_s, sample_failures
from simulator.faults.formulas import daly_interval_s, young_interval_s
from simulator.faults.policy import RestartSpec
from simulator.faults.preset import PRESETS
from simulator.jobs.placement import ClusterLayout
from simulator.jobs.scheduler import ClusterJob, ClusterRun, ClusterSettings
from simulator.jobs.trace import JobRow, read_job_trace, synthetic_jobs
from simulator.scenario.job import job_shape
from simulator.scenario.job_place import row_job
from simulator.scenario.multi import alone_step_s
from simulator.scenario.prepare import PreparedRun, run_identity


def cluster_jobs(prep: PreparedRun, seed: int) -> list[JobRow]:
    """The jobs of the cluster run, each checked to fit the cluster.

    Raises:
        InputError: a row of the trace is bad or asks for more GPUs than the cluster has.
    """
    spec = prep.scenario.spec.cluster
    if spec is None:
        return []
    if spec.trace is not None:
        rows = read_job_trace(prep.scenario.workload_path)
    else:
        s = spec.synthetic
        if s is None:  # the spec's validator requires one of them
            return []
        rows = synthetic_jobs(
            s.count,
            seed,
            mean_interarrival_h=s.mean_interarrival_s / 3600.0,
            median_duration_h=s.median_duration_s / 3600.0,
            sigma=s.sigma,
            sizes=tuple(s.sizes),
            weights=tuple(s.weights),
        )
    n = len(prep.cluster.gpus)
    for r in rows:
        if r.gpus > n:
            where = prep.scenario.workload_path if spec.trace is not None else prep.scenario.path
            raise InputError(
                f"job {r.name!r} asks for {r.gpus} GPUs and the cluster has {n}",
                file=where,
                line=r.line or None,
                field="gpus" if spec.trace is not None else "cluster.synthetic.sizes",
            )
    return rows


def _step_time_s(prep: PreparedRun, row: JobRow, seed: int, cache: dict[tuple[str, int], float]) -> float:
    """The step time of a row's model workload alone on the cluster (packed), cached."""
    if row.model is None:
        return math.nan
    key = (str(row.model), row.gpus)
    if key not in cache:
        job = row_job(prep.scenario, prep.topology, prep.cluster, row)  # checked by `prepare`
        cache[key] = alone_step_s(prep, job, seed, 1)
    return cache[key]


def _interval_s(prep: PreparedRun, gpus: int, step_s: float, rate_per_gpu_s: float) -> float:
    """Compute time between checkpoints for a job of `gpus` (see the module docstring)."""
    sc = prep.scenario.spec
    policy, delta = sc.policy, sc.cluster.checkpoint_s if sc.cluster else 60.0
    mtbf = 1.0 / (rate_per_gpu_s * gpus) if rate_per_gpu_s > 0 else math.inf
    if policy is not None and policy.interval == "fixed":
        if policy.interval_s is not None:
            return policy.interval_s
        return (policy.interval_steps or 1) * step_s if math.isfinite(step_s) else math.inf
    if not math.isfinite(mtbf) or delta <= 0:
        return math.inf
    if policy is not None and policy.interval == "young":
        return young_interval_s(delta, mtbf)
    return daly_interval_s(delta, mtbf)


def _goodput(table: pd.DataFrame) -> float:
    """GPU-time of work done / GPU-time allocated over all jobs (NaN if none was allocated).

    Each job weighs by its GPUs, as `gpu_utilization` and `lost_work_gpu_h` do: an hour
    of an 8-GPU job counts an eighth of an hour of a 64-GPU job (a plain ratio of job
    seconds counted them alike, so small jobs' overheads outweighed large jobs' losses).
    """
    allocated = float((table["allocated_s"] * table["gpus"]).sum())
    return float((table["work_done_s"] * table["gpus"]).sum()) / allocated if allocated > 0 else math.nan


def run_cluster(prep: PreparedRun, seed: int) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Run the cluster for `reliability.duration`; its frames (`cluster_jobs`, `occupancy`,
    `cluster_incidents`) and summary."""
    wall0 = time.perf_counter()
    sc = prep.scenario.spec
    cspec = sc.cluster
    rel = sc.reliability
    rows = cluster_jobs(prep, seed)
    shape = job_shape(prep, rel)
    specs = [*(PRESETS[sc.preset]() if sc.preset else []), *sc.failures]
    failures = sample_failures(specs, shape, rel.duration_s, seed, rel.mtbf_scale)
    rate_per_gpu = interruption_rate_per_s(specs, shape, rel.mtbf_scale) / shape.n_gpus
    restart = sc.policy.restart if sc.policy is not None else RestartSpec()
    cache: dict[tuple[str, int], float] = {}
    jobs = []
    for r in rows:
        step_s = _step_time_s(prep, r, seed, cache)
        work = r.duration_s if r.duration_s is not None else (r.steps or 0) * step_s
        job = ClusterJob(r.name, r.submit_s, r.gpus, work, priority=r.priority)
        job.interval_s = _interval_s(prep, r.gpus, step_s, rate_per_gpu)
        job.init_s = restart.init_s(r.gpus, shape.gpus_per_node)
        jobs.append((job, step_s))
    settings = ClusterSettings(
        scheduler=cspec.scheduler if cspec else "backfill",
        duration_s=rel.duration_s,
        detection_s=restart.detection_s,
        checkpoint_s=cspec.checkpoint_s if cspec else 60.0,
        spare_servers=cspec.spare_servers if cspec else 0,
    )
    run = ClusterRun(ClusterLayout.of(prep.cluster.graph), [j for j, _ in jobs], failures, settings)
    run.run()
    table = run.jobs_frame()
    table["step_time_s"] = [s for _, s in jobs]
    frames = {
        "cluster_jobs": table,
        "occupancy": run.occupancy_frame(),
        "cluster_incidents": pd.DataFrame.from_records(
            run.incidents, columns=["time_s", "job", "cause", "lost_work_s"]
        ),
    }
    done = table[table["finished"]]
    summary: dict[str, Any] = {
        **run_identity(prep, seed),
        "scheduler": settings.scheduler,
        "duration_s": rel.duration_s,
        "n_jobs": len(table),
        "jobs_finished": len(done),
        "failures": len(failures),
        "interruptions": int(table["restarts"].sum()),
        "gpu_utilization": run.utilization(),
        # over the jobs submitted during the run; one that never started waited at least to
        # the end of the run (a lower bound); one submitted after the end never queued in it
        "mean_queueing_delay_s": float(
            table["queueing_delay_s"]
            .fillna(rel.duration_s - table["submit_s"])[table["submit_s"] < rel.duration_s]
            .mean()
        ),
        # the same jobs: submitted during the run (one submitted after its end never queued)
        "jobs_never_started": int(
            (table["queueing_delay_s"].isna() & (table["submit_s"] < rel.duration_s)).sum()
        ),
        "mean_jct_s": float(done["jct_s"].mean()) if len(done) else math.nan,
        "median_jct_s": float(done["jct_s"].median()) if len(done) else math.nan,
        "goodput": _goodput(table),
        "lost_work_gpu_h": float((table["lost_work_s"] * table["gpus"]).sum() / 3600.0),
        "jobs_spanning_leaf_groups": int((table["leaf_groups"] > 1).sum()),
        "wall_time_s": time.perf_counter() - wall0,
    }
    return frames, summary
