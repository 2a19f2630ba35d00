"""Collective algorithms expanded into phases of flows between GPUs.

Size convention and latency convention: see `simulator.network.collective`. Each function
returns the phases of one GPU group; a phase's `steps` count latency steps (used when the
collective's latency is the summed path latency, protocol `ideal`).

NCCL's algorithms beyond ring and tree move their bytes as follows (the engine's flows
carry exactly these link loads; bandwidth factors and latency come from the selection):

* nvls (one server, NVSwitch; NVLink SHARP): the switch reduces. All-reduce: every GPU
  sends S into the switch (multimem reduce) plus its reduced S/n shard, and receives its
  S/n shard plus S (multicast): (n+1)/n·S per GPU link and direction. All-gather and
  reduce-scatter: S per GPU link and direction (an upper bound on the S/n + S pattern).
  A GPU's switch link load is modelled by a flow between consecutive GPUs of the server
  (each GPU sends once and receives once through the switch).
* nvls_tree (servers with NVSwitch): NVLS inside each server as above, and for each local
  GPU c a double binary tree between the servers' GPU c all-reducing that GPU's S/G
  shard (S/(2G) up and down per tree), pipelined in one phase.
* collnet (in-network reduction): a reduce-scatter inside each server, each GPU's S/G
  shard up to the switch and the result back (S/G per NIC and direction, modelled by a
  flow to the same local GPU of the next server), an all-gather inside each server.
* pat (all-gather / reduce-scatter, one GPU per server): the ring's link loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import log2

import numpy as np

from simulator.errors import SimulationError
from simulator.network.groups import Topo
from simulator.network.rings import by_server, chain_paths, ring_orders

DIRECT_MAX_RANKS = 1024


@dataclass(slots=True)
class PlannedFlow:
    """A flow of a phase: `edges` (src, dst GPU pairs) moving together, bytes per edge."""

    edges: list[tuple[str, str]]
    size_bytes: float
    label: str


@dataclass(slots=True)
class Phase:
    """Flows that run together; the next phase starts when all are done."""

    steps: int
    flows: list[PlannedFlow] = field(default_factory=list)


def _by_server(topo: Topo, gpus: list[str]) -> list[list[str]]:
    return by_server(topo.server, gpus)


def _ring_orders(topo: Topo, gpus: list[str]) -> list[list[str]]:
    """Channel orders of a ring over `gpus` (see `simulator.network.rings`)."""
    return ring_orders(topo.server, topo.is_full_mesh, gpus)


def ring_edges(order: list[str], closed: bool = True) -> list[tuple[str, str]]:
    n = len(order)
    last = n if closed else n - 1
    return [(order[i], order[(i + 1) % n]) for i in range(last)]


def ring(kind: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    n = len(gpus)
    orders = _ring_orders(topo, gpus)
    c = len(orders)
    if kind == "all_reduce":
        per_edge, steps, closed = 2 * (n - 1) / n * size / c, 2 * (n - 1), True
    elif kind in ("reduce_scatter", "all_gather"):
        per_edge, steps, closed = (n - 1) / n * size / c, n - 1, True
    else:  # broadcast / reduce as a pipelined chain from/to the first rank
        per_edge, steps, closed = size / c, n - 1, False
    flows = []
    for i, order in enumerate(orders):
        if kind in ("broadcast", "reduce") and c > 1:
            # every channel's chain starts at the root
            root = gpus[0]
            k = order.index(root)
            order = order[k:] + order[:k]
        edges = ring_edges(order, closed)
        if kind == "reduce":
            edges = [(b, a) for a, b in edges]
        flows.append(PlannedFlow(edges, per_edge, f"ring ch{i}"))
    return [Phase(steps, flows)]


def hierarchical(topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    servers = _by_server(topo, gpus)
    g_local = len(servers[0])
    if len(servers) == 1 or any(len(s) != g_local for s in servers):
        return ring("all_reduce", topo, gpus, size)
    n_srv = len(servers)
    intra = [ring("reduce_scatter", topo, s, size)[0] for s in servers] if g_local > 1 else []
    rs = Phase(g_local - 1, [f for p in intra for f in p.flows])
    inter_flows = []
    for r in range(g_local):
        order = [s[r] for s in servers]
        inter_flows.append(
            PlannedFlow(ring_edges(order), 2 * (n_srv - 1) / n_srv * size / g_local, f"rail{r}")
        )
    ar = Phase(2 * (n_srv - 1), inter_flows)
    ag = Phase(
        g_local - 1, [PlannedFlow(f.edges, f.size_bytes, f.label.replace("ring", "ag")) for f in rs.flows]
    )
    phases = [rs, ar, ag] if g_local > 1 else [ar]
    return phases


def btree_parent(r: int, n: int) -> int:
    """Parent of position r in NCCL's binary tree over n positions (-1 for the root, r = 0).

    NCCL's in-order tree (`ncclGetBtree`): with b the lowest set bit of r, the parent is
    (r xor b) | 2b, or r xor b when that falls outside; a child is at distance b from its
    parent, so most tree edges join neighbours in rank order (servers close in the fabric).
    """
    if r == 0:
        return -1
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    return up if up < n else r ^ bit


def _tree_edges(order: list[str]) -> list[tuple[str, str]]:
    """Child -> parent edges of NCCL's binary tree over `order` (`btree_parent`)."""
    n = len(order)
    return [(order[i], order[btree_parent(i, n)]) for i in range(1, n)]


