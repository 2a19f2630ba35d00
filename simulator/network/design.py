"""Real cluster topology designs: one pydantic spec and one graph builder per design.

Each design follows a published system or paper (named in its spec's docstring) and
builds an undirected `networkx.Graph` that follows `simulator.network.graph` exactly:
GPUs `n{i}.gpu{j}`, NICs `n{i}.nic{j}` (with `node`, `local_rank`, `rail`), in-server
switches `n{i}.nvsw` / `n{i}.pcie{s}` (tier 0), scale-out switches at tier 1 (leaf, rail,
edge, router), tier 2 (spine, aggregation) and tier 3 (core), storage servers
`stor{i}` with NICs `stor{i}.nic{j}`.

Specs keep the human units of the YAML (`nic_gbps` in Gbit/s, `*_gbyte_per_s` in GB/s,
`*_latency_us` in microseconds); the builders convert to SI once.

Modeling choices shared by all designs:
    * Parallel cables between the same two switches become one edge whose bandwidth is
      the sum and whose `links` attribute counts the cables (cost estimates use it).
    * Edges carry `reach` (`dac` in-rack copper, `aoc` active optical cable within a row,
      `optics` transceivers plus fibre between tiers) so the cost model can price cables.
    * An in-server switch (4 NVSwitch chips of a DGX, several PCIe switches) is drawn as
      one tier-0 switch unless the design says otherwise; its ports are not priced.
    * Every builder records `g.graph["structure"]` with the bisection bandwidth derived
      from the structure (and the formula used), which `facts.py` reports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

import networkx as nx
from pydantic import Field, RootModel, model_validator

from simulator.config.base import Spec
from simulator.config.loader import load, read_document, validate
from simulator.errors import InputError
from simulator.network.graph import validate_graph
from simulator.network.hardware import GPUSpec

GBIT_BYTES = 1e9 / 8  # bytes/s in one Gbit/s
GBYTE_BYTES = 1e9  # bytes/s in one GB/s
US_S = 1e-6


# ----------------------------------------------------------------------------- specs


class FileRef(Spec):
    """A reference to another input file."""

    file: str = Field(description="Path of the file, relative to the file that names it.")


class StorageSpec(Spec):
    """Storage servers attached to the scale-out network.

    Each server is a `storage` node `stor{i}` with `nics_per_node` NICs `stor{i}.nic{j}`
    (PCIe to the server, then one link to a switch). With `attach: top` the NICs are
    spread round-robin over the highest switch tier (spines or cores); with `attach: leaf`
    over the tier-1 switches (adding ports to them). A design without switches (torus)
    gets one frontend switch that all servers and storage NICs plug into. Storage NICs
    add ports to the switches they plug into (a real design may need larger switches);
    each storage NIC reaches its server over PCIe at 64 GB/s.
    """

    nodes: int = Field(ge=1, description="Number of storage servers.")
    nics_per_node: int = Field(1, ge=1, description="NICs per storage server.")
    nic_gbps: float = Field(400.0, gt=0, description="Speed of each storage NIC, Gbit/s.")
    write_gbyte_per_s: float = Field(gt=0, description="Media write bandwidth per server, GB/s.")
    read_gbyte_per_s: float = Field(gt=0, description="Media read bandwidth per server, GB/s.")
    attach: Literal["top", "leaf"] = Field(
        "top", description="Switch tier the storage NICs plug into: `top` or `leaf` (tier 1)."
    )


class _DesignSpec(Spec):
    """Fields every design shares."""

    name: str | None = Field(None, description="Topology name; defaults to the file name.")
    description: str | None = Field(None, description="Free text: what the topology models.")
    gpu: FileRef | None = Field(
        None,
        description="GPU spec file (e.g. gpus/h100-sxm.yaml) relative to this file; "
        "required in a topology file.",
    )
    storage: StorageSpec | None = Field(None, description="Storage servers to attach, if any.")
    hop_latency_us: float = Field(
        0.6, ge=0, description="One-way latency of one scale-out link: switch plus cable, µs."
    )
    scale_up_latency_us: float = Field(
        0.5, ge=0, description="One-way latency of one in-server link (NVLink, xGMI, PCIe), µs."
    )


# Fields several designs share with their own defaults: the constraint and description are
# written once here, the default in each design (`nic_gbps: _NicGbps = 200.0`).
_NicGbps = Annotated[float, Field(gt=0, description="Speed of each NIC, Gbit/s.")]
_PcieGbytePerS = Annotated[float, Field(gt=0, description="GPU-NIC PCIe bandwidth, GB/s.")]
_Gen5PcieGbytePerS = Annotated[
    float, Field(gt=0, description="GPU-NIC PCIe bandwidth (Gen5 x16), GB/s per direction.")
]
_NvlinkGbytePerS = Annotated[
    float,
    Field(gt=0, description="NVLink bandwidth of one GPU to its NVSwitch, GB/s per direction."),
]
_SwitchRadix = Annotated[int, Field(ge=4, description="Ports per leaf/spine switch.")]
_ScaleOutMedium = Annotated[Literal["ib", "ethernet"], Field(description="Scale-out link medium.")]
_LinkGbps = Annotated[float, Field(gt=0, description="Speed of every link and NIC, Gbit/s.")]


class _ScaleOutSpec(_DesignSpec):
    """Fields of the designs whose GPU servers reach a switched fabric through NICs."""

    nic_gbps: _NicGbps = 400.0
    pcie_gbyte_per_s: _PcieGbytePerS = 64.0
    medium: _ScaleOutMedium = "ib"


class _ClosSpec(_ScaleOutSpec):
    """Fields of the scale-out designs built as a Clos of leaf and spine (and core) switches."""

    switch_radix: _SwitchRadix = 64
    oversubscription: float = Field(1.0, ge=1, description="Leaf down:up bandwidth ratio.")


class _HostsSpec(_DesignSpec):
    """Fields of the designs of one-GPU hosts, one NIC each, on links of one speed."""

    link_gbps: _LinkGbps = 400.0
    pcie_gbyte_per_s: _PcieGbytePerS = 64.0
    medium: Literal["ib", "ethernet"] = Field("ethernet", description="Link medium.")


class SuperPodSpec(_ClosSpec):
    """DGX H100 SuperPOD-like rail-optimized InfiniBand fabric.

    Follows the NVIDIA DGX SuperPOD (DGX H100) reference architecture: scalable units
    (SUs) of 32 DGX H100 nodes; each node has 8 H100 on NVSwitch (450 GB/s per direction
    per GPU) and 8 ConnectX-7 400G NICs, NIC j cabled to rail j. Each SU has one leaf
    switch per rail (QM9700, 64 ports: 32 down, 32 up); spines connect every leaf. When
    the leaves outnumber the switch radix (beyond 8 SUs with 64-port switches) a third
    (core) tier is added, built like a k-ary fat-tree: pods of radix/2 leaves, each pod
    with its own spines, spine j of every pod wired to core group j.

    Simplifications: the 4 NVSwitch chips of a node are one tier-0 switch; the
    oversubscription is applied at the leaf tier only (up ports = ceil(su_size / ratio));
    storage and management fabrics are separate unless `storage` is given.
    """

    generator: Literal["superpod"] = Field("superpod", description="Design tag.")
    nodes: int = Field(32, ge=1, description="Number of 8-GPU servers.")
    su_size: int = Field(32, ge=1, description="Servers per scalable unit (per leaf switch).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs (and NICs, one per GPU) per server.")
    nvlink_gbyte_per_s: _NvlinkGbytePerS = 450.0
    pcie_gbyte_per_s: _Gen5PcieGbytePerS = 64.0
    switch_radix: int = Field(64, ge=4, description="Ports per leaf/spine/core switch.")
    oversubscription: float = Field(
        1.0, ge=1, description="Leaf down:up bandwidth ratio (1 = non-blocking, 2 = 2:1)."
    )


class MI300XClusterSpec(_ClosSpec):
    """MI300X cluster with a rail-optimized two-tier Ethernet fabric.

    Follows the cluster described in Zyphra's ZAYA1 training report (AMD MI300X with
    AMD Pensando Pollara 400G NICs): 8 MI300X per node on a full xGMI mesh (each GPU has 7
    links of 64 GB/s per direction, one to each peer), one 400G NIC per GPU, NIC j on
    rail j, a rail-optimized leaf-spine Ethernet fabric (one leaf per rail per group of
    `su_size` nodes), 128 nodes by default.

    The switch layout defaults to AMD's Instinct MI300 Series Cluster Reference
    Architecture Guide (Nov 2024), a 128-node cluster on 64-port 400G switches: 32 nodes
    per leaf, 4 groups x 8 rails = 32 leaves, 16 spines. (Some press coverage calls the
    ZAYA1 network "rails-only"; model that with `rail_only`.)

    Simplifications: three tiers are added past `switch_radix` leaves as in `superpod`;
    the separate storage/frontend network is not modeled unless `storage` is given.
    """

    generator: Literal["mi300x_cluster"] = Field("mi300x_cluster", description="Design tag.")
    nodes: int = Field(128, ge=1, description="Number of 8-GPU servers.")
    su_size: int = Field(32, ge=1, description="Servers per leaf group (nodes per leaf).")
    gpus_per_node: int = Field(8, ge=2, description="GPUs per server (full xGMI mesh).")
    xgmi_gbyte_per_s: float = Field(
        64.0, gt=0, description="Bandwidth of one xGMI link between two GPUs, GB/s per direction."
    )
    nic_gbps: float = Field(400.0, gt=0, description="Speed of each NIC (Pollara 400), Gbit/s.")
    pcie_gbyte_per_s: _Gen5PcieGbytePerS = 64.0
    medium: _ScaleOutMedium = "ethernet"


class RailOnlySpec(_ScaleOutSpec):
    """Rail-only network (no spine).

    After Wang et al., "Optimized Network Architectures for Large Language Model
    Training with Billions of Parameters" (rail-only, 2023): high-bandwidth (HB) domains
    of `gpus_per_node` GPUs on NVSwitch, and one switch per rail joining NIC j of every
    server. There is no spine: traffic between different rails of different servers
    first crosses the HB domain to a GPU on the destination rail (as NCCL's PXN does).

    Simplifications: each rail is one switch of `nodes` ports (a large rail built as a
    Clos or chassis is drawn as one switch).
    """

    generator: Literal["rail_only"] = Field("rail_only", description="Design tag.")
    nodes: int = Field(32, ge=1, description="Number of servers (HB domains).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per HB domain (and rails).")
    nvlink_gbyte_per_s: _NvlinkGbytePerS = 450.0


class MultiPlaneFatTreeSpec(_ClosSpec):
    """Multi-plane two-layer fat-tree.

    As DeepSeek describes its H800 cluster (DeepSeek-V3 technical report; "Insights into
    DeepSeek-V3", ISCA 2025): each node has 8 GPUs and 8 400G InfiniBand NICs; NIC j is
    on plane j, and every plane is an independent two-layer fat-tree of 64-port switches
    (32 down, 32 up per leaf), so 8 planes of 2,048 endpoints reach 16,384 GPUs with two
    switch layers. Planes meet only inside a node (NVLink); traffic that changes plane
    is forwarded by a GPU.

    Simplifications: H800 NVLink (400 GB/s bidirectional) is one switch per node at
    200 GB/s per direction per GPU.
    """

    generator: Literal["multiplane_fattree"] = Field("multiplane_fattree", description="Tag.")
    nodes: int = Field(64, ge=1, description="Number of servers.")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per server; one NIC and plane each.")
    nvlink_gbyte_per_s: _NvlinkGbytePerS = 200.0


class FatTreeSpec(_HostsSpec):
    """k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008).

    k pods, each with k/2 edge and k/2 aggregation switches of k ports; (k/2)^2 core
    switches; k^3/4 hosts and 5k^2/4 switches; full bisection bandwidth. Each host is a
    one-GPU server: GPU `n{i}.gpu0` with its own NIC `n{i}.nic0` (rail 0), so hosts and
    GPUs are the same count (chosen so that the formulas of the paper hold literally).
    """

    generator: Literal["fat_tree"] = Field("fat_tree", description="Design tag.")
    k: int = Field(8, ge=2, description="Switch radix k (even): k pods, k^3/4 hosts.")

    @model_validator(mode="after")
    def _even_k(self) -> FatTreeSpec:
        if self.k % 2:
            raise ValueError(f"k must be even, got {self.k}")
        return self


class TorusSpec(_DesignSpec):
    """2D or 3D torus of GPUs joined by direct links (no switches).

    Like the chip-to-chip tori of TPU v4 pods or direct-connect Gaudi clusters: every GPU
    has 2 links per dimension to its neighbours, with wrap-around. Consecutive GPUs along
    the last dimension are grouped `gpus_per_node` to a server (links inside a server are
    not priced as cables). A dimension of size 2 gets one edge carrying both links.

    Simplifications: no NICs unless `storage` is given, in which case each server gets
    one frontend NIC on a single frontend switch (a chassis drawn as one switch).
    """

    generator: Literal["torus"] = Field("torus", description="Design tag.")
    dims: list[int] = Field(
        default_factory=lambda: [4, 4, 4],
        min_length=2,
        max_length=3,
        description="Size of each dimension, e.g. [4, 4, 4]; each >= 2.",
    )
    gpus_per_node: int = Field(4, ge=1, description="GPUs per server (along the last dim).")
    link_gbyte_per_s: float = Field(
        50.0, gt=0, description="Bandwidth of one torus link, GB/s per direction."
    )
    medium: Literal["nvlink", "xgmi", "ib", "ethernet"] = Field(
        "ethernet", description="Medium of the torus links."
    )
    frontend_nic_gbps: float = Field(
        200.0, gt=0, description="Frontend NIC speed per server (only with storage), Gbit/s."
    )

    @model_validator(mode="after")
    def _check_dims(self) -> TorusSpec:
        if any(d < 2 for d in self.dims):
            raise ValueError(f"every torus dimension must be >= 2, got {self.dims}")
        if self.dims[-1] % self.gpus_per_node:
            raise ValueError(
                f"gpus_per_node ({self.gpus_per_node}) must divide the last dimension ({self.dims[-1]})"
            )
        return self


class DragonflySpec(_HostsSpec):
    """Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008).

    `groups` groups of `a` routers; each router has `p` hosts (one-GPU servers with one
    NIC each), a-1 local links (full mesh inside the group) and `h` global links to
    other groups. Global links are spread evenly over group pairs (with the maximum
    a*h+1 groups every pair of groups has exactly one link). Balanced when a = 2p = 2h.
    """

    generator: Literal["dragonfly"] = Field("dragonfly", description="Design tag.")
    a: int = Field(8, ge=1, description="Routers per group.")
    p: int = Field(4, ge=1, description="Hosts (GPUs) per router.")
    h: int = Field(4, ge=1, description="Global links per router.")
    groups: int | None = Field(None, ge=2, description="Number of groups; default a*h+1.")
    link_gbps: _LinkGbps = 200.0
    pcie_gbyte_per_s: _PcieGbytePerS = 32.0

    @model_validator(mode="after")
    def _check_groups(self) -> DragonflySpec:
        if self.groups is not None and self.groups > self.a * self.h + 1:
            raise ValueError(
                f"groups ({self.groups}) cannot exceed a*h+1 = {self.a * self.h + 1}: "
                "every pair of groups needs a global link"
            )
        return self

    @property
    def group_count(self) -> int:
        """Groups actually built."""
        return self.groups if self.groups is not None else self.a * self.h + 1


class PCIeNodeSpec(_ClosSpec):
    """Fire-Flyer 2-like PCIe servers on a two-layer fat-tree.

    After DeepSeek's Fire-Flyer AI-HPC (SC 2024): each server holds 8 PCIe A100 GPUs and
    one 200G InfiniBand NIC behind PCIe switches (PCIe 4.0 x16, 32 GB/s per direction);
    servers are joined by a two-layer fat-tree of 40-port 200G switches (20 down, 20 up).
    A server has `pcie_switches` switches `n{i}.pcie{s}`, each with `gpus_per_switch` GPUs
    and one NIC; the switches meet at the CPU root complex `n{i}.cpu` (kind host).
    Optional NVLink bridges join GPU pairs (0,1), (2,3), ...

    Simplifications: the two zones of Fire-Flyer 2 are not modeled (one fat-tree);
    the CPU inter-socket link is folded into the host node.
    """

    generator: Literal["pcie_node"] = Field("pcie_node", description="Design tag.")
    nodes: int = Field(40, ge=1, description="Number of servers.")
    pcie_switches: int = Field(1, ge=1, description="PCIe switches per server (one NIC each).")
    gpus_per_switch: int = Field(8, ge=1, description="GPUs behind each PCIe switch.")
    pcie_gbyte_per_s: float = Field(
        32.0, gt=0, description="Bandwidth of each PCIe link (4.0 x16), GB/s per direction."
    )
    nvlink_bridge_gbyte_per_s: float | None = Field(
        None,
        gt=0,
        description="NVLink bridge between GPU pairs, GB/s per direction; none if unset.",
    )
    nic_gbps: _NicGbps = 200.0
    switch_radix: _SwitchRadix = 40


DESIGN_SPECS: tuple[type[_DesignSpec], ...] = (
    SuperPodSpec,
    MI300XClusterSpec,
    RailOnlySpec,
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
    | MultiPlaneFatTreeSpec
    | FatTreeSpec
    | TorusSpec
    | DragonflySpec
    | PCIeNodeSpec,
    Field(discriminator="generator"),
]


class DesignFile(RootModel[DesignSpec]):
    """A topology file naming one of the designs above by its `generator` tag."""


# ----------------------------------------------------------------------- graph parts


class _Net:
    """Accumulates node and edge tuples, then builds the graph in two bulk calls."""

    def __init__(self) -> None:
        self.nodes: list[tuple[str, dict[str, Any]]] = []
        self.edges: list[tuple[str, str, dict[str, Any]]] = []

    def node(self, name: str, **attrs: Any) -> str:
        self.nodes.append((name, attrs))
        return name

    def link(
        self,
        u: str,
        v: str,
        bandwidth_bytes_per_s: float,
        latency_s: float,
        medium: str,
        links: int = 1,
        reach: str | None = None,
    ) -> None:
        d: dict[str, Any] = {
            "bandwidth_bytes_per_s": float(bandwidth_bytes_per_s),
            "latency_s": float(latency_s),
            "medium": medium,
            "links": int(links),
        }
        if reach is not None:
            d["reach"] = reach
        self.edges.append((u, v, d))

    def graph(self, name: str, gpu: GPUSpec | None, structure: dict[str, Any]) -> nx.Graph:
        g = nx.Graph(name=name)
        if gpu is not None:
            g.graph["gpu"] = gpu
        g.graph["structure"] = structure
        g.add_nodes_from(self.nodes)
        g.add_edges_from(self.edges)
        return g


def _switch(net: _Net, name: str, tier: int, role: str, ports: int, **extra: Any) -> str:
    return net.node(name, kind="switch", tier=tier, role=role, ports=int(ports), **extra)


def _gpus(net: _Net, i: int, count: int) -> list[str]:
    node = f"n{i}"
    return [net.node(f"{node}.gpu{j}", kind="gpu", node=node, local_rank=j) for j in range(count)]


def _nvswitch_server(net: _Net, i: int, count: int, bw: float, lat: float) -> list[str]:
    """GPUs on one tier-0 NVSwitch; `bw` bytes/s per GPU per direction."""
    gpus = _gpus(net, i, count)
    sw = _switch(net, f"n{i}.nvsw", 0, "nvswitch", count, node=f"n{i}")
    for gname in gpus:
        net.link(gname, sw, bw, lat, "nvlink")
    return gpus


def _mesh_server(net: _Net, i: int, count: int, bw: float, lat: float, medium: str) -> list[str]:
    """GPUs in a full mesh (one link per pair), as xGMI on MI300X platforms."""
    gpus = _gpus(net, i, count)
    for a in range(count):
        for b in range(a + 1, count):
            net.link(gpus[a], gpus[b], bw, lat, medium)
    return gpus


def _gpu_nics(net: _Net, i: int, gpus: list[str], pcie_bw: float, lat: float) -> list[str]:
    """One NIC per GPU, NIC j on rail j, joined to its GPU by PCIe."""
    nics = []
    for j, gname in enumerate(gpus):
        nic = net.node(f"n{i}.nic{j}", kind="nic", node=f"n{i}", local_rank=j, rail=j)
        net.link(gname, nic, pcie_bw, lat, "pcie")
        nics.append(nic)
    return nics


def _round_robin(
    sources: list[str], ports_each: int, targets: list[str], offset_step: int | None = None
) -> dict[tuple[str, str], int]:
    """Spread `ports_each` uplinks of every source over `targets`; count cables per pair.

    Port p of source s goes to target (s*ports_each + p) mod len(targets), which keeps
    the targets' port counts within one of each other.
    """
    counts: dict[tuple[str, str], int] = {}
    n = len(targets)
    step = ports_each if offset_step is None else offset_step
    for si, s in enumerate(sources):
        for p in range(ports_each):
            t = targets[(si * step + p) % n]
            counts[(s, t)] = counts.get((s, t), 0) + 1
    return counts


def _clos_above_leaves(
    net: _Net,
    leaves: list[tuple[str, int]],
    radix: int,
    oversubscription: float,
    link_bw: float,
    lat: float,
    medium: str,
    prefix: str = "",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build spines (and cores if needed) above `leaves` = [(name, down_ports)].

    Leaves get u = ceil(max_down / oversubscription) uplinks. Two tiers when every leaf
    can reach every spine (leaves <= radix); otherwise pods of radix/2 leaves with u
    spines each (radix/2 down, radix/2 up) and core group j joining spine j of every pod.
    Returns the leaf nodes' uplink count, switch lists and tier-cut capacities.
    """
    extra = extra or {}
    max_down = max(d for _, d in leaves)
    up = math.ceil(max_down / oversubscription)
    if max_down + up > radix:
        raise InputError(
            f"a leaf needs {max_down} down + {up} up ports but switch_radix is {radix}",
            field="switch_radix",
        )
    names = [n for n, _ in leaves]
    n_leaves = len(names)
    out: dict[str, Any] = {"uplinks_per_leaf": up, "spines": [], "cores": []}
    if n_leaves == 1:
        # a single leaf switches everything itself; no spine needed
        out["top"] = names
        out["tier_up_bytes_per_s"] = []
        return out
    if n_leaves <= radix:
        n_spines = math.ceil(n_leaves * up / radix)
        spines = [f"{prefix}spine{k}" for k in range(n_spines)]
        counts = _round_robin(names, up, spines)
        load: dict[str, int] = {}
        for (_, s), c in counts.items():
            load[s] = load.get(s, 0) + c
        for s in spines:
            _switch(net, s, 2, "spine", load.get(s, 0), **extra)
        for (lf, s), c in counts.items():
            net.link(lf, s, c * link_bw, lat, medium, links=c, reach="optics")
        out.update(spines=spines, top=spines, tier_up_bytes_per_s=[n_leaves * up * link_bw])
        return out
    half = radix // 2
    n_pods = math.ceil(n_leaves / half)
    if n_pods > radix:
        raise InputError(
            f"{n_leaves} leaves need {n_pods} pods but a {radix}-port core reaches at most "
            f"{radix}; use larger switches",
            field="switch_radix",
        )
    per_group = math.ceil(n_pods * half / radix)
    cores = [f"{prefix}core{j * per_group + c}" for j in range(up) for c in range(per_group)]
    core_load: dict[str, int] = {}
    spines = []
    spine_up_total = 0
    for pod in range(n_pods):
        pod_leaves = names[pod * half : (pod + 1) * half]
        pod_spines = [f"{prefix}spine{pod * up + j}" for j in range(up)]
        for j, s in enumerate(pod_spines):
            _switch(net, s, 2, "spine", 2 * len(pod_leaves), pod=pod, **extra)
            for lf in pod_leaves:
                net.link(lf, s, link_bw, lat, medium, reach="optics")
            group = cores[j * per_group : (j + 1) * per_group]
            for (sp, core), cnt in _round_robin([s], len(pod_leaves), group, 0).items():
                net.link(sp, core, cnt * link_bw, lat, medium, links=cnt, reach="optics")
                core_load[core] = core_load.get(core, 0) + cnt
                spine_up_total += cnt
        spines.extend(pod_spines)
    for core in cores:
        _switch(net, core, 3, "core", core_load.get(core, 0), **extra)
    out.update(
        spines=spines,
        cores=cores,
        top=cores,
        tier_up_bytes_per_s=[n_leaves * up * link_bw, spine_up_total * link_bw],
    )
    return out


