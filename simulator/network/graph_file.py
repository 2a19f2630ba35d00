"""Graph files a user brings (node-link JSON or GraphML), read with the line of every
node and edge, checked element by element, and built into a topology graph.

What is modelled: a graph file describes a simple undirected graph of full-duplex links.
Every problem is reported as `file:line: nodes.I.attr: message` (or `links.I.attr`,
`edges.I.attr`), naming the line of the offending node or edge: a directed graph or
multigraph, a self-loop, two edges between the same two nodes, an edge to a node the
file does not list, a node listed twice, a GPU without `node` or `local_rank`, two GPUs of
one server with the same `local_rank`, and a bandwidth or latency that is missing, not a
number, not finite or outside physical limits.

What is simplified: GraphML is read with the standard library's expat parser (no DTDs or
entities, which GraphML does not need); a `<data>` value is converted by the type its
`<key>` declares. JSON is parsed by the YAML line loader (JSON is YAML) after a strict
JSON syntax check, so that every element keeps its line.
"""

from __future__ import annotations

import json
import math
import xml.parsers.expat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from simulator.config.loader import parse_text, read_text
from simulator.errors import InputError
from simulator.network.graph import MEDIA, NODE_KINDS
from simulator.units import UnitsError, physical_limit_error, to_si


@dataclass
class Element:
    """One node or edge of a graph file: its attributes and where it is written."""

    attrs: dict[str, Any]
    line: int | None
    field: str
    ends: tuple[Any, Any] = (None, None)


@dataclass
class GraphFile:
    """A graph file read as it is written, before any check."""

    path: Path
    nodes: list[Element] = field(default_factory=list)
    edges: list[Element] = field(default_factory=list)
    directed: bool = False
    multigraph: bool = False
    line: int | None = None

    def error(self, message: str, element: Element | None = None, attr: str | None = None) -> InputError:
        where = None if element is None else element.field + (f".{attr}" if attr else "")
        return InputError(
            message, file=self.path, line=self.line if element is None else element.line, field=where
        )


def _read_json(path: Path) -> GraphFile:
    text = read_text(path)
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
    except RecursionError:
        raise InputError("malformed JSON: nested too deeply", file=path) from None
    doc = parse_text(text, path)
    data = doc.data
    if not isinstance(data, dict):
        raise InputError("expected a node-link JSON object with 'nodes' and 'links'", file=path, line=1)
    gf = GraphFile(path, directed=data.get("directed", False), multigraph=data.get("multigraph", False))
    gf.line = doc.line_of(("directed",)) or 1
    edge_key = "links" if "links" in data else "edges"
    for key in ("nodes", edge_key):
        if not isinstance(data.get(key), list):
            raise doc.error(f"expected a list of {key}", (key,))
    for i, n in enumerate(data["nodes"]):
        if not isinstance(n, dict) or "id" not in n:
            raise doc.error("expected a mapping with an 'id'", ("nodes", i))
        attrs = {k: v for k, v in n.items() if k != "id"}
        gf.nodes.append(Element(attrs, doc.line_of(("nodes", i)), f"nodes.{i}", (n["id"], None)))
    for i, e in enumerate(data[edge_key]):
        if not isinstance(e, dict) or "source" not in e or "target" not in e:
            raise doc.error("expected a mapping with 'source' and 'target'", (edge_key, i))
        attrs = {k: v for k, v in e.items() if k not in ("source", "target", "key")}
        gf.edges.append(
            Element(attrs, doc.line_of((edge_key, i)), f"{edge_key}.{i}", (e["source"], e["target"]))
        )
    return gf


_GRAPHML_TYPES = {"int": int, "long": int, "float": float, "double": float, "string": str}


