"""Graph parts the topology builders share: unit factors, a graph accumulator, servers, NICs.

What is modelled: the pieces every design repeats, drawn as `simulator.network.graph`
prescribes: GPUs `n{i}.gpu{j}` of server `n{i}`, a server whose GPUs hang off one tier-0
NVSwitch, a server whose GPUs are fully meshed (one link per pair, as xGMI), one NIC per
GPU (`n{i}.nic{j}` on rail j) joined to its GPU by PCIe, switches with a tier, a role and a
port count, and the `structure` record a builder leaves on its graph (bisection bandwidth
and how it was derived).

What is simplified: an in-server switch built from several chips is one node whose ports
are not priced; parallel cables between two nodes are one edge whose bandwidth is their
sum and whose `links` attribute counts them.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from simulator.network.hardware import GPUSpec
from simulator.units import factor

# Specs keep the human units of the YAML; builders convert to SI once with these factors
# (from the one table of human units in `simulator.units`).
GBPS_IN_BYTES_PER_S = factor("_gbps")  # one Gbit/s (network gear is sold in Gbit/s)
GBYTE_PER_S_IN_BYTES_PER_S = factor("_gbyte_per_s")  # one GB/s (NVLink, xGMI, PCIe)
US_IN_S = factor("_us")  # one microsecond


class GraphParts:
    """Nodes and edges of a graph under construction, added to the graph in two bulk calls."""

    def __init__(self) -> None:
        self.nodes: list[tuple[str, dict[str, Any]]] = []
        self.edges: list[tuple[str, str, dict[str, Any]]] = []

    def node(self, name: str, **attrs: Any) -> str:
        """Add a node with its attributes; return its name."""
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
        """Add an edge of `links` parallel cables; `bandwidth_bytes_per_s` is their sum.

        Args:
            u, v: the nodes it joins.
            bandwidth_bytes_per_s: per direction, all cables together.
            latency_s: one-way latency of the hop.
            medium: `nvlink`, `xgmi`, `pcie`, `ib` or `ethernet`.
            links: number of parallel cables.
            reach: cable class for the cost model (`dac`, `aoc`, `optics`); none inside a server.
        """
        d: dict[str, Any] = {
            "bandwidth_bytes_per_s": float(bandwidth_bytes_per_s),
            "latency_s": float(latency_s),
            "medium": medium,
            "links": int(links),
        }
        if reach is not None:
            d["reach"] = reach
        self.edges.append((u, v, d))

    def add_ports(self, extra_ports: dict[str, int]) -> None:
        """Add ports to switches declared earlier (e.g. ports that storage NICs plug into)."""
        for idx, (name, attrs) in enumerate(self.nodes):
            if name in extra_ports:
                self.nodes[idx] = (name, {**attrs, "ports": attrs.get("ports", 0) + extra_ports[name]})

    def graph(self, name: str, gpu: GPUSpec | None, structure: dict[str, Any]) -> nx.Graph:
        """The finished graph, with `name`, `gpu` (if given) and `structure` as graph attributes."""
        g = nx.Graph(name=name)
        if gpu is not None:
            g.graph["gpu"] = gpu
        g.graph["structure"] = structure
        g.add_nodes_from(self.nodes)
        g.add_edges_from(self.edges)
        return g


def add_switch(parts: GraphParts, name: str, tier: int, role: str, ports: int, **extra: Any) -> str:
    """Add a switch node of `ports` ports at `tier` (0 in a server, 1 leaf, 2 spine, 3 core)."""
    return parts.node(name, kind="switch", tier=tier, role=role, ports=int(ports), **extra)


def add_gpus(parts: GraphParts, server: int, count: int) -> list[str]:
    """Add the `count` GPUs of server `server`; return their names."""
    node = f"n{server}"
    return [parts.node(f"{node}.gpu{j}", kind="gpu", node=node, local_rank=j) for j in range(count)]


def add_nvswitch_server(
    parts: GraphParts, server: int, count: int, nvlink_bytes_per_s: float, latency_s: float
) -> list[str]:
    """Add a server of GPUs on one tier-0 NVSwitch, each with `nvlink_bytes_per_s` per direction."""
    gpus = add_gpus(parts, server, count)
    sw = add_switch(parts, f"n{server}.nvsw", 0, "nvswitch", count, node=f"n{server}")
    for gname in gpus:
        parts.link(gname, sw, nvlink_bytes_per_s, latency_s, "nvlink")
    return gpus


def add_mesh_server(
    parts: GraphParts, server: int, count: int, link_bytes_per_s: float, latency_s: float, medium: str
) -> list[str]:
    """Add a server of GPUs in a full mesh (one link per pair), as xGMI on MI300X platforms."""
    gpus = add_gpus(parts, server, count)
    for a in range(count):
        for b in range(a + 1, count):
            parts.link(gpus[a], gpus[b], link_bytes_per_s, latency_s, medium)
    return gpus


def add_gpu_nics(
    parts: GraphParts, server: int, gpus: list[str], pcie_bytes_per_s: float, latency_s: float
) -> list[str]:
    """Add one NIC per GPU, NIC j on rail j, joined to its GPU by PCIe; return the NIC names."""
    nics = []
    for j, gname in enumerate(gpus):
        nic = parts.node(f"n{server}.nic{j}", kind="nic", node=f"n{server}", local_rank=j, rail=j)
        parts.link(gname, nic, pcie_bytes_per_s, latency_s, "pcie")
        nics.append(nic)
    return nics


def scale_up_bisection(gpus: int, per_gpu_bytes_per_s: float, out_bytes_per_s: float = 0.0) -> float:
    """Bisection of one server split in half, bytes/s.

    Each GPU of one half reaches the other half over its scale-up link and, through its NIC
    and the leaf, over its scale-out link.
    """
    return gpus / 2 * (per_gpu_bytes_per_s + out_bytes_per_s)


def structure(design: str, bisection_bytes_per_s: float, method: str, **more: Any) -> dict[str, Any]:
    """The `structure` graph attribute: design tag, bisection bandwidth and how it was derived."""
    return {
        "design": design,
        "bisection_bytes_per_s": bisection_bytes_per_s,
        "bisection_method": method,
        **more,
    }
