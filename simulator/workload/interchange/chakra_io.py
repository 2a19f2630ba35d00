"""Chakra execution trace files: framing, attributes and the rank files of a trace folder.

A Chakra ET file holds one rank's trace: a `GlobalMetadata` message, then `Node` messages,
each preceded by its length as a base-128 varint (the framing of Chakra's `protolib`
encoder, which ASTRA-sim's feeder reads). Rank files are named `PREFIX.RANK.et`.

Attribute names clustersim reads are those ASTRA-sim uses (`num_ops`, `tensor_size`,
`comm_type`, `comm_size`, `comm_src`, `comm_dst`, `comm_tag`, `pg_name`, `is_cpu_op`),
plus `clustersim.*` attributes the exporter writes for exactness (durations in seconds as
doubles, stream, tag, group ranks); other tools ignore attributes they do not know.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError

from simulator.config.loader import check_regular_file
from simulator.errors import InputError
from simulator.io import write_atomic
from simulator.workload.interchange import chakra_et_pb2 as pb

RANK_FILE = re.compile(r"^(?P<prefix>.*?)\.?(?P<rank>\d+)\.et$")
SCHEMA_VERSION = "0.0.4"


def encode_varint(value: int) -> bytes:
    """`value` (>= 0) as a base-128 varint, least significant group first."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _decode_varint(buf: bytes, pos: int) -> tuple[int, int] | None:
    """(value, next position) of the varint at `pos`, or None if the buffer ends inside it."""
    result = shift = 0
    while pos < len(buf):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    return None


def et_bytes(metadata: pb.GlobalMetadata, nodes: Iterable[pb.Node]) -> bytes:
    """One rank's ET file: metadata, then each node, each length-prefixed."""
    parts: list[bytes] = []
    messages: list[pb.GlobalMetadata | pb.Node] = [metadata, *nodes]
    for msg in messages:
        data = msg.SerializeToString(deterministic=True)
        parts.append(encode_varint(len(data)))
        parts.append(data)
    return b"".join(parts)


def write_et(path: Path, metadata: pb.GlobalMetadata, nodes: Iterable[pb.Node]) -> None:
    """Write one rank's ET file (`et_bytes`) through a temporary sibling."""
    write_atomic(path, et_bytes(metadata, nodes))


def read_et(path: Path) -> tuple[pb.GlobalMetadata, list[pb.Node]]:
    """Read one rank's ET file.

    Raises:
        InputError: naming the file and the record (metadata, or the node after node id N)
            when a length prefix or message is cut short or does not parse.
    """
    check_regular_file(path)
    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", file=path) from None
    pos = 0
    meta = pb.GlobalMetadata()
    nodes: list[pb.Node] = []
    while pos < len(buf):
        where = "global metadata" if pos == 0 else _after(nodes)
        head = _decode_varint(buf, pos)
        if head is None or head[1] + head[0] > len(buf):
            _refuse_other_format(buf, pos, path)
            raise InputError(
                f"{where}: file ends inside a record (truncated protobuf); expected a "
                "varint length followed by that many bytes",
                file=path,
            )
        size, start = head
        msg: Any = meta if pos == 0 else pb.Node()
        try:
            msg.ParseFromString(buf[start : start + size])
        except DecodeError as exc:
            _refuse_other_format(buf, pos, path)
            raise InputError(
                f"{where}: not a Chakra {type(msg).__name__} message ({exc})", file=path
            ) from None
        if pos:
            nodes.append(msg)
        pos = start + size
    if pos == 0:
        raise InputError("empty file; expected a Chakra ET file (global metadata, then nodes)", file=path)
    return meta, nodes


