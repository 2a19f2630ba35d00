"""Algorithm and protocol selection per call, the way NCCL and RCCL choose.

What is modelled: for a collective of kind k over a GPU group of S bytes, every available
(algorithm, protocol) pair gets NCCL's predicted time `latency + S / algbw`
(NVIDIA/nccl `src/graph/tuning.cc`; constants in `simulator.network.nccl_tables`, carried by
`CollectiveParams`), and the fastest pair is chosen. The inputs describe the group on its
topology (`GroupFacts`): ranks, nodes, GPUs per node, the scale-up link type and its
per-GPU bandwidth, the per-GPU share of the server's NIC rate, whether the server has an
NVSwitch (NVLS) and whether the fabric reduces in the network (CollNet).

Bandwidth of each algorithm before protocol factors (`raw`, bytes/s of algorithm bandwidth,
as the engine's flows of that algorithm reach it alone on an ideal fabric):

* ring: bus bandwidth = per-GPU scale-up bandwidth, and across nodes at most the server's
  NIC rate (GPUs per node x per-GPU NIC share); algbw = busbw x n / nsteps (nsteps 2(n-1)
  for all-reduce, n-1 for all-gather / reduce-scatter, n otherwise);
* tree (all-reduce): half the scale-up bandwidth (every chain link carries the data up and
  down), and across nodes at most the server's NIC rate;
* NVLS (one node, NVSwitch): the switch reduces, each GPU link carries (n+1)/n·S;
* NVLSTree (several nodes, NVSwitch): NVLS inside each node, a tree of S/G shards between
  nodes (NIC-bound at the server's NIC rate on two nodes, half of it on more);
* CollNet (the fabric reduces in the network): NIC-bound at the server's NIC rate;
* PAT (all-gather / reduce-scatter, one GPU per node): the ring's bandwidth.

The predicted bandwidth then applies NCCL's refinements: protocol factors, per-channel
caps x channels, LL's cap, the tree correction factor by size, NVLS efficiency x
(channels-1)/channels, and the NIC and scale-up efficiencies of `CollectiveParams`. The
engine moves the chosen algorithm's flows on the fabric at `predicted / raw` of their rate
(`Choice.efficiency`) and waits `Choice.latency_s` instead of summed path latencies.

Availability (NCCL): tree only for all-reduce; all-gather and reduce-scatter use ring,
PAT, NVLS or CollNet; broadcast and reduce ring only; NVLS on one node, NVLSTree across
nodes, both on NVSwitch servers of Hopper or later; CollNet only when a switch of the
topology says `in_network_reduction: true`; LL128 not over PCIe scale-up; across servers,
only the protocols and algorithms the network transport leaves (`CollectiveParams.net_protocols`
and `net_algorithms`, from the NIC preset: Simple on EFA p4d; ring / ring and tree, Simple, on
GPUDirect-TCPX / -TCPXO). RCCL: ring, tree
and CollNet only. All-to-all and send/recv are point-to-point (`direct`, Simple): NCCL's
tuning tables do not price them, so their latency stays the fabric's path latency, unless
a calibration sets `CollectiveParams.all_to_all_latency_us` (then that, in its place).

Pipeline fill (timing only, not the choice): NCCL moves an all-reduce in chunks through a
pipeline of stages, so the call takes `(chunks + depth - 1)` chunk times rather than
`chunks`; the model adds `(depth - 1) x chunk x ops / bw` to the latency it times (not to
the estimate it chooses on, `Choice.select_s`), where `ops` chunk streams run at once and
`bw` is the steady-state bandwidth. The chunk follows NCCL's `calcCollChunking`
(NVIDIA/nccl `src/enqueue.cc`, 2.18-2.21; constants in `simulator.network.nccl_tables`):

* tree / Simple: 512 KiB (the Simple buffer over NCCL_STEPS), halved while fewer than
  8 x depth chunks per channel (down to 128 KiB), 4 x depth (64 KiB), depth (32 KiB); depth
  = GPUs per node - 1 + log2(nodes); a chunk crosses 2 x depth stages (up, then down);
  `ops` = channels;
* NVLS (one node): 128 KiB (NCCL_NVLS_CHUNKSIZE), 64 KiB below 64 x ops chunks, 32 KiB below
  8 x, 16 KiB below 2 x; 3 stages (scatter into the switch buffer, reduce-multicast, gather);
* NVLSTree: 128 KiB (64 KiB from four nodes), 64 KiB below 4 x ops chunks, 32 KiB below 1 x;
  3 + 2 log2(nodes) stages (the tree up and down between the nodes' heads);
* `ops` for NVLS and NVLSTree = channels x heads (one head per GPU of the node); a chunk is
  never more than the message over `ops`. Rings, LL and LL128 get no fill (every rank sends
  from the first step; the LL protocols' chunks are small).

Simplified: channels = min(max_channels, 2 x GPUs per node); NCCL's per-graph measured
link speeds are replaced by the topology's link rates; the host CPU is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import floor, log2

from simulator.network.collective_params import CollectiveParams
from simulator.network.nccl_tables import NVLS_CHUNK_BYTES, PROTOCOLS, TREE_CHUNK_BYTES

GB = 1e9
NCCL_ALGORITHMS = ("ring", "tree", "nvls", "nvls_tree", "collnet", "pat")
P2P_KINDS = ("all_to_all", "send_recv")


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """What selection needs to know about a GPU group on its topology.

    Attributes:
        n_ranks: GPUs in the group.
        n_nodes: servers the group spans.
        ppn: GPUs of the group per server.
        intra_link: `nvlink` (NVLink / xGMI scale-up) or `pci`.
        intra_bytes_per_s: scale-up bandwidth per GPU, per direction, bytes/s (NVSwitch: the
            GPU's switch link; mesh: its links to the other group GPUs of the server).
        nic_bytes_per_s: the server's NIC rate into the network divided by its GPUs,
            per direction, bytes/s (0 when the server has no NIC).
        nvswitch: the server's GPUs share an NVSwitch.
        in_network_reduction: a switch of the fabric reduces (SHARP-like).
    """

    n_ranks: int
    n_nodes: int
    ppn: int
    intra_link: str
    intra_bytes_per_s: float
    nic_bytes_per_s: float
    nvswitch: bool
    in_network_reduction: bool


@dataclass(frozen=True, slots=True)
class Choice:
    """The algorithm and protocol that run, and what the model predicts for them.

    Attributes:
        algorithm: engine algorithm name.
        protocol: `ll`, `ll128`, `simple`, or `ideal` (a fixed algorithm with no protocol:
            summed path latencies, full link rate).
        latency_s: the collective's latency term, s (None: summed path latencies).
        efficiency: predicted over raw algorithm bandwidth, applied to the flows.
        predicted_s: the model's time of the call alone on its fabric, s: `latency_s` +
            size / predicted bandwidth (0 when not predicted).
        select_s: the library's own estimate the choice was made on, s (NCCL's
            `latency + size / algbw`, without the pipeline fill; 0 when not predicted).
    """

    algorithm: str
    protocol: str
    latency_s: float | None
    efficiency: float
    predicted_s: float
    select_s: float = 0.0


def _bucket(values: tuple[float, float, float], n_nodes: int) -> float:
    return values[0 if n_nodes <= 1 else 1 if n_nodes == 2 else 2]


def _nsteps(kind: str, n: int) -> int:
    if kind == "all_reduce":
        return 2 * (n - 1)
    if kind in ("all_gather", "reduce_scatter"):
        return n - 1
    return n


def channels(f: GroupFacts, p: CollectiveParams) -> int:
    """Channels a collective uses: two per GPU of a node, at most `max_channels`."""
    return max(1, min(p.max_channels, 2 * max(1, f.ppn)))


def raw_algbw(kind: str, algorithm: str, f: GroupFacts, su_eff: float = 1.0, nic_eff: float = 1.0) -> float:
    """Algorithm bandwidth of `algorithm`'s flows alone on the fabric, bytes/s (module docstring)."""
    intra = f.intra_bytes_per_s * su_eff
    nic = f.ppn * f.nic_bytes_per_s * nic_eff
    multi = f.n_nodes > 1
    n = f.n_ranks
    if algorithm in ("ring", "pat"):
        bus = min(intra, nic) if multi else intra
        return bus * n / _nsteps(kind, n)
    if algorithm == "tree":
        return min(intra / 2, nic) if multi else intra / 2
    if algorithm == "nvls":
        g = max(1, f.ppn)
        return intra * g / (g + 1) if kind == "all_reduce" else intra
    if algorithm == "nvls_tree":
        g = max(1, f.ppn)
        return min(intra * g / (g + 1), nic if f.n_nodes <= 2 else nic / 2)
    if algorithm == "collnet":
        return min(intra / 2, nic)
    raise ValueError(f"no bandwidth model for {algorithm!r}")