def _attach_storage(
    net: _Net,
    storage: StorageSpec,
    top: list[str],
    leaf: list[str],
    medium: str,
    lat: float,
    reach: str = "aoc",
) -> None:
    """Storage servers `stor{i}` with NICs spread round-robin over the chosen tier."""
    targets = top if storage.attach == "top" else leaf
    nic_bw = storage.nic_gbps * GBIT_BYTES
    k = 0
    extra_ports: dict[str, int] = {}
    for i in range(storage.nodes):
        s = net.node(
            f"stor{i}",
            kind="storage",
            node=f"stor{i}",
            write_bandwidth_bytes_per_s=storage.write_gbyte_per_s * GBYTE_BYTES,
            read_bandwidth_bytes_per_s=storage.read_gbyte_per_s * GBYTE_BYTES,
        )
        for j in range(storage.nics_per_node):
            nic = net.node(f"stor{i}.nic{j}", kind="nic", node=s, local_rank=j, rail=j)
            net.link(s, nic, 64 * GBYTE_BYTES, lat, "pcie")
            sw = targets[k % len(targets)]
            k += 1
            net.link(nic, sw, nic_bw, lat, medium, reach=reach)
            extra_ports[sw] = extra_ports.get(sw, 0) + 1
    # the switches were declared before storage; add the ports storage uses
    for idx, (name, attrs) in enumerate(net.nodes):
        if name in extra_ports:
            net.nodes[idx] = (name, {**attrs, "ports": attrs.get("ports", 0) + extra_ports[name]})


