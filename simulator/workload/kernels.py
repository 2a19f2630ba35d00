"""How long one GPU kernel takes: a shape-aware GEMM model, fused attention, memory-bound ops.

Models, per kernel of one rank (every formula in seconds, SI units):

* **GEMM** of `batch` independent (m×k)·(k×n) products (`OpCost.gemm`, `OpCost.batch`):

      tiles      = batch · ⌈m/Tm⌉ · ⌈n/Tn⌉      (Tm×Tn: the GPU's `gemm_tile`, or Tn×Tm if better)
      tile_eff   = batch·m·n / (tiles·Tm·Tn)                 tile quantization
      split      = min(⌊SMs/tiles⌋, ⌊k/SPLIT_K_MIN⌋) if tiles < SMs, else 1    (split-K)
      wave_eff   = tiles·split / (⌈tiles·split/SMs⌉ · SMs)    wave quantization over SMs/CUs
      k_eff      = (k/split) / (k/split + K_RAMP)             mainloop fill + epilogue per tile
      t_compute  = 2·batch·m·n·k / (peak[dtype] · f · tile_eff · wave_eff · k_eff)
      t_memory   = p·batch·(m·k + k·n + m·n) / (hbm_bw · memory_efficiency)
      t          = max(t_compute, t_memory) + overhead

  `f` is the GPU family's achievable fraction of peak (`gemm_peak_fraction`: measured
  matmul FLOP/s over peak, sustained at the power limit where that was measured, else the
  short-burst maximum; see `topologies/gpus/sources.md`), the
  roofline's memory side reads A and B and writes C once (L2 reuse is what the tile does).
  The efficiency `flops / (t · peak)` rises with size and saturates at `f`.
* **Fused attention** (FlashAttention-2/3 style: the s×s scores stay on chip):
  `t = max(flops / (peak · attention_efficiency[variant]), bytes / (hbm_bw · mem_eff)) + overhead`;
  `auto` means flash3 where the GPU lists a flash3 fraction, else flash2.
* **Memory-bound** ops (norms, softmax, activations, dropout, residual adds, optimizer):
  `t = bytes / (hbm_bw · memory_efficiency) + overhead`.

`overhead` is the GPU's `kernel_overhead_s` per launched kernel (`OpCost.launches`: 0 for
ops fused into a neighbour). A calibration (`ComputeEfficiency`, fitted from GEMM and copy
timings) replaces the GEMM and memory efficiencies; its fit already includes the overhead.

Simplified away: the vendor library's choice among several tiles (one tile per family, in
either orientation) and its split-K/stream-K heuristics (a plain split-K above), the
reduction of split-K partial sums, L2 residency of small operands, clock throttling
under power limits beyond what the measured fraction contains, and contention between
concurrent kernels.
"""

from __future__ import annotations

import contextlib
import math
from typing import Protocol, TypeVar

from simulator.errors import InputError
from simulator.network.hardware import GPUSpec
from simulator.workload.costs import OpCost

#: K elements of mainloop fill and epilogue a tile pays beyond its own K (one 64-deep
#: K block each for the pipeline prologue and the C write-out, halved for their overlap).
K_RAMP = 64.0

#: Smallest K slice a split-K GEMM gives one SM (four 64-deep K blocks).
SPLIT_K_MIN = 256

#: Bytes per element of each dtype (fp4 packs two per byte).
DTYPE_BYTES = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
}

ATTENTION_VARIANTS = ("auto", "unfused", "flash2", "flash3")

_T = TypeVar("_T")


class ComputeEfficiency(Protocol):
    """A calibrated compute model: efficiency in (0, 1] for a GEMM or a memory-bound op."""

    def gemm_efficiency(self, m: int, n: int, k: int, dtype: str, peak_flops_per_s: float) -> float: ...

    def memory_efficiency(self, nbytes: float, peak_bytes_per_s: float) -> float: ...


def _need(gpu: GPUSpec, value: _T | None, field: str, op: str, what: str) -> _T:
    """`value`, or the one-line error for a GPU spec that lacks `field`, which op `op` needs."""
    if value is None:
        raise InputError(
            f"GPU {gpu.name!r} gives no {field}; op {op!r} needs it for {what} (add it to the GPU file)",
            field=f"gpu.{field}",
        )
    return value