def _predicted_algbw(
    kind: str,
    algorithm: str,
    protocol: str,
    f: GroupFacts,
    p: CollectiveParams,
    size: float,
    corrected: bool = True,
) -> float:
    """NCCL's algorithm bandwidth for (algorithm, protocol) with its refinements, bytes/s."""
    bw = raw_algbw(kind, algorithm, f, p.scale_up_efficiency, p.nic_efficiency)
    nch = channels(f, p)
    ratio = f.n_ranks / _nsteps(kind, f.n_ranks) if algorithm in ("ring", "pat") else 0.5
    if algorithm in ("ring", "pat"):
        bw *= p.ring_factor[protocol]
        if protocol == "ll":
            bw = min(bw, _bucket(p.ll_max_gbyte_per_s, f.n_nodes) * GB * ratio)
        if protocol == "ll128":
            bw = min(bw, p.per_channel_ring_ll128_gbyte_per_s * GB * nch * ratio)
        if algorithm == "pat":
            bw *= p.pat_factor
    elif algorithm == "tree":
        key = "ll128_one_node" if protocol == "ll128" and f.n_nodes <= 1 else protocol
        bw *= p.tree_factor[key]
        cap = _bucket(
            p.per_channel_tree_ll128_gbyte_per_s if protocol == "ll128" else p.per_channel_tree_gbyte_per_s,
            f.n_nodes,
        )
        if cap > 0:
            bw = min(bw, cap * GB * nch * ratio)
        tcap = _bucket(p.tree_cap_gbyte_per_s, f.n_nodes)
        if tcap > 0:
            bw = min(bw, tcap * GB * ratio)
        if protocol == "ll":
            bw = min(bw, _bucket(p.ll_max_gbyte_per_s, f.n_nodes) * GB * ratio)
        corr = p.tree_correction[protocol]
        b = floor(log2(max(size, 64.0) / 64))
        if corrected and b < len(corr):
            bw *= corr[b]
    elif algorithm in ("nvls", "nvls_tree"):
        bw *= p.nvls_efficiency * (nch - 1) / nch
        cap = _bucket(p.per_channel_nvls_tree_gbyte_per_s, f.n_nodes)
        if algorithm == "nvls_tree" and cap > 0:
            bw = min(bw, cap * GB * nch * ratio)
    elif algorithm == "collnet":
        bw *= 0.9 if protocol == "simple" else 0.0
    return bw


