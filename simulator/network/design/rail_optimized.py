"""Fixed-radix rail-optimized Clos (two or three tiers), and fixed-radix rails for rail-only.

What is modelled:
    * `rail_optimized_clos`: servers of G GPUs on one NVSwitch, one NIC per GPU, NIC j on
      rail j. Every switch has the same radix k (a parameter): a leaf per rail per group of
      `servers_per_leaf` servers (default k/2), `ceil(servers_per_leaf / oversubscription)`
      uplinks per leaf, then spines, and with three tiers cores, built as a k-ary fat-tree
      above the leaves (pods of k/2 leaves with their own spines; core group j joins spine j
      of every pod, `tiers.clos_above_leaves`). With k = 64 and 1:1 it holds up to 2,048
      leaves (65,536 GPUs at G = 8) in three tiers, the scale of 8k-32k-GPU clusters.
      Every switch carries `radix`, so the cost model prices whole switches.
    * `rail_fabric`: one rail of a rail-only network built from the same k-port switches
      (one switch when the rail fits in k ports, else a Clos of leaves and spines, and cores
      past k leaves), the per-rail Clos of Wang et al.'s rail-only design.

What is simplified: switches are non-blocking crossbars; the in-server NVSwitch chips are
one node; every tier's links run at the NIC speed; oversubscription is applied at the leaf
tier only.
"""

from __future__ import annotations

import math
from typing import Literal

import networkx as nx
from pydantic import Field, model_validator

from simulator.errors import FieldError, InputError
from simulator.network.design.limits import check_servers
from simulator.network.design.parts import (
    GBPS_IN_BYTES_PER_S,
    GBYTE_PER_S_IN_BYTES_PER_S,
    US_IN_S,
    GraphParts,
    add_gpu_nics,
    add_nvswitch_server,
    add_switch,
    structure,
)
from simulator.network.design.spec import ClosSpecBase, Gen5PcieGbytePerS, NvlinkGbytePerS
from simulator.network.design.storage import attach_storage
from simulator.network.design.tiers import clos_above_leaves
from simulator.network.hardware import GPUSpec


class RailOptimizedClosSpec(ClosSpecBase):
    """Fixed-radix rail-optimized Clos of NVSwitch servers, two or three switch tiers.

    Every leaf, spine and core switch has `switch_radix` ports (priced whole). Leaves take
    rail r of `servers_per_leaf` servers (default radix/2); above them spines, and cores
    once the leaves outnumber the radix (or when `tiers: 3` asks for them).
    """

    generator: Literal["rail_optimized_clos"] = Field("rail_optimized_clos", description="Design tag.")
    nodes: int = Field(128, ge=1, description="Number of GPU servers (at most 1,048,576 GPUs).")
    gpus_per_node: int = Field(8, ge=1, description="GPUs (and NICs, one per GPU) per server.")
    nvlink_gbyte_per_s: NvlinkGbytePerS = 450.0
    pcie_gbyte_per_s: Gen5PcieGbytePerS = 64.0
    servers_per_leaf: int | None = Field(
        None, ge=1, description="Servers whose rail-r NICs share a leaf (default radix/2)."
    )
    tiers: Literal[2, 3] | None = Field(
        None, description="Switch tiers; default the fewest that fit (3 past `switch_radix` leaves)."
    )

    @model_validator(mode="after")
    def _fits(self) -> RailOptimizedClosSpec:
        if self.switch_radix % 2:
            raise FieldError(f"switch_radix must be even, got {self.switch_radix}", field="switch_radix")
        check_servers(self.nodes, self.gpus_per_node)
        return self

    @property
    def per_leaf(self) -> int:
        """Servers on each leaf."""
        return self.servers_per_leaf or self.switch_radix // 2


