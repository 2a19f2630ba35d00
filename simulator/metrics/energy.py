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

from simulator.network.prices import Curve, PriceSpec
from simulator.workload.program import HOST_STREAM

#: column of each component in `power_timeline` and `step_energy` (watts / joules)
COMPONENTS = ("gpu", "host", "network", "storage")

#: the columns of `power_timeline`, in order
TIMELINE_COLUMNS = (
    "step",
    "start_s",
    "end_s",
    *(f"{c}_w" for c in COMPONENTS),
    "it_w",
    "facility_w",
)


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
    frac = curve_values(prices.power.gpu_compute_curve, np.clip(u, 0.0, 1.0))
    return p.tdp_w * np.minimum(frac, p.power_cap_fraction)


def curve_values(curve: Curve, x: np.ndarray) -> np.ndarray:
    """`[curve(v) for v in x]` as an array, computed for all values at once with the same
    operations (IEEE: the same bits): the first point's y at or before its x, the last's
    beyond it (and for NaN), else y0 + (y1 - y0) x (x - x0) / (x1 - x0) on the first piece
    whose end is at or after x."""
    px = np.array([pt[0] for pt in curve.points], dtype=float)
    py = np.array([pt[1] for pt in curve.points], dtype=float)
    piece = np.minimum(np.searchsorted(px[1:], x, side="left"), len(px) - 2)
    x0, x1, y0, y1 = px[piece], px[piece + 1], py[piece], py[piece + 1]
    with np.errstate(invalid="ignore"):
        y = y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    y = np.where(x <= px[-1], y, py[-1])  # beyond the last point, or NaN
    return np.where(x <= px[0], py[0], y)


def _levels(p: PowerInputs, prices: PriceSpec) -> tuple[float, float]:
    """(idle, communicating) draw of one GPU, watts."""
    pw = prices.power
    cap = p.power_cap_fraction
    return p.tdp_w * min(pw.gpu_idle_fraction.value, cap), p.tdp_w * min(pw.gpu_comm_fraction.value, cap)


#: (rank, segment) cells evaluated at once by `_ranks_power` (bounds its memory).
_CELLS_PER_BLOCK = 1 << 21

#: Segments of a step up to which all ranks are evaluated at once (`_ranks_power`); past
#: it, rank by rank (`_ranks_power_by_rank`), whose cost per rank is then mostly the
#: segments' own. Both give the same bits.
_SEGMENTS_AT_ONCE = 2048


class _Counts:
    """How many of each rank's event times are <= each midpoint, block after block of
    increasing midpoints: the events are sorted by time once, those before a block are
    counted once into a running per-rank total, and only those inside it are placed
    (O(events + ranks x midpoints) over all blocks)."""

    def __init__(self, rank: np.ndarray, times: np.ndarray, n_ranks: int) -> None:
        order = np.argsort(times, kind="stable")
        self.rank, self.times, self.n_ranks = rank[order], times[order], n_ranks
        self.before = np.zeros(n_ranks, dtype=np.int64)  # per rank, events before the block
        self.done = 0  # events counted into `before`

    def at(self, mids: np.ndarray) -> np.ndarray:
        """The (n_ranks, len(mids)) counts at `mids` (after every earlier block's)."""
        lo = int(np.searchsorted(self.times, mids[0], side="left"))
        hi = int(np.searchsorted(self.times, mids[-1], side="right"))
        self.before += np.bincount(self.rank[self.done : lo], minlength=self.n_ranks)
        self.done = lo
        first = np.searchsorted(mids, self.times[lo:hi], side="left")  # first midpoint at or after
        width = len(mids) + 1
        hits = np.bincount(self.rank[lo:hi] * width + first, minlength=self.n_ranks * width)
        return self.before[:, None] + np.cumsum(hits.reshape(self.n_ranks, width), axis=1)[:, :-1]


