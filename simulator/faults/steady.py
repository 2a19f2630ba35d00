"""Steady snapshot cycles of the run level, crossed in one tight loop.

What is modelled: between two events of the other processes, a job under an `async` or
`memory` policy repeats the same cycle (compute to the checkpoint target, snapshot stall,
compute while the snapshot drains, drain done). `SteadyCycles._cross_steady` crosses these
boundaries with fewer calls per boundary (segments kept as one tuple each and added to the
log's columns when the loop ends, checkpoint incident rows filled into a template, the
draining on/off transition memoized): the same IEEE operations on the same values, in the
same order, as `_boundary`, `_close` and `_on_boundary` (clock:
`now + max(0, end - now)`; progress: `progress + dt / step_s`, snapped to the target), so
frames and summary are identical to the general loop's, bit for bit.

What is simplified: nothing is modelled differently; the loop hands back to the general one
as soon as the run leaves the cycle (a rejoin pending, a phase other than compute or
checkpoint), and is not used when the cluster state could change for other reasons in
between (a spare pool, a host back from repair before the next event).
"""

from __future__ import annotations

import math
from typing import Any

from simulator.faults.checkpointing import CheckpointPhases
from simulator.faults.policy import Policy
from simulator.faults.records import INCIDENT_COLUMNS, incident_row

_TIME, _DURATION, _STEP = (INCIDENT_COLUMNS.index(c) for c in ("time_s", "duration_s", "step"))


def _checkpoint_row(template: list[Any], time_s: float, duration_s: float, step: Any) -> tuple[Any, ...]:
    """`incident_row` of a checkpoint from the row of its kind and cause (same values, same
    order), with its time, duration and step."""
    row = template.copy()
    row[_TIME], row[_DURATION], row[_STEP] = time_s, duration_s, step
    return tuple(row)


