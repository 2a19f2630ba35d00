"""Step activity lanes: what each rank, or each group of ranks, does during one step.

The view a dashboard shows when a step has too many ops to draw one bar per op (or too many
ranks for one lane each). Every instant of a rank's step is in exactly one state, with the
same rules as the `steps` frame (`simulator.metrics.frames`): *compute* (by compute tag:
fwd, bwd, recompute, optimizer) when the compute stream runs; else *exposed communication*
(by tag: tp, dp, pp, ...) when some communication runs, a time shared equally among the tags
running together; else *idle* (waiting for peers, pipeline bubbles). The states' drawn
lengths therefore add up to the step time, and the compute and exposed-communication
lengths are the frame's `compute_s` and `exposed_<tag>_s` of the drawn step.

Simplified: time is cut into `bins` equal bins; inside a bin the time spent in each state is
drawn as one piece, in a fixed order (compute, exposed communication, idle), and adjacent
pieces of one state are merged. Lengths are exact; a piece's position is known to one bin
(the page says the bin width). Past `max_rank_lanes` ranks, a lane is a group of ranks
(`simulator.viz.rank_groups`: pipeline stage or role) drawn as the mean of its ranks; the
hover gives the spread of the compute share across the group's ranks in that stretch, and a
dropdown shows single ranks of each group instead (first, middle, last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from simulator.metrics.frames import interval_coverage
from simulator.viz.rank_groups import rank_groups
from simulator.viz.style import TIME_MS_DECIMALS, color_of, with_aggregation_note

#: Time bins a lane is cut into.
DEFAULT_BINS = 400

#: Ranks drawn one lane each at most; past it, lanes are groups of ranks.
MAX_RANK_LANES = 32

#: Compute tags first in the drawing order; other compute tags follow in name order.
_COMPUTE_ORDER = ("fwd", "bwd", "recompute", "compute", "optimizer")

IDLE = "idle"


def state_label(state: str) -> str:
    """Legend name of a state: `compute: fwd`, `exposed tp`, `idle (waits, bubbles)`."""
    kind, _, tag = state.partition(":")
    if kind == "compute":
        return f"compute: {tag}"
    if kind == "exposed":
        return f"exposed {tag} comm"
    return "idle (waits, bubbles)"


def _tag_cover(
    bounds: np.ndarray, tags: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> dict[str, np.ndarray]:
    """How many ops of each tag (text) cover each segment between `bounds`, tags in sorted
    order. The distinct tags are found by hashing and each op numbered by its tag's place,
    so the ops of a tag are picked by comparing integers (sorting or comparing thousands of
    texts per rank otherwise dominates)."""
    names = sorted(set(tags.tolist()))
    place = {t: i for i, t in enumerate(names)}
    codes = np.fromiter(map(place.__getitem__, tags.tolist()), dtype=np.int64, count=len(tags))
    picks = (codes == i for i in range(len(names)))
    return {str(t): interval_coverage(bounds, starts[m], ends[m]) for t, m in zip(names, picks, strict=True)}


def _op_arrays(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(is compute, tag with "" for none, started_at_s, finished_at_s) of every op, in row order."""
    return (
        (ops["kind"] == "compute").to_numpy(dtype=bool),
        ops["tag"].fillna("").astype(str).to_numpy(dtype=object),
        ops["started_at_s"].to_numpy(dtype=float),
        ops["finished_at_s"].to_numpy(dtype=float),
    )


def rank_state_bins(ops: pd.DataFrame, t0: float, t1: float, bins: int) -> dict[str, np.ndarray]:
    """Seconds each state takes in each of `bins` equal bins of [t0, t1], for one rank's ops.

    States are `compute:<tag>`, `exposed:<tag>` and `idle` (see the module docstring); for
    every bin the states' times add up to the bin width.
    """
    return _state_bins(*_op_arrays(ops), t0, t1, bins)


