"""NCCL's and RCCL's tuning constants, as data (the defaults of `CollectiveParams`).

Sources, read from the libraries' public source:

* NCCL: NVIDIA/nccl `src/graph/tuning.cc` (v2.30.7): base latency per algorithm and
  protocol, hardware latency per link type (NVLink, PCI, network), per-channel bandwidth
  caps per GPU generation and node count, the protocol bandwidth factors (ring LL 0.5,
  ring LL128 0.92, tree 0.92, tree LL 1/3.8, tree LL128 7/9 on one node and 120/128
  across nodes, PAT 0.75), the NVLS efficiency (Hopper 0.85, Blackwell 0.74), the network
  overhead per intra-node step across nodes (1 us on Intel hosts, 2 us on AMD hosts, x3 for
  Simple), and the multi-node ring/Simple all-reduce latency plateau factor (1.4 from
  Ampere on). The tree correction factors (per protocol, buckets of log2(bytes/64)) are
  the 23 buckets (64 B to 256 MiB) read from a stored version of NCCL's tuning code;
  v2.30.7 carries 24, and sizes past the table here get no correction.
* RCCL: ROCm/rccl `src/graph/tuning.cc` (the stored version read: base latency 12 / 12 /
  17 us for ring and tree LL / LL128 / Simple; hardware latency per link type below; ring
  LL bandwidth x1/5; tree bandwidth x0.27 capped at 90 GB/s on one node and 70 across
  nodes, which in effect keeps RCCL on rings for large messages; LL128 only where enabled).
  RCCL has no NVLS, NVLSTree or PAT; AMD hosts use the 2 us network overhead.
  Assumed, not read from RCCL: LL128 is enabled (as on recent MI300-class releases), the
  tree correction factors are NCCL's, and RCCL's per-size ring correction is not applied.

Keys: algorithms `ring`, `tree`, `collnet_direct`, `collnet_chain`, `nvls`, `nvls_tree`,
`pat`; protocols `ll`, `ll128`, `simple`; link types `nvlink` (any GPU-to-GPU scale-up
link: NVLink, xGMI), `pci`, `net`. Latencies are microseconds, bandwidths GB/s (1e9 B/s).
"""

from __future__ import annotations

PROTOCOLS = ("ll", "ll128", "simple")
NODE_BUCKETS = 3  # caps are given for 1 node, 2 nodes, more than 2 nodes

