"""Read a folder of per-rank Chakra execution traces into a `clustersim-step/1` trace.

Mapping (see `chakra_write` for the attributes):

* `COMP_NODE` -> compute op: `clustersim.duration_s`, else `clustersim.flops` and
  `clustersim.bytes` for the roofline (clustersim's export: priced on the importing GPU, not
  at the exporter's `duration_micros`), else `duration_micros` when non-zero, else FLOPs
  `num_ops` and bytes `tensor_size` for the roofline; none of them: zero time
  (counted in the warnings). `is_cpu_op` nodes run on the rank's `cpu` stream, so host
  work orders GPU work only through dependencies.
* `COMM_COLL_NODE` -> collective. Its group is `clustersim.group`, else the ranks of its
  `pg_name` in the folder's `comm_group.json` (ASTRA-sim's group file), else every rank
  (counted in the warnings). The k-th collective of a group on each member is one
  collective; members must agree on type and size. `BARRIER` becomes an all-reduce of
  one 4-byte element (what PyTorch's NCCL barrier runs); `REDUCE_SCATTER_BLOCK` a
  reduce-scatter; `GATHER` and `SCATTER` (no clustersim model) are rejected.
* `COMM_SEND_NODE`/`COMM_RECV_NODE` -> send/recv with `comm_dst`/`comm_src` as the peer;
  the n-th send of a pair meets the n-th recv, and their `comm_tag`s must agree.
  A rank whose file holds no node takes part in its groups' collectives only (clustersim
  exports the ranks a generated program does not simulate that way).
* `CHECKPOINT_NODE` -> checkpoint. Other node types (metadata, memory, storage, batch)
  have no model: rejected with their count, or, with `unknown="compute"`, run as compute
  ops of their `duration_micros` on an `other` stream and counted in the warnings.

Dependencies: `data_deps` and `ctrl_deps` (same file) and `clustersim.remote_deps`
(`RANK:NODE_ID`). A rank's ops keep file order except where dependencies require
otherwise; a `ctrl_deps` on the previous op of the same stream is that order, not an
extra dependency. Simplified: Chakra has no streams; compute nodes share the rank's
compute stream and communication its comm stream unless `clustersim.stream` says which.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from simulator.config.loader import check_regular_file
from simulator.errors import InputError, shown
from simulator.workload.interchange import chakra_et_pb2 as pb
from simulator.workload.interchange.chakra_io import attrs_of, rank_files, read_et
from simulator.workload.interchange.tracebuild import RankOp, topo_rank_order, trace_dict

COLLECTIVE_OF = {
    pb.ALL_REDUCE: "all_reduce",
    pb.REDUCE: "reduce",
    pb.ALL_GATHER: "all_gather",
    pb.BROADCAST: "broadcast",
    pb.ALL_TO_ALL: "all_to_all",
    pb.REDUCE_SCATTER: "reduce_scatter",
    pb.REDUCE_SCATTER_BLOCK: "reduce_scatter",
    pb.BARRIER: "all_reduce",
}
COLLECTIVE_OF_INT: dict[int, str] = {int(k): v for k, v in COLLECTIVE_OF.items()}
BARRIER_BYTES = 4.0  # one float32 element
UNMODELLED = (
    pb.INVALID_NODE,
    pb.METADATA_NODE,
    pb.MEM_LOAD_NODE,
    pb.MEM_STORE_NODE,
    pb.STORAGE_NODE,
    pb.BATCH_NODE,
)


@dataclass
class ChakraImport:
    """An imported trace: the trace data, and what could not be taken as it is."""

    data: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    node_count: int = 0


@dataclass
class _Node:
    rank: int
    path: Path
    msg: pb.Node
    attrs: dict[str, Any]


class _Reader:
    def __init__(self, folder: Path, unknown: str) -> None:
        self.folder = folder
        self.unknown = unknown
        self.counts: dict[str, int] = {}
        self.nodes: dict[tuple[int, int], _Node] = {}
        self.by_rank: dict[int, list[tuple[int, int]]] = {}
        self.meta: dict[str, Any] = {}
        self.paths: dict[int, Path] = {}
        self.groups: dict[str, list[int]] = self._group_file()

    def _group_file(self) -> dict[str, list[int]]:
        path = self.folder / "comm_group.json"
        if not path.is_file():
            return {}
        try:
            check_regular_file(path)
            data = json.loads(path.read_text(encoding="utf-8"))
            groups = {str(k): list(v) for k, v in data.items()}
            for name, ranks in groups.items():
                bad = [r for r in ranks if type(r) is not int]
                if bad:
                    raise InputError(f"group {name!r}: rank {bad[0]!r} is not a whole number", file=path)
            return groups
        except (ValueError, TypeError, AttributeError) as exc:
            raise InputError(
                f"expected a JSON object of group name -> rank list ({exc})", file=path
            ) from None

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def load(self, on_rank: Callable[[int], None] | None) -> int:
        files = rank_files(self.folder)
        self.n = len(files)
        for rank, path in files:
            self.paths[rank] = path
            meta, nodes = read_et(path)
            said = attrs_of(meta)
            if rank == 0:
                self.meta = said
            if "clustersim.nodes" in said and said["clustersim.nodes"] != len(nodes):
                raise InputError(
                    f"{len(nodes)} nodes, but its metadata says clustersim.nodes {said['clustersim.nodes']}; "
                    "the file was cut short (at a record boundary) or edited",
                    file=path,
                )
            keys: list[tuple[int, int]] = []
            for node in nodes:
                key = (rank, node.id)
                if key in self.nodes:
                    raise InputError(f"node {node.id}: node id used twice; expected unique ids", file=path)
                self.nodes[key] = _Node(rank, path, node, attrs_of(node))
                keys.append(key)
            self.by_rank[rank] = keys
            self._check_graph(rank, path)
            if on_rank is not None:
                on_rank(rank)
        return self.n

    def local_deps(self, key: tuple[int, int]) -> list[tuple[int, int]]:
        msg = self.nodes[key].msg
        return [(key[0], d) for d in (*msg.data_deps, *msg.ctrl_deps)]

    def _check_graph(self, rank: int, path: Path) -> None:
        """Every dependency names a node of the same file."""
        for key in self.by_rank[rank]:
            for d in self.local_deps(key):
                if d not in self.nodes:
                    raise InputError(
                        f"node {key[1]}: depends on node {d[1]}, which is not in this file; "
                        "expected the id of a node of the same rank",
                        file=path,
                    )

    def cycle_error(self, rank: int) -> InputError:
        """The error naming a dependency cycle of `rank`'s file (found only once known)."""
        g = nx.DiGraph()
        g.add_edges_from((d, key) for key in self.by_rank[rank] for d in self.local_deps(key))
        cycle = [u for u, _ in nx.find_cycle(g)]
        ids = " -> ".join(str(k[1]) for k in (*cycle, cycle[0]))
        return InputError(
            f"node {cycle[0][1]}: dependency cycle {ids}; expected an acyclic graph", file=self.paths[rank]
        )

    def group_of(self, node: _Node) -> tuple[int, ...]:
        a = node.attrs
        if "clustersim.group" in a:
            given = a["clustersim.group"]
            if not isinstance(given, list | tuple):
                raise InputError(
                    f"node {node.msg.id}: clustersim.group: expected a list of ranks, found {given!r}",
                    file=node.path,
                )
            group = [int(_number(node, "clustersim.group", r, whole=True)) for r in given]
        elif str(a.get("pg_name", "")) in self.groups:
            group = self.groups[str(a["pg_name"])]
        else:
            self.count("collectives without a group (taken as all ranks)")
            group = list(range(self.n))
        bad = [r for r in group if not 0 <= r < self.n]
        if bad:
            raise InputError(
                f"node {node.msg.id}: collective group names rank {bad[0]}; expected ranks 0..{self.n - 1} "
                f"(one per ET file)",
                file=node.path,
            )
        twice = [r for r in dict.fromkeys(group) if group.count(r) > 1]
        if twice:
            raise InputError(
                f"node {node.msg.id}: collective group {group} names rank {twice[0]} twice", file=node.path
            )
        if node.rank not in group:
            raise InputError(
                f"node {node.msg.id}: rank {node.rank} is not in its group {group}", file=node.path
            )
        return tuple(group)


