"""From per-rank operations recovered out of a foreign trace to a `clustersim-step/1` trace.

Importers (Chakra, Kineto) recover `RankOp`s: one per operation of one rank, except a
collective, which is one `RankOp` for all its members once matched across ranks. This
module writes them as the step trace format of `simulator.workload.trace`, so the
trace's own validation and program building apply unchanged:

* operations of the same name and kind with equal fields on distinct ranks become one
  trace op over those ranks (so a trace exported by clustersim comes back with its ids);
  when their dependencies cannot be written as one `deps` list they are split into one
  op per rank (`NAME.rR`);
* dependencies are written relative to the op's own rank where they can be (`X` means
  X's instance on the same rank), otherwise as `X@R`;
* ops are ordered so that each (rank, stream) keeps its order.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from simulator.config.loader import Document
from simulator.config.loader import validate as validate_doc
from simulator.errors import InputError
from simulator.io import write_atomic
from simulator.workload.program import StepProgram
from simulator.workload.trace import FORMAT, TraceSpec, program_from_trace


@dataclass(slots=True)
class RankOp:
    """One recovered operation (see module docstring).

    Attributes:
        key: unique across the trace; dependencies name keys.
        kind: compute, collective, send or recv.
        ranks: the rank (one) or, for a collective, its group.
        fields: the trace fields of the op besides id, kind, ranks and deps (duration_s,
            flops, bytes, collective, group, size_bytes, peer, stream, tag, ...).
        deps: keys of the operations it waits for.
    """

    key: Any
    kind: str
    name: str
    ranks: tuple[int, ...]
    fields: dict[str, Any]
    deps: list[Any] = field(default_factory=list)

    @property
    def stream(self) -> str:
        return str(self.fields.get("stream") or ("compute" if self.kind == "compute" else "comm"))


_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:/\-\[\]#]+")


@dataclass
class _Entry:
    yid: str
    ops: list[RankOp]  # one per rank (a collective: one op)


def _signature(op: RankOp) -> tuple:
    return (op.kind, tuple(sorted((k, repr(v)) for k, v in op.fields.items())))


def _entries(ops: list[RankOp]) -> list[_Entry]:
    """Candidate trace ops: same-name, same-kind, equal-field rank ops merged."""
    groups: dict[tuple[str, str], list[RankOp]] = {}
    for op in ops:
        groups.setdefault((op.name, op.kind if op.kind != "collective" else f"c{op.key!r}"), []).append(op)
    out: list[_Entry] = []
    for (name, _), members in groups.items():
        ranks = [op.ranks[0] for op in members]
        mergeable = (
            members[0].kind != "collective"
            and len(set(ranks)) == len(ranks)
            and len({_signature(op) for op in members}) == 1
        )
        if mergeable or len(members) == 1:
            out.append(_Entry(name, members))
        else:
            out.extend(_Entry(f"{name}.r{op.ranks[0]}", [op]) for op in members)
    return out


def _assign_ids(entries: list[_Entry]) -> None:
    """Make entry ids valid trace ids (no '@', no spaces) and unique."""
    used: set[str] = set()
    for e in entries:
        base = _ID_CHARS.sub("_", e.yid.replace("@", "_")) or "op"
        yid, k = base, 1
        while yid in used:
            k += 1
            yid = f"{base}.{k}"
        used.add(yid)
        e.yid = yid


class _Tokens:
    """Dependency tokens of each op as the trace writes them."""

    def __init__(self, entries: list[_Entry]) -> None:
        self.entry_of: dict[Any, _Entry] = {op.key: e for e in entries for op in e.ops}

    def token(self, dep_key: Any, rank: int | None) -> str:
        e = self.entry_of[dep_key]
        op = e.ops[0] if len(e.ops) == 1 else next(o for o in e.ops if o.key == dep_key)
        if op.kind == "collective" or len(e.ops) == 1:
            return e.yid
        if rank is not None and op.ranks[0] == rank:
            return e.yid
        return f"{e.yid}@{op.ranks[0]}"

    def of(self, op: RankOp) -> list[str]:
        if op.kind != "collective":
            return list(dict.fromkeys(self.token(d, op.ranks[0]) for d in op.deps))
        return self._collective(op)

    def _collective(self, op: RankOp) -> list[str]:
        """A collective's deps: `X` when they are exactly X's instances on the group's ranks."""
        by_entry: dict[int, list[Any]] = {}
        for d in op.deps:
            by_entry.setdefault(id(self.entry_of[d]), []).append(d)
        out: list[str] = []
        for keys in by_entry.values():
            e = self.entry_of[keys[0]]
            on_group = {o.key for o in e.ops if o.ranks[0] in op.ranks}
            if e.ops[0].kind != "collective" and len(e.ops) > 1 and set(keys) == on_group:
                out.append(e.yid)
            else:
                out.extend(self.token(k, None) for k in keys)
        return list(dict.fromkeys(out))


