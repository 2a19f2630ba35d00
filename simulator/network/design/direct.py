"""Direct networks: GPU tori with no switches, and dragonflies of routers with attached hosts.

What is modelled:
    * `torus`: a 2D or 3D torus of GPUs, 2 links per dimension per GPU with wrap-around,
      consecutive GPUs along the last dimension grouped into servers.
    * `dragonfly`: groups of routers, a full mesh inside each group and global links spread
      evenly over the pairs of groups, one-GPU hosts on every router.

What is simplified: links have one speed per design; a torus has no NICs unless storage is
attached (then one frontend NIC per server on a single frontend switch, which carries the
traffic to storage only: GPUs reach each other over the torus, `network/direct_routes.py`);
parallel global links between two routers are one edge.
"""

from __future__ import annotations

import math
from typing import Literal

import networkx as nx
from pydantic import Field, model_validator

from simulator.errors import FieldError
from simulator.network.design.limits import check_count
from simulator.network.design.parts import (
    GBPS_IN_BYTES_PER_S,
    GBYTE_PER_S_IN_BYTES_PER_S,
    US_IN_S,
    GraphParts,
    add_switch,
    structure,
)
from simulator.network.design.spec import DesignSpecBase, HostsSpecBase, LinkGbps, PcieGbytePerS
from simulator.network.design.storage import attach_storage
from simulator.network.hardware import GPUSpec