def _common(node: _Node) -> dict[str, Any]:
    a = node.attrs
    out: dict[str, Any] = {}
    if a.get("clustersim.stream"):
        out["stream"] = str(a["clustersim.stream"])
    if a.get("clustersim.tag"):
        out["tag"] = str(a["clustersim.tag"])
    return out


def _compute_fields(r: _Reader, node: _Node) -> dict[str, Any]:
    a, msg = node.attrs, node.msg
    f = _common(node)
    if a.get("is_cpu_op"):
        f.setdefault("stream", "cpu")
        r.count("CPU ops (run on the cpu stream)")
    if "clustersim.duration_s" in a:
        f["duration_s"] = _attr(node, "clustersim.duration_s")
    elif "clustersim.flops" in a or "clustersim.bytes" in a:  # written by clustersim: priced here
        f["flops"], f["bytes"] = _attr(node, "clustersim.flops"), _attr(node, "clustersim.bytes")
    elif msg.duration_micros:
        f["duration_s"] = msg.duration_micros / 1e6
    elif a.get("num_ops") or a.get("tensor_size"):
        f["flops"], f["bytes"] = _attr(node, "num_ops"), _attr(node, "tensor_size")
    else:
        r.count("compute nodes with no duration, num_ops or tensor_size (zero time)")
        f["duration_s"] = 0.0
    if a.get("clustersim.dtype"):
        f["dtype"] = str(a["clustersim.dtype"])
    return f


