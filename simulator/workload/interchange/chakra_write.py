"""Write a step program as a Chakra execution trace (one `PREFIX.RANK.et` file per rank).

Mapping (the inverse of `chakra_read`):

* compute op -> `COMP_NODE` with `duration_micros` (rounded, for ASTRA-sim) and the exact
  `clustersim.duration_s`, or, when the op is priced by the cost model, `num_ops` /
  `tensor_size` (FLOPs and bytes, `clustersim.flops` / `clustersim.bytes` exactly) and
  `duration_micros` priced on the exporting scenario's GPU for tools that read only that;
* collective -> one `COMM_COLL_NODE` per member rank (`comm_type`, `comm_size`, `pg_name`
  naming a group of `comm_group.json`, as ASTRA-sim reads it, numbered from 1 since
  ASTRA-sim takes `pg_name` "0" for the communicator of all ranks; `clustersim.group` with
  the ranks);
* matched send/recv -> `COMM_SEND_NODE` on the sender and `COMM_RECV_NODE` on the receiver
  (`comm_src`, `comm_dst`, `comm_tag` counting the pair's transfers, `comm_size`);
* checkpoint -> `CHECKPOINT_NODE` with `clustersim.size_bytes` and `clustersim.target`.

Dependencies on an op of the same rank are `data_deps`; the order of ops on one (rank,
stream) is written as a `ctrl_deps` on the stream's previous op, since Chakra has no
streams. A dependency on another rank's op (Chakra has none) is kept in
`clustersim.remote_deps` as `RANK:NODE_ID`; other tools ignore it. Not written: the
weights and roles of ranks that stand for others (a generated program's representatives).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simulator.errors import InputError
from simulator.io import write_files_atomic
from simulator.workload.interchange import chakra_et_pb2 as pb
from simulator.workload.interchange.chakra_io import RANK_FILE, SCHEMA_VERSION, et_bytes, make_attr
from simulator.workload.program import Op, StepProgram

COMM_TYPES = {
    "all_reduce": pb.ALL_REDUCE,
    "reduce": pb.REDUCE,
    "all_gather": pb.ALL_GATHER,
    "broadcast": pb.BROADCAST,
    "all_to_all": pb.ALL_TO_ALL,
    "reduce_scatter": pb.REDUCE_SCATTER,
}


#: Value kinds of the attributes Chakra's feeder reads with a fixed accessor
#: (`et_feeder_node.cpp`: `int32_val()` for the peers and tag, `uint64_val()` for
#: `tensor_size`; an attribute stored as another kind reads as 0 there).
TYPED_ATTRS = {
    "comm_src": "int32_val",
    "comm_dst": "int32_val",
    "comm_tag": "int32_val",
    "tensor_size": "uint64_val",
}


def _attr(name: str, value: Any) -> pb.AttributeProto:
    """Attribute `name` holding `value`, of the kind Chakra's feeder reads it as."""
    kind = TYPED_ATTRS.get(name)
    if kind is None:
        return make_attr(name, value)
    attr = pb.AttributeProto(name=name)
    setattr(attr, kind, int(value))
    return attr


def _node_name(op: Op, rank: int) -> str:
    base, _, r = op.id.partition("@")
    return base if op.kind in ("compute", "checkpoint") and r == str(rank) else op.id


