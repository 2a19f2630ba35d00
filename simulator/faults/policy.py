"""Fault-tolerance policies: how a job checkpoints and how it recovers from an interruption.

Each policy is a spec (pydantic, tagged on `kind`) that builds a small runtime object the
run-level engine asks two things: how to checkpoint (`mode`: blocking write to storage,
async snapshot + background drain, or in-memory snapshot replicated to a peer host) and,
when a failure interrupts the job, how to recover (`recover` returns a `Recovery`: where
to resume from, where to load the checkpoint from, how long to queue or wait for repair).

Restart cost model (`RestartSpec`), each part an assumption to calibrate:
  detection (a hung collective is noticed when the NCCL watchdog fires; PyTorch's default
  process-group timeout is 10 min) + scheduling / queue for replacement hosts + process and
  communicator initialization, `init_base_s + init_per_node_s·nodes + init_per_log2_gpu_s·
  log2(gpus)` (default: 60 s of launch, imports and model build, plus 20 ms per node for
  communicator set-up, i.e. ~40 s for 2,048 nodes, of the order of ByteDance's MegaScale
  (NSDI 2024), which reports initialization under 30 s for >10,000 GPUs after optimization)
  + checkpoint load (from the step oracle) + recomputation of the lost steps (which the
  engine simulates; it is not a constant).

What is simplified: a policy decides from what `RunView` shows (hosts out of service and
until when, replicas ready, whether an in-memory snapshot is newer than storage), not from
a model of the scheduler; hot spares are whole hosts that return to the pool when the host
they replaced is repaired; an in-memory snapshot survives if no failed host's peer
(`h + peer_host_offset`) is failed or out of service.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Literal, Protocol

from pydantic import ConfigDict, Field, model_validator

from simulator.config.base import Spec
from simulator.faults.failure import FailureEvent
from simulator.faults.formulas import daly_interval_s, young_interval_s
from simulator.faults.state import JobShape
from simulator.units import to_si


class RunView(Protocol):
    """What a policy sees of the run it recovers (the run-level engine provides it)."""

    job: JobShape

    @property
    def now(self) -> float:
        """The simulated time, s."""
        ...

    def take_down(self, hosts: frozenset[int], until_s: float) -> None:
        """Keep `hosts` out of the job until `until_s` (their repair)."""
        ...

    def down_hosts(self) -> set[int]:
        """Hosts out of service now."""
        ...

    def latest_repair_s(self) -> float:
        """When the last host out of service comes back (now if none is out), s."""
        ...

    def memory_checkpoint_newer(self) -> bool:
        """Whether the last in-memory snapshot is newer than the last checkpoint in storage."""
        ...

    def replica_ready_s(self) -> list[float]:
        """Per data-parallel replica, when all its hosts are usable again (<= now: usable)."""
        ...


class RestartSpec(Spec):
    """Costs of getting a job computing again after an interruption (SI seconds)."""

    model_config = ConfigDict(allow_inf_nan=False)

    detection_s: float = Field(
        600.0, ge=0, description="Time to notice the failure, s (NCCL watchdog timeout; YAML: detection_min)."
    )
    queue_s: float = Field(
        600.0, ge=0, description="Scheduling / queue time for replacement hosts, s (YAML: queue_min)."
    )
    init_base_s: float = Field(60.0, ge=0, description="Process launch, imports, model build, s.")
    init_per_node_s: float = Field(0.02, ge=0, description="Communicator set-up per host, s.")
    init_per_log2_gpu_s: float = Field(0.0, ge=0, description="Initialization per doubling of GPUs, s.")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        """Read the YAML's human units (`detection_min`, `queue_min`, ...) as seconds."""
        return to_si(data, "detection_s", "queue_s", "init_base_s")

    def init_s(self, n_gpus: int, gpus_per_node: int) -> float:
        """Process + communicator initialization for a job of `n_gpus`."""
        nodes = max(1, math.ceil(n_gpus / gpus_per_node))
        return (
            self.init_base_s
            + self.init_per_node_s * nodes
            + self.init_per_log2_gpu_s * math.log2(max(n_gpus, 1))
        )


