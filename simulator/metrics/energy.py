"""Power and energy of the cluster from the simulated timeline.

What is modelled, per component (rated figures from `topologies/prices.yaml` and the GPU
file's `tdp_w`; fractions from its `power` block):
    * GPU: while a compute op runs, TDP x `gpu_compute_curve(u)` where u is the op's
      achieved utilisation, FLOPs / (duration x peak FLOP/s); while only communication ops
      run, TDP x `gpu_comm_fraction`; otherwise TDP x `gpu_idle_fraction`. A simulated rank
      stands for `weight` GPUs; GPUs of the topology outside the job idle.
    * NICs, switches and transceivers/cables: rated x (s + (1 - s) x c(t)), s the
      `network_static_fraction`, c(t) the share of the job's GPUs with a communication op in
      flight at t.
    * Server hosts (CPUs, memory, fans; per GPU slot): rated, constant.
    * Storage servers: rated x `storage_idle_fraction` (no checkpoint inside a step).
    * Facility: IT power x PUE.

Two independent paths give the same energy: `power_timeline` sweeps every op boundary
and sums piecewise-constant power; `step_energy` adds op energies to the `steps` frame's
breakdown (compute, exposed communication, idle). Tests check they agree to 1e-9.

A host wait (an op on `HOST_STREAM`: an imported trace's measured launch delay) is not GPU
work: the GPU idles through it unless a kernel or a transfer runs.

What is simplified: a GPU computing while it communicates draws the compute figure;
traffic inside a server (NVLink) counts as network activity for the NICs' share; power
changes instantly (no thermal inertia); host power does not follow load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from simulator.network.prices import PriceSpec
from simulator.workload.program import HOST_STREAM

#: column of each component in `power_timeline` and `step_energy` (watts / joules)
COMPONENTS = ("gpu", "host", "network", "storage")


@dataclass(frozen=True, slots=True)
class PowerInputs:
    """Rated figures of one cluster for the energy model.

    Attributes:
        tdp_w: one GPU's board power.
        peak_flops_per_s: one GPU's peak for the job's dtype.
        job_gpus: GPUs of the job (sum of the ranks' weights).
        idle_gpus: GPUs of the topology outside the job.
        host_w: all server hosts together (per-slot power x GPUs).
        network_w: rated NICs, switches and cables together.
        storage_w: rated storage servers together.
        power_cap_fraction: GPU power cap as a fraction of TDP (1 = uncapped).
    """

    tdp_w: float
    peak_flops_per_s: float
    job_gpus: int
    idle_gpus: int
    host_w: float
    network_w: float
    storage_w: float
    power_cap_fraction: float = 1.0


def _gpu_powers(ops: pd.DataFrame, p: PowerInputs, prices: PriceSpec) -> np.ndarray:
    """Draw of one GPU during each compute op, watts (capped at the power cap)."""
    dur = ops["duration_s"].to_numpy(dtype=float)
    flops = ops["flops"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(dur > 0, flops / (dur * p.peak_flops_per_s), 0.0)
    curve = prices.power.gpu_compute_curve
    frac = np.array([curve(float(x)) for x in np.clip(u, 0.0, 1.0)])
    return p.tdp_w * np.minimum(frac, p.power_cap_fraction)


def _levels(p: PowerInputs, prices: PriceSpec) -> tuple[float, float]:
    """(idle, communicating) draw of one GPU, watts."""
    pw = prices.power
    cap = p.power_cap_fraction
    return p.tdp_w * min(pw.gpu_idle_fraction.value, cap), p.tdp_w * min(pw.gpu_comm_fraction.value, cap)


def _rank_power(
    ops: _StepOps, mids: np.ndarray, levels: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """One rank's GPU power and communicating flag at each segment midpoint (`ops`: that
    rank's ops only, in the frame's order)."""
    idle_w, comm_w = levels
    comp = ops.compute
    comm = ops.comm & (ops.end > ops.start)
    order = np.argsort(ops.start[comp], kind="stable")
    cs, ce, op_w = ops.start[comp][order], ops.end[comp][order], ops.watts[comp][order]
    ms, me = np.sort(ops.start[comm]), np.sort(ops.end[comm])
    active = (np.searchsorted(ms, mids, side="right") - np.searchsorted(me, mids, side="right")) > 0
    watts = np.where(active, comm_w, idle_w)
    if len(cs):
        i = np.searchsorted(cs, mids, side="right") - 1
        j = np.maximum(i, 0)
        watts = np.where((i >= 0) & (mids < ce[j]), op_w[j], watts)
    return watts, active


@dataclass(frozen=True, slots=True)
class _StepOps:
    """The ops of one step as arrays (rank, is GPU compute, is communication, start, end,
    draw while computing); a host wait (`HOST_STREAM`) is neither."""

    rank: np.ndarray
    compute: np.ndarray
    comm: np.ndarray
    start: np.ndarray
    end: np.ndarray
    watts: np.ndarray


def _gpu_compute(ops: pd.DataFrame) -> np.ndarray:
    """Which ops are GPU compute: compute ops not on the host's stream of waits."""
    compute = (ops["kind"] == "compute").to_numpy()
    if "stream" in ops:
        return compute & (ops["stream"] != HOST_STREAM).to_numpy()
    return compute


