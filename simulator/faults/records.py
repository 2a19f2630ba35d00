"""What one run of the run level records: incidents, segments and headline figures.

What is modelled: every second of a run belongs to one phase (compute, checkpoint stall,
restart, elastic rejoin); a segment is one stretch of a phase in one cluster state, and
an incident row is one event (failure, checkpoint, restart, repair, degradation, rejoin).
Both are kept as plain columns and tuples while the run goes (`SegmentLog`, `incident_row`)
and framed once at the end: a policy that checkpoints every few steps records half a
million of each in 54 days.
`summarize` turns the two frames into the headline figures defined in `metrics.py`
(goodput, ETTR, job MTTI, lost work, time per phase).

What is simplified: a segment's steps are fractional and identical (one step time per
segment); the `state` column of a segment is its cluster state's performance key as
stable text (`ClusterState.label`, sets sorted), kept for reading, not for parsing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simulator.faults.state import ClusterState

INCIDENT_COLUMNS = [
    "time_s",  # when it happened (start of the incident)
    "kind",  # failure | checkpoint | restart | repair | degradation | rejoin
    "component_class",  # gpu, hbm, host, ... for failures and degradations
    "component",  # class and index (gpu6, host1, link5)
    "cause",  # failure cause label, degradation kind, checkpoint mode, restart resume point
    "duration_s",  # stall / restart / episode length
    "lost_work_s",  # compute time to redo because of this failure (+ aborted checkpoint stall)
    "gpus",  # GPUs the failure takes out (0: none)
    "hosts",  # hosts removed from the job, as 'h1,h2'
    "interrupted",  # did the failure interrupt the job
    "committed",  # checkpoint: completed and committed (False: cut short by a failure or the run's end)
    "detect_s",
    "queue_s",
    "wait_s",
    "init_s",
    "load_s",
    "load_source",
    "step",  # progress (steps) at the incident
    "resume_step",  # failure: step the job resumes from
    "out_until_s",  # failure: failed hosts unusable by the job until then
]

SEGMENT_COLUMNS = [
    "start_s",
    "end_s",
    "phase",  # compute | checkpoint | restart | rejoin
    "step_time_s",
    "steps",  # steps computed (fractional)
    "steps_kept",  # steps not rolled back by a later failure
    "useful_s",  # steps_kept * step_time_s
    "dp_replicas",
    "gpus_in_use",
    "excluded_replicas",  # replicas not in use, as '3,17'
    "n_stragglers",
    "n_degraded_links",
    "n_down_links",
    "draining",
    "degraded",  # step slower than healthy for a reason other than a drain
    "state",  # the ClusterState's performance key as text (ClusterState.label)
]

#: The run's settings the engine adds to `summarize`'s figures (`RunLevelEngine.result`).
RUN_SETTINGS = (
    "interval_steps",
    "interval_s",
    "checkpoint_cost_s",
    "model_job_mtbf_s",
    "healthy_step_s",
    "oracle_states",
    "min_gpus_allowed",
)


def run_columns() -> list[str]:
    """The columns of a run's summary (a `runs` row): `summarize`'s figures, read off a run
    that recorded nothing, then `RUN_SETTINGS`."""
    empty = summarize(pd.DataFrame(columns=SEGMENT_COLUMNS), pd.DataFrame(columns=INCIDENT_COLUMNS), 1.0, 1.0)
    return [*empty, *RUN_SETTINGS]


@dataclasses.dataclass
class RunLevelResult:
    """What one run produces: incidents, segments and headline figures.

    Attributes:
        incidents: one row per incident (`INCIDENT_COLUMNS`), sorted by time.
        segments: one row per stretch of a phase in one state (`SEGMENT_COLUMNS`).
        summary: headline figures (see `summarize`) plus the run's settings.
        seed: the root of the run's random streams.
        notes: what a reader of the figures must know (e.g. that no checkpoint was due).
    """

    incidents: pd.DataFrame
    segments: pd.DataFrame
    summary: dict[str, float]
    seed: int
    notes: list[str] = dataclasses.field(default_factory=list)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The run's tables by name (`incidents`, `segments`)."""
        return {"incidents": self.incidents, "segments": self.segments}