class _PolicyBase(Spec):
    """What every policy spec has: the checkpoint interval and the restart cost model."""

    model_config = ConfigDict(allow_inf_nan=False)

    interval: Literal["fixed", "young", "daly"] = Field(
        "daly",
        description="Checkpoint interval: 'fixed' (interval_s or interval_steps), or 'young' / "
        "'daly' from the measured checkpoint cost and the modeled job MTBF.",
    )
    interval_s: float | None = Field(
        None, gt=0, description="Compute time between checkpoints, s (YAML: interval_min, interval_h)."
    )
    interval_steps: int | None = Field(None, gt=0, description="Steps between checkpoints.")
    restart: RestartSpec = Field(default_factory=RestartSpec, description="Restart cost model.")

    def waits_for_repair(self) -> str | None:
        """The setting that makes the job wait for failed hardware's repair (as the file
        spells it), or None when it never waits for one."""
        return None

    @model_validator(mode="before")
    @classmethod
    def _interval_units(cls, data: Any) -> Any:
        """Read `interval_min` / `interval_h` as seconds; a given interval means 'fixed'."""
        d = to_si(data, "interval_s")
        if isinstance(d, dict) and ("interval_s" in d or "interval_steps" in d):
            d.setdefault("interval", "fixed")
        return d

    @model_validator(mode="after")
    def _check_interval(self) -> _PolicyBase:
        """A fixed interval needs exactly one length; a computed one takes none."""
        fixed = (self.interval_s is not None) + (self.interval_steps is not None)
        if self.interval == "fixed" and fixed != 1:
            raise ValueError("interval 'fixed' needs exactly one of interval_s or interval_steps")
        if self.interval != "fixed" and fixed:
            raise ValueError(
                f"interval '{self.interval}' is computed; drop the interval length given beside it "
                "(interval_s, interval_min, interval_h or interval_steps)"
            )
        return self

    def interval_steps_for(self, step_s: float, delta_s: float, mtbf_s: float) -> int | None:
        """Steps between checkpoints, from the spec, Young or Daly (at least one).

        Returns:
            The interval in steps, or None (never checkpoint) for a Young or Daly interval
            without failures: as M grows without bound so does the optimum interval, and
            the best a run that never fails can do is not to checkpoint at all.
        """
        if self.interval_steps is not None:
            return self.interval_steps
        if self.interval_s is not None:
            seconds = self.interval_s
        elif math.isinf(mtbf_s):
            return None
        elif self.interval == "young":
            seconds = young_interval_s(delta_s, mtbf_s)
        else:
            seconds = daly_interval_s(delta_s, mtbf_s)
        return max(1, round(seconds / step_s))


class CheckpointRestartSpec(_PolicyBase):
    """Blocking checkpoints to storage; on failure restart everything from the last one."""

    kind: Literal["checkpoint_restart"] = Field(description="Policy tag.")
    wait_for_repair: bool = Field(
        False, description="Wait for the failed hosts' repair instead of queueing for replacements."
    )

    def waits_for_repair(self) -> str | None:
        """`wait_for_repair: true`, when set."""
        return "wait_for_repair: true" if self.wait_for_repair else None

    def build(self) -> Policy:
        """The policy's runtime for one run."""
        return CheckpointRestart(self)


class AsyncCheckpointSpec(_PolicyBase):
    """Snapshot to host memory (short stall), then drain to storage while training runs."""

    kind: Literal["async_checkpoint"] = Field(description="Policy tag.")

    def build(self) -> Policy:
        """The policy's runtime for one run."""
        return AsyncCheckpoint(self)


class InMemorySpec(_PolicyBase):
    """Snapshots to host memory replicated on a peer host; storage as the fallback."""

    kind: Literal["in_memory"] = Field(description="Policy tag.")
    storage_every: int = Field(
        10, ge=1, description="Every n-th snapshot is also drained to storage in the background."
    )
    peer_host_offset: int = Field(
        1, ge=1, description="Host h keeps its replica on host h + offset (same switch if small)."
    )

    def build(self) -> Policy:
        """The policy's runtime for one run."""
        return InMemory(self)