#: the first bytes of formats mistaken for an ET file, and what to say of them
_OTHER_FORMATS = (
    (b"{", "it is JSON (a PyTorch profiler trace goes to `clustersim import kineto`)"),
    (b"[", "it is JSON (a PyTorch profiler trace goes to `clustersim import kineto`)"),
    (b"\x1f\x8b", "it is gzip-compressed (a .json.gz profiler trace goes to `clustersim import kineto`)"),
    (b"\x89PNG", "it is a PNG image"),
    (b"%PDF", "it is a PDF document"),
    (b"PK\x03\x04", "it is a zip archive (unpack it first)"),
)


def _refuse_other_format(buf: bytes, pos: int, path: Path) -> None:
    """When the first record of `buf` does not parse: if the file starts like another format,
    say which. A JSON document opens with '{' or '[' (after whitespace): read as a varint
    length, those bytes announce a record of 123 or 91 bytes, which was the misleading
    'truncated protobuf'.

    Raises:
        InputError: `not a Chakra ET file: it is ...`.
    """
    if pos:
        return
    start = buf.lstrip(b" \t\r\n")
    for magic, what in _OTHER_FORMATS:
        if (start if magic in (b"{", b"[") else buf).startswith(magic):
            raise InputError(f"not a Chakra ET file: {what}", file=path)


def _after(nodes: list[pb.Node]) -> str:
    return f"node after node id {nodes[-1].id}" if nodes else "first node"


def rank_files(folder: Path) -> list[tuple[int, Path]]:
    """The `PREFIX.RANK.et` files of `folder`, by rank; ranks must be 0..n-1, each given by
    one file, and one prefix."""
    if not folder.is_dir():
        raise InputError("expected a folder of Chakra ET files (PREFIX.RANK.et)", file=folder)
    found: dict[int, Path] = {}
    prefixes: set[str] = set()
    for p in sorted(folder.iterdir()):
        m = RANK_FILE.match(p.name)
        if m is None or not p.is_file():
            continue
        rank = int(m.group("rank"))
        prefixes.add(m.group("prefix"))
        if rank in found:  # PREFIX.3.et and PREFIX.03.et: which one is rank 3 is not for us to pick
            raise InputError(
                f"rank {rank} is also the rank of {found[rank].name}; expected one file per rank", file=p
            )
        found[rank] = p
    if not found:
        raise InputError("no Chakra ET files (PREFIX.RANK.et) in this folder", file=folder)
    if len(prefixes) > 1:
        raise InputError(
            f"ET files with several prefixes {sorted(prefixes)}; keep one trace per folder", file=folder
        )
    missing = sorted(set(range(len(found))) - set(found))
    if missing:
        raise InputError(f"ranks must be 0..{len(found) - 1}; no file for rank {missing[0]}", file=folder)
    return sorted(found.items())


def attr_value(attr: pb.AttributeProto) -> Any:
    """The Python value of an attribute (a list for the *_list kinds), or None if unset."""
    kind = attr.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(attr, kind)
    return list(value.values) if kind.endswith("_list") else value


def attrs_of(msg: pb.Node | pb.GlobalMetadata) -> dict[str, Any]:
    """All attributes of a node or metadata, by name."""
    return {a.name: attr_value(a) for a in msg.attr}


def make_attr(name: str, value: Any) -> pb.AttributeProto:
    """An attribute holding `value`: bool, int (int64), float (double), str, or a list of ints/strs."""
    if isinstance(value, bool):
        return pb.AttributeProto(name=name, bool_val=value)
    if isinstance(value, int):
        return pb.AttributeProto(name=name, int64_val=value)
    if isinstance(value, float):
        return pb.AttributeProto(name=name, double_val=value)
    if isinstance(value, str):
        return pb.AttributeProto(name=name, string_val=value)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return pb.AttributeProto(name=name, string_list=pb.StringList(values=list(value)))
    if isinstance(value, list | tuple):
        return pb.AttributeProto(name=name, int64_list=pb.Int64List(values=[int(v) for v in value]))
    raise TypeError(f"attribute {name!r}: unsupported value type {type(value).__name__}")