class _GraphMLReader:
    """Collect nodes, edges and their `<data>` from GraphML with the line of each element."""

    def __init__(self, path: Path) -> None:
        self.gf = GraphFile(path)
        self.keys: dict[str, tuple[str, str]] = {}  # key id -> (attribute name, type)
        self.current: Element | None = None
        self.data_key: str | None = None
        self.text: list[str] = []
        self.parser = xml.parsers.expat.ParserCreate()
        self.parser.StartElementHandler = self.start
        self.parser.EndElementHandler = self.end
        self.parser.CharacterDataHandler = self.text.append
        self.parser.StartDoctypeDeclHandler = self.doctype

    def doctype(self, *_args: Any) -> None:
        raise InputError("GraphML with a DOCTYPE is not read", file=self.gf.path, line=self.line())

    def line(self) -> int:
        return int(self.parser.CurrentLineNumber)

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        tag = tag.rsplit(":", 1)[-1]
        if tag == "key":
            self.keys[attrs.get("id", "")] = (
                attrs.get("attr.name", attrs.get("id", "")),
                attrs.get("attr.type", "string"),
            )
        elif tag == "graph":
            self.gf.directed = attrs.get("edgedefault", "directed") == "directed"
            self.gf.line = self.line()
        elif tag == "node":
            i = len(self.gf.nodes)
            self.current = Element({}, self.line(), f"nodes.{i}", (attrs.get("id"), None))
            self.gf.nodes.append(self.current)
        elif tag == "edge":
            i = len(self.gf.edges)
            self.current = Element({}, self.line(), f"edges.{i}", (attrs.get("source"), attrs.get("target")))
            if "directed" in attrs:
                self.current.attrs["directed"] = attrs["directed"]
            self.gf.edges.append(self.current)
        elif tag == "data":
            self.data_key = attrs.get("key", "")
            self.text.clear()

    def end(self, tag: str) -> None:
        tag = tag.rsplit(":", 1)[-1]
        if tag == "data" and self.current is not None and self.data_key is not None:
            name, kind = self.keys.get(self.data_key, (self.data_key, "string"))
            raw = "".join(self.text).strip()
            if name in self.current.attrs:
                raise self.gf.error("attribute given twice", self.current, name)
            self.current.attrs[name] = self._convert(raw, kind, name)
            self.data_key = None
        elif tag in ("node", "edge"):
            self.current = None

    def _convert(self, raw: str, kind: str, name: str) -> Any:
        if kind == "boolean":
            return raw.lower() in ("true", "1")
        try:
            return _GRAPHML_TYPES.get(kind, str)(raw)
        except ValueError:
            raise self.gf.error(f"expected a {kind}, found {raw!r}", self.current, name) from None

    def read(self) -> GraphFile:
        text = read_text(self.gf.path)
        try:
            self.parser.Parse(text.encode("utf-8"), True)
        except xml.parsers.expat.ExpatError as exc:
            msg = xml.parsers.expat.ErrorString(exc.code)
            raise InputError(f"malformed GraphML: {msg}", file=self.gf.path, line=exc.lineno) from None
        if self.gf.line is None:
            raise InputError("malformed GraphML: no <graph> element", file=self.gf.path, line=1)
        return self.gf


def _number(gf: GraphFile, el: Element, attr: str) -> float:
    value = el.attrs[attr]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise gf.error(f"expected a number, found {value!r}", el, attr)
    if not math.isfinite(value):
        raise gf.error(f"must be a finite number, found {value!r}", el, attr)
    return float(value)