def _size(r: _Reader, node: _Node) -> float:
    """The bytes a node moves; none given: 0, counted in the warnings (ASTRA-sim skips it)."""
    if "clustersim.size_bytes" not in node.attrs and "comm_size" not in node.attrs:
        r.count(f"{pb.NodeType.Name(node.msg.type)}s without comm_size (taken as 0 bytes)")
    return _attr(node, "clustersim.size_bytes" if "clustersim.size_bytes" in node.attrs else "comm_size")


def _attr(node: _Node, key: str, default: float = 0.0, whole: bool = False) -> float:
    """Attribute `key` of `node` as a finite number at least 0 (`default` when absent)."""
    return _number(node, key, node.attrs.get(key, default), whole)


def _number(node: _Node, key: str, value: Any, whole: bool = False) -> float:
    """`value` (of attribute `key` of `node`) as a finite number at least 0, whole if asked.

    Raises:
        InputError: `path: node N: key: expected ..., found ...`.
    """
    try:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        x = float(value)
    except (ValueError, OverflowError):
        x = math.nan
    if not math.isfinite(x) or x < 0 or (whole and not x.is_integer()):
        what = "a whole number" if whole else "a number"
        raise InputError(
            f"node {node.msg.id}: {key}: expected {what} of at least 0, found {shown(value)}", file=node.path
        )
    return x


def _convert(r: _Reader, key: tuple[int, int]) -> tuple[str, dict[str, Any]]:
    """Kind and trace fields of one node (collectives: fields of the matched op)."""
    node = r.nodes[key]
    t, a, nid = node.msg.type, node.attrs, node.msg.id
    if t == pb.COMP_NODE:
        return "compute", _compute_fields(r, node)
    if t == pb.COMM_COLL_NODE:
        ctype = int(_attr(node, "comm_type", pb.ALL_REDUCE, whole=True))
        if ctype not in COLLECTIVE_OF_INT:
            name = (
                pb.CollectiveCommType.Name(ctype) if ctype in pb.CollectiveCommType.values() else str(ctype)
            )
            raise InputError(
                f"node {nid}: collective {name} has no clustersim model; expected one of "
                f"{[pb.CollectiveCommType.Name(c) for c in COLLECTIVE_OF]}",
                file=node.path,
            )
        f = {
            "collective": COLLECTIVE_OF_INT[ctype],
            "size_bytes": BARRIER_BYTES if ctype == pb.BARRIER else _size(r, node),
        }
        if a.get("clustersim.algorithm"):
            f["algorithm"] = str(a["clustersim.algorithm"])
        return "collective", {**f, **_common(node)}
    if t in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
        send = t == pb.COMM_SEND_NODE
        field = "comm_dst" if send else "comm_src"
        peer = int(_attr(node, field, -1, whole=True)) if field in a else -1
        if not 0 <= peer < r.n or peer == key[0]:
            raise InputError(
                f"node {nid}: {field} {peer} is not another rank of 0..{r.n - 1}", file=node.path
            )
        f = {"peer": peer, **_common(node)}
        if send:
            f["size_bytes"] = _size(r, node)
        return ("send" if send else "recv"), f
    if t == pb.CHECKPOINT_NODE:
        f = {"size_bytes": _size(r, node), **_common(node)}
        if a.get("clustersim.target"):
            f["target"] = str(a["clustersim.target"])
        return "checkpoint", f
    type_name = pb.NodeType.Name(t) if t in pb.NodeType.values() else str(t)
    if r.unknown != "compute":
        raise InputError(
            f"node {nid}: node type {type_name} has no clustersim model; expected COMP, COMM_COLL, "
            "COMM_SEND, COMM_RECV or CHECKPOINT nodes (or import with unknown nodes as compute)",
            file=node.path,
        )
    r.count(f"{type_name} nodes (run as compute)")
    return "compute", {"duration_s": node.msg.duration_micros / 1e6, "stream": "other"}


