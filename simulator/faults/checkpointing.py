"""Checkpoints of the run level: blocking writes, snapshots and their background drains.

What is modelled: when progress reaches the target the job stops computing for a
checkpoint. With a `blocking` policy the stall is the write to storage, and on completion
the captured step is committed to storage. With `async` and `memory` policies the stall is
a snapshot to host memory; `memory` commits it in host memory (replicated on a peer), and
a snapshot (every one for `async`, every n-th for `memory`) is then drained to storage in
the background while training goes on, the step running slower (the oracle's `draining`
state) until the drain commits it to storage. The next target is one interval of steps
after the progress at the checkpoint's end.

What is simplified: a checkpoint's duration is fixed when it starts (a state change
during the write does not stretch it); an `async` checkpoint waits for the previous drain
to end, while a `memory` snapshot taken during a drain is not drained itself.
"""

from __future__ import annotations

import math

from simulator.faults.run_core import RunCore


class CheckpointPhases(RunCore):
    """The checkpoint phase of a run: start, end, drain to storage, back to compute."""

    def _start_checkpoint(self) -> None:
        """Stop computing for a write (blocking) or a snapshot (async, memory)."""
        self.snapshot = self.progress
        stall = self._ckpt_cost_s("write" if self.policy.mode == "blocking" else "snapshot")
        self.checkpoint_started_s = self.env.now
        self._set_phase("checkpoint", stall)

    def _end_checkpoint(self) -> None:
        """Commit the checkpoint just written, start its drain if due, compute again."""
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
            time_s=self.checkpoint_started_s,
            cause=mode,
            duration_s=self.env.now - self.checkpoint_started_s,
            committed=True,
            step=snap,
        )
        self.target = self._next_target()
        self._enter_compute()

    def _finish_drain(self) -> None:
        """The background drain is done: its snapshot is committed to storage."""
        self.commit_storage = self.draining  # type: ignore[assignment]
        self.draining, self.drain_end_s = None, math.inf
        self._refresh_state(draining=False)
        self._incident("checkpoint", cause="drain", duration_s=0.0, committed=True, step=self.commit_storage)

    def _enter_compute(self) -> None:
        """Compute again, or first rejoin the replicas repaired during the checkpoint."""
        if self.pending_rejoin:
            self.pending_rejoin = False
            if self._ready_excluded() != self.excluded:
                self._set_phase("rejoin", self.policy.spec.rejoin_s)
                return
        self._set_phase("compute")