def _ranks_power(
    ops: _StepOps, mids: np.ndarray, levels: tuple[float, float], weights: pd.Series, base: tuple[float, int]
) -> tuple[np.ndarray, np.ndarray]:
    """GPU power of the cluster and share of the job's GPUs communicating at each midpoint.

    A rank draws its compute op's power while the last compute op started (in start order,
    ties in the frame's order) has not ended; else the communicating draw while a
    communication op of positive length runs; else the idle draw. Ranks are added in
    ascending order, each one's weight x draw onto the running sum (a cumulative sum over
    ranks: the same additions in the same order as a loop over ranks).

    Args:
        ops: the step's ops.
        mids: midpoints of the step's segments, s.
        levels: (idle, communicating) draw of one GPU, W.
        weights: GPUs each rank stands for, by rank (1 when absent).
        base: (draw of the GPUs outside the job, W; GPUs of the job).
    """
    idle_w, comm_w = levels
    ranks, rank = np.unique(ops.rank, return_inverse=True)
    rank = rank.reshape(-1)
    n_ranks = len(ranks)
    w = weights.reindex(ranks, fill_value=1).to_numpy(dtype=float)[:, None]
    comm = ops.comm & (ops.end > ops.start)
    comp = np.flatnonzero(ops.compute & (ops.end > ops.start))  # an op of no time draws nothing
    comp = comp[np.lexsort((ops.start[comp], rank[comp]))]  # stable: ties keep the frame's order
    c_rank, c_start, c_end, c_watts = rank[comp], ops.start[comp], ops.end[comp], ops.watts[comp]
    c_first = np.searchsorted(c_rank, np.arange(n_ranks), side="left")[:, None]
    gpu_w = np.full(len(mids), base[0])
    share = np.zeros(len(mids))
    step = max(1, _CELLS_PER_BLOCK // max(n_ranks, 1))
    comm_starts = _Counts(rank[comm], ops.start[comm], n_ranks)
    comm_ends = _Counts(rank[comm], ops.end[comm], n_ranks)
    comp_starts = _Counts(c_rank, c_start, n_ranks)
    for lo in range(0, len(mids), step):
        m = mids[lo : lo + step]
        active = (comm_starts.at(m) - comm_ends.at(m)) > 0
        watts = np.where(active, comm_w, idle_w)
        if len(comp):
            started = comp_starts.at(m)
            j = np.where(started > 0, c_first + started - 1, 0)
            watts = np.where((started > 0) & (m < c_end[j]), c_watts[j], watts)
        gpu_w[lo : lo + step] = _add_rows(gpu_w[lo : lo + step], w * watts)
        share[lo : lo + step] = _add_rows(share[lo : lo + step], w * active / max(base[1], 1))
    return gpu_w, share


def _ranks_power_by_rank(
    ops: _StepOps, mids: np.ndarray, levels: tuple[float, float], weights: pd.Series, base: tuple[float, int]
) -> tuple[np.ndarray, np.ndarray]:
    """`_ranks_power` one rank after another (ascending): the ops sorted by rank once
    (stable, so each rank's ops keep the frame's order), each rank's draw on a slice,
    evaluated once per piece between its own event times and repeated over the piece's
    midpoints (the same values at every midpoint, added in the same order). The first
    midpoint at or after each op's start and end is searched once for all ranks."""
    gpu_w = np.full(len(mids), base[0])
    share = np.zeros(len(mids))
    order = np.argsort(ops.rank, kind="stable")
    cols = [x[order] for x in (ops.rank, ops.compute, ops.comm, ops.start, ops.end, ops.watts)]
    live = (cols[1] | cols[2]) & (cols[4] > cols[3])  # the ops a rank's draw follows
    firsts = np.zeros((2, len(order)), dtype=np.intp)  # 0 (always a piece's start) for the others
    firsts[0, live] = np.searchsorted(mids, cols[3][live], side="left")
    firsts[1, live] = np.searchsorted(mids, cols[4][live], side="left")
    cuts = np.flatnonzero(cols[0][1:] != cols[0][:-1]) + 1
    for a, b in zip(
        np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [len(order)])).tolist(), strict=True
    ):
        if b > a:
            w = float(weights.get(int(cols[0][a]), 1))
            mine = _StepOps(*(c[a:b] for c in cols))
            first, watts, active = _rank_pieces(mine, mids, levels, firsts[:, a:b])
            width = np.diff(np.append(first, len(mids)))
            gpu_w += np.repeat(w * watts, width)
            share += np.repeat(w * active / max(base[1], 1), width)
    return gpu_w, share


