"""The run-level engine: days of training as segments of identical steps (SimPy).

What is modeled: one training job on a fixed allocation (`JobShape`). The job computes
steps whose duration the step oracle gives for the current `ClusterState`; between
boundaries (next checkpoint, end of a background drain, end of a restart, the run's end) it
advances one whole segment of identical steps in a single SimPy timeout. Injector processes
replay the pre-sampled failure and degradation timelines (one process per source, see
`failure.py` / `degradation.py`) and interrupt the job; the job catches `simpy.Interrupt`
in one place (`_run`), closes the segment in flight and hands a failure to the policy,
which decides where to resume from and what the restart costs. Oracle answers are cached
per state (`CachedOracle`), so the step-level oracle is asked once per distinct state.

Accounting: progress is counted in (fractional) steps. A checkpoint remembers the step it
captured; a failure rolls progress back to the step the policy resumes from, and the
segments that computed the rolled-back steps are marked as not kept. Every second of the
run belongs to one phase: compute, checkpoint (blocking stall), restart (detection,
queue or repair wait, initialization, load) or rejoin (elastic). At the end of the run,
work not yet checkpointed counts as kept (the run ends cleanly).

What is simplified: a checkpoint's duration is fixed when it starts (a state change during
the write does not stretch it); interrupts at the same instant are handled in timeline
order; failures of hardware that is not in use (failed, or excluded by an elastic job) do
not interrupt the job.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd
import simpy

from simulator.errors import SimulationError
from simulator.faults.degradation import DegradationChange, sample_degradations
from simulator.faults.failure import FailureEvent, job_mtbf_s, sample_failures
from simulator.faults.policy import Policy, Recovery
from simulator.faults.state import CachedOracle, ClusterState, JobShape, StepOracle

INCIDENT_COLUMNS = [
    "time_s",  # when it happened (start of the incident)
    "kind",  # failure | checkpoint | restart | repair | degradation | rejoin
    "component_class",  # gpu, hbm, host, ... for failures and degradations
    "component",  # component index / name
    "cause",  # failure cause label, degradation kind, checkpoint mode, restart resume point
    "duration_s",  # stall / restart / episode length
    "lost_work_s",  # compute time to redo because of this failure (+ aborted checkpoint stall)
    "gpus",  # GPUs the failure takes out (0: none)
    "hosts",  # hosts removed from the job, as 'h1,h2'
    "interrupted",  # did the failure interrupt the job
    "committed",  # checkpoint: completed and committed (False: aborted)
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
    "state",  # repr of the ClusterState
]


@dataclasses.dataclass
class RunLevelResult:
    """What one run produces: incidents, segments and headline figures."""

    incidents: pd.DataFrame
    segments: pd.DataFrame
    summary: dict[str, float]
    seed: int

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"incidents": self.incidents, "segments": self.segments}


@dataclasses.dataclass
class _Repair:
    hosts: frozenset[int]


class _Seg:
    __slots__ = (
        "start",
        "end",
        "phase",
        "step_s",
        "step_from",
        "step_to",
        "kept_to",
        "state",
        "gpus",
        "excluded",
    )

    def __init__(self, start, end, phase, step_s, step_from, step_to, state, gpus, excluded):  # type: ignore[no-untyped-def]
        self.start, self.end, self.phase, self.step_s = start, end, phase, step_s
        self.step_from, self.step_to, self.kept_to = step_from, step_to, step_to
        self.state, self.gpus, self.excluded = state, gpus, excluded


class RunLevelEngine:
    """One run of one job under one policy (build, `start()`, then `env.run`)."""

    def __init__(
        self,
        job: JobShape,
        oracle: StepOracle,
        failures: Sequence[Any],
        policy: Any,
        duration_s: float,
        seed: int,
        degradations: Sequence[Any] = (),
        mtbf_scale: float = 1.0,
    ) -> None:
        if not duration_s > 0:
            raise SimulationError("run duration must be > 0")
        if mtbf_scale <= 0:
            raise SimulationError("mtbf_scale must be > 0")
        self.job = job
        self.oracle = oracle if isinstance(oracle, CachedOracle) else CachedOracle(oracle)
        self.policy: Policy = policy if isinstance(policy, Policy) else policy.build()
        self.duration_s = float(duration_s)
        self.seed = seed
        self.failure_specs = list(failures)
        self.failures = sample_failures(self.failure_specs, job, duration_s, seed, mtbf_scale)
        self.degradations = sample_degradations(list(degradations), job, duration_s, seed)
        self.mtbf_s = job_mtbf_s(self.failure_specs, job, mtbf_scale)
        self.env = simpy.Environment()
        self.policy.start(job)

        self.healthy = job.healthy_state()
        self.healthy_step_s = self.oracle.step_time_s(self.healthy)
        if self.policy.mode == "blocking":
            self.delta_s = self.oracle.checkpoint_write_s(self.healthy)
        else:
            self.delta_s = self.oracle.checkpoint_snapshot_s(self.healthy)
        self.interval_steps = self.policy.spec.interval_steps_for(
            self.healthy_step_s, self.delta_s, self.mtbf_s
        )
        self.min_gpus = self.policy.min_gpus(job)

        self.state = self.healthy
        self._answers: dict[str, float] = {}
        self.progress = 0.0
        self.target = float(self.interval_steps)
        self.commit_storage = 0.0  # step captured by the last checkpoint committed to storage
        self.commit_memory: float | None = None  # step of the last in-memory snapshot
        self.snapshot: float | None = None  # step captured by the checkpoint being written
        self.draining: float | None = None  # step captured by the snapshot being drained
        self.drain_end_s = math.inf
        self.snapshots = 0
        self.down_until: dict[int, float] = {}
        self.excluded: frozenset[int] = frozenset()
        self.pending_rejoin = False
        self.phase = "compute"
        self.phase_start = 0.0
        self.phase_end = math.inf
        self.restart_parts: dict[str, Any] = {}
        self._stragglers: dict[str, list[float]] = {}
        self._slow_links: dict[str, list[float]] = {}
        self._down_links: dict[str, int] = {}
        self.segments: list[_Seg] = []
        self._compute_segs: list[_Seg] = []
        self.incidents: list[dict[str, Any]] = []
        self.process: simpy.Process | None = None

    # --- RunView: what policies may ask and do -------------------------------------------

    @property
    def now(self) -> float:
        return float(self.env.now)

    def take_down(self, hosts: frozenset[int], until_s: float) -> None:
        """Keep `hosts` out of the job until `until_s` (their repair)."""
        for h in hosts:
            self.down_until[h] = max(self.down_until.get(h, 0.0), until_s)
        if until_s > self.env.now:
            self.env.process(self._repair_timer(until_s, hosts))

    def down_hosts(self) -> set[int]:
        now = self.env.now
        return {h for h, t in self.down_until.items() if t > now}

    def latest_repair_s(self) -> float:
        return max(self.down_until.values(), default=self.env.now)

    def memory_checkpoint_newer(self) -> bool:
        return self.commit_memory is not None and self.commit_memory > self.commit_storage

    def replica_ready_s(self) -> list[float]:
        """Per replica, when all its hosts are usable again (<= now: usable)."""
        ready = [0.0] * self.job.dp_replicas
        for h, t in self.down_until.items():
            for r in self.job.replicas_of_host(h):
                ready[r] = max(ready[r], t)
        return ready

    # --- processes ---------------------------------------------------------------------

    def start(self) -> simpy.Process:
        """Start the job and the injector processes."""
        self.process = self.env.process(self._run())
        by_source: dict[int, list[FailureEvent]] = {}
        for ev in self.failures:
            by_source.setdefault(ev.source, []).append(ev)
        for events in by_source.values():
            self.env.process(self._inject(events))
        by_deg: dict[int, list[DegradationChange]] = {}
        for ch in self.degradations:
            by_deg.setdefault(ch.source, []).append(ch)
        for changes in by_deg.values():
            self.env.process(self._inject(changes))
        return self.process

    def _inject(self, events: list[Any]):  # type: ignore[no-untyped-def]
        """Replay one source's pre-sampled timeline, interrupting the job at each event."""
        for ev in events:
            delay = ev.time_s - self.env.now
            if delay > 0:
                yield self.env.timeout(delay)
            if self.process is None or not self.process.is_alive:
                return
            self.process.interrupt(ev)

    def _repair_timer(self, until_s: float, hosts: frozenset[int]):  # type: ignore[no-untyped-def]
        yield self.env.timeout(until_s - self.env.now)
        if self.process is not None and self.process.is_alive:
            self.process.interrupt(_Repair(hosts))

    def _run(self):  # type: ignore[no-untyped-def]
        env = self.env
        while env.now < self.duration_s:
            end = min(self._boundary(), self.duration_s)
            try:
                yield env.timeout(max(0.0, end - env.now))
            except simpy.Interrupt as intr:
                self._close()
                self._handle(intr.cause)
                continue
            self._close()
            if env.now >= self.duration_s:
                break
            self._on_boundary()
        self._finish()

    # --- phases ------------------------------------------------------------------------

    def _step_s(self) -> float:
        # answers for the current state are memoized until the state changes
        v = self._answers.get("step")
        if v is None:
            v = self._answers["step"] = self.oracle.step_time_s(self.state)
        return v

    def _ckpt_cost_s(self, question: str) -> float:
        v = self._answers.get(question)
        if v is None:
            if question == "write":
                v = self.oracle.checkpoint_write_s(self.state)
            else:
                v = self.oracle.checkpoint_snapshot_s(self.state)
            self._answers[question] = v
        return v

    def _boundary(self) -> float:
        now = self.env.now
        if self.phase != "compute":
            return self.phase_end
        t = self.drain_end_s if self.draining else math.inf
        if self.progress < self.target:
            t = min(t, now + (self.target - self.progress) * self._step_s())
        elif not self.draining or self.policy.mode == "memory":
            t = now
        return t

    def _gpus_in_use(self) -> int:
        return self.job.n_gpus - len(self.excluded) * self.job.gpus_per_replica

    def _close(self) -> None:
        """Account the phase in flight up to now (one segment row)."""
        now = self.env.now
        dt = now - self.phase_start
        if dt <= 0:
            self.phase_start = now
            return
        if self.phase == "compute":
            step_s = self._step_s()
            new = self.progress + dt / step_s
            if abs(new - self.target) <= 1e-9 * max(1.0, self.target):
                new = self.target
            seg = _Seg(
                self.phase_start,
                now,
                "compute",
                step_s,
                self.progress,
                new,
                self.state,
                self._gpus_in_use(),
                self.excluded,
            )
            self._compute_segs.append(seg)
            self.progress = new
        else:
            seg = _Seg(
                self.phase_start,
                now,
                self.phase,
                0.0,
                self.progress,
                self.progress,
                self.state,
                self._gpus_in_use(),
                self.excluded,
            )
        self.segments.append(seg)
        self.phase_start = now

    def _set_phase(self, phase: str, duration_s: float = math.inf) -> None:
        self.phase = phase
        self.phase_start = self.env.now
        self.phase_end = self.env.now + duration_s

    def _refresh_state(self, **changes: Any) -> None:
        spare = self.policy.spare_hosts(self.env.now) * self.job.gpus_per_node
        failed = sum(1 for t in self.down_until.values() if t > self.env.now) * self.job.gpus_per_node
        new = self.state.replace(spare_gpus=spare, failed_gpus=failed, **changes)
        if new != self.state:
            if new.performance_key() != self.state.performance_key():
                self._answers = {}
            self.state = new

    def _enter_compute(self) -> None:
        if self.pending_rejoin:
            self.pending_rejoin = False
            if self._ready_excluded() != self.excluded:
                self._set_phase("rejoin", self.policy.spec.rejoin_s)
                return
        self._set_phase("compute")

    def _ready_excluded(self) -> frozenset[int]:
        now = self.env.now
        down = {h for h, t in self.down_until.items() if t > now}
        return frozenset(r for h in down for r in self.job.replicas_of_host(h))

    def _on_boundary(self) -> None:
        now = self.env.now
        if self.phase == "compute":
            if self.draining and now >= self.drain_end_s:
                self.commit_storage = self.draining
                self.draining, self.drain_end_s = None, math.inf
                self._refresh_state(draining=False)
                self._incident(
                    "checkpoint", cause="drain", duration_s=0.0, committed=True, step=self.commit_storage
                )
            if self.progress >= self.target and (not self.draining or self.policy.mode == "memory"):
                self._start_checkpoint()
        elif self.phase == "checkpoint":
            self._end_checkpoint()
        elif self.phase == "restart":
            self._end_restart()
        elif self.phase == "rejoin":
            self._incident(
                "rejoin",
                time_s=self.phase_end - self.policy.spec.rejoin_s,
                duration_s=self.policy.spec.rejoin_s,
                step=self.progress,
            )
            self.excluded = self._ready_excluded()
            self._refresh_state(dp_replicas=self.job.dp_replicas - len(self.excluded))
            self._set_phase("compute")

    def _start_checkpoint(self) -> None:
        self.snapshot = self.progress
        stall = self._ckpt_cost_s("write" if self.policy.mode == "blocking" else "snapshot")
        self._ckpt_started = self.env.now
        self._set_phase("checkpoint", stall)

    def _end_checkpoint(self) -> None:
        snap = self.snapshot
        self.snapshot = None
        mode = self.policy.mode
        if mode == "blocking":
            self.commit_storage = snap  # type: ignore[assignment]
        else:
            self.snapshots += 1
            if mode == "memory":
                self.commit_memory = snap
            if not self.draining and (mode == "async" or self.policy.storage_drain_due(self.snapshots)):
                self.draining = snap
                self.drain_end_s = self.env.now + self._ckpt_cost_s("write")
                self._refresh_state(draining=True)
        self._incident(
            "checkpoint",
            time_s=self._ckpt_started,
            cause=mode,
            duration_s=self.env.now - self._ckpt_started,
            committed=True,
            step=snap,
        )
        self.target = self.progress + self.interval_steps
        self._enter_compute()

    def _end_restart(self) -> None:
        parts = self.restart_parts
        self._incident(
            "restart",
            duration_s=self.env.now - parts["start"],
            cause=parts["resume"],
            committed=True,
            detect_s=parts["detect_s"],
            queue_s=parts["queue_s"],
            wait_s=parts["wait_s"],
            init_s=parts["init_s"],
            load_s=parts["load_s"],
            load_source=parts["load_source"],
            step=self.progress,
        )
        self.excluded = self._ready_excluded()
        self._refresh_state(dp_replicas=self.job.dp_replicas - len(self.excluded))
        self.target = self.progress + self.interval_steps
        self.pending_rejoin = False
        self._set_phase("compute")

    # --- interruptions -------------------------------------------------------------------

    def _handle(self, cause: Any) -> None:
        if isinstance(cause, FailureEvent):
            self._fail(cause)
        elif isinstance(cause, DegradationChange):
            self._degrade(cause)
        elif isinstance(cause, _Repair):
            self._repaired()

    def _hosts_of(self, ev: FailureEvent) -> frozenset[int]:
        if ev.n_gpus == 0:
            return frozenset()
        g, n = self.job.gpus_per_node, self.job.n_gpus
        return frozenset(((ev.first_gpu + k) % n) // g for k in range(ev.n_gpus))

    def _fail(self, ev: FailureEvent) -> None:
        now = self.env.now
        hit = self._hosts_of(ev)
        down = self.down_hosts()
        in_use = frozenset(
            h
            for h in hit
            if h not in down and not any(r in self.excluded for r in self.job.replicas_of_host(h))
        )
        if hit and not in_use:
            # hardware of a replica already out of the job: it must be repaired before rejoining
            fresh = frozenset(h for h in hit if h not in down)
            if fresh and ev.repair_s > 0:
                self.take_down(fresh, now + ev.repair_s)
                if self.phase == "restart":
                    # a restart waiting on repairs may now have to wait for this one too
                    need = -(-self.min_gpus // self.job.gpus_per_replica)
                    ready = sorted(self.replica_ready_s())[need - 1]
                    p = self.restart_parts
                    end = ready + p["init_s"] + p["load_s"]
                    if end > self.phase_end:
                        p["wait_s"] += end - self.phase_end
                        self.phase_end = end
            self._incident(
                "failure",
                component_class=ev.component_class,
                component=str(ev.component),
                cause=ev.cause,
                gpus=ev.n_gpus,
                hosts=_hosts_str(hit),
                interrupted=False,
                step=self.progress,
                out_until_s=now,
            )
            return
        step_at_failure = self.progress
        aborted_stall = 0.0
        if self.phase == "checkpoint":
            aborted_stall = now - self._ckpt_started
            self._incident(
                "checkpoint",
                time_s=self._ckpt_started,
                cause=self.policy.mode,
                duration_s=aborted_stall,
                committed=False,
                step=self.snapshot,
            )
            self.snapshot = None
        elif self.phase == "restart":
            p = self.restart_parts
            self._incident(
                "restart",
                time_s=p["start"],
                duration_s=now - p["start"],
                cause=p["resume"],
                committed=False,
                detect_s=p["detect_s"],
                queue_s=p["queue_s"],
                wait_s=p["wait_s"],
                init_s=p["init_s"],
                load_s=p["load_s"],
                load_source=p["load_source"],
                step=self.progress,
            )
        if self.draining:
            self.draining, self.drain_end_s = None, math.inf
        self.pending_rejoin = False

        rec: Recovery = self.policy.recover(self, in_use, ev)
        if rec.resume == "live":
            resume = float(math.floor(self.progress + 1e-9))
        elif rec.resume == "memory" and self.commit_memory is not None:
            resume = self.commit_memory
        else:
            resume = self.commit_storage
        lost = self._rollback(resume) + aborted_stall
        self.progress = resume
        if self.commit_memory is not None and self.commit_memory > resume:
            self.commit_memory = None
        self.commit_storage = min(self.commit_storage, resume)
        r = self.policy.spec.restart
        detect = r.detection_s
        if in_use:
            # the failed hosts stay out until a replacement is in place (after detection and
            # any queueing) or, if the policy keeps them, until their repair
            self.take_down(in_use, now + detect + rec.queue_s)
        # whatever the policy says, the job cannot restart on fewer GPUs than it allows:
        # wait for enough replicas' hosts to come back from repair
        need = -(-self.min_gpus // self.job.gpus_per_replica)
        ready_need = sorted(self.replica_ready_s())[need - 1]
        wait = max(rec.wait_s, ready_need - now - detect - rec.queue_s)
        if wait != rec.wait_s:
            rec = dataclasses.replace(rec, wait_s=wait)
        ready_at = now + detect + rec.queue_s + rec.wait_s
        down_then = {h for h, t in self.down_until.items() if t > ready_at}
        excl = frozenset(x for h in down_then for x in self.job.replicas_of_host(h))
        gpus_after = self.job.n_gpus - len(excl) * self.job.gpus_per_replica
        init = r.init_s(gpus_after, self.job.gpus_per_node)
        self._refresh_state(draining=False)
        load = 0.0 if rec.load is None else self.oracle.checkpoint_load_s(self.state, rec.load)
        total = detect + rec.queue_s + rec.wait_s + init + load
        out_until = now + detect + rec.queue_s + rec.wait_s
        for h in in_use:
            out_until = max(out_until, self.down_until.get(h, 0.0))
        self._incident(
            "failure",
            component_class=ev.component_class,
            component=str(ev.component),
            cause=ev.cause,
            gpus=ev.n_gpus,
            hosts=_hosts_str(in_use),
            interrupted=True,
            lost_work_s=lost,
            step=step_at_failure,
            resume_step=resume,
            out_until_s=out_until,
        )
        if ev.repair_s > 0 and in_use:
            self._incident(
                "repair",
                time_s=now + ev.repair_s,
                component_class=ev.component_class,
                component=str(ev.component),
                cause=ev.cause,
                duration_s=ev.repair_s,
                hosts=_hosts_str(in_use),
            )
        self.excluded = self._ready_excluded()
        self.restart_parts = {
            "start": now,
            "resume": rec.resume,
            "detect_s": detect,
            "queue_s": rec.queue_s,
            "wait_s": rec.wait_s,
            "init_s": init,
            "load_s": load,
            "load_source": rec.load or "",
        }
        self._set_phase("restart", total)

    def _rollback(self, step: float) -> float:
        """Mark computed steps beyond `step` as not kept; return the compute time lost."""
        lost = 0.0
        for seg in reversed(self._compute_segs):
            if seg.kept_to <= step:
                break
            old = max(seg.kept_to, seg.step_from)
            seg.kept_to = step
            lost += (old - max(step, seg.step_from)) * seg.step_s
        return lost

    def _degrade(self, ch: DegradationChange) -> None:
        table = {"straggler": self._stragglers, "degraded_link": self._slow_links}.get(ch.kind)
        if table is not None:
            vals = table.setdefault(ch.component, [])
            if ch.start:
                vals.append(ch.value)
            elif ch.value in vals:
                vals.remove(ch.value)
            if not vals:
                del table[ch.component]
        else:
            n = self._down_links.get(ch.component, 0) + (1 if ch.start else -1)
            if n > 0:
                self._down_links[ch.component] = n
            else:
                self._down_links.pop(ch.component, None)
        self._refresh_state(
            stragglers=frozenset((k, max(v)) for k, v in self._stragglers.items()),
            degraded_links=frozenset((k, min(v)) for k, v in self._slow_links.items()),
            down_links=frozenset(self._down_links),
        )
        if ch.start:
            self._incident(
                "degradation",
                component_class="gpu" if ch.kind == "straggler" else "link",
                component=ch.component,
                cause=ch.kind,
                duration_s=ch.duration_s,
                step=self.progress,
            )

    def _repaired(self) -> None:
        if self.phase == "compute":
            if self._ready_excluded() != self.excluded and self.policy.spec.kind == "elastic":
                self._set_phase("rejoin", self.policy.spec.rejoin_s)
            else:
                self._refresh_state()
        elif self.phase == "checkpoint":
            self.pending_rejoin = self.policy.spec.kind == "elastic"

    # --- records -------------------------------------------------------------------------

    def _incident(self, kind: str, **values: Any) -> None:
        row: dict[str, Any] = {c: None for c in INCIDENT_COLUMNS}
        row.update(
            time_s=self.env.now,
            kind=kind,
            duration_s=0.0,
            lost_work_s=0.0,
            gpus=0,
            interrupted=False,
            committed=False,
        )
        row.update(values)
        self.incidents.append(row)

    def _finish(self) -> None:
        if self.phase == "restart":
            p = self.restart_parts
            self._incident(
                "restart",
                time_s=p["start"],
                duration_s=self.env.now - p["start"],
                cause=p["resume"],
                committed=False,
                detect_s=p["detect_s"],
                queue_s=p["queue_s"],
                wait_s=p["wait_s"],
                init_s=p["init_s"],
                load_s=p["load_s"],
                load_source=p["load_source"],
                step=self.progress,
            )
        self.phase = "done"

    def result(self) -> RunLevelResult:
        segs = self.segments
        healthy_step = self.healthy_step_s
        rows = []
        reprs: dict[int, str] = {}
        for s in segs:
            kept = max(0.0, min(s.kept_to, s.step_to) - s.step_from) if s.phase == "compute" else 0.0
            st: ClusterState = s.state
            rows.append(
                (
                    s.start,
                    s.end,
                    s.phase,
                    s.step_s,
                    s.step_to - s.step_from,
                    kept,
                    kept * s.step_s,
                    st.dp_replicas,
                    s.gpus,
                    ",".join(map(str, sorted(s.excluded))),
                    len(st.stragglers),
                    len(st.degraded_links),
                    len(st.down_links),
                    st.draining,
                    s.phase == "compute" and (not st.healthy or st.dp_replicas < self.job.dp_replicas),
                    reprs.get(id(st)) or reprs.setdefault(id(st), repr(st.performance_key())),
                )
            )
        segments = pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
        incidents = pd.DataFrame(self.incidents, columns=INCIDENT_COLUMNS)
        incidents = incidents.sort_values("time_s", kind="stable").reset_index(drop=True)
        summary = summarize(segments, incidents, self.duration_s, healthy_step)
        summary.update(
            interval_steps=float(self.interval_steps),
            interval_s=self.interval_steps * healthy_step,
            checkpoint_cost_s=self.delta_s,
            model_job_mtbf_s=self.mtbf_s,
            healthy_step_s=healthy_step,
            oracle_states=float(self.oracle.distinct_states),
            min_gpus_allowed=float(self.min_gpus),
        )
        return RunLevelResult(incidents, segments, summary, self.seed)


def _hosts_str(hosts: frozenset[int]) -> str:
    return ",".join(map(str, sorted(hosts)))


def summarize(
    segments: pd.DataFrame, incidents: pd.DataFrame, wall_s: float, healthy_step_s: float
) -> dict[str, float]:
    """Headline figures of one run from its frames (see `metrics.py` for definitions)."""
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
        "recompute_s": compute_s - useful_s,
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


def simulate_run(
    job: JobShape,
    oracle: StepOracle,
    failures: Sequence[Any],
    policy: Any,
    duration_s: float,
    seed: int,
    degradations: Sequence[Any] = (),
    mtbf_scale: float = 1.0,
) -> RunLevelResult:
    """Simulate one run of `duration_s` under `policy` (a policy spec or runtime) and `seed`.

    Args:
        job: the job's shape (GPUs, hosts, replicas, component counts).
        oracle: step-level answers per cluster state (wrapped in a cache unless it is one).
        failures: failure specs (`FailureSpec`s); the timeline depends only on them, the job
            shape, the duration and the seed.
        policy: a `PolicySpec` (or a built `Policy`).
        duration_s: wall time of the run, s.
        seed: root of every random stream.
        degradations: degradation specs (stragglers, degraded and flapping links).
        mtbf_scale: multiplies every MTBF (a study axis).
    """
    engine = RunLevelEngine(job, oracle, failures, policy, duration_s, seed, degradations, mtbf_scale)
    proc = engine.start()
    engine.env.run(until=proc)
    return engine.result()


__all__ = ["RunLevelEngine", "RunLevelResult", "simulate_run", "summarize"]
