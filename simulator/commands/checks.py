"""Checks a command makes before any work: that what a scenario or a study asks of the step
simulation can be answered, so that a request it cannot honour is one line (exit 2) before
anything is simulated or written, not an error part-way through a run.

What is checked: a policy that drains checkpoints to storage in the background
(`async_checkpoint`, `in_memory`) needs storage nodes in the step scenario's topology (the
step during a drain is simulated with the drain's flows to them;
`simulator.scenario.oracle.check_drain`), for a run-level scenario and for every variant
of a study.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulator.config.loader import Document
    from simulator.study.sweep import Study


def check_run_level(prep: Any) -> None:
    """A run-level scenario's policy can run over its step (the error points at its
    `policy.kind`)."""
    sc = prep.scenario
    if sc.spec.policy is not None:
        from simulator.scenario.oracle import check_drain

        check_drain(prep, [sc.spec.policy.kind], sc.path, sc.doc.line_of(("policy", "kind")))


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
    base = study.spec.policy.kind
    run = dict.fromkeys(v.spec.policy.kind for v in study.variants)  # the kinds the runs use
    if base in run:
        check_drain(prep, [base], path, doc.line_of(("policy", "kind")))
    axes = study.spec.axes
    swept = [i for i, axis in enumerate(axes) if axis.param.split(".")[0] == "policy"]
    swept.sort(key=lambda i: axes[i].param not in ("policy", "policy.kind"))
    for i in swept[:1]:  # the axis that sets the variants' policy kinds (or another policy axis)
        kinds = [k for k in run if k != base]
        check_drain(prep, kinds, path, doc.line_of(("axes", i, "values")), f"axes.{i}.values")