def _state_bins(
    is_comp: np.ndarray,
    tags: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    t0: float,
    t1: float,
    bins: int,
) -> dict[str, np.ndarray]:
    """`rank_state_bins` on one rank's op arrays (see `_op_arrays`)."""
    keep = ends > starts
    is_comp, tags, starts, ends = is_comp[keep], tags[keep], starts[keep], ends[keep]
    bounds = np.unique(np.clip(np.concatenate([[t0, t1], starts, ends]), t0, t1))
    widths = np.diff(bounds)
    comm = ~is_comp
    c_tags, m_tags = tags[is_comp], tags[comm]
    c_cover = _tag_cover(bounds, np.where(c_tags == "", "compute", c_tags), starts[is_comp], ends[is_comp])
    m_cover = _tag_cover(bounds, np.where(m_tags == "", "other", m_tags), starts[comm], ends[comm])
    n_c = np.sum(list(c_cover.values()), axis=0) if c_cover else np.zeros(len(widths))
    n_m = np.sum(list(m_cover.values()), axis=0) if m_cover else np.zeros(len(widths))
    per_state: dict[str, np.ndarray] = {}
    for tag, cover in c_cover.items():
        per_state[f"compute:{tag}"] = widths * cover / np.maximum(n_c, 1)
    exposed = (n_c == 0) & (n_m > 0)
    for tag, cover in m_cover.items():
        per_state[f"exposed:{tag}"] = np.where(exposed, widths * cover / np.maximum(n_m, 1), 0.0)
    per_state[IDLE] = np.where((n_c == 0) & (n_m == 0), widths, 0.0)
    edges = np.linspace(t0, t1, bins + 1)
    out = {}
    for state, w in per_state.items():
        cum = np.concatenate([[0.0], np.cumsum(w)])
        out[state] = np.diff(np.interp(edges, bounds, cum))
    return out


def _per_rank_state_bins(
    ops: pd.DataFrame, t0: float, t1: float, bins: int
) -> dict[int, dict[str, np.ndarray]]:
    """`rank_state_bins` of every rank (in rank order): the ops sorted by rank once (stable,
    so each rank's ops keep their row order) and each rank a slice of plain arrays."""
    ranks = ops["rank"].to_numpy()
    order = np.argsort(ranks, kind="stable")
    is_comp, tags, starts, ends = (x[order] for x in _op_arrays(ops))
    sorted_ranks = ranks[order]
    cuts = np.flatnonzero(sorted_ranks[1:] != sorted_ranks[:-1]) + 1
    lo = np.concatenate(([0], cuts)).tolist()
    hi = np.concatenate((cuts, [len(sorted_ranks)])).tolist()
    out: dict[int, dict[str, np.ndarray]] = {}
    # ranks with the same ops at the same times (mirrored ranks, every rank of one
    # collective) have the same bins: computed once and shared (never modified)
    seen: dict[tuple[bytes, bytes, bytes, tuple[str, ...]], dict[str, np.ndarray]] = {}
    for a, b in zip(lo, hi, strict=True):
        key = (is_comp[a:b].tobytes(), starts[a:b].tobytes(), ends[a:b].tobytes(), tuple(tags[a:b]))
        got = seen.get(key)
        if got is None:
            got = seen[key] = _state_bins(is_comp[a:b], tags[a:b], starts[a:b], ends[a:b], t0, t1, bins)
        out[int(sorted_ranks[a])] = got
    return out


def state_order(states: set[str]) -> list[str]:
    """Drawing (and legend) order: compute tags, exposed communication tags, idle."""
    comp = [s.partition(":")[2] for s in states if s.startswith("compute:")]
    comp_sorted = [t for t in _COMPUTE_ORDER if t in comp]
    comp_sorted += sorted(t for t in comp if t not in _COMPUTE_ORDER)
    exp = sorted(s.partition(":")[2] for s in states if s.startswith("exposed:"))
    idle = [IDLE] if IDLE in states else []
    return [f"compute:{t}" for t in comp_sorted] + [f"exposed:{t}" for t in exp] + idle