class SteadyCycles(CheckpointPhases):
    """The tight loop over the steady snapshot cycles (see the module docstring)."""

    def _steady_applies(self) -> bool:
        """Whether the run is in a steady snapshot cycle the tight loop may cross."""
        if self.policy.mode not in ("async", "memory") or self.pending_rejoin:
            return False
        if self.phase not in ("compute", "checkpoint") or self.interval_steps is None:
            return False
        if type(self.policy).spare_hosts is not Policy.spare_hosts:
            return False
        self._out_now()  # hosts already back are dropped, as `_refresh_state` would
        return self._out_soonest >= self.env.peek()

    def _steady_transition(self, cache: dict[tuple[int, bool], tuple[Any, Any]], draining: bool) -> None:
        """`_refresh_state(draining=...)`, memoized for the loop (spare and failed GPUs do
        not change in it, so the transition depends only on the state and the flag)."""
        key = (id(self.state), draining)
        hit = cache.get(key)
        if hit is None:
            before = self.state
            self._refresh_state(draining=draining)
            cache[(id(before), draining)] = (self.state, self._answers)
        else:
            self.state, self._answers = hit

    def _cross_steady(self) -> bool:
        """Cross the steady cycle's boundaries before the next event of any other process.

        Returns:
            True when the next boundary is not before the next event or the run's end (the
            event loop takes over), False when the run left the cycle (the general loop
            takes over).
        """
        rows: list[tuple[Any, ...]] = []  # segments, added to the log when the loop ends
        try:
            return self._steady_loop(rows)
        finally:
            segs, n = self.segments, len(rows)
            if n:
                start = len(segs.start_s)
                segs.compute.extend(start + i for i, row in enumerate(rows) if row[2] == "compute")
                cols: tuple[list[Any], ...] = (
                    segs.start_s,
                    segs.end_s,
                    segs.phase,
                    segs.step_time_s,
                    segs.step_from,
                    segs.step_to,
                )
                for col, values in zip(cols, zip(*rows, strict=True), strict=False):
                    col.extend(values)
                segs.kept_to.extend(row[5] for row in rows)
                segs.gpus_in_use.extend([self._gpus_in_use()] * n)
                segs.state.extend(row[6] for row in rows)
                segs.excluded.extend([self.excluded] * n)

    def _steady_loop(self, rows: list[tuple[Any, ...]]) -> bool:
        """The loop of `_cross_steady`, closing segments into `rows`."""
        env, duration_s, mode = self.env, self.duration_s, self.policy.mode
        peek, interval, incidents = env.peek(), self.interval_steps, self.incidents
        cache: dict[tuple[int, bool], tuple[Any, Any]] = {}
        drain_row = list(
            incident_row("checkpoint", 0.0, cause="drain", duration_s=0.0, committed=True, step=0.0)
        )
        snap_row = list(incident_row("checkpoint", 0.0, cause=mode, duration_s=0.0, committed=True, step=0.0))
        close = self._steady_close
        while True:
            now, phase = env.now, self.phase
            if phase == "compute":
                draining, progress, target = self.draining, self.progress, self.target
                t = self.drain_end_s if draining else math.inf
                if progress < target:
                    t = min(t, now + (target - progress) * self._step_s())
                elif not draining or mode == "memory":
                    t = now
            elif phase == "checkpoint":
                t = self.phase_end
            else:
                return False
            end = min(t, duration_s)
            time_s = now + max(0.0, end - now)
            if not (time_s < peek and time_s < duration_s):
                return True
            env.advance(time_s)
            close(time_s, rows)
            if phase == "compute":
                if self.draining and time_s >= self.drain_end_s:
                    self.commit_storage = self.draining  # type: ignore[assignment]
                    self.draining, self.drain_end_s = None, math.inf
                    self._steady_transition(cache, False)
                    incidents.append(_checkpoint_row(drain_row, time_s, 0.0, self.commit_storage))
                if self.progress >= self.target and (not self.draining or mode == "memory"):
                    self.snapshot = self.progress
                    stall = self._ckpt_cost_s("snapshot")
                    self.checkpoint_started_s = time_s
                    self.phase, self.phase_start, self.phase_end = "checkpoint", time_s, time_s + stall
            else:
                self._steady_end_checkpoint(time_s, cache, interval, snap_row)  # type: ignore[arg-type]

    def _steady_close(self, now: float, rows: list[tuple[Any, ...]]) -> None:
        """`_close` at `now` (the same arithmetic), the segment appended to `rows`."""
        start = self.phase_start
        dt = now - start
        if dt > 0:
            progress = self.progress
            if self.phase == "compute":
                step_s = self._step_s()
                target = self.target
                new = progress + dt / step_s
                if math.isfinite(target) and abs(new - target) <= 1e-9 * max(1.0, target):
                    new = target
                rows.append((start, now, "compute", step_s, progress, new, self.state))
            else:
                rows.append((start, now, self.phase, 0.0, progress, progress, self.state))
                new = progress
            self.progress = new
        self.phase_start = now

    def _steady_end_checkpoint(
        self, now: float, cache: dict[tuple[int, bool], tuple[Any, Any]], interval: int, template: list[Any]
    ) -> None:
        """`_end_checkpoint` of a snapshot at `now` (async or memory mode)."""
        snap = self.snapshot
        self.snapshot = None
        self.snapshots += 1
        mode = self.policy.mode
        if mode == "memory":
            self.commit_memory = snap
        if not self.draining and (mode == "async" or self.policy.storage_drain_due(self.snapshots)):
            self.draining = snap
            self.drain_end_s = now + self._ckpt_cost_s("write")
            self._steady_transition(cache, True)
        started = self.checkpoint_started_s
        self.incidents.append(_checkpoint_row(template, started, now - started, snap))
        self.target = self.progress + interval
        # `_enter_compute` with no rejoin pending (none can be while the loop runs)
        self.phase, self.phase_start, self.phase_end = "compute", now, now + math.inf
