"""Hardware specs: GPUs. YAML uses human units; the spec stores SI units only.

A GPU spec file (`topologies/gpus/*.yaml`) gives peak dense FLOP/s per dtype in TFLOP/s,
HBM bandwidth in TB/s and HBM size in GB; `GPUSpec` keeps FLOP/s, bytes/s and bytes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.units import to_si

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp4", "int8")


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
            human_bases={"hbm_bandwidth_bytes_per_s": "hbm", "hbm_capacity_bytes": "hbm"},
        )

    @model_validator(mode="after")
    def _check_dtypes(self) -> GPUSpec:
        unknown = sorted(set(self.peak_flops_per_s) - set(DTYPES))
        if unknown:
            raise ValueError(f"unknown dtype(s) {unknown}; expected some of {list(DTYPES)}")
        if any(v <= 0 for v in self.peak_flops_per_s.values()):
            raise ValueError("peak FLOP/s must be positive")
        return self

    def peak(self, dtype: str) -> float:
        """Peak FLOP/s for `dtype`; falls back to fp16/bf16 equivalents where absent."""
        if dtype in self.peak_flops_per_s:
            return self.peak_flops_per_s[dtype]
        for alt in ("bf16", "fp16"):
            if dtype in ("bf16", "fp16") and alt in self.peak_flops_per_s:
                return self.peak_flops_per_s[alt]
        raise KeyError(f"GPU {self.name} has no peak FLOP/s for dtype {dtype!r}")
