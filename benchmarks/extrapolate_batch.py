"""A 1F1B step's figures at a larger batch, from two runs of the same job at smaller ones.

Used for the DeepSeek-V3 compares (docs/cost.md): the full batch (120 micro-batches per
pipeline on 1,024 simulated ranks) does not fit in memory, so each variant is run at 16 and
24 micro-batches and the full step extrapolated.

What is modelled: in a 1F1B pipeline every extra micro-batch adds one steady-state period
(one forward and one backward of the slowest stage, with its communication) to the step,
so step time and energy per step are linear in the micro-batches m once the pipeline is
full (m >= pp): T(m) = T(m1) + (m - m1) (T(m2) - T(m1)) / (m2 - m1), the same for energy.
Cost per step is then the run's own formula (`simulator.metrics.run_cost`): job capex
spread over the amortization years times the step time, plus facility energy at the
electricity price; tokens per step are m x sequences per micro-batch x sequence length.

What is simplified: the gradient reduction and optimizer at the step's end are the same at
every m (true of ZeRO-1 data parallelism: they depend on the parameters, not the batch),
and the steady state is the same at m2 as at the full batch.

    .venv/bin/python benchmarks/extrapolate_batch.py M1 SUMMARY1 M2 SUMMARY2 --to M \\
        --sequences-per-microbatch N --sequence-tokens L
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

SECONDS_PER_YEAR = 365.25 * 86400
J_PER_KWH = 3.6e6


def extrapolate(
    m1: int, s1: dict[str, Any], m2: int, s2: dict[str, Any], m: int, tokens_per_microbatch: float
) -> dict[str, float]:
    """Step time, throughput, energy and cost of the step at `m` micro-batches.

    Args:
        m1, s1: micro-batches per pipeline of the first run, and its summary.json.
        m2, s2: the same of the second run (m2 > m1, same job otherwise).
        m: micro-batches per pipeline to extrapolate to.
        tokens_per_microbatch: tokens one micro-batch of every pipeline holds together
            (data-parallel width x micro-batch size x sequence length).
    """
    out: dict[str, float] = {}
    for key in ("step_time_s", "energy_per_step_j"):
        per_mb = (float(s2[key]) - float(s1[key])) / (m2 - m1)
        out[key] = float(s1[key]) + (m - m1) * per_mb
        out[key.replace("_per_step", "") + "_per_microbatch"] = per_mb
    tokens = m * tokens_per_microbatch
    years = float(s1["amortization_years"]) * SECONDS_PER_YEAR
    capex_per_s = float(s1["capex_usd"]) * float(s1["job_share"]) / years
    network_per_s = float(s1["network_capex_usd"]) * float(s1["job_share"]) / years
    energy_usd = out["energy_per_step_j"] / J_PER_KWH * float(s1["electricity_usd_per_kwh"])
    out["tokens_per_step"] = tokens
    out["tokens_per_s"] = tokens / out["step_time_s"]
    out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / int(s1["gpus_in_job"])
    out["usd_per_step"] = capex_per_s * out["step_time_s"] + energy_usd
    out["usd_per_mtoken"] = out["usd_per_step"] / tokens * 1e6
    out["network_usd_per_mtoken"] = network_per_s * out["step_time_s"] / tokens * 1e6
    out["energy_per_token_j"] = out["energy_per_step_j"] / tokens
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("m1", type=int)
    ap.add_argument("summary1", type=Path)
    ap.add_argument("m2", type=int)
    ap.add_argument("summary2", type=Path)
    ap.add_argument("--to", type=int, required=True, help="micro-batches per pipeline")
    ap.add_argument("--sequences-per-microbatch", type=int, required=True, help="dp x micro-batch size")
    ap.add_argument("--sequence-tokens", type=int, required=True)
    a = ap.parse_args()
    s1, s2 = (json.loads(p.read_text()) for p in (a.summary1, a.summary2))
    per_mb = a.sequences_per_microbatch * a.sequence_tokens
    for m, s in ((a.m1, s1), (a.m2, s2)):  # the formula gives each run's own figures back
        got = extrapolate(a.m1, s1, a.m2, s2, m, per_mb)
        print(
            f"m={m}: step {s['step_time_s']:.4f} s, {s['usd_per_mtoken']:.4f} USD/Mtoken "
            f"(formula: {got['step_time_s']:.4f} s, {got['usd_per_mtoken']:.4f})"
        )
    full = extrapolate(a.m1, s1, a.m2, s2, a.to, per_mb)
    print(f"m={a.to} (extrapolated):")
    for key, value in full.items():
        print(f"  {key:28s} {value:,.6g}")


if __name__ == "__main__":
    main()
