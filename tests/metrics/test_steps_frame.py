"""`steps_frame` groups by (step, rank) on sorted arrays; it must equal the per-group reading.

The reference below filters the ops frame per (step, rank) with pandas and applies the
documented breakdown (compute = union of compute intervals; exposed = time some
communication runs while compute is idle, shared equally among the tags covering it;
idle = the rest), so any change in grouping or order shows as a difference.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.metrics import frames as fr


class _Span:
    def __init__(self, step: int, t0: float, t1: float) -> None:
        self.step, self.started_at_s, self.finished_at_s = step, t0, t1


def _ops(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    start = rng.uniform(0.0, 10.0, n).round(1)
    rows = {
        "step": rng.integers(0, 2, n),
        "rank": rng.integers(0, 7, n),
        "op_id": [f"op{i}" for i in range(n)],
        "kind": rng.choice(["compute", "collective", "send"], n),
        "tag": rng.choice(["", "tp", "dp", "pp", "comm"], n),
        "started_at_s": start,
        "finished_at_s": start + rng.choice([0.0, 0.5, 1.3], n),
    }
    # shuffled: steps_frame must not rely on the frame's order
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def _reference(ops: pd.DataFrame, t0: float, t1: float) -> dict[str, float]:
    comp = ops[ops["kind"] == "compute"]
    comm = ops[(ops["kind"] != "compute") & (ops["finished_at_s"] > ops["started_at_s"])]
    # 1 ms cells: every endpoint (a multiple of 0.1 s) is a cell edge
    grid = np.linspace(t0, t1, round((t1 - t0) * 1000) + 1)
    mid = (grid[:-1] + grid[1:]) / 2

    def cover(df: pd.DataFrame) -> np.ndarray:
        c = np.zeros(len(mid))
        for s, e in zip(df["started_at_s"], df["finished_at_s"], strict=True):
            c += (mid > s) & (mid < e)
        return c

    width = grid[1] - grid[0]
    in_comp = cover(comp) > 0
    out = {"compute_s": in_comp.sum() * width, "comm_s": (cover(comm) > 0).sum() * width}
    per_tag = {t: cover(g) for t, g in comm.groupby("tag")}
    n_cover = sum(per_tag.values()) if per_tag else np.zeros(len(mid))
    exposed = ~in_comp & (n_cover > 0)
    out["exposed_comm_s"] = exposed.sum() * width
    for t, c in per_tag.items():
        key = f"exposed_{t if t and t != 'comm' else 'other'}_s"
        out[key] = out.get(key, 0.0) + float((c * np.where(exposed, width / np.maximum(n_cover, 1), 0)).sum())
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_steps_frame_equals_per_group_reading(seed):
    ops = _ops(seed)
    spans = [_Span(0, 0.0, 12.0), _Span(1, 0.0, 12.0)]
    steps = fr.steps_frame(ops, spans, {3: 5})
    groups = sorted(ops.groupby(["step", "rank"]).groups)
    assert list(zip(steps["step"], steps["rank"], strict=True)) == groups
    assert steps["weight"].tolist() == [5 if r == 3 else 1 for _, r in groups]
    for row in steps.itertuples():
        grp = ops[(ops["step"] == row.step) & (ops["rank"] == row.rank)]
        want = _reference(grp, 0.0, 12.0)
        for key, value in want.items():
            # the grid reading is exact up to the rounding of 12,000 cells of 1 ms summed
            assert getattr(row, key) == pytest.approx(value, abs=1e-9), key
        assert row.compute_s + row.exposed_comm_s + row.idle_s == pytest.approx(12.0, abs=1e-9)


# The per-group breakdown `steps_frame` computed before it was vectorised (one NumPy pass per
# (step, rank) group). The vectorised frame must equal it bit for bit: same values, dtypes
# and columns, so that every catalog run's steps.parquet keeps its bytes.
def _union_length_one_group(starts: np.ndarray, ends: np.ndarray) -> float:
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > run_end[:-1]
    block_id = np.cumsum(new_block) - 1
    block_end = np.zeros(block_id[-1] + 1)
    np.maximum.at(block_end, block_id, e)
    return float((block_end - s[new_block]).sum())


def _one_group(cs, ce, ms, me, tags, t0, t1) -> dict[str, float]:
    compute = _union_length_one_group(cs, ce)
    out = {"compute_s": compute, "comm_s": 0.0, "exposed_comm_s": 0.0}
    if len(ms):
        out["comm_s"] = _union_length_one_group(ms, me)
        bounds = np.unique(np.concatenate([cs, ce, ms, me]))
        widths = np.diff(bounds)
        in_comp = fr.interval_coverage(bounds, cs, ce) > 0
        per_tag = {t: fr.interval_coverage(bounds, ms[tags == t], me[tags == t]) for t in np.unique(tags)}
        n_cover = np.sum(list(per_tag.values()), axis=0)
        exposed = (~in_comp) & (n_cover > 0)
        out["exposed_comm_s"] = float(widths[exposed].sum())
        share = np.where(exposed, widths / np.maximum(n_cover, 1), 0.0)
        for t, cover in per_tag.items():
            key = f"exposed_{t if t and t != 'comm' else 'other'}_s"
            out[key] = out.get(key, 0.0) + float((cover * share).sum())
    out["idle_s"] = max(0.0, (t1 - t0) - compute - out["exposed_comm_s"])
    return out


def _per_group_frame(ops: pd.DataFrame, spans: list[_Span], weight: dict[int, int]) -> pd.DataFrame:
    bounds = {s.step: (s.started_at_s, s.finished_at_s) for s in spans}
    records = []
    for (step, rank), grp in ops.groupby(["step", "rank"], sort=True):
        t0, t1 = bounds[step]
        s = grp["started_at_s"].to_numpy(dtype=float)
        e = grp["finished_at_s"].to_numpy(dtype=float)
        kind = grp["kind"].to_numpy(dtype=object)
        host = grp["stream"].to_numpy(dtype=object) == "host"
        c = (kind == "compute") & ~host
        m = (kind != "compute") & (e > s)
        tags = grp["tag"].to_numpy(dtype=object)
        row = {
            "step": int(step),
            "rank": int(rank),
            "started_at_s": t0,
            "finished_at_s": t1,
            "step_time_s": t1 - t0,
        }
        row.update(_one_group(s[c], e[c], s[m], e[m], tags[m], t0, t1))
        row["weight"] = weight.get(int(rank), 1)
        records.append(row)
    df = pd.DataFrame.from_records(records)
    tag_cols = sorted(c for c in df.columns if c.startswith("exposed_") and c != "exposed_comm_s")
    df[tag_cols] = df[tag_cols].fillna(0.0)
    base = ["step", "rank", "started_at_s", "finished_at_s", "step_time_s", "compute_s", "comm_s"]
    return df[[*base, "exposed_comm_s", "idle_s", "weight", *tag_cols]]


def _irregular_ops(seed: int) -> pd.DataFrame:
    """Ops with non-round times, ties, zero-length ops, host waits and groups of 1 to ~600 ops
    (NumPy sums 8 or more terms pairwise, so long groups test the order of the sums)."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 2, 3, 7, 8, 9, 40, 129, 600], 24)
    n = int(sizes.sum())
    start = rng.uniform(0.0, 3.0, n) * rng.choice([1.0, 1e-3, 1e3], n)
    start[rng.random(n) < 0.2] = 0.5  # ties
    dur = rng.exponential(0.3, n) * (rng.random(n) > 0.1)
    return (
        pd.DataFrame(
            {
                "step": np.repeat(np.arange(len(sizes)) % 3, sizes),
                "rank": np.repeat(rng.integers(0, 16_384, len(sizes)), sizes),
                "kind": rng.choice(["compute", "collective", "p2p"], n, p=[0.5, 0.3, 0.2]),
                "stream": rng.choice(["compute", "comm", "host"], n, p=[0.6, 0.35, 0.05]),
                "tag": rng.choice(["", "tp", "dp", "pp", "comm"], n),
                "started_at_s": start,
                "finished_at_s": start + dur,
            }
        )
        .sample(frac=1.0, random_state=seed)
        .reset_index(drop=True)
    )


@pytest.mark.parametrize("seed", range(6))
def test_steps_frame_is_the_per_group_breakdown_bit_for_bit(seed):
    ops = _irregular_ops(seed)
    spans = [_Span(0, 0, 3100.5), _Span(1, 0.25, 3001.0), _Span(2, 0, 2999.0)]
    got = fr.steps_frame(ops, spans, {int(ops["rank"].iloc[0]): 3})
    pd.testing.assert_frame_equal(
        got, _per_group_frame(ops, spans, {int(ops["rank"].iloc[0]): 3}), check_exact=True
    )


def test_steps_frame_keeps_an_int_clock_start_as_int():
    # the clock starts at the int 0: a frame of records keeps `started_at_s` int64 then
    ops = _irregular_ops(9)
    ops = ops[ops["step"] == 0]
    spans = [_Span(0, 0, 3100.5)]
    got = fr.steps_frame(ops, spans, {})
    assert got["started_at_s"].dtype == np.int64
    pd.testing.assert_frame_equal(got, _per_group_frame(ops, spans, {}), check_exact=True)
