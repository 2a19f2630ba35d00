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

import operator
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

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


def compute_op(
    op_id: str,
    ranks: tuple[int, ...],
    deps: tuple[str, ...],
    tag: str,
    flops: float,
    bytes_accessed: float,
    dtype: str,
    kernels: tuple[object, ...],
    kernel_scale: float = 1.0,
) -> Op:
    """A compute op on the compute stream, built with positional arguments (a generator
    makes one per op of a step; keyword arguments cost a third more)."""
    return Op(
        op_id, "compute", ranks, COMPUTE_STREAM, deps, tag, None, flops, bytes_accessed, dtype,
        None, (), (), 0.0, None, None, kernels, kernel_scale, 0.0,
    )  # fmt: skip


def comm_op(
    op_id: str,
    kind: str,
    ranks: tuple[int, ...],
    stream: str,
    deps: tuple[str, ...],
    tag: str,
    collective: str,
    group: tuple[int, ...],
    mirrors: tuple[tuple[int, ...], ...],
    size_bytes: float,
    overhead_s: float = 0.0,
) -> Op:
    """A collective or p2p op (`kind`), built with positional arguments (see `compute_op`)."""
    return Op(
        op_id, kind, ranks, stream, deps, tag, None, 0.0, 0.0, "bf16",
        collective, group, mirrors, size_bytes, None, None, (), 1.0, overhead_s,
    )  # fmt: skip


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
        """The ranks some op runs on, in order (one pass of `chain` over the ops' ranks)."""
        return sorted(set(chain.from_iterable(map(_RANKS, self.ops))))

    def used_gpus(self) -> list[str]:
        """The GPUs the ops name (their ranks and groups), sorted; each distinct tuple is
        read once (a generated program shares them between ops)."""
        ranks: set[int] = set()
        for getter in (_RANKS, _GROUP):
            seqs = list(filter(None, map(getter, self.ops)))  # a compute op's group is empty
            ranks.update(chain.from_iterable(dict(zip(map(id, seqs), seqs, strict=True)).values()))
        return sorted({self.rank_gpus[r] for r in ranks})

    def validate(self) -> None:
        """Check ids unique, deps known, ranks in range, no cycle. Raises ValueError.

        The checks run over columns of the program (op fields gathered by `map`, ranks and
        dep positions as numpy arrays) rather than one Python test per op; only a program
        that fails one is walked op by op, to name the first op at fault. Deps are found by
        the hashes of the ids (`_IdTable`), not a dict of every id.
        """
        ops = self.ops
        n = len(self.rank_gpus)
        table = _IdTable(list(map(_ID, ops)))
        unique = table.distinct or len(set(table.ids)) == len(ops)  # equal hashes: equal ids?
        columns = None  # the ranks, read once for the range check and the cycle check
        if unique and set(map(_KIND, ops)) <= _KIND_SET:
            columns = _rank_columns(ops)
        if columns is None or not _all_ranks_in_range(ops, n, columns):
            self._check_ops_one_by_one()
        found = table.positions(list(chain.from_iterable(map(_DEPS, ops))))
        if found is None:  # an unknown dep (or two ids with one hash): the plain lookup names it
            src, dst = _dep_edges(ops, {op.id: i for i, op in enumerate(ops)})
        else:
            counts = np.fromiter(map(len, map(_DEPS, ops)), dtype=np.int64, count=len(ops))
            src, dst = found, np.repeat(np.arange(len(ops), dtype=np.int64), counts)
        # every dep earlier in program order (and a stream's order is program order): the
        # program order is a topological order, so there is no cycle
        if not (src >= dst).any() or self._acyclic(src, dst, columns):
            return
        order = self.dependency_graph()
        if not nx.is_directed_acyclic_graph(order):
            cycle = nx.find_cycle(order)
            raise ValueError(
                "dependency cycle: " + " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
            )

    def _check_ops_one_by_one(self) -> None:
        """Raise for the first op (in program order) with a repeated id, an unknown kind or
        a rank out of range (the slow walk behind `validate`'s column checks)."""
        n = len(self.rank_gpus)
        seen: set[str] = set()
        for op in self.ops:
            if op.id in seen:
                raise ValueError(f"op id {op.id!r} is used twice")
            if op.kind not in OP_KINDS:
                raise ValueError(f"op {op.id!r} has kind {op.kind!r}; expected one of {list(OP_KINDS)}")
            if not _ranks_in_range(op, n):
                for r in (*op.ranks, *op.group, *(x for m in op.mirrors for x in m)):
                    if not 0 <= r < n:
                        raise ValueError(f"op {op.id!r} names rank {r}, but ranks are 0..{n - 1}")
            seen.add(op.id)

    def _acyclic(
        self,
        src: np.ndarray | None = None,
        dst: np.ndarray | None = None,
        columns: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> bool:
        """Whether `dependency_graph()` has no cycle: no op depends on itself, and either
        the graph of runs of ops has none (`_runs_acyclic`, which suffices) or every
        strongly connected component is one op (scipy's, on op indices; cheaper than
        building the networkx graph, which is built only to name a cycle).

        Args:
            src: the explicit deps as op positions (`_dep_edges`; computed when not given),
                with `dst` the positions of the ops that depend on them.
            dst: see `src`.
            columns: the ops' `_rank_columns`, if already gathered.
        """
        ops = self.ops
        if src is None or dst is None:
            src, dst = _dep_edges(ops, {op.id: i for i, op in enumerate(ops)})
        if (src == dst).any():
            return False
        if columns is None:
            columns = _rank_columns(ops)
        chain_src, chain_dst = _stream_edges(ops, columns)
        s, t = np.concatenate((src, chain_src)), np.concatenate((dst, chain_dst))
        if _runs_acyclic(_first_ranks(*columns), s, t):
            return True
        # imported here, not with the module: a small run never needs it, and scipy's import
        # would add to the command line's start-up
        from scipy.sparse import csr_array
        from scipy.sparse.csgraph import connected_components

        n = len(ops)
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


_ID = attrgetter("id")
_KIND = attrgetter("kind")
_DEPS = attrgetter("deps")
_RANKS = attrgetter("ranks")
_GROUP = attrgetter("group")
_STREAM = attrgetter("stream")
_KIND_SET = frozenset(OP_KINDS)


def _ranks_in_range(op: Op, n: int) -> bool:
    """Whether every rank `op` names (its ranks, group and mirrors) is in 0..n-1 (min and
    max per tuple, not a Python loop per rank: mirrors can name thousands)."""
    for seq in (op.ranks, op.group):
        if seq and (min(seq) < 0 or max(seq) >= n):
            return False
    return _mirrors_in_range(op.mirrors, n)


def _mirrors_in_range(mirrors: tuple[tuple[int, ...], ...], n: int) -> bool:
    """Whether every rank of `mirrors` is in 0..n-1."""
    if not mirrors:
        return True
    if not all(mirrors):  # an empty mirror names no rank
        mirrors = tuple(m for m in mirrors if m)
        if not mirrors:
            return True
    return min(map(min, mirrors)) >= 0 and max(map(max, mirrors)) < n


def _all_ranks_in_range(ops: list[Op], n: int, columns: tuple[np.ndarray, np.ndarray] | None = None) -> bool:
    """Whether every rank every op names is in 0..n-1: the ranks as one array (the second
    of `columns`, the ops' `_rank_columns`, if given); groups and mirrors once per distinct
    tuple object that is not empty (generated programs share them between ops)."""
    ranks = (columns or _rank_columns(ops))[1]
    if len(ranks) and (ranks.min() < 0 or ranks.max() >= n):
        return False
    for name in ("group", "mirrors"):
        seqs = list(filter(None, map(attrgetter(name), ops)))  # an empty one names no rank
        distinct = dict(zip(map(id, seqs), seqs, strict=True)).values()
        if name == "group":
            if not _mirrors_in_range(tuple(distinct), n):
                return False
        elif not all(_mirrors_in_range(m, n) for m in distinct):
            return False
    return True


class _IdTable:
    """The op ids by their hashes, sorted: where an id is, by a binary search of its hash
    (numpy) and one string comparison, without a dict of every id.

    Args:
        ids: the op ids, in program order.
    """

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids
        keys = np.fromiter(map(hash, ids), dtype=np.int64, count=len(ids))
        self.order = np.argsort(keys, kind="stable")
        self.keys = keys[self.order]
        #: no two ids share a hash (so no two are equal)
        self.distinct = not bool((self.keys[1:] == self.keys[:-1]).any())

    def positions(self, names: list[str]) -> np.ndarray | None:
        """The position of each of `names` among the ids; None when one is not an id, or
        when two ids share a hash (then a dict answers)."""
        if not names:
            return np.zeros(0, dtype=np.int64)
        if not self.distinct or not self.ids:
            return None
        keys = np.fromiter(map(hash, names), dtype=np.int64, count=len(names))
        # the needles searched in sorted order: the searches then walk the keys in order
        # (random searches cost ~3x as much, mostly in cache misses)
        by_key = np.argsort(keys)
        at = np.empty_like(by_key)
        at[by_key] = np.searchsorted(self.keys, keys[by_key])
        at = np.minimum(at, len(self.ids) - 1)
        if not (self.keys[at] == keys).all():
            return None
        found = self.order[at]
        # equal hashes; the names must be the ids themselves (usually the same objects)
        if not all(map(operator.eq, names, map(self.ids.__getitem__, found.tolist()))):
            return None
        return found


def _dep_edges(ops: list[Op], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """The explicit deps as edges (position of the dep, position of the op), in program
    order; raises ValueError naming the first op with an unknown dep."""
    counts = np.fromiter(map(len, map(_DEPS, ops)), dtype=np.int64, count=len(ops))
    positions = list(map(index.get, chain.from_iterable(map(_DEPS, ops))))
    if None in positions:
        k = positions.index(None)
        i = int(np.searchsorted(np.cumsum(counts), k, side="right"))
        op = ops[i]
        unknown = next(d for d in op.deps if d not in index)
        raise ValueError(f"op {op.id!r} depends on unknown op {unknown!r}")
    src = np.array(positions, dtype=np.int64)
    dst = np.repeat(np.arange(len(ops), dtype=np.int64), counts)
    return src, dst


def _rank_columns(ops: list[Op]) -> tuple[np.ndarray, np.ndarray]:
    """How many ranks each op names, and the ranks of all ops in program order."""
    seqs = list(map(_RANKS, ops))
    counts = np.fromiter(map(len, seqs), dtype=np.int64, count=len(ops))
    ranks = np.fromiter(chain.from_iterable(seqs), dtype=np.int64, count=int(counts.sum()))
    return counts, ranks


def _first_ranks(counts: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The first rank of each op (-1 for an op that names none), from `_rank_columns`."""
    first = np.full(len(counts), -1, dtype=np.int64)
    named = counts > 0
    first[named] = ranks[(np.cumsum(counts) - counts)[named]]
    return first


def _runs_acyclic(first: np.ndarray, s: np.ndarray, t: np.ndarray) -> bool:
    """A test that suffices for the graph of edges s->t on op positions to have no cycle
    (False says nothing), cheap on a generated program.

    The ops are cut into runs of consecutive positions: a run starts at the head of each
    edge between ops of different first ranks or pointing back in program order, and after
    its tail. If every edge inside a run points forward (no op depends on itself or on a
    later op of its run), a cycle of ops would be a cycle of runs; so the test is that
    Kahn's algorithm orders the runs (a few thousand in a generated step, whose deps
    between ranks are the pipeline's transfers).
    """
    n = len(first)
    if not len(s):
        return True
    cut = (first[s] != first[t]) | (s > t)
    start = np.zeros(n + 1, dtype=bool)
    start[0] = True
    start[t[cut]] = True
    start[s[cut] + 1] = True
    run = np.cumsum(start[:n]) - 1
    a, b = run[s], run[t]
    inside = a == b
    if (s[inside] >= t[inside]).any():  # an op after (or at) its dependent
        return False
    m = int(run[-1]) + 1
    pairs = np.unique(a[~inside] * m + b[~inside])  # by tail: the adjacency, in order
    return _kahn_orders_all(m, pairs // m, pairs % m)


def _kahn_orders_all(m: int, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether Kahn's algorithm orders all `m` nodes of the graph of edges a->b (sorted by
    a): whether it has no cycle."""
    targets = b.tolist()
    offset = np.searchsorted(a, np.arange(m + 1)).tolist()
    indegree = np.bincount(b, minlength=m).tolist()
    ready = [x for x in range(m) if not indegree[x]]
    done = 0
    while ready:
        x = ready.pop()
        done += 1
        for y in targets[offset[x] : offset[x + 1]]:
            indegree[y] -= 1
            if not indegree[y]:
                ready.append(y)
    return done == m


def _stream_edges(
    ops: list[Op], columns: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The implicit order of ops on each (rank, stream): an edge from each op to the next
    op of the same rank and stream (none from an op to itself). `columns`: the ops'
    `_rank_columns`, if already gathered."""
    n = len(ops)
    counts, ranks = columns if columns is not None else _rank_columns(ops)
    streams = list(map(_STREAM, ops))
    codes = {s: i for i, s in enumerate(dict.fromkeys(streams))}
    stream = np.fromiter(map(codes.__getitem__, streams), dtype=np.int64, count=n)
    op_of = np.repeat(np.arange(n, dtype=np.int64), counts)
    key = (ranks - ranks.min(initial=0)) * max(len(codes), 1) + stream[op_of]
    order = np.argsort(key, kind="stable")  # stable: program order within a (rank, stream)
    key, op_of = key[order], op_of[order]
    next_same = (key[1:] == key[:-1]) & (op_of[1:] != op_of[:-1])
    return op_of[:-1][next_same], op_of[1:][next_same]


def stream_ops(program: StepProgram) -> dict[tuple[int, str], list[Op]]:
    """Ops of each (rank, stream) in program order."""
    out: dict[tuple[int, str], list[Op]] = {}
    for op in program.ops:
        for r in op.ranks:
            out.setdefault((r, op.stream), []).append(op)
    return out
