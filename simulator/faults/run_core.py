"""The state of one run of the run level and the primitives every part of its engine uses.

What is modelled: one training job on a fixed allocation (`JobShape`) under one policy.
`RunCore` holds what the run knows at any instant: the phase in flight and its end, the
progress in (fractional) steps and the next checkpoint target, what the last checkpoints
captured (in storage, in host memory, being written, being drained), which hosts are out
of service until when, which data-parallel replicas are left out, and the current
`ClusterState` with the oracle's memoized answers for it. It also records: `_close` turns
the phase in flight up to now into a segment (`SegmentLog`), `_incident` appends an
incident row. It is the `RunView` a policy sees when it recovers the job.

What is simplified: a run is a window of a longer training run, so at its start the job's
latest checkpoint (step 0) is in storage: a restart before the run's first checkpoint
resumes from step 0 and still loads it. Hosts are out of service as a whole (a failure takes down every host
its GPUs sit on) and a data-parallel replica is usable only when all its hosts are; the
oracle's answers are asked again only when the state's performance key changes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import simpy

from simulator.errors import SimulationError
from simulator.faults.degradation import sample_degradations
from simulator.faults.failure import job_mtbf_s, sample_failures
from simulator.faults.formulas import effective_checkpoint_cost_s
from simulator.faults.policy import Policy
from simulator.faults.records import RestartParts, SegmentLog, incident_row
from simulator.faults.state import CachedOracle, ClusterState, JobShape, StepOracle

#: Most checkpoints one run may take (each is a few events and segments; a run of
#: 54 days checkpointing every 10 minutes takes under 8,000).
MAX_CHECKPOINTS = 1_000_000


def checkpoint_interval(
    oracle: StepOracle, healthy: ClusterState, policy: Policy, mtbf_s: float
) -> tuple[float, float, int | None]:
    """(healthy step s, δ s, steps between checkpoints or None for never) of a run.

    δ of Young and Daly is the blocking write, or for a snapshot policy the snapshot stall
    plus the compute its background drain takes from training (see `formulas`); it is asked
    of the oracle only when an interval is computed from it (NaN otherwise).
    """
    step_s = oracle.step_time_s(healthy)
    delta_s = math.nan
    if policy.spec.interval != "fixed" and math.isfinite(mtbf_s):
        write_s = oracle.checkpoint_write_s(healthy)
        if policy.mode == "blocking":
            delta_s = write_s
        else:
            delta_s = effective_checkpoint_cost_s(
                oracle.checkpoint_snapshot_s(healthy),
                write_s,
                step_s,
                oracle.step_time_s(healthy.replace(draining=True)),
                policy.snapshots_per_drain,
            )
    return step_s, delta_s, policy.spec.interval_steps_for(step_s, delta_s, mtbf_s)


def check_checkpoint_count(interval_steps: int | None, step_s: float, duration_s: float) -> None:
    """Refuse a run that would take more than `MAX_CHECKPOINTS` checkpoints.

    Raises:
        SimulationError: the interval is far too short for the run's length.
    """
    if interval_steps is None:
        return
    count = duration_s / (interval_steps * step_s)
    if count > MAX_CHECKPOINTS:
        raise SimulationError(
            f"a checkpoint every {interval_steps} step(s) of {step_s:g} s makes "
            f"about {count:,.0f} checkpoints in {duration_s:g} s, more than the "
            f"{MAX_CHECKPOINTS:,} a run may take: lengthen the checkpoint interval"
        )


class RunClock(simpy.Environment):
    """A SimPy environment whose clock the job may move forward by itself.

    Between two events of the other processes (failure, degradation and repair timelines)
    nothing can interrupt the job, so it crosses its own boundaries (checkpoint due, stall
    over, drain done) without scheduling an event for each: `advance` sets the clock to
    the time the job's timeout would have fired at, computed with the same arithmetic.
    """

    def advance(self, time_s: float) -> None:
        """Move the clock to `time_s`, which must come before every scheduled event.

        Raises:
            SimulationError: `time_s` is in the past or not before the next scheduled event.
        """
        if not self._now <= time_s < self.peek():
            raise SimulationError(f"cannot advance the clock from {self._now} to {time_s}")
        self._now = time_s


@dataclasses.dataclass(frozen=True)
class HostsRepaired:
    """Interrupt cause: `hosts` are back from repair (usable by the job again)."""

    hosts: frozenset[int]


class RunCore:
    """State and primitives of one run of one job under one policy.

    Args:
        job: the job's shape (GPUs, hosts, replicas, component counts).
        oracle: step-level answers per cluster state (wrapped in a cache unless it is one).
        failures: failure specs; their timeline is sampled here, before the run.
        policy: a policy spec (or a built `Policy`).
        duration_s: wall time of the run, s.
        seed: root of every random stream.
        degradations: degradation specs; their timeline is sampled here, before the run.
        mtbf_scale: multiplies every MTBF.

    Raises:
        SimulationError: a duration or MTBF scale that is not positive.
    """

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
        self.mtbf_s = job_mtbf_s(self.failure_specs, job, mtbf_scale, self.duration_s)
        self.env = RunClock()
        self.policy.start(job)

        self.healthy = job.healthy_state()
        self.healthy_step_s, self.delta_s, self.interval_steps = checkpoint_interval(
            self.oracle, self.healthy, self.policy, self.mtbf_s
        )
        check_checkpoint_count(self.interval_steps, self.healthy_step_s, self.duration_s)
        self.notes: list[str] = []
        if self.interval_steps is None:
            self.notes.append(
                f"no failures are modelled, so the {self.policy.spec.interval} checkpoint interval "
                "is unbounded: the run takes no checkpoints and its goodput is the goodput "
                "without checkpointing"
            )
        self.min_gpus = self.policy.min_gpus(job)
        self._init_run_state()

    def _init_run_state(self) -> None:
        """The state at the start of the run: healthy, computing towards the first checkpoint."""
        self.state = self.healthy
        # the oracle's answers per performance key (a state's step, write and snapshot
        # times depend on nothing else); `_answers` is the current state's
        self._answers_by_key: dict[ClusterState, dict[str, float]] = {}
        self._answers = self._answers_by_key.setdefault(self.state.performance_key(), {})
        self.progress = 0.0
        self.target = self._next_target()
        self.commit_storage = 0.0  # step captured by the last checkpoint committed to storage
        self.commit_memory: float | None = None  # step of the last in-memory snapshot
        self.snapshot: float | None = None  # step captured by the checkpoint being written
        self.checkpoint_started_s = 0.0  # when the checkpoint being written began
        self.draining: float | None = None  # step captured by the snapshot being drained
        self.drain_end_s = math.inf
        self.snapshots = 0
        self.down_until: dict[int, float] = {}
        self._transitions: dict[tuple, tuple[ClusterState, bool, dict[str, float]]] = {}  # see _refresh_state
        self._out: dict[int, float] = {}  # the hosts of down_until not yet back (see _out_now)
        self._out_soonest = math.inf  # the earliest return time in _out (no host is back before)
        self.excluded: frozenset[int] = frozenset()
        self.pending_rejoin = False
        self.phase = "compute"
        self.phase_start = 0.0
        self.phase_end = math.inf
        self.restart: RestartParts | None = None
        self._stragglers: dict[str, list[float]] = {}
        self._slow_links: dict[str, list[float]] = {}
        self._down_links: dict[str, int] = {}
        self.segments = SegmentLog()
        self.incidents: list[tuple[Any, ...]] = []  # rows of INCIDENT_COLUMNS (`incident_row`)
        self.process: simpy.Process | None = None

    # --- RunView: what policies may ask and do -------------------------------------------

    @property
    def now(self) -> float:
        """The simulated time, s."""
        return float(self.env.now)

    def take_down(self, hosts: frozenset[int], until_s: float) -> None:
        """Keep `hosts` out of the job until `until_s` (their repair)."""
        for h in hosts:
            self.down_until[h] = self._out[h] = max(self.down_until.get(h, 0.0), until_s)
            self._out_soonest = min(self._out_soonest, self._out[h])
        if until_s > self.env.now:
            self.env.process(self._repair_timer(until_s, hosts))

    def down_hosts(self) -> set[int]:
        """Hosts out of service now."""
        return set(self._out_now())

    def _out_now(self) -> dict[int, float]:
        """The hosts out of service now, with when they come back: `down_until` less the
        hosts already back (dropped for good: the clock only moves forward, and a host taken
        down again is added again)."""
        now = self.env.now
        if now < self._out_soonest:  # nobody is back yet: no scan
            return self._out
        back = [h for h, t in self._out.items() if t <= now]
        for h in back:
            del self._out[h]
        self._out_soonest = min(self._out.values(), default=math.inf)
        return self._out

    def latest_repair_s(self) -> float:
        """When the last host out of service comes back (now if none is out), s."""
        return max(self.down_until.values(), default=self.env.now)

    def memory_checkpoint_newer(self) -> bool:
        """Whether the last in-memory snapshot is newer than the last checkpoint in storage."""
        return self.commit_memory is not None and self.commit_memory > self.commit_storage

    def replica_ready_s(self) -> list[float]:
        """Per replica, when all its hosts are usable again (<= now: usable)."""
        ready = [0.0] * self.job.dp_replicas
        for h, t in self.down_until.items():
            for r in self.job.replicas_of_host(h):
                ready[r] = max(ready[r], t)
        return ready

    # --- primitives ----------------------------------------------------------------------

    def _repair_timer(self, until_s: float, hosts: frozenset[int]):  # type: ignore[no-untyped-def]
        """Process: interrupt the job when `hosts` come back from repair."""
        yield self.env.timeout(until_s - self.env.now)
        if self.process is not None and self.process.is_alive:
            self.process.interrupt(HostsRepaired(hosts))

    def _enough_replicas_ready_s(self) -> float:
        """When enough replicas are usable for the job to compute on its fewest GPUs, s."""
        need = -(-self.min_gpus // self.job.gpus_per_replica)
        return sorted(self.replica_ready_s())[need - 1]

    def _ready_excluded(self) -> frozenset[int]:
        """Replicas with a host out of service now (to leave out of the job)."""
        return frozenset(r for h in self._out_now() for r in self.job.replicas_of_host(h))

    def _restart_in_flight(self) -> RestartParts:
        """The parts of the restart in flight.

        Raises:
            SimulationError: no restart is in flight.
        """
        if self.restart is None:
            raise SimulationError("no restart in flight")
        return self.restart

    def _step_s(self) -> float:
        """Step time in the current state, s (memoized until the state changes)."""
        v = self._answers.get("step")
        if v is None:
            v = self._answers["step"] = self.oracle.step_time_s(self.state)
        return v

    def _ckpt_cost_s(self, question: str) -> float:
        """Checkpoint `write` or `snapshot` time in the current state, s (memoized)."""
        v = self._answers.get(question)
        if v is None:
            if question == "write":
                v = self.oracle.checkpoint_write_s(self.state)
            else:
                v = self.oracle.checkpoint_snapshot_s(self.state)
            self._answers[question] = v
        return v

    def _next_target(self) -> float:
        """Progress (steps) at which the next checkpoint is due (inf: never)."""
        if self.interval_steps is None:
            return math.inf
        return self.progress + self.interval_steps

    def _gpus_in_use(self) -> int:
        """GPUs the job computes on (its allocation less the excluded replicas)."""
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
            if math.isfinite(self.target) and abs(new - self.target) <= 1e-9 * max(1.0, self.target):
                new = self.target
            self.segments.add(
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
            self.progress = new
        else:
            self.segments.add(
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
        self.phase_start = now

    def _set_phase(self, phase: str, duration_s: float = math.inf) -> None:
        """Enter `phase` now, for `duration_s` (inf: until something else ends it)."""
        self.phase = phase
        self.phase_start = self.env.now
        self.phase_end = self.env.now + duration_s

    def _refresh_state(self, **changes: Any) -> None:
        """Update the cluster state (failed and spare GPUs, and `changes`)."""
        spare = self.policy.spare_hosts(self.env.now) * self.job.gpus_per_node
        failed = len(self._out_now()) * self.job.gpus_per_node
        key = (self.state, spare, failed, tuple(changes.items()))
        step = self._transitions.get(key)
        if step is None:
            # the same transition recurs at every drain: computed once per run
            new = self.state.replace(spare_gpus=spare, failed_gpus=failed, **changes)
            answers = self._answers_by_key.setdefault(new.performance_key(), {})
            step = self._transitions[key] = (new, new != self.state, answers)
        new, changed, answers = step
        if changed:
            self._answers = answers
            self.state = new

    def _incident(self, kind: str, time_s: float | None = None, **values: Any) -> None:
        """Record an incident that happened at `time_s` (None: now), with its other columns."""
        self.incidents.append(incident_row(kind, self.env.now if time_s is None else time_s, **values))

    def _record_checkpoint_cut(self) -> None:
        """Record the checkpoint in flight as cut short now (by a failure or the run's end):
        not committed, its stall so far as its duration."""
        self._incident(
            "checkpoint",
            time_s=self.checkpoint_started_s,
            cause=self.policy.mode,
            duration_s=self.env.now - self.checkpoint_started_s,
            committed=False,
            step=self.snapshot,
        )
        self.snapshot = None

    def _record_restart(self, committed: bool) -> None:
        """Record the restart in flight: completed now (`committed`, stamped now) or cut
        short by a failure or the run's end (stamped at its start, with the parts that had
        run by then: the next restart plans its own wait, so no wait is counted twice)."""
        parts = self._restart_in_flight()
        now = self.env.now
        if not committed:
            parts = parts.elapsed(now - parts.start_s)
        self._incident(
            "restart",
            time_s=now if committed else parts.start_s,
            duration_s=now - parts.start_s,
            committed=committed,
            step=self.progress,
            **parts.incident_values(),
        )
