"""The interface between the run level and the step level: cluster state, job shape, oracle.

The run level advances whole segments of identical training steps. How long one step takes
(and how long a checkpoint write, snapshot or load takes) in a given cluster state is asked
of a `StepOracle`; the step-level engine (flow-level fabric, step simulation) implements it,
and simple stand-ins here (`ConstantOracle`, `ScalingOracle`, `TableOracle`) serve tests and
benchmarks.

`ClusterState` is hashable and frozen so that answers can be cached per state: the
step-level oracle runs one step simulation per distinct state, so the run level must ask
rarely. `CachedOracle` does the caching and asks with `ClusterState.performance_key()`,
which drops the fields that cannot change a step time (failed and spare counts), so a
hot-spare swap never costs a new step simulation.

Naming convention: GPU `i` of the job's allocation is `gpu<i>`; link `j` of the job's
network is `link<j>`; host `h` is `host<h>`. GPUs are laid out host-major (GPU `i` sits on
host `i // gpus_per_node`) and a data-parallel replica is a contiguous block of
`gpus_per_replica` GPUs.

What is simplified: a state records counts and factors, not where in the fabric things
are (a straggler is a GPU name and a slowdown, a degraded link an id and a bandwidth
factor); component counts per class (`JobShape.count`) assume one NIC and one NIC cable
per GPU unless given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal, Protocol, runtime_checkable

from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.errors import SimulationError

LoadSource = Literal["storage", "peer"]

#: Largest job the run level takes: 4,194,304 GPUs, some 40 times the largest training
#: clusters built so far (about 100,000 GPUs); every component is sampled per run.
MAX_JOB_GPUS = 2**22
#: Most components of one class (NICs, links, switches, storage systems) a job may have.
MAX_COMPONENTS = 4 * MAX_JOB_GPUS

COMPONENT_CLASSES = ("gpu", "hbm", "host", "nic", "link", "switch", "storage", "software")


@dataclasses.dataclass(frozen=True)
class ClusterState:
    """What the cluster looks like to one training step (hashable, immutable).

    Attributes:
        dp_replicas: data-parallel replicas in use (the global batch is kept, so fewer
            replicas means more micro-batches per replica and a longer step).
        stragglers: (gpu name, slowdown factor >= 1) of GPUs running slower than normal.
        degraded_links: (link id, bandwidth factor in (0, 1]) of links running below speed.
        down_links: ids of links that are down (the fabric routes around them, if it can).
        failed_gpus: GPUs of the allocation that are failed and not replaced (not in use).
        spare_gpus: GPUs of hot-spare hosts ready to swap in.
        draining: a background checkpoint drain to storage is running (async checkpoints).
    """

    dp_replicas: int
    stragglers: frozenset[tuple[str, float]] = frozenset()
    degraded_links: frozenset[tuple[str, float]] = frozenset()
    down_links: frozenset[str] = frozenset()
    failed_gpus: int = 0
    spare_gpus: int = 0
    draining: bool = False

    def performance_key(self) -> ClusterState:
        """The same state with the fields that cannot change a step time zeroed."""
        if self.failed_gpus == 0 and self.spare_gpus == 0:
            return self
        return dataclasses.replace(self, failed_gpus=0, spare_gpus=0)

    def replace(self, **changes: object) -> ClusterState:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def label(self) -> str:
        """The state as text whose every set is sorted, so the same state reads the same
        whatever the hash seed: `dp_replicas=8 stragglers=gpu3:1.5,gpu9:2 draining`
        (empty sets and a false `draining` left out)."""
        parts = [f"dp_replicas={self.dp_replicas}"]
        for name, pairs in (("stragglers", self.stragglers), ("degraded_links", self.degraded_links)):
            if pairs:
                parts.append(f"{name}=" + ",".join(f"{k}:{v:g}" for k, v in sorted(pairs)))
        if self.down_links:
            parts.append("down_links=" + ",".join(sorted(self.down_links)))
        if self.failed_gpus or self.spare_gpus:
            parts.append(f"failed_gpus={self.failed_gpus} spare_gpus={self.spare_gpus}")
        if self.draining:
            parts.append("draining")
        return " ".join(parts)

    @property
    def healthy(self) -> bool:
        """No straggler, degraded or down link (replica count and drains aside)."""
        return not (self.stragglers or self.degraded_links or self.down_links)


@runtime_checkable
class StepOracle(Protocol):
    """Answers step-level questions for a cluster state (all durations in seconds)."""

    def step_time_s(self, state: ClusterState) -> float:
        """Wall time of one training step (global batch) in `state`."""
        ...

    def checkpoint_write_s(self, state: ClusterState) -> float:
        """Blocking write of a full checkpoint from GPU memory to storage over the network."""
        ...

    def checkpoint_snapshot_s(self, state: ClusterState) -> float:
        """Blocking copy of a full checkpoint to host memory (async / in-memory policies)."""
        ...

    def checkpoint_load_s(self, state: ClusterState, source: LoadSource) -> float:
        """Loading the latest checkpoint after a restart, from storage or from a peer host."""
        ...


class _FixedCheckpoints:
    """Checkpoint answers read from the fields `write_s`, `snapshot_s`, `load_storage_s`
    and `load_peer_s`, whatever the state (mixed into the dataclass oracles below)."""

    write_s: float
    snapshot_s: float
    load_storage_s: float
    load_peer_s: float

    def checkpoint_write_s(self, state: ClusterState) -> float:
        return self.write_s

    def checkpoint_snapshot_s(self, state: ClusterState) -> float:
        return self.snapshot_s

    def checkpoint_load_s(self, state: ClusterState, source: LoadSource) -> float:
        return self.load_storage_s if source == "storage" else self.load_peer_s


@dataclasses.dataclass(frozen=True)
class ConstantOracle(_FixedCheckpoints):
    """The same answers whatever the state (for tests of the run level alone)."""

    step_s: float = 1.0
    write_s: float = 60.0
    snapshot_s: float = 5.0
    load_storage_s: float = 60.0
    load_peer_s: float = 10.0

    def step_time_s(self, state: ClusterState) -> float:
        return self.step_s


@dataclasses.dataclass(frozen=True)
class ScalingOracle(_FixedCheckpoints):
    """A rule-of-thumb stand-in for the step simulation.

    A healthy step is `compute_s + comm_s` (communication assumed exposed). The compute part
    scales with `full_dp_replicas / dp_replicas` (global batch kept) and with the slowest
    straggler (synchronous training waits for it); the communication part scales with
    1 / (smallest link bandwidth factor) and grows by `down_link_penalty` per down link. A
    background drain multiplies the step by `1 + drain_slowdown`.
    """

    full_dp_replicas: int
    compute_s: float = 10.0
    comm_s: float = 2.0
    down_link_penalty: float = 0.05
    drain_slowdown: float = 0.05
    write_s: float = 120.0
    snapshot_s: float = 10.0
    load_storage_s: float = 120.0
    load_peer_s: float = 20.0

    def step_time_s(self, state: ClusterState) -> float:
        straggle = max((f for _, f in state.stragglers), default=1.0)
        bw = min((f for _, f in state.degraded_links), default=1.0)
        compute = self.compute_s * self.full_dp_replicas / state.dp_replicas * straggle
        comm = self.comm_s / bw * (1.0 + self.down_link_penalty * len(state.down_links))
        step = compute + comm
        return step * (1.0 + self.drain_slowdown) if state.draining else step


@dataclasses.dataclass(frozen=True)
class TableOracle:
    """Step times looked up per state (e.g. measured by the step simulation beforehand).

    States missing from `step_times_s` and all checkpoint questions go to `fallback`.
    """

    fallback: StepOracle
    step_times_s: Mapping[ClusterState, float] = dataclasses.field(default_factory=dict)

    def step_time_s(self, state: ClusterState) -> float:
        key = state.performance_key()
        if key in self.step_times_s:
            return self.step_times_s[key]
        return self.fallback.step_time_s(state)

    def checkpoint_write_s(self, state: ClusterState) -> float:
        return self.fallback.checkpoint_write_s(state)

    def checkpoint_snapshot_s(self, state: ClusterState) -> float:
        return self.fallback.checkpoint_snapshot_s(state)

    def checkpoint_load_s(self, state: ClusterState, source: LoadSource) -> float:
        return self.fallback.checkpoint_load_s(state, source)


class CachedOracle:
    """Wraps an oracle and asks it once per distinct (performance key, question)."""

    def __init__(self, inner: StepOracle) -> None:
        self.inner = inner
        self._cache: dict[tuple[str, ClusterState, str], float] = {}
        self.calls = 0

    def _ask(self, question: str, state: ClusterState, source: str = "") -> float:
        """The answer to `question` (step, write, snapshot, load) in `state`, asked once.

        Raises:
            SimulationError: the oracle answered a negative, infinite or NaN time (or a
                zero step time).
        """
        key = (question, state.performance_key(), source)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        self.calls += 1
        s = key[1]
        if question == "step":
            value = float(self.inner.step_time_s(s))
        elif question == "write":
            value = float(self.inner.checkpoint_write_s(s))
        elif question == "snapshot":
            value = float(self.inner.checkpoint_snapshot_s(s))
        else:
            value = float(self.inner.checkpoint_load_s(s, source))  # type: ignore[arg-type]
        if not value >= 0.0 or value == float("inf") or (question == "step" and value == 0.0):
            raise SimulationError(f"step oracle answered {value!r} for {question} in {s}")
        self._cache[key] = value
        return value

    @property
    def distinct_states(self) -> int:
        """Distinct performance states asked about (any question)."""
        return len({k[1] for k in self._cache})

    def step_time_s(self, state: ClusterState) -> float:
        return self._ask("step", state)

    def checkpoint_write_s(self, state: ClusterState) -> float:
        return self._ask("write", state)

    def checkpoint_snapshot_s(self, state: ClusterState) -> float:
        return self._ask("snapshot", state)

    def checkpoint_load_s(self, state: ClusterState, source: LoadSource) -> float:
        return self._ask("load", state, source)


class JobShape(Spec):
    """The training job's footprint: GPUs, hosts, replicas and component counts per class.

    Component counts say how many independent components of each class can fail (failure
    rates in the failure specs are per component). Defaults assume a rail-optimized
    cluster with one NIC and one NIC-to-leaf cable per GPU, `gpus_per_switch` GPUs behind
    each leaf switch, one shared storage system, and software faults counted per GPU
    (each rank is a process that can crash or hang).
    """

    n_gpus: int = Field(gt=0, le=MAX_JOB_GPUS, description="GPUs in the job's allocation (at most 2**22).")
    gpus_per_node: int = Field(8, gt=0, description="GPUs per host (node).")
    gpus_per_replica: int = Field(
        gt=0, description="GPUs in one data-parallel replica (tensor x pipeline x expert size)."
    )
    nics: int | None = Field(
        None, gt=0, le=MAX_COMPONENTS, description="NICs in the job (default: one per GPU)."
    )
    links: int | None = Field(
        None,
        gt=0,
        le=MAX_COMPONENTS,
        description="Network links that can fail (default: one NIC cable per GPU).",
    )
    switches: int | None = Field(
        None,
        gt=0,
        le=MAX_COMPONENTS,
        description="Switches that can fail (default: n_gpus / gpus_per_switch).",
    )
    gpus_per_switch: int = Field(
        64, gt=0, description="GPUs cut off when one switch fails (its blast radius)."
    )
    storage: int = Field(1, ge=0, le=MAX_COMPONENTS, description="Storage systems the job depends on.")

    @model_validator(mode="after")
    def _check_layout(self) -> JobShape:
        """Hosts and replicas must tile the job's GPUs."""
        if self.n_gpus % self.gpus_per_node:
            raise ValueError("n_gpus must be a multiple of gpus_per_node")
        if self.n_gpus % self.gpus_per_replica:
            raise ValueError("n_gpus must be a multiple of gpus_per_replica")
        if self.gpus_per_replica % self.gpus_per_node and self.gpus_per_node % self.gpus_per_replica:
            raise ValueError("gpus_per_replica and gpus_per_node must divide one another")
        return self

    @property
    def n_hosts(self) -> int:
        """Hosts of the allocation."""
        return self.n_gpus // self.gpus_per_node

    @property
    def dp_replicas(self) -> int:
        """Data-parallel replicas of the job."""
        return self.n_gpus // self.gpus_per_replica

    def count(self, component_class: str) -> int:
        """How many components of a class can fail."""
        if component_class in ("gpu", "hbm", "software"):
            return self.n_gpus
        if component_class == "host":
            return self.n_hosts
        if component_class == "nic":
            return self.nics or self.n_gpus
        if component_class == "link":
            return self.links or self.n_gpus
        if component_class == "switch":
            return self.switches or max(1, -(-self.n_gpus // self.gpus_per_switch))
        if component_class == "storage":
            return self.storage
        raise ValueError(f"unknown component class {component_class!r}")

    def default_blast_gpus(self, component_class: str) -> int:
        """GPUs one failed component of a class takes out of service (0: none, job restarts)."""
        if component_class in ("gpu", "hbm"):
            return 1
        if component_class == "host":
            return self.gpus_per_node
        if component_class in ("nic", "link"):
            return max(1, self.n_gpus // self.count(component_class))
        if component_class == "switch":
            return min(self.n_gpus, self.gpus_per_switch)
        return 0  # storage, software: nothing to replace, the job just restarts

    def replicas_of_host(self, host: int) -> range:
        """Data-parallel replicas with at least one GPU on `host`."""
        first = host * self.gpus_per_node // self.gpus_per_replica
        last = ((host + 1) * self.gpus_per_node - 1) // self.gpus_per_replica
        return range(first, last + 1)

    def healthy_state(self) -> ClusterState:
        """The cluster state with every replica in use and nothing degraded."""
        return ClusterState(dp_replicas=self.dp_replicas)