class SegmentLog:
    """The segments of a run as columns (one list per field), in time order.

    A segment is one stretch of one phase in one cluster state: `start_s`, `end_s` (s),
    `phase` (compute, checkpoint, restart or rejoin), `step_time_s` (duration of one step, 0
    outside compute), `step_from` and `step_to` (progress in steps at its start and end),
    `state` (the `ClusterState`), `gpus_in_use`, `excluded` (replicas left out) and
    `kept_to` (progress up to which its steps are kept: `step_to` until a later failure
    lowers it). Columns rather than one object per segment: a run that checkpoints every few
    steps has half a million segments.
    """

    __slots__ = (
        "start_s",
        "end_s",
        "phase",
        "step_time_s",
        "step_from",
        "step_to",
        "kept_to",
        "gpus_in_use",
        "state",
        "excluded",
        "compute",
    )

    def __init__(self) -> None:
        self.start_s: list[float] = []
        self.end_s: list[float] = []
        self.phase: list[str] = []
        self.step_time_s: list[float] = []
        self.step_from: list[float] = []
        self.step_to: list[float] = []
        self.kept_to: list[float] = []
        self.gpus_in_use: list[int] = []
        self.state: list[ClusterState] = []
        self.excluded: list[frozenset[int]] = []
        self.compute: list[int] = []  # positions of the compute segments

    def __len__(self) -> int:
        return len(self.start_s)

    def add(
        self,
        start_s: float,
        end_s: float,
        phase: str,
        step_time_s: float,
        step_from: float,
        step_to: float,
        state: ClusterState,
        gpus_in_use: int,
        excluded: frozenset[int],
    ) -> None:
        """Append one segment (its steps all kept for now)."""
        if phase == "compute":
            self.compute.append(len(self.start_s))
        self.start_s.append(start_s)
        self.end_s.append(end_s)
        self.phase.append(phase)
        self.step_time_s.append(step_time_s)
        self.step_from.append(step_from)
        self.step_to.append(step_to)
        self.kept_to.append(step_to)
        self.gpus_in_use.append(gpus_in_use)
        self.state.append(state)
        self.excluded.append(excluded)

    def rollback(self, step: float) -> float:
        """Mark computed steps beyond `step` as not kept; the compute time lost, s."""
        lost = 0.0
        kept_to, step_from, step_s = self.kept_to, self.step_from, self.step_time_s
        for i in reversed(self.compute):
            if kept_to[i] <= step:
                break
            old = max(kept_to[i], step_from[i])
            kept_to[i] = step
            lost += (old - max(step, step_from[i])) * step_s[i]
        return lost


@dataclasses.dataclass
class RestartParts:
    """The parts of a restart in flight (all durations in seconds).

    Attributes:
        start_s: when the restart began (the failure).
        resume: where the job resumes from (storage, memory or live).
        detect_s: time to notice the failure.
        queue_s: time queued for replacement hosts.
        wait_s: time waiting for repairs (grows if more hardware fails meanwhile).
        init_s: process and communicator initialization.
        load_s: checkpoint load.
        load_source: where the checkpoint is loaded from ('' for none).
    """

    start_s: float
    resume: str
    detect_s: float
    queue_s: float
    wait_s: float
    init_s: float
    load_s: float
    load_source: str

    @property
    def total_s(self) -> float:
        """Length of the restart as planned, s."""
        return self.detect_s + self.queue_s + self.wait_s + self.init_s + self.load_s

    def elapsed(self, elapsed_s: float) -> RestartParts:
        """The parts as far as they had run `elapsed_s` after the start (they run in order:
        detection, queue, wait, initialization, load), for a restart cut short."""
        left = elapsed_s
        cut: dict[str, float] = {}
        for name in ("detect_s", "queue_s", "wait_s", "init_s", "load_s"):
            cut[name] = min(getattr(self, name), max(0.0, left))
            left -= cut[name]
        return dataclasses.replace(self, **cut)  # type: ignore[arg-type]

    def incident_values(self) -> dict[str, Any]:
        """The restart's parts as incident columns."""
        return {
            "cause": self.resume,
            "detect_s": self.detect_s,
            "queue_s": self.queue_s,
            "wait_s": self.wait_s,
            "init_s": self.init_s,
            "load_s": self.load_s,
            "load_source": self.load_source,
        }


