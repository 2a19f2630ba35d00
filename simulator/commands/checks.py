"""Checks a study command makes before any work: that what the study asks of its step
scenario can be answered, so that a request it cannot honour is one line (exit 2) before
anything is simulated or written, not an error part-way through the study.

What is checked: the step scenario itself (`check_step_scenario`), and that every policy
the variants run can run over it: one that drains checkpoints to storage in the
background needs storage nodes in its topology (`simulator.scenario.oracle.check_drain`).
A run-level scenario is checked the same way by `oracle.check_run_level`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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