def _scale_up_bisection(gpus: int, per_gpu_bw: float, out_bw: float = 0.0) -> float:
    """One server split in half: each GPU of one half reaches the other over its scale-up
    link and, through its NIC and the leaf, over its scale-out link."""
    return gpus / 2 * (per_gpu_bw + out_bw)


def _structure(design: str, bisection: float, method: str, **more: Any) -> dict[str, Any]:
    return {
        "design": design,
        "bisection_bytes_per_s": bisection,
        "bisection_method": method,
        **more,
    }


# ----------------------------------------------------------------------------- builders


def _rail_clos(spec: SuperPodSpec | MI300XClusterSpec, gpu: GPUSpec | None) -> nx.Graph:
    """Rail-optimized Clos: leaf `leaf{rail}.{su}` per rail per scalable unit, then spines."""
    net = _Net()
    G = spec.gpus_per_node
    up_lat = spec.scale_up_latency_us * US_S
    lat = spec.hop_latency_us * US_S
    nic_bw = spec.nic_gbps * GBIT_BYTES
    pcie = spec.pcie_gbyte_per_s * GBYTE_BYTES
    n_su = math.ceil(spec.nodes / spec.su_size)
    # leaves first so that storage can add ports to them
    leaves: list[tuple[str, int]] = []
    for su in range(n_su):
        members = min(spec.su_size, spec.nodes - su * spec.su_size)
        for r in range(G):
            leaves.append((f"leaf{r}.{su}", members))
    up = math.ceil(max(d for _, d in leaves) / spec.oversubscription)
    for name, down in leaves:
        rail_s, su_s = name[4:].split(".")
        ports = down + (up if len(leaves) > 1 else 0)
        _switch(net, name, 1, "leaf", ports, rail=int(rail_s), su=int(su_s))
    for i in range(spec.nodes):
        if isinstance(spec, SuperPodSpec):
            gpus = _nvswitch_server(net, i, G, spec.nvlink_gbyte_per_s * GBYTE_BYTES, up_lat)
        else:
            gpus = _mesh_server(net, i, G, spec.xgmi_gbyte_per_s * GBYTE_BYTES, up_lat, "xgmi")
        nics = _gpu_nics(net, i, gpus, pcie, up_lat)
        s = i // spec.su_size
        for r, nic in enumerate(nics):
            net.link(nic, f"leaf{r}.{s}", nic_bw, lat, spec.medium, reach="aoc")
    clos = _clos_above_leaves(net, leaves, spec.switch_radix, spec.oversubscription, nic_bw, lat, spec.medium)
    n_gpus = spec.nodes * G
    if spec.storage:
        _attach_storage(net, spec.storage, clos["top"], [n for n, _ in leaves], spec.medium, lat)
    if spec.nodes == 1:
        per_gpu = spec.nvlink_gbyte_per_s * GBYTE_BYTES if isinstance(spec, SuperPodSpec) else 0.0
        out_bw = min(nic_bw, pcie)
        if isinstance(spec, MI300XClusterSpec):
            bis = (G // 2) * (G - G // 2) * spec.xgmi_gbyte_per_s * GBYTE_BYTES
            bis += G / 2 * out_bw
            method = "one server: (G/2)^2 xGMI links + G/2 NIC links cross a balanced split"
        else:
            bis = _scale_up_bisection(n_gpus, per_gpu, out_bw)
            method = "one server: G/2 x (NVLink + NIC bandwidth)"
    else:
        cuts = [n_gpus * nic_bw / 2] + [c / 2 for c in clos["tier_up_bytes_per_s"]]
        bis = min(cuts)
        method = "Clos tier cut: min(GPUs/2 x NIC bandwidth, half of each tier's uplinks)"
    name = spec.name or spec.generator
    return net.graph(
        name,
        gpu,
        _structure(
            spec.generator,
            bis,
            method,
            tiers=2 if not clos["cores"] else 3,
            uplinks_per_leaf=clos["uplinks_per_leaf"],
        ),
    )


def build_superpod(spec: SuperPodSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a DGX H100 SuperPOD-like rail-optimized fabric (see `SuperPodSpec`)."""
    return _rail_clos(spec, gpu)


def build_mi300x_cluster(spec: MI300XClusterSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build an MI300X xGMI-mesh cluster on a rail-optimized Ethernet fabric."""
    return _rail_clos(spec, gpu)


def build_rail_only(spec: RailOnlySpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a rail-only network: HB domains plus one switch per rail (see `RailOnlySpec`)."""
    net = _Net()
    G = spec.gpus_per_node
    up_lat = spec.scale_up_latency_us * US_S
    lat = spec.hop_latency_us * US_S
    nic_bw = spec.nic_gbps * GBIT_BYTES
    rails = [_switch(net, f"rail{r}", 1, "rail", spec.nodes, rail=r) for r in range(G)]
    for i in range(spec.nodes):
        gpus = _nvswitch_server(net, i, G, spec.nvlink_gbyte_per_s * GBYTE_BYTES, up_lat)
        nics = _gpu_nics(net, i, gpus, spec.pcie_gbyte_per_s * GBYTE_BYTES, up_lat)
        for r, nic in enumerate(nics):
            net.link(nic, rails[r], nic_bw, lat, spec.medium, reach="aoc")
    if spec.storage:
        _attach_storage(net, spec.storage, rails, rails, spec.medium, lat)
    n_gpus = spec.nodes * G
    if spec.nodes == 1:
        # each rail/plane switch holds a single NIC: nothing crosses the scale-out side
        bis = _scale_up_bisection(n_gpus, spec.nvlink_gbyte_per_s * GBYTE_BYTES)
        method = "one server: G/2 x NVLink bandwidth (rails meet only in the server)"
    else:
        # splitting the servers in two halves cuts every NIC link of one half (rails are
        # single switches); a split inside an HB domain is bounded by NVLink, which is larger
        bis = min(n_gpus / 2 * nic_bw, n_gpus / 2 * spec.nvlink_gbyte_per_s * GBYTE_BYTES)
        method = "rail switches are non-blocking: GPUs/2 x NIC bandwidth"
    return net.graph(spec.name or spec.generator, gpu, _structure(spec.generator, bis, method))


def build_multiplane_fattree(spec: MultiPlaneFatTreeSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build one two-layer fat-tree per NIC plane (see `MultiPlaneFatTreeSpec`)."""
    net = _Net()
    G = spec.gpus_per_node
    up_lat = spec.scale_up_latency_us * US_S
    lat = spec.hop_latency_us * US_S
    nic_bw = spec.nic_gbps * GBIT_BYTES
    up = math.ceil(spec.switch_radix / (1 + spec.oversubscription))
    down = spec.switch_radix - up
    n_leaves = math.ceil(spec.nodes / down)
    planes: list[dict[str, Any]] = []
    for p in range(G):
        leaves = []
        for lf in range(n_leaves):
            members = min(down, spec.nodes - lf * down)
            name = f"p{p}.leaf{lf}"
            ports = members + (math.ceil(members / spec.oversubscription) if n_leaves > 1 else 0)
            _switch(net, name, 1, "leaf", ports, plane=p, rail=p)
            leaves.append((name, members))
        planes.append({"leaves": leaves})
    for i in range(spec.nodes):
        gpus = _nvswitch_server(net, i, G, spec.nvlink_gbyte_per_s * GBYTE_BYTES, up_lat)
        nics = _gpu_nics(net, i, gpus, spec.pcie_gbyte_per_s * GBYTE_BYTES, up_lat)
        for p, nic in enumerate(nics):
            net.link(nic, f"p{p}.leaf{i // down}", nic_bw, lat, spec.medium, reach="aoc")
    tops: list[str] = []
    leaf_names: list[str] = []
    up_cut = math.inf
    for p, plane in enumerate(planes):
        if n_leaves > spec.switch_radix:
            raise InputError(
                f"{spec.nodes} nodes need {n_leaves} leaves per plane; a two-layer fat-tree "
                f"of {spec.switch_radix}-port switches allows {spec.switch_radix}",
                field="nodes",
            )
        clos = _clos_above_leaves(
            net,
            plane["leaves"],
            spec.switch_radix,
            spec.oversubscription,
            nic_bw,
            lat,
            spec.medium,
            prefix=f"p{p}.",
            extra={"plane": p},
        )
        tops.extend(clos["top"])
        leaf_names.extend(n for n, _ in plane["leaves"])
        if clos["tier_up_bytes_per_s"]:
            up_cut = min(up_cut, G * clos["tier_up_bytes_per_s"][0] / 2)
    if spec.storage:
        _attach_storage(net, spec.storage, tops, leaf_names, spec.medium, lat)
    n_gpus = spec.nodes * G
    if spec.nodes == 1:
        # each rail/plane switch holds a single NIC: nothing crosses the scale-out side
        bis = _scale_up_bisection(n_gpus, spec.nvlink_gbyte_per_s * GBYTE_BYTES)
        method = "one server: G/2 x NVLink bandwidth (rails meet only in the server)"
    else:
        bis = min(n_gpus / 2 * nic_bw, up_cut)
        method = "per-plane Clos tier cut, summed over planes"
    return net.graph(spec.name or spec.generator, gpu, _structure(spec.generator, bis, method))


def build_fat_tree(spec: FatTreeSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a k-ary fat-tree with one-GPU hosts (see `FatTreeSpec`)."""
    net = _Net()
    k = spec.k
    half = k // 2
    bw = spec.link_gbps * GBIT_BYTES
    lat = spec.hop_latency_us * US_S
    up_lat = spec.scale_up_latency_us * US_S
    cores = [_switch(net, f"core{c}", 3, "core", k) for c in range(half * half)]
    aggs: list[str] = []
    edges: list[str] = []
    host = 0
    for pod in range(k):
        pod_edges = [_switch(net, f"pod{pod}.edge{e}", 1, "edge", k, pod=pod) for e in range(half)]
        pod_aggs = [_switch(net, f"pod{pod}.agg{a}", 2, "aggregation", k, pod=pod) for a in range(half)]
        for e in pod_edges:
            for a in pod_aggs:
                net.link(e, a, bw, lat, spec.medium, reach="aoc")
            for _ in range(half):
                node = f"n{host}"
                gname = net.node(f"{node}.gpu0", kind="gpu", node=node, local_rank=0)
                nic = net.node(f"{node}.nic0", kind="nic", node=node, local_rank=0, rail=0)
                net.link(gname, nic, spec.pcie_gbyte_per_s * GBYTE_BYTES, up_lat, "pcie")
                net.link(nic, e, bw, lat, spec.medium, reach="dac")
                host += 1
        for ai, a in enumerate(pod_aggs):
            for c in range(half):
                net.link(a, cores[ai * half + c], bw, lat, spec.medium, reach="optics")
        aggs.extend(pod_aggs)
        edges.extend(pod_edges)
    if spec.storage:
        _attach_storage(net, spec.storage, cores, edges, spec.medium, lat)
    bis = host / 2 * min(bw, spec.pcie_gbyte_per_s * GBYTE_BYTES)
    return net.graph(
        spec.name or spec.generator,
        gpu,
        _structure(spec.generator, bis, "k-ary fat-tree is non-blocking: hosts/2 x link bandwidth"),
    )


def build_torus(spec: TorusSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a 2D/3D torus of GPUs with direct links (see `TorusSpec`)."""
    net = _Net()
    dims = list(spec.dims)
    n = math.prod(dims)
    bw = spec.link_gbyte_per_s * GBYTE_BYTES
    lat = spec.scale_up_latency_us * US_S
    strides = [math.prod(dims[d + 1 :]) for d in range(len(dims))]
    names = []
    for idx in range(n):
        i, j = divmod(idx, spec.gpus_per_node)
        coord = ",".join(str((idx // strides[d]) % dims[d]) for d in range(len(dims)))
        names.append(net.node(f"n{i}.gpu{j}", kind="gpu", node=f"n{i}", local_rank=j, coord=coord))
    for idx in range(n):
        for d, size in enumerate(dims):
            c = (idx // strides[d]) % size
            nxt = idx + strides[d] if c + 1 < size else idx - c * strides[d]
            wrap = c + 1 == size
            if size == 2:
                if c == 0:  # both links between the pair on one edge
                    net.link(names[idx], names[nxt], 2 * bw, lat, spec.medium, links=2, reach="dac")
                continue
            net.link(names[idx], names[nxt], bw, lat, spec.medium, reach="aoc" if wrap else "dac")
    servers = n // spec.gpus_per_node
    if spec.storage:
        fe_bw = spec.frontend_nic_gbps * GBIT_BYTES
        hop = spec.hop_latency_us * US_S
        fe = _switch(net, "frontend", 1, "frontend", servers)
        for i in range(servers):
            nic = net.node(f"n{i}.nic0", kind="nic", node=f"n{i}", local_rank=0, rail=0)
            for j in range(spec.gpus_per_node):
                net.link(f"n{i}.gpu{j}", nic, 32 * GBYTE_BYTES, lat, "pcie")
            net.link(nic, fe, fe_bw, hop, "ethernet", reach="aoc")
        _attach_storage(net, spec.storage, [fe], [fe], "ethernet", hop)
    kmax = max(dims)
    bis = 2 * (n / kmax) * bw
    if spec.storage:  # the frontend switch is a second, non-blocking path between halves
        bis += servers // 2 * spec.frontend_nic_gbps * GBIT_BYTES
    return net.graph(
        spec.name or spec.generator,
        gpu,
        _structure(
            spec.generator,
            bis,
            "torus: cutting the largest dimension k crosses 2 x N/k links (wrap-around)",
            diameter_links=sum(d // 2 for d in dims),
        ),
    )


def build_dragonfly(spec: DragonflySpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a dragonfly with one-GPU hosts (see `DragonflySpec`)."""
    net = _Net()
    a, p, h, ng = spec.a, spec.p, spec.h, spec.group_count
    bw = spec.link_gbps * GBIT_BYTES
    lat = spec.hop_latency_us * US_S
    up_lat = spec.scale_up_latency_us * US_S
    routers = [[f"g{gi}.r{r}" for r in range(a)] for gi in range(ng)]
    for gi in range(ng):
        for r in range(a):
            _switch(net, routers[gi][r], 1, "router", p + (a - 1) + h, group=gi)
    host = 0
    for gi in range(ng):
        for r in range(a):
            for _ in range(p):
                node = f"n{host}"
                gname = net.node(f"{node}.gpu0", kind="gpu", node=node, local_rank=0)
                nic = net.node(f"{node}.nic0", kind="nic", node=node, local_rank=0, rail=0)
                net.link(gname, nic, spec.pcie_gbyte_per_s * GBYTE_BYTES, up_lat, "pcie")
                net.link(nic, routers[gi][r], bw, lat, spec.medium, reach="dac")
                host += 1
            for peer in range(r + 1, a):
                net.link(routers[gi][r], routers[gi][peer], bw, lat, spec.medium, reach="dac")
    # global links: per_pair links between every pair of groups, ports handed out in order
    per_pair = (a * h) // (ng - 1)
    next_port = [0] * ng
    counts: dict[tuple[str, str], int] = {}
    for _ in range(per_pair):
        for g1 in range(ng):
            for g2 in range(g1 + 1, ng):
                r1 = routers[g1][next_port[g1] // h]
                r2 = routers[g2][next_port[g2] // h]
                next_port[g1] += 1
                next_port[g2] += 1
                counts[(r1, r2)] = counts.get((r1, r2), 0) + 1
    for (r1, r2), cables in counts.items():
        net.link(r1, r2, cables * bw, lat, spec.medium, links=cables, reach="optics")
    all_routers = [r for grp in routers for r in grp]
    if spec.storage:
        _attach_storage(net, spec.storage, all_routers, all_routers, spec.medium, lat)
    half = ng // 2
    bis = min(host / 2 * bw, half * (ng - half) * per_pair * bw)
    return net.graph(
        spec.name or spec.generator,
        gpu,
        _structure(
            spec.generator,
            bis,
            "dragonfly: min(hosts/2 x link, global links between two halves of the groups)",
            global_links_per_group_pair=per_pair,
        ),
    )


def build_pcie_node(spec: PCIeNodeSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build Fire-Flyer 2-like PCIe servers on a two-layer fat-tree (see `PCIeNodeSpec`)."""
    net = _Net()
    lat = spec.hop_latency_us * US_S
    up_lat = spec.scale_up_latency_us * US_S
    nic_bw = spec.nic_gbps * GBIT_BYTES
    pcie = spec.pcie_gbyte_per_s * GBYTE_BYTES
    S, per = spec.pcie_switches, spec.gpus_per_switch
    nics_per_node = S
    up = math.ceil(spec.switch_radix / (1 + spec.oversubscription))
    down_nics = spec.switch_radix - up
    total_nics = spec.nodes * nics_per_node
    n_leaves = math.ceil(total_nics / down_nics)
    leaves = []
    for lf in range(n_leaves):
        members = min(down_nics, total_nics - lf * down_nics)
        ports = members + (math.ceil(members / spec.oversubscription) if n_leaves > 1 else 0)
        leaves.append((_switch(net, f"leaf{lf}", 1, "leaf", ports), members))
    k = 0
    for i in range(spec.nodes):
        node = f"n{i}"
        cpu = net.node(f"{node}.cpu", kind="host", node=node)
        gpus = _gpus(net, i, S * per)
        for s in range(S):
            sw = _switch(net, f"{node}.pcie{s}", 0, "pcie", per + 2, node=node)
            net.link(sw, cpu, pcie, up_lat, "pcie")
            for j in range(s * per, (s + 1) * per):
                net.link(gpus[j], sw, pcie, up_lat, "pcie")
            nic = net.node(f"{node}.nic{s}", kind="nic", node=node, local_rank=s, rail=s)
            net.link(nic, sw, pcie, up_lat, "pcie")
            net.link(nic, leaves[k // down_nics][0], nic_bw, lat, spec.medium, reach="aoc")
            k += 1
        if spec.nvlink_bridge_gbyte_per_s:
            bridge = spec.nvlink_bridge_gbyte_per_s * GBYTE_BYTES
            for j in range(0, len(gpus) - 1, 2):
                net.link(gpus[j], gpus[j + 1], bridge, up_lat, "nvlink")
    if n_leaves > spec.switch_radix:
        raise InputError(
            f"{spec.nodes} nodes need {n_leaves} leaves; a two-layer fat-tree of "
            f"{spec.switch_radix}-port switches allows {spec.switch_radix}",
            field="nodes",
        )
    clos = _clos_above_leaves(net, leaves, spec.switch_radix, spec.oversubscription, nic_bw, lat, spec.medium)
    if spec.storage:
        _attach_storage(net, spec.storage, clos["top"], [n for n, _ in leaves], spec.medium, lat)
    if spec.nodes == 1:
        bis = (S * per) / 2 * pcie if S == 1 else min(S / 2 * pcie, S * per / 2 * pcie)
        method = "one server: PCIe switch / root-complex bound"
    else:
        cuts = [total_nics * nic_bw / 2] + [c / 2 for c in clos["tier_up_bytes_per_s"]]
        bis = min(cuts)
        method = "Clos tier cut: min(NICs/2 x NIC bandwidth, half of each tier's uplinks)"
    return net.graph(spec.name or spec.generator, gpu, _structure(spec.generator, bis, method))


_BUILDERS: dict[type, Any] = {
    SuperPodSpec: build_superpod,
    MI300XClusterSpec: build_mi300x_cluster,
    RailOnlySpec: build_rail_only,
    MultiPlaneFatTreeSpec: build_multiplane_fattree,
    FatTreeSpec: build_fat_tree,
    TorusSpec: build_torus,
    DragonflySpec: build_dragonfly,
    PCIeNodeSpec: build_pcie_node,
}


def build_design(spec: _DesignSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build the graph of any design spec in `DESIGN_SPECS`.

    Args:
        spec: a validated design spec.
        gpu: the GPU model; stored as `g.graph["gpu"]`.

    Raises:
        InputError: the parameters cannot be built (e.g. too few switch ports).
    """
    builder = _BUILDERS.get(type(spec))
    if builder is None:
        raise TypeError(f"not a design spec: {type(spec).__name__}")
    g: nx.Graph = builder(spec, gpu)
    return g


def load_design_file(path: str | Path) -> tuple[_DesignSpec, GPUSpec]:
    """Read a topology file naming one of the designs; resolve and load its GPU file.

    The file is flat: `generator: <tag>`, the design's parameters, and
    `gpu: {file: gpus/h100-sxm.yaml}` resolved relative to the topology file.

    Raises:
        InputError: the file, its GPU file, or a parameter is invalid.
    """
    doc = read_document(path)
    spec = validate(DesignFile, doc).root
    if spec.gpu is None:
        raise doc.error("required field is missing (e.g. gpu: {file: gpus/h100-sxm.yaml})", ("gpu",))
    gpu = load(GPUSpec, doc.path.parent / spec.gpu.file)
    if spec.name is None:
        spec = spec.model_copy(update={"name": doc.path.stem})
    return spec, gpu


def build_design_file(path: str | Path) -> nx.Graph:
    """Load a design topology file, build its graph and check the graph conventions."""
    spec, gpu = load_design_file(path)
    try:
        g = build_design(spec, gpu)
    except InputError as exc:
        raise InputError(exc.message, file=path, field=exc.field) from None
    validate_graph(g, str(path))
    return g