def _split_inconsistent(entries: list[_Entry]) -> list[_Entry]:
    """Split merged entries whose ops' deps differ once written, until none does."""
    while True:
        tokens = _Tokens(entries)
        out: list[_Entry] = []
        changed = False
        for e in entries:
            if len(e.ops) > 1 and len({frozenset(tokens.of(o)) for o in e.ops}) > 1:
                out.extend(_Entry(f"{e.yid}.r{o.ranks[0]}", [o]) for o in e.ops)
                changed = True
            else:
                out.append(e)
        if not changed:
            return out
        _assign_ids(out)
        entries = out


def _ordered(entries: list[_Entry], rank_order: dict[tuple[int, Any], int]) -> list[_Entry] | None:
    """Entries in an order that keeps every (rank, stream) in `rank_order`; None if impossible."""
    g = nx.DiGraph()
    g.add_nodes_from(range(len(entries)))
    index = {op.key: i for i, e in enumerate(entries) for op in e.ops}
    lanes: dict[tuple[int, str], list[tuple[int, Any]]] = {}
    for e in entries:
        for op in e.ops:
            for r in op.ranks:
                if (r, op.key) in rank_order:  # a group member with no node of its own has no order
                    lanes.setdefault((r, op.stream), []).append((rank_order[(r, op.key)], op.key))
    for lane in lanes.values():
        keys = [k for _, k in sorted(lane, key=lambda x: x[0])]
        g.add_edges_from(
            (index[a], index[b]) for a, b in zip(keys, keys[1:], strict=False) if index[a] != index[b]
        )
    first = [min(rank_order.get((r, op.key), 1 << 62) for op in e.ops for r in op.ranks) for e in entries]
    try:
        order = list(nx.lexicographical_topological_sort(g, key=lambda i: (first[i], i)))
    except nx.NetworkXUnfeasible:
        return None
    return [entries[i] for i in order]


def trace_dict(
    name: str,
    n_ranks: int,
    ops: list[RankOp],
    rank_order: dict[tuple[int, Any], int],
    placement: list[str] | None = None,
    meta: dict[str, float | str] | None = None,
) -> dict[str, Any]:
    """The `clustersim-step/1` trace (as YAML-ready data) of the recovered ops.

    Args:
        rank_order: the position of every (rank, op key) in that rank's program order (ops
            of one (rank, stream) run in this order).
    """
    entries = _entries(ops)
    _assign_ids(entries)
    entries = _split_inconsistent(entries)
    ordered = _ordered(entries, rank_order)
    if ordered is None:  # merged ops force an order some rank contradicts: one op per rank
        entries = [
            _Entry(f"{e.yid}.r{o.ranks[0]}" if len(e.ops) > 1 else e.yid, [o]) for e in entries for o in e.ops
        ]
        _assign_ids(entries)
        ordered = _ordered(entries, rank_order) or entries
    tokens = _Tokens(ordered)
    out_ops = [_op_dict(e, tokens, n_ranks) for e in ordered]
    data: dict[str, Any] = {"format": FORMAT, "name": name, "ranks": n_ranks}
    if placement is not None:
        data["placement"] = list(placement)
    data["ops"] = out_ops
    if meta:
        data["meta"] = dict(meta)
    return data


def _op_dict(e: _Entry, tokens: _Tokens, n_ranks: int) -> dict[str, Any]:
    op = e.ops[0]
    d: dict[str, Any] = {"id": e.yid, "kind": op.kind}
    if op.kind != "collective":
        ranks = sorted(o.ranks[0] for o in e.ops)
        d["ranks"] = "all" if ranks == list(range(n_ranks)) and n_ranks > 1 else ranks
    for k, v in op.fields.items():
        if v is not None and not (k == "stream" and v == op.stream and _default_stream(op)):
            d[k] = list(v) if isinstance(v, tuple) else v
    deps = tokens.of(op)
    if deps:
        d["deps"] = deps
    return d


def _default_stream(op: RankOp) -> bool:
    return op.stream == ("compute" if op.kind == "compute" else "comm")