@dataclass
class Piece:
    """One drawn bar: a state over [start_s, start_s + length_s] of a lane (s since the step's start)."""

    state: str
    start_s: float
    length_s: float
    spread: tuple[float, float] = (float("nan"), float("nan"))


def lane_pieces(
    times: dict[str, np.ndarray],
    width_s: float,
    order: list[str],
    spread: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[Piece]:
    """The bars of one lane from its per-bin state times, adjacent pieces of a state merged.

    Args:
        times: seconds per state per bin.
        width_s: bin width.
        order: states in drawing order.
        spread: per bin, (min, max) over a group's ranks of the compute share, kept per piece.
    """
    n_bins = len(next(iter(times.values())))
    eps = width_s * 1e-9
    pieces: list[Piece] = []
    for b in range(n_bins):
        at = b * width_s
        lo = hi = None
        if spread is not None:
            lo, hi = float(spread[0][b]), float(spread[1][b])
        for state in order:
            t = float(times[state][b]) if state in times else 0.0
            if t <= eps:
                continue
            last = pieces[-1] if pieces else None
            if last is not None and last.state == state and abs(last.start_s + last.length_s - at) <= eps:
                last.length_s += t
                if lo is not None and hi is not None:
                    last.spread = (min(last.spread[0], lo), max(last.spread[1], hi))
            else:
                band = (lo, hi) if lo is not None and hi is not None else Piece.spread
                pieces.append(Piece(state, at, t, band))
            at += t
    return pieces


def _compute_share(times: dict[str, np.ndarray], width_s: float) -> np.ndarray:
    n_bins = len(next(iter(times.values())))
    comp = [v for k, v in times.items() if k.startswith("compute:")]
    total = np.sum(comp, axis=0) if comp else np.zeros(n_bins)
    return np.asarray(total, dtype=float) / width_s


def _lanes(
    ops: pd.DataFrame, t0: float, t1: float, bins: int, max_rank_lanes: int
) -> tuple[dict[str, list[tuple[str, dict[str, np.ndarray], tuple[np.ndarray, np.ndarray] | None]]], str]:
    """Lanes per view (`ranks`, or `groups` plus one drill-down view per group): name, state
    times per bin, compute-share spread. Returns the views and a note on what is drawn."""
    per_rank = _per_rank_state_bins(ops, t0, t1, bins) if len(ops) else {}
    groups = rank_groups(ops)
    width = (t1 - t0) / bins
    if len(per_rank) <= max_rank_lanes:
        return {"ranks": [(f"{groups[r]} r{r}", t, None) for r, t in per_rank.items()]}, ""
    views: dict[str, list[tuple[str, dict[str, np.ndarray], tuple[np.ndarray, np.ndarray] | None]]] = {
        "groups (mean of their ranks)": []
    }
    members: dict[str, list[int]] = {}  # group -> its ranks, in the index's order
    for rank, gname in zip(groups.index.tolist(), groups.tolist(), strict=True):
        members.setdefault(gname, []).append(int(rank))
    share_of: dict[int, np.ndarray] = {}  # by id of a (shared) per-rank dict
    none = np.zeros(bins)  # a state a rank never is in (read only)
    for gname, ranks in members.items():
        states = set().union(*(per_rank[r] for r in ranks))
        mean = {s: np.mean([per_rank[r].get(s, none) for r in ranks], axis=0) for s in states}
        for r in ranks:
            if id(per_rank[r]) not in share_of:
                share_of[id(per_rank[r])] = _compute_share(per_rank[r], width)
        shares = np.array([share_of[id(per_rank[r])] for r in ranks])
        label = f"{gname} ({len(ranks)} ranks)"
        views["groups (mean of their ranks)"].append((label, mean, (shares.min(axis=0), shares.max(axis=0))))
        picked = sorted({ranks[0], ranks[len(ranks) // 2], ranks[-1]})
        views[f"ranks of {gname}"] = [(f"{gname} r{r}", per_rank[r], None) for r in picked]
    note = (
        f"{len(per_rank)} simulated ranks drawn as {len(groups.unique())} group lanes (mean of their ranks; "
        "the dropdown shows single ranks)"
    )
    return views, note


def activity_figure(
    ops: pd.DataFrame, step: int | None = None, bins: int = DEFAULT_BINS, max_rank_lanes: int = MAX_RANK_LANES
) -> go.Figure:
    """Activity lanes of one step (default the last): compute, exposed communication and idle.

    Args:
        ops: the run's ops frame.
        step: step to draw.
        bins: time bins per lane (the position resolution is the step time / bins).
        max_rank_lanes: past this many simulated ranks, lanes are rank groups.
    """
    if ops.empty:
        return go.Figure(layout={"title": "Step activity (no ops)"})
    step = int(ops["step"].max()) if step is None else step
    df = ops[ops["step"] == step]
    t0, t1 = float(df["ready_at_s"].min()), float(df["finished_at_s"].max())
    views, note = _lanes(df, t0, t1, bins, max_rank_lanes)
    width = (t1 - t0) / bins
    states = state_order({s for lanes in views.values() for _, t, _ in lanes for s in t})
    traces: list[dict[str, Any]] = []
    trace_view: list[str] = []
    for view, lanes in views.items():
        pieces = {name: lane_pieces(t, width, states, spread) for name, t, spread in lanes}
        for state in states:
            rows = [(name, p) for name, ps in pieces.items() for p in ps if p.state == state]
            if not rows:
                continue
            spread = np.array([[p.spread[0] * 100, p.spread[1] * 100] for _, p in rows]).round(1)
            traces.append(
                dict(
                    type="bar",
                    name=state_label(state),
                    legendgroup=state,
                    showlegend=view == next(iter(views)),
                    visible=view == next(iter(views)),
                    y=[name for name, _ in rows],
                    x=np.round([p.length_s * 1e3 for _, p in rows], TIME_MS_DECIMALS),
                    base=np.round([p.start_s * 1e3 for _, p in rows], TIME_MS_DECIMALS),
                    orientation="h",
                    marker={"color": color_of(state.partition(":")[2] or "bubble"), "line": {"width": 0}},
                    customdata=spread if note else None,
                    hovertemplate="start %{base:.3f} ms<br>length %{x:.3f} ms"
                    + ("<br>compute share across ranks %{customdata[0]}–%{customdata[1]}%" if note else "")
                    + "<extra>%{fullData.name}</extra>",
                    meta={"view": view, "state": state},
                )
            )
            trace_view.append(view)
    # the traces validated once, as the figure is made (`add_trace` would validate each again)
    fig = go.Figure(data=traces)
    names = list(views)
    if len(names) > 1:
        buttons = [
            {
                "label": v,
                "method": "update",
                "args": [{"visible": [tv == v for tv in trace_view]}],
            }
            for v in names
        ]
        fig.update_layout(
            updatemenus=[{"buttons": buttons, "x": 1.0, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}]
        )
    n_lanes = max(len(lanes) for lanes in views.values())
    resolution = f"lanes cut into {bins} bins of {width * 1e3:.3g} ms; a bin's time per state drawn in order"
    fig.update_layout(
        title=f"Step {step} activity: compute, exposed communication, idle"
        f"<br><sub>{resolution}{'; ' + note if note else ''}</sub>",
        barmode="overlay",
        bargap=0.3,
        xaxis_title="time since step start (ms)",
        yaxis={"autorange": "reversed", "type": "category", "automargin": True},
        height=int(min(1600, max(300, 36 * n_lanes + 160))),
        legend_title="state",
        hovermode="closest",
    )
    return with_aggregation_note(fig, "; ".join(x for x in (resolution, note) if x))
