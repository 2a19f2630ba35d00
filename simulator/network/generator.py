"""Spine topology generators: one switch, one NVSwitch node, one xGMI mesh node, rail Clos.

Each generator is a pydantic spec (tag: `generator`) and a builder returning a graph that
follows the conventions in `simulator.network.graph`. YAML uses human units (`*_gbps` are
gigabits per second, as network gear is sold; `*_gbyte_per_s` gigabytes per second, as
NVLink/xGMI are quoted; `latency_us` microseconds); builders store SI units on the graph.

Simplifications: switches are non-blocking crossbars (no internal contention, no buffers);
an NVSwitch system is one switch node with one link per GPU carrying the GPU's whole
NVLink bandwidth; NIC-to-GPU PCIe links are given the NIC's bandwidth.
"""

from __future__ import annotations

import math
from typing import Literal

import networkx as nx
from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.network.hardware import GPUSpec

GBIT = 1e9 / 8
GBYTE = 1e9
US = 1e-6


class SwitchSpec(Spec):
    """N GPUs on one non-blocking switch (the simplest fabric; golden tests use it)."""

    generator: Literal["switch"] = Field(description="Generator tag.")
    gpus: int = Field(ge=2, description="Number of GPUs attached to the switch.")
    link_gbyte_per_s: float = Field(gt=0, description="Per-direction GPU-switch bandwidth, GB/s.")
    latency_us: float = Field(1.0, ge=0, description="One-way latency of each GPU-switch link, us.")
    medium: Literal["nvlink", "xgmi", "pcie", "ib", "ethernet"] = Field(
        "nvlink", description="Medium of the GPU-switch links."
    )


class NVSwitchNodeSpec(Spec):
    """One server of G GPUs on NVSwitch, like a DGX H100 (450 GB/s per GPU per direction)."""

    generator: Literal["nvswitch_node"] = Field(description="Generator tag.")
    gpus: int = Field(8, ge=2, description="GPUs in the server.")
    nvlink_gbyte_per_s: float = Field(
        450.0, gt=0, description="Per-GPU NVLink bandwidth per direction, GB/s (H100: 450)."
    )
    nvlink_latency_us: float = Field(0.7, ge=0, description="GPU-NVSwitch hop latency, us.")


class XGMIMeshSpec(Spec):
    """One server of G GPUs fully connected point to point, like MI300X platforms (7 links/GPU)."""

    generator: Literal["xgmi_mesh"] = Field(description="Generator tag.")
    gpus: int = Field(8, ge=2, description="GPUs in the server; each links to every other.")
    link_gbyte_per_s: float = Field(
        64.0, gt=0, description="Per-link bandwidth per direction, GB/s (MI300X xGMI: 64)."
    )
    link_latency_us: float = Field(1.0, ge=0, description="Per-link latency, us.")


class RailClosSpec(Spec):
    """Servers of G GPUs, one NIC per GPU, rail-optimized leaves, one spine layer.

    Rail r of every server in a group of `servers_per_leaf` servers plugs into the same leaf
    switch; leaves connect to every spine. `oversubscription` is leaf down-bandwidth over
    up-bandwidth (1 = non-blocking, 2 = half the uplink bandwidth).
    """

    generator: Literal["rail_clos"] = Field(description="Generator tag.")
    nodes: int = Field(ge=1, description="Number of servers.")
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
    nic_gbps: float = Field(400.0, gt=0, description="NIC speed, Gbit/s per direction.")
    nic_medium: Literal["ib", "ethernet"] = Field("ib", description="Scale-out medium.")
    servers_per_leaf: int = Field(32, ge=1, description="Servers whose rail-r NICs share a leaf.")
    oversubscription: float = Field(
        1.0, ge=1.0, description="Leaf down/up bandwidth ratio (1 = non-blocking)."
    )
    spines: int | None = Field(
        None, ge=1, description="Spine count; default = uplinks per leaf (one to each spine)."
    )
    link_latency_us: float = Field(1.0, ge=0, description="Latency of each network hop, us.")

    @model_validator(mode="after")
    def _check(self) -> RailClosSpec:
        if self.scale_up == "xgmi_mesh" and self.gpus_per_node < 2:
            raise ValueError("xgmi_mesh needs at least 2 GPUs per node")
        return self


