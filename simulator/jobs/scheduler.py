"""A cluster over days: jobs arrive, queue, are placed by a scheduler, fail and restart.

What is modelled (an event-driven loop over submits, finishes, failures and repairs):

* Schedulers. `fifo`: jobs start in queue order (priority, then submit time); the head
  blocks the queue until it fits. `backfill`: EASY backfilling (Lifka, "The ANL/IBM SP
  scheduling system", JSSPP 1995): when the head does not fit, it gets a reservation at the
  earliest time enough GPUs free up (from the running jobs' expected ends); a later job may
  start now if it fits and ends before that time or leaves the head's GPUs untouched. Both
  place jobs `packed`. `topology_aware`: backfilling with `leaf_aligned` placement, so that
  a job stays under one leaf group when one can hold it, and shares no spine uplink.
* Progress. A job needs `work_s` of compute (its duration, or steps x its step time from
  the step simulation). Each (re)start costs the policy's initialization time; while it
  runs it checkpoints every `interval_s` of compute at a stall of `checkpoint_s`, so work
  advances at interval / (interval + checkpoint) per second.
* Failures: the failure models of `simulator.faults.failure`, sampled for the whole cluster
  (a GPU index is the GPU's place in server-major order). A failure that takes GPUs out
  takes their servers down; every job with a GPU on them is interrupted: it loses the work
  since its last checkpoint, spends the policy's detection time and goes back to the queue
  (ahead of later submits). A failure with no blast (software) interrupts only the job
  that holds its GPU, if any: a job started on a server holds that server's lowest free GPUs,
  by index, until it ends or is interrupted. A down server is replaced at once from a pool
  of spare servers shared by every job (`spare_servers`; the repaired server rejoins the
  pool), else it is out until repaired.

What is simplified: jobs do not slow each other down here (the fabric interference of
placements is measured at the step level, a scenario with `jobs`); a job's speed is its
step time alone; checkpoints are taken on schedule, not on demand; queueing for replacement
hosts is the cluster queue itself.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from simulator.faults.failure import FailureEvent
from simulator.jobs.placement import ClusterLayout, place_counts

SCHEDULERS = ("fifo", "backfill", "topology_aware")
_REPAIR, _FINISH, _FAILURE, _SUBMIT = 0, 1, 2, 3


@dataclass
class ClusterJob:
    """One job of the cluster run: what it asks for and what happened to it (SI)."""

    name: str
    submit_s: float
    gpus: int
    work_s: float
    interval_s: float = math.inf
    init_s: float = 60.0  # process and communicator start-up at every (re)start
    priority: int = 0
    index: int = 0
    done_s: float = 0.0  # committed (checkpointed or finished) work
    lost_s: float = 0.0
    restarts: int = 0
    first_start_s: float = math.nan
    end_s: float = math.nan
    queued_s: float = 0.0
    allocated_s: float = 0.0
    max_leaf_groups: int = 0
    # while running
    start_s: float = math.nan
    epoch: int = 0
    held: list[tuple[int, int]] = field(default_factory=list)
    slots: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # GPUs held
    queued_at_s: float = math.nan


@dataclass
class ClusterSettings:
    """How the cluster runs: scheduler, run length, restart and checkpoint costs, spares."""

    scheduler: str = "backfill"
    duration_s: float = 7 * 86400.0
    detection_s: float = 600.0
    checkpoint_s: float = 60.0
    spare_servers: int = 0


class ClusterRun:
    """The event loop of a cluster run (see the module docstring).

    Args:
        layout: servers and leaf groups of the cluster.
        jobs: the jobs, in any order.
        failures: the sampled failures of the cluster, sorted by time.
        settings: scheduler and costs.
    """

    def __init__(
        self,
        layout: ClusterLayout,
        jobs: list[ClusterJob],
        failures: list[FailureEvent],
        settings: ClusterSettings,
    ) -> None:
        if settings.scheduler not in SCHEDULERS:
            raise ValueError(f"unknown scheduler {settings.scheduler!r}; expected one of {SCHEDULERS}")
        self.layout = layout
        self.jobs = jobs
        self.s = settings
        self.gpn = layout.gpus_per_server
        self.free = self.gpn.copy()
        self.down = np.zeros(len(self.gpn), dtype=bool)
        self.spares = settings.spare_servers
        self.gpu_start = np.concatenate([[0], np.cumsum(self.gpn)])
        self.owner = np.full(int(self.gpu_start[-1]), -1, dtype=np.int64)  # job index per GPU
        self.queue: list[ClusterJob] = []
        self.running: dict[int, ClusterJob] = {}
        self.now = 0.0
        self._events: list[tuple[float, int, int, int, int]] = []
        self._seq = 0
        self.occupancy: list[tuple[float, int, int, int, int]] = []
        self.incidents: list[dict[str, object]] = []
        for j, job in enumerate(jobs):
            job.index = j
            self._push(job.submit_s, _SUBMIT, j)
        for k, ev in enumerate(failures):
            self._push(ev.time_s, _FAILURE, k)
        self.failures = failures
        self.placement = "leaf_aligned" if settings.scheduler == "topology_aware" else "packed"

    def _push(self, t: float, kind: int, a: int, b: int = 0) -> None:
        heapq.heappush(self._events, (t, kind, self._seq, a, b))
        self._seq += 1

    # -- progress ------------------------------------------------------------------
    def _rate(self, job: ClusterJob) -> float:
        return (
            job.interval_s / (job.interval_s + self.s.checkpoint_s) if math.isfinite(job.interval_s) else 1.0
        )

    def _expected_end(self, job: ClusterJob, start_s: float) -> float:
        return start_s + job.init_s + (job.work_s - job.done_s) / self._rate(job)

    def _start(self, job: ClusterJob, counts: list[tuple[int, int]]) -> None:
        slots = []
        for i, k in counts:
            self.free[i] -= k
            lo = int(self.gpu_start[i])
            slots.append(lo + np.flatnonzero(self.owner[lo : int(self.gpu_start[i + 1])] < 0)[:k])
        job.slots = np.concatenate(slots) if slots else np.zeros(0, dtype=np.int64)
        self.owner[job.slots] = job.index
        job.held = counts
        job.start_s = self.now
        if math.isnan(job.first_start_s):
            job.first_start_s = self.now
        job.queued_s += self.now - job.queued_at_s
        groups = len({int(self.layout.group[i]) for i, _ in counts})
        job.max_leaf_groups = max(job.max_leaf_groups, groups)
        job.epoch += 1
        self.running[job.index] = job
        self._push(self._expected_end(job, self.now), _FINISH, job.index, job.epoch)

    def _release(self, job: ClusterJob) -> None:
        for i, k in job.held:
            if not self.down[i]:
                self.free[i] += k
        job.held = []
        self.owner[job.slots] = -1
        job.slots = np.zeros(0, dtype=np.int64)
        job.allocated_s += self.now - job.start_s
        del self.running[job.index]

    def _interrupt(self, job: ClusterJob, cause: str) -> None:
        """The job loses the work since its last checkpoint and goes back to the queue."""
        useful = max(0.0, (self.now - job.start_s - job.init_s)) * self._rate(job)
        useful = min(useful, job.work_s - job.done_s)
        kept = math.floor(useful / job.interval_s) * job.interval_s if math.isfinite(job.interval_s) else 0.0
        job.done_s += kept
        job.lost_s += useful - kept
        job.restarts += 1
        self._release(job)
        self.incidents.append(
            {"time_s": self.now, "job": job.name, "cause": cause, "lost_work_s": useful - kept}
        )
        job.queued_at_s = self.now + self.s.detection_s
        self._push(job.queued_at_s, _SUBMIT, job.index, 1)

    # -- scheduling ----------------------------------------------------------------
    def _try(self, job: ClusterJob) -> list[tuple[int, int]] | None:
        return place_counts(self.layout, self.placement, job.gpus, self.free)

    def _shadow(self, head: ClusterJob) -> tuple[float, int]:
        """When the head could start (running jobs ending in order) and the GPUs spare then."""
        free = int(self.free.sum())
        ends = sorted((self._expected_end(j, j.start_s), j.gpus) for j in self.running.values())
        for t, g in ends:
            free += g
            if free >= head.gpus:
                return t, free - head.gpus
        return math.inf, 0

    def _schedule(self) -> None:
        """Start queued jobs in order (priority, then submit time) while they fit (`fifo`: up to
        the first that does not); `backfill` / `topology_aware` then start later jobs that fit
        and end before the head could start (EASY backfilling: `_shadow`).

        Every policy of `place_counts` places a job wherever enough GPUs are free in all, so
        a job is placed only when it is started (placement costs a scan of the servers)."""
        self.queue.sort(key=lambda j: (-j.priority, j.submit_s, j.index))  # a restarted job keeps its place
        waiting: list[ClusterJob] = []
        shadow, extra = math.inf, 0
        free = int(self.free.sum())  # what `place_counts` checks first, kept here per pass
        for k, job in enumerate(self.queue):
            if not waiting:
                counts = self._try(job) if job.gpus <= free else None
                if counts is not None:
                    self._start(job, counts)
                    free = int(self.free.sum())
                    continue
                waiting.append(job)
                if self.s.scheduler == "fifo":
                    waiting += self.queue[k + 1 :]
                    break
                shadow, extra = self._shadow(job)
                continue
            if job.gpus <= free:
                end = self._expected_end(job, self.now)
                if end <= shadow or job.gpus <= extra:
                    counts = self._try(job)
                    if counts is not None:
                        if end > shadow:
                            extra -= job.gpus
                        self._start(job, counts)
                        free = int(self.free.sum())
                        continue
            waiting.append(job)
        self.queue = waiting

    # -- events --------------------------------------------------------------------
    def _failure(self, ev: FailureEvent) -> None:
        n_total = int(self.gpu_start[-1])
        if ev.n_gpus == 0:  # the job on that GPU, if any; the server stays up
            owner = int(self.owner[ev.component % n_total])
            if owner >= 0:
                self._interrupt(self.running[owner], f"{ev.component_class}: {ev.cause}")
            return
        first = ev.first_gpu % n_total
        last = (first + ev.n_gpus - 1) % n_total
        lo = int(np.searchsorted(self.gpu_start, first, side="right") - 1)
        hi = int(np.searchsorted(self.gpu_start, last, side="right") - 1)
        if first + ev.n_gpus <= n_total:
            servers = list(range(lo, hi + 1))
        else:  # the blast runs past the last GPU and on from the first, as the run level's
            servers = sorted({*range(lo, len(self.gpu_start) - 1), *range(hi + 1)})
        hit = {j.index for j in self.running.values() if any(i in servers for i, _ in j.held)}
        for idx in sorted(hit):
            self._interrupt(self.running[idx], f"{ev.component_class}: {ev.cause}")
        for i in servers:
            if self.down[i]:
                continue
            if self.spares > 0:
                self.spares -= 1  # a spare takes the server's place; the repaired one joins the pool
                self._push(self.now + ev.repair_s, _REPAIR, -1)
            else:
                self.down[i] = True
                self.free[i] = 0
                self._push(self.now + ev.repair_s, _REPAIR, i)

    def _record(self) -> None:
        busy = int(sum(j.gpus for j in self.running.values()))
        down = int(self.gpn[self.down].sum())
        self.occupancy.append((self.now, busy, down, len(self.queue), len(self.running)))

    def run(self) -> None:
        """Process every event up to the end of the run."""
        end = self.s.duration_s
        while self._events and self._events[0][0] <= end:
            t, kind, _, a, b = heapq.heappop(self._events)
            self.now = t
            if kind == _SUBMIT:
                job = self.jobs[a]
                if b == 0:
                    job.queued_at_s = t
                self.queue.append(job)
            elif kind == _FINISH:
                job = self.jobs[a]
                if a in self.running and job.epoch == b:
                    job.done_s = job.work_s
                    job.end_s = t
                    self._release(job)
            elif kind == _FAILURE:
                self._failure(self.failures[a])
            elif a < 0:
                self.spares += 1
            else:
                self.down[a] = False
                self.free[a] = self.gpn[a]
            if not self._events or self._events[0][0] > t:
                self._schedule()
                self._record()
        self.now = end
        for job in list(self.running.values()):
            useful = max(0.0, (end - job.start_s - job.init_s)) * self._rate(job)
            job.done_s += min(useful, job.work_s - job.done_s)
            self._release(job)
        for job in self.queue:
            job.queued_s += max(0.0, end - job.queued_at_s)
        self._record()

    # -- results -------------------------------------------------------------------
    def jobs_frame(self) -> pd.DataFrame:
        """One row per job: queueing delay, JCT, goodput, lost work, restarts."""
        rows = []
        for j in self.jobs:
            rows.append(
                {
                    "job": j.name,
                    "gpus": j.gpus,
                    "priority": j.priority,
                    "submit_s": j.submit_s,
                    "first_start_s": j.first_start_s,
                    "end_s": j.end_s,
                    "finished": not math.isnan(j.end_s),
                    "queueing_delay_s": j.first_start_s - j.submit_s,
                    "queued_s": j.queued_s,
                    "jct_s": j.end_s - j.submit_s,
                    "work_s": j.work_s,
                    "work_done_s": j.done_s,
                    "lost_work_s": j.lost_s,
                    "restarts": j.restarts,
                    "allocated_s": j.allocated_s,
                    "goodput": j.done_s / j.allocated_s if j.allocated_s > 0 else math.nan,
                    "checkpoint_interval_s": j.interval_s,
                    "leaf_groups": j.max_leaf_groups,
                }
            )
        return pd.DataFrame.from_records(rows)

    def occupancy_frame(self) -> pd.DataFrame:
        """The cluster's state after each instant with events: busy and down GPUs, queue."""
        df = pd.DataFrame.from_records(
            self.occupancy, columns=["time_s", "busy_gpus", "down_gpus", "queued_jobs", "running_jobs"]
        )
        return df.drop_duplicates("time_s", keep="last").reset_index(drop=True)

    def utilization(self) -> float:
        """Busy GPU-time over the cluster's GPU-time for the run (step-wise occupancy)."""
        occ = self.occupancy_frame()
        t = np.append(occ["time_s"].to_numpy(), self.s.duration_s)
        busy = occ["busy_gpus"].to_numpy(dtype=float)
        return float((busy * np.diff(t)).sum() / (self.gpu_start[-1] * self.s.duration_s))