def import_chakra(
    folder: Path,
    unknown: str = "reject",
    on_rank: Callable[[int], None] | None = None,
    keep_placement: bool = False,
) -> ChakraImport:
    """Read the ET files of `folder` into `clustersim-step/1` trace data.

    Args:
        unknown: "reject" (default) or "compute": what becomes of node types with no model.
        on_rank: called with each rank once its file is read (progress).
        keep_placement: keep the GPU of every rank the exporter recorded (else ranks are
            packed on the scenario's GPUs, as a trace without `placement` is).

    Raises:
        InputError: one line naming the file, the node id and what was expected.
    """
    r = _Reader(folder, unknown)
    n = r.load(on_rank)
    try:
        order0 = topo_rank_order(r.by_rank, r.local_deps)
    except ValueError:
        cyclic = next(rank for rank in r.by_rank if not _acyclic(r, rank))
        raise r.cycle_error(cyclic) from None
    converted = {key: _convert(r, key) for keys in r.by_rank.values() for key in keys}
    alias, ops = _match_collectives(r, converted, order0)
    _pair_tags(r, converted, order0)
    rank_order: dict[tuple[int, Any], int] = {(rk, alias.get(k, k)): i for (rk, k), i in order0.items()}
    _set_deps(r, ops, alias, order0)
    meta = {
        k.removeprefix("clustersim.meta."): v for k, v in r.meta.items() if k.startswith("clustersim.meta.")
    }
    placement = r.meta.get("clustersim.placement")
    data = trace_dict(
        str(r.meta.get("clustersim.name") or folder.name),
        n,
        list(ops.values()),
        rank_order,
        placement=list(placement) if keep_placement and placement and len(placement) == n else None,
        meta={k: v for k, v in meta.items() if isinstance(v, float | int | str)},
    )
    warnings = [f"{c} {what}" for what, c in sorted(r.counts.items())]
    return ChakraImport(data, warnings, len(r.nodes))


def _acyclic(r: _Reader, rank: int) -> bool:
    try:
        topo_rank_order({rank: r.by_rank[rank]}, r.local_deps)
    except ValueError:
        return False
    return True


