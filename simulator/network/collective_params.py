"""The physical and library parameters of the collective model, as one typed object.

`CollectiveParams` holds what the selection (`simulator.network.selection`) needs to predict
a collective's time the way NCCL / RCCL do, and what the engine applies to the chosen
algorithm's flows: latency per algorithm, protocol and link type, protocol bandwidth
factors, per-channel bandwidth caps, the tree correction factors, NVLS efficiency, and the
efficiencies of the NIC and of the scale-up fabric. `default_params(gpu_name)` builds the
defaults from `simulator.network.nccl_tables` for the GPU's vendor and generation; a
calibration profile can replace any field (`dataclasses.replace`) and fit them jointly
across one-node and multi-node samples, since every field is a physical or per-library
constant rather than a curve of one scale.

The transport a NIC preset names (`topologies/nics/presets.yaml`) sets a floor on the
latency of one network step (`net_latency_us`): NCCL's network constants are those of
InfiniBand verbs, while other transports publish their own (AWS's EFA plugin models a
network step at 20 us plus 3 us of completion overhead). A calibration fits the physical
fields (`FITTED_FIELDS`) and applies them with `with_fitted`. A preset may also name the
protocols and algorithms its transport leaves to the library across servers
(`net_protocols`, `net_algorithms`: AWS's EFA plugin sets `NCCL_PROTO=simple` where the
provider cannot deliver 128-byte writes in order, as on p4d; Google's GPUDirect-TCPX and
-TCPXO require ring only / ring and tree, Simple, and no NVLS). Simplified: these settings
are process-wide in the library; the model applies them to groups spanning servers only.

A benchmark thread that drives several GPUs (nccl-tests `-g 8`, one process for the whole
server) enqueues every call on its GPUs one after another, so back-to-back calls cannot
complete faster than `GPUs per thread x host_launch_us` (`launch_floor_s`): the floor of
the single-process logs, read from their `nGpus` header (none with one GPU per thread: its
one enqueue overlaps the previous call). Its default is the catalog's fixed
cost of one kernel launch (`kernel_overhead_us` of `topologies/gpus/*.yaml`, 3 us for every
part, after NVIDIA's "Getting Started with CUDA Graphs"). Simplified: a training job runs
one process per GPU, so the engine does not apply the floor; the calibration and validation
replays of a benchmark table do (`simulator.calibration.replay`). The joint fit does not
(`simulator.calibration.joint`), and `host_launch_us` is not fitted.

Simplified: the GPU generation is read from the GPU model's name (A100 -> Ampere, H100 /
H200 / H800 -> Hopper, B200 / GB200 -> Blackwell, AMD Instinct -> RCCL); an unknown name
gets Hopper's NCCL constants. Host CPU vendor is not modelled: NVIDIA systems take the
Intel-host network overhead (1 us), AMD systems the AMD-host one (2 us).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from simulator.network import nccl_tables as t
from simulator.network.hardware import nic_presets

Triple = tuple[float, float, float]

#: host time to enqueue one call on one GPU, us: the catalog's fixed cost of one kernel
#: launch (`kernel_overhead_us` in topologies/gpus/*.yaml; NVIDIA Developer Blog, "Getting
#: Started with CUDA Graphs", 2019: a few us per launch of a short kernel)
HOST_LAUNCH_US = 3.0


@dataclass(frozen=True)
class CollectiveParams:
    """Constants of the collective cost model (see the module docstring).

    Attributes:
        library: `nccl` or `rccl`: which algorithms exist (RCCL: ring, tree, CollNet).
        generation: GPU generation (`volta`, `ampere`, `hopper`, `blackwell`, `cdna`).
        base_latency_us: algorithm -> (LL, LL128, Simple) fixed latency per call, us.
        hw_latency_us: link type (`nvlink`, `pci`, `net`) -> algorithm -> (LL, LL128, Simple)
            latency per step over that link type, us.
        net_overhead_us: floor of an intra-node step's latency when the collective spans
            nodes (the proxy thread's overhead), us; x3 for Simple.
        ring_factor: protocol -> fraction of the ring's link bandwidth it delivers.
        tree_factor: protocol -> fraction of the tree's link bandwidth it delivers
            (`ll128_one_node` for LL128 inside one node).
        tree_cap_gbyte_per_s: (1 node, 2 nodes, more) cap on tree bus bandwidth, GB/s;
            0 = none.
        pat_factor: fraction of the ring bandwidth PAT delivers.
        nvls_efficiency: fraction of NVLink bandwidth NVLink SHARP delivers.
        ll_max_gbyte_per_s: (1 node, 2 nodes, more) cap on LL bus bandwidth, GB/s.
        per_channel_ring_ll128_gbyte_per_s: ring LL128 cap per channel, GB/s.
        per_channel_tree_gbyte_per_s: (1, 2, more nodes) tree Simple cap per channel, GB/s.
        per_channel_tree_ll128_gbyte_per_s: (1, 2, more nodes) tree LL128 cap per channel, GB/s.
        per_channel_nvls_tree_gbyte_per_s: (1, 2, more nodes) NVLSTree cap per channel, GB/s.
        tree_correction: protocol -> factor per bucket log2(bytes / 64) on tree bandwidth.
        ring_plateau: multiplier on multi-node ring/Simple all-reduce latency once every
            channel moves at least 64 bytes per rank.
        max_channels: most channels a collective uses.
        protocols: protocols the library may pick.
        nic_efficiency: fraction of the NIC line rate a collective reaches (dimensionless).
        scale_up_efficiency: fraction of the scale-up link rate a collective reaches: the
            library's model rate of a link over its signalling rate (NVLink: NCCL's 20.6
            GB/s of 25 on Hopper; xGMI: RCCL's 48 GB/s of 64 on MI300X).
        net_latency_us: floor on the latency of one network step (the transport's message
            latency plus its per-message overhead), us; 0 = the library's constants alone.
        simple_net_overhead_us: added to the latency of every network step of the Simple
            protocol, us: Simple moves whole chunks and hands each to the network proxy,
            so its step costs more than LL's on transports with slow completions.
        latency_scale: factor on the library's latency constants (base and per-step; 1 = as
            the library states them), dimensionless.
        step_latency_us: overhead added to every step over any link type, us.
        launch_latency_us: overhead added to every call's base latency, us.
        net_protocols: protocols left to a group spanning servers by the network transport's
            plugin (a NIC preset's `protocols`); None = `protocols`.
        net_algorithms: algorithms left to a group spanning servers by the transport's
            required settings (a NIC preset's `algorithms`); None = `algorithms`.
        host_launch_us: host time to enqueue one call on one GPU (the library's enqueue and
            the kernel launch), us; a thread driving g GPUs pays it g times per call.
        all_to_all_latency_us: latency of one all-to-all call, in place of the fabric's path
            latency, us; 0 = the path latency (the library's tuning model prices no
            point-to-point call; only a calibration sets it). Send/recv always keeps the
            path latency.
    """

    library: str
    generation: str
    base_latency_us: Mapping[str, Triple]
    hw_latency_us: Mapping[str, Mapping[str, Triple]]
    net_overhead_us: float
    ring_factor: Mapping[str, float]
    tree_factor: Mapping[str, float]
    tree_cap_gbyte_per_s: Triple
    pat_factor: float
    nvls_efficiency: float
    ll_max_gbyte_per_s: Triple
    per_channel_ring_ll128_gbyte_per_s: float
    per_channel_tree_gbyte_per_s: Triple
    per_channel_tree_ll128_gbyte_per_s: Triple
    per_channel_nvls_tree_gbyte_per_s: Triple
    tree_correction: Mapping[str, tuple[float, ...]]
    ring_plateau: float
    max_channels: int = t.NCCL_MAX_CHANNELS
    protocols: tuple[str, ...] = t.PROTOCOLS
    nic_efficiency: float = 1.0
    scale_up_efficiency: float = 1.0
    algorithms: tuple[str, ...] = field(default=())
    net_latency_us: float = 0.0
    simple_net_overhead_us: float = 0.0
    latency_scale: float = 1.0
    step_latency_us: float = 0.0
    launch_latency_us: float = 0.0
    net_protocols: tuple[str, ...] | None = None
    net_algorithms: tuple[str, ...] | None = None
    host_launch_us: float = HOST_LAUNCH_US
    all_to_all_latency_us: float = 0.0

    def launch_floor_s(self, gpus_per_thread: int | None) -> float:
        """Shortest time of one call of back-to-back calls when one host thread enqueues it
        on `gpus_per_thread` GPUs one after another, s; 0 for one GPU per thread (or None:
        not known), whose one enqueue overlaps the previous call on the GPU."""
        g = gpus_per_thread or 1
        return g * self.host_launch_us * 1e-6 if g > 1 else 0.0

    def base_us(self, algorithm: str, protocol: str) -> float:
        """Fixed latency of one call, us."""
        base = self.base_latency_us.get(algorithm, (0.0, 0.0, 0.0))[t.PROTOCOLS.index(protocol)]
        return base * self.latency_scale + self.launch_latency_us

    def hw_us(self, link: str, algorithm: str, protocol: str) -> float:
        """Latency of one step over `link` (`nvlink`, `pci`, `net`), us."""
        lat = self.hw_latency_us[link].get(algorithm, (0.0, 0.0, 0.0))[t.PROTOCOLS.index(protocol)]
        lat *= self.latency_scale
        if link == "net":
            lat = max(lat, self.net_latency_us)
            if protocol == "simple":
                lat += self.simple_net_overhead_us
        return lat + self.step_latency_us


#: the physical fields a calibration fits, with their physical bounds (low, high):
#: efficiencies are fractions of a rate in (0, 1]; latencies are non-negative microseconds
#: (at most 1 ms per step or call); the latency scale is a factor in [0.05, 20] on the
#: library's constants; `ll_efficiency` / `ll128_efficiency` scale the LL and LL128
#: protocol bandwidth factors of ring and tree.
FITTED_FIELDS: dict[str, tuple[float, float]] = {
    "nic_efficiency": (0.02, 1.0),
    "scale_up_efficiency": (0.02, 1.0),
    "ll_efficiency": (0.02, 1.0),
    "ll128_efficiency": (0.02, 1.0),
    "net_latency_us": (0.0, 1000.0),
    "simple_net_overhead_us": (0.0, 1000.0),
    "latency_scale": (0.05, 20.0),
    "step_latency_us": (0.0, 1000.0),
    "launch_latency_us": (0.0, 1000.0),
    "all_to_all_latency_us": (0.0, 1000.0),
}


def fitted_values(p: CollectiveParams) -> dict[str, float]:
    """The fitted fields' values of `p` (the protocol efficiencies relative to `p` itself: 1)."""
    return {k: (1.0 if k.endswith("_efficiency") and k.startswith("ll") else float(getattr(p, k)))
            for k in FITTED_FIELDS}  # fmt: skip


def with_fitted(p: CollectiveParams, values: Mapping[str, float]) -> CollectiveParams:
    """`p` with fitted physical fields (names of `FITTED_FIELDS`; others are an error).

    Raises:
        ValueError: an unknown field name.
    """
    unknown = sorted(set(values) - set(FITTED_FIELDS))
    if unknown:
        raise ValueError(f"unknown collective parameter(s) {unknown}; expected {sorted(FITTED_FIELDS)}")
    direct: dict = {k: float(v) for k, v in values.items() if not k.startswith("ll")}
    ll, ll128 = float(values.get("ll_efficiency", 1.0)), float(values.get("ll128_efficiency", 1.0))
    scale = {"ll": ll, "ll128": ll128, "ll128_one_node": ll128}
    ring = _frozen({k: v * scale.get(k, 1.0) for k, v in p.ring_factor.items()})
    tree = _frozen({k: v * scale.get(k, 1.0) for k, v in p.tree_factor.items()})
    return replace(p, ring_factor=ring, tree_factor=tree, **direct)


def generation_of(gpu_name: str) -> tuple[str, str]:
    """(library, generation) for a GPU model name (see the module docstring)."""
    name = gpu_name.upper()
    if "AMD" in name or re.search(r"\bMI\d", name):
        return "rccl", "cdna"
    for pattern, gen in (
        (r"V100", "volta"),
        (r"A100|A800|A30\b|A10\b", "ampere"),
        (r"GB\d00|B\d00", "blackwell"),
        (r"H\d00|H20\b", "hopper"),
    ):
        if re.search(pattern, name):
            return "nccl", gen
    return "nccl", "hopper"


def _frozen(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


def nic_net_latency_us(nic: str | None) -> float:
    """Network step latency floor of a NIC preset: its transport's message latency plus
    per-message overhead, us (0 for no preset, or one no public figure is given for)."""
    preset = nic_presets().get(nic) if nic else None
    if preset is None or preset.net_latency_us is None:
        return 0.0
    return preset.net_latency_us + (preset.message_overhead_us or 0.0)


def default_params(gpu_name: str, nic: str | None = None) -> CollectiveParams:
    """The library's own constants for this GPU (NCCL or RCCL `tuning.cc`) and NIC preset."""
    preset = nic_presets().get(nic) if nic else None
    protocols = preset.protocols if preset is not None else None
    algorithms = preset.algorithms if preset is not None else None
    return replace(
        _library_params(gpu_name),
        net_latency_us=nic_net_latency_us(nic),
        net_protocols=None if protocols is None else tuple(protocols),
        net_algorithms=None if algorithms is None else tuple(algorithms),
    )


def _library_params(gpu_name: str) -> CollectiveParams:
    library, gen = generation_of(gpu_name)
    if library == "rccl":
        ampere = "ampere"  # RCCL's caps follow NCCL's non-Volta rows
        model = next((v for k, v in t.XGMI_LINK_GBYTE_PER_S.items() if k in gpu_name.lower()), 64.0)
        return CollectiveParams(
            library="rccl",
            generation=gen,
            base_latency_us=_frozen(t.RCCL_BASE_LATENCY_US),
            hw_latency_us=_frozen({k: _frozen(v) for k, v in t.RCCL_HW_LATENCY_US.items()}),
            net_overhead_us=t.NCCL_NET_OVERHEAD_US["amd"],
            ring_factor=_frozen(t.RCCL_RING_FACTOR),
            tree_factor=_frozen(t.RCCL_TREE_FACTOR),
            tree_cap_gbyte_per_s=t.RCCL_TREE_CAP_GBYTE_PER_S,
            pat_factor=0.0,
            nvls_efficiency=0.0,
            ll_max_gbyte_per_s=t.NCCL_LL_MAX_GBYTE_PER_S[ampere],
            per_channel_ring_ll128_gbyte_per_s=t.RCCL_LL128_PER_CH_GBYTE_PER_S,
            per_channel_tree_gbyte_per_s=(0.0, 0.0, 0.0),
            per_channel_tree_ll128_gbyte_per_s=(0.0, 0.0, 0.0),
            per_channel_nvls_tree_gbyte_per_s=(0.0, 0.0, 0.0),
            tree_correction=_frozen(t.NCCL_TREE_CORRECTION),
            ring_plateau=1.0,
            algorithms=("ring", "tree", "collnet"),
            scale_up_efficiency=t.RCCL_XGMI_MODEL_GBYTE_PER_S / model,
        )
    nvls = gen in t.NCCL_NVLS_EFFICIENCY
    return CollectiveParams(
        library="nccl",
        generation=gen,
        base_latency_us=_frozen(t.NCCL_BASE_LATENCY_US),
        hw_latency_us=_frozen({k: _frozen(v) for k, v in t.NCCL_HW_LATENCY_US.items()}),
        net_overhead_us=t.NCCL_NET_OVERHEAD_US["intel"],
        ring_factor=_frozen(t.NCCL_RING_FACTOR),
        tree_factor=_frozen(t.NCCL_TREE_FACTOR),
        tree_cap_gbyte_per_s=(0.0, 0.0, 0.0),
        pat_factor=t.NCCL_PAT_FACTOR,
        nvls_efficiency=t.NCCL_NVLS_EFFICIENCY.get(gen, 0.0),
        ll_max_gbyte_per_s=t.NCCL_LL_MAX_GBYTE_PER_S[gen],
        per_channel_ring_ll128_gbyte_per_s=t.NCCL_PER_CH_RING_LL128_GBYTE_PER_S[gen],
        per_channel_tree_gbyte_per_s=t.NCCL_PER_CH_TREE_GBYTE_PER_S[gen],
        per_channel_tree_ll128_gbyte_per_s=t.NCCL_PER_CH_TREE_LL128_GBYTE_PER_S[gen],
        per_channel_nvls_tree_gbyte_per_s=t.NCCL_PER_CH_NVLS_TREE_GBYTE_PER_S.get(gen, (0.0, 0.0, 0.0)),
        tree_correction=_frozen(t.NCCL_TREE_CORRECTION),
        ring_plateau=t.NCCL_RING_PLATEAU[gen],
        algorithms=("ring", "tree", "collnet", "pat") + (("nvls", "nvls_tree") if nvls else ()),
        scale_up_efficiency=t.NCCL_NVLINK_MODEL_GBYTE_PER_S[gen] / t.NVLINK_LINK_GBYTE_PER_S[gen],
    )