class HotSparesSpec(_PolicyBase):
    """Blocking checkpoints; failed hosts are swapped for hot spares without queueing."""

    kind: Literal["hot_spares"] = Field(description="Policy tag.")
    pool_hosts: int = Field(ge=0, description="Spare hosts kept ready; a repaired host returns to the pool.")
    when_empty: Literal["queue", "wait_repair"] = Field(
        "queue",
        description="With no spare left: queue for replacements, or wait for the repair (or for "
        "a spare back from repair, if one comes back first).",
    )

    def waits_for_repair(self) -> str | None:
        """`when_empty: wait_repair`, when set."""
        return "when_empty: wait_repair" if self.when_empty == "wait_repair" else None

    def build(self) -> Policy:
        """The policy's runtime for one run."""
        return HotSpares(self)


class ElasticSpec(_PolicyBase):
    """Drop the data-parallel replicas that lost hardware and go on (global batch kept)."""

    kind: Literal["elastic"] = Field(description="Policy tag.")
    min_replicas: int = Field(1, ge=1, description="Fewest data-parallel replicas allowed to train.")
    resume_from: Literal["replica", "checkpoint"] = Field(
        "replica",
        description="After a hardware loss resume from a surviving replica's live state (lose "
        "only the step in flight) or reload the last checkpoint.",
    )
    rejoin_s: float = Field(
        60.0, ge=0, description="Pause to add a repaired replica back (state copy, re-init), s."
    )

    def build(self) -> Policy:
        """The policy's runtime for one run."""
        return Elastic(self)


PolicySpec = Annotated[
    CheckpointRestartSpec | AsyncCheckpointSpec | InMemorySpec | HotSparesSpec | ElasticSpec,
    Field(discriminator="kind"),
]


@dataclasses.dataclass(frozen=True)
class Recovery:
    """A policy's decision after an interruption.

    Attributes:
        resume: where the job resumes from: the last checkpoint in storage, the last
            in-memory snapshot, or a surviving replica's live state.
        load: where the checkpoint is loaded from (None: nothing to load).
        queue_s: time queued for replacement hosts, s.
        wait_s: time waiting for repairs, s.
    """

    resume: Literal["storage", "memory", "live"]
    load: Literal["storage", "peer"] | None
    queue_s: float = 0.0
    wait_s: float = 0.0


class Policy:
    """Runtime of a policy for one run (holds per-run state such as the spare pool)."""

    mode: Literal["blocking", "async", "memory"] = "blocking"

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    def start(self, job: JobShape) -> None:
        """Reset per-run state."""

    def min_gpus(self, job: JobShape) -> int:
        """Fewest GPUs the job may compute on."""
        return job.n_gpus

    def spare_hosts(self, now_s: float) -> int:
        """Spare hosts ready to swap in at `now_s`."""
        return 0

    def storage_drain_due(self, snapshot_index: int) -> bool:
        """After the n-th (1-based) snapshot, drain it to storage? (memory mode)."""
        return True

    @property
    def snapshots_per_drain(self) -> int:
        """Snapshots per background drain to storage (async and memory modes)."""
        return 1

    def recover(self, run: RunView, hosts: frozenset[int], event: FailureEvent | None) -> Recovery:
        """Decide how the job recovers from a failure.

        Args:
            run: the run as a policy sees it (it may take hosts down until their repair).
            hosts: the failed hosts in use by the job (empty: nothing to replace).
            event: the failure.

        Returns:
            Where to resume and load from, and how long to queue or wait.
        """
        raise NotImplementedError


class CheckpointRestart(Policy):
    """Restart from the last checkpoint in storage on replacement (or repaired) hosts."""

    def recover(self, run: RunView, hosts: frozenset[int], event: FailureEvent | None) -> Recovery:
        r = self.spec.restart
        if not hosts:
            return Recovery("storage", "storage")
        if getattr(self.spec, "wait_for_repair", False) and event is not None:
            run.take_down(hosts, run.now + event.repair_s)
            wait = max(0.0, run.latest_repair_s() - run.now - r.detection_s)
            return Recovery("storage", "storage", wait_s=wait)
        return Recovery("storage", "storage", queue_s=r.queue_s)


class AsyncCheckpoint(CheckpointRestart):
    """Checkpoint-restart whose checkpoints are snapshots drained to storage in the background."""

    mode = "async"