def tree(kind: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    servers = _by_server(topo, gpus)
    g_local = len(servers[0])
    if kind == "all_reduce" and len(servers) > 1 and all(len(s) == g_local for s in servers):
        return _nccl_tree(topo, servers, size)
    n = len(gpus)
    depth = max(1, int(np.ceil(log2(n + 1))) - 1)
    if kind == "all_reduce":
        flows = []
        for t, order in enumerate((gpus, gpus[::-1])):
            up = _tree_edges(order)
            down = [(b, a) for a, b in up]
            flows.append(PlannedFlow(up + down, size / 2, f"tree{t}"))
        return [Phase(2 * depth, flows)]
    up = _tree_edges(gpus)
    edges = up if kind == "reduce" else [(b, a) for a, b in up]
    return [Phase(depth, [PlannedFlow(edges, size, "tree")])]


def _nccl_tree(topo: Topo, servers: list[list[str]], size: float) -> list[Phase]:
    """NCCL's multi-node tree all-reduce: per channel, a chain through each server's GPUs and a
    double binary tree between servers (entered at the channel's GPU, so every NIC is used);
    each of the 2·G (tree, channel) pairs reduces up and broadcasts down S/(2·G), pipelined."""
    g_local, n_srv = len(servers[0]), len(servers)
    depth = max(1, int(np.ceil(log2(n_srv + 1))) - 1)
    flows = []
    for c, local in enumerate(chain_paths(g_local, topo.is_full_mesh(tuple(servers[0])))):
        chain_up: list[tuple[str, str]] = []
        for s in servers:
            order = [s[j] for j in local]
            chain_up += [(order[j + 1], order[j]) for j in range(g_local - 1)]
        heads = [s[local[0]] for s in servers]
        for t, order in enumerate((heads, heads[::-1])):
            up = chain_up + _tree_edges(order)
            flows.append(PlannedFlow(up + [(b, a) for a, b in up], size / (2 * g_local), f"tree{t} ch{c}"))
    return [Phase(2 * (depth + g_local - 1), flows)]


def halving_doubling(kind: str, gpus: list[str], size: float) -> list[Phase]:
    n = len(gpus)
    if n & (n - 1):
        raise SimulationError(f"halving_doubling needs a power-of-two group; this group has {n} ranks")
    rounds = int(log2(n))
    rs: list[Phase] = []
    for k in range(rounds):
        dist = n >> (k + 1)
        edges = [(gpus[i], gpus[i ^ dist]) for i in range(n)]
        rs.append(Phase(1, [PlannedFlow(edges, size / (2 ** (k + 1)), f"hd r{k}")]))
    ag = [
        Phase(1, [PlannedFlow(p.flows[0].edges, p.flows[0].size_bytes, p.flows[0].label + " ag")])
        for p in reversed(rs)
    ]
    if kind == "reduce_scatter":
        return rs
    if kind == "all_gather":
        return ag
    return rs + ag


def too_many_for_direct(kind: str, n: int) -> str:
    """Why a direct `kind` over `n` ranks (more than `DIRECT_MAX_RANKS`) is refused, and
    what to use instead (an all-to-all has no other algorithm: smaller groups)."""
    instead = {
        "all_to_all": "split it into groups of at most",
        "all_reduce": "use ring or hierarchical, or at most",
    }.get(kind, "use ring, or at most")
    return f"direct {kind} over {n} ranks would be {n * (n - 1)} flows; {instead} {DIRECT_MAX_RANKS} ranks"


def direct(kind: str, gpus: list[str], size: float) -> list[Phase]:
    n = len(gpus)
    if n > DIRECT_MAX_RANKS:
        raise SimulationError(too_many_for_direct(kind, n))
    edges = [(a, b) for a in gpus for b in gpus if a != b]
    share = size / n
    if kind == "all_reduce":
        return [
            Phase(1, [PlannedFlow(edges, share, "direct rs")]),
            Phase(1, [PlannedFlow(edges, share, "direct ag")]),
        ]
    return [Phase(1, [PlannedFlow(edges, share, "direct")])]


def _mesh_ring_edges(servers: list[list[str]]) -> list[tuple[str, str]]:
    """Consecutive GPUs of each server: each GPU sends once and receives once."""
    return [e for s in servers if len(s) > 1 for e in ring_edges(s)]


def nvls(kind: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    n = len(gpus)
    per = (n + 1) / n * size if kind == "all_reduce" else size
    return [Phase(2, [PlannedFlow(_mesh_ring_edges([gpus]), per, "nvls")])]


def nvls_tree(topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    servers = _by_server(topo, gpus)
    g_local = len(servers[0])
    if len(servers) == 1 or any(len(s) != g_local for s in servers):
        return tree("all_reduce", topo, gpus, size)
    flows = [PlannedFlow(_mesh_ring_edges(servers), (g_local + 1) / g_local * size, "nvls")]
    depth = max(1, int(np.ceil(log2(len(servers) + 1))) - 1)
    for c in range(g_local):
        heads = [s[c] for s in servers]
        for t, order in enumerate((heads, heads[::-1])):
            up = _tree_edges(order)
            flows.append(
                PlannedFlow(up + [(b, a) for a, b in up], size / (2 * g_local), f"nvls_tree{t} ch{c}")
            )
    return [Phase(2 * depth + 2, flows)]


def collnet(kind: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    servers = _by_server(topo, gpus)
    g_local = len(servers[0])
    if len(servers) == 1 or any(len(s) != g_local for s in servers):
        return ring(kind, topo, gpus, size)
    flows = (
        [PlannedFlow(_mesh_ring_edges(servers), (g_local - 1) / g_local * size, "collnet intra")]
        if g_local > 1
        else []
    )
    for c in range(g_local):
        flows.append(PlannedFlow(ring_edges([s[c] for s in servers]), size / g_local, f"collnet ch{c}"))
    return [Phase(4, flows)]
