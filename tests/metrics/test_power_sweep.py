"""`power_timeline` evaluates every (rank, segment) cell at once; it must equal the loop over
ranks it replaced, bit for bit (summary.json's peak power and timeline energy keep their
digits).

The reference below is that loop: per rank (ascending), its draw at each segment midpoint
(its last-started compute op of positive length while it runs, else communicating while a communication op of
positive length runs, else idle), added as weight x draw onto the running sums.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.metrics import energy as en
from simulator.network.prices import Curve, load_prices

PRICES = load_prices()
INPUTS = en.PowerInputs(
    tdp_w=700.0, peak_flops_per_s=1e15, job_gpus=40, idle_gpus=3, host_w=800.0, network_w=100.0, storage_w=5.0
)


def _rank_draw(ops: pd.DataFrame, mids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idle_w, comm_w = en._levels(INPUTS, PRICES)
    s, e = ops["started_at_s"].to_numpy(dtype=float), ops["finished_at_s"].to_numpy(dtype=float)
    comp = ((ops["kind"] == "compute") & (ops["stream"] != "host")).to_numpy() & (e > s)
    comm = (ops["kind"] != "compute").to_numpy() & (e > s)
    watts_all = np.zeros(len(ops))
    if comp.any():
        watts_all[comp] = en._gpu_powers(ops[comp], INPUTS, PRICES)
    order = np.argsort(s[comp], kind="stable")
    cs, ce, op_w = s[comp][order], e[comp][order], watts_all[comp][order]
    ms, me = np.sort(s[comm]), np.sort(e[comm])
    active = (np.searchsorted(ms, mids, side="right") - np.searchsorted(me, mids, side="right")) > 0
    watts = np.where(active, comm_w, idle_w)
    if len(cs):
        i = np.searchsorted(cs, mids, side="right") - 1
        j = np.maximum(i, 0)
        watts = np.where((i >= 0) & (mids < ce[j]), op_w[j], watts)
    return watts, active


def _reference(ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    const = en._constant_w(INPUTS, PRICES)
    weight = steps.groupby("rank")["weight"].first()
    parts = []
    for step, sgrp in ops.groupby("step", sort=True):
        row = steps[steps["step"] == step].iloc[0]
        t0, t1 = float(row["started_at_s"]), float(row["finished_at_s"])
        edges = np.concatenate([[t0, t1], sgrp["started_at_s"].to_numpy(), sgrp["finished_at_s"].to_numpy()])
        bounds = np.unique(np.clip(edges, t0, t1))
        mids = (bounds[:-1] + bounds[1:]) / 2
        gpu_w = np.full(len(mids), const["idle_gpus"])
        share = np.zeros(len(mids))
        for rank, mine in sgrp.groupby("rank", sort=True):
            w = float(weight.get(rank, 1))
            watts, active = _rank_draw(mine, mids)
            gpu_w += w * watts
            share += w * active / max(INPUTS.job_gpus, 1)
        parts.append((gpu_w, share))
    return parts


def _random_ops(seed: int, n_ranks: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    n = 30 * n_ranks
    start = rng.uniform(0.0, 2.0, n)
    start[: n // 2] = start[: n // 2].round(1)  # ties, and non-round times
    start[rng.random(n) < 0.1] = 0.0
    ops = pd.DataFrame(
        {
            "step": rng.integers(0, 2, n),
            "rank": rng.integers(0, n_ranks, n) * 3,
            "kind": rng.choice(["compute", "collective", "p2p"], n),
            "stream": rng.choice(["compute", "comm", "host"], n, p=[0.6, 0.3, 0.1]),
            "tag": "x",
            "started_at_s": start,
            "finished_at_s": start + rng.exponential(0.2, n) * (rng.random(n) > 0.1),
            "flops": rng.uniform(0.0, 2e14, n),
        }
    )
    ops["duration_s"] = ops["finished_at_s"] - ops["started_at_s"]
    ranks = sorted(set(ops["rank"]))
    steps = pd.DataFrame(
        [
            {
                "step": s,
                "rank": r,
                "started_at_s": 0.0,
                "finished_at_s": 2.5 + s,
                "weight": int(rng.integers(1, 9)),
            }
            for s in (0, 1)
            for r in ranks
        ]
    )
    return ops, steps


@pytest.mark.parametrize(("seed", "n_ranks"), [(0, 1), (1, 7), (2, 40)])
def test_power_timeline_is_the_loop_over_ranks_bit_for_bit(seed, n_ranks, monkeypatch) -> None:
    ops, steps = _random_ops(seed, n_ranks)
    want = _reference(ops, steps)
    # all ranks at once, in one block or several (small blocks), and rank by rank
    for cells, at_once in ((1 << 21, 10**9), (64, 10**9), (1 << 21, 0)):
        monkeypatch.setattr(en, "_CELLS_PER_BLOCK", cells)
        monkeypatch.setattr(en, "_SEGMENTS_AT_ONCE", at_once)
        tl = en.power_timeline(ops, steps, INPUTS, PRICES)
        const = en._constant_w(INPUTS, PRICES)
        for step, (gpu_w, share) in enumerate(want):
            got = tl[tl["step"] == step]
            np.testing.assert_array_equal(got["gpu_w"].to_numpy(), gpu_w)
            net = const["network_static"] + const["network_dynamic"] * np.minimum(share, 1.0)
            np.testing.assert_array_equal(got["network_w"].to_numpy(), net)


@st.composite
def _curves(draw: st.DrawFn) -> Curve:
    xs = sorted(set(draw(st.lists(st.floats(0.0, 2.0, allow_nan=False), min_size=2, max_size=7))))
    if len(xs) < 2:
        xs = [xs[0], xs[0] + 1.0]
    ys = sorted(draw(st.lists(st.floats(0.0, 5.0, allow_nan=False), min_size=len(xs), max_size=len(xs))))
    return Curve(points=list(zip(xs, ys, strict=True)), source="test", date="2024-01")


@settings(max_examples=80, deadline=None)
@given(
    curve=_curves(),
    x=st.lists(st.one_of(st.floats(-1.0, 3.0), st.sampled_from([0.0, 0.3, 1.0, float("nan")])), max_size=40),
)
def test_curve_values_are_the_curve_at_each_value(curve: Curve, x: list[float]) -> None:
    """The curve evaluated for all values at once gives the bits of one call per value (at
    the points themselves, between and beyond them, and for NaN)."""
    xs = np.array(x + [p[0] for p in curve.points], dtype=float)
    want = np.array([curve(float(v)) for v in xs], dtype=float)
    np.testing.assert_array_equal(en.curve_values(curve, xs), want)
    for prices_curve in (PRICES.power.gpu_compute_curve, PRICES.power.power_cap_curve):
        grid = np.linspace(-0.1, 1.1, 1201)
        want = np.array([prices_curve(float(v)) for v in grid], dtype=float)
        np.testing.assert_array_equal(en.curve_values(prices_curve, grid), want)
