"""Checks of a study before any work (`validate`, `sweep` and `api.sweep` make them): that
what the study asks of its step scenario can be answered, so that a request it cannot
honour is one line (exit 2, or 3) before anything is simulated or written, not an error
part-way through the study.

What is checked: the step scenario itself (`check_step_scenario`), that every variant's
job is the scenario's job (its GPUs and data-parallel replicas: the step times and the
checkpoint are that job's, and fewer replicas are read as a job shrunk by an elastic
policy), and that every policy the variants run can run over it: one that drains
checkpoints to storage in the background needs storage nodes in its topology
(`simulator.scenario.oracle.check_drain`).
A run-level scenario is checked the same way by `oracle.check_run_level`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.config.loader import Document
    from simulator.study.sweep import Study


def check_study_step(study: Study, path: str | Path, doc: Document | None = None) -> None:
    """The study's step scenario is good (`check_step_scenario`) and every variant's policy
    can run over it (the error points at the study's `policy.kind`, or at the axis that sets
    the variants' policies).

    Args:
        doc: the study file as read (read again when not given), for the line numbers.
    """
    from simulator.config.loader import read_document
    from simulator.scenario.oracle import check_drain, check_step_scenario

    if study.spec.step.from_scenario is None:
        return
    prep = check_step_scenario(study.base_dir / study.spec.step.from_scenario)
    doc = doc or read_document(Path(path))
    _check_job(study, prep, doc)
    base = study.spec.policy
    run = {v.spec.policy.kind: v.spec.policy for v in study.variants}  # the policies the runs use
    if base.kind in run:
        check_drain(prep, [base], path, doc.line_of(("policy", "kind")))
    axes = study.spec.axes
    swept = [i for i, axis in enumerate(axes) if axis.param.split(".")[0] == "policy"]
    swept.sort(key=lambda i: axes[i].param not in ("policy", "policy.kind"))
    for i in swept[:1]:  # the axis that sets the variants' policy kinds (or another policy axis)
        others = [p for k, p in run.items() if k != base.kind]
        check_drain(prep, others, path, doc.line_of(("axes", i, "values")), f"axes.{i}.values")


def _check_job(study: Study, prep: Any, doc: Document) -> None:
    """Raise `InputError` at the study's `job`, or at the axis value that sets it, if a
    variant's job is not the job of the step scenario `prep`: other GPUs, or other
    data-parallel replicas where the scenario's workload says how many it has (a trace
    need not)."""
    n = len(prep.program.rank_gpus)
    dp = int(prep.program.meta.get("dp", 0) or 0)

    def fits(job: Any) -> bool:
        return job.n_gpus == n and (not dp or job.dp_replicas == dp)

    def replicas(k: int) -> str:
        return f"{k:,} data-parallel replica{'' if k == 1 else 's'}"

    def problem(job: Any) -> str:
        runs = f"{n:,} GPUs in {replicas(dp)}" if dp else f"{n:,} GPUs"
        return (
            f"a job of {job.n_gpus:,} GPUs in {replicas(job.dp_replicas)}; the step scenario "
            f"{study.spec.step.from_scenario} runs {runs}: the study's job must be the "
            "scenario's (its step times and checkpoint are that job's)"
        )

    base = study.spec.job
    if not fits(base):
        raise doc.error(problem(base), ("job",))
    for i, axis in enumerate(study.spec.axes):  # each setting of the job alone, on the base
        if axis.param != "job" and not axis.param.startswith("job."):
            continue
        for k, value in enumerate(axis.values):
            try:
                job = base.model_validate(
                    value if axis.param == "job" else {**base.model_dump(), axis.param[4:]: value}
                )
            except ValueError:
                continue  # reported by the study's own checks of its variants
            if not fits(job):
                raise doc.error(problem(job), ("axes", i, "values", k))
    for v in study.variants:  # any other way a variant's job differs
        if not fits(v.spec.job):
            raise doc.error(problem(v.spec.job), ("job",))


def check_study_checkpoints(study: Study) -> None:
    """Refuse a study with constant step costs whose checkpoint interval is far too short
    for its length (`run_core.check_checkpoint_count`): known from the file, so refused by
    `validate`, and by `sweep` before its folder is touched, not by each run.

    Raises:
        SimulationError: naming the variant (a valid study that cannot be simulated).
    """
    from simulator.errors import SimulationError
    from simulator.faults.failure import job_mtbf_s
    from simulator.faults.run_core import check_checkpoint_count, checkpoint_interval
    from simulator.faults.state import CachedOracle
    from simulator.study.sweep import build_oracle

    for v in study.variants:
        spec = v.spec
        if spec.step.from_scenario is not None:
            continue  # its step is simulated first; each run checks it
        oracle = CachedOracle(build_oracle(spec, study.base_dir))
        mtbf_s = job_mtbf_s(spec.all_failures(), spec.job, spec.mtbf_scale, spec.duration_s)
        step_s, _, steps = checkpoint_interval(oracle, spec.job.healthy_state(), spec.policy.build(), mtbf_s)
        try:
            check_checkpoint_count(steps, step_s, spec.duration_s)
        except SimulationError as err:
            labels = ", ".join(f"{k}={val}" for k, val in v.labels.items())
            raise SimulationError(f"{err} (variant {labels})" if labels else str(err)) from None