class TorusSpec(DesignSpecBase):
    """2D or 3D torus of GPUs joined by direct links (no switches).

    Like the chip-to-chip tori of TPU v4 pods or direct-connect Gaudi clusters: every GPU
    has 2 links per dimension to its neighbours, with wrap-around. Consecutive GPUs along
    the last dimension are grouped `gpus_per_node` to a server (links inside a server are
    not priced as cables). A dimension of size 2 gets one edge carrying both links.

    Simplifications: no NICs unless `storage` is given, in which case each server gets
    one frontend NIC on a single frontend switch (a chassis drawn as one switch) that
    carries checkpoint traffic only (GPU-to-GPU traffic stays on the torus).
    """

    generator: Literal["torus"] = Field("torus", description="Design tag.")
    dims: list[int] = Field(
        default_factory=lambda: [4, 4, 4],
        min_length=2,
        max_length=3,
        description="Size of each dimension, e.g. [4, 4, 4]; each >= 2, their product (the GPUs) "
        "at most 1,048,576.",
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
            raise FieldError(f"every torus dimension must be >= 2, got {self.dims}", field="dims")
        if self.dims[-1] % self.gpus_per_node:
            raise FieldError(
                f"gpus_per_node ({self.gpus_per_node}) must divide the last dimension ({self.dims[-1]})",
                field="gpus_per_node",
            )
        check_count("GPUs", math.prod(self.dims), {"dims": max(self.dims)})
        return self


class DragonflySpec(HostsSpecBase):
    """Dragonfly (Kim, Dally, Scott, Abts, ISCA 2008).

    `groups` groups of `a` routers; each router has `p` hosts (one-GPU servers with one
    NIC each), a-1 local links (full mesh inside the group) and `h` global links to
    other groups. Global links are spread evenly over group pairs (with the maximum
    a*h+1 groups every pair of groups has exactly one link). Balanced when a = 2p = 2h.
    """

    generator: Literal["dragonfly"] = Field("dragonfly", description="Design tag.")
    a: int = Field(8, ge=1, description="Routers per group (a full mesh: a(a-1)/2 links a group).")
    p: int = Field(4, ge=1, description="Hosts (GPUs) per router; groups·a·p GPUs at most 1,048,576.")
    h: int = Field(4, ge=1, description="Global links per router.")
    groups: int | None = Field(None, ge=2, description="Number of groups; default a*h+1.")
    link_gbps: LinkGbps = 200.0
    pcie_gbyte_per_s: PcieGbytePerS = 32.0

    @model_validator(mode="after")
    def _check_groups(self) -> DragonflySpec:
        if self.groups is not None and self.groups > self.a * self.h + 1:
            raise FieldError(
                f"groups ({self.groups}) cannot exceed a*h+1 = {self.a * self.h + 1}: "
                "every pair of groups needs a global link",
                field="groups",
            )
        ng, a = self.group_count, self.a
        factors = {"a": a, "p": self.p, "h": self.h, **({"groups": ng} if self.groups else {})}
        check_count("GPUs", ng * a * self.p, factors)
        # two links per host, the groups' local meshes and the global links (at most a*h/2 a group)
        check_count("links", 2 * ng * a * self.p + ng * (a * (a - 1) // 2) + ng * a * self.h // 2, factors)
        return self

    @property
    def group_count(self) -> int:
        """Groups actually built."""
        return self.groups if self.groups is not None else self.a * self.h + 1


def build_torus(spec: TorusSpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a 2D/3D torus of GPUs with direct links (see `TorusSpec`)."""
    parts = GraphParts()
    dims = list(spec.dims)
    n = math.prod(dims)
    bw = spec.link_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S
    lat = spec.scale_up_latency_us * US_IN_S
    strides = [math.prod(dims[d + 1 :]) for d in range(len(dims))]
    names = []
    for idx in range(n):
        i, j = divmod(idx, spec.gpus_per_node)
        coord = ",".join(str((idx // strides[d]) % dims[d]) for d in range(len(dims)))
        names.append(parts.node(f"n{i}.gpu{j}", kind="gpu", node=f"n{i}", local_rank=j, coord=coord))
    for idx in range(n):
        for d, size in enumerate(dims):
            c = (idx // strides[d]) % size
            nxt = idx + strides[d] if c + 1 < size else idx - c * strides[d]
            wrap = c + 1 == size
            if size == 2:
                if c == 0:  # both links between the pair on one edge
                    parts.link(names[idx], names[nxt], 2 * bw, lat, spec.medium, links=2, reach="dac")
                continue
            parts.link(names[idx], names[nxt], bw, lat, spec.medium, reach="aoc" if wrap else "dac")
    servers = n // spec.gpus_per_node
    if spec.storage:
        fe_bw = spec.frontend_nic_gbps * GBPS_IN_BYTES_PER_S
        hop = spec.hop_latency_us * US_IN_S
        fe = add_switch(parts, "frontend", 1, "frontend", servers)
        for i in range(servers):
            nic = parts.node(f"n{i}.nic0", kind="nic", node=f"n{i}", local_rank=0, rail=0)
            for j in range(spec.gpus_per_node):
                parts.link(f"n{i}.gpu{j}", nic, 32 * GBYTE_PER_S_IN_BYTES_PER_S, lat, "pcie")
            parts.link(nic, fe, fe_bw, hop, "ethernet", reach="aoc")
        attach_storage(parts, spec.storage, [fe], [fe], "ethernet", hop)
    kmax = max(dims)
    bis = 2 * (n / kmax) * bw  # GPU traffic never takes the frontend (`direct_routes`)
    return parts.graph(
        spec.name or spec.generator,
        gpu,
        structure(
            spec.generator,
            bis,
            "torus: cutting the largest dimension k crosses 2 x N/k links (wrap-around)",
            diameter_links=sum(d // 2 for d in dims),
        ),
    )


def build_dragonfly(spec: DragonflySpec, gpu: GPUSpec | None = None) -> nx.Graph:
    """Build a dragonfly with one-GPU hosts (see `DragonflySpec`)."""
    parts = GraphParts()
    a, p, h, ng = spec.a, spec.p, spec.h, spec.group_count
    bw = spec.link_gbps * GBPS_IN_BYTES_PER_S
    lat = spec.hop_latency_us * US_IN_S
    up_lat = spec.scale_up_latency_us * US_IN_S
    routers = [[f"g{gi}.r{r}" for r in range(a)] for gi in range(ng)]
    for gi in range(ng):
        for r in range(a):
            add_switch(parts, routers[gi][r], 1, "router", p + (a - 1) + h, group=gi)
    host = 0
    for gi in range(ng):
        for r in range(a):
            for _ in range(p):
                node = f"n{host}"
                gname = parts.node(f"{node}.gpu0", kind="gpu", node=node, local_rank=0)
                nic = parts.node(f"{node}.nic0", kind="nic", node=node, local_rank=0, rail=0)
                parts.link(gname, nic, spec.pcie_gbyte_per_s * GBYTE_PER_S_IN_BYTES_PER_S, up_lat, "pcie")
                parts.link(nic, routers[gi][r], bw, lat, spec.medium, reach="dac")
                host += 1
            for peer in range(r + 1, a):
                parts.link(routers[gi][r], routers[gi][peer], bw, lat, spec.medium, reach="dac")
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
        parts.link(r1, r2, cables * bw, lat, spec.medium, links=cables, reach="optics")
    all_routers = [r for grp in routers for r in grp]
    if spec.storage:
        attach_storage(parts, spec.storage, all_routers, all_routers, spec.medium, lat)
    half = ng // 2
    bis = min(host / 2 * bw, half * (ng - half) * per_pair * bw)
    return parts.graph(
        spec.name or spec.generator,
        gpu,
        structure(
            spec.generator,
            bis,
            "dragonfly: min(hosts/2 x link, global links between two halves of the groups)",
            global_links_per_group_pair=per_pair,
        ),
    )