def build_rail_optimized_clos(spec: RailOptimizedClosSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build the fixed-radix rail-optimized Clos described in `RailOptimizedClosSpec`."""
    parts = GraphParts()
    G, k, per_leaf = spec.gpus_per_node, spec.switch_radix, spec.per_leaf
    up_lat = spec.scale_up_latency_us * US_IN_S
    lat = spec.hop_latency_us * US_IN_S
    nic_bw = spec.nic_gbps * GBPS_IN_BYTES_PER_S
    n_groups = math.ceil(spec.nodes / per_leaf)
    leaves: list[tuple[str, int]] = []
    for grp in range(n_groups):
        members = min(per_leaf, spec.nodes - grp * per_leaf)
        for r in range(G):
            name = add_switch(parts, f"leaf{r}.{grp}", 1, "leaf", members, rail=r, su=grp, radix=k)
            leaves.append((name, members))
    for i in range(spec.nodes):
        nvlink = spec.nvlink_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
        gpus = add_nvswitch_server(parts, i, G, nvlink, up_lat)
        nics = add_gpu_nics(parts, i, gpus, spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S, up_lat)
        for r, nic in enumerate(nics):
            parts.link(nic, f"leaf{r}.{i // per_leaf}", nic_bw, lat, spec.medium, reach="aoc")
    if spec.tiers == 2 and len(leaves) > k:
        raise InputError(
            f"{len(leaves)} leaves cannot all reach {k}-port spines in two tiers; use tiers: 3",
            field="tiers",
        )
    clos = clos_above_leaves(
        parts,
        leaves,
        k,
        spec.oversubscription,
        nic_bw,
        lat,
        spec.medium,
        extra={"radix": k},
        min_tiers=spec.tiers or 2,
    )
    up = clos.uplinks_per_leaf if len(leaves) > 1 else 0
    parts.add_ports({name: up for name, _ in leaves})
    if spec.storage:
        attach_storage(parts, spec.storage, clos.top, [n for n, _ in leaves], spec.medium, lat)
    n_gpus = spec.nodes * G
    cuts = [n_gpus * nic_bw / 2] + [c / 2 for c in clos.tier_up_bytes_per_s]
    return parts.graph(
        spec.name or spec.generator,
        gpu,
        structure(
            spec.generator,
            min(cuts),
            "Clos tier cut: min(GPUs/2 x NIC bandwidth, half of each tier's uplinks)",
            tiers=3 if clos.cores else (2 if len(leaves) > 1 else 1),
            uplinks_per_leaf=clos.uplinks_per_leaf,
        ),
    )


def rail_fabric(
    parts: GraphParts,
    rail: int,
    nics: list[str],
    radix: int,
    nic_bytes_per_s: float,
    latency_s: float,
    medium: str,
) -> list[str]:
    """Cable `nics` (rail `rail` of every server) into a fabric of `radix`-port switches.

    One switch `rail{r}` when the rail fits in `radix` ports; otherwise leaves
    `rail{r}.leaf{l}` of radix/2 NICs each, with spines (and cores) above them.

    Returns:
        The rail's switches that storage may attach to (its top tier).
    """
    if len(nics) <= radix:
        sw = add_switch(parts, f"rail{rail}", 1, "rail", len(nics), rail=rail, radix=radix)
        for nic in nics:
            parts.link(nic, sw, nic_bytes_per_s, latency_s, medium, reach="aoc")
        return [sw]
    half = radix // 2
    leaves: list[tuple[str, int]] = []
    for lf in range(math.ceil(len(nics) / half)):
        members = nics[lf * half : (lf + 1) * half]
        name = add_switch(parts, f"rail{rail}.leaf{lf}", 1, "leaf", 2 * len(members), rail=rail, radix=radix)
        leaves.append((name, len(members)))
        for nic in members:
            parts.link(nic, name, nic_bytes_per_s, latency_s, medium, reach="aoc")
    clos = clos_above_leaves(
        parts,
        leaves,
        radix,
        1.0,
        nic_bytes_per_s,
        latency_s,
        medium,
        prefix=f"rail{rail}.",
        extra={"radix": radix, "rail": rail},
    )
    return clos.top