def _check_nodes(gf: GraphFile) -> dict[Any, Element]:
    by_id: dict[Any, Element] = {}
    ranks: dict[tuple[Any, int], Element] = {}
    for el in gf.nodes:
        nid = el.ends[0]
        if nid in by_id:
            raise gf.error(f"node {nid!r} is listed twice (first on line {by_id[nid].line})", el, "id")
        by_id[nid] = el
        kind = el.attrs.get("kind")
        if kind not in NODE_KINDS:
            raise gf.error(
                f"node {nid!r} has kind {kind!r}; expected one of {sorted(NODE_KINDS)}", el, "kind"
            )
        for attr in ("local_rank", "tier", "rail", "ports"):
            if attr in el.attrs:
                v = el.attrs[attr]
                if (
                    isinstance(v, bool)
                    or not isinstance(v, int)
                    and not (isinstance(v, float) and v.is_integer())
                ):
                    raise gf.error(f"expected a whole number, found {v!r}", el, attr)
                if v < 0:
                    raise gf.error(f"must be >= 0, found {v!r}", el, attr)
                el.attrs[attr] = int(v)
        for attr in ("write_bandwidth_bytes_per_s", "read_bandwidth_bytes_per_s"):
            if attr in el.attrs:
                _bounded(gf, el, attr, _number(gf, el, attr), positive=True)
        if kind == "gpu":
            for attr in ("node", "local_rank"):
                if attr not in el.attrs:
                    raise gf.error(f"GPU {nid!r} needs '{attr}' (its server and index in it)", el, attr)
            slot = (el.attrs["node"], el.attrs["local_rank"])
            if slot in ranks:
                raise gf.error(
                    f"GPU {nid!r} has the local_rank of GPU {ranks[slot].ends[0]!r} "
                    f"(line {ranks[slot].line}) in server {slot[0]!r}",
                    el,
                    "local_rank",
                )
            ranks[slot] = el
    return by_id


def _bounded(gf: GraphFile, el: Element, attr: str, value: float, positive: bool) -> None:
    if value < 0 or (positive and value == 0):
        raise gf.error(f"must be {'> 0' if positive else '>= 0'}, found {value!r}", el, attr)
    if err := physical_limit_error(attr, value):
        raise gf.error(err, el, attr)


def _check_edge(
    gf: GraphFile, el: Element, by_id: dict[Any, Element], seen: dict[frozenset, Element]
) -> None:
    u, v = el.ends
    if str(el.attrs.pop("directed", "false")).lower() == "true":
        raise gf.error("directed edge; links are full duplex, give one undirected edge", el)
    for end in (u, v):
        if end not in by_id:
            raise gf.error(f"edge names node {end!r}, which the file does not list", el)
    if u == v:
        raise gf.error(f"self-loop on {u!r}; a link joins two different nodes", el)
    pair = frozenset((u, v))
    if pair in seen:
        raise gf.error(
            f"second edge between {u!r} and {v!r} (first on line {seen[pair].line}); "
            "give one edge with the summed bandwidth",
            el,
        )
    seen[pair] = el
    try:
        si = to_si(el.attrs, "bandwidth_bytes_per_s", "latency_s")
    except UnitsError as exc:
        raise gf.error(exc.message, el, exc.field) from None
    if "bandwidth_bytes_per_s" not in si:
        raise gf.error(
            "edge needs a bandwidth (bandwidth_gbps or bandwidth_bytes_per_s)", el, "bandwidth_gbps"
        )
    for name, positive in (("bandwidth_bytes_per_s", True), ("latency_s", False)):
        if name in si:
            tmp = Element(si, el.line, el.field, el.ends)
            _bounded(gf, el, name, _number(gf, tmp, name), positive)
    si.setdefault("latency_s", 0.0)
    if si.get("medium") not in MEDIA:
        raise gf.error(f"medium {si.get('medium')!r}; expected one of {sorted(MEDIA)}", el, "medium")
    el.attrs = si


def read_graph_file(path: Path, fmt: str) -> nx.Graph:
    """Read, check and build the graph file `path` (format `graphml` or `node_link`).

    Raises:
        InputError: the first problem of the file, with its line and field path.
    """
    gf = _GraphMLReader(path).read() if fmt == "graphml" else _read_json(path)
    if gf.directed is not False:
        raise gf.error("directed graph; links are full duplex, give an undirected graph")
    if gf.multigraph is not False:
        raise gf.error("multigraph; give one edge per pair of nodes, with the summed bandwidth")
    by_id = _check_nodes(gf)
    seen: dict[frozenset, Element] = {}
    for el in gf.edges:
        _check_edge(gf, el, by_id, seen)
    g = nx.Graph()
    for el in gf.nodes:
        g.add_node(el.ends[0], **el.attrs)
    for el in gf.edges:
        u, v = el.ends
        g.add_edge(u, v, **el.attrs)
    return g
