"""Benchmark: ZeRO-3 data parallelism without model parallelism, per-GPU throughput vs scale.

Published (Narayanan et al., SC'21, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", Table 2, "ZeRO-3 without Model Parallelism", DGX A100 nodes
with 8 HDR InfiniBand NICs each): teraFLOP/s per GPU, counted with recomputation.

    175B, batch 1536:  384 GPUs mb 4: 144 | 768 mb 2: 88  | 1536 mb 1: 44
    530B:              640 GPUs mb 4 (batch 2560): 138 | 1120 mb 2 (2240): 98 | 2240 mb 1 (2240): 48

Simulated here with DeepSpeed's ZeRO-3 defaults (layout fields `zero3_*`, see
docs/fidelity.md): gathers in 5e7-element buckets, one bucket prefetched, reduce-scatters in
5e8-element buckets, full activation recomputation, on a rail-optimized Clos of DGX-A100-like
servers (8 A100 on NVSwitch, 300 GB/s per GPU; one 200 Gb/s NIC per GPU). The figure
compared is hardware FLOPs (recomputation included) per GPU per second, and the trend is
each row's throughput over the first row's of its model. Nothing is fitted to these rows.

Usage:
    .venv/bin/python benchmarks/zero3_scaling.py [175b] [530b]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: Megatron-Turing NLG 530B shape (Narayanan et al. SC'21 Table 1 / Smith et al. 2022):
#: 105 layers, hidden 20480, 128 heads, sequence 2048.
MT_NLG_530B = {
    "name": "mt-nlg-530b",
    "layers": 105,
    "hidden_size": 20480,
    "ffn_hidden_size": 81920,
    "attention_heads": 128,
    "vocab_size": 51200,
    "seq_len": 2048,
    "dtype": "bf16",
    "gated_ffn": False,
    "tied_embeddings": True,
    "bias": True,
    "norm": "layernorm",
    "position_embedding": "learned",
}
#: (GPUs, micro-batch, global batch, published TFLOP/s per GPU)
ROWS = {
    "175b": [(384, 4, 1536, 144.0), (768, 2, 1536, 88.0), (1536, 1, 1536, 44.0)],
    "530b": [(640, 4, 2560, 138.0), (1120, 2, 2240, 98.0), (2240, 1, 2240, 48.0)],
}


def _scenario(tmp: Path, model_file: Path, gpus: int, mbs: int, gbs: int) -> Path:
    d = tmp / f"g{gpus}"
    d.mkdir()
    topo = {
        "name": f"a100-rail-clos-{gpus // 8}n",
        "gpu": {"file": str(ROOT / "topologies/gpus/a100-80gb.yaml")},
        "generator": "rail_clos",
        "nodes": gpus // 8,
        "gpus_per_node": 8,
        "scale_up": "nvswitch",
        "scale_up_gbyte_per_s": 300,
        "nic_gbps": 200,
        "nic_medium": "ib",
        "servers_per_leaf": 32,
        "oversubscription": 1,
        "link_latency_us": 1.0,
    }
    layout = {
        "dp": gpus,
        "zero_stage": 3,
        "micro_batch_size": mbs,
        "global_batch_size": gbs,
        "recompute": "full",
    }
    wl = {
        "model": {"file": str(model_file)},
        "layout": layout,
        "fidelity": {"representatives": True, "intra_node": "analytic"},
    }
    sc = {
        "name": d.name,
        "topology": {"file": "topo.yaml"},
        "workload": {"file": "wl.yaml"},
        "network": {"record_links": False},
        "run": {"steps": 1},
    }
    for name, doc in (("topo.yaml", topo), ("wl.yaml", wl), ("sc.yaml", sc)):
        (d / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return d / "sc.yaml"


def run(case: str) -> None:
    from simulator.errors import InputError
    from simulator.scenario.execute import execute
    from simulator.scenario.prepare import prepare

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        if case == "175b":
            model_file = ROOT / "workloads/models/gpt3-175b.yaml"
        else:
            model_file = tmp / "mt-nlg-530b.yaml"
            model_file.write_text(yaml.safe_dump(MT_NLG_530B, sort_keys=False))
        first_sim = first_pub = 0.0
        print(f"{case}: GPUs | mb | published TF/GPU | simulated | error | trend published | trend simulated")
        for gpus, mbs, gbs, published in ROWS[case]:
            t0 = time.perf_counter()
            try:
                prep = prepare(_scenario(tmp, model_file, gpus, mbs, gbs))
            except InputError as exc:  # e.g. the memory model rejects the row: say so, go on
                print(f"  {gpus:5d} | {mbs} | {published:6.1f} | not simulated: {exc.message}")
                continue
            s = execute(prep).summary
            tf = prep.program.meta["hardware_flops_per_step"] / s["step_time_s"] / gpus / 1e12
            first_sim, first_pub = first_sim or tf, first_pub or published
            print(
                f"  {gpus:5d} | {mbs} | {published:6.1f} | {tf:6.1f} | {tf / published - 1:+.0%} | "
                f"{published / first_pub:.2f} | {tf / first_sim:.2f} "
                f"(step {s['step_time_s']:.1f} s, compute {s['compute_s']:.1f} s, exposed "
                f"{s['exposed_comm_s']:.1f} s; wall {time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    for c in [a for a in sys.argv[1:] if a in ROWS] or list(ROWS):
        run(c)
