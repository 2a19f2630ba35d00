"""Run a scenario's jobs together on one fabric, and each alone, and collect their frames.

Every job is simulated twice with the same seed: alone on the cluster (its own fabric, no
other flows), and together with every other job of the scenario in one env on ONE fabric
(`simulator.engine.jobs`). The together run gives the frames (`ops`, `steps`, `flows` with a
`job` column; `links` is the sum over jobs), `job_links` (bytes per job per link, who else
used the link) and `jobs` (step time alone and together, slowdown, shared links).

Job i draws its compute jitter from the stream `compute` (job 0, so that a single job gives
the frames of the same one-workload scenario) or `compute/<name>`, in both runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from simulator.engine.context import SimContext
from simulator.engine.jobs import ConcurrentRun
from simulator.engine.step import StepSimulator
from simulator.metrics import frames as fr
from simulator.metrics import jobs as mj
from simulator.metrics.summary import busiest_links, summarize
from simulator.network.fabric import Fabric
from simulator.scenario.job_place import PreparedJob
from simulator.scenario.prepare import PreparedRun, run_identity, step_simulator


def _stream(job: PreparedJob) -> str:
    return "compute" if job.index == 0 else f"compute/{job.name}"


def _job_frames(sim: StepSimulator, job: PreparedJob) -> tuple[pd.DataFrame, pd.DataFrame]:
    program = job.program
    ops = fr.ops_frame(sim.op_rows, program.rank_gpus, program.role)
    return ops, fr.steps_frame(ops, sim.step_rows, program.weight)


def alone_step_s(prep: PreparedRun, job: PreparedJob, seed: int, steps: int) -> float:
    """Mean step time of one job alone on the cluster (its placement, no other flows), s."""
    sim = step_simulator(prep, seed, record_links=False, program=job.program, compute_stream=_stream(job))
    sim.run(steps)
    return mj.mean_step_s(_job_frames(sim, job)[1])


def _job_summary(job: PreparedJob, steps: pd.DataFrame, prep: PreparedRun) -> dict[str, Any]:
    program = job.program
    meta: dict[str, Any] = {"gpus_in_job": len(program.rank_gpus)}
    meta.update({k: v for k, v in program.meta.items() if not isinstance(v, dict)})
    if "model_flops_per_step" in program.meta:
        meta["peak_flops_per_s"] = prep.topology.gpu.peak(str(program.meta.get("dtype", "bf16")))
    s = summarize({"steps": steps, "links": pd.DataFrame()}, meta)
    keep = ("step_time_s", "compute_s", "comm_s", "exposed_comm_s", "idle_s", "mfu", "tokens_per_s")
    out = {k: s[k] for k in keep if k in s}
    out["exposed_comm_by_tag_s"] = s.get("exposed_comm_by_tag_s", {})
    out["simulated_ranks"] = len(program.simulated_ranks)
    return out


def run_jobs(
    prep: PreparedRun, seed: int, on_step: Callable[[int], None] | None = None
) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """Simulate the prepared jobs together (and each alone); their frames and summary
    (`on_step` is called with each finished step of the first job)."""
    sc = prep.scenario.spec
    steps = sc.run.steps
    wall0 = time.perf_counter()
    ctx = SimContext(seed)
    shared = Fabric(
        ctx.env,
        prep.cluster.links.capacity_bytes_per_s,
        record_links=sc.network.record_links,
        link_factors=prep.cluster.capacity_factors(),
    )
    run = ConcurrentRun(shared)
    for job in prep.jobs:
        run.sims.append(
            step_simulator(
                prep,
                seed,
                ctx=ctx,
                program=job.program,
                fabric=run.view(job.index),
                compute_stream=_stream(job),
            )
        )
    run.run(steps, [job.spec.arrival_s for job in prep.jobs], on_step)
    names = [job.name for job in prep.jobs]
    ops_l, steps_l, rows, per_job = [], [], [], []
    for job, sim in zip(prep.jobs, run.sims, strict=True):
        ops, st = _job_frames(sim, job)
        ops_l.append(mj.with_job(ops, job.name))
        steps_l.append(mj.with_job(st, job.name))
        s = _job_summary(job, st, prep)
        per_job.append(s)
        rows.append(
            {
                "job": job.name,
                "gpus": len(job.gpus),
                "placement": job.spec.placement.policy,
                "leaf_groups": job.leaf_groups,
                "arrival_s": job.spec.arrival_s,
                "step_time_alone_s": alone_step_s(prep, job, seed, steps),
                "step_time_s": mj.mean_step_s(st),
                "first_gpu": job.gpus[0],
            }
        )
    flows = fr.flows_frame(shared.flow_records)
    flows.insert(0, "job", [names[run.flow_job[int(f)]] for f in flows["flow_id"]])
    job_links = mj.job_links_frame(names, run.job_link_bytes(), prep.cluster.links)
    frames = {
        "ops": pd.concat(ops_l, ignore_index=True),
        "flows": flows,
        "links": fr.links_frame(shared.link_intervals(), prep.cluster.links, prep.cluster.capacity_factors()),
        "steps": pd.concat(steps_l, ignore_index=True),
        "jobs": mj.jobs_frame(rows, job_links),
        "job_links": job_links,
    }
    return frames, _summary(prep, seed, frames, per_job, time.perf_counter() - wall0, shared)


def _summary(
    prep: PreparedRun,
    seed: int,
    frames: dict[str, pd.DataFrame],
    per_job: list[dict[str, Any]],
    wall_s: float,
    shared: Fabric,
) -> dict[str, Any]:
    sc = prep.scenario.spec
    steps, links = frames["steps"], frames["links"]
    run_time = float(steps["finished_at_s"].max() - steps["started_at_s"].min()) if not steps.empty else 0.0
    jobs = frames["jobs"]
    out: dict[str, Any] = {
        **run_identity(prep, seed),
        "gpus_in_job": int(jobs["gpus"].sum()),
        "n_jobs": len(jobs),
        "fidelity": sc.network.fidelity,
        "steps": sc.run.steps,
        "wall_time_s": wall_s,
        "fabric_recomputations": shared.recomputations,
        "flows": len(shared.flow_records),
        "simulated_time_s": run_time,
        "max_slowdown": float(jobs["slowdown"].max()),
        "mean_slowdown": float(jobs["slowdown"].mean()),
        "cluster_gpu_share": float(jobs["gpus"].sum()) / max(1, len(prep.cluster.gpus)),
    }
    if not links.empty:
        out["bytes_by_tier"] = {
            f"tier{int(t)}": float(b) for t, b in links.groupby("tier")["bytes"].sum().items()
        }
    out["busiest_links"] = busiest_links(links, run_time).to_dict(orient="records")
    job_rows = jobs.to_dict(orient="records")
    out["jobs"] = [{**row, **extra} for row, extra in zip(job_rows, per_job, strict=True)]
    return out
