"""The run-level engine: days of training as segments of identical steps (SimPy).

What is modelled: one training job on a fixed allocation (`JobShape`). The job computes
steps whose duration the step oracle gives for the current `ClusterState`; between
boundaries (next checkpoint, end of a background drain, end of a restart, the run's end) it
advances one whole segment of identical steps in a single SimPy timeout. Injector processes
replay the pre-sampled failure and degradation timelines (one process per source, see
`failure.py` / `degradation.py`) and interrupt the job; the job catches `simpy.Interrupt`
in one place (`_run`), closes the segment in flight and hands the cause on: a failure to
`recovery.py` (the policy decides where to resume from and what the restart costs), a
degradation to `_degrade`, a repair to the rejoin logic. The engine is one object
whose event handlers live by phase: `run_core.RunCore` holds the run's state, what a
policy may see of it (`RunView`) and the primitives every phase uses (close a segment,
switch phase, record an incident); `checkpointing.CheckpointPhases` and
`recovery.FailureRecovery` each add the handlers of one phase family on that core; and
`RunLevelEngine` here joins them with the event loop. They share the core's state by
design: a failure must close whatever checkpoint is in flight. The records are in
`records.py`. Oracle answers are cached per state (`CachedOracle`), so the step-level
oracle is asked once per distinct state.

Accounting: progress is counted in (fractional) steps. A checkpoint remembers the step it
captured; a failure rolls progress back to the step the policy resumes from, and the
segments that computed the rolled-back steps are marked as not kept. Every second of the
run belongs to one phase: compute, checkpoint (blocking stall), restart (detection,
queue or repair wait, initialization, load) or rejoin (elastic). At the end of the run,
work not yet checkpointed counts as kept (the run ends cleanly).

What is simplified: interrupts at the same instant are handled in timeline order;
degradations never interrupt the job, they only change its state (and so its step time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import simpy

from simulator.engine.context import run_gc
from simulator.faults.degradation import DegradationChange
from simulator.faults.failure import FailureEvent
from simulator.faults.records import RUN_SETTINGS, RunLevelResult, incident_frame, segment_frame, summarize
from simulator.faults.recovery import FailureRecovery
from simulator.faults.run_core import HostsRepaired
from simulator.faults.state import JobShape, StepOracle
from simulator.faults.steady import SteadyCycles


class RunLevelEngine(FailureRecovery, SteadyCycles):
    """One run of one job under one policy (build, `start()`, then `env.run`).

    Takes the arguments of `RunCore`; `result()` gives the run's frames and figures.
    """

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

    def _run(self):  # type: ignore[no-untyped-def]
        """Process: the job, from one boundary or interrupt to the next until the run's end."""
        env = self.env
        while env.now < self.duration_s:
            self._fast_forward()
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

    def _fast_forward(self) -> None:
        """Cross the job's boundaries that come strictly before the next event of any other
        process (and before the run's end) without a SimPy event each: the clock moves to the
        time `_run`'s timeout would fire at (`now + max(0, end - now)`, the same arithmetic),
        then the boundary is handled exactly as `_run` handles it. Nothing else can happen in
        between, so the run is the one the event loop gives, bit for bit. Steady snapshot
        cycles go through `_cross_steady`, the same steps in a tighter loop."""
        env, duration_s = self.env, self.duration_s
        boundary, close, on_boundary = self._boundary, self._close, self._on_boundary
        while True:
            if self._steady_applies() and self._cross_steady():
                return
            now = env.now
            end = min(boundary(), duration_s)
            time_s = now + max(0.0, end - now)
            if not (time_s < env.peek() and time_s < duration_s):
                return
            env.advance(time_s)
            close()
            on_boundary()

    def _boundary(self) -> float:
        """When the phase in flight next needs attention, s."""
        now = self.env.now
        if self.phase != "compute":
            return self.phase_end
        t = self.drain_end_s if self.draining else math.inf
        if self.progress < self.target:
            t = min(t, now + (self.target - self.progress) * self._step_s())
        elif not self.draining or self.policy.mode == "memory":
            t = now
        return t

    def _on_boundary(self) -> None:
        """Move on at a boundary: drain done, checkpoint due or over, restart or rejoin over."""
        now = self.env.now
        if self.phase == "compute":
            if self.draining and now >= self.drain_end_s:
                self._finish_drain()
            if self.progress >= self.target and (not self.draining or self.policy.mode == "memory"):
                self._start_checkpoint()
        elif self.phase == "checkpoint":
            self._end_checkpoint()
        elif self.phase == "restart":
            self._end_restart()
        elif self.phase == "rejoin":
            self._end_rejoin()

    def _handle(self, cause: Any) -> None:
        """Dispatch an interrupt: a failure, a degradation change or a repair."""
        if isinstance(cause, FailureEvent):
            self._fail(cause)
        elif isinstance(cause, DegradationChange):
            self._degrade(cause)
        elif isinstance(cause, HostsRepaired):
            self._repaired()

    def _degrade(self, ch: DegradationChange) -> None:
        """Apply a degradation change (straggler, slow link, link down or up) to the state."""
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

    def _finish(self) -> None:
        """The run's end: record a checkpoint or restart still in flight as cut short."""
        if self.phase == "restart":
            self._record_restart(committed=False)
        elif self.phase == "checkpoint":
            self._record_checkpoint_cut()
        self.phase = "done"

    def result(self) -> RunLevelResult:
        """The run's incidents, segments and summary (call after the run)."""
        healthy_step = self.healthy_step_s
        segments = segment_frame(self.segments, self.job.dp_replicas)
        incidents = incident_frame(self.incidents)
        summary = summarize(segments, incidents, self.duration_s, healthy_step)
        settings = (
            math.inf if self.interval_steps is None else float(self.interval_steps),
            math.inf if self.interval_steps is None else self.interval_steps * healthy_step,
            self.delta_s,
            self.mtbf_s,
            healthy_step,
            float(self.oracle.distinct_states),
            float(self.min_gpus),
        )
        summary.update(zip(RUN_SETTINGS, settings, strict=True))
        return RunLevelResult(incidents, segments, summary, self.seed, list(self.notes))


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

    Returns:
        The run's incidents, segments and headline figures.
    """
    engine = RunLevelEngine(job, oracle, failures, policy, duration_s, seed, degradations, mtbf_scale)
    # a run keeps hundreds of thousands of segment and incident records alive: the cyclic
    # collector's passes over them cost as much as the boundaries themselves
    with run_gc():
        proc = engine.start()
        engine.env.run(until=proc)
        return engine.result()


__all__ = ["RunLevelEngine", "simulate_run"]
