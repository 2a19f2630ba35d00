"""The step program: what every rank does in one training step, as a DAG of ops.

This is the engine's input, whether it came from a recorded trace (`trace.py`) or was
generated from a model and its parallel layout. All quantities are SI.

* A *compute* op runs on one rank's compute stream; it has a duration, or FLOPs and bytes
  for the cost model to price.
* A *collective* op is shared by the ranks of its group: it starts when every simulated
  member has reached it (its dependencies done and its stream free) and occupies each
  member's communication stream until it ends. `mirrors` are further groups doing the same
  collective at the same time; they load the fabric but have no rank of their own in the
  simulation (ranks that play the same role need not be simulated one by one).
* A *p2p* op (a matched send/recv) is a two-rank collective.
* A *checkpoint* op writes bytes from a rank's GPU to a storage node.
* `overhead_s` of a collective or p2p op is software time (framework hooks, launch) spent
  after all members are ready and before any data moves.

Ops on one (rank, stream) run in program order; `deps` add cross-stream and cross-rank
order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

OP_KINDS = ("compute", "collective", "p2p", "checkpoint")
COMPUTE_STREAM = "compute"
COMM_STREAM = "comm"
#: compute ops on this stream are the host's waits (measured kernel launch delays of an
#: imported trace): time the GPU waits on the CPU, not GPU work; results count it as idle
HOST_STREAM = "host"


@dataclass(slots=True, eq=False)
class Op:
    """One node of the step DAG (see module docstring). Quantities SI."""

    id: str
    kind: str
    ranks: tuple[int, ...]
    stream: str = COMPUTE_STREAM
    deps: tuple[str, ...] = ()
    tag: str = ""
    duration_s: float | None = None
    flops: float = 0.0
    bytes_accessed: float = 0.0
    dtype: str = "bf16"
    collective: str | None = None
    group: tuple[int, ...] = ()
    mirrors: tuple[tuple[int, ...], ...] = ()
    size_bytes: float = 0.0
    algorithm: str | None = None
    target: str | None = None
    #: the kernels a fused compute op is made of (`costs.OpCost`), for a per-kernel cost
    #: model; empty: priced from `flops` and `bytes_accessed` alone.
    kernels: tuple[object, ...] = ()
    #: a per-kernel-priced op lasts this multiple of its kernels' time (a contention op is
    #: a share of the GEMMs it runs beside)
    kernel_scale: float = 1.0
    overhead_s: float = 0.0


@dataclass(slots=True)
class StepProgram:
    """A step: rank -> GPU placement, the ops, and how many ranks each simulated rank stands for.

    Attributes:
        name: shown in results.
        rank_gpus: GPU node name of every rank (simulated or mirrored).
        ops: the DAG, in program order.
        weight: for each simulated rank, how many ranks it represents (1 when all are simulated).
        role: optional label per rank used to group ranks in results (e.g. "pp0").
        meta: free-form facts from the generator (model FLOPs per step, tokens per step, ...).
    """

    name: str
    rank_gpus: list[str]
    ops: list[Op]
    weight: dict[int, int] = field(default_factory=dict)
    role: dict[int, str] = field(default_factory=dict)
    meta: dict[str, float | str] = field(default_factory=dict)

    @property
    def simulated_ranks(self) -> list[int]:
        seen: set[int] = set()
        for op in self.ops:
            seen.update(op.ranks)
        return sorted(seen)

    def validate(self) -> None:
        """Check ids unique, deps known, ranks in range, no cycle. Raises ValueError."""
        n = len(self.rank_gpus)
        index: dict[str, int] = {}
        for i, op in enumerate(self.ops):
            if op.id in index:
                raise ValueError(f"op id {op.id!r} is used twice")
            if op.kind not in OP_KINDS:
                raise ValueError(f"op {op.id!r} has kind {op.kind!r}; expected one of {list(OP_KINDS)}")
            if not _ranks_in_range(op, n):
                for r in (*op.ranks, *op.group, *(x for m in op.mirrors for x in m)):
                    if not 0 <= r < n:
                        raise ValueError(f"op {op.id!r} names rank {r}, but ranks are 0..{n - 1}")
            index[op.id] = i
        forward = False  # some op depends on an op after it in program order
        for i, op in enumerate(self.ops):
            for d in op.deps:
                j = index.get(d)
                if j is None:
                    raise ValueError(f"op {op.id!r} depends on unknown op {d!r}")
                forward = forward or j >= i
        # every dep earlier in program order (and a stream's order is program order): the
        # program order is a topological order, so there is no cycle
        if not forward or self._acyclic():
            return
        order = self.dependency_graph()
        if not nx.is_directed_acyclic_graph(order):
            cycle = nx.find_cycle(order)
            raise ValueError(
                "dependency cycle: " + " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
            )

    def _acyclic(self) -> bool:
        """Whether `dependency_graph()` has no cycle: no op depends on itself and every
        strongly connected component is one op (scipy's, on op indices; cheaper than
        building the networkx graph, which is built only to name a cycle)."""
        # imported here, not with the module: a small run never needs it, and scipy's import
        # would add to the command line's start-up
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import connected_components

        index = {op.id: i for i, op in enumerate(self.ops)}
        src: list[int] = []
        dst: list[int] = []
        last: dict[tuple[int, str], int] = {}
        for i, op in enumerate(self.ops):
            for d in op.deps:
                src.append(index[d])
                dst.append(i)
            stream = op.stream
            for r in op.ranks:
                prev = last.get((r, stream))
                if prev is not None and prev != i:
                    src.append(prev)
                    dst.append(i)
                last[(r, stream)] = i
        s, t = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
        if (s == t).any():
            return False
        n = len(self.ops)
        graph = csr_array((np.ones(len(s), dtype=bool), (s, t)), shape=(n, n))  # duplicates: still True
        n_components, _ = connected_components(graph, directed=True, connection="strong")
        return int(n_components) == n

    def dependency_graph(self) -> nx.DiGraph:
        """Explicit deps plus the implicit order of ops on each (rank, stream)."""
        dg = nx.DiGraph()
        dg.add_nodes_from(op.id for op in self.ops)
        last: dict[tuple[int, str], str] = {}
        for op in self.ops:
            dg.add_edges_from((d, op.id) for d in op.deps)
            for r in op.ranks:
                prev = last.get((r, op.stream))
                if prev is not None and prev != op.id:
                    dg.add_edge(prev, op.id)
                last[(r, op.stream)] = op.id
        return dg


def _ranks_in_range(op: Op, n: int) -> bool:
    """Whether every rank `op` names (its ranks, group and mirrors) is in 0..n-1 (min and
    max per tuple, not a Python loop per rank: mirrors can name thousands)."""
    for seq in (op.ranks, op.group):
        if seq and (min(seq) < 0 or max(seq) >= n):
            return False
    mirrors = op.mirrors
    if not mirrors:
        return True
    if not all(mirrors):  # an empty mirror names no rank
        mirrors = tuple(m for m in mirrors if m)
        if not mirrors:
            return True
    return min(map(min, mirrors)) >= 0 and max(map(max, mirrors)) < n


def stream_ops(program: StepProgram) -> dict[tuple[int, str], list[Op]]:
    """Ops of each (rank, stream) in program order."""
    out: dict[tuple[int, str], list[Op]] = {}
    for op in program.ops:
        for r in op.ranks:
            out.setdefault((r, op.stream), []).append(op)
    return out