class _Writer:
    def __init__(self, program: StepProgram, duration_of: Callable[[Op], float | None] | None) -> None:
        self.program = program
        self.duration_of = duration_of
        self.n = len(program.rank_gpus)
        self.nodes: list[list[pb.Node]] = [[] for _ in range(self.n)]
        self.node_id: dict[tuple[str, int], int] = {}  # (op id, rank) -> node id on that rank
        self.ops = {op.id: op for op in program.ops}
        self.groups: dict[tuple[int, ...], int] = {}
        self.tags: dict[tuple[int, int], int] = {}

    def place(self) -> None:
        """Give every op instance its node id on each rank it runs on."""
        for op in self.program.ops:
            for r in op.ranks:
                self.node_id[(op.id, r)] = len(self.node_id)  # unique across ranks, simple to read

    def owner(self, op: Op, dep: Op) -> int:
        """The rank of `op` whose node carries dependency `dep`."""
        own = [r for r in op.ranks if r in dep.ranks]
        if op.kind == "p2p":
            return op.ranks[1] if op.ranks[1] in dep.ranks and op.ranks[0] not in dep.ranks else op.ranks[0]
        return own[0] if own else op.ranks[0]

    def write_nodes(self) -> None:
        last: dict[tuple[int, str], int] = {}
        for op in self.program.ops:
            local: dict[int, list[int]] = {r: [] for r in op.ranks}
            remote: dict[int, list[str]] = {r: [] for r in op.ranks}
            for d in op.deps:
                dep = self.ops[d]
                r = self.owner(op, dep)
                if r in dep.ranks:
                    local[r].append(self.node_id[(d, r)])
                else:
                    remote[r].append(f"{dep.ranks[0]}:{self.node_id[(d, dep.ranks[0])]}")
            for r in op.ranks:
                node = self.node(op, r)
                node.data_deps.extend(local[r])
                prev = last.get((r, op.stream))
                if prev is not None and prev not in local[r]:
                    node.ctrl_deps.append(prev)
                last[(r, op.stream)] = node.id
                if remote[r]:
                    node.attr.append(make_attr("clustersim.remote_deps", remote[r]))
                self.nodes[r].append(node)

    def node(self, op: Op, rank: int) -> pb.Node:
        node = pb.Node(id=self.node_id[(op.id, rank)], name=_node_name(op, rank))
        attrs: dict[str, object] = {"clustersim.stream": op.stream, "clustersim.tag": op.tag}
        if op.kind == "compute":
            node.type = pb.COMP_NODE
            duration = op.duration_s
            if duration is None and op.kernels and self.duration_of is not None:
                duration = self.duration_of(op)
            if duration is not None:
                node.duration_micros = round(duration * 1e6)
                attrs["clustersim.duration_s"] = float(duration)
            else:
                # priced from FLOPs and bytes: a reader of clustersim's attributes prices them on
                # its own GPU; tools that read only `duration_micros` (ASTRA-sim without its
                # roofline model) get the time on the exporting scenario's GPU, not zero
                if self.duration_of is not None:
                    priced = self.duration_of(op)
                    if priced is not None:
                        node.duration_micros = round(priced * 1e6)
                attrs.update(num_ops=round(op.flops), tensor_size=round(op.bytes_accessed))
                attrs.update(
                    {"clustersim.flops": float(op.flops), "clustersim.bytes": float(op.bytes_accessed)}
                )
            attrs.update({"is_cpu_op": False, "clustersim.dtype": op.dtype})
        elif op.kind == "collective":
            node.type = pb.COMM_COLL_NODE
            # from 1: ASTRA-sim runs a collective whose pg_name is "0" (or empty) over every rank
            pg = self.groups.setdefault(op.group, len(self.groups) + 1)
            attrs.update(comm_type=int(COMM_TYPES[str(op.collective)]), comm_size=round(op.size_bytes))
            attrs["is_cpu_op"] = False  # Chakra's feeder takes a node without it for a CPU op
            attrs.update(pg_name=str(pg))
            attrs["clustersim.group"] = list(op.group)
            attrs["clustersim.size_bytes"] = float(op.size_bytes)
            if op.mirrors:
                attrs["clustersim.mirrors"] = [r for m in op.mirrors for r in m]
            if op.algorithm:
                attrs["clustersim.algorithm"] = op.algorithm
        elif op.kind == "p2p":
            src, dst = op.ranks
            node.type = pb.COMM_SEND_NODE if rank == src else pb.COMM_RECV_NODE
            if rank == src:
                self.tags[(src, dst)] = self.tags.get((src, dst), -1) + 1
            attrs.update(
                comm_src=src, comm_dst=dst, comm_tag=self.tags[(src, dst)], comm_size=round(op.size_bytes)
            )
            attrs["is_cpu_op"] = False
            attrs["clustersim.size_bytes"] = float(op.size_bytes)
        else:  # checkpoint
            node.type = pb.CHECKPOINT_NODE
            attrs["clustersim.size_bytes"] = float(op.size_bytes)
            if op.target:
                attrs["clustersim.target"] = op.target
        node.attr.extend(_attr(k, v) for k, v in attrs.items())
        return node


def _counted(meta: pb.GlobalMetadata, n_nodes: int) -> pb.GlobalMetadata:
    """The metadata of one rank's file with its node count (`clustersim.nodes`): a file cut
    at a record boundary still parses, and the import checks the count."""
    out = pb.GlobalMetadata()
    out.CopyFrom(meta)
    out.attr.append(make_attr("clustersim.nodes", n_nodes))
    return out


def export_chakra(
    program: StepProgram,
    folder: Path,
    prefix: str = "trace",
    duration_of: Callable[[Op], float | None] | None = None,
) -> list[Path]:
    """Write `program` as Chakra ET files `folder/PREFIX.RANK.et` and `comm_group.json`.

    Args:
        duration_of: the time of a compute op priced per kernel (its kernels are not
            written); ops with a duration or FLOPs/bytes only are written as they are.

    Returns:
        The rank files, by rank.

    Raises:
        InputError: `folder` holds ET files of another trace (other ranks or another prefix),
            which an import of the folder would read as ranks of this one.
    """
    w = _Writer(program, duration_of)
    w.place()
    w.write_nodes()
    names = {f"{prefix}.{r}.et" for r in range(w.n)}
    stale = sorted(p.name for p in folder.glob("*.et") if RANK_FILE.match(p.name) and p.name not in names)
    if folder.is_dir() and stale:  # an importer would read them as ranks of this trace
        raise InputError(
            f"holds ET files this export would not replace ({', '.join(stale[:3])}"
            f"{', ...' if len(stale) > 3 else ''}); expected an empty folder or one holding this trace",
            file=folder,
        )
    folder.mkdir(parents=True, exist_ok=True)
    meta = pb.GlobalMetadata(version=SCHEMA_VERSION)
    meta.attr.extend(
        [
            make_attr("schema", f"Chakra v{SCHEMA_VERSION}"),
            make_attr("clustersim.name", program.name),
            make_attr("clustersim.placement", list(program.rank_gpus)),
            make_attr("clustersim.ranks", w.n),
        ]
    )
    meta.attr.extend(
        make_attr(f"clustersim.meta.{k}", v)
        for k, v in sorted(program.meta.items())
        if isinstance(v, int | float | str) and not isinstance(v, bool)
    )
    files = {
        folder / f"{prefix}.{r}.et": et_bytes(_counted(meta, len(w.nodes[r])), w.nodes[r]) for r in range(w.n)
    }
    groups = {str(pg): list(ranks) for ranks, pg in w.groups.items()}
    paths = list(files)
    files[folder / "comm_group.json"] = (json.dumps(groups, indent=1) + "\n").encode("utf-8")
    write_files_atomic(files)  # all or none: never a mix of this export and one before
    return paths
