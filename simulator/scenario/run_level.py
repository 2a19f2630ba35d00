"""Days of training under a scenario's failures and policy, on its own simulated step.

The step just simulated answers the healthy state; a `SimulatedOracle` answers every other
cluster state the run level meets (see `simulator.scenario.oracle`). One run per seed of
`reliability.seeds`; the summary gains the means and 95% intervals.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from simulator.faults.engine import simulate_run
from simulator.faults.metrics import aggregate
from simulator.faults.preset import PRESETS
from simulator.faults.state import ClusterState
from simulator.scenario.job import job_shape
from simulator.scenario.oracle import SimulatedOracle
from simulator.scenario.prepare import PreparedRun
from simulator.units import factor


def run_level(prep: PreparedRun, summary: dict[str, Any], seed: int) -> dict[str, pd.DataFrame]:
    """Days of training under the scenario's failures and policy, over `reliability.seeds` seeds.

    Returns the `incidents` and `segments` frames of the first seed and a `runs` frame (one
    summary row per seed); adds the means and 95% intervals to `summary`.
    """
    sc = prep.scenario.spec
    rel = sc.reliability
    # the step just simulated answers the healthy state: no second simulation of it
    oracle = SimulatedOracle(
        prep, healthy_step_s=summary.get("step_time_s"), compute_per_rank_s=summary.get("compute_s")
    )
    job = job_shape(prep, rel)
    failures = [*(PRESETS[sc.preset]() if sc.preset else []), *sc.failures]
    # only the first seed's frames are kept: the other seeds give a summary row each
    first: Any = None
    rows: list[dict[str, Any]] = []
    notes: set[str] = set()
    for k in range(rel.seeds):
        result = simulate_run(
            job,
            oracle,
            failures,
            sc.policy,
            rel.duration_s,
            seed + k,
            degradations=sc.degradations,
            mtbf_scale=rel.mtbf_scale,
        )
        first = first or result
        rows.append({"seed": result.seed, **result.summary})
        notes.update(result.notes)
    runs = pd.DataFrame(rows)
    stuck = int((runs["goodput"] <= 0).sum()) if "goodput" in runs else 0
    if stuck:
        mtbf = float(runs["model_job_mtbf_s"].iloc[0]) if "model_job_mtbf_s" in runs else math.nan
        notes.add(
            f"in {stuck} of {len(runs)} seeds the job kept no step: failures came faster than it "
            f"could restart (modelled job MTBF {mtbf:.3g} s); interruptions and MTTI count only "
            "the failures that stopped it while it ran, not those during its restarts"
        )
    agg = aggregate(runs).iloc[0].to_dict()
    for key in ("goodput", "ettr", "interruptions", "lost_work_s", "restart_s", "checkpoint_s", "job_mtti_s"):
        if f"{key}_mean" in agg:
            summary[key] = float(agg[f"{key}_mean"])
            summary[f"{key}_95ci"] = [float(agg[f"{key}_lo"]), float(agg[f"{key}_hi"])]
    summary["run_level"] = {
        "policy": sc.policy.kind if sc.policy is not None else None,
        "duration_days": rel.duration_s / factor("_days"),
        "seeds": rel.seeds,
        "checkpoint_write_s": oracle.checkpoint_write_s(_healthy(job)),
        "step_simulations": oracle.simulations,
        "job_gpus": job.n_gpus,
        # None: no checkpoint was due (a Young or Daly interval without failures)
        "checkpoint_interval_s": _finite_or_none(first.summary["interval_s"]),
    }
    if notes:
        summary["run_level"]["notes"] = sorted(notes)
    return {"incidents": first.incidents, "segments": first.segments, "runs": runs}


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _healthy(job: Any) -> ClusterState:
    return ClusterState(dp_replicas=job.dp_replicas)
