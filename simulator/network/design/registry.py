"""The registry of topology generators: generator name -> spec class and graph builder.

What is modelled: every generator a topology file may name with `generator: <name>`, the
spec its parameters validate against (discriminated by that tag) and the builder that
turns the spec into a graph following `simulator.network.graph`. A *design* is a
generator whose spec also carries the file's name, GPU file and optional storage, so a
design file can be read on its own (`load_design_file`); the other generators are read
through `simulator.network.topology`, which supplies those keys.

What is simplified: a spec class belongs to exactly one generator; nothing is looked up
by import path or loaded lazily.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union, get_args

import networkx as nx
from pydantic import Field, RootModel, TypeAdapter

from simulator.config.base import Spec
from simulator.config.loader import Document, load, read_document, validate
from simulator.errors import InputError
from simulator.network.design.clos import (
    FatTreeSpec,
    MI300XClusterSpec,
    MultiPlaneFatTreeSpec,
    RailClosSpec,
    RailOnlySpec,
    SuperPodSpec,
    SwitchSpec,
    build_fat_tree,
    build_mi300x_cluster,
    build_multiplane_fattree,
    build_rail_clos,
    build_rail_only,
    build_superpod,
    build_switch,
)
from simulator.network.design.direct import DragonflySpec, TorusSpec, build_dragonfly, build_torus
from simulator.network.design.rail_optimized import RailOptimizedClosSpec, build_rail_optimized_clos
from simulator.network.design.scale_up import (
    NVSwitchNodeSpec,
    PCIeNodeSpec,
    XGMIMeshSpec,
    build_nvswitch_node,
    build_pcie_node,
    build_xgmi_mesh,
)
from simulator.network.design.spec import DesignSpecBase
from simulator.network.graph import validate_graph
from simulator.network.hardware import GPUSpec


@dataclass(frozen=True, slots=True)
class Generator:
    """A topology generator.

    Attributes:
        spec: the spec class its parameters validate against; its `generator` field is a
            one-value literal, the generator's name.
        build: builds the graph from a validated spec and the GPU model (stored as
            `g.graph["gpu"]` when given).
    """

    spec: type[Spec]
    build: Callable[[Any, GPUSpec | None], nx.Graph]

    @property
    def name(self) -> str:
        """The `generator` tag that selects it."""
        tag: str = get_args(self.spec.model_fields["generator"].annotation)[0]
        return tag


_GENERATOR_LIST = (
    Generator(SwitchSpec, build_switch),
    Generator(NVSwitchNodeSpec, build_nvswitch_node),
    Generator(XGMIMeshSpec, build_xgmi_mesh),
    Generator(RailClosSpec, build_rail_clos),
    Generator(SuperPodSpec, build_superpod),
    Generator(MI300XClusterSpec, build_mi300x_cluster),
    Generator(RailOnlySpec, build_rail_only),
    Generator(RailOptimizedClosSpec, build_rail_optimized_clos),
    Generator(MultiPlaneFatTreeSpec, build_multiplane_fattree),
    Generator(FatTreeSpec, build_fat_tree),
    Generator(TorusSpec, build_torus),
    Generator(DragonflySpec, build_dragonfly),
    Generator(PCIeNodeSpec, build_pcie_node),
)
GENERATORS: dict[str, Generator] = {gen.name: gen for gen in _GENERATOR_LIST}
GENERATOR_SPECS: tuple[type[Spec], ...] = tuple(gen.spec for gen in _GENERATOR_LIST)
_BUILDER_OF_SPEC = {gen.spec: gen.build for gen in _GENERATOR_LIST}

DESIGN_SPECS: tuple[type[DesignSpecBase], ...] = (
    SuperPodSpec,
    MI300XClusterSpec,
    RailOnlySpec,
    RailOptimizedClosSpec,
    MultiPlaneFatTreeSpec,
    FatTreeSpec,
    TorusSpec,
    DragonflySpec,
    PCIeNodeSpec,
)

DesignSpec = Annotated[
    SuperPodSpec
    | MI300XClusterSpec
    | RailOnlySpec
    | RailOptimizedClosSpec
    | MultiPlaneFatTreeSpec
    | FatTreeSpec
    | TorusSpec
    | DragonflySpec
    | PCIeNodeSpec,
    Field(discriminator="generator"),
]


class DesignFile(RootModel[DesignSpec]):
    """A topology file naming one of the designs by its `generator` tag."""


_AnyGeneratorSpec = Annotated[Union[GENERATOR_SPECS], Field(discriminator="generator")]  # type: ignore[valid-type]  # noqa: UP007
_GENERATOR_SPEC_ADAPTER: TypeAdapter[Any] = TypeAdapter(_AnyGeneratorSpec)


def generator_names() -> list[str]:
    """Names of every registered generator, sorted."""
    return sorted(GENERATORS)


def parse_generator_spec(doc: Document) -> Spec:
    """Validate generator parameters (`generator: <name>` and its keys) into that generator's spec.

    Raises:
        InputError: unknown generator or invalid parameter, with file, line and field.
    """
    spec: Spec = validate(_GENERATOR_SPEC_ADAPTER, doc)
    return spec


def build_design(spec: Spec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build the graph of any registered generator spec.

    Args:
        spec: a validated generator spec.
        gpu: the GPU model; stored as `g.graph["gpu"]`.

    Raises:
        InputError: the parameters cannot be built (e.g. too few switch ports).
        TypeError: `spec` is not the spec of a registered generator.
    """
    builder = _BUILDER_OF_SPEC.get(type(spec))
    if builder is None:
        raise TypeError(f"not a generator spec: {type(spec).__name__}")
    return builder(spec, gpu)


def load_design_file(path: str | Path) -> tuple[DesignSpecBase, GPUSpec]:
    """Read a topology file naming one of the designs; resolve and load its GPU file.

    The file is flat: `generator: <tag>`, the design's parameters, and
    `gpu: {file: gpus/h100-sxm.yaml}` resolved relative to the topology file.

    Raises:
        InputError: the file, its GPU file, or a parameter is invalid.
    """
    doc = read_document(path)
    spec: DesignSpecBase = validate(DesignFile, doc).root
    if spec.gpu is None:
        raise doc.error("required field is missing (e.g. gpu: {file: gpus/h100-sxm.yaml})", ("gpu",))
    gpu = load(GPUSpec, doc.path.parent / spec.gpu.file)
    if spec.name is None:
        spec = spec.model_copy(update={"name": doc.path.stem})
    return spec, gpu


def build_design_file(path: str | Path) -> nx.Graph:
    """Load a design topology file, build its graph and check the graph conventions.

    Raises:
        InputError: the file is invalid or its parameters cannot be built; names the file.
    """
    spec, gpu = load_design_file(path)
    try:
        g = build_design(spec, gpu)
    except InputError as exc:
        raise InputError(exc.message, file=path, field=exc.field) from None
    validate_graph(g, str(path))
    return g
