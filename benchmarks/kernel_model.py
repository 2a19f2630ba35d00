"""Print what the per-kernel compute model predicts, per shipped GPU file.

    python benchmarks/kernel_model.py [--gpu topologies/gpus/a100-80gb.yaml ...]

Two tables per GPU (`simulator.workload.kernels`, no network, no fit):

* GEMM efficiency (achieved / peak BF16) of square GEMMs 256 .. 32768 and of a few
  transformer-shaped ones (tokens 8192, hidden h, MLP 4h): it rises with size and
  saturates at the file's `gemm_peak_fraction`, with dips where wave quantization bites.
* Compute-only MFU of one GPT block (forward + backward, micro-batch 4, sequence 2048,
  ffn 4h, dropout) for hidden sizes 1024 .. 12288 and each attention variant the GPU
  lists, plus `unfused`: small hidden sizes reach less of peak than large ones.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from simulator.config.loader import load
from simulator.network.hardware import GPUSpec
from simulator.workload.costs import OpCost
from simulator.workload.flops import layer_program
from simulator.workload.kernels import KernelModel, gemm_efficiency
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import ModelSpec

GPUS = Path(__file__).resolve().parents[1] / "topologies" / "gpus"
HIDDEN = [(1024, 16), (2304, 24), (4096, 32), (6144, 48), (12288, 96)]


def block_mfu(gpu: GPUSpec, hidden: int, heads: int, attention: str) -> float:
    """Matmul FLOPs of one GPT block (fwd + bwd) over its kernel-model time, per peak."""
    model = ModelSpec(
        name="gpt",
        layers=1,
        hidden_size=hidden,
        ffn_hidden_size=4 * hidden,
        attention_heads=heads,
        vocab_size=51200,
        seq_len=2048,
        gated_ffn=False,
        dropout=True,
    )
    layout = LayoutSpec(micro_batch_size=4, global_batch_size=4, attention=attention)  # type: ignore[arg-type]
    km = KernelModel(gpu)
    t = flops = 0.0
    for phase in ("fwd", "bwd"):
        for it in layer_program(model, layout, 0, phase):  # type: ignore[arg-type]
            if isinstance(it, OpCost):
                t += km.time_s(it, model.dtype)
                flops += it.flops if it.kind != "elementwise" else 0.0
    return flops / (t * gpu.peak(model.dtype))


def report(gpu: GPUSpec) -> None:
    print(f"\n{gpu.name}: {gpu.sm_count} SMs/CUs, tile {gpu.gemm_tile}, f = {gpu.gemm_peak_fraction}")
    sizes = [256 * 2**i for i in range(8)]
    print("  square GEMM  " + " ".join(f"{s:>6d}" for s in sizes))
    print("  efficiency   " + " ".join(f"{gemm_efficiency(gpu, (s, s, s), 'bf16'):6.3f}" for s in sizes))
    for h, _ in HIDDEN:
        shapes = {"qkv": (8192, 3 * h, h), "mlp_up": (8192, 4 * h, h), "mlp_down": (8192, h, 4 * h)}
        cells = ", ".join(f"{n} {gemm_efficiency(gpu, s, 'bf16'):.3f}" for n, s in shapes.items())
        print(f"  h={h:<6d} {cells}")
    variants = ["unfused", *sorted(gpu.attention_efficiency)]
    print("  block MFU    " + " ".join(f"{v:>9s}" for v in variants))
    for h, a in HIDDEN:
        print(f"  h={h:<9d} " + " ".join(f"{block_mfu(gpu, h, a, v):9.3f}" for v in variants))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="append", type=Path, help="GPU file (repeatable; default: all).")
    args = parser.parse_args(argv)
    for path in args.gpu or sorted(GPUS.glob("*.yaml")):
        report(load(GPUSpec, path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
