"""Write the example foreign traces of `workloads/traces/chakra/` and `workloads/traces/kineto/`.

* `chakra/dp16-gpt1p3b/`: the step of `workloads/traces/dp16-gpt1p3b-step.yaml` exported as
  Chakra ET (16 rank files and `comm_group.json`), by clustersim's exporter, whose output
  `tests/workload/test_chakra.py` checks against protobuf messages built by hand.
* `kineto/ddp4-synthetic/`: PyTorch profiler traces of 4 ranks of a synthetic DDP step
  (two profiled steps) from `simulator.workload.interchange.kineto_synth`, a generator
  written from the profiler's output format, not from the importer.

    python benchmarks/interchange_examples.py      # rewrites both folders
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from simulator.workload.interchange.chakra_write import export_chakra
from simulator.workload.interchange.kineto_synth import SyntheticDDP, synthetic_kineto
from simulator.workload.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "workloads" / "traces"


def main() -> None:
    chakra = TRACES / "chakra" / "dp16-gpt1p3b"
    shutil.rmtree(chakra, ignore_errors=True)
    gpus = [f"n{i // 8}.gpu{i % 8}" for i in range(16)]
    export_chakra(load_trace(TRACES / "dp16-gpt1p3b-step.yaml", gpus), chakra, prefix="dp16-gpt1p3b")
    kineto = TRACES / "kineto" / "ddp4-synthetic"
    shutil.rmtree(kineto, ignore_errors=True)
    kineto.mkdir(parents=True)
    params = SyntheticDDP()
    for rank in range(params.world):
        text = json.dumps(synthetic_kineto(rank, params), indent=None, separators=(",", ":"))
        (kineto / f"rank{rank}.pt.trace.json").write_text(text + "\n", encoding="utf-8")
    print(f"wrote {chakra.relative_to(ROOT)}/ and {kineto.relative_to(ROOT)}/")


if __name__ == "__main__":
    main()