# --- NCCL (NVIDIA/nccl src/graph/tuning.cc v2.30.7) ------------------------------------------
NCCL_BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0),
    "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0),
    "nvls_tree": (0.0, 0.0, 0.0),
    "pat": (0.0, 0.0, 8.0),
}
NCCL_HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {
        "tree": (0.6, 1.25, 4.0),
        "ring": (0.6, 1.9, 3.4),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 25.0),
        "nvls_tree": (0.0, 0.0, 25.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "pci": {
        "tree": (1.0, 1.9, 4.0),
        "ring": (1.0, 2.5, 5.7),
        "collnet_direct": (0.0, 0.0, 3.7),
        "collnet_chain": (0.0, 0.0, 2.8),
        "nvls": (0.0, 0.0, 0.0),
        "nvls_tree": (0.0, 0.0, 0.0),
        "pat": (0.0, 0.0, 4.0),
    },
    "net": {
        "tree": (5.0, 8.5, 14.0),
        "ring": (2.7, 4.0, 14.0),
        "collnet_direct": (0.0, 0.0, 31.0),
        "collnet_chain": (0.0, 0.0, 30.0),
        "nvls": (0.0, 0.0, 18.0),
        "nvls_tree": (0.0, 0.0, 20.9),
        "pat": (0.0, 0.0, 14.0),
    },
}
# per generation, (1 node, 2 nodes, > 2 nodes), GB/s; llMaxBw's multi-node values are the
# Intel-host row (AMD hosts: the Ampere row's 22.5 / 19.0 pattern is not kept per vendor here)
NCCL_LL_MAX_GBYTE_PER_S = {
    "volta": (39.0, 39.0, 20.4),
    "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0),
    "blackwell": (282.0, 90.0, 70.0),
}
NCCL_PER_CH_RING_LL128_GBYTE_PER_S = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 40.0}
NCCL_PER_CH_TREE_LL128_GBYTE_PER_S = {
    "volta": (20.0, 20.0, 20.0),
    "ampere": (20.0, 20.0, 20.0),
    "hopper": (36.7, 36.7, 29.0),
    "blackwell": (55.6, 31.67, 20.0),
}
NCCL_PER_CH_TREE_GBYTE_PER_S = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
NCCL_PER_CH_NVLS_TREE_GBYTE_PER_S = {"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)}
NCCL_NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
# NVLS chunk (NCCL_NVLS_CHUNKSIZE default, 128 KiB: NVIDIA/nccl src/transport/nvls.cc), which
# `calcCollChunking` (src/enqueue.cc) shrinks for small messages
NVLS_CHUNK_BYTES = 131072
# tree / Simple chunk before `calcCollChunking` shrinks it: the Simple buffer (NCCL_BUFFSIZE,
# 4 MiB) over NCCL_STEPS (8) slots, one step per chunk for the tree (src/enqueue.cc 2.18-2.21)
TREE_CHUNK_BYTES = 524288
# protocol bandwidth factors (fraction of the algorithm's link bandwidth)
NCCL_RING_FACTOR = {"ll": 0.5, "ll128": 0.92, "simple": 1.0}
NCCL_TREE_FACTOR = {
    "ll": 0.92 / 3.8,
    "ll128_one_node": 0.92 * 7 / 9,
    "ll128": 0.92 * 120 / 128,
    "simple": 0.92,
}
NCCL_PAT_FACTOR = 0.75
NCCL_NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
NCCL_RING_PLATEAU = {"volta": 1.9, "ampere": 1.4, "hopper": 1.4, "blackwell": 1.4}
NCCL_TREE_CORRECTION: dict[str, tuple[float, ...]] = {
    "ll": (
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.7,
        0.7,
        0.7,
        0.7,
        0.6,
        0.5,
        0.4,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.0,
        1.0,
        1.0,
    ),
    "ll128": (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.5,
        0.6,
        0.6,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
        0.92,
        0.92,
    ),
    "simple": (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.7,
        0.8,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
    ),
}
NCCL_MAX_CHANNELS = 32
# NCCL's model rate of one NVLink (src/graph/topo.h: SM70/SM80 20.0, SM90 20.6, SM100 40.1
# GB/s) against the link's signalling rate per direction (NVLink 2/3/4: 25 GB/s, NVLink 5:
# 50 GB/s, from NVIDIA's data sheets): the default scale-up efficiency. 18 x 20.6 = 370.8
# GB/s is the ring bus bandwidth H100 servers measure.
NCCL_NVLINK_MODEL_GBYTE_PER_S = {"volta": 20.0, "ampere": 20.0, "hopper": 20.6, "blackwell": 40.1}
NVLINK_LINK_GBYTE_PER_S = {"volta": 25.0, "ampere": 25.0, "hopper": 25.0, "blackwell": 50.0}

# --- RCCL (ROCm/rccl src/graph/tuning.cc) ---------------------------------------------------
RCCL_BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (12.0, 12.0, 17.0),
    "ring": (12.0, 12.0, 17.0),
    "collnet_direct": (12.0, 12.0, 17.0),
    "collnet_chain": (12.0, 12.0, 17.0),
}
RCCL_HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (1.2, 1.2, 3.8), "ring": (2.3, 2.3, 2.7), "collnet_direct": (1.2, 1.2, 3.8)},
    "pci": {"tree": (2.2, 2.2, 5.7), "ring": (1.3, 1.3, 1.9), "collnet_direct": (2.2, 2.2, 5.7)},
    "net": {"tree": (9.8, 9.8, 19.5), "ring": (2.0, 2.0, 4.5), "collnet_direct": (9.8, 9.8, 19.5)},
}
RCCL_RING_FACTOR = {"ll": 0.2, "ll128": 0.92, "simple": 1.0}
RCCL_TREE_FACTOR = {"ll": 0.27 / 2.3, "ll128_one_node": 0.27 * 7 / 9, "ll128": 0.27 * 0.915, "simple": 0.27}
RCCL_TREE_CAP_GBYTE_PER_S = (90.0, 70.0, 70.0)
RCCL_LL128_PER_CH_GBYTE_PER_S = 16.7  # all-reduce row of ll128MaxBwPerCh
# RCCL's model rate of one xGMI link (ROCm/rccl src/graph/topo.h GFX94X_XGMI_WIDTH and
# GFX95X_XGMI_WIDTH, 48 GB/s, as cited from that file) against the catalog link rate per
# direction (MI300X / MI325X 64 GB/s, MI355X 76.8 GB/s: topologies/gpus/*.yaml)
RCCL_XGMI_MODEL_GBYTE_PER_S = 48.0
XGMI_LINK_GBYTE_PER_S = {"mi300": 64.0, "mi325": 64.0, "mi350": 76.8, "mi355": 76.8}