def incident_row(kind: str, time_s: float, **values: Any) -> tuple[Any, ...]:
    """One incident row: every column of `INCIDENT_COLUMNS` in order, defaults overridden by
    `values` (a tuple: a run may record hundreds of thousands, framed at once).

    Args:
        kind: failure, checkpoint, restart, repair, degradation or rejoin.
        time_s: when the incident happened (its start), s.
        **values: the incident's other columns.

    Raises:
        ValueError: a value for a column that `INCIDENT_COLUMNS` does not have.
    """
    row = _BLANK_INCIDENT.copy()
    row["time_s"] = time_s
    row["kind"] = kind
    row.update(values)
    if len(row) != len(INCIDENT_COLUMNS):
        raise ValueError(f"not incident columns: {sorted(set(row) - set(INCIDENT_COLUMNS))}")
    return tuple(row.values())


#: an incident row's defaults (every column; `incident_row` fills in the rest)
_BLANK_INCIDENT: dict[str, Any] = {
    **dict.fromkeys(INCIDENT_COLUMNS),
    "duration_s": 0.0,
    "lost_work_s": 0.0,
    "gpus": 0,
    "interrupted": False,
    "committed": False,
}


def indices_label(indices: Iterable[int]) -> str:
    """Host or replica indices as text, sorted: `'3,12'`."""
    return ",".join(map(str, sorted(indices)))


def segment_frame(segments: SegmentLog, full_dp_replicas: int) -> pd.DataFrame:
    """The segments of a run as a frame of `SEGMENT_COLUMNS`.

    The numeric columns are computed on arrays (the same IEEE operations on the same values
    as one row at a time); the columns that depend on the cluster state or the excluded
    replicas are computed once per distinct object.

    Args:
        segments: the run's segments, in time order.
        full_dp_replicas: the job's data-parallel replicas when nothing is left out (a
            compute segment on fewer is degraded).
    """
    if not len(segments):
        return pd.DataFrame([], columns=SEGMENT_COLUMNS)
    start_s, end_s, phase, step_s, step_from, step_to, kept_to, gpus = (
        np.asarray(c)
        for c in (
            segments.start_s,
            segments.end_s,
            segments.phase,
            segments.step_time_s,
            segments.step_from,
            segments.step_to,
            segments.kept_to,
            segments.gpus_in_use,
        )
    )
    compute = phase == "compute"
    kept = np.where(compute, np.maximum(0.0, np.minimum(kept_to, step_to) - step_from), 0.0)
    states, state_of = _distinct(segments.state)
    per_state = [
        (
            st.dp_replicas,
            len(st.stragglers),
            len(st.degraded_links),
            len(st.down_links),
            st.draining,
            not st.healthy or st.dp_replicas < full_dp_replicas,
            st.performance_key().label(),
        )
        for st in states
    ]
    dp, n_strag, n_deg, n_down, draining, slow, label = (
        np.asarray(c)[state_of] for c in zip(*per_state, strict=True)
    )
    excluded, excluded_of = _distinct(segments.excluded)
    excluded_label = np.asarray([indices_label(x) for x in excluded], dtype=object)[excluded_of]
    return pd.DataFrame(
        {
            "start_s": start_s,
            "end_s": end_s,
            "phase": phase.astype(object),
            "step_time_s": step_s,
            "steps": step_to - step_from,
            "steps_kept": kept,
            "useful_s": kept * step_s,
            "dp_replicas": dp,
            "gpus_in_use": gpus,
            "excluded_replicas": excluded_label,
            "n_stragglers": n_strag,
            "n_degraded_links": n_deg,
            "n_down_links": n_down,
            "draining": draining,
            "degraded": compute & slow,
            "state": label.astype(object),
        },
        columns=SEGMENT_COLUMNS,
    )


