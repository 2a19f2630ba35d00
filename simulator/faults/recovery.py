"""Failures, restarts, repairs and rejoins of the run level.

What is modelled: a failure takes down every host its GPUs sit on. If none of them is in
use by the job (already failed, or in a replica left out) the job goes on: during a
restart the policy replaces that hardware the way it replaced the hardware that began the
restart (from the same queue or spare pool, or kept until its repair if the policy waits
for repairs) and the restart waits for it if it needs it; otherwise (an elastic job
computing without that replica) the hardware is kept out until repaired. Otherwise the
failure interrupts the job: the phase in flight is cut short (an aborted checkpoint's
stall counts as lost work), the policy decides where to resume from (last checkpoint in
storage, in-memory snapshot, or a surviving replica's live state) and what the restart
costs, progress rolls back to the resume step (the segments that computed the
rolled-back steps are marked as not kept), and the job restarts: detection, queueing or
waiting for repairs, initialization on the GPUs usable then, and the checkpoint load.
When repaired hardware comes back, an elastic job pauses to rejoin the replicas it left
out.

What is simplified: the job never restarts on fewer GPUs than its policy allows, so it
waits for enough replicas' hosts to come back; failures of hardware that is not in use do
not interrupt the job; the failed hosts stay out until a replacement is in place (after
detection and any queueing) or, if the policy keeps them, until their repair.
"""

from __future__ import annotations

import dataclasses
import math

from simulator.faults.failure import FailureEvent
from simulator.faults.policy import Recovery
from simulator.faults.records import RestartParts, indices_label
from simulator.faults.run_core import RunCore


