"""Collective algorithms expanded into flows on the fabric.

Size convention (as nccl-tests reports `size`): `size_bytes` is the buffer each rank holds in
full: the reduced buffer (all-reduce, reduce, broadcast), the gathered output (all-gather),
the scattered input (reduce-scatter), a rank's whole send buffer (all-to-all), the message
(send/recv).

Each algorithm becomes a sequence of *phases*. A phase waits its latency term, then moves
its flows concurrently on the fabric; the next phase starts when every flow of this one is
done. Latency convention: one *step* costs the largest path latency among the step's
transfers (sum of link latencies along the route) plus the per-step overhead `alpha_s`
(0 unless a calibration profile sets it).

* ring: pipelined steady state. A channel is one flow whose every edge carries
  2(n-1)/n·S/C (all-reduce), (n-1)/n·S/C (all-gather, reduce-scatter) or S/C (broadcast,
  reduce, as a chain) with 2(n-1), n-1 or n-1 latency steps. A ring inside one full-mesh
  server uses several edge-disjoint rings (C = up to n-1, as RCCL does on xGMI); a ring
  across servers uses C = GPUs per server channels, channel c entering every server at
  local GPU c, so every NIC carries traffic (NCCL's multi-channel rings).
* hierarchical (all-reduce): intra-server ring reduce-scatter, inter-server ring
  all-reduce of S/G per rail (G rings in parallel), intra-server ring all-gather.
* tree (all-reduce: double binary tree, NCCL's; broadcast/reduce: one binary tree):
  pipelined; each tree edge carries S/2 up and S/2 down for all-reduce, 2·depth steps.
  Across servers it is NCCL's shape: a chain inside each server and a double binary tree
  between servers, one per channel (GPU of a server), so every NIC carries traffic.
* halving_doubling (all-reduce, reduce-scatter, all-gather; Rabenseifner): log2 n rounds
  of pairwise exchange at halving distances (S/2, S/4, ...), then doubling; n must be a
  power of two.
* direct (all-to-all, and all-reduce/all-gather/reduce-scatter on a mesh): every rank
  sends its share to every other rank at once; one step per phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import log2

import networkx as nx
import numpy as np

from simulator.errors import SimulationError
from simulator.network.fabric import usage
from simulator.network.routing import Router

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "send_recv")
SUPPORTED: dict[str, tuple[str, ...]] = {
    "all_reduce": ("ring", "hierarchical", "tree", "halving_doubling", "direct"),
    "reduce_scatter": ("ring", "halving_doubling", "direct"),
    "all_gather": ("ring", "halving_doubling", "direct"),
    "broadcast": ("ring", "tree"),
    "reduce": ("ring", "tree"),
    "all_to_all": ("direct",),
    "send_recv": ("direct",),
}
DEFAULT_ALGORITHM = {
    "all_reduce": "ring",
    "reduce_scatter": "ring",
    "all_gather": "ring",
    "broadcast": "ring",
    "reduce": "ring",
    "all_to_all": "direct",
    "send_recv": "direct",
}
_DIRECT_MAX_RANKS = 1024


def bus_factor(kind: str, n: int) -> float:
    """busbw / algbw as nccl-tests defines it (doc/PERFORMANCE.md)."""
    if n <= 1:
        return 1.0
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


@dataclass(slots=True)
class PlannedFlow:
    """A flow of a phase: `edges` (src, dst GPU pairs) moving together, bytes per edge."""

    edges: list[tuple[str, str]]
    size_bytes: float
    label: str


@dataclass(slots=True)
class Phase:
    steps: int
    flows: list[PlannedFlow] = field(default_factory=list)


@dataclass(slots=True)
class Plan:
    kind: str
    algorithm: str
    n_ranks: int
    n_nodes: int
    size_bytes: float
    phases: list[Phase]

    @property
    def scope(self) -> str:
        return "intra" if self.n_nodes <= 1 else "inter"


class Topo:
    """What collectives need to know about the graph: server of each GPU, mesh servers."""

    def __init__(self, g: nx.Graph, router: Router) -> None:
        self.g = g
        self.router = router
        self._server: dict[str, str] = {}
        self._mesh_cache: dict[tuple[str, ...], bool] = {}

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


def _by_server(topo: Topo, gpus: list[str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for gname in gpus:
        groups.setdefault(topo.server(gname), []).append(gname)
    return list(groups.values())


def _disjoint_rings(n: int) -> list[list[int]]:
    """Edge-disjoint directed Hamiltonian cycles of the complete graph K_n (greedy search)."""
    used: set[tuple[int, int]] = set()
    rings: list[list[int]] = []
    for _ in range(n - 1):
        found = None
        # depth-first search with a node budget; deterministic order
        stack = [[0]]
        budget = 20000
        while stack and budget:
            budget -= 1
            path = stack.pop()
            if len(path) == n:
                if (path[-1], 0) not in used:
                    found = path
                    break
                continue
            last = path[-1]
            for nxt in sorted(range(n), reverse=True):
                if nxt not in path and (last, nxt) not in used:
                    stack.append([*path, nxt])
        if found is None:
            break
        rings.append(found)
        used.update((found[i], found[(i + 1) % n]) for i in range(n))
    return rings or [list(range(n))]


def _ring_orders(topo: Topo, gpus: list[str]) -> list[list[str]]:
    """Channel orders of a ring over `gpus` (see module docstring)."""
    servers = _by_server(topo, gpus)
    if len(servers) == 1:
        tgpus = tuple(gpus)
        if topo.is_full_mesh(tgpus):
            return [[gpus[i] for i in ring] for ring in _disjoint_rings(len(gpus))]
        return [list(gpus)]
    per = min(len(s) for s in servers)
    if any(len(s) != per for s in servers):
        return [list(gpus)]
    orders = []
    for c in range(per):
        order: list[str] = []
        for s in servers:
            order.extend(s[(c + j) % per] for j in range(per))
        orders.append(order)
    return orders


def _ring_edges(order: list[str], closed: bool = True) -> list[tuple[str, str]]:
    n = len(order)
    last = n if closed else n - 1
    return [(order[i], order[(i + 1) % n]) for i in range(last)]


def _ring(kind: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
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
        edges = _ring_edges(order, closed)
        if kind == "reduce":
            edges = [(b, a) for a, b in edges]
        flows.append(PlannedFlow(edges, per_edge, f"ring ch{i}"))
    return [Phase(steps, flows)]


def _hierarchical(topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    servers = _by_server(topo, gpus)
    g_local = len(servers[0])
    if len(servers) == 1 or any(len(s) != g_local for s in servers):
        return _ring("all_reduce", topo, gpus, size)
    n_srv = len(servers)
    intra = [_ring("reduce_scatter", topo, s, size)[0] for s in servers] if g_local > 1 else []
    rs = Phase(g_local - 1, [f for p in intra for f in p.flows])
    inter_flows = []
    for r in range(g_local):
        order = [s[r] for s in servers]
        inter_flows.append(
            PlannedFlow(_ring_edges(order), 2 * (n_srv - 1) / n_srv * size / g_local, f"rail{r}")
        )
    ar = Phase(2 * (n_srv - 1), inter_flows)
    ag = Phase(
        g_local - 1, [PlannedFlow(f.edges, f.size_bytes, f.label.replace("ring", "ag")) for f in rs.flows]
    )
    phases = [rs, ar, ag] if g_local > 1 else [ar]
    return phases


def _tree_edges(order: list[str]) -> list[tuple[str, str]]:
    """Child -> parent edges of a binary heap-shaped tree over `order`."""
    return [(order[i], order[(i - 1) // 2]) for i in range(1, len(order))]


def _tree(kind: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
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
    for c in range(g_local):
        chain_up: list[tuple[str, str]] = []
        for s in servers:
            order = [s[(c + j) % g_local] for j in range(g_local)]
            chain_up += [(order[j + 1], order[j]) for j in range(g_local - 1)]
        heads = [s[c] for s in servers]
        for t, order in enumerate((heads, heads[::-1])):
            up = chain_up + _tree_edges(order)
            flows.append(PlannedFlow(up + [(b, a) for a, b in up], size / (2 * g_local), f"tree{t} ch{c}"))
    return [Phase(2 * (depth + g_local - 1), flows)]


def _halving_doubling(kind: str, gpus: list[str], size: float) -> list[Phase]:
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


def _direct(kind: str, gpus: list[str], size: float) -> list[Phase]:
    n = len(gpus)
    if n > _DIRECT_MAX_RANKS:
        raise SimulationError(
            f"direct {kind} over {n} ranks would be {n * (n - 1)} flows; use ring or "
            f"hierarchical, or at most {_DIRECT_MAX_RANKS} ranks"
        )
    edges = [(a, b) for a in gpus for b in gpus if a != b]
    share = size / n
    if kind == "all_reduce":
        return [
            Phase(1, [PlannedFlow(edges, share, "direct rs")]),
            Phase(1, [PlannedFlow(edges, share, "direct ag")]),
        ]
    return [Phase(1, [PlannedFlow(edges, share, "direct")])]


def check_algorithm(kind: str, algorithm: str | None, n_ranks: int) -> str:
    """The algorithm a collective of `n_ranks` will use, or SimulationError if it cannot.

    Checked before a run (by `simulator.scenario.prepare`) and again when planned.
    """
    if kind not in SUPPORTED:
        raise SimulationError(f"unknown collective {kind!r}; expected one of {list(SUPPORTED)}")
    algorithm = algorithm or DEFAULT_ALGORITHM[kind]
    if algorithm not in SUPPORTED[kind]:
        raise SimulationError(
            f"{kind} has no {algorithm!r} algorithm; expected one of {list(SUPPORTED[kind])}"
        )
    if algorithm == "halving_doubling" and n_ranks & (n_ranks - 1):
        raise SimulationError(f"halving_doubling needs a power-of-two group; this group has {n_ranks} ranks")
    if algorithm == "direct" and kind != "send_recv" and n_ranks > _DIRECT_MAX_RANKS:
        raise SimulationError(
            f"direct {kind} over {n_ranks} ranks would be {n_ranks * (n_ranks - 1)} flows; use ring or "
            f"hierarchical, or at most {_DIRECT_MAX_RANKS} ranks"
        )
    return algorithm


def plan_collective(
    kind: str, algorithm: str | None, topo: Topo, instances: list[list[str]], size_bytes: float
) -> Plan:
    """Expand a collective on one or more same-shaped GPU groups into phases of flows.

    `instances` are groups that run the same collective at the same time (e.g. the same
    gradient all-reduce in every tensor-parallel rank); their phases merge index by index.
    """
    algorithm = check_algorithm(kind, algorithm, len(instances[0]))
    merged: list[Phase] = []
    n_ranks = len(instances[0])
    n_nodes = max(len({topo.server(x) for x in inst}) for inst in instances)
    for gpus in instances:
        if len(gpus) != n_ranks:
            raise SimulationError(
                f"{kind}: mirrored groups must have the same size ({len(gpus)} != {n_ranks})"
            )
        if n_ranks == 1:
            phases: list[Phase] = []
        elif kind == "send_recv" and n_ranks == 2:
            phases = [Phase(1, [PlannedFlow([(gpus[0], gpus[1])], size_bytes, "p2p")])]
        elif kind == "send_recv":
            # every rank sends to the next at once (as nccl-tests' sendrecv_perf does)
            edges = _ring_edges(gpus)
            phases = [Phase(1, [PlannedFlow([e], size_bytes, f"p2p{i}") for i, e in enumerate(edges)])]
        elif algorithm == "ring":
            phases = _ring(kind, topo, gpus, size_bytes)
        elif algorithm == "hierarchical":
            phases = _hierarchical(topo, gpus, size_bytes)
        elif algorithm == "tree":
            phases = _tree(kind, topo, gpus, size_bytes)
        elif algorithm == "halving_doubling":
            phases = _halving_doubling(kind, gpus, size_bytes)
        else:
            phases = _direct(kind, gpus, size_bytes)
        for i, p in enumerate(phases):
            if i < len(merged):
                merged[i].flows.extend(p.flows)
                merged[i].steps = max(merged[i].steps, p.steps)
            else:
                merged.append(Phase(p.steps, list(p.flows)))
    return Plan(kind, algorithm, n_ranks, n_nodes, size_bytes, merged)


def flow_usage(router: Router, edges: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray, float]:
    """Distinct links, multiplicities and the largest path latency of a flow's edges."""
    links, counts = usage([router.path(a, b) for a, b in edges])
    lat = max(router.latency_s(a, b) for a, b in edges)
    return links, counts, lat
