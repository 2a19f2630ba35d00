"""Storage servers attached to a design's scale-out network.

What is modelled: each storage server is a `storage` node `stor{i}` carrying its media
write and read bandwidth, with NICs `stor{i}.nic{j}` (a PCIe link to the server, then one
link to a switch). The NICs are spread round-robin over the switches of the tier the spec
names, in the order the design lists them, and add ports to those switches.

What is simplified: a storage NIC reaches its server over PCIe at 64 GB/s; the storage
server's internals (CPU, disks, file system) are the media bandwidth alone; a switch may
end up with more ports than a real part of its radix has.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.network.design.limits import check_count
from simulator.network.design.parts import GBPS_IN_BYTES_PER_S, GBYTE_PER_S_IN_BYTES_PER_S, GraphParts

_STORAGE_PCIE_BYTES_PER_S = 64 * GBYTE_PER_S_IN_BYTES_PER_S


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

    nodes: int = Field(ge=1, description="Number of storage servers (at most 65,536 storage NICs in all).")
    nics_per_node: int = Field(1, ge=1, description="NICs per storage server.")
    nic_gbps: float = Field(400.0, gt=0, description="Speed of each storage NIC, Gbit/s.")
    write_gbyte_per_s: float = Field(gt=0, description="Media write bandwidth per server, GB/s.")
    read_gbyte_per_s: float = Field(gt=0, description="Media read bandwidth per server, GB/s.")
    attach: Literal["top", "leaf"] = Field(
        "top", description="Switch tier the storage NICs plug into: `top` or `leaf` (tier 1)."
    )

    @model_validator(mode="after")
    def _size(self) -> StorageSpec:
        nics = self.nodes * self.nics_per_node
        check_count("storage NICs", nics, {"nodes": self.nodes, "nics_per_node": self.nics_per_node})
        return self


def attach_storage(
    parts: GraphParts,
    storage: StorageSpec,
    top: list[str],
    leaf: list[str],
    medium: str,
    latency_s: float,
    reach: str = "aoc",
) -> None:
    """Add storage servers `stor{i}` with NICs spread round-robin over the chosen tier.

    Args:
        parts: the graph under construction; the switches are already in it.
        storage: the storage servers to add.
        top: switches of the highest tier, used with `attach: top`.
        leaf: tier-1 switches, used with `attach: leaf`.
        medium: medium of the NIC-to-switch links.
        latency_s: one-way latency of every storage link.
        reach: cable class of the NIC-to-switch links.
    """
    targets = top if storage.attach == "top" else leaf
    nic_bytes_per_s = storage.nic_gbps * GBPS_IN_BYTES_PER_S
    k = 0
    extra_ports: dict[str, int] = {}
    for i in range(storage.nodes):
        s = parts.node(
            f"stor{i}",
            kind="storage",
            node=f"stor{i}",
            write_bandwidth_bytes_per_s=storage.write_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S,
            read_bandwidth_bytes_per_s=storage.read_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S,
        )
        for j in range(storage.nics_per_node):
            nic = parts.node(f"stor{i}.nic{j}", kind="nic", node=s, local_rank=j, rail=j)
            parts.link(s, nic, _STORAGE_PCIE_BYTES_PER_S, latency_s, "pcie")
            sw = targets[k % len(targets)]
            k += 1
            parts.link(nic, sw, nic_bytes_per_s, latency_s, medium, reach=reach)
            extra_ports[sw] = extra_ports.get(sw, 0) + 1
    # the switches were declared before storage; add the ports storage uses
    parts.add_ports(extra_ports)
