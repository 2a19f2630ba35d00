"""Single-server fabrics: GPUs on NVSwitch, GPUs in a full xGMI mesh, GPUs behind PCIe switches.

What is modelled:
    * `nvswitch_node`: one server of G GPUs on NVSwitch, like a DGX H100.
    * `xgmi_mesh`: one server of G GPUs fully connected point to point, like MI300X platforms.
    * `pcie_node`: Fire-Flyer 2-like servers whose GPUs and NIC sit behind PCIe switches
      meeting at the CPU root complex, the servers joined by a two-layer fat-tree.

What is simplified: switches are non-blocking crossbars (no internal contention, no
buffers); an NVSwitch system (several chips) is one switch node with one link per GPU
carrying the GPU's whole NVLink bandwidth. The two single-server generators draw the
plain graph the golden tests pin: no cable counts (`links`), cable classes (`reach`),
switch port counts or `structure` record.
"""

from __future__ import annotations

import math
from typing import Literal

import networkx as nx
from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.errors import InputError
from simulator.network.design.limits import check_count
from simulator.network.design.parts import (
    GBPS_IN_BYTES_PER_S,
    GBYTE_PER_S_IN_BYTES_PER_S,
    US_IN_S,
    GraphParts,
    add_gpus,
    add_switch,
    structure,
)
from simulator.network.design.spec import ClosSpecBase, NicGbps, SwitchRadix
from simulator.network.design.storage import attach_storage
from simulator.network.design.tiers import clos_above_leaves
from simulator.network.hardware import GPUSpec


class NVSwitchNodeSpec(Spec):
    """One server of G GPUs on NVSwitch, like a DGX H100 (450 GB/s per GPU per direction)."""

    generator: Literal["nvswitch_node"] = Field(description="Generator tag.")
    gpus: int = Field(8, ge=2, description="GPUs in the server (at most 1,048,576: limits.py).")
    nvlink_gbyte_per_s: float = Field(
        450.0, gt=0, description="Per-GPU NVLink bandwidth per direction, GB/s (H100: 450)."
    )
    nvlink_latency_us: float = Field(0.7, ge=0, description="GPU-NVSwitch hop latency, us.")

    @model_validator(mode="after")
    def _size(self) -> NVSwitchNodeSpec:
        check_count("GPUs", self.gpus, {"gpus": self.gpus})
        return self