def _add_server(g: nx.Graph, i: int, gpn: int, kind: str, bw: float, lat: float, medium: str) -> list[str]:
    """Add server i's GPUs and its scale-up fabric; return GPU names."""
    names = [f"n{i}.gpu{j}" for j in range(gpn)]
    g.add_nodes_from((n, {"kind": "gpu", "node": f"n{i}", "local_rank": j}) for j, n in enumerate(names))
    if gpn == 1:
        return names
    if kind == "nvswitch":
        sw = f"n{i}.nvsw"
        g.add_node(sw, kind="switch", tier=0, role="nvswitch", node=f"n{i}")
        g.add_edges_from(
            (n, sw, {"bandwidth_bytes_per_s": bw, "latency_s": lat, "medium": "nvlink"}) for n in names
        )
    else:
        g.add_edges_from(
            (a, b, {"bandwidth_bytes_per_s": bw, "latency_s": lat, "medium": "xgmi"})
            for x, a in enumerate(names)
            for b in names[x + 1 :]
        )
    return names


def build_switch(spec: SwitchSpec, gpu: GPUSpec) -> nx.Graph:
    g = nx.Graph(name=f"switch-{spec.gpus}", gpu=gpu)
    tier = 0 if spec.medium in ("nvlink", "xgmi", "pcie") else 1
    g.add_node("sw0", kind="switch", tier=tier, role="switch", ports=spec.gpus)
    for j in range(spec.gpus):
        n = f"gpu{j}"
        g.add_node(n, kind="gpu", node="n0" if tier == 0 else f"n{j}", local_rank=j if tier == 0 else 0)
        g.add_edge(
            n,
            "sw0",
            bandwidth_bytes_per_s=spec.link_gbyte_per_s * GBYTE,
            latency_s=spec.latency_us * US,
            medium=spec.medium,
        )
    return g


def build_nvswitch_node(spec: NVSwitchNodeSpec, gpu: GPUSpec) -> nx.Graph:
    g = nx.Graph(name=f"nvswitch-node-{spec.gpus}", gpu=gpu)
    _add_server(
        g, 0, spec.gpus, "nvswitch", spec.nvlink_gbyte_per_s * GBYTE, spec.nvlink_latency_us * US, "nvlink"
    )
    return g


def build_xgmi_mesh(spec: XGMIMeshSpec, gpu: GPUSpec) -> nx.Graph:
    g = nx.Graph(name=f"xgmi-mesh-{spec.gpus}", gpu=gpu)
    _add_server(
        g, 0, spec.gpus, "xgmi_mesh", spec.link_gbyte_per_s * GBYTE, spec.link_latency_us * US, "xgmi"
    )
    return g


def build_rail_clos(spec: RailClosSpec, gpu: GPUSpec) -> nx.Graph:
    """Build the rail-optimized Clos described in `RailClosSpec`."""
    g = nx.Graph(name=f"rail-clos-{spec.nodes}x{spec.gpus_per_node}", gpu=gpu)
    gpn, lat = spec.gpus_per_node, spec.link_latency_us * US
    nic_bw = spec.nic_gbps * GBIT
    su_bw = spec.scale_up_gbyte_per_s * GBYTE
    groups = math.ceil(spec.nodes / spec.servers_per_leaf)
    per_leaf = min(spec.servers_per_leaf, spec.nodes)
    down_bw = per_leaf * nic_bw
    up_bw_total = down_bw / spec.oversubscription
    n_up = spec.spines or max(1, math.ceil(per_leaf / spec.oversubscription))
    up_bw = up_bw_total / n_up
    for i in range(spec.nodes):
        names = _add_server(g, i, gpn, spec.scale_up, su_bw, spec.scale_up_latency_us * US, "")
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
    if groups > 1 or spec.spines:
        for s in range(n_up):
            g.add_node(f"spine{s}", kind="switch", tier=2, role="spine", ports=groups * gpn)
        for grp in range(groups):
            for j in range(gpn):
                for s in range(n_up):
                    g.add_edge(
                        f"leaf{j}.{grp}",
                        f"spine{s}",
                        bandwidth_bytes_per_s=up_bw,
                        latency_s=lat,
                        medium=spec.nic_medium,
                    )
    elif gpn > 1 and spec.nodes > 1:
        # one leaf group: rails still need a path between them; a spine layer provides it
        for s in range(n_up):
            g.add_node(f"spine{s}", kind="switch", tier=2, role="spine", ports=gpn)
            for j in range(gpn):
                g.add_edge(
                    f"leaf{j}.0",
                    f"spine{s}",
                    bandwidth_bytes_per_s=up_bw,
                    latency_s=lat,
                    medium=spec.nic_medium,
                )
    return g


SPINE_SPECS = (SwitchSpec, NVSwitchNodeSpec, XGMIMeshSpec, RailClosSpec)

_BUILDERS = {
    SwitchSpec: build_switch,
    NVSwitchNodeSpec: build_nvswitch_node,
    XGMIMeshSpec: build_xgmi_mesh,
    RailClosSpec: build_rail_clos,
}


def build_spine(spec: Spec, gpu: GPUSpec) -> nx.Graph:
    """Build a graph from one of the spine generator specs."""
    return _BUILDERS[type(spec)](spec, gpu)  # type: ignore[operator]
