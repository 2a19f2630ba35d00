"""Closed-form checkpoint models: Young's and Daly's optimum intervals, Daly's expected time.

Symbols (all in seconds): δ checkpoint cost (the blocking part), M job mean time between
interruptions, R restart cost (from the interruption to computing again, including
detection and checkpoint load), τ compute time between checkpoints, T_s useful solve time.
Failures are exponential (memoryless) in all three models.

- Young (1974), "A first order approximation to the optimum checkpoint interval",
  CACM 17(9): τ = √(2δM).
- Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart
  dumps", Future Generation Computer Systems 22(3): τ = √(2δM)·[1 + ⅓√(δ/2M) + (1/9)(δ/2M)] − δ
  for δ < 2M, else τ = M; and the expected wall time to finish T_s of work,
  T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ, so the efficiency is T_s / T_w.

In both models δ is the wall time a checkpoint costs the job. For a blocking checkpoint it
is the write. An asynchronous (or in-memory) checkpoint stalls the job only for a snapshot
to host memory, but its background drain to storage shares the GPUs' links with training,
so the steps that overlap the drain run slower; that too is paid per checkpoint
(`effective_checkpoint_cost_s`):

  δ = δ_snap + (D/k)·(1 − t/t_d),

with δ_snap the snapshot stall, D the drain's duration, t and t_d the step time without and
during the drain (D·(1 − t/t_d) is the compute time the drain takes from training) and k
the snapshots per drain (1 for async; `storage_every` for in-memory checkpoints, which
drain only every k-th snapshot). Counting both the snapshot stall and the persist's
interference with training as the cost of a checkpoint when choosing how often to take one
follows CheckFreq (Mohan, Phanishayee and Chidambaram, "CheckFreq: Frequent, Fine-Grained
DNN Checkpointing", FAST 2021), which profiles both and sets the checkpoint frequency to
bound their sum. Taking δ_snap alone makes δ milliseconds for a large model and Daly's
interval a step or two.
"""

from __future__ import annotations

import math


def _check(delta_s: float, mtbf_s: float) -> None:
    if delta_s < 0 or mtbf_s <= 0:
        raise ValueError("need checkpoint cost >= 0 and MTBF > 0")


def young_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum compute time between checkpoints, τ = √(2δM)."""
    _check(delta_s, mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s)


def daly_interval_s(delta_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum: √(2δM)·[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ if δ < 2M, else M."""
    _check(delta_s, mtbf_s)
    if delta_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = delta_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * delta_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


def daly_expected_time_s(
    solve_s: float, interval_s: float, delta_s: float, mtbf_s: float, restart_s: float
) -> float:
    """Daly's expected wall time T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ."""
    _check(delta_s, mtbf_s)
    if interval_s <= 0:
        raise ValueError("checkpoint interval must be > 0")
    m = mtbf_s
    return m * math.exp(restart_s / m) * math.expm1((interval_s + delta_s) / m) * solve_s / interval_s


def daly_efficiency(interval_s: float, delta_s: float, mtbf_s: float, restart_s: float) -> float:
    """Fraction of wall time doing work that is kept, T_s / T_w, in Daly's model."""
    return 1.0 / daly_expected_time_s(1.0, interval_s, delta_s, mtbf_s, restart_s)


def effective_checkpoint_cost_s(
    snapshot_s: float, drain_s: float, step_s: float, draining_step_s: float, snapshots_per_drain: int = 1
) -> float:
    """δ of a snapshot-and-drain checkpoint: δ_snap + (D/k)·(1 − t/t_d) (see the module docstring).

    Args:
        snapshot_s: the snapshot stall δ_snap, s.
        drain_s: the background drain's duration D, s.
        step_s: step time t without a drain, s.
        draining_step_s: step time t_d while the drain runs, s (a faster one counts as t).
        snapshots_per_drain: k, snapshots per drain to storage.

    Raises:
        ValueError: a negative time, a step time that is not positive, or k < 1.
    """
    if snapshot_s < 0 or drain_s < 0 or not (step_s > 0 and draining_step_s > 0) or snapshots_per_drain < 1:
        raise ValueError("need snapshot and drain times >= 0, step times > 0 and k >= 1")
    lost_fraction = max(0.0, 1.0 - step_s / draining_step_s)
    return snapshot_s + drain_s / snapshots_per_drain * lost_fraction
