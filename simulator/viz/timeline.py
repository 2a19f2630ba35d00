"""The step timeline of one run: one lane per (rank, stream) for one step.

Bars are compute (by tag), each communication kind (by tag), waits (a communication op's
ready -> start gap: the rank had reached the collective but its peers had not),
compute-stream bubbles (no compute op running inside the step) and checkpoint stalls.
Ranks are grouped (`simulator.viz.rank_groups`); a dropdown shows one group at a time, or
all of them when the page stays small enough. At most `max_ranks` ranks per group and
`max_groups` groups are drawn (chosen evenly; adjacent groups are merged past
`max_groups`); the title says what is sampled. Times are in milliseconds since the step's
first op was ready.

Simplified: one step is drawn (default the last); ops are drawn as recorded, without
the flows that carried a collective's bytes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from simulator.viz.rank_groups import pick_ranks, rank_groups
from simulator.viz.style import TIME_MS_DECIMALS, color_of, with_aggregation_note

#: Legend names of the categories that are not op tags.
CATEGORY_LABELS = {"wait": "wait (ready→start)", "bubble": "bubble (compute idle)"}

#: Lanes drawn at once at most for the page to open on every group ("all groups").
ALL_GROUPS_AT_START_MAX_LANES = 96

#: Lanes at most for the dropdown to offer "all groups" at all.
ALL_GROUPS_MAX_LANES = 600


def _gaps(starts: np.ndarray, ends: np.ndarray, t0: float, t1: float) -> list[tuple[float, float]]:
    """Intervals of [t0, t1] covered by none of the given intervals."""
    out = []
    cur = t0
    for s, e in sorted(zip(starts, ends, strict=False)):
        if s > cur:
            out.append((cur, min(s, t1)))
        cur = max(cur, e)
    if cur < t1:
        out.append((cur, t1))
    return [(s, e) for s, e in out if e > s]


def timeline_segments(ops: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """The bars of one step's timeline (all ranks): rank, stream, category, start_s, end_s, ...

    Categories: the op tag (or kind when untagged) for ops, "checkpoint" for checkpoint ops,
    "wait" for a communication op's ready -> start gap, "bubble" for time inside the step
    when the rank's compute stream runs nothing.
    """
    cols = ["rank", "stream", "category", "start_s", "end_s", "op_id", "kind", "size_bytes"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    step = int(ops["step"].max()) if step is None else step
    df = ops[ops["step"] == step]
    t0, t1 = float(df["ready_at_s"].min()), float(df["finished_at_s"].max())
    tag = df["tag"].fillna("").astype(str)
    cat = np.where(df["kind"] == "checkpoint", "checkpoint", np.where(tag != "", tag, df["kind"].astype(str)))
    bars = pd.DataFrame(
        {
            "rank": df["rank"].to_numpy(),
            "stream": df["stream"].astype(str).to_numpy(),
            "category": cat,
            "start_s": df["started_at_s"].to_numpy(),
            "end_s": df["finished_at_s"].to_numpy(),
            "op_id": df["op_id"].astype(str).to_numpy(),
            "kind": df["kind"].astype(str).to_numpy(),
            "size_bytes": df["size_bytes"].to_numpy(dtype=float),
        }
    )
    comm = df[(df["kind"] != "compute") & (df["started_at_s"] > df["ready_at_s"])]
    waits = pd.DataFrame(
        {
            "rank": comm["rank"].to_numpy(),
            "stream": comm["stream"].astype(str).to_numpy(),
            "category": "wait",
            "start_s": comm["ready_at_s"].to_numpy(),
            "end_s": comm["started_at_s"].to_numpy(),
            "op_id": comm["op_id"].astype(str).to_numpy(),
            "kind": "wait",
            "size_bytes": 0.0,
        }
    )
    rows = []
    comp = df[df["kind"] == "compute"]
    for (rank, stream), g in comp.groupby(["rank", "stream"], sort=True):
        for s, e in _gaps(g["started_at_s"].to_numpy(), g["finished_at_s"].to_numpy(), t0, t1):
            rows.append((rank, str(stream), "bubble", s, e, "", "bubble", 0.0))
    bubbles = pd.DataFrame.from_records(rows, columns=cols)
    parts = [p for p in (bars, waits, bubbles) if len(p)]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)
    out.attrs.update(step=step, t0_s=t0, t1_s=t1)
    return out[cols]


def _category_order(cats: list[str]) -> list[str]:
    first = ["fwd", "bwd", "recompute", "compute", "optimizer"]
    last = ["checkpoint", "wait", "bubble"]
    mid = sorted(c for c in cats if c not in first and c not in last)
    return [c for c in first if c in cats] + mid + [c for c in last if c in cats]


def _height_px(lanes: int) -> int:
    """Figure height for a number of lanes: 18 px a lane, within [260, 2400] px."""
    return int(min(2400, max(260, 18 * lanes + 140)))


def _sampled_lanes(
    ops: pd.DataFrame, step: int | None, max_ranks: int, max_groups: int
) -> tuple[pd.DataFrame, dict[str, np.ndarray], int, float]:
    """The bars of the drawn ranks, with their group and lane name, in lane order.

    Returns:
        (bars, ranks drawn per group, step drawn, its start time in s).
    """
    seg = timeline_segments(ops, step)
    step, t0 = seg.attrs["step"], seg.attrs["t0_s"]
    groups = rank_groups(ops[ops["step"] == step], max_groups)
    shown_by_group: dict[str, np.ndarray] = {}
    for gname in dict.fromkeys(groups.to_numpy()):
        shown_by_group[gname] = pick_ranks(groups.index[groups == gname].to_numpy(), max_ranks)
    shown = np.concatenate(list(shown_by_group.values()))
    seg = seg[seg["rank"].isin(shown)].copy()
    seg["group"] = groups.reindex(seg["rank"]).to_numpy()
    seg["y"] = seg["group"].astype(str) + " r" + seg["rank"].astype(str) + " " + seg["stream"]
    seg["lane_order"] = (seg["stream"] != "compute").astype(int)  # compute lane above comm lanes
    seg = seg.sort_values(["rank", "lane_order", "stream", "start_s"], kind="stable")
    return seg, shown_by_group, step, t0


def _add_group_bars(
    fig: go.Figure, seg: pd.DataFrame, group_names: list[str], cats: list[str], t0: float
) -> tuple[list[str], dict[str, list[str]]]:
    """One bar trace per (group, category) present.

    Returns:
        (the group of every trace added, in order; the lanes of every group, in order).
    """
    trace_group: list[str] = []
    lanes_by_group: dict[str, list[str]] = {}
    for gname in group_names:
        gs = seg[seg["group"] == gname]
        lanes_by_group[gname] = list(dict.fromkeys(gs["y"]))
        for cat in cats:
            c = gs[gs["category"] == cat]
            if c.empty:
                continue
            start_ms = ((c["start_s"] - t0) * 1e3).round(TIME_MS_DECIMALS).to_numpy()
            dur_ms = ((c["end_s"] - c["start_s"]) * 1e3).round(TIME_MS_DECIMALS).to_numpy()
            fig.add_trace(
                go.Bar(
                    name=CATEGORY_LABELS.get(cat, cat),
                    legendgroup=cat,
                    showlegend=False,
                    y=c["y"].to_numpy(),
                    x=dur_ms,
                    base=start_ms,
                    orientation="h",
                    marker={"color": color_of(cat), "line": {"width": 0}},
                    customdata=np.stack(
                        [c["op_id"].to_numpy(), (c["size_bytes"] / 2**20).round(3).to_numpy()], axis=1
                    ),
                    hovertemplate="%{customdata[0]}<br>start %{base:.3f} ms<br>duration %{x:.3f} ms"
                    "<br>%{customdata[1]} MiB<extra>%{fullData.name}</extra>",
                )
            )
            trace_group.append(gname)
    return trace_group, lanes_by_group


def _add_category_legend(fig: go.Figure, cats: list[str], trace_group: list[str]) -> None:
    """One always-visible, empty legend entry per category (trace group "").

    The legend stays the same whichever group the dropdown shows, and clicking an entry
    toggles the category in every group.
    """
    for cat in cats:
        fig.add_trace(
            go.Bar(
                name=CATEGORY_LABELS.get(cat, cat),
                legendgroup=cat,
                x=[None],
                y=[None],
                orientation="h",
                marker={"color": color_of(cat)},
                showlegend=True,
                hoverinfo="skip",
            )
        )
        trace_group.append("")


def _sampling_notes(ops: pd.DataFrame, shown_by_group: dict[str, np.ndarray], max_ranks: int) -> list[str]:
    """What the timeline leaves out: ranks not drawn, roles merged into fewer groups."""
    n_all = int(ops["rank"].nunique())
    n_shown = sum(len(ranks) for ranks in shown_by_group.values())
    notes = []
    if n_shown < n_all:
        notes.append(f"{n_shown} of {n_all} simulated ranks drawn (≤{max_ranks} per group, evenly spaced)")
    n_groups_src = ops["role"].nunique() if "role" in ops and (ops["role"].astype(str) != "").any() else None
    if n_groups_src and n_groups_src > len(shown_by_group):
        notes.append(f"{n_groups_src} roles merged into {len(shown_by_group)} groups")
    return notes


def _add_group_menu(
    fig: go.Figure, shown_by_group: dict[str, np.ndarray], trace_group: list[str], lane_count: dict[str, int]
) -> int:
    """The dropdown choosing the group shown (with several groups); hides the other groups'
    traces when the page opens on one group. Returns the lanes shown when the page opens."""
    names = list(shown_by_group)
    total_lanes = sum(lane_count.values())
    if len(names) <= 1:
        return total_lanes
    buttons = []
    if total_lanes <= ALL_GROUPS_MAX_LANES:
        buttons.append(
            {
                "label": "all groups",
                "method": "update",
                "args": [{"visible": [True] * len(trace_group)}, {"height": _height_px(total_lanes)}],
            }
        )
    for g in names:
        buttons.append(
            {
                "label": f"{g} ({len(shown_by_group[g])} ranks)",
                "method": "update",
                "args": [
                    {"visible": [tg in (g, "") for tg in trace_group]},
                    {"height": _height_px(lane_count[g])},
                ],
            }
        )
    has_all = buttons[0]["label"] == "all groups"
    active_all = total_lanes <= ALL_GROUPS_AT_START_MAX_LANES and has_all
    if not active_all:
        for tr, tg in zip(fig.data, trace_group, strict=False):
            tr.visible = tg in (names[0], "")
    active = 0 if active_all else (1 if has_all else 0)
    fig.update_layout(
        updatemenus=[
            {
                "buttons": buttons,
                "direction": "down",
                "x": 1.0,
                "xanchor": "right",
                "y": 1.02,
                "yanchor": "bottom",
                "active": active,
                "showactive": True,
            }
        ]
    )
    return total_lanes if active_all else lane_count[names[0]]


def timeline_figure(
    ops: pd.DataFrame, step: int | None = None, max_ranks: int = 64, max_groups: int = 16
) -> go.Figure:
    """Per-rank timeline of one step (default: the last), ranks grouped with a dropdown.

    Args:
        ops: the run's ops frame.
        step: step to draw (default the last one).
        max_ranks: ranks drawn per group at most (evenly sampled).
        max_groups: rank groups at most (adjacent groups merged past it).
    """
    if ops.empty:
        return go.Figure(layout={"title": "Step timeline (no ops)"})
    seg, shown_by_group, step, t0 = _sampled_lanes(ops, step, max_ranks, max_groups)
    cats = _category_order(list(seg["category"].unique()))
    fig = go.Figure()
    trace_group, lanes_by_group = _add_group_bars(fig, seg, list(shown_by_group), cats, t0)
    _add_category_legend(fig, cats, trace_group)
    notes = _sampling_notes(ops, shown_by_group, max_ranks)
    lane_count = {g: len(v) for g, v in lanes_by_group.items()}
    init_lanes = _add_group_menu(fig, shown_by_group, trace_group, lane_count)
    title = f"Step {step} timeline by rank group" if len(shown_by_group) > 1 else f"Step {step} timeline"
    if notes:
        title += f"<br><sub>{'; '.join(notes)}</sub>"
    fig.update_layout(
        title=title,
        barmode="overlay",
        bargap=0.25,
        xaxis_title="time since step start (ms)",
        yaxis={
            "autorange": "reversed",
            "type": "category",
            "automargin": True,
            "categoryorder": "array",
            "categoryarray": [y for v in lanes_by_group.values() for y in v],
        },
        height=_height_px(init_lanes),
        legend_title="op tag",
        hovermode="closest",
    )
    return with_aggregation_note(fig, "; ".join(notes))
