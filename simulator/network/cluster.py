"""A cluster: a topology graph made ready to simulate.

Builds the directed link table, the router and the collective helper once; holds the
cluster's state (links down, links degraded, straggling GPUs). Storage nodes get virtual
*media* links (`STOR/media` at their write bandwidth, `STOR/media-read` at their read
bandwidth), so a checkpoint write or load is limited by the slowest of the network path
and the storage media.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import numpy as np

from simulator.errors import SimulationError
from simulator.network.collective import Topo
from simulator.network.graph import gpus as graph_gpus
from simulator.network.graph import natural_key
from simulator.network.hardware import GPUSpec
from simulator.network.routing import LinkTable, Router

MEDIA_SUFFIX = "/media"
READ_SUFFIX = "/media-read"


class Cluster:
    """Graph + link table + router for one cluster state.

    Args:
        graph: a validated topology graph.
        gpu: the GPU spec of its GPUs.
        down: undirected edges that are down (routing avoids them).
        degraded: {(u, v): factor} capacity factors applied to both directions.
        stragglers: {gpu name: slowdown factor >= 1}.
    """

    def __init__(
        self,
        graph: nx.Graph,
        gpu: GPUSpec,
        down: Iterable[tuple[str, str]] = (),
        degraded: dict[tuple[str, str], float] | None = None,
        stragglers: dict[str, float] | None = None,
    ) -> None:
        self.storage = sorted(
            (n for n, d in graph.nodes(data=True) if d.get("kind") == "storage"), key=natural_key
        )
        # the graph is shared with the caller unless media links are added to a copy (neither
        # the cluster nor its router modifies it)
        g = graph.copy() if self.storage else graph
        for s in self.storage:
            for suffix, key in (
                (MEDIA_SUFFIX, "write_bandwidth_bytes_per_s"),
                (READ_SUFFIX, "read_bandwidth_bytes_per_s"),
            ):
                bw = g.nodes[s].get(key)
                if bw:
                    g.add_node(s + suffix, kind="storage", role="media")
                    g.add_edge(s, s + suffix, bandwidth_bytes_per_s=float(bw), latency_s=0.0, medium="pcie")
        self.graph = g
        self.gpu = gpu
        self.gpus = graph_gpus(g)
        self.down: list[tuple[str, str]] = [(u, v) for u, v in down]
        for u, v in self.down:
            if not g.has_edge(u, v):
                raise SimulationError(f"cannot mark {u}-{v} down: no such link")
        self.links = LinkTable(g)
        self.router = Router(g, self.links, self.down)
        self.topo = Topo(g, self.router)
        self.degraded = dict(degraded or {})
        self.stragglers = dict(stragglers or {})
        for (u, v), f in self.degraded.items():
            if (u, v) not in self.links.index:
                raise SimulationError(f"cannot degrade {u}-{v}: no such link")
            if not 0 < f <= 1:
                raise SimulationError(f"link factor for {u}-{v} must be in (0, 1], got {f}")

    def capacity_factors(self) -> np.ndarray:
        """Capacity factor of every directed link: its degradation factor, 1 if not degraded."""
        f = np.ones(len(self.links))
        for (u, v), x in self.degraded.items():
            f[self.links.index[(u, v)]] = x
            f[self.links.index[(v, u)]] = x
        return f

    def storage_sink(self, target: str | None, rank: int) -> str:
        """The media node a checkpoint write from `rank` goes to."""
        if not self.storage:
            raise SimulationError("a checkpoint op needs a storage node, and this topology has none")
        if target is None:
            target = self.storage[rank % len(self.storage)]
        if target not in self.storage:
            raise SimulationError(f"checkpoint target {target!r} is not a storage node; have {self.storage}")
        sink = target + MEDIA_SUFFIX
        return sink if sink in self.graph else target

    def storage_source(self, rank: int) -> str:
        """The media node a checkpoint load to `rank` reads from."""
        if not self.storage:
            raise SimulationError("a checkpoint load needs a storage node, and this topology has none")
        target = self.storage[rank % len(self.storage)]
        src = target + READ_SUFFIX
        return src if src in self.graph else target

    def check_gpus_reachable(self, used: list[str]) -> None:
        self.router.check_reachable(used)
