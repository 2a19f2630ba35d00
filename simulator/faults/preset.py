"""Failure presets derived from published fleet data.

`llama3_405b` — Dubey et al. 2024, "The Llama 3 Herd of Models", Table 5: during a 54-day
snapshot of Llama 3 405B pre-training on 16,384 H100 GPUs (2,048 hosts of 8) there were 466
job interruptions, 47 planned (firmware upgrades, configuration or dataset updates) and 419
unexpected, by root cause:

    faulty GPU 148, GPU HBM3 memory 72, software bug 54, network switch/cable 35,
    host maintenance 32, GPU SRAM memory 19, GPU system processor 17, NIC 7,
    NCCL watchdog timeouts 7, silent data corruption 6, GPU thermal interface + sensor 6,
    others 16 (SSD 3, power supply 3, server chassis 2, IO expansion board 2,
    dependency 2, CPU 2, system memory 2)                                     = 419.

Derivation: each cause is assigned a component class and, assuming a constant rate
(exponential), a per-component MTBF = (components of that class in the reference job) ×
54 d × 24 h / count. Reference counts (the `reference_job()` shape): 16,384 GPUs (classes
gpu, hbm, and software — software faults counted per GPU/rank, so they grow with job
size), 2,048 hosts, 16,384 NICs and 16,384 NIC-to-leaf links (one per GPU, rail-optimized).
Network switch/cable faults are put on links (the paper does not split switches from
cables); the "others" are host parts (SSD, PSU, chassis, IO board, CPU, DRAM) and are put
on hosts. So a per-GPU MTBF is 16,384 × 1,296 h / count, e.g. faulty GPU: 143,468 h.
Scaled to another job, the expected interruptions follow the job's component counts.

The 47 planned interruptions are not failures: the preset can add them as `scheduled`
host-level interruptions evenly spaced (`include_planned=True`) with no repair time.

Repair times are not in the paper; the preset uses assumptions: GPU / HBM / SRAM / GSP /
SDC / thermal / host parts: lognormal, median 6 h, sigma 1 (swap or RMA, node re-qualified);
NIC and link: lognormal median 2 h; software: no hardware repair.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from simulator.faults.failure import FailureSpec
from simulator.faults.state import JobShape

LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384
LLAMA3_PLANNED = 47

#: (cause, component class, interruptions in 54 days on 16,384 GPUs), Llama 3 Table 5.
LLAMA3_TABLE5: tuple[tuple[str, str, int], ...] = (
    ("faulty GPU", "gpu", 148),
    ("GPU HBM3 memory", "hbm", 72),
    ("software bug", "software", 54),
    ("network switch/cable", "link", 35),
    ("host maintenance", "host", 32),
    ("GPU SRAM memory", "gpu", 19),
    ("GPU system processor", "gpu", 17),
    ("NIC", "nic", 7),
    ("NCCL watchdog timeout", "software", 7),
    ("silent data corruption", "gpu", 6),
    ("GPU thermal interface + sensor", "gpu", 6),
    ("other (SSD, PSU, chassis, IO board, CPU, DRAM, dependency)", "host", 16),
)

_REPAIR_H = {
    "gpu": {"kind": "lognormal", "median_h": 6.0, "sigma": 1.0},
    "hbm": {"kind": "lognormal", "median_h": 6.0, "sigma": 1.0},
    "host": {"kind": "lognormal", "median_h": 6.0, "sigma": 1.0},
    "nic": {"kind": "lognormal", "median_h": 2.0, "sigma": 1.0},
    "link": {"kind": "lognormal", "median_h": 2.0, "sigma": 1.0},
}


def reference_job() -> JobShape:
    """The Llama 3 405B training job shape (TP 8 x PP 16 per replica, 128 replicas)."""
    return JobShape(n_gpus=LLAMA3_GPUS, gpus_per_node=8, gpus_per_replica=128)


def llama3_405b_dicts(
    include_planned: bool = False, duration_days: float = LLAMA3_DAYS
) -> list[dict[str, Any]]:
    """The preset as YAML-like dicts (human units), one failure spec per cause."""
    ref = reference_job()
    hours = LLAMA3_DAYS * 24.0
    out: list[dict[str, Any]] = []
    for cause, target, count in LLAMA3_TABLE5:
        d: dict[str, Any] = {
            "kind": "exponential",
            "target": target,
            "cause": cause,
            "mtbf_h": ref.count(target) * hours / count,
        }
        if target in _REPAIR_H:
            d["repair"] = dict(_REPAIR_H[target])
        out.append(d)
    if include_planned:
        gap_h = duration_days * 24.0 / (LLAMA3_PLANNED * duration_days / LLAMA3_DAYS + 1)
        n = int(LLAMA3_PLANNED * duration_days / LLAMA3_DAYS)
        out.append(
            {
                "kind": "scheduled",
                "target": "software",
                "cause": "planned maintenance",
                "at_h": [gap_h * (i + 1) for i in range(n)],
                "blast_gpus": 0,
            }
        )
    return out


def llama3_405b(include_planned: bool = False, duration_days: float = LLAMA3_DAYS) -> list[Any]:
    """Failure specs from Llama 3 Table 5 (per-component rates; see the module docstring)."""
    return TypeAdapter(list[FailureSpec]).validate_python(llama3_405b_dicts(include_planned, duration_days))


PRESETS = {"llama3_405b": llama3_405b}