def latency_us(
    kind: str, algorithm: str, protocol: str, f: GroupFacts, p: CollectiveParams, size: float
) -> float:
    """NCCL's latency term for (algorithm, protocol) on this group, us."""
    n, nodes, ppn = f.n_ranks, f.n_nodes, max(1, f.ppn)
    base = p.base_us(algorithm, protocol)
    intra = p.hw_us(f.intra_link, algorithm, protocol)
    inter = p.hw_us("net", algorithm, protocol)
    if nodes > 1:
        if protocol == "ll":
            intra *= 1.8
        intra = max(intra, p.net_overhead_us * (3 if protocol == "simple" else 1))
    log_nodes = floor(log2(nodes)) if nodes > 1 else 0
    if algorithm == "ring":
        if kind in ("broadcast", "reduce"):
            return base + (n - 1) * (inter if nodes > 1 else intra)
        nsteps = _nsteps(kind, n)
        n_inter = (2 * (nodes - 1) if kind == "all_reduce" else nodes - 1) if nodes > 1 else 0
        lat = base + (nsteps - n_inter) * intra + n_inter * inter
        nch = channels(f, p)
        if nodes > 1 and kind == "all_reduce" and protocol == "simple" and size / (nch * n) >= 64:
            lat *= p.ring_plateau
        return lat
    if algorithm == "tree":
        return base + 2 * ((ppn - 1) * intra + log_nodes * inter)
    if algorithm == "nvls":
        return base + intra + (inter if nodes > 1 else 0.0)
    if algorithm == "nvls_tree":
        return base + intra + 2 * log_nodes * inter
    if algorithm == "pat":
        return base + log_nodes * inter / 3.5 + 2.8 * n
    return base + 2 * (ppn - 1) * intra + inter  # collnet