class FailureRecovery(RunCore):
    """What a run does on a failure, at the end of a restart, and on a repair."""

    def _hosts_of(self, ev: FailureEvent) -> frozenset[int]:
        """Hosts holding the GPUs a failure takes out."""
        if ev.n_gpus == 0:
            return frozenset()
        g, n = self.job.gpus_per_node, self.job.n_gpus
        return frozenset(((ev.first_gpu + k) % n) // g for k in range(ev.n_gpus))

    def _fail(self, ev: FailureEvent) -> None:
        """Handle a failure: out-of-job hardware is only taken down; else the job restarts."""
        hit = self._hosts_of(ev)
        down = self.down_hosts()
        in_use = frozenset(
            h
            for h in hit
            if h not in down and not any(r in self.excluded for r in self.job.replicas_of_host(h))
        )
        if hit and not in_use:
            self._fail_outside_job(ev, hit, down)
            return
        step_at_failure = self.progress
        aborted_stall_s = self._abort_phase_in_flight()
        recovery: Recovery = self.policy.recover(self, in_use, ev)
        resume_step = self._resume_step(recovery)
        lost_work_s = self._rollback(resume_step) + aborted_stall_s
        self.progress = resume_step
        if self.commit_memory is not None and self.commit_memory > resume_step:
            self.commit_memory = None
        self.commit_storage = min(self.commit_storage, resume_step)
        parts = self._plan_restart(in_use, recovery)
        self._record_failure(ev, in_use, step_at_failure, resume_step, lost_work_s, parts)
        self.excluded = self._ready_excluded()
        self.restart = parts
        self._set_phase("restart", parts.total_s)

    def _fail_outside_job(self, ev: FailureEvent, hit: frozenset[int], down: set[int]) -> None:
        """A failure of hardware out of the job: replaced (during a restart) or repaired
        (otherwise) before it is used again."""
        now = self.env.now
        fresh = frozenset(h for h in hit if h not in down)
        if fresh and self.phase == "restart":
            self._replace_during_restart(fresh, ev)
        elif fresh and ev.repair_s > 0:
            self.take_down(fresh, now + ev.repair_s)
        out_until = max((self.down_until.get(h, now) for h in fresh), default=now)
        self._incident(
            "failure",
            component_class=ev.component_class,
            component=f"{ev.component_class}{ev.component}",
            cause=ev.cause,
            gpus=ev.n_gpus,
            hosts=indices_label(hit),
            interrupted=False,
            step=self.progress,
            out_until_s=out_until,
        )

    def _replace_during_restart(self, fresh: frozenset[int], ev: FailureEvent) -> None:
        """Hosts failed during a restart (in replicas it left out) are handled by the policy
        as the failure that began the restart was: replaced from the same queue (or spare
        pool) after detection and any queueing, unless the policy keeps them until their
        repair. The restart waits for them if it needs their replicas."""
        now = self.env.now
        recovery = self.policy.recover(self, fresh, ev)
        replaced = frozenset(h for h in fresh if self.down_until.get(h, 0.0) <= now)
        if replaced:
            self.take_down(replaced, now + self.policy.spec.restart.detection_s + recovery.queue_s)
        parts = self._restart_in_flight()
        end = self._enough_replicas_ready_s() + parts.init_s + parts.load_s
        if end > self.phase_end:
            parts.wait_s += end - self.phase_end
            self.phase_end = end

    def _abort_phase_in_flight(self) -> float:
        """Cut short the checkpoint or restart in flight and any drain; return the aborted
        checkpoint stall, s (lost work)."""
        now = self.env.now
        aborted_stall_s = 0.0
        if self.phase == "checkpoint":
            aborted_stall_s = now - self.checkpoint_started_s
            self._record_checkpoint_cut()
        elif self.phase == "restart":
            self._record_restart(committed=False)
        if self.draining:
            self.draining, self.drain_end_s = None, math.inf
        self.pending_rejoin = False
        return aborted_stall_s

    def _resume_step(self, recovery: Recovery) -> float:
        """The step the job resumes from: live (the last whole step), memory or storage."""
        if recovery.resume == "live":
            return float(math.floor(self.progress + 1e-9))
        if recovery.resume == "memory" and self.commit_memory is not None:
            return self.commit_memory
        return self.commit_storage

    def _rollback(self, step: float) -> float:
        """Mark computed steps beyond `step` as not kept; return the compute time lost, s."""
        return self.segments.rollback(step)

    def _plan_restart(self, in_use: frozenset[int], recovery: Recovery) -> RestartParts:
        """Take the failed hosts out and plan the restart's parts (from now)."""
        now = self.env.now
        r = self.policy.spec.restart
        detect = r.detection_s
        if in_use:
            # the failed hosts stay out until a replacement is in place (after detection and
            # any queueing) or, if the policy keeps them, until their repair
            self.take_down(in_use, now + detect + recovery.queue_s)
        # whatever the policy says, the job cannot restart on fewer GPUs than it allows:
        # wait for enough replicas' hosts to come back from repair
        # (compared as instants: `ready - now - detect - queue` leaves a residue of ~1e-12 s
        # when the replicas are ready just as the queue ends)
        start, ready = now + detect + recovery.queue_s, self._enough_replicas_ready_s()
        wait = max(recovery.wait_s, ready - start if ready > start else 0.0)
        if wait != recovery.wait_s:
            recovery = dataclasses.replace(recovery, wait_s=wait)
        ready_at = now + detect + recovery.queue_s + recovery.wait_s
        down_then = {h for h, t in self.down_until.items() if t > ready_at}
        excl = frozenset(x for h in down_then for x in self.job.replicas_of_host(h))
        gpus_after = self.job.n_gpus - len(excl) * self.job.gpus_per_replica
        init = r.init_s(gpus_after, self.job.gpus_per_node)
        self._refresh_state(draining=False)
        load = 0.0 if recovery.load is None else self.oracle.checkpoint_load_s(self.state, recovery.load)
        return RestartParts(
            start_s=now,
            resume=recovery.resume,
            detect_s=detect,
            queue_s=recovery.queue_s,
            wait_s=recovery.wait_s,
            init_s=init,
            load_s=load,
            load_source=recovery.load or "",
        )

    def _record_failure(
        self,
        ev: FailureEvent,
        in_use: frozenset[int],
        step_at_failure: float,
        resume_step: float,
        lost_work_s: float,
        parts: RestartParts,
    ) -> None:
        """Record an interrupting failure and, if its hardware needs one, its repair."""
        now = self.env.now
        out_until = parts.start_s + parts.detect_s + parts.queue_s + parts.wait_s
        for h in in_use:
            out_until = max(out_until, self.down_until.get(h, 0.0))
        self._incident(
            "failure",
            component_class=ev.component_class,
            component=f"{ev.component_class}{ev.component}",
            cause=ev.cause,
            gpus=ev.n_gpus,
            hosts=indices_label(in_use),
            interrupted=True,
            lost_work_s=lost_work_s,
            step=step_at_failure,
            resume_step=resume_step,
            out_until_s=out_until,
        )
        if ev.repair_s > 0 and in_use:
            self._incident(
                "repair",
                time_s=now + ev.repair_s,
                component_class=ev.component_class,
                component=f"{ev.component_class}{ev.component}",
                cause=ev.cause,
                duration_s=ev.repair_s,
                hosts=indices_label(in_use),
            )

    def _end_restart(self) -> None:
        """The restart is over: compute on the usable replicas towards the next checkpoint."""
        self._record_restart(committed=True)
        self.excluded = self._ready_excluded()
        self._refresh_state(dp_replicas=self.job.dp_replicas - len(self.excluded))
        self.target = self._next_target()
        self.pending_rejoin = False
        self._set_phase("compute")

    def _repaired(self) -> None:
        """Hosts are back from repair: an elastic job rejoins them (after a checkpoint)."""
        if self.phase == "compute":
            if self._ready_excluded() != self.excluded and self.policy.spec.kind == "elastic":
                self._set_phase("rejoin", self.policy.spec.rejoin_s)
            else:
                self._refresh_state()
        elif self.phase == "checkpoint":
            self.pending_rejoin = self.policy.spec.kind == "elastic"

    def _end_rejoin(self) -> None:
        """The rejoin pause is over: compute on every usable replica."""
        self._incident(
            "rejoin",
            time_s=self.phase_end - self.policy.spec.rejoin_s,
            duration_s=self.policy.spec.rejoin_s,
            step=self.progress,
        )
        self.excluded = self._ready_excluded()
        self._refresh_state(dp_replicas=self.job.dp_replicas - len(self.excluded))
        self._set_phase("compute")
