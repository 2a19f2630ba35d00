"""The step simulation: SimPy processes per (rank, stream) run the step program's DAG.

Compute ops serialize on their rank's compute stream; communication runs on its own
stream(s) and overlaps compute unless a dependency says otherwise. A collective starts
when every simulated member has reached it, spends its software `overhead_s` (framework
hooks, launch), then runs its algorithm's phases on the fabric (flow fidelity) or in
closed form (analytic fidelity: the same flows solved alone, no contention with other
traffic). Steps run back to back; step k+1 starts when every rank has finished step k
(the optimizer step is a barrier in synchronous training).

A program whose every (rank, stream) holds one communication op without deps (concurrent
collectives, as in collective benchmarks) starts each collective directly when its last
member is counted, without a process per (rank, stream): the same records and flows, in
the same order, for a fraction of the events. A program with collectives solved in closed
form on one simulated rank has its fixed-duration ops timed by arithmetic
(`simulator.engine.chains`), with the same results.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import simpy

from simulator.engine.chains import ChainRunner, ChainsTied, FixedComm
from simulator.engine.context import SimContext, StepEnvironment, run_gc
from simulator.engine.cost import ComputeCost
from simulator.engine.records import OpRecord, OpTable, StepRecord
from simulator.errors import SimulationError
from simulator.network.cluster import Cluster
from simulator.network.collective import Plan, bus_factor, distinct_links, flow_usage, plan_collective
from simulator.network.collective_params import CollectiveParams, default_params
from simulator.network.fabric import Fabric, FlowBatch, max_min_rates
from simulator.network.flow_batch import flow_batch
from simulator.workload.program import Op, StepProgram, stream_ops

log = logging.getLogger(__name__)

#: a communication op with this many simulated members or more records them as columns
_MEMBER_COLUMNS = 256


class CollectiveTuning(Protocol):
    """Calibrated collectives: per-step latency and bandwidth efficiency for a collective."""

    def tune(
        self,
        kind: str,
        n_ranks: int,
        n_nodes: int,
        size_bytes: float,
        model_busbw_bytes_per_s: float,
        *,
        modelled: bool = True,
    ) -> tuple[float | None, float, str] | None:
        """Return (latency_s replacing the modeled latency or None, bandwidth efficiency, source).

        `modelled` is False for a collective run by the textbook model (a fixed algorithm
        without a protocol: path latencies, full link rate), which no collective-model
        parameter prices.
        """
        ...


class _AllDone(simpy.Event):
    """`env.all_of(events)` for events that never fail and whose value nobody reads.

    It succeeds at the same point as `simpy.AllOf` (in the callback of the last of its
    events to be processed, one `succeed`), so every event keeps its order; it only skips
    the condition's value (a `ConditionValue` built by walking the events) that `AllOf`
    makes for every wait.
    """

    def __init__(self, env: simpy.Environment, events: list[simpy.Event]) -> None:
        super().__init__(env)
        self._left = len(events)
        for event in events:
            event.callbacks.append(self._check)  # type: ignore[union-attr]  # unprocessed events

    def _check(self, _event: simpy.Event) -> None:
        self._left -= 1
        if self._left == 0:
            self.succeed()


class PhaseFlow(NamedTuple):
    """A flow a phase starts on the fabric."""

    links: np.ndarray  # distinct directed links it loads
    mult: np.ndarray  # how many times it crosses each (link load per byte moved)
    size_bytes: float
    label: str


@dataclass(slots=True)
class PreparedPhase:
    latency_s: float
    flows: list[PhaseFlow]
    isolated_s: float  # duration of the flows alone on the fabric
    batch: FlowBatch | None = None  # the flows as the fabric starts them, made when first run


@dataclass(slots=True)
class PreparedOp:
    plan: Plan | None
    phases: list[PreparedPhase]
    tuned_by: str = ""
    intra_node: bool = False  # every instance stays inside one server
    forwarded_bytes: float = 0.0  # bytes whose route passes through another GPU (PXN)


@dataclass
class StepSettings:
    """How the engine treats communication."""

    fidelity: str = "flow"  # "flow" | "analytic"
    intra_node: str = "flow"  # "flow" | "analytic": collectives inside one server solved alone
    algorithms: dict[str, str] = field(default_factory=dict)  # kind -> auto | algo | algo/protocol
    alpha_s: float = 0.0  # per-step software overhead added to every latency step
    collective_params: CollectiveParams | None = None  # None: the library's constants for the GPU
    record_links: bool = True
    #: fixed-duration ops timed by arithmetic (`simulator.engine.chains`); False: an event
    #: per op (the same results; kept to check that they are)
    chains: bool = True


class StepSimulator:
    """Runs a `StepProgram` on a `Cluster`.

    Records (turned into DataFrames by `simulator.metrics.frames`):
        op_rows: an `OpTable`: one `OpRecord` per op instance on a simulated rank in a step.
        step_rows: one `StepRecord` per step.
    """

    def __init__(
        self,
        ctx: SimContext,
        cluster: Cluster,
        program: StepProgram,
        cost: ComputeCost,
        settings: StepSettings | None = None,
        tuning: CollectiveTuning | None = None,
        fabric: Fabric | None = None,
    ) -> None:
        self.ctx = ctx
        self.env = ctx.env
        self.cluster = cluster
        self.program = program
        self.cost = cost
        self.settings = settings or StepSettings()
        self.tuning = tuning
        self.collective_params = self.settings.collective_params or default_params(
            cluster.gpu.name, cluster.topo.nic
        )
        # several jobs' simulators may share one fabric (and its env): their flows contend
        self.fabric = fabric or Fabric(
            self.env,
            cluster.links.capacity_bytes_per_s,
            record_links=self.settings.record_links,
            link_factors=cluster.capacity_factors(),
        )
        self.cost.slowdown.update(cluster.stragglers)
        self._streams = stream_ops(program)
        self._prepared: dict[str, PreparedOp] = {}
        self._plans: dict[tuple, PreparedOp] = {}  # same collective on the same GPUs: plan once
        self._plans_by_ranks: dict[tuple, PreparedOp] = {}  # the same, keyed by the op's ranks
        self.op_rows = OpTable()
        self.step_rows: list[StepRecord] = []
        self.tuned: dict[str, str] = {}
        self.forwarded_bytes = 0.0
        sim_ranks = program.simulated_ranks
        self._simulated = set(sim_ranks)
        self._members = {
            op.id: len(self._simulated.intersection(op.ranks))  # ranks of an op are distinct
            for op in program.ops
            if op.kind != "compute"
        }
        self._rank_deps = self._split_deps(program)
        self._needed = frozenset(d for op in program.ops for d in op.deps)  # ops some op waits for
        self._signalled = [op.id for op in program.ops if op.kind != "compute" or op.id in self._needed]
        # every stream one communication op without deps (concurrent collectives): the
        # collectives start directly, not through a process per (rank, stream); on a fabric
        # of its own only, so that no other job's events interleave differently
        self._direct = fabric is None and all(
            len(ops) == 1 and ops[0].kind != "compute" and not ops[0].deps for ops in self._streams.values()
        )
        self._own_fabric = fabric is None
        self._chains: ChainRunner | None = None
        self._use_chains = False  # set by `run` on a fresh environment and fabric
        #: whether the last `run` timed fixed-duration ops by arithmetic (to the end)
        self.chained = False
        cluster.check_gpus_reachable(program.used_gpus())

    @staticmethod
    def _split_deps(program: StepProgram) -> dict[tuple[str, int], tuple[str, ...]]:
        """Which deps each member of a multi-rank op waits for before it is *ready*.

        A member waits for the deps that run on it and for deps on no member; deps on
        another member are that member's to wait for (the op starts when all are ready).
        """
        multi = [op for op in program.ops if len(op.ranks) > 1]
        needed = {d for op in multi for d in op.deps}
        owner = {op.id: op.ranks for op in program.ops if op.id in needed}  # only deps of these
        out: dict[tuple[str, int], tuple[str, ...]] = {}
        for op in multi:
            members = set(op.ranks)
            for r in op.ranks:
                out[(op.id, r)] = tuple(d for d in op.deps if r in owner[d] or members.isdisjoint(owner[d]))
        return out

    # -- preparation ---------------------------------------------------------------
    def _instances(self, op: Op) -> list[list[str]]:
        rg = self.program.rank_gpus
        return [[rg[r] for r in grp] for grp in (op.group, *op.mirrors)]

    def prepare(self, op: Op) -> PreparedOp:
        """Plan an op's flows once (routes, usage, latencies); reused every step."""
        p = self._prepared.get(op.id)
        if p is not None:
            return p
        router = self.cluster.router
        if op.kind == "checkpoint":
            src = self.program.rank_gpus[op.ranks[0]]
            sink = self.cluster.storage_sink(op.target, op.ranks[0])
            links, mult, lat = flow_usage(router, [(src, sink)])
            phases = [self._phase(lat, [PhaseFlow(links, mult, op.size_bytes, "checkpoint")])]
            p = PreparedOp(None, phases)
        else:
            kind = op.collective or "send_recv"
            algo = op.algorithm or self.settings.algorithms.get(kind)
            # the same ranks are the same GPUs: look the plan up by ranks before mapping them
            rank_key = (kind, algo, op.group, op.mirrors, op.size_bytes)
            cached = self._plans_by_ranks.get(rank_key)
            if cached is None:
                instances = self._instances(op)
                key = (kind, algo, tuple(map(tuple, instances)), op.size_bytes)
                cached = self._plans.get(key)
                if cached is not None:
                    self._plans_by_ranks[rank_key] = cached
            if cached is not None:
                self._prepared[op.id] = cached
                return cached
            plan = plan_collective(
                kind, algo, self.cluster.topo, instances, op.size_bytes, self.collective_params
            )
            phases, forwarded = self._plan_phases(plan)
            topo = self.cluster.topo
            intra = all(len({topo.server(x) for x in inst}) <= 1 for inst in instances)
            p = PreparedOp(plan, phases, intra_node=intra, forwarded_bytes=forwarded)
            if self.tuning is not None and plan.n_ranks > 1:
                self._tune(op, p)
            self._plans[key] = p
            self._plans_by_ranks[rank_key] = p
        self._prepared[op.id] = p
        return p

    def _plan_phases(self, plan: Plan) -> tuple[list[PreparedPhase], float]:
        """Route a plan's flows; its latency and protocol efficiency applied. Also forwarded bytes.

        With a protocol the collective's latency (`plan.latency_s`) is shared among the
        phases in proportion to their steps; otherwise each step costs its largest path
        latency. Either way every step adds `alpha_s`. A flow at efficiency e loads its
        links 1/e per byte moved, so it reaches e times its fabric rate.
        """
        router = self.cluster.router
        phases = []
        forwarded = 0.0
        total_steps = sum(ph.steps for ph in plan.phases) or 1
        eff = max(plan.efficiency, 1e-6)
        path_latency = plan.latency_s is None
        for ph in plan.phases:
            flows, lat = [], 0.0
            for pf in ph.flows:
                links, mult, flat = flow_usage(router, pf.edges, path_latency)
                lat = max(lat, flat)
                flows.append(PhaseFlow(links, mult / eff, pf.size_bytes, pf.label))
                forwarded += pf.size_bytes * router.forwarded_count(pf.edges)
            if plan.latency_s is not None:
                lat_s = plan.latency_s * ph.steps / total_steps + ph.steps * self.settings.alpha_s
            else:
                lat_s = ph.steps * (lat + self.settings.alpha_s)
            phases.append(self._phase(lat_s, flows))
        return phases, forwarded

    def _phase(self, latency_s: float, flows: list[PhaseFlow]) -> PreparedPhase:
        return PreparedPhase(latency_s, flows, self._isolated_s(flows))

    def _isolated_s(self, flows: list[PhaseFlow]) -> float:
        """How long the flows take alone on the fabric (max-min fair among themselves), s."""
        if not flows:
            return 0.0
        lens = np.array([len(f.links) for f in flows])
        all_links = np.concatenate([f.links for f in flows])
        if len(all_links) == 0:
            return 0.0
        used, compact = distinct_links(all_links, len(self.fabric.capacity_bytes_per_s))
        flow_of = np.repeat(np.arange(len(flows)), lens)
        cap = self.fabric.capacity_bytes_per_s[used]
        rates = max_min_rates(flow_of, compact, np.concatenate([f.mult for f in flows]), cap, len(flows))
        return max((f.size_bytes / r if r > 0 else 0.0) for f, r in zip(flows, rates, strict=False))

    def _batch(self, flows: list[PhaseFlow]) -> FlowBatch:
        """A phase's flows as the fabric starts them; equal links and multiplicities, equal
        class key (the fabric solves them as one class)."""
        fab = self.fabric
        return flow_batch(
            [f.links for f in flows],
            [f.mult for f in flows],
            [f.size_bytes for f in flows],
            [f.label for f in flows],
            keys=[fab.class_key(f.links, f.mult) for f in flows],  # crossings: mult.sum()
        )

    def _tune(self, op: Op, p: PreparedOp) -> None:
        plan = p.plan
        if plan is None:
            return
        # a calibrated curve stands for the whole library: it replaces the protocol's efficiency
        e0 = max(plan.efficiency, 1e-6)
        fluid = sum(ph.isolated_s for ph in p.phases) * e0
        if fluid <= 0:
            return
        model_busbw = plan.size_bytes / fluid * bus_factor(plan.kind, plan.n_ranks)
        res = self.tuning.tune(  # type: ignore[union-attr]
            plan.kind,
            plan.n_ranks,
            plan.n_nodes,
            plan.size_bytes,
            model_busbw,
            modelled=plan.protocol != "ideal",
        )
        if res is None:
            return
        latency_s, eff, source = res
        eff = float(max(eff, 1e-3))
        total_lat = sum(ph.latency_s for ph in p.phases)
        for ph in p.phases:
            if latency_s is not None:
                ph.latency_s = latency_s * (ph.latency_s / total_lat if total_lat > 0 else 1 / len(p.phases))
            # a flow's goodput is eff x its modeled rate: it loads links mult/eff per byte
            ph.flows = [f._replace(mult=f.mult * e0 / eff) for f in ph.flows]
            ph.isolated_s *= e0 / eff
        p.tuned_by = source
        self.tuned[plan.kind] = source

    # -- processes -----------------------------------------------------------------
    def run(self, steps: int = 1, on_step: Callable[[int], None] | None = None) -> None:
        """Simulate `steps` steps back to back.

        On a fresh environment and fabric of its own, fixed-duration ops are timed by
        arithmetic (`simulator.engine.chains`); if two events of one instant could then be
        ordered otherwise than with an event per op (`ChainsTied`), the run starts again
        from scratch with an event per op (each step is reported to `on_step` once).
        """
        reported: list[int] = []

        def report(k: int) -> None:
            if on_step is not None and k >= len(reported):
                reported.append(k)
                on_step(k)

        with run_gc():
            self._use_chains = self.settings.chains and self._fresh()
            proc = self.start(steps, report)
            self._use_chains = False
            try:
                self.env.run(until=proc)
                tie = "events of one instant" if getattr(self.env, "ties", 0) else ""
            except ChainsTied as tied:
                tie = str(tied)
            self.chained = self._chains is not None and not tie
            if tie:
                log.debug("an event per op from the start: %s", tie)
                self._restart()
                proc = self.start(steps, report)
                self.env.run(until=proc)

    def _fresh(self) -> bool:
        """Whether nothing has run yet: no event queued, no flow started, no record."""
        env = self.env
        return (
            isinstance(env, StepEnvironment)
            and env.now == 0
            and env.peek() == float("inf")
            and self.fabric.recomputations == 0
            and len(self.fabric.flow_records) == 0
            and len(self.op_rows) == 0
            and not self.step_rows
        )

    def _restart(self) -> None:
        """A new environment and fabric, no record: the state before `run` (the plans kept;
        their flow batches made again, since class keys are the fabric's)."""
        old = self.fabric
        self.env = self.ctx.env = StepEnvironment()
        self.fabric = Fabric(
            self.env,
            self.cluster.links.capacity_bytes_per_s,
            record_links=self.settings.record_links,
            link_factors=self.cluster.capacity_factors(),
        )
        self.fabric.compiled_after = old.compiled_after
        for p in self._prepared.values():
            for ph in p.phases:
                ph.batch = None
        self.op_rows = OpTable()
        self.step_rows = []
        self.forwarded_bytes = 0.0

    def start(
        self, steps: int = 1, on_step: Callable[[int], None] | None = None, delay_s: float = 0.0
    ) -> simpy.Process:
        """Plan every op and start the steps as a process of the env, `delay_s` from now
        (the caller runs the env: several simulators may share it)."""
        if steps < 1:
            raise SimulationError("steps must be at least 1")
        for op in self.program.ops:
            if op.kind != "compute":
                self.prepare(op)
        self._chains = self._chain_runner() if self._use_chains else None
        return self.env.process(self._steps(steps, on_step, delay_s))

    def _steps(self, steps: int, on_step: Callable[[int], None] | None, delay_s: float = 0.0):  # noqa: ANN202 - SimPy generator
        if delay_s > 0:
            yield self.env.timeout(delay_s)
        for k in range(steps):
            start = self.env.now
            # an event per op something waits for (a compute op no op depends on signals nothing)
            done = {} if self._chains is not None else {i: self.env.event() for i in self._signalled}
            arrivals: dict[str, dict[int, float]] = {}
            if self._direct:
                yield self.env.all_of(self._start_direct(k, done, arrivals))
            elif self._chains is not None:
                yield self._chains.run_step(k)
            else:
                procs = [
                    self.env.process(self._stream(k, rank, stream, ops, done, arrivals))
                    for (rank, stream), ops in self._streams.items()
                ]
                yield self.env.all_of(procs)
            self.step_rows.append(StepRecord(step=k, started_at_s=start, finished_at_s=self.env.now))
            if on_step is not None:
                on_step(k)

    def _flow_fidelity(self, prepared: PreparedOp) -> bool:
        """Whether an op's flows run on the fabric (else they are solved alone, in closed form)."""
        return self.settings.fidelity == "flow" and not (
            prepared.intra_node and self.settings.intra_node == "analytic"
        )

    def _chain_runner(self) -> ChainRunner | None:
        """A runner that times fixed-duration ops by arithmetic (`simulator.engine.chains`),
        where its results are those of an event per op (no compute jitter, a fabric of the
        simulator's own, not the direct start of concurrent collectives) and where it saves
        most: some collective is solved in closed form (each is several events)."""
        env = self.env
        if self._direct or not self._own_fabric or self.cost.jitter_cv > 0:
            return None
        if not isinstance(env, StepEnvironment):
            return None
        fixed: dict[str, FixedComm] = {}
        for op in self.program.ops:
            if op.kind == "compute" or self._members[op.id] != 1:
                continue
            p = self._prepared[op.id]
            if self._flow_fidelity(p) or p.forwarded_bytes:
                continue
            incs = [op.overhead_s] if op.overhead_s > 0 else []
            for ph in p.phases:
                if ph.latency_s > 0:
                    incs.append(ph.latency_s)
                if ph.flows:
                    incs.append(ph.isolated_s)
            plan = p.plan
            fixed[op.id] = (
                FixedComm(tuple(incs), plan.kind, plan.algorithm, plan.protocol, plan.n_ranks)
                if plan is not None
                else FixedComm(tuple(incs), "checkpoint", "direct", "", 1)
            )
        if not fixed:  # compute chains alone: too little saved to risk a run made twice (docs)
            return None
        rank_deps = self._rank_deps
        deps = {
            (rank, name): [
                rank_deps.get((op.id, rank), op.deps) if len(op.ranks) > 1 else op.deps for op in ops
            ]  # fmt: skip
            for (rank, name), ops in self._streams.items()
        }
        return ChainRunner(
            env, self._streams, self.program.rank_gpus, deps, fixed, self._members, self._needed, self.cost,
            self.op_rows, self._start_collective,
        )  # fmt: skip

    def _start_collective(self, step: int, op: Op, done: simpy.Event, arrivals: dict[int, float]) -> None:
        self.env.process(self._communicate(step, op, done, arrivals))

    def _start_direct(self, step: int, done: dict, arrivals: dict) -> list[simpy.Event]:
        """Every member reaches its one op now: start each collective as its last member
        arrives, in the order the stream processes would (their records and flows alike)."""
        now = self.env.now
        members = self._members
        ends = []
        for (rank, _stream), ops in self._streams.items():
            op = ops[0]
            arr = arrivals.setdefault(op.id, {})
            arr[rank] = now
            if len(arr) == members[op.id]:
                self.env.process(self._communicate(step, op, done[op.id], arr))
                ends.append(done[op.id])
        return ends

    def _stream(self, step: int, rank: int, stream: str, ops: list[Op], done: dict, arrivals: dict):  # noqa: ANN202
        env = self.env
        gpu = self.program.rank_gpus[rank]
        rank_deps = self._rank_deps
        append = self.op_rows.append
        for op in ops:
            deps = rank_deps.get((op.id, rank), op.deps) if len(op.ranks) > 1 else op.deps
            if deps:
                pending = [done[d] for d in deps if not done[d].processed]
                if pending:
                    yield _AllDone(env, pending)
            if op.kind == "compute":
                start = env.now
                yield env.timeout(self.cost.compute_s(op, gpu))
                # OpRecord(step, op_id, kind, tag, rank, stream, ready_at_s, started_at_s,
                # finished_at_s, size_bytes, flops, collective, algorithm, protocol, n_ranks)
                append(OpRecord(step, op.id, op.kind, op.tag, rank, stream, start, start, env.now,
                                0.0, op.flops, "", "", "", 1))  # fmt: skip
                signal = done.get(op.id)
                if signal is not None:
                    signal.succeed()
            else:
                arr = arrivals.setdefault(op.id, {})
                arr[rank] = env.now
                if len(arr) == self._members[op.id]:
                    env.process(self._communicate(step, op, done[op.id], arr))
                yield done[op.id]

    def _communicate(self, step: int, op: Op, done: simpy.Event, arrivals: dict[int, float]):  # noqa: ANN202
        env = self.env
        start = env.now
        prepared = self._prepared[op.id]
        flow_fidelity = self._flow_fidelity(prepared)
        if op.overhead_s > 0:
            yield env.timeout(op.overhead_s)
        for ph in prepared.phases:
            if ph.latency_s > 0:
                yield env.timeout(ph.latency_s)
            if not ph.flows:
                continue
            if flow_fidelity:
                if ph.batch is None:
                    ph.batch = self._batch(ph.flows)
                yield self.fabric.transfer_batch(ph.batch, op.id)[0]
            else:
                yield env.timeout(ph.isolated_s)
        self.forwarded_bytes += prepared.forwarded_bytes
        plan = prepared.plan
        coll = plan.kind if plan else "checkpoint"
        algo = plan.algorithm if plan else "direct"
        proto = plan.protocol if plan else ""
        n = plan.n_ranks if plan else 1
        now, size = env.now, op.size_bytes
        op_id, kind, tag, stream = op.id, op.kind, op.tag, op.stream
        if len(arrivals) >= _MEMBER_COLUMNS:  # each member's rank and ready time as columns
            first = OpRecord(
                step, op_id, kind, tag, 0, stream, start, start, now, size, 0.0, coll, algo, proto, n
            )
            self.op_rows.add_members(first, list(arrivals), list(arrivals.values()))
        else:
            self.op_rows.extend(  # `OpRecord`'s fields, in order
                [
                    OpRecord(
                        step, op_id, kind, tag, r, stream, t, start, now, size, 0.0, coll, algo, proto, n
                    )
                    for r, t in arrivals.items()
                ]
            )
        done.succeed()