def nvls_chunk_bytes(algorithm: str, f: GroupFacts, nch: int, size: float) -> float:
    """NCCL's chunk for NVLS / NVLSTree, bytes (`calcCollChunking`, module docstring)."""
    ops = nch * max(1, f.ppn)  # concurrentOps = channels x NVLS heads (one per local GPU)
    chunk = float(NVLS_CHUNK_BYTES)
    if algorithm == "nvls":
        for factor, smaller in ((64, 65536), (8, 32768), (2, 16384)):
            if size < factor * ops * chunk and chunk > smaller:
                chunk = smaller
        return chunk
    if f.n_nodes >= 4:
        chunk = min(chunk, 65536.0)
    for factor, smaller in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
        if size < factor * ops * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def tree_chunk_bytes(f: GroupFacts, nch: int, size: float) -> float:
    """NCCL's tree / Simple chunk, bytes (`calcCollChunking`, module docstring)."""
    depth = tree_depth(f)
    chunk = float(TREE_CHUNK_BYTES)
    for per_depth, smallest in ((8, 131072), (4, 65536), (1, 32768)):
        while size // (nch * chunk) < depth * per_depth and chunk > smallest:
            chunk /= 2
    return chunk


def tree_depth(f: GroupFacts) -> int:
    """NCCL's tree depth: a chain through the node's GPUs, then log2(nodes) levels."""
    return max(1, f.ppn) - 1 + (floor(log2(f.n_nodes)) if f.n_nodes > 1 else 0)


def pipeline_depth(algorithm: str, f: GroupFacts) -> int:
    """Stages a chunk crosses in NCCL's all-reduce kernel (module docstring); 1 = no fill."""
    if algorithm == "tree":
        return 2 * tree_depth(f)
    if algorithm == "nvls":
        return 3
    if algorithm == "nvls_tree":
        return 3 + 2 * (floor(log2(f.n_nodes)) if f.n_nodes > 1 else 0)
    return 1


def pipeline_fill_s(
    kind: str, algorithm: str, protocol: str, f: GroupFacts, p: CollectiveParams, size: float, bw: float
) -> float:
    """Time the pipeline takes to fill before its steady state, s (module docstring).

    `(depth - 1) x chunk x concurrent ops / bw`: each of the `ops` concurrent chunk streams
    (channels, times NVLS heads for NVLS) moves its chunk at `bw / ops` through every stage,
    and the last chunk leaves `depth - 1` stages after it would in a pipeline of one stage.
    `bw` is the steady-state algorithm bandwidth (no tree correction factor). All-reduce
    with tree / Simple, NVLS and NVLSTree only; 0 otherwise.
    """
    if kind != "all_reduce" or bw <= 0 or size <= 0:
        return 0.0
    nch = channels(f, p)
    if algorithm == "tree" and protocol == "simple":
        ops, chunk = nch, tree_chunk_bytes(f, nch, size)
    elif algorithm in ("nvls", "nvls_tree"):
        ops = nch * max(1, f.ppn)
        chunk = nvls_chunk_bytes(algorithm, f, nch, size)
    else:
        return 0.0
    return (pipeline_depth(algorithm, f) - 1) * min(chunk, size / ops) * ops / bw


