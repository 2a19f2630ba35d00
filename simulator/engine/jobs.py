"""Concurrent jobs on one fabric: every job's step program in one SimPy env, flows shared.

What is modelled: each job is a `StepSimulator` of its own program, compute cost and
settings; all of them run in one environment and send their flows into ONE `Fabric`, so
flows of different jobs share every common directed link max-min fairly (leaf uplinks,
spines, storage links). Each job starts at its arrival time and runs its steps back to
back, independently of the others (no barrier between jobs). A `JobFabric` is a job's view
of the shared fabric: it forwards every transfer and books which flows and how many bytes
per link are the job's (a flow carries `size_bytes x multiplicity` on each of its links).

What is simplified: jobs interact only through the fabric (and the stragglers of the cluster
state); compute of one job never slows another's (GPUs are not shared).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import simpy

from simulator.engine.context import run_gc
from simulator.engine.step import StepSimulator
from simulator.network.fabric import Fabric, Flow, FlowBatch


class JobFabric(Fabric):
    """One job's view of a shared fabric (see the module docstring).

    Args:
        shared: the fabric every job's flows go to.
        job: the job's index.
        flow_job: filled with flow id -> job index as the job's flows start.

    Attributes:
        job_link_bytes: bytes of this job's flows per directed link.
    """

    def __init__(self, shared: Fabric, job: int, flow_job: dict[int, int]) -> None:
        super().__init__(shared.env, shared.capacity_bytes_per_s, record_links=False)
        self.shared = shared
        self.job = job
        self.flow_job = flow_job
        self.job_link_bytes = np.zeros(len(shared.capacity_bytes_per_s))

    def transfer(
        self,
        links: np.ndarray,
        mult: np.ndarray,
        size_bytes: float,
        *,
        op_id: str = "",
        label: str = "",
        crossings: float | None = None,
        key: int = -1,
    ) -> simpy.Event:
        """Start the flow on the shared fabric and book it to this job."""
        done = self.shared.transfer(
            links, mult, size_bytes, op_id=op_id, label=label, crossings=crossings, key=key
        )
        if len(links):
            self.job_link_bytes[links] += mult * float(size_bytes)
        done.callbacks.append(self._own)  # type: ignore[union-attr]
        return done

    def transfer_batch(self, batch: FlowBatch, op_id: str = "") -> tuple[simpy.Event, int]:
        """Start the batch on the shared fabric and book its flows to this job."""
        done, first = self.shared.transfer_batch(batch, op_id)
        live = batch.live  # the others move no bytes
        sizes = np.repeat(batch.sizes[live], batch.n_links[live])
        np.add.at(self.job_link_bytes, batch.e_links, batch.e_mult * sizes)  # entry by entry, in order
        self.flow_job.update(dict.fromkeys(range(first, first + len(batch.sizes)), self.job))
        return done, first

    def class_key(self, links: np.ndarray, mult: np.ndarray) -> int:
        """The shared fabric's class key (keys are the shared fabric's)."""
        return self.shared.class_key(links, mult)

    def _own(self, event: simpy.Event) -> None:
        flow = event.value
        if isinstance(flow, Flow):
            self.flow_job[flow.flow_id] = self.job


@dataclass
class ConcurrentRun:
    """Jobs sharing one env and one fabric.

    Attributes:
        fabric: the shared fabric (its flow records and link intervals are everyone's).
        sims: per job, its step simulator (its `fabric` is its `JobFabric`).
        flow_job: flow id -> index of the job that sent it.
    """

    fabric: Fabric
    sims: list[StepSimulator] = field(default_factory=list)
    flow_job: dict[int, int] = field(default_factory=dict)

    def view(self, job: int) -> JobFabric:
        """A new job's view of the shared fabric (pass it to the job's `StepSimulator`)."""
        return JobFabric(self.fabric, job, self.flow_job)

    def run(self, steps: int, delays_s: list[float], on_step: Callable[[int], None] | None = None) -> None:
        """Run every job's `steps` steps, job i starting `delays_s[i]` after now, until all end
        (`on_step` is called with each finished step of the first job)."""
        env = self.fabric.env
        with run_gc():
            procs = [
                sim.start(steps, on_step if i == 0 else None, delay_s=d)
                for i, (sim, d) in enumerate(zip(self.sims, delays_s, strict=True))
            ]
            env.run(until=env.all_of(procs))

    def job_link_bytes(self) -> np.ndarray:
        """Bytes per (job, directed link)."""
        views = [sim.fabric for sim in self.sims]
        return np.array([v.job_link_bytes if isinstance(v, JobFabric) else np.zeros(0) for v in views])
