"""What collectives need to know about GPU groups on a topology graph.

`Topo` answers, with caching: which server a GPU sits in, whether a set of GPUs is a full
mesh, and the `GroupFacts` of a group that the algorithm selection reads (ranks, nodes,
GPUs per node, scale-up link type and per-GPU bandwidth, per-GPU share of the server's
NIC rate, NVSwitch present, in-network reduction present), and the NIC preset the topology
named (`g.graph["nic"]`, None when it gave a rate instead).

Simplified: a group's facts are read from its first server (the designs are symmetric);
the per-GPU NIC share is the server's NIC rate into the network over all of the server's
GPUs, whatever part of the server the group uses; a GPU wired straight into the network
(no NIC node) counts its fastest link as its NIC, and a server without scale-up links
counts its PCIe link (or its fastest link) as its scale-up bandwidth.
"""

from __future__ import annotations

import networkx as nx

from simulator.network.routing import Router
from simulator.network.selection import GroupFacts

_SCALE_UP = ("nvlink", "xgmi")


class Topo:
    """What collectives need to know about the graph: server of each GPU, mesh servers."""

    def __init__(self, g: nx.Graph, router: Router) -> None:
        self.g = g
        self.router = router
        self._server: dict[str, str] = {}
        self._mesh_cache: dict[tuple[str, ...], bool] = {}
        self._facts: dict[tuple[int, int, int, str], GroupFacts] = {}
        self._nodes_of: dict[object, list[tuple[str, dict]]] | None = None
        self.nic: str | None = g.graph.get("nic")  # NIC preset name, when the topology gave one
        self.in_network_reduction = any(
            bool(d.get("in_network_reduction")) for _, d in g.nodes(data=True) if d.get("kind") == "switch"
        )

    def server(self, gpu: str) -> str:
        s = self._server.get(gpu)
        if s is None:
            s = str(self.g.nodes[gpu].get("node", f"domain{self.router.domain_of(gpu)}"))
            self._server[gpu] = s
        return s

    def is_full_mesh(self, gpus: tuple[str, ...]) -> bool:
        m = self._mesh_cache.get(gpus)
        if m is None:
            m = len(gpus) > 2 and all(
                self.g.has_edge(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]
            )
            self._mesh_cache[gpus] = m
        return m

    def facts(self, gpus: list[str]) -> GroupFacts:
        """The group's `GroupFacts` (see `simulator.network.selection`)."""
        first = self.server(gpus[0])
        local = [x for x in gpus if self.server(x) == first]
        n_nodes = len({self.server(x) for x in gpus})
        key = (len(gpus), n_nodes, len(local), first)
        f = self._facts.get(key)
        if f is None:
            f = self._compute(gpus[0], first, local, len(gpus), n_nodes)
            self._facts[key] = f
        return f

    def _compute(self, gpu: str, server: str, local: list[str], n: int, n_nodes: int) -> GroupFacts:
        g = self.g
        local_set = set(local)
        intra, nvswitch, pcie = 0.0, False, 0.0
        for nb in g.neighbors(gpu):
            d = g.edges[gpu, nb]
            medium = d.get("medium")
            if medium in _SCALE_UP:
                nd = g.nodes[nb]
                if nd.get("kind") == "switch":
                    intra += d["bandwidth_bytes_per_s"]
                    nvswitch = nvswitch or medium == "nvlink"
                elif nb in local_set:
                    intra += d["bandwidth_bytes_per_s"]
            elif medium == "pcie":
                pcie = max(pcie, d["bandwidth_bytes_per_s"])
        link = "nvlink" if intra > 0 else "pci"
        fastest = max((d["bandwidth_bytes_per_s"] for _, _, d in g.edges(gpu, data=True)), default=0.0)
        if intra <= 0:
            intra = pcie or fastest
        nic_total, server_gpus = 0.0, 0
        if self._nodes_of is None:  # every node by its server, in graph order (built once)
            self._nodes_of = {}
            for node, d in g.nodes(data=True):
                self._nodes_of.setdefault(d.get("node"), []).append((node, d))
        for node, d in self._nodes_of.get(server, []):
            if d.get("kind") == "gpu":
                server_gpus += 1
            elif d.get("kind") == "nic":
                nic_total += sum(
                    g.edges[node, o]["bandwidth_bytes_per_s"]
                    for o in g.neighbors(node)
                    if g.nodes[o].get("node") != server
                )
        if nic_total <= 0:  # GPUs wired straight into the network (torus, dragonfly)
            nic_total = fastest * max(1, server_gpus)
        return GroupFacts(
            n_ranks=n,
            n_nodes=n_nodes,
            ppn=len(local),
            intra_link=link,
            intra_bytes_per_s=intra,
            nic_bytes_per_s=nic_total / max(1, server_gpus),
            nvswitch=nvswitch,
            in_network_reduction=self.in_network_reduction,
        )
