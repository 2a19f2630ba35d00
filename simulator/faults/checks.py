"""Checks of fault inputs against the job and the run they apply to.

A failure, a degradation and a policy each validate alone (types, finite numbers, ranges).
What depends on the job's shape and the run's length is checked here, before anything
runs: that a scheduled failure or degradation names a component the job has and falls
before the run's end, that a
failure takes out no more GPUs than the job has, that an elastic job may shrink to
`min_replicas` (no more than its replicas), that an in-memory snapshot's peer is another
host, that a policy waiting for repairs (`wait_for_repair`, `when_empty: wait_repair`) has
a repair time for every failure that takes GPUs out (none would mean instant repair), and
that the failure and degradation rates fit in a run of the given length (the expected
count, duration × components / MTBF, below the most a run may sample).

`job_problems` returns every problem with the path of the field at fault (as the file
spells it: `("failures", 2, "component")`), for the caller to report against its file as
`file:line: field.path: message`.

What is simplified: the expected counts use the long-run rate (components / mean time
between events), exact for exponential times and a lower bound for Weibull shapes below
1 early in the run; the samplers stop at the same limits whatever the law (a run that
reaches them is reported as unsimulatable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from simulator.faults.degradation import MAX_CHANGES, FlappingLinkSpec
from simulator.faults.failure import MAX_FAILURES, ScheduledFailureSpec
from simulator.faults.state import JobShape

Loc = tuple[str | int, ...]


def job_problems(
    failures: Sequence[Any],
    degradations: Sequence[Any],
    policy: Any,
    job: JobShape,
    duration_s: float,
    mtbf_scale: float = 1.0,
    preset: Sequence[Any] = (),
) -> list[tuple[Loc, str]]:
    """Every problem of the fault inputs for `job` over a run of `duration_s`.

    Args:
        failures: the failure specs the file gives (`failures`, in file order).
        degradations: the degradation specs the file gives (`degradations`).
        policy: the policy spec (None: no run level).
        job: the job's shape.
        duration_s: wall time of the run, s.
        mtbf_scale: multiplies every MTBF.
        preset: failure specs added by a preset (counted in the run's failures, never at fault).

    Returns:
        (field path, message) pairs, in file order.
    """
    out = [*_failure_problems(failures, job), *_degradation_problems(degradations, job, duration_s)]
    out += _late_problems(failures, degradations, duration_s)
    out += _policy_problems(policy, job) + _repair_problems(failures, policy, job)
    expected = [_expected_failures(s, job, duration_s, mtbf_scale) for s in [*preset, *failures]]
    total = sum(expected)
    if total > MAX_FAILURES:
        mine = expected[len(preset) :]
        worst: Loc = ("failures", max(range(len(mine)), key=mine.__getitem__)) if mine else ("preset",)
        out.append(
            (
                worst,
                f"about {total:,.0f} failures expected in a run of {duration_s:g} s, more than the "
                f"{MAX_FAILURES:,} a run may hold: an MTBF far too short for the run",
            )
        )
    return out


def _failure_problems(failures: Sequence[Any], job: JobShape) -> list[tuple[Loc, str]]:
    """Scheduled failures on components the job lacks; blasts larger than the job."""
    out: list[tuple[Loc, str]] = []
    for i, spec in enumerate(failures):
        if spec.blast_gpus is not None and spec.blast_gpus > job.n_gpus:
            out.append(
                (("failures", i, "blast_gpus"), f"{spec.blast_gpus} GPUs is more than the job's {job.n_gpus}")
            )
        if isinstance(spec, ScheduledFailureSpec):
            count = job.count(spec.target)
            index = spec.index()
            if index >= count:
                field = "component" if spec.component is not None else "node"
                out.append((("failures", i, field), _no_such(spec.target, index, count)))
    return out


def _degradation_problems(
    degradations: Sequence[Any], job: JobShape, duration_s: float
) -> list[tuple[Loc, str]]:
    """Scheduled episodes on components the job lacks; more changes than a run may hold."""
    out: list[tuple[Loc, str]] = []
    for j, spec in enumerate(degradations):
        count = job.count(spec.component_class)
        if spec.at_s is not None and spec.component >= count:
            out.append(
                (("degradations", j, "component"), _no_such(spec.component_class, spec.component, count))
            )
        episodes = len(spec.at_s) if spec.at_s is not None else count * duration_s / spec.mtbe_s
        changes = 2 * episodes
        if isinstance(spec, FlappingLinkSpec):
            changes *= math.ceil(min(spec.duration_s, duration_s) / (spec.down_s + spec.up_s))
        if changes > MAX_CHANGES:
            out.append(
                (
                    ("degradations", j),
                    f"about {changes:,.0f} state changes expected in a run of {duration_s:g} s, more "
                    f"than the {MAX_CHANGES:,} a run may hold: episodes or flaps far too frequent",
                )
            )
    return out


def _late_problems(
    failures: Sequence[Any], degradations: Sequence[Any], duration_s: float
) -> list[tuple[Loc, str]]:
    """Scheduled failures and episodes at or after the run's end (the samplers keep times
    before it): they would never happen."""
    out: list[tuple[Loc, str]] = []
    for key, what, specs in (
        ("failures", "a failure", failures),
        ("degradations", "an episode", degradations),
    ):
        for i, spec in enumerate(specs):
            late = [t for t in getattr(spec, "at_s", None) or () if t >= duration_s]
            if late:
                end_h = duration_s / 3600
                message = f"{what} at {late[0] / 3600:g} h is not before the run's end ({end_h:g} h)"
                out.append(((key, i, "at_s"), message + ": it would never happen"))
    return out


def _policy_problems(policy: Any, job: JobShape) -> list[tuple[Loc, str]]:
    """An elastic floor above the job; an in-memory peer that is the host itself."""
    kind = getattr(policy, "kind", None)
    if kind == "elastic" and policy.min_replicas > job.dp_replicas:
        return [
            (
                ("policy", "min_replicas"),
                f"{policy.min_replicas} is more than the job's {job.dp_replicas} data-parallel replicas",
            )
        ]
    if kind == "in_memory" and policy.peer_host_offset % job.n_hosts == 0:
        return [
            (
                ("policy", "peer_host_offset"),
                f"with {job.n_hosts} host(s), an offset of {policy.peer_host_offset} makes every host "
                "its own peer: the in-memory snapshot would not survive its host",
            )
        ]
    return []


def _repair_problems(failures: Sequence[Any], policy: Any, job: JobShape) -> list[tuple[Loc, str]]:
    """A policy that waits for repairs, and a failure source that takes GPUs out without a
    repair time (it would mean instant repair): the first such source, one problem."""
    waits = policy.waits_for_repair() if policy is not None else None
    if waits is None:
        return []
    bare = [
        i
        for i, spec in enumerate(failures)
        if spec.repair is None
        and (spec.blast_gpus if spec.blast_gpus is not None else job.default_blast_gpus(spec.target)) > 0
    ]
    if not bare:
        return []
    more = f" (and {len(bare) - 1} more source(s) like it)" if len(bare) > 1 else ""
    spec = failures[bare[0]]
    return [
        (
            ("failures", bare[0]),
            f"{spec.target} failure {spec.label(bare[0])!r} has no repair_h (or repair){more}, "
            f"but the policy waits for repairs ({waits}): its hardware would be back at once; "
            "give it a repair time",
        )
    ]


def _no_such(component_class: str, index: int, count: int) -> str:
    """The message for a component index the job does not have."""
    if count == 0:
        return f"no {component_class} {index} in this job: it has no {component_class} component"
    return (
        f"no {component_class} {index} in this job: "
        f"its {count} {component_class} component(s) are 0 to {count - 1}"
    )


def _expected_failures(spec: Any, job: JobShape, duration_s: float, mtbf_scale: float) -> float:
    """Expected failures of one spec in the run (long-run rate × duration; scheduled: their count)."""
    if isinstance(spec, ScheduledFailureSpec):
        return float(sum(1 for t in spec.times() if t < duration_s))
    return job.count(spec.target) * duration_s / (spec.mean_ttf_s() * mtbf_scale)