def _match_collectives(r: _Reader, converted: dict, order: dict) -> tuple[dict[Any, Any], dict[Any, RankOp]]:
    """One RankOp per op; the k-th collective of a communicator on each member becomes one op.

    A communicator is a group of ranks and, when the node names one, its process group
    (`pg_name`): two process groups over the same ranks keep their own order, as NCCL's
    communicators do, so calls issued in another order on each of them still match."""
    ops: dict[Any, RankOp] = {}
    alias: dict[Any, Any] = {}
    seq: dict[tuple[tuple[tuple[int, ...], str | None], int], int] = {}
    for rank, keys in r.by_rank.items():
        for key in sorted(keys, key=lambda k: order[(rank, k)]):
            kind, fields = converted[key]
            node = r.nodes[key]
            if kind != "collective":
                ops[key] = RankOp(key, kind, node.msg.name, (rank,), fields)
                continue
            group = r.group_of(node)
            comm = (group, str(node.attrs["pg_name"]) if "pg_name" in node.attrs else None)
            k = seq[(comm, rank)] = seq.get((comm, rank), -1) + 1
            ckey = ("coll", *comm, k)
            alias[key] = ckey
            mirrors = node.attrs.get("clustersim.mirrors")
            if ckey not in ops:
                if mirrors:
                    size = len(group)
                    fields = {
                        **fields,
                        "mirrors": [list(mirrors[i : i + size]) for i in range(0, len(mirrors), size)],
                    }
                ops[ckey] = RankOp(ckey, "collective", node.msg.name, group, {**fields, "group": list(group)})
                continue
            first = ops[ckey].fields
            mine = (fields["collective"], fields["size_bytes"])
            if (first["collective"], first["size_bytes"]) != mine:
                raise InputError(
                    f"node {node.msg.id}: collective #{k} of {_comm_text(comm)} is {mine[0]} of {mine[1]:g} "
                    f"bytes here but {first['collective']} of {first['size_bytes']:g} bytes on another "
                    "member; expected the same collective on every member",
                    file=node.path,
                )
    most: dict[tuple[tuple[int, ...], str | None], int] = {}
    for (comm, _), c in seq.items():
        most[comm] = max(most.get(comm, c), c)
    for comm, c in most.items():
        for rank in comm[0]:
            # a rank with an empty file is not simulated (a generated program's mirrored rank)
            if r.by_rank[rank] and seq.get((comm, rank), -1) != c:
                raise InputError(
                    f"rank {rank} runs {seq.get((comm, rank), -1) + 1} collectives of {_comm_text(comm)}, "
                    f"another member {c + 1}; expected the same number on every member",
                    file=r.paths[rank],
                )
    return alias, ops


def _comm_text(comm: tuple[tuple[int, ...], str | None]) -> str:
    group, pg = comm
    return f"group {list(group)}" + (f" (process group {pg})" if pg is not None else "")


def _pair_tags(r: _Reader, converted: dict, order: dict) -> None:
    """The n-th send of a pair must carry the tag of the n-th recv."""
    tags: dict[tuple[str, int, int], list[tuple[int, _Node]]] = {}
    for rank, keys in r.by_rank.items():
        for key in sorted(keys, key=lambda k: order[(rank, k)]):
            kind, fields = converted[key]
            if kind in ("send", "recv"):
                pair = (rank, fields["peer"]) if kind == "send" else (fields["peer"], rank)
                node = r.nodes[key]
                tags.setdefault((kind, *pair), []).append((int(_attr(node, "comm_tag", whole=True)), node))
    for (kind, a, b), sends in tags.items():
        if kind != "send":
            continue
        for (stag, _), (rtag, rnode) in zip(sends, tags.get(("recv", a, b), []), strict=False):
            if stag != rtag:
                raise InputError(
                    f"node {rnode.msg.id}: recv from rank {a} with tag {rtag} meets a send with tag {stag}; "
                    "expected sends and recvs of a pair in the same order",
                    file=rnode.path,
                )


def _set_deps(r: _Reader, ops: dict[Any, RankOp], alias: dict, order: dict) -> None:
    """Deps of every op; a ctrl dep on the previous op of the same stream is implicit."""
    prev: dict[tuple[int, Any], Any] = {}
    for rank, keys in r.by_rank.items():
        last: dict[str, Any] = {}
        for key in sorted(keys, key=lambda k: order[(rank, k)]):
            op = ops[alias.get(key, key)]
            prev[(rank, key)] = last.get(op.stream)
            last[op.stream] = key
    for rank, keys in r.by_rank.items():
        for key in keys:
            node = r.nodes[key]
            op = ops[alias.get(key, key)]
            deps = [(rank, d) for d in node.msg.data_deps]
            deps += [(rank, d) for d in node.msg.ctrl_deps if (rank, d) != prev[(rank, key)]]
            for ref in node.attrs.get("clustersim.remote_deps", []):
                rr, _, nid = str(ref).partition(":")
                target = (int(rr), int(nid)) if rr.isdigit() and nid.isdigit() else None
                if target is None or target not in r.nodes:
                    raise InputError(
                        f"node {node.msg.id}: remote dependency {ref!r} names no node; expected RANK:NODE_ID",
                        file=node.path,
                    )
                deps.append(target)
            op.deps.extend(alias.get(d, d) for d in deps)
    for op in ops.values():
        op.deps = list(dict.fromkeys(op.deps))
