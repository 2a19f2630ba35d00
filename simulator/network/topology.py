"""Topology files: a generator and its parameters, or a graph file a user brings.

```yaml
name: h100-rail-clos-2n
gpu: {file: gpus/h100-sxm.yaml}     # resolved relative to this file
generator: rail_clos                 # tag; the remaining keys are the generator's
nodes: 2
```

or `graph: {file: my-cluster.graphml}` (GraphML or node-link JSON) whose nodes carry `kind`
and whose edges carry `bandwidth_bytes_per_s` (or `bandwidth_gbps`, Gbit/s), `latency_s`
(or `latency_us`) and `medium`; `simulator.network.graph_file` reads and checks it.

A generator is looked up by name in `simulator.network.design.registry`. What is
simplified: a graph file is a simple undirected graph (two edges between the same nodes
are an error; give one with the sum of their bandwidths instead).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from pydantic import Field

from simulator.config.base import FileRef, Spec
from simulator.config.loader import Document, check_file_kind, not_a_file, read_document, validate
from simulator.errors import InputError
from simulator.network.design.registry import build_design, generator_names, parse_generator_spec
from simulator.network.graph import validate_graph
from simulator.network.graph_file import read_graph_file
from simulator.network.hardware import GPUSpec


class GraphFileSpec(Spec):
    """A graph a user brings: GraphML or node-link JSON."""

    file: str = Field(description="GraphML (.graphml) or node-link JSON (.json) file, relative path.")
    format: Literal["auto", "graphml", "node_link"] = Field(
        "auto", description="File format; 'auto' decides by extension."
    )


class TopologyHeader(Spec):
    """Keys every topology file has besides its generator parameters."""

    name: str = Field(description="Topology name, shown in results.")
    description: str = Field("", description="Free text: what real system this follows.")
    gpu: FileRef | GPUSpec = Field(description="GPU spec: `{file: gpus/h100-sxm.yaml}` or inline.")
    graph: GraphFileSpec | None = Field(None, description="A graph file instead of a generator.")


_HEADER_KEYS = set(TopologyHeader.model_fields)


class Topology:
    """A loaded topology: its graph, GPU spec and where it came from."""

    def __init__(self, name: str, graph: nx.Graph, gpu: GPUSpec, source: str, spec: Any) -> None:
        self.name, self.graph, self.gpu, self.source, self.spec = name, graph, gpu, source, spec


def resolve(base: Path, ref: str) -> Path:
    """Resolve a file reference relative to the file that names it."""
    p = Path(ref).expanduser()
    return p if p.is_absolute() else Path(os.path.normpath(base.parent / p))


def load_gpu(ref: FileRef | GPUSpec, base: Path) -> GPUSpec:
    """The GPU spec given inline, or loaded from the file `ref` names relative to `base`."""
    if isinstance(ref, GPUSpec):
        return ref
    doc = read_document(resolve(base, ref.file))
    check_file_kind(doc, "GPU")
    return validate(GPUSpec, doc)


def _check_named_file(doc: Document, ref: str, loc: tuple[str, ...]) -> None:
    """That the file `ref` names (relative to `doc`'s file) exists and is a file.

    Raises:
        InputError: one line at the key naming it (`gpu.file`, `graph.file`), the path as
            resolved, rather than a line about the missing file alone.
    """
    problem = not_a_file(resolve(doc.path, ref), " (resolved relative to the topology file)")
    if problem:
        raise doc.error(problem, loc)


def _read_graph(spec: GraphFileSpec, base: Path) -> nx.Graph:
    path = resolve(base, spec.file)
    fmt = spec.format
    if fmt == "auto":
        fmt = "graphml" if path.suffix.lower() == ".graphml" else "node_link"
    g = read_graph_file(path, fmt)
    validate_graph(g, source=str(path))
    return g


def load_topology(path: str | Path, doc: Document | None = None) -> Topology:
    """Load, build and validate a topology file."""
    doc = doc or read_document(path)
    check_file_kind(doc, "topology")
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error("expected a mapping with name, gpu and a generator or graph")
    header_data = {k: v for k, v in data.items() if k in _HEADER_KEYS}
    header = validate(TopologyHeader, doc.with_data(header_data))
    if isinstance(header.gpu, FileRef):
        _check_named_file(doc, header.gpu.file, ("gpu", "file"))
    if header.graph is not None:
        _check_named_file(doc, header.graph.file, ("graph", "file"))
    gpu = load_gpu(header.gpu, doc.path)
    params = {k: v for k, v in data.items() if k not in _HEADER_KEYS}
    if header.graph is not None:
        if params:
            key = sorted(params)[0]
            raise doc.error("a graph-file topology takes no generator parameters", (key,))
        g = _read_graph(header.graph, doc.path)
        g.graph.setdefault("gpu", gpu)
        g.graph["name"] = header.name
        return Topology(header.name, g, gpu, str(doc.path), header.graph)
    if "generator" not in params:
        raise doc.error(f"missing 'generator' (one of {generator_names()}) or 'graph: {{file: ...}}'")
    spec = parse_generator_spec(doc.with_data(params))
    try:
        g = build_design(spec, gpu)
    except InputError as exc:  # the parameters cannot be built: placed at the field it names
        if exc.file is not None:
            raise
        raise doc.error(exc.message, (exc.field,) if exc.field else ()) from None
    g.graph["name"] = header.name
    g.graph["gpu"] = gpu
    g.graph["nic"] = getattr(spec, "nic", None)
    validate_graph(g, source=str(doc.path))
    return Topology(header.name, g, gpu, str(doc.path), spec)
