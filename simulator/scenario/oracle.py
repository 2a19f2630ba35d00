"""Step-level answers for the run level: a `StepOracle` backed by the step simulation.

The run level (`simulator.faults`) asks how long a step, a checkpoint write, a snapshot and
a checkpoint load take in a given `ClusterState`. This oracle answers from the scenario's
own cluster, workload and fabric:

* **step time**: a step simulation of the cluster in that state. States that are
  equivalent by symmetry share one simulation: stragglers reduce to the slowest factor
  (a synchronous step waits for the slowest rank, wherever it is), degraded links to
  their count and worst factor, down links to their count. The slowest straggler is
  placed on the first simulated rank; degraded links are the NIC uplinks of the first
  simulated ranks; down links are the first leaf-to-spine uplinks (the fabric routes
  around them), or NIC uplinks where there is no spine.
* **fewer data-parallel replicas** (elastic policies keep the global batch): the step's
  compute grows by full/dp and its communication stays: `step + c·(full/dp - 1)`, with
  `c` the simulated per-rank compute time (weighted mean).
* **a background checkpoint drain** (async policies): the step is simulated with every
  GPU's checkpoint shard streaming to storage at the same time, so the drain contends
  with the training collectives on NICs and switches. The drain's flows never end within
  a step, so their max-min rates are computed once (the drain alone on the fabric) and
  taken off the capacity of the links they cross once the step's collectives are planned
  (their calibrated efficiencies are looked up on the unloaded fabric, as without a
  drain). This equals simulating the drain's flows beside the training flows (one per
  GPU, of unbounded size) as long as the drain's bottlenecks are links no training flow
  crosses, and training flows sharing a link with a drain flow get at least its rate;
  both hold when storage bounds the drain (the catalog's 405B: ~0.12 GB/s per GPU against
  50 GB/s NICs). The first condition is checked: when the drain saturates a link outside
  the storage servers, or the step itself writes checkpoints, the drain runs as flows
  beside the training flows instead (exact, and slower: every training flow's start or
  end then recomputes max-min over one drain flow per GPU). The second condition is
  assumed, not checked: many training flows on a NIC link the drain also crosses could
  each get less than the drain's rate, and the reservation would then give the drain
  more than its max-min share.
* **checkpoint write / load**: flows from every GPU of the job to the storage nodes (round
  robin), each carrying its shard `size / GPUs`, on the fabric alone; the time is the last
  flow's end. Without storage nodes, `size / reliability.storage_gbyte_per_s`.
* **snapshot**: a shard over the GPU-to-host copy bandwidth.
* **load from a peer** (in-memory checkpoints): every GPU of one server fetches its shard
  from the same-rank GPU of the next server, then copies it to HBM.

The checkpoint size is `reliability.checkpoint_gbyte`, else the workload's parameters times
`checkpoint_bytes_per_param` (14: bf16 weights, fp32 master weights, Adam moments).
Answers are cached; the oracle pickles without its prepared run (a worker re-prepares
only if it meets a state the parent did not answer).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from simulator.engine.context import SimContext, run_gc
from simulator.engine.step import StepSimulator
from simulator.errors import InputError, SimulationError
from simulator.faults.state import ClusterState, LoadSource
from simulator.metrics import frames as fr
from simulator.network.cluster import Cluster
from simulator.network.fabric import Fabric, max_min_rates, usage
from simulator.scenario.prepare import prepare, step_simulator
from simulator.scenario.spec import ReliabilitySpec
from simulator.units import factor

log = logging.getLogger(__name__)

# background drain flows are sized to outlast any step
_DRAIN_FOREVER = 1e18


def _arrival_recorder(
    ends_s: list[float], env: simpy.Environment, latency_s: float
) -> Callable[[simpy.Event], None]:
    """A flow-end callback appending when the transfer's last byte arrives (`latency_s` later)."""

    def record(_event: simpy.Event) -> None:
        ends_s.append(env.now + latency_s)

    return record


#: Why the run level cannot price a checkpoint (`checkpoint_bytes`, `check_run_level`).
NO_CHECKPOINT_SIZE = (
    "the run level needs the checkpoint size: set reliability.checkpoint_gbyte "
    "(a trace workload does not say how many parameters the model has)"
)
#: Why it cannot price one written to or loaded from storage without storage nodes.
NO_STORAGE = (
    "the topology has no storage nodes: set reliability.storage_gbyte_per_s "
    "(aggregate storage bandwidth) or add storage to the topology"
)