def _distinct(objects: list[Any]) -> tuple[list[Any], np.ndarray]:
    """The distinct objects of a list (by identity; the list keeps them alive, so no two
    share an id) and the position of each element's object among them."""
    ids = np.fromiter(map(id, objects), dtype=np.int64, count=len(objects))
    _, first, codes = np.unique(ids, return_index=True, return_inverse=True)
    return [objects[i] for i in first.tolist()], codes


def incident_frame(incidents: Sequence[tuple[Any, ...]]) -> pd.DataFrame:
    """The incident rows of a run (`incident_row`) as a frame of `INCIDENT_COLUMNS`, sorted by
    time (stable)."""
    frame = pd.DataFrame(list(incidents), columns=INCIDENT_COLUMNS)
    return frame.sort_values("time_s", kind="stable").reset_index(drop=True)


def summarize(
    segments: pd.DataFrame, incidents: pd.DataFrame, wall_s: float, healthy_step_s: float
) -> dict[str, float]:
    """Headline figures of one run from its frames (see `metrics.py` for definitions).

    Args:
        segments: the run's segment frame.
        incidents: the run's incident frame.
        wall_s: wall time of the run, s.
        healthy_step_s: step time of the healthy cluster, s.
    """
    phase_s = (segments["end_s"] - segments["start_s"]).groupby(segments["phase"]).sum()
    compute = segments[segments["phase"] == "compute"]
    fail = incidents[(incidents["kind"] == "failure")]
    inter = fail[fail["interrupted"].astype(bool)]
    restarts = incidents[incidents["kind"] == "restart"]
    ckpt = incidents[(incidents["kind"] == "checkpoint") & (incidents["cause"] != "drain")]
    n_int = len(inter)
    useful_s = float(compute["useful_s"].sum())
    compute_s = float(phase_s.get("compute", 0.0))
    steps_kept = float(compute["steps_kept"].sum())
    return {
        "wall_s": wall_s,
        "goodput": steps_kept * healthy_step_s / wall_s,
        "ettr": useful_s / wall_s,
        "steps_kept": steps_kept,
        "useful_s": useful_s,
        "compute_s": compute_s,
        "recompute_s": max(compute_s - useful_s, 0.0),  # a run with no rollback: rounding only
        "checkpoint_s": float(phase_s.get("checkpoint", 0.0)),
        "restart_s": float(phase_s.get("restart", 0.0)),
        "rejoin_s": float(phase_s.get("rejoin", 0.0)),
        "restart_wait_s": float(restarts["wait_s"].fillna(0).astype(float).sum()),
        "degraded_s": float((compute["end_s"] - compute["start_s"])[compute["degraded"]].sum()),
        "failures": float(len(fail)),
        "interruptions": float(n_int),
        "job_mtti_s": wall_s / n_int if n_int else math.inf,
        "lost_work_s": float(inter["lost_work_s"].sum()),
        "lost_work_per_interruption_s": float(inter["lost_work_s"].mean()) if n_int else 0.0,
        "restart_per_interruption_s": float(phase_s.get("restart", 0.0)) / n_int if n_int else 0.0,
        "checkpoints": float(ckpt["committed"].astype(bool).sum()),
        "min_gpus_in_use": float(compute["gpus_in_use"].min()) if len(compute) else math.nan,
    }