class XGMIMeshSpec(Spec):
    """One server of G GPUs fully connected point to point, like MI300X platforms (7 links/GPU)."""

    generator: Literal["xgmi_mesh"] = Field(description="Generator tag.")
    gpus: int = Field(
        8,
        ge=2,
        description="GPUs in the server; each links to every other (G(G-1)/2 links, at most "
        "8,388,608: limits.py).",
    )
    link_gbyte_per_s: float = Field(
        64.0, gt=0, description="Per-link bandwidth per direction, GB/s (MI300X xGMI: 64)."
    )
    link_latency_us: float = Field(1.0, ge=0, description="Per-link latency, us.")

    @model_validator(mode="after")
    def _size(self) -> XGMIMeshSpec:
        check_count("links", self.gpus * (self.gpus - 1) // 2, {"gpus": self.gpus})
        return self


class PCIeNodeSpec(ClosSpecBase):
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
    nodes: int = Field(40, ge=1, description="Number of servers (at most 1,048,576 GPUs in all).")
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
    nic_gbps: NicGbps = 200.0
    switch_radix: SwitchRadix = 40

    @model_validator(mode="after")
    def _size(self) -> PCIeNodeSpec:
        factors = {"nodes": self.nodes, "pcie_switches": self.pcie_switches}
        factors["gpus_per_switch"] = self.gpus_per_switch
        check_count("GPUs", self.nodes * self.pcie_switches * self.gpus_per_switch, factors)
        return self


def add_scale_up_server(
    g: nx.Graph, server: int, gpus: int, fabric: str, bandwidth_bytes_per_s: float, latency_s: float
) -> list[str]:
    """Add server `server`'s GPUs and its scale-up fabric to `g`; return the GPU names.

    Args:
        g: the graph under construction.
        server: server index; its GPUs are `n{server}.gpu{j}`.
        gpus: GPUs in the server; a one-GPU server has no scale-up fabric.
        fabric: `nvswitch` (every GPU to one switch `n{server}.nvsw`) or `xgmi_mesh`
            (one link per GPU pair).
        bandwidth_bytes_per_s: per GPU (NVSwitch) or per link (mesh), per direction.
        latency_s: one-way latency of each scale-up link.
    """
    names = [f"n{server}.gpu{j}" for j in range(gpus)]
    g.add_nodes_from((n, {"kind": "gpu", "node": f"n{server}", "local_rank": j}) for j, n in enumerate(names))
    if gpus == 1:
        return names
    link = {"bandwidth_bytes_per_s": bandwidth_bytes_per_s, "latency_s": latency_s}
    if fabric == "nvswitch":
        sw = f"n{server}.nvsw"
        g.add_node(sw, kind="switch", tier=0, role="nvswitch", node=f"n{server}")
        g.add_edges_from((n, sw, {**link, "medium": "nvlink"}) for n in names)
    else:
        g.add_edges_from(
            (a, b, {**link, "medium": "xgmi"}) for x, a in enumerate(names) for b in names[x + 1 :]
        )
    return names


def build_nvswitch_node(spec: NVSwitchNodeSpec, gpu: GPUSpec | None) -> nx.Graph:
    """Build one NVSwitch server (see `NVSwitchNodeSpec`)."""
    g = nx.Graph(name=f"nvswitch-node-{spec.gpus}", gpu=gpu)
    nvlink_bytes_per_s = spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    add_scale_up_server(g, 0, spec.gpus, "nvswitch", nvlink_bytes_per_s, spec.nvlink_latency_us * US_IN_S)
    return g


def build_xgmi_mesh(spec: XGMIMeshSpec, gpu: GPUSpec | None) -> nx.Graph:
    """Build one full-mesh xGMI server (see `XGMIMeshSpec`)."""
    g = nx.Graph(name=f"xgmi-mesh-{spec.gpus}", gpu=gpu)
    link_bytes_per_s = spec.link_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    add_scale_up_server(g, 0, spec.gpus, "xgmi_mesh", link_bytes_per_s, spec.link_latency_us * US_IN_S)
    return g


def _add_pcie_server(parts: GraphParts, spec: PCIeNodeSpec, server: int, nic_leaves: list[str]) -> None:
    """Add one PCIe server: root complex, PCIe switches, GPUs, NICs and optional NVLink bridges.

    NIC s (behind PCIe switch s) plugs into leaf `nic_leaves[s]`.
    """
    lat = spec.hop_latency_us * US_IN_S
    up_lat = spec.scale_up_latency_us * US_IN_S
    pcie = spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    per = spec.gpus_per_switch
    node = f"n{server}"
    cpu = parts.node(f"{node}.cpu", kind="host", node=node)
    gpus = add_gpus(parts, server, spec.pcie_switches * per)
    for s in range(spec.pcie_switches):
        sw = add_switch(parts, f"{node}.pcie{s}", 0, "pcie", per + 2, node=node)
        parts.link(sw, cpu, pcie, up_lat, "pcie")
        for j in range(s * per, (s + 1) * per):
            parts.link(gpus[j], sw, pcie, up_lat, "pcie")
        nic = parts.node(f"{node}.nic{s}", kind="nic", node=node, local_rank=s, rail=s)
        parts.link(nic, sw, pcie, up_lat, "pcie")
        parts.link(nic, nic_leaves[s], spec.nic_gbps * GBPS_IN_BYTES_PER_S, lat, spec.medium, reach="aoc")
    if spec.nvlink_bridge_gbyte_per_s:
        bridge = spec.nvlink_bridge_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
        for j in range(0, len(gpus) - 1, 2):
            parts.link(gpus[j], gpus[j + 1], bridge, up_lat, "nvlink")


def build_pcie_node(spec: PCIeNodeSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build Fire-Flyer 2-like PCIe servers on a two-layer fat-tree (see `PCIeNodeSpec`)."""
    parts = GraphParts()
    lat = spec.hop_latency_us * US_IN_S
    nic_bw = spec.nic_gbps * GBPS_IN_BYTES_PER_S
    pcie = spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    S, per = spec.pcie_switches, spec.gpus_per_switch
    up = math.ceil(spec.switch_radix / (1 + spec.oversubscription))
    down_nics = spec.switch_radix - up
    total_nics = spec.nodes * S
    n_leaves = math.ceil(total_nics / down_nics)
    leaves = []
    for lf in range(n_leaves):
        members = min(down_nics, total_nics - lf * down_nics)
        ports = members + (math.ceil(members / spec.oversubscription) if n_leaves > 1 else 0)
        leaves.append((add_switch(parts, f"leaf{lf}", 1, "leaf", ports), members))
    for i in range(spec.nodes):
        # the cluster's NICs fill the leaves in order, `down_nics` to a leaf
        nic_leaves = [leaves[(i * S + s) // down_nics][0] for s in range(S)]
        _add_pcie_server(parts, spec, i, nic_leaves)
    if n_leaves > spec.switch_radix:
        raise InputError(
            f"{spec.nodes} nodes need {n_leaves} leaves; a two-layer fat-tree of "
            f"{spec.switch_radix}-port switches allows {spec.switch_radix}",
            field="nodes",
        )
    clos = clos_above_leaves(
        parts, leaves, spec.switch_radix, spec.oversubscription, nic_bw, lat, spec.medium
    )
    if spec.storage:
        attach_storage(parts, spec.storage, clos.top, [n for n, _ in leaves], spec.medium, lat)
    if spec.nodes == 1:
        bis = (S * per) / 2 * pcie if S == 1 else min(S / 2 * pcie, S * per / 2 * pcie)
        method = "one server: PCIe switch / root-complex bound"
    else:
        cuts = [total_nics * nic_bw / 2] + [c / 2 for c in clos.tier_up_bytes_per_s]
        bis = min(cuts)
        method = "Clos tier cut: min(NICs/2 x NIC bandwidth, half of each tier's uplinks)"
    return parts.graph(spec.name or spec.generator, gpu, structure(spec.generator, bis, method))
