"""Hardware specs: GPUs and named NIC presets.

A GPU spec file (`topologies/gpus/*.yaml`) gives peak dense FLOP/s per dtype in TFLOP/s,
HBM bandwidth in TB/s and HBM size in GB; `GPUSpec` keeps FLOP/s, bytes/s and bytes.

NIC presets (`topologies/nics/presets.yaml`, sources in `sources.md` beside it) name a
scale-out NIC by product (`connectx7-400g-ib`, `pollara-400`, `efa-p5`, ...): its port rate,
NICs per server, the scale-out bandwidth per GPU that the one-NIC-per-GPU generators use,
its medium and, where a public source states one, its latency. A topology file may say
`nic: NAME` instead of `nic_gbps` (giving both is an error). Simplified: the preset's
latency is carried as data (`NICPreset.latency_us`); the generators' hop latencies are
their own fields.

The per-kernel compute model (`simulator.workload.kernels`) also reads the SM/CU count,
the GEMM output tile, the achievable fraction of peak a saturated GEMM reaches, the fused
attention kernels' fractions and the per-kernel fixed cost. These are optional here: a
GPU spec that gives none of them is priced by the flat roofline (`compute_efficiency`,
`memory_efficiency`); one that gives some but lacks a field a kernel needs fails, naming
the field and the op.
Sources of every figure: `topologies/gpus/sources.md`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.config.loader import load
from simulator.errors import FieldError
from simulator.units import to_si

NIC_PRESETS_FILE = Path(__file__).resolve().parents[2] / "topologies" / "nics" / "presets.yaml"

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")

#: The fused-attention kernels a GPU's `attention_efficiency` may give a fraction for.
FUSED_ATTENTION = ("flash2", "flash3")


def gpu_model(name: str | None) -> str | None:
    """The model token of a GPU name (`H100`, `A100`, `MI300X`, `B200`, `GB200`, `L40S`), or
    None when the name holds none (`AMD Radeon Graphics`, which ROCm prints for several
    Instinct parts). Compares a log's device name (`NVIDIA H100 80GB HBM3`,
    `NVIDIA A100-SXM4-80GB`) with a GPU file's (`H100 SXM5 80GB`): memory size, form factor
    and `VF` do not make another model."""
    if not name:
        return None
    for token in re.split(r"[^A-Z0-9]+", name.upper()):
        if re.fullmatch(r"[A-Z]{1,2}\d{2,4}[A-Z]?", token):
            return token
    return None


def other_model(a: str | None, b: str | None) -> bool:
    """Whether GPU names `a` and `b` both name a model (`gpu_model`) and not the same one."""
    ma, mb = gpu_model(a), gpu_model(b)
    return ma is not None and mb is not None and ma != mb


class GPUSpec(Spec):
    """One accelerator model (SI units)."""

    #: The keys GPU files use, in human units, and the SI field each one fills.
    HUMAN_KEYS: ClassVar[dict[str, str]] = {
        "peak_tflops": "peak_flops_per_s",
        "hbm_tbyte_per_s": "hbm_bandwidth_bytes_per_s",
        "hbm_gbyte": "hbm_capacity_bytes",
    }

    name: str = Field(description="Model name, e.g. 'H100 SXM5 80GB'.")
    peak_flops_per_s: dict[str, float] = Field(
        description="Dense peak FLOP/s per dtype (no sparsity), e.g. {'bf16': 989e12}."
    )
    hbm_bandwidth_bytes_per_s: float = Field(gt=0, description="Peak HBM bandwidth, bytes/s.")
    hbm_capacity_bytes: float = Field(gt=0, description="HBM capacity, bytes.")
    compute_efficiency: float = Field(
        0.7, gt=0, le=1, description="Fraction of peak FLOP/s a large GEMM reaches (roofline)."
    )
    memory_efficiency: float = Field(
        0.8, gt=0, le=1, description="Fraction of peak HBM bandwidth memory-bound kernels reach."
    )
    tdp_w: float | None = Field(None, gt=0, description="Board power, watts (for power estimates).")
    arch: str | None = Field(None, description="Architecture family, e.g. ampere, hopper, blackwell, cdna3.")
    sm_count: int | None = Field(
        None, ge=1, description="Streaming multiprocessors (NVIDIA) or compute units (AMD)."
    )
    boost_clock_ghz: float | None = Field(
        None, gt=0, description="Boost clock, GHz (the peak figures' clock)."
    )
    l2_cache_bytes: float | None = Field(None, gt=0, description="L2 (last-level on-die) cache, bytes.")
    gemm_tile: tuple[int, int] | None = Field(
        None,
        description="Output tile (rows, columns) one SM/CU computes in a large GEMM; sets tile "
        "and wave quantization.",
    )
    gemm_peak_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Fraction of peak FLOP/s a large, tile- and wave-aligned GEMM sustains "
        "(the family's measured maximum achievable matmul FLOP/s over peak).",
    )
    gemm_peak_fraction_by_dtype: dict[str, float] = Field(
        default_factory=dict,
        description="Per-dtype overrides of gemm_peak_fraction where measured apart (e.g. fp8); "
        "its keys are dtypes, as in peak_tflops.",
    )
    attention_efficiency: dict[str, float] = Field(
        default_factory=dict,
        description="Fraction of dense peak a fused attention kernel sustains, per variant "
        "(flash2, flash3; no other key); a variant absent here cannot run on this GPU.",
    )
    kernel_overhead_s: float | None = Field(
        None, ge=0, description="Fixed cost per kernel (launch and ramp), seconds (YAML: kernel_overhead_us)."
    )

    @model_validator(mode="before")
    @classmethod
    def _human_units(cls, data: Any) -> Any:
        """Accept the YAML's human units: peak_tflops, hbm_tbyte_per_s, hbm_gbyte."""
        if isinstance(data, dict) and not isinstance(data.get("peak_tflops", {}), dict):
            raise ValueError("peak_tflops must map dtype names to TFLOP/s")
        return to_si(
            data,
            "peak_flops_per_s",
            "hbm_bandwidth_bytes_per_s",
            "hbm_capacity_bytes",
            "l2_cache_bytes",
            "kernel_overhead_s",
            human_bases={
                "hbm_bandwidth_bytes_per_s": "hbm",
                "hbm_capacity_bytes": "hbm",
                "l2_cache_bytes": "l2",
                "kernel_overhead_s": "kernel_overhead",
            },
        )

    @model_validator(mode="after")
    def _check_dtypes(self) -> GPUSpec:
        unknown = sorted(set(self.peak_flops_per_s) - set(DTYPES))
        if unknown:
            raise FieldError(
                f"unknown dtype(s) {unknown}; expected some of {list(DTYPES)}", field="peak_flops_per_s"
            )
        for k, v in self.peak_flops_per_s.items():
            if v <= 0:
                raise FieldError("peak FLOP/s must be positive", field=f"peak_flops_per_s.{k}")
        # a misspelt variant or dtype would be read as absent: the model would fail or
        # fall back to another figure where the file meant to give one
        for key, known in (
            ("attention_efficiency", FUSED_ATTENTION),
            ("gemm_peak_fraction_by_dtype", DTYPES),
        ):
            unknown = sorted(set(getattr(self, key)) - set(known))
            if unknown:
                raise FieldError(
                    f"unknown key {unknown[0]!r}; expected one of {list(known)}", field=f"{key}.{unknown[0]}"
                )
        if self.gemm_tile is not None and min(self.gemm_tile) < 1:
            raise FieldError("gemm_tile must be two positive integers", field="gemm_tile")
        for name in ("gemm_peak_fraction_by_dtype", "attention_efficiency"):
            for k, v in getattr(self, name).items():
                if not 0 < v <= 1:  # placed at the entry: a message at the file's first line named none
                    raise FieldError(f"an efficiency must lie in (0, 1]; found {v:g}", field=f"{name}.{k}")
        return self

    @property
    def has_kernel_model(self) -> bool:
        """Whether the spec gives any field of the per-kernel model (else the flat roofline)."""
        return bool(
            self.sm_count is not None
            or self.gemm_tile is not None
            or self.gemm_peak_fraction is not None
            or self.kernel_overhead_s is not None
            or self.attention_efficiency
        )

    def gemm_fraction(self, dtype: str) -> float | None:
        """Achievable fraction of peak for large GEMMs in `dtype` (None if not given)."""
        return self.gemm_peak_fraction_by_dtype.get(dtype, self.gemm_peak_fraction)

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for `dtype`; falls back to fp16/bf16 equivalents where absent."""
        if dtype in self.peak_flops_per_s:
            return self.peak_flops_per_s[dtype]
        for alt in ("bf16", "fp16"):
            if dtype in ("bf16", "fp16") and alt in self.peak_flops_per_s:
                return self.peak_flops_per_s[alt]
        raise KeyError(f"GPU {self.name} has no peak FLOP/s for dtype {dtype!r}")


class NICPreset(Spec):
    """One named scale-out NIC configuration (human units, as in the preset file)."""

    description: str = Field(description="What NIC, in which servers.")
    port_gbps: float = Field(gt=0, description="Rate of one NIC port, Gbit/s per direction.")
    nics_per_node: int = Field(ge=1, description="NICs (ports) per 8-GPU server for the GPU fabric.")
    gbps_per_gpu: float = Field(
        gt=0, description="Scale-out bandwidth per GPU, Gbit/s: port_gbps x nics_per_node / GPUs per server."
    )
    medium: Literal["ib", "ethernet"] = Field(description="Link medium.")
    latency_us: float | None = Field(
        None, ge=0, description="NIC latency a public source states, µs (None when none does)."
    )
    net_latency_us: float | None = Field(
        None,
        ge=0,
        description="Latency of one network step of the collective library over this transport, "
        "as its plugin or vendor publishes it, µs (None: the library's InfiniBand constants).",
    )
    message_overhead_us: float | None = Field(
        None, ge=0, description="Per-message completion overhead on top of net_latency_us, µs."
    )
    protocols: list[Literal["ll", "ll128", "simple"]] | None = Field(
        None,
        description="Protocols the collective library may use across servers over this transport, "
        "where its plugin restricts them (None: all the library has).",
    )
    algorithms: list[Literal["ring", "tree", "nvls", "nvls_tree", "collnet", "pat"]] | None = Field(
        None,
        description="Algorithms the collective library may use across servers over this transport, "
        "where its vendor's required settings restrict them (None: all the library has).",
    )


class NICPresetFile(Spec):
    """The preset file: `presets: {name: NICPreset}`."""

    presets: dict[str, NICPreset] = Field(description="Presets by name.")


@cache
def nic_presets(path: Path = NIC_PRESETS_FILE) -> dict[str, NICPreset]:
    """The NIC presets by name (read once per file)."""
    return load(NICPresetFile, path).presets


def apply_nic_preset(data: Any, rate_key: str = "nic_gbps", medium_key: str = "medium") -> Any:
    """Fill `rate_key` and `medium_key` of a topology mapping from its `nic: NAME` preset.

    Args:
        data: the mapping read from a topology file (anything else is returned unchanged).
        rate_key: the field holding the NIC rate in Gbit/s.
        medium_key: the field holding the scale-out medium.

    Raises:
        FieldError: unknown preset, the rate given as well, or a medium unlike the preset's.
    """
    if not isinstance(data, Mapping) or data.get("nic") is None:
        return data
    presets = nic_presets()
    name = data["nic"]
    if name not in presets:
        raise FieldError(
            f"unknown NIC preset {name!r}; expected one of {', '.join(sorted(presets))}", field="nic"
        )
    if rate_key in data:
        raise FieldError(f"give either nic ({name}) or {rate_key}, not both", field=rate_key)
    preset = presets[name]
    if data.get(medium_key, preset.medium) != preset.medium:
        raise FieldError(
            f"{medium_key} {data[medium_key]!r} contradicts NIC preset {name} ({preset.medium})",
            field=medium_key,
        )
    return {**data, rate_key: preset.gbps_per_gpu, medium_key: preset.medium}