def available(kind: str, f: GroupFacts, p: CollectiveParams) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs the library may use for this call (module docstring)."""
    algos = ["ring"]
    nvls_ok = f.nvswitch and f.ppn >= 2 and "nvls" in p.algorithms
    if kind == "all_reduce":
        if "tree" in p.algorithms and f.n_ranks > 2:
            algos.append("tree")
        if nvls_ok:
            algos.append("nvls" if f.n_nodes <= 1 else "nvls_tree")
    if kind in ("all_gather", "reduce_scatter"):
        if nvls_ok and f.n_nodes <= 1:
            algos.append("nvls")
        if "pat" in p.algorithms and f.ppn == 1 and f.n_nodes > 1:
            algos.append("pat")
    if kind in ("all_reduce", "all_gather", "reduce_scatter") and f.n_nodes > 1 and f.in_network_reduction:
        algos.append("collnet")
    protocols = p.protocols
    if f.n_nodes > 1 and p.net_protocols is not None:
        protocols = tuple(x for x in p.protocols if x in p.net_protocols) or ("simple",)
    if f.n_nodes > 1 and p.net_algorithms is not None:
        algos = [a for a in algos if a in p.net_algorithms] or ["ring"]
    out = []
    for a in algos:
        for proto in PROTOCOLS:
            if proto not in protocols or (proto == "ll128" and f.intra_link == "pci"):
                continue
            if a in ("nvls", "nvls_tree", "collnet", "pat") and proto != "simple":
                continue
            out.append((a, proto))
    return out


def predict(
    kind: str, algorithm: str, protocol: str, f: GroupFacts, p: CollectiveParams, size: float
) -> Choice:
    """NCCL's prediction for one (algorithm, protocol) pair."""
    lat_s = latency_us(kind, algorithm, protocol, f, p, size) * 1e-6
    bw = _predicted_algbw(kind, algorithm, protocol, f, p, size)
    raw = raw_algbw(kind, algorithm, f)
    if bw <= 0 or raw <= 0:
        return Choice(algorithm, protocol, lat_s, 0.0, float("inf"), float("inf"))
    select_s = lat_s + size / bw
    steady = _predicted_algbw(kind, algorithm, protocol, f, p, size, corrected=False)
    time_s = lat_s + pipeline_fill_s(kind, algorithm, protocol, f, p, size, steady)
    return Choice(algorithm, protocol, time_s, bw / raw, time_s + size / bw, select_s)


def choose(
    kind: str,
    f: GroupFacts,
    p: CollectiveParams,
    size: float,
    algorithm: str | None = None,
    protocol: str | None = None,
) -> Choice:
    """The fastest available pair, or the requested one (see the module docstring).

    Args:
        kind: collective kind.
        f: the group on its topology.
        p: model constants.
        size: bytes (the engine's size convention).
        algorithm: a fixed algorithm, or None / `auto` to choose.
        protocol: a fixed protocol with a fixed algorithm; None = `ideal` for a fixed
            algorithm (path latencies, full rate), the fastest protocol under `auto`.
    """
    if kind in P2P_KINDS or f.n_ranks <= 1:
        fitted = kind == "all_to_all" and f.n_ranks > 1 and p.all_to_all_latency_us > 0
        latency_s = p.all_to_all_latency_us * 1e-6 if fitted else None
        return Choice(algorithm or "direct", "simple" if protocol is None else protocol, latency_s, 1.0, 0.0)
    if algorithm not in (None, "auto") and (protocol is None or algorithm not in NCCL_ALGORITHMS):
        return Choice(algorithm, "ideal", None, 1.0, 0.0)
    if size <= 0:  # nothing to move: the library returns at once
        return Choice(algorithm or "ring", protocol or "simple", 0.0, 1.0, 0.0)
    if algorithm not in (None, "auto"):
        return predict(kind, algorithm, protocol or "simple", f, p, size)
    pairs = available(kind, f, p)
    if protocol is not None:
        pairs = [x for x in pairs if x[1] == protocol] or pairs
    best = min((predict(kind, a, pr, f, p, size) for a, pr in pairs), key=lambda c: c.select_s)
    if best.efficiency <= 0:  # no bandwidth known for the group: the fabric's own rate
        return Choice(best.algorithm, best.protocol, best.latency_s, 1.0, 0.0)
    return best