def program_from_dict(data: dict[str, Any], path: Path, gpus: list[str]) -> StepProgram:
    """Validate trace data with the trace schema and build its program on `gpus`.

    `path` is where the data came from (the imported trace, named in errors); an error at
    an op names the op's id too, since the data has no lines.
    """
    doc = Document(path, data, {})
    try:
        spec = validate_doc(TraceSpec, doc)
        return program_from_trace(spec, doc, gpus)
    except InputError as err:
        parts = (err.field or "").split(".")
        ops = data.get("ops")
        if len(parts) > 1 and parts[0] == "ops" and parts[1].isdigit() and isinstance(ops, list):
            i = int(parts[1])
            op = ops[i] if i < len(ops) and isinstance(ops[i], dict) else {}
            if "id" in op:
                raise InputError(f"op {op['id']}: {err.message}", file=err.file, field=err.field) from None
        raise


def write_trace_yaml(data: dict[str, Any], path: Path, header: str = "") -> None:
    """Write trace data as YAML, one op per line (flow style) for readability, through a
    temporary sibling (`write_atomic`): a trace already there is replaced whole or kept."""

    class _Dumper(yaml.SafeDumper):
        pass

    def _flow_dict(dumper: yaml.SafeDumper, value: dict) -> Any:
        return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=True)

    top = {k: v for k, v in data.items() if k != "ops"}
    text = yaml.dump(top, Dumper=yaml.SafeDumper, sort_keys=False, width=1_000_000)
    _Dumper.add_representer(dict, _flow_dict)
    lines = [yaml.dump(op, Dumper=_Dumper, sort_keys=False, width=1_000_000).strip() for op in data["ops"]]
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    write_atomic(path, comment + text + "ops:\n" + "".join(f"  - {line}\n" for line in lines))


def topo_rank_order(
    ops_by_rank: dict[int, list[Any]], deps: Callable[[Any], list[Any]]
) -> dict[tuple[int, Any], int]:
    """Program order of each rank: its ops in file order, moved only as far as deps require
    (Kahn's algorithm, always taking the ready op that comes first in the file).

    Raises:
        ValueError: with the rank, when its dependencies form a cycle.
    """
    order: dict[tuple[int, Any], int] = {}
    for rank, keys in ops_by_rank.items():
        pos = {k: i for i, k in enumerate(keys)}
        waiting = [0] * len(keys)
        children: list[list[int]] = [[] for _ in keys]
        for i, k in enumerate(keys):
            for d in dict.fromkeys(deps(k)):
                j = pos.get(d)
                if j is not None:
                    waiting[i] += 1
                    children[j].append(i)
        ready = [i for i, w in enumerate(waiting) if w == 0]
        heapq.heapify(ready)
        n = 0
        while ready:
            i = heapq.heappop(ready)
            order[(rank, keys[i])] = n
            n += 1
            for c in children[i]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    heapq.heappush(ready, c)
        if n != len(keys):
            raise ValueError(f"rank {rank}: dependency cycle")
    return order


def replicate_data_parallel(
    ops: list[RankOp], order: dict[tuple[int, Any], int], n: int, replicas: int
) -> tuple[list[RankOp], dict[tuple[int, Any], int]]:
    """The recorded `n` ranks as `replicas` data-parallel copies (ranks r + j*n).

    A what-if on a recorded step: every rank's ops are repeated on its copies with the same
    (measured) durations; a collective over all `n` ranks (the data-parallel reduction of
    the recorded job) becomes one collective over all `n * replicas` ranks, of the same
    size per rank; a collective over a subgroup, and a send/recv, stay inside each copy.
    """
    if replicas == 1:
        return ops, order
    world = tuple(range(n))
    out: list[RankOp] = []
    new_order: dict[tuple[int, Any], int] = {}

    def shifted(key: Any, j: int) -> Any:
        op = by_key[key]
        if op.kind == "collective" and op.ranks == world:
            return key
        return ("dp", j, key) if j else key

    by_key = {op.key: op for op in ops}
    for j in range(replicas):
        for op in ops:
            if op.kind == "collective" and op.ranks == world:
                if j == 0:
                    everyone = tuple(range(n * replicas))
                    fields = {**op.fields, "group": list(everyone)}
                    deps = [shifted(d, k) for k in range(replicas) for d in op.deps]
                    out.append(RankOp(op.key, op.kind, op.name, everyone, fields, deps))
                continue
            fields = dict(op.fields)
            if "group" in fields:
                fields["group"] = [r + j * n for r in fields["group"]]
            if "peer" in fields:
                fields["peer"] = int(fields["peer"]) + j * n
            ranks = tuple(r + j * n for r in op.ranks)
            out.append(
                RankOp(shifted(op.key, j), op.kind, op.name, ranks, fields, [shifted(d, j) for d in op.deps])
            )
    for (r, key), pos in order.items():
        for j in range(replicas):
            new_order[(r + j * n, shifted(key, j))] = pos
    return out, new_order