def checkpoint_bytes(prep: Any, settings: ReliabilitySpec) -> float:
    """Size of one full checkpoint, bytes."""
    if settings.checkpoint_gbyte is not None:
        return settings.checkpoint_gbyte * factor("_gbyte")
    params = prep.program.meta.get("parameters")
    if not params:
        raise prep.scenario.doc.error(NO_CHECKPOINT_SIZE, ("reliability", "checkpoint_gbyte"))
    return float(params) * settings.checkpoint_bytes_per_param


class SimulatedOracle:
    """`StepOracle` answered by the step simulation of a scenario (see module docstring)."""

    def __init__(
        self, prep: Any, healthy_step_s: float | None = None, compute_per_rank_s: float | None = None
    ) -> None:
        self.scenario_path = Path(prep.scenario.path)
        self._prep = prep
        self._cache: dict[tuple, float] = {}
        self.simulations = 0
        self.settings: ReliabilitySpec = prep.scenario.spec.reliability
        self._full_dp = int(prep.program.meta.get("dp", 1) or 1)
        self._compute_s: float | None = compute_per_rank_s
        if healthy_step_s is not None:
            self._cache[("step", 1.0, 1.0, 0, 0, False)] = healthy_step_s

    # -- pickling: answers travel, the prepared run does not --------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_prep"] = None
        return state

    @property
    def prep(self) -> Any:
        if self._prep is None:
            self._prep = prepare(self.scenario_path)
            self.settings = self._prep.scenario.spec.reliability
        return self._prep

    def warm_questions(self, draining: bool = False) -> int:
        """How many questions `warm` answers (for a progress bar)."""
        return 7 if draining and self.prep.cluster.storage else 6

    def warm(
        self, dp_replicas: int, draining: bool = False, on_answer: Callable[[], None] | None = None
    ) -> None:
        """Answer the questions every run asks now, before the oracle is pickled to workers:
        the healthy step, checkpoint write/snapshot/loads, the compute share (for elastic
        shrinking) and, if asked, the step during a checkpoint drain. `on_answer` is called
        after each (`warm_questions` of them)."""
        healthy = ClusterState(dp_replicas=dp_replicas)
        tick = on_answer or (lambda: None)
        for ask in (
            lambda: self.step_time_s(healthy),
            lambda: self.checkpoint_write_s(healthy),
            lambda: self.checkpoint_snapshot_s(healthy),
            lambda: self.checkpoint_load_s(healthy, "storage"),
            lambda: self.checkpoint_load_s(healthy, "peer"),
            self._compute_per_rank_s,
        ):
            ask()
            tick()
        if draining and self.prep.cluster.storage:
            self.step_time_s(healthy.replace(draining=True))
            tick()

    def warm_groups(self, dp_replicas: int, draining: bool = False) -> list[tuple[str, ...]]:
        """The questions of `warm` in groups that other processes can answer side by side
        (`answer_questions`, then `learn`), the longest first: the step during a drain if
        asked, the checkpoint write and load (every GPU's shard over the fabric), the healthy
        step (its simulation also gives the compute share), then the cheap ones."""
        groups: list[tuple[str, ...]] = [("write",), ("load_storage",), ("step", "compute")]
        if draining and self.prep.cluster.storage:
            groups.insert(0, ("drain",))
        return [*groups, ("snapshot", "load_peer")]

    def ask(self, question: str, dp_replicas: int) -> None:
        """Answer one question of `warm_groups` (cached here)."""
        healthy = ClusterState(dp_replicas=dp_replicas)
        if question == "step":
            self.step_time_s(healthy)
        elif question == "compute":
            self._compute_per_rank_s()
        elif question == "write":
            self.checkpoint_write_s(healthy)
        elif question == "snapshot":
            self.checkpoint_snapshot_s(healthy)
        elif question in ("load_storage", "load_peer"):
            self.checkpoint_load_s(healthy, "storage" if question == "load_storage" else "peer")
        elif question == "drain":
            self.step_time_s(healthy.replace(draining=True))
        else:
            raise SimulationError(f"unknown oracle question {question!r}")

    def answers(self) -> dict[str, Any]:
        """What this oracle has learned (to hand to another copy with `learn`)."""
        return {"cache": dict(self._cache), "compute_s": self._compute_s}

    def learn(self, answers: dict[str, Any]) -> None:
        """Take the answers another copy of this oracle found (`answers`)."""
        self._cache.update(answers["cache"])
        if self._compute_s is None:
            self._compute_s = answers["compute_s"]

    # -- StepOracle --------------------------------------------------------------------
    def step_time_s(self, state: ClusterState) -> float:
        f_s = max((f for _, f in state.stragglers), default=1.0)
        f_l = min((f for _, f in state.degraded_links), default=1.0)
        key = (
            "step",
            round(f_s, 9),
            round(f_l, 9),
            len(state.degraded_links),
            len(state.down_links),
            state.draining,
        )
        base = self._cache.get(key)
        if base is None:
            base = self._simulate_step(
                f_s, f_l, len(state.degraded_links), len(state.down_links), state.draining
            )
            self._cache[key] = base
        full = self._full_dp
        if state.dp_replicas < full:
            base += self._compute_per_rank_s() * (full / state.dp_replicas - 1.0)
        return base

    def checkpoint_write_s(self, state: ClusterState) -> float:
        return self._cached(("write",), self._write_s)

    def checkpoint_snapshot_s(self, state: ClusterState) -> float:
        return self._cached(
            ("snapshot",),
            lambda: self._shard_bytes() / (self.settings.host_copy_gbyte_per_s * factor("_gbyte_per_s")),
        )

    def checkpoint_load_s(self, state: ClusterState, source: LoadSource) -> float:
        return self._cached(("load", source), lambda: self._load_s(source))

    # -- internals ---------------------------------------------------------------------
    def _cached(self, key: tuple, fn: Any) -> float:
        v = self._cache.get(key)
        if v is None:
            v = float(fn())
            self._cache[key] = v
        return v

    def _shard_bytes(self) -> float:
        return checkpoint_bytes(self.prep, self.settings) / len(self.prep.program.rank_gpus)

    def _compute_per_rank_s(self) -> float:
        if self._compute_s is None:
            self._compute_s = self._compute_share_s(self._run_step(self.prep.cluster))
        return self._compute_s

    def _compute_share_s(self, sim: StepSimulator) -> float:
        """The per-rank compute time of a healthy step simulation (weighted mean), s."""
        ops = fr.ops_frame(sim.op_rows, self.prep.program.rank_gpus, self.prep.program.role)
        steps = fr.steps_frame(ops, sim.step_rows, self.prep.program.weight)
        return float(np.average(steps["compute_s"], weights=steps["weight"]))

    def _run_step(self, cluster: Cluster, drain: bool = False, drain_as_flows: bool = False) -> StepSimulator:
        """Simulate one step on `cluster`, during a checkpoint drain if `drain` (as a
        bandwidth reservation when that is exact, else, or if `drain_as_flows`, as flows)."""
        prep = self.prep
        sim = step_simulator(prep, prep.scenario.spec.seed, cluster, record_links=False)
        if not drain:
            sim.run(1)
            self.simulations += 1
            return sim
        drains = _drain_paths(cluster, sorted(set(prep.program.rank_gpus)))
        writes = any(op.kind == "checkpoint" for op in prep.program.ops)
        capacity = sim.fabric.capacity_bytes_per_s
        load = None if drain_as_flows or writes else _drain_load(cluster, capacity, drains)
        if load is None:
            for links, mult in drains:
                sim.fabric.transfer(links, mult, _DRAIN_FOREVER, op_id="drain", label="checkpoint drain")
            sim.run(1)
        else:
            with run_gc():
                proc = sim.start(1)  # plans every op on the unloaded fabric
                sim.fabric.capacity_bytes_per_s = np.maximum(sim.fabric.capacity_bytes_per_s - load, 0.0)
                sim.env.run(until=proc)
        self.simulations += 1
        return sim

    def _simulate_step(self, f_s: float, f_l: float, n_deg: int, n_down: int, draining: bool) -> float:
        prep = self.prep
        base = prep.cluster
        stragglers = dict(base.stragglers)
        program = prep.program
        if f_s > 1.0:
            gpu = program.rank_gpus[program.simulated_ranks[0]]
            stragglers[gpu] = max(f_s, stragglers.get(gpu, 1.0))
        degraded = dict(base.degraded)
        for edge in self._nic_uplinks()[:n_deg]:
            degraded[edge] = min(f_l, degraded.get(edge, 1.0))
        down = list(base.down) + self._uplinks_to_drop(n_down)
        if draining and not base.storage:
            raise SimulationError(drain_problem(prep, None))
        changed = n_deg or n_down or f_s > 1.0
        cluster = (
            Cluster(base.graph, base.gpu, down=down, degraded=degraded, stragglers=stragglers)
            if changed
            else base
        )
        sim = self._run_step(cluster, drain=draining)
        if not (changed or draining) and self._compute_s is None:
            # the healthy step: the same simulation `_compute_per_rank_s` would run again
            self._compute_s = self._compute_share_s(sim)
        log.info(
            "step simulated for straggler %.2f, %d degraded links, %d down, drain=%s",
            f_s,
            n_deg,
            n_down,
            draining,
        )
        first = sim.step_rows[0]
        return float(first.finished_at_s - first.started_at_s)

    def _nic_uplinks(self) -> list[tuple[str, str]]:
        g = self.prep.cluster.graph
        out = []
        for r in self.prep.program.simulated_ranks:
            gpu = self.prep.program.rank_gpus[r]
            for nic in g.neighbors(gpu):
                if g.nodes[nic].get("kind") == "nic":
                    out += [(nic, s) for s in sorted(g.neighbors(nic)) if g.nodes[s].get("kind") == "switch"]
        return out

    def _uplinks_to_drop(self, n: int) -> list[tuple[str, str]]:
        if n == 0:
            return []
        g = self.prep.cluster.graph
        ups = sorted(
            (u, v) if int(g.nodes[u].get("tier", 0)) < int(g.nodes[v].get("tier", 0)) else (v, u)
            for u, v in g.edges
            if g.nodes[u].get("kind") == "switch"
            and g.nodes[v].get("kind") == "switch"
            and {int(g.nodes[u].get("tier", 0)), int(g.nodes[v].get("tier", 0))} == {1, 2}
        )
        return (ups or self._nic_uplinks())[:n]

    def _transfer_s(self, pairs: list[tuple[str, str]], bytes_each: float) -> float:
        cluster = self.prep.cluster
        ctx = SimContext(0)
        fabric = Fabric(
            ctx.env,
            cluster.links.capacity_bytes_per_s,
            record_links=False,
            link_factors=cluster.capacity_factors(),
        )
        ends: list[float] = []
        for a, b in pairs:
            links, mult = usage([cluster.router.path(a, b)])
            lat = cluster.router.latency_s(a, b)
            ev = fabric.transfer(links, mult, bytes_each, op_id="checkpoint")
            ev.callbacks.append(_arrival_recorder(ends, ctx.env, lat))
        ctx.env.run()
        return max(ends) if ends else 0.0

    def _write_s(self) -> float:
        prep = self.prep
        size = checkpoint_bytes(prep, self.settings)
        if not prep.cluster.storage:
            return self._aggregate_storage_s(size)
        gpus = sorted(set(prep.program.rank_gpus))
        return self._transfer_s(
            [(g, prep.cluster.storage_sink(None, i)) for i, g in enumerate(gpus)], size / len(gpus)
        )

    def _load_s(self, source: str) -> float:
        prep = self.prep
        size = checkpoint_bytes(prep, self.settings)
        gpus = sorted(set(prep.program.rank_gpus))
        shard = size / len(gpus)
        if source == "storage":
            if not prep.cluster.storage:
                return self._aggregate_storage_s(size)
            return self._transfer_s([(prep.cluster.storage_source(i), g) for i, g in enumerate(gpus)], shard)
        g = prep.cluster.graph
        by_server: dict[str, list[str]] = {}
        for x in gpus:
            by_server.setdefault(str(g.nodes[x].get("node", x)), []).append(x)
        servers = list(by_server.values())
        copy_s = shard / (self.settings.host_copy_gbyte_per_s * factor("_gbyte_per_s"))
        if len(servers) < 2:
            return copy_s
        pairs = list(zip(servers[1], servers[0], strict=False))
        return self._transfer_s(pairs, shard) + copy_s

    def _aggregate_storage_s(self, size: float) -> float:
        bw = self.settings.storage_gbyte_per_s
        if bw is None:
            raise self.prep.scenario.doc.error(NO_STORAGE, ("reliability", "storage_gbyte_per_s"))
        return size / (bw * factor("_gbyte_per_s"))


