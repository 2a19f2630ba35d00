"""Switched designs: one switch, rail-optimized Clos fabrics, rail-only, multi-plane and k-ary fat-trees.

What is modelled:
    * `switch`: N GPUs on one switch, the simplest fabric (golden tests use it).
    * `rail_clos`: servers of G GPUs with one NIC per GPU, rail-optimized leaves (rail r of
      every server of a group on one leaf) and one spine layer.
    * `superpod`, `mi300x_cluster`: rail-optimized Clos fabrics after published systems,
      with a third (core) tier once the leaves outnumber the switch radix.
    * `rail_only`: one switch per rail and no spine; rails meet inside the servers.
    * `multiplane_fattree`: one independent two-layer fat-tree per NIC plane.
    * `fat_tree`: the k-ary fat-tree of one-GPU hosts.

What is simplified: switches are non-blocking crossbars (no internal contention, no
buffers); an in-server NVSwitch system is one switch node. `switch` and `rail_clos` draw
the plain graph the golden tests pin (no cable counts, cable classes, NVSwitch port count
or `structure` record), and `rail_clos` gives NIC-to-GPU PCIe links the NIC's bandwidth.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import networkx as nx
from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.errors import FieldError, InputError
from simulator.network.design.limits import check_count, check_servers
from simulator.network.design.parts import (
    GBPS_IN_BYTES_PER_S,
    GBYTE_PER_S_IN_BYTES_PER_S,
    US_IN_S,
    GraphParts,
    add_gpu_nics,
    add_mesh_server,
    add_nvswitch_server,
    add_switch,
    scale_up_bisection,
    structure,
)
from simulator.network.design.rail_optimized import rail_fabric
from simulator.network.design.scale_up import add_scale_up_server
from simulator.network.design.spec import (
    ClosSpecBase,
    Gen5PcieGbytePerS,
    HostsSpecBase,
    NicPreset,
    NvlinkGbytePerS,
    ScaleOutMedium,
    ScaleOutSpecBase,
)
from simulator.network.design.storage import attach_storage
from simulator.network.design.tiers import ClosTiers, clos_above_leaves
from simulator.network.hardware import GPUSpec, apply_nic_preset
from simulator.units import PHYSICAL_LIMITS


class SwitchSpec(Spec):
    """N GPUs on one non-blocking switch (the simplest fabric; golden tests use it)."""

    generator: Literal["switch"] = Field(description="Generator tag.")
    gpus: int = Field(
        ge=2, description="Number of GPUs attached to the switch (at most 1,048,576: limits.py)."
    )
    link_gbyte_per_s: float = Field(gt=0, description="Per-direction GPU-switch bandwidth, GB/s.")
    latency_us: float = Field(1.0, ge=0, description="One-way latency of each GPU-switch link, us.")
    medium: Literal["nvlink", "xgmi", "pcie", "ib", "ethernet"] = Field(
        "nvlink", description="Medium of the GPU-switch links."
    )

    @model_validator(mode="after")
    def _size(self) -> SwitchSpec:
        check_count("GPUs", self.gpus, {"gpus": self.gpus})
        return self


class RailClosSpec(Spec):
    """Servers of G GPUs, one NIC per GPU, rail-optimized leaves, one spine layer.

    Rail r of every server in a group of `servers_per_leaf` servers plugs into the same leaf
    switch; leaves connect to every spine. `oversubscription` is leaf down-bandwidth over
    up-bandwidth (1 = non-blocking, 2 = half the uplink bandwidth).
    """

    generator: Literal["rail_clos"] = Field(description="Generator tag.")
    nodes: int = Field(ge=1, description="Number of servers (nodes × gpus_per_node at most 1,048,576).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs (and NICs) per server.")
    scale_up: Literal["nvswitch", "xgmi_mesh"] = Field(
        "nvswitch", description="Intra-server fabric: NVSwitch or a full xGMI mesh."
    )
    scale_up_gbyte_per_s: float = Field(
        450.0,
        gt=0,
        description="NVSwitch: per-GPU bandwidth per direction; xgmi_mesh: per-link, GB/s.",
    )
    scale_up_latency_us: float = Field(0.7, ge=0, description="Intra-server hop latency, us.")
    nic: NicPreset = None
    nic_gbps: float = Field(400.0, gt=0, description="NIC speed, Gbit/s per direction.")
    nic_medium: Literal["ib", "ethernet"] = Field("ib", description="Scale-out medium.")
    servers_per_leaf: int = Field(32, ge=1, description="Servers whose rail-r NICs share a leaf.")
    oversubscription: float = Field(
        1.0,
        ge=1.0,
        description="Leaf down/up bandwidth ratio (1 = non-blocking): the leaf keeps one uplink "
        "per spine, each at the down bandwidth / ratio / uplinks (priced at the next speed the "
        "price table lists).",
    )
    spines: int | None = Field(
        None,
        ge=1,
        description="Spine count; default = uplinks per leaf (one to each spine). Every leaf "
        "links to every spine: at most 8,388,608 links in all (limits.py).",
    )
    link_latency_us: float = Field(1.0, ge=0, description="Latency of each network hop, us.")

    @model_validator(mode="before")
    @classmethod
    def _nic_preset(cls, data: Any) -> Any:
        return apply_nic_preset(data, medium_key="nic_medium")

    @model_validator(mode="after")
    def _check(self) -> RailClosSpec:
        if self.scale_up == "xgmi_mesh" and self.gpus_per_node < 2:
            raise FieldError("xgmi_mesh needs at least 2 GPUs per node", field="gpus_per_node")
        spine_links = math.ceil(self.nodes / self.servers_per_leaf) * self.gpus_per_node * self.uplinks
        spines = {"spines": self.spines} if self.spines else {}
        check_servers(self.nodes, self.gpus_per_node, self.scale_up == "xgmi_mesh", spine_links, spines)
        per_leaf = min(self.servers_per_leaf, self.nodes)
        up_gbps = per_leaf * self.nic_gbps / self.oversubscription / self.uplinks
        floor_gbps = PHYSICAL_LIMITS["_bytes_per_s"][0] / GBPS_IN_BYTES_PER_S
        if up_gbps < floor_gbps:  # as any bandwidth a file gives (`simulator.units`)
            raise FieldError(
                f"leaves a spine link of {up_gbps:.3g} Gbit/s, under the smallest bandwidth accepted "
                f"({floor_gbps:g} Gbit/s); lower the ratio",
                field="oversubscription",
            )
        return self

    @property
    def uplinks(self) -> int:
        """Uplinks of each leaf (one to each spine): `spines`, else enough for the ratio."""
        per_leaf = min(self.servers_per_leaf, self.nodes)
        return self.spines or max(1, math.ceil(per_leaf / self.oversubscription))


class SuperPodSpec(ClosSpecBase):
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
    nodes: int = Field(32, ge=1, description="Number of 8-GPU servers (at most 1,048,576 GPUs).")
    su_size: int = Field(32, ge=1, description="Servers per scalable unit (per leaf switch).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs (and NICs, one per GPU) per server.")
    nvlink_gbyte_per_s: NvlinkGbytePerS = 450.0
    pcie_gbyte_per_s: Gen5PcieGbytePerS = 64.0
    switch_radix: int = Field(64, ge=4, description="Ports per leaf/spine/core switch.")
    oversubscription: float = Field(
        1.0,
        ge=1,
        description="Leaf down:up bandwidth ratio asked (1 = non-blocking, 2 = 2:1): a leaf gets "
        "ceil(su_size / ratio) uplink ports of the NIC speed, so the ratio built is su_size over "
        "that (16 servers at 3: 6 uplinks, 2.67:1; `clustersim topo` shows it).",
    )

    @model_validator(mode="after")
    def _size(self) -> SuperPodSpec:
        check_servers(self.nodes, self.gpus_per_node)
        return self


class MI300XClusterSpec(ClosSpecBase):
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
    nodes: int = Field(128, ge=1, description="Number of 8-GPU servers (at most 1,048,576 GPUs).")
    su_size: int = Field(32, ge=1, description="Servers per leaf group (nodes per leaf).")
    gpus_per_node: int = Field(8, ge=2, description="GPUs per server (full xGMI mesh).")
    xgmi_gbyte_per_s: float = Field(
        64.0, gt=0, description="Bandwidth of one xGMI link between two GPUs, GB/s per direction."
    )
    nic_gbps: float = Field(400.0, gt=0, description="Speed of each NIC (Pollara 400), Gbit/s.")
    pcie_gbyte_per_s: Gen5PcieGbytePerS = 64.0
    medium: ScaleOutMedium = "ethernet"

    @model_validator(mode="after")
    def _size(self) -> MI300XClusterSpec:
        check_servers(self.nodes, self.gpus_per_node, mesh=True)
        return self


class RailOnlySpec(ScaleOutSpecBase):
    """Rail-only network (no spine).

    After Wang et al., "Optimized Network Architectures for Large Language Model
    Training with Billions of Parameters" (rail-only, 2023): high-bandwidth (HB) domains
    of `gpus_per_node` GPUs on NVSwitch, and one switch per rail joining NIC j of every
    server. There is no spine: traffic between different rails of different servers
    first crosses the HB domain to a GPU on the destination rail (as NCCL's PXN does).

    Without `switch_radix` each rail is one switch of `nodes` ports (a large rail built as
    a Clos or chassis is drawn as one switch); with it, each rail is a non-blocking Clos of
    switches of that radix (one switch while the rail fits, then leaves and spines, and
    cores past `switch_radix` leaves; `rail_optimized.rail_fabric`), priced whole.
    """

    generator: Literal["rail_only"] = Field("rail_only", description="Design tag.")
    nodes: int = Field(32, ge=1, description="Number of servers (HB domains; at most 1,048,576 GPUs).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per HB domain (and rails).")
    nvlink_gbyte_per_s: NvlinkGbytePerS = 450.0
    switch_radix: int | None = Field(
        None, ge=4, description="Ports per rail switch; default one switch per rail of `nodes` ports."
    )

    @model_validator(mode="after")
    def _even_radix(self) -> RailOnlySpec:
        if self.switch_radix is not None and self.switch_radix % 2:
            raise FieldError(f"switch_radix must be even, got {self.switch_radix}", field="switch_radix")
        check_servers(self.nodes, self.gpus_per_node)
        return self


class MultiPlaneFatTreeSpec(ClosSpecBase):
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
    nodes: int = Field(64, ge=1, description="Number of servers (at most 1,048,576 GPUs).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs per server; one NIC and plane each.")
    nvlink_gbyte_per_s: NvlinkGbytePerS = 200.0

    @model_validator(mode="after")
    def _size(self) -> MultiPlaneFatTreeSpec:
        check_servers(self.nodes, self.gpus_per_node)
        return self


class FatTreeSpec(HostsSpecBase):
    """k-ary fat-tree (Al-Fares, Loukissas, Vahdat, SIGCOMM 2008).

    k pods, each with k/2 edge and k/2 aggregation switches of k ports; (k/2)^2 core
    switches; k^3/4 hosts and 5k^2/4 switches; full bisection bandwidth. Each host is a
    one-GPU server: GPU `n{i}.gpu0` with its own NIC `n{i}.nic0` (rail 0), so hosts and
    GPUs are the same count (chosen so that the formulas of the paper hold literally).
    """

    generator: Literal["fat_tree"] = Field("fat_tree", description="Design tag.")
    k: int = Field(8, ge=2, description="Switch radix k (even): k pods, k^3/4 hosts (at most 1,048,576).")

    @model_validator(mode="after")
    def _even_k(self) -> FatTreeSpec:
        if self.k % 2:
            raise FieldError(f"k must be even, got {self.k}", field="k")
        check_count("GPUs", self.k**3 // 4, {"k": self.k})
        return self


def build_switch(spec: SwitchSpec, gpu: GPUSpec | None) -> nx.Graph:
    """Build N GPUs on one switch (see `SwitchSpec`).

    On a scale-up medium (NVLink, xGMI, PCIe) the switch is tier 0 and the GPUs one
    server's; on a scale-out medium it is tier 1 and every GPU is a server of its own.
    """
    g = nx.Graph(name=f"switch-{spec.gpus}", gpu=gpu)
    tier = 0 if spec.medium in ("nvlink", "xgmi", "pcie") else 1
    g.add_node("sw0", kind="switch", tier=tier, role="switch", ports=spec.gpus)
    for j in range(spec.gpus):
        n = f"gpu{j}"
        g.add_node(n, kind="gpu", node="n0" if tier == 0 else f"n{j}", local_rank=j if tier == 0 else 0)
        g.add_edge(
            n,
            "sw0",
            bandwidth_bytes_per_s=spec.link_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S,
            latency_s=spec.latency_us * US_IN_S,
            medium=spec.medium,
        )
    return g


def build_rail_clos(spec: RailClosSpec, gpu: GPUSpec | None) -> nx.Graph:
    """Build the rail-optimized Clos described in `RailClosSpec`."""
    g = nx.Graph(name=f"rail-clos-{spec.nodes}x{spec.gpus_per_node}", gpu=gpu)
    gpn, lat = spec.gpus_per_node, spec.link_latency_us * US_IN_S
    nic_bw = spec.nic_gbps * GBPS_IN_BYTES_PER_S
    su_bw = spec.scale_up_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    groups = math.ceil(spec.nodes / spec.servers_per_leaf)
    per_leaf = min(spec.servers_per_leaf, spec.nodes)
    down_bw = per_leaf * nic_bw
    up_bw_total = down_bw / spec.oversubscription
    n_up = spec.uplinks
    up_bw = up_bw_total / n_up
    for i in range(spec.nodes):
        names = add_scale_up_server(g, i, gpn, spec.scale_up, su_bw, spec.scale_up_latency_us * US_IN_S)
        grp = i // spec.servers_per_leaf
        for j, gname in enumerate(names):
            nic = f"n{i}.nic{j}"
            g.add_node(nic, kind="nic", node=f"n{i}", local_rank=j, rail=j)
            g.add_edge(gname, nic, bandwidth_bytes_per_s=nic_bw, latency_s=0.0, medium="pcie")
            leaf = f"leaf{j}.{grp}"
            g.add_edge(nic, leaf, bandwidth_bytes_per_s=nic_bw, latency_s=lat, medium=spec.nic_medium)
    for grp in range(groups):
        for j in range(gpn):
            leaf = f"leaf{j}.{grp}"
            g.nodes[leaf].update(kind="switch", tier=1, role="leaf", rail=j, ports=per_leaf + n_up)
    uplink = {"bandwidth_bytes_per_s": up_bw, "latency_s": lat, "medium": spec.nic_medium}
    if groups > 1 or spec.spines:
        for s in range(n_up):
            g.add_node(f"spine{s}", kind="switch", tier=2, role="spine", ports=groups * gpn)
        for grp in range(groups):
            for j in range(gpn):
                for s in range(n_up):
                    g.add_edge(f"leaf{j}.{grp}", f"spine{s}", **uplink)
    elif gpn > 1 and spec.nodes > 1:
        # one leaf group: rails still need a path between them; a spine layer provides it
        for s in range(n_up):
            g.add_node(f"spine{s}", kind="switch", tier=2, role="spine", ports=gpn)
            for j in range(gpn):
                g.add_edge(f"leaf{j}.0", f"spine{s}", **uplink)
    return g


def _rail_clos_bisection(
    spec: SuperPodSpec | MI300XClusterSpec, clos: ClosTiers, nic_bw: float, pcie: float
) -> tuple[float, str]:
    """Bisection bandwidth (bytes/s) of a rail-optimized Clos, and how it was derived."""
    G = spec.gpus_per_node
    n_gpus = spec.nodes * G
    if spec.nodes > 1:
        cuts = [n_gpus * nic_bw / 2] + [c / 2 for c in clos.tier_up_bytes_per_s]
        return min(cuts), "Clos tier cut: min(GPUs/2 x NIC bandwidth, half of each tier's uplinks)"
    out_bw = min(nic_bw, pcie)
    if isinstance(spec, MI300XClusterSpec):
        bis = (G // 2) * (G - G // 2) * spec.xgmi_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
        bis += G / 2 * out_bw
        return bis, "one server: (G/2)^2 xGMI links + G/2 NIC links cross a balanced split"
    per_gpu = spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    return scale_up_bisection(n_gpus, per_gpu, out_bw), "one server: G/2 x (NVLink + NIC bandwidth)"


def _rail_clos(spec: SuperPodSpec | MI300XClusterSpec, gpu: GPUSpec | None) -> nx.Graph:
    """Rail-optimized Clos: leaf `leaf{rail}.{su}` per rail per scalable unit, then spines."""
    parts = GraphParts()
    G = spec.gpus_per_node
    up_lat = spec.scale_up_latency_us * US_IN_S
    lat = spec.hop_latency_us * US_IN_S
    nic_bw = spec.nic_gbps * GBPS_IN_BYTES_PER_S
    pcie = spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
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
        add_switch(parts, name, 1, "leaf", ports, rail=int(rail_s), su=int(su_s))
    for i in range(spec.nodes):
        if isinstance(spec, SuperPodSpec):
            nvlink = spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
            gpus = add_nvswitch_server(parts, i, G, nvlink, up_lat)
        else:
            xgmi = spec.xgmi_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
            gpus = add_mesh_server(parts, i, G, xgmi, up_lat, "xgmi")
        nics = add_gpu_nics(parts, i, gpus, pcie, up_lat)
        s = i // spec.su_size
        for r, nic in enumerate(nics):
            parts.link(nic, f"leaf{r}.{s}", nic_bw, lat, spec.medium, reach="aoc")
    clos = clos_above_leaves(
        parts, leaves, spec.switch_radix, spec.oversubscription, nic_bw, lat, spec.medium
    )
    if spec.storage:
        attach_storage(parts, spec.storage, clos.top, [n for n, _ in leaves], spec.medium, lat)
    bis, method = _rail_clos_bisection(spec, clos, nic_bw, pcie)
    return parts.graph(
        spec.name or spec.generator,
        gpu,
        structure(
            spec.generator,
            bis,
            method,
            tiers=2 if not clos.cores else 3,
            uplinks_per_leaf=clos.uplinks_per_leaf,
        ),
    )


def build_superpod(spec: SuperPodSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a DGX H100 SuperPOD-like rail-optimized fabric (see `SuperPodSpec`)."""
    return _rail_clos(spec, gpu)


def build_mi300x_cluster(spec: MI300XClusterSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build an MI300X xGMI-mesh cluster on a rail-optimized Ethernet fabric."""
    return _rail_clos(spec, gpu)


def _rails_meet_in_servers_bisection(
    nodes: int, gpus_per_node: int, nvlink_gbyte_per_s: float, cut_bytes_per_s: float, cut_method: str
) -> tuple[float, str]:
    """Bisection of a design whose rails (planes) meet only inside the servers.

    With one server each rail/plane switch holds a single NIC and nothing crosses the
    scale-out side, so NVLink bounds the split; with several, `cut_bytes_per_s` does.
    """
    if nodes == 1:
        bis = scale_up_bisection(nodes * gpus_per_node, nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S)
        return bis, "one server: G/2 x NVLink bandwidth (rails meet only in the server)"
    return cut_bytes_per_s, cut_method


def build_rail_only(spec: RailOnlySpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a rail-only network: HB domains plus one switch per rail (see `RailOnlySpec`)."""
    parts = GraphParts()
    G = spec.gpus_per_node
    up_lat = spec.scale_up_latency_us * US_IN_S
    lat = spec.hop_latency_us * US_IN_S
    nic_bw = spec.nic_gbps * GBPS_IN_BYTES_PER_S
    nvlink = spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    if spec.switch_radix is None:
        rails = [add_switch(parts, f"rail{r}", 1, "rail", spec.nodes, rail=r) for r in range(G)]
        leaves = rails
    rail_nics: list[list[str]] = [[] for _ in range(G)]
    for i in range(spec.nodes):
        gpus = add_nvswitch_server(parts, i, G, nvlink, up_lat)
        nics = add_gpu_nics(parts, i, gpus, spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S, up_lat)
        for r, nic in enumerate(nics):
            if spec.switch_radix is None:
                parts.link(nic, rails[r], nic_bw, lat, spec.medium, reach="aoc")
            rail_nics[r].append(nic)
    if spec.switch_radix is not None:
        radix = spec.switch_radix
        rails = [
            top
            for r in range(G)
            for top in rail_fabric(parts, r, rail_nics[r], radix, nic_bw, lat, spec.medium)
        ]
        leaves = [n for n, d in parts.nodes if d.get("kind") == "switch" and d.get("tier") == 1]
    if spec.storage:
        attach_storage(parts, spec.storage, rails, leaves, spec.medium, lat)
    n_gpus = spec.nodes * G
    # splitting the servers in two halves cuts every NIC link of one half (rails are
    # single switches); a split inside an HB domain is bounded by NVLink, which is larger
    bis, method = _rails_meet_in_servers_bisection(
        spec.nodes,
        G,
        spec.nvlink_gbyte_per_s,
        min(n_gpus / 2 * nic_bw, n_gpus / 2 * spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S),
        "rail switches are non-blocking: GPUs/2 x NIC bandwidth",
    )
    return parts.graph(spec.name or spec.generator, gpu, structure(spec.generator, bis, method))


def _plane_leaves(parts: GraphParts, spec: MultiPlaneFatTreeSpec, down: int) -> list[list[tuple[str, int]]]:
    """Add the leaves `p{p}.leaf{l}` of every plane; return each plane's (leaf, down ports)."""
    n_leaves = math.ceil(spec.nodes / down)
    planes = []
    for p in range(spec.gpus_per_node):
        leaves = []
        for lf in range(n_leaves):
            members = min(down, spec.nodes - lf * down)
            name = f"p{p}.leaf{lf}"
            ports = members + (math.ceil(members / spec.oversubscription) if n_leaves > 1 else 0)
            add_switch(parts, name, 1, "leaf", ports, plane=p, rail=p)
            leaves.append((name, members))
        planes.append(leaves)
    return planes


def build_multiplane_fattree(spec: MultiPlaneFatTreeSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build one two-layer fat-tree per NIC plane (see `MultiPlaneFatTreeSpec`)."""
    parts = GraphParts()
    G = spec.gpus_per_node
    up_lat = spec.scale_up_latency_us * US_IN_S
    lat = spec.hop_latency_us * US_IN_S
    nic_bw = spec.nic_gbps * GBPS_IN_BYTES_PER_S
    up = math.ceil(spec.switch_radix / (1 + spec.oversubscription))
    down = spec.switch_radix - up
    n_leaves = math.ceil(spec.nodes / down)
    planes = _plane_leaves(parts, spec, down)
    for i in range(spec.nodes):
        nvlink = spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
        gpus = add_nvswitch_server(parts, i, G, nvlink, up_lat)
        nics = add_gpu_nics(parts, i, gpus, spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S, up_lat)
        for p, nic in enumerate(nics):
            parts.link(nic, f"p{p}.leaf{i // down}", nic_bw, lat, spec.medium, reach="aoc")
    tops: list[str] = []
    leaf_names: list[str] = []
    up_cut = math.inf
    for p, leaves in enumerate(planes):
        if n_leaves > spec.switch_radix:
            raise InputError(
                f"{spec.nodes} nodes need {n_leaves} leaves per plane; a two-layer fat-tree "
                f"of {spec.switch_radix}-port switches allows {spec.switch_radix}",
                field="nodes",
            )
        clos = clos_above_leaves(
            parts,
            leaves,
            spec.switch_radix,
            spec.oversubscription,
            nic_bw,
            lat,
            spec.medium,
            prefix=f"p{p}.",
            extra={"plane": p},
        )
        tops.extend(clos.top)
        leaf_names.extend(n for n, _ in leaves)
        if clos.tier_up_bytes_per_s:
            up_cut = min(up_cut, G * clos.tier_up_bytes_per_s[0] / 2)
    if spec.storage:
        attach_storage(parts, spec.storage, tops, leaf_names, spec.medium, lat)
    bis, method = _rails_meet_in_servers_bisection(
        spec.nodes,
        G,
        spec.nvlink_gbyte_per_s,
        min(spec.nodes * G / 2 * nic_bw, up_cut),
        "per-plane Clos tier cut, summed over planes",
    )
    return parts.graph(spec.name or spec.generator, gpu, structure(spec.generator, bis, method))


def build_fat_tree(spec: FatTreeSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a k-ary fat-tree with one-GPU hosts (see `FatTreeSpec`)."""
    parts = GraphParts()
    k = spec.k
    half = k // 2
    bw = spec.link_gbps * GBPS_IN_BYTES_PER_S
    lat = spec.hop_latency_us * US_IN_S
    up_lat = spec.scale_up_latency_us * US_IN_S
    cores = [add_switch(parts, f"core{c}", 3, "core", k) for c in range(half * half)]
    edges: list[str] = []
    host = 0
    for pod in range(k):
        pod_edges = [add_switch(parts, f"pod{pod}.edge{e}", 1, "edge", k, pod=pod) for e in range(half)]
        pod_aggs = [add_switch(parts, f"pod{pod}.agg{a}", 2, "aggregation", k, pod=pod) for a in range(half)]
        for e in pod_edges:
            for a in pod_aggs:
                parts.link(e, a, bw, lat, spec.medium, reach="aoc")
            for _ in range(half):
                node = f"n{host}"
                gname = parts.node(f"{node}.gpu0", kind="gpu", node=node, local_rank=0)
                nic = parts.node(f"{node}.nic0", kind="nic", node=node, local_rank=0, rail=0)
                parts.link(gname, nic, spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S, up_lat, "pcie")
                parts.link(nic, e, bw, lat, spec.medium, reach="dac")
                host += 1
        for ai, a in enumerate(pod_aggs):
            for c in range(half):
                parts.link(a, cores[ai * half + c], bw, lat, spec.medium, reach="optics")
        edges.extend(pod_edges)
    if spec.storage:
        attach_storage(parts, spec.storage, cores, edges, spec.medium, lat)
    bis = host / 2 * min(bw, spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S)
    return parts.graph(
        spec.name or spec.generator,
        gpu,
        structure(spec.generator, bis, "k-ary fat-tree is non-blocking: hosts/2 x link bandwidth"),
    )