class InMemory(CheckpointRestart):
    """Restart from the peer's in-memory snapshot when it is newer and survived, else storage."""

    mode = "memory"

    def storage_drain_due(self, snapshot_index: int) -> bool:
        """Every `storage_every`-th snapshot is drained to storage."""
        return snapshot_index % self.spec.storage_every == 0

    @property
    def snapshots_per_drain(self) -> int:
        """Every `storage_every`-th snapshot is drained."""
        return int(self.spec.storage_every)

    def recover(self, run: RunView, hosts: frozenset[int], event: FailureEvent | None) -> Recovery:
        base = super().recover(run, hosts, event)
        n_hosts = run.job.n_hosts
        off = self.spec.peer_host_offset
        down = run.down_hosts()
        peers_ok = all(
            ((h + off) % n_hosts) not in hosts and ((h + off) % n_hosts) not in down for h in hosts
        )
        if run.memory_checkpoint_newer() and peers_ok:
            return dataclasses.replace(base, resume="memory", load="peer")
        return base


class HotSpares(Policy):
    """Swap failed hosts for spares from a pool; a spare returns when its host is repaired."""

    def start(self, job: JobShape) -> None:
        """Empty the list of spares out for repair."""
        self._returns: list[float] = []

    def spare_hosts(self, now_s: float) -> int:
        """Spares in the pool at `now_s` (the others replace hosts still in repair)."""
        busy = sum(1 for t in self._returns if t > now_s)
        return max(0, self.spec.pool_hosts - busy)

    def recover(self, run: RunView, hosts: frozenset[int], event: FailureEvent | None) -> Recovery:
        if not hosts:
            return Recovery("storage", "storage")
        r = self.spec.restart
        now = run.now
        self._returns = [t for t in self._returns if t > now]
        available = self.spec.pool_hosts - len(self._returns)
        use = min(len(hosts), max(0, available))
        repair = event.repair_s if event is not None else 0.0
        self._returns.extend([now + repair] * use)
        if use == len(hosts):
            return Recovery("storage", "storage")
        if self.spec.when_empty == "wait_repair":
            back = self._spares_back_before(now + repair, len(hosts) - use)
            run.take_down(frozenset(sorted(hosts)[use:]), back)
            wait = max(0.0, run.latest_repair_s() - now - r.detection_s)
            return Recovery("storage", "storage", wait_s=wait)
        return Recovery("storage", "storage", queue_s=r.queue_s)

    def _spares_back_before(self, repaired_s: float, hosts: int) -> float:
        """When `hosts` failed hosts no spare replaces now can be replaced: each by a spare
        the pool gets back before their repair at `repaired_s` (it then replaces that host
        until `repaired_s`), else by the repaired host itself."""
        early = sorted(t for t in self._returns if t < repaired_s)[:hosts]
        if not early or len(early) < hosts:  # the job waits for the repair: no spare is taken
            return repaired_s
        for t in early:
            self._returns.remove(t)
            self._returns.append(repaired_s)
        return early[-1]


class Elastic(Policy):
    """Leave out the replicas that lost hardware and go on (after a restart) on the others."""

    def min_gpus(self, job: JobShape) -> int:
        """GPUs of `min_replicas` replicas (at most the whole job)."""
        return min(job.n_gpus, self.spec.min_replicas * job.gpus_per_replica)

    def recover(self, run: RunView, hosts: frozenset[int], event: FailureEvent | None) -> Recovery:
        r = self.spec.restart
        if not hosts:
            return Recovery("storage", "storage")
        run.take_down(hosts, run.now + (event.repair_s if event is not None else 0.0))
        ready = sorted(run.replica_ready_s())
        n_rep = run.job.dp_replicas
        active = sum(1 for t in ready if t <= run.now)
        need = min(self.spec.min_replicas, n_rep)
        wait = 0.0
        if active < need:
            wait = max(0.0, ready[need - 1] - run.now - r.detection_s)
        if self.spec.resume_from == "replica" and active > 0:
            return Recovery("live", None, wait_s=wait)
        return Recovery("storage", "storage", wait_s=wait)