def _rank_pieces(
    ops: _StepOps, mids: np.ndarray, levels: tuple[float, float], firsts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One rank's GPU power and communicating flag over the increasing segment midpoints
    (`ops`: that rank's ops only, in the frame's order), as pieces: the first midpoint of
    each piece, and the draw and flag at every midpoint of it.

    Both change only at a midpoint that is the first at or after one of the rank's own op
    starts or ends (how many ops started or ended by a midpoint, and whether it is before
    an op's end, change there only; `firsts`: those midpoints' indices, of the starts and of
    the ends, 0 for an op of no time or neither compute nor communication), so they are
    evaluated at those midpoints alone (the indices marked in a mask: sorted, each once).
    """
    idle_w, comm_w = levels
    comp = ops.compute & (ops.end > ops.start)  # an op of no time draws nothing
    comm = ops.comm & (ops.end > ops.start)
    order = np.argsort(ops.start[comp], kind="stable")
    cs, ce, op_w = ops.start[comp][order], ops.end[comp][order], ops.watts[comp][order]
    ms, me = np.sort(ops.start[comm]), np.sort(ops.end[comm])
    starts_piece = np.zeros(len(mids) + 1, dtype=bool)
    starts_piece[0] = True
    starts_piece[firsts.ravel()] = True
    first = np.flatnonzero(starts_piece[: len(mids)])
    at = mids[first]
    active = (np.searchsorted(ms, at, side="right") - np.searchsorted(me, at, side="right")) > 0
    watts = np.where(active, comm_w, idle_w)
    if len(cs):
        i = np.searchsorted(cs, at, side="right") - 1
        j = np.maximum(i, 0)
        watts = np.where((i >= 0) & (at < ce[j]), op_w[j], watts)
    return first, watts, active


def _add_rows(acc: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`acc + rows[0] + rows[1] + ...`, elementwise, the rows added one after another in order
    (a loop over the rows, or a cumulative sum down the columns when they are fewer)."""
    if len(rows) <= rows.shape[1]:
        out = acc.copy()
        for row in rows:
            out += row
        return out
    return np.cumsum(np.vstack([acc[None, :], rows]), axis=0)[-1]


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


#: The columns of the `ops` frame the energy model reads.
_POWER_COLUMNS = ("step", "rank", "kind", "stream", "started_at_s", "finished_at_s", "duration_s", "flops")


def _power_columns(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops with only the columns the energy model reads, so that taking a step's or the
    compute ops' rows does not copy the others (op ids, text columns: 0.3 GiB at 1.7 M ops)."""
    return ops[[c for c in _POWER_COLUMNS if c in ops.columns]]


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
        it_w (their sum) and facility_w (it_w x PUE). A step of zero length (all its ops
        take no time) has no segment, so it draws no energy; the columns are there even
        when no step has a segment.
    """
    const = _constant_w(p, prices)
    weight = steps.groupby("rank")["weight"].first()
    parts = []
    for step, sgrp in _power_columns(ops).groupby("step", sort=True):
        bounds_row = steps[steps["step"] == step].iloc[0]
        t0, t1 = float(bounds_row["started_at_s"]), float(bounds_row["finished_at_s"])
        edges = np.concatenate([[t0, t1], sgrp["started_at_s"].to_numpy(), sgrp["finished_at_s"].to_numpy()])
        bounds = np.unique(np.clip(edges, t0, t1))
        mids = (bounds[:-1] + bounds[1:]) / 2
        base = (const["idle_gpus"], p.job_gpus)
        draw = _ranks_power if len(mids) <= _SEGMENTS_AT_ONCE else _ranks_power_by_rank
        gpu_w, comm_share = draw(_step_ops(sgrp, p, prices), mids, _levels(p, prices), weight, base)
        df = pd.DataFrame({"step": int(step), "start_s": bounds[:-1], "end_s": bounds[1:], "gpu_w": gpu_w})
        df["host_w"] = const["host"]
        df["network_w"] = const["network_static"] + const["network_dynamic"] * np.minimum(comm_share, 1.0)
        df["storage_w"] = const["storage"]
        parts.append(df)
    if not parts:  # no step (an empty `ops` frame)
        return pd.DataFrame({c: np.zeros(0, dtype=int if c == "step" else float) for c in TIMELINE_COLUMNS})
    out = pd.concat(parts, ignore_index=True)
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
    comp = _power_columns(ops)[_gpu_compute(ops)]
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