def _step_ops(sgrp: pd.DataFrame, p: PowerInputs, prices: PriceSpec) -> _StepOps:
    compute = _gpu_compute(sgrp)
    watts = np.zeros(len(sgrp))
    if compute.any():
        watts[compute] = _gpu_powers(sgrp[compute], p, prices)
    return _StepOps(
        sgrp["rank"].to_numpy(),
        compute,
        (sgrp["kind"] != "compute").to_numpy(),
        sgrp["started_at_s"].to_numpy(dtype=float),
        sgrp["finished_at_s"].to_numpy(dtype=float),
        watts,
    )


def _by_rank(ops: _StepOps) -> list[tuple[int, _StepOps]]:
    """Each rank (ascending) with its ops: one stable sort by rank, so that each rank's
    ops keep the frame's order, then a slice per rank."""
    order = np.argsort(ops.rank, kind="stable")
    cols = [x[order] for x in (ops.rank, ops.compute, ops.comm, ops.start, ops.end, ops.watts)]
    ranks = cols[0]
    cuts = np.flatnonzero(ranks[1:] != ranks[:-1]) + 1
    lo = np.concatenate(([0], cuts)).tolist()
    hi = np.concatenate((cuts, [len(ranks)])).tolist()
    return [(int(ranks[a]), _StepOps(*(c[a:b] for c in cols))) for a, b in zip(lo, hi, strict=True) if b > a]


def _constant_w(p: PowerInputs, prices: PriceSpec) -> dict[str, float]:
    pw = prices.power
    return {
        "idle_gpus": p.idle_gpus * _levels(p, prices)[0],
        "host": p.host_w,
        "storage": p.storage_w * pw.storage_idle_fraction.value,
        "network_static": p.network_w * pw.network_static_fraction.value,
        "network_dynamic": p.network_w * (1.0 - pw.network_static_fraction.value),
    }