def split_k(tiles: int, k: int, sms: int) -> int:
    """K slices per tile: fewer tiles than SMs are split along K (at most one slice per
    `SPLIT_K_MIN` of K) so that the idle SMs share the work."""
    if tiles >= sms:
        return 1
    return max(1, min(sms // tiles, k // SPLIT_K_MIN))


def _quantization(batch: int, m: int, n: int, k: int, tile: tuple[int, int], sms: int) -> float:
    """tile_eff · wave_eff · k_eff of `batch` (m×n×k) products cut into `tile`s over `sms` SMs."""
    tm, tn = tile
    tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
    tile_eff = batch * m * n / (tiles * tm * tn)
    split = split_k(tiles, k, sms)
    units = tiles * split
    wave_eff = units / (math.ceil(units / sms) * sms)
    k_slice = k / split
    return tile_eff * wave_eff * k_slice / (k_slice + K_RAMP)


def gemm_time_s(
    gpu: GPUSpec,
    shape: tuple[int, int, int],
    dtype: str,
    *,
    batch: int = 1,
    op: str = "gemm",
    peak_fraction: float | None = None,
    overhead_s: float | None = None,
) -> float:
    """Time of `batch` GEMMs of `shape` (m, n, k) by the shape model (module docstring).

    Args:
        gpu: the GPU (needs sm_count, gemm_tile, gemm_peak_fraction, kernel_overhead_s).
        shape: (m, n, k) of one product.
        dtype: input dtype (peak FLOP/s and element bytes).
        batch: independent products in the one kernel (batched GEMM).
        op: op name, for the error when a GPU field is missing.
        peak_fraction: overrides the GPU's `gemm_peak_fraction` (a fit).
        overhead_s: overrides the GPU's `kernel_overhead_s` (a fit).

    Raises:
        InputError: the GPU spec lacks a field the model needs (names it and the op).
    """
    m, n, k = shape
    sms = _need(gpu, gpu.sm_count, "sm_count", op, "GEMM wave quantization")
    tm, tn = _need(gpu, gpu.gemm_tile, "gemm_tile", op, "GEMM tile quantization")
    frac = _need(
        gpu, peak_fraction or gpu.gemm_fraction(dtype), "gemm_peak_fraction", op, "the GEMM achievable peak"
    )
    over = _need(
        gpu,
        overhead_s if overhead_s is not None else gpu.kernel_overhead_s,
        "kernel_overhead_s",
        op,
        "the per-kernel fixed cost",
    )
    quant = max(_quantization(batch, m, n, k, (tm, tn), sms), _quantization(batch, m, n, k, (tn, tm), sms))
    flops = 2.0 * batch * m * n * k
    t_c = flops / (gpu.peak(dtype) * frac * quant)
    p = DTYPE_BYTES.get(dtype, 2.0)
    t_m = p * batch * (m * k + k * n + m * n) / (gpu.hbm_bandwidth_bytes_per_s * gpu.memory_efficiency)
    return float(max(t_c, t_m) + over)


def gemm_efficiency(gpu: GPUSpec, shape: tuple[int, int, int], dtype: str, *, batch: int = 1) -> float:
    """Achieved over peak FLOP/s of a GEMM under the shape model, in (0, 1]."""
    m, n, k = shape
    t = gemm_time_s(gpu, shape, dtype, batch=batch)
    return 2.0 * batch * m * n * k / (t * gpu.peak(dtype))


def resolve_attention(gpu: GPUSpec, variant: str) -> str:
    """The fused-attention variant `auto` stands for on `gpu` (flash3 where listed, else flash2)."""
    if variant != "auto":
        return variant
    return "flash3" if "flash3" in gpu.attention_efficiency else "flash2"


class KernelModel:
    """Prices `OpCost` items on one GPU, optionally with a calibration (module docstring).

    Args:
        gpu: the GPU spec.
        calibration: fitted GEMM and memory efficiencies, replacing the model's when given.
    """

    def __init__(self, gpu: GPUSpec, calibration: ComputeEfficiency | None = None) -> None:
        self.gpu = gpu
        self.calibration = calibration

    def overhead_s(self, item: OpCost) -> float:
        """Fixed cost of the kernels `item` launches."""
        if item.launches == 0:
            return 0.0
        o = _need(
            self.gpu, self.gpu.kernel_overhead_s, "kernel_overhead_s", item.name, "the per-kernel fixed cost"
        )
        return item.launches * o

    def memory_s(self, nbytes: float) -> float:
        """Time to move `nbytes` through HBM at the achieved bandwidth (no fixed cost)."""
        if nbytes <= 0:
            return 0.0
        bw = self.gpu.hbm_bandwidth_bytes_per_s
        eff = self.gpu.memory_efficiency
        if self.calibration is not None:
            with contextlib.suppress(KeyError):  # the profile measured no memory-bound kernels
                eff = self.calibration.memory_efficiency(nbytes, bw)
        return nbytes / (bw * eff)

    def gemm_s(self, item: OpCost, dtype: str) -> float:
        """A (batched) GEMM item: the shape model, or the calibration's efficiency."""
        if item.gemm is None:
            raise ValueError(f"op {item.name!r} has no GEMM shape")
        m, n, k = item.gemm
        if self.calibration is not None:
            peak = self.gpu.peak(dtype)
            try:
                eff = self.calibration.gemm_efficiency(max(1, m * item.batch), n, k, dtype, peak)
            except KeyError:  # this dtype was not calibrated: the shape model stands in
                pass
            else:
                return item.flops / (peak * eff)
        return gemm_time_s(self.gpu, (m, n, k), dtype, batch=item.batch, op=item.name)

    def fused_attention_s(self, item: OpCost, dtype: str) -> float:
        """A fused attention item at its variant's fraction of peak (roofline on its bytes)."""
        variant = resolve_attention(self.gpu, item.variant or "auto")
        eff = _need(
            self.gpu,
            self.gpu.attention_efficiency.get(variant),
            f"attention_efficiency.{variant}",
            item.name,
            f"{variant} attention",
        )
        t_c = item.flops / (self.gpu.peak(dtype) * eff)
        return max(t_c, self.memory_s(item.bytes)) + self.overhead_s(item)

    def time_s(self, item: OpCost, dtype: str) -> float:
        """Time of one item on this GPU, seconds."""
        if item.gemm is not None:
            return self.gemm_s(item, dtype)
        if item.kind == "attention":
            return self.fused_attention_s(item, dtype)
        if item.kind == "gemm":
            raise ValueError(f"GEMM op {item.name!r} has no shape")
        return self.memory_s(item.bytes) + self.overhead_s(item)