def _drain_paths(cluster: Cluster, gpus: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(links, multiplicities) of every GPU's checkpoint drain to its storage node (round robin)."""
    return [usage([cluster.router.path(g, cluster.storage_sink(None, i))]) for i, g in enumerate(gpus)]


def _drain_load(
    cluster: Cluster, capacity: np.ndarray, drains: list[tuple[np.ndarray, np.ndarray]]
) -> np.ndarray | None:
    """Per directed link, the bytes/s the drain's flows take when alone on the fabric
    (max-min fair); None when a link the drain saturates has no storage node at either end
    (training flows could cross it, so a reservation would not be what flows give)."""
    lens = np.array([len(links) for links, _ in drains], dtype=np.int64)
    all_links = np.concatenate([links for links, _ in drains])
    used, compact = np.unique(all_links, return_inverse=True)
    flow_of = np.repeat(np.arange(len(drains)), lens)
    mult = np.concatenate([m for _, m in drains])
    rates = max_min_rates(flow_of, compact, mult, capacity[used], len(drains))
    per_link = np.bincount(compact, weights=mult * rates[flow_of], minlength=len(used))
    cap = capacity[used]
    saturated = used[cap - per_link <= 1e-9 * np.maximum(cap, 1.0)]
    nodes = cluster.graph.nodes
    for i in saturated.tolist():
        ends = (cluster.links.src[i], cluster.links.dst[i])
        if not any(nodes[n].get("kind") == "storage" for n in ends):  # storage servers and media
            return None
    load = np.zeros(len(capacity))
    load[used] = per_link
    return load


def answer_questions(task: tuple[str, int, tuple[str, ...]]) -> dict[str, Any]:
    """Task of a process pool: prepare the scenario `path` and answer `questions` (see
    `SimulatedOracle.warm_groups`) for a job of `dp_replicas`; the oracle's `answers()`."""
    path, dp_replicas, questions = task
    oracle = _worker_oracle(path)
    for q in questions:
        oracle.ask(q, dp_replicas)
    return oracle.answers()


@functools.lru_cache(maxsize=1)
def _worker_oracle(path: str) -> SimulatedOracle:
    """The oracle of `path` in a pool worker, prepared once for the groups it answers."""
    return oracle_from_scenario(path)


def oracle_from_scenario(path: str | Path) -> SimulatedOracle:
    """The factory the run-level studies use for `step: {from_scenario: FILE}`."""
    return SimulatedOracle(check_step_scenario(path))


def drain_problem(prep: Any, policy: Any) -> str:
    """Why `policy` (a policy spec) cannot run over the step scenario `prep` ("" if it can):
    a policy that drains checkpoints to storage while training runs (its runtime's `mode`
    is not blocking) slows the step by the drain's flows to the topology's storage nodes,
    so a topology without them cannot answer it. `policy` None: a drain whose policy is
    not known here."""
    if prep.cluster.storage or (policy is not None and policy.build().mode == "blocking"):
        return ""
    name = f"policy {policy.kind}" if policy is not None else "a policy that"
    return (
        f"{name} drains checkpoints to storage while training runs, and the step during a "
        f"drain is simulated with flows to the topology's storage nodes; {prep.topology.name} has "
        "none (use a topology with storage, or a blocking policy: checkpoint_restart, hot_spares, elastic)"
    )


def check_run_level(prep: Any, what: str = "") -> None:
    """Before anything is simulated: a run-level scenario's policy can run over its
    topology (`drain_problem`), and the checkpoints it writes and loads have a size and,
    without storage nodes, a storage bandwidth (the oracle asks both of every run). The
    error, prefixed by `what`, points at the key (in whichever file spells it: a compare
    variant's merged document says)."""
    sc = prep.scenario.spec
    problem = drain_problem(prep, sc.policy) if sc.policy is not None else ""
    if problem:
        raise prep.scenario.doc.error(what + problem, ("policy", "kind"))
    if sc.policy is None or sc.cluster is not None or prep.jobs:  # no oracle: step or cluster
        return
    _check_checkpoint_pricing(prep, what)


def _check_checkpoint_pricing(prep: Any, what: str = "") -> None:
    """A checkpoint has a size (`checkpoint_bytes`) and, without storage nodes, a storage
    bandwidth to be written and loaded at; the error, prefixed by `what`, at that key."""
    settings = prep.scenario.spec.reliability
    if settings.checkpoint_gbyte is None and not prep.program.meta.get("parameters"):
        raise prep.scenario.doc.error(what + NO_CHECKPOINT_SIZE, ("reliability", "checkpoint_gbyte"))
    if not prep.cluster.storage and settings.storage_gbyte_per_s is None:
        raise prep.scenario.doc.error(what + NO_STORAGE, ("reliability", "storage_gbyte_per_s"))


def check_drain(
    prep: Any, policies: Iterable[Any], file: str | Path, line: int | None, field: str = "policy.kind"
) -> None:
    """Raise `InputError` at `file:line: field` if one of `policies` (specs) cannot run over
    the step scenario `prep` (`drain_problem`)."""
    for policy in policies:
        problem = drain_problem(prep, policy)
        if problem:
            raise InputError(problem, file=file, line=line, field=field)


def check_step_scenario(path: str | Path) -> Any:
    """Prepare the step scenario of a study and check that every question a study asks of it
    (`SimulatedOracle.warm`) can be answered; the prepared run.

    Raises:
        InputError: the scenario is bad, or its checkpoints have no size (a trace workload
            without `reliability.checkpoint_gbyte`) or no storage to go to and come from
            (no storage nodes and no `reliability.storage_gbyte_per_s`), at that key.
    """
    prep = prepare(path)
    _check_checkpoint_pricing(prep)
    return prep