def power_timeline(ops: pd.DataFrame, steps: pd.DataFrame, p: PowerInputs, prices: PriceSpec) -> pd.DataFrame:
    """Piecewise-constant cluster power over every simulated step.

    Args:
        ops: the run's `ops` frame.
        steps: the run's `steps` frame (step bounds and each rank's weight).
        p: rated figures of the cluster.
        prices: the table with the power curves and PUE.

    Returns:
        One row per segment: step, start_s, end_s, gpu_w, host_w, network_w, storage_w,
        it_w (their sum) and facility_w (it_w x PUE).
    """
    const = _constant_w(p, prices)
    weight = steps.groupby("rank")["weight"].first()
    parts = []
    for step, sgrp in ops.groupby("step", sort=True):
        bounds_row = steps[steps["step"] == step].iloc[0]
        t0, t1 = float(bounds_row["started_at_s"]), float(bounds_row["finished_at_s"])
        edges = np.concatenate([[t0, t1], sgrp["started_at_s"].to_numpy(), sgrp["finished_at_s"].to_numpy()])
        bounds = np.unique(np.clip(edges, t0, t1))
        mids = (bounds[:-1] + bounds[1:]) / 2
        gpu_w = np.full(len(mids), const["idle_gpus"])
        comm_share = np.zeros(len(mids))
        arrays = _step_ops(sgrp, p, prices)
        levels = _levels(p, prices)
        for rank, mine in _by_rank(arrays):
            w = float(weight.get(rank, 1))
            watts, active = _rank_power(mine, mids, levels)
            gpu_w += w * watts
            comm_share += w * active / max(p.job_gpus, 1)
        df = pd.DataFrame({"step": int(step), "start_s": bounds[:-1], "end_s": bounds[1:], "gpu_w": gpu_w})
        df["host_w"] = const["host"]
        df["network_w"] = const["network_static"] + const["network_dynamic"] * np.minimum(comm_share, 1.0)
        df["storage_w"] = const["storage"]
        parts.append(df)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["it_w"] = out[[f"{c}_w" for c in COMPONENTS]].sum(axis=1)
        out["facility_w"] = out["it_w"] * prices.facility.pue.value
    return out


def integrate(timeline: pd.DataFrame, column: str = "facility_w") -> float:
    """Energy of a power timeline, joules: the sum of power x segment length."""
    return float((timeline[column] * (timeline["end_s"] - timeline["start_s"])).sum())


def step_energy(ops: pd.DataFrame, steps: pd.DataFrame, p: PowerInputs, prices: PriceSpec) -> pd.DataFrame:
    """Energy of every step from the breakdown (independent of `power_timeline`).

    Per simulated rank: its compute ops' power x duration, plus exposed communication x
    the communicating draw, plus idle x the idle draw, times the rank's weight; the other
    components from their constant draw and the ranks' communication time.

    Returns:
        One row per step: step, step_time_s, gpu_j, host_j, network_j, storage_j, it_j,
        facility_j.
    """
    const = _constant_w(p, prices)
    idle_w, comm_w = _levels(p, prices)
    comp = ops[_gpu_compute(ops)]
    op_j = (_gpu_powers(comp, p, prices) * comp["duration_s"].to_numpy()) if len(comp) else np.zeros(0)
    op_energy = pd.Series(op_j, index=comp.index).groupby([comp["step"], comp["rank"]]).sum()
    by_step_rank = op_energy.to_dict()
    rows = []
    for step, grp in steps.groupby("step", sort=True):
        t = float(grp["step_time_s"].iloc[0])
        w = grp["weight"].to_numpy(dtype=float)
        ranks_j = np.array([by_step_rank.get((step, r), 0.0) for r in grp["rank"].tolist()])
        gpu_j = float(
            (
                w * (ranks_j + grp["exposed_comm_s"].to_numpy() * comm_w + grp["idle_s"].to_numpy() * idle_w)
            ).sum()
        )
        gpu_j += const["idle_gpus"] * t
        comm_gpu_s = float((w * grp["comm_s"].to_numpy()).sum())
        network_j = const["network_static"] * t + const["network_dynamic"] * comm_gpu_s / max(p.job_gpus, 1)
        row = {
            "step": int(step),
            "step_time_s": t,
            "gpu_j": gpu_j,
            "host_j": const["host"] * t,
            "network_j": network_j,
            "storage_j": const["storage"] * t,
        }
        row["it_j"] = row["gpu_j"] + row["host_j"] + row["network_j"] + row["storage_j"]
        row["facility_j"] = row["it_j"] * prices.facility.pue.value
        rows.append(row)
    return pd.DataFrame.from_records(rows)
