"""Collectives planned as NCCL / RCCL run them: algorithm and protocol, then flows on the fabric.

Size convention (as nccl-tests reports `size`): `size_bytes` is the buffer each rank holds in
full: the reduced buffer (all-reduce, reduce, broadcast), the gathered output (all-gather),
the scattered input (reduce-scatter), a rank's whole send buffer (all-to-all), the message
(send/recv).

Per call, `plan_collective` picks the algorithm and protocol (`simulator.network.selection`:
NCCL's cost model with the constants of `CollectiveParams`; `auto` is the default, a fixed
algorithm and optionally a protocol, written `ring` or `ring/ll128`, may be given) and
expands the algorithm into flows (`simulator.network.algorithms`). The protocol sets the
collective's latency (NCCL's latency for the algorithm, protocol and link types) and the
fraction of the flows' fabric rate they reach (`Plan.efficiency`). A fixed algorithm with
no protocol runs `ideal`: summed path latencies (below) and the full link rate.

Each algorithm becomes a sequence of *phases*. A phase waits its latency term, then moves
its flows concurrently on the fabric; the next phase starts when every flow of this one is
done. Latency convention: one *step* costs the largest path latency among the step's
transfers (sum of link latencies along the route) plus the per-step overhead `alpha_s`
(0 unless a calibration profile sets it); with a protocol, the collective's latency is
NCCL's and is shared among the phases in proportion to their steps.

* ring: pipelined steady state. A channel is one flow whose every edge carries
  2(n-1)/n·S/C (all-reduce), (n-1)/n·S/C (all-gather, reduce-scatter) or S/C (broadcast,
  reduce, as a chain) with 2(n-1), n-1 or n-1 latency steps. A ring inside one full-mesh
  server uses several edge-disjoint rings (C = up to n-1, as RCCL does on xGMI); a ring
  across servers uses C = GPUs per server channels, each on its own path through every
  server and its own NIC (`simulator.network.rings`: on a full mesh no GPU-to-GPU link
  carries two channels), as NCCL's and RCCL's multi-channel rings do.
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
* nvls, nvls_tree, collnet, pat: NCCL's NVLink SHARP, NVLS with trees between servers,
  in-network reduction and PAT; their link loads are described in
  `simulator.network.algorithms`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.errors import SimulationError
from simulator.network import algorithms as alg
from simulator.network.algorithms import Phase, PlannedFlow
from simulator.network.collective_params import CollectiveParams, default_params
from simulator.network.fabric import usage
from simulator.network.groups import Topo
from simulator.network.nccl_tables import PROTOCOLS
from simulator.network.routing import Router
from simulator.network.selection import P2P_KINDS, Choice, choose

__all__ = ["COLLECTIVES", "SUPPORTED", "Phase", "Plan", "PlannedFlow", "Topo", "plan_collective"]

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "send_recv")
SUPPORTED: dict[str, tuple[str, ...]] = {
    "all_reduce": (
        "auto",
        "ring",
        "tree",
        "nvls",
        "nvls_tree",
        "collnet",
        "hierarchical",
        "halving_doubling",
        "direct",
    ),
    "reduce_scatter": ("auto", "ring", "nvls", "collnet", "pat", "halving_doubling", "direct"),
    "all_gather": ("auto", "ring", "nvls", "collnet", "pat", "halving_doubling", "direct"),
    "broadcast": ("auto", "ring", "tree"),
    "reduce": ("auto", "ring", "tree"),
    "all_to_all": ("auto", "direct"),
    "send_recv": ("auto", "direct"),
}
DEFAULT_ALGORITHM = "auto"


def parse_algorithm(kind: str, spec: str | None) -> tuple[str | None, str | None]:
    """`auto`, `ring` or `ring/ll128` -> (algorithm or None for auto, protocol or None).

    Raises:
        SimulationError: unknown collective, algorithm or protocol.
    """
    if kind not in SUPPORTED:
        raise SimulationError(f"unknown collective {kind!r}; expected one of {list(SUPPORTED)}")
    if spec is None:
        return None, None
    algo, _, proto = spec.partition("/")
    if algo not in SUPPORTED[kind]:
        raise SimulationError(f"{kind} has no {algo!r} algorithm; expected one of {list(SUPPORTED[kind])}")
    if proto and proto not in PROTOCOLS:
        raise SimulationError(f"unknown protocol {proto!r} in {spec!r}; expected one of {list(PROTOCOLS)}")
    return (None if algo == "auto" else algo), (proto or None)


def check_algorithm(kind: str, algorithm: str | None, n_ranks: int) -> None:
    """Refuse, before a run, an algorithm a group of `n_ranks` cannot use: a fixed one, or
    the one `auto` stands for when it has no choice (an all-to-all is always direct,
    `selection.choose`; for the other collectives `auto` chooses among algorithms any
    group can use). Checked by `simulator.scenario.prepare` so `validate` agrees with `run`.

    Raises:
        SimulationError: unknown collective, algorithm or protocol, or halving-doubling on a
            group whose size is not a power of two, direct over too many ranks.
    """
    algo, _ = parse_algorithm(kind, algorithm)
    if algo is None and kind in P2P_KINDS:
        algo = "direct"
    if algo == "halving_doubling" and n_ranks & (n_ranks - 1):
        raise SimulationError(f"halving_doubling needs a power-of-two group; this group has {n_ranks} ranks")
    if algo == "direct" and kind != "send_recv" and n_ranks > alg.DIRECT_MAX_RANKS:
        raise SimulationError(alg.too_many_for_direct(kind, n_ranks))


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
class Plan:
    """A planned collective: what runs (algorithm, protocol) and its phases of flows.

    Attributes:
        latency_s: the collective's latency from the cost model, s; None = summed path
            latencies of the phases (protocol `ideal`, point-to-point).
        efficiency: fraction of the flows' fabric rate the protocol reaches.
        predicted_s: the cost model's predicted time alone, s (0 when not predicted).
    """

    kind: str
    algorithm: str
    n_ranks: int
    n_nodes: int
    size_bytes: float
    phases: list[Phase]
    protocol: str = "ideal"
    latency_s: float | None = None
    efficiency: float = 1.0
    predicted_s: float = 0.0

    @property
    def scope(self) -> str:
        return "intra" if self.n_nodes <= 1 else "inter"


def _expand(kind: str, algorithm: str, topo: Topo, gpus: list[str], size: float) -> list[Phase]:
    n = len(gpus)
    if n == 1:
        return []
    if kind == "send_recv" and n == 2:
        return [Phase(1, [PlannedFlow([(gpus[0], gpus[1])], size, "p2p")])]
    if kind == "send_recv":
        # every rank sends to the next at once (as nccl-tests' sendrecv_perf does)
        edges = alg.ring_edges(gpus)
        return [Phase(1, [PlannedFlow([e], size, f"p2p{i}") for i, e in enumerate(edges)])]
    if algorithm in ("ring", "pat"):
        return alg.ring(kind, topo, gpus, size)
    if algorithm == "hierarchical":
        return alg.hierarchical(topo, gpus, size)
    if algorithm == "tree":
        return alg.tree(kind, topo, gpus, size)
    if algorithm == "halving_doubling":
        return alg.halving_doubling(kind, gpus, size)
    if algorithm == "nvls":
        return alg.nvls(kind, topo, gpus, size)
    if algorithm == "nvls_tree":
        return alg.nvls_tree(topo, gpus, size)
    if algorithm == "collnet":
        return alg.collnet(kind, topo, gpus, size)
    return alg.direct(kind, gpus, size)


def plan_collective(
    kind: str,
    algorithm: str | None,
    topo: Topo,
    instances: list[list[str]],
    size_bytes: float,
    params: CollectiveParams | None = None,
) -> Plan:
    """Choose algorithm and protocol, and expand the collective into phases of flows.

    Args:
        kind: collective kind (`COLLECTIVES`).
        algorithm: `auto` / None, an algorithm, or `algorithm/protocol`.
        topo: the topology's collective view.
        instances: groups that run the same collective at the same time (e.g. the same
            gradient all-reduce in every tensor-parallel rank); their phases merge index by
            index. The choice is made on the first group.
        size_bytes: bytes, in the size convention of the module docstring.
        params: cost-model constants; default: the library's own for the GPU of the graph.

    Raises:
        SimulationError: unknown collective or algorithm, or groups of different sizes.
    """
    algo, proto = parse_algorithm(kind, algorithm)
    n_ranks = len(instances[0])
    for gpus in instances:
        if len(gpus) != n_ranks:
            raise SimulationError(
                f"{kind}: mirrored groups must have the same size ({len(gpus)} != {n_ranks})"
            )
    if params is None:
        gpu = topo.g.graph.get("gpu")
        params = default_params(gpu.name if gpu is not None else "", topo.nic)
    facts = topo.facts(instances[0])
    choice: Choice = choose(kind, facts, params, size_bytes, algo, proto)
    if choice.algorithm not in SUPPORTED[kind]:
        raise SimulationError(
            f"{kind} has no {choice.algorithm!r} algorithm; expected one of {list(SUPPORTED[kind])}"
        )
    merged: list[Phase] = []
    n_nodes = max(len({topo.server(x) for x in inst}) for inst in instances)
    for gpus in instances:
        for i, p in enumerate(_expand(kind, choice.algorithm, topo, gpus, size_bytes)):
            if i < len(merged):
                merged[i].flows.extend(p.flows)
                merged[i].steps = max(merged[i].steps, p.steps)
            else:
                merged.append(Phase(p.steps, list(p.flows)))
    return Plan(
        kind, choice.algorithm, n_ranks, n_nodes, size_bytes, merged,
        protocol=choice.protocol, latency_s=choice.latency_s, efficiency=choice.efficiency,
        predicted_s=choice.predicted_s,
    )  # fmt: skip


def flow_usage(
    router: Router, edges: list[tuple[str, str]], with_latency: bool = True
) -> tuple[np.ndarray, np.ndarray, float]:
    """Distinct links, multiplicities and the largest path latency of a flow's edges.

    With `with_latency` False the latency is not looked up and is returned as 0.
    """
    links, counts = usage(router.paths(edges))
    lat = router.max_latency_s(edges) if with_latency else 0.0
    return links, counts, lat


def distinct_links(links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(links, return_inverse=True)` for link indices in 0..n_links-1: the
    distinct links in increasing order and where each of `links` is among them, by a mask
    over the fabric's links instead of a sort (a phase of a 16,384-GPU collective names
    millions of links)."""
    seen = np.zeros(n_links, dtype=bool)
    seen[links] = True
    used = np.flatnonzero(seen)
    at = np.zeros(n_links, dtype=np.intp)
    at[used] = np.arange(len(used), dtype=np.intp)
    return used, at[links]
