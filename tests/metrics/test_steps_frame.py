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
