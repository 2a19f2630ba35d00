"""Server shapes: scale-up domains that routing cannot tell apart, so that it decides once per shape.

What is modelled: two scale-up domains (servers) have the same *shape* when, with each
domain's nodes listed in the graph's order, they have the same adjacency in that order (as
local indices), the same order of node names, and nodes with the same routing attributes
(is a network endpoint, local rank, rail). Everything the router decides inside a domain
(the shortest path between two of its nodes, its entry NIC for a GPU, hop counts, which NIC
leaves toward a switch) reads only these, so a decision taken on one domain of a shape holds,
by local index, for every other. The NIC a route leaves by also reads the network switches
each NIC is cabled to: domains of one shape cabled to the same switches share an *egress
class*.

What is simplified: nothing; this is bookkeeping. A domain's nodes map to local indices, its
directed in-domain links to local edge ids (a node's adjacency entries, in order), and each
domain keeps the global link index of each local edge. `bidirectional_path` is the search
for a shortest path inside a domain: networkx's bidirectional search written over plain
adjacency lists (the same path, ties included).
"""

from __future__ import annotations

from simulator.errors import SimulationError


def bidirectional_path(adj: dict[str, list[str]], a: str, b: str) -> list[str]:
    """The shortest path from `a` to `b` that `networkx.bidirectional_shortest_path` returns
    on the graph whose adjacency (in its order) is `adj`: the same search, written over
    plain lists (a != b).

    Raises:
        SimulationError: no path.
    """
    pred: dict[str, str | None] = {a: None}
    succ: dict[str, str | None] = {b: None}
    forward, reverse = [a], [b]
    meet: str | None = None
    while forward and reverse and meet is None:
        if len(forward) <= len(reverse):
            level, forward = forward, []
            for v in level:
                for w in adj[v]:
                    if w not in pred:
                        forward.append(w)
                        pred[w] = v
                    if w in succ:
                        meet = w
                        break
                if meet is not None:
                    break
        else:
            level, reverse = reverse, []
            for v in level:
                for w in adj[v]:
                    if w not in succ:
                        succ[w] = v
                        reverse.append(w)
                    if w in pred:
                        meet = w
                        break
                if meet is not None:
                    break
    if meet is None:
        raise SimulationError(f"no path from {a} to {b} inside their server")
    path: list[str] = []
    node: str | None = meet
    while node is not None:
        path.append(node)
        node = pred[node]
    path.reverse()
    node = succ[path[-1]]
    while node is not None:
        path.append(node)
        node = succ[node]
    return path


class ServerShapes:
    """Shape and egress class of every scale-up domain, computed when first asked for.

    Args:
        dom_adj: adjacency of every non-network-switch node inside its domain (in order).
        domain: domain id of every such node.
        attach: network switches each endpoint is cabled to (up links only).
        endpoints_of: endpoints of each domain, in name order.
        local_rank: `local_rank` attribute of every node (None if absent).
        rail: `rail` attribute of every node (None if absent).
        link_index: directed link (u, v) -> link index.
    """

    def __init__(
        self,
        dom_adj: dict[str, list[str]],
        domain: dict[str, int],
        attach: dict[str, list[str]],
        endpoints_of: dict[int, list[str]],
        local_rank: dict[str, object],
        rail: dict[str, object],
        link_index: dict[tuple[str, str], int],
    ) -> None:
        self._adj = dom_adj
        self._attach = attach
        self._endpoints_of = endpoints_of
        self._local_rank = local_rank
        self._rail = rail
        self._link_index = link_index
        # each domain's nodes in the graph's order, and every node's index in its domain
        self.nodes: dict[int, list[str]] = {}
        self.local: dict[str, int] = {}
        for n in dom_adj:
            members = self.nodes.setdefault(domain[n], [])
            self.local[n] = len(members)
            members.append(n)
        self._shape_of: dict[int, int] = {}
        self._shape_ids: dict[tuple[object, ...], int] = {}
        self.rep: list[int] = []  # shape -> the first domain seen with it
        self._edge_ids: list[dict[tuple[int, int], int]] = []  # shape -> local (i, j) -> edge id
        self._edge_links: dict[int, list[int]] = {}
        self._egress_of: dict[int, int] = {}
        self._egress_ids: dict[tuple[object, ...], int] = {}
        self.egress_rep: list[int] = []  # egress class -> the first domain seen with it

    def shape(self, d: int) -> int:
        """The shape id of domain `d`."""
        s = self._shape_of.get(d)
        if s is None:
            nodes = self.nodes[d]
            local, adj = self.local, self._adj
            lr, rail, attach = self._local_rank, self._rail, self._attach
            key = (
                tuple([tuple([local[v] for v in adj[n]]) for n in nodes]),
                tuple(sorted(range(len(nodes)), key=[str(n) for n in nodes].__getitem__)),
                tuple([(n in attach, lr[n], rail[n]) for n in nodes]),
            )
            s = self._shape_ids.get(key)
            if s is None:
                s = self._shape_ids[key] = len(self.rep)
                self.rep.append(d)
                self._edge_ids.append(
                    {
                        (i, j): k
                        for k, (i, j) in enumerate((i, j) for i, adj_i in enumerate(key[0]) for j in adj_i)
                    }
                )
            self._shape_of[d] = s
        return s

    def edge_ids(self, d: int, path: list[str]) -> tuple[int, ...]:
        """Local edge ids of a node path inside domain `d`."""
        ids, local = self._edge_ids[self.shape(d)], self.local
        return tuple(ids[(local[u], local[v])] for u, v in zip(path, path[1:], strict=False))

    def edge_links(self, d: int) -> list[int]:
        """Global link index of each local edge id of domain `d`."""
        el = self._edge_links.get(d)
        if el is None:
            nodes, idx = self.nodes[d], self._link_index
            el = self._edge_links[d] = [idx[(nodes[i], nodes[j])] for i, j in self._edge_ids[self.shape(d)]]
        return el

    def egress_class(self, d: int) -> int:
        """The egress class of domain `d`: its shape and the switches each of its endpoints is
        cabled to."""
        c = self._egress_of.get(d)
        if c is None:
            attach = self._attach
            key = (self.shape(d), tuple(tuple(attach[n]) for n in self._endpoints_of.get(d, [])))
            c = self._egress_ids.get(key)
            if c is None:
                c = self._egress_ids[key] = len(self.egress_rep)
                self.egress_rep.append(d)
            self._egress_of[d] = c
        return c
