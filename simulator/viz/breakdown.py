"""Where the step time goes: compute, exposed communication by tag and idle, per rank.

`breakdown_figure` draws one stacked bar per rank (each sums to the rank's mean step time)
when there are at most `max_ranks` ranks, else one bar per rank group (mean over its ranks,
weighted by how many ranks each simulated rank stands for), or without groups
`max_ranks` evenly sampled ranks; the title says which.

Simplified: the parts are the steps frame's per-rank means over steps; communication
hidden under compute is not drawn (it costs no step time).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from simulator.viz.rank_groups import pick_ranks
from simulator.viz.style import color_of, with_aggregation_note


def _parts(steps: pd.DataFrame) -> list[str]:
    tag_cols = sorted(c for c in steps.columns if c.startswith("exposed_") and c != "exposed_comm_s")
    return ["compute_s", *tag_cols, "idle_s"]


def _part_label(col: str) -> str:
    return col.replace("exposed_", "exposed ").removesuffix("_s")


def breakdown_frame(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean compute / exposed comm by tag / idle per simulated rank (tidy: rank, part, seconds)."""
    cols = _parts(steps)
    mean = steps.groupby("rank")[cols].mean().reset_index()
    tidy = mean.melt(id_vars="rank", var_name="part", value_name="seconds")
    tidy["part"] = tidy["part"].map(_part_label)
    return tidy


def breakdown_group_frame(steps: pd.DataFrame, groups: Mapping[int, str] | pd.Series) -> pd.DataFrame:
    """Breakdown per rank group: weighted mean over the group's ranks and all steps (tidy:
    group, part, seconds, ranks). Weights are the steps frame's `weight` (ranks stood for)."""
    cols = _parts(steps)
    g = pd.Series(groups)
    df = steps.assign(group=steps["rank"].map(g).fillna("other").astype(str))
    w = df["weight"].astype(float) if "weight" in df else pd.Series(1.0, index=df.index)
    rows = []
    for name, grp in df.groupby("group", sort=False):
        ww = w.loc[grp.index].to_numpy()
        for col in cols:
            rows.append(
                {
                    "group": name,
                    "part": _part_label(col),
                    "seconds": float(np.average(grp[col].to_numpy(), weights=ww)),
                    "ranks": int(grp["rank"].nunique()),
                }
            )
    return pd.DataFrame(rows, columns=["group", "part", "seconds", "ranks"])


def breakdown_figure(
    steps: pd.DataFrame, max_ranks: int = 64, groups: Mapping[int, str] | pd.Series | None = None
) -> go.Figure:
    """Stacked bars: where the step time goes (each bar sums to the mean step time).

    One bar per rank when there are at most `max_ranks` ranks (labeled with its group when
    `groups` is given); otherwise one bar per rank group (weighted mean), or, without
    groups, `max_ranks` evenly sampled ranks.
    """
    fig = go.Figure()
    n = int(steps["rank"].nunique()) if not steps.empty else 0
    note = ""
    if groups is not None and n > max_ranks:
        tidy = breakdown_group_frame(steps, groups)
        order = list(dict.fromkeys(tidy["group"]))
        tidy = tidy.assign(x=tidy["group"] + " (" + tidy["ranks"].astype(str) + ")")
        xlab = "rank group (simulated ranks)"
        note = f"{n} ranks averaged into {len(order)} groups"
    else:
        tidy = breakdown_frame(steps)
        shown = pick_ranks(tidy["rank"].to_numpy(), max_ranks)
        if len(shown) < n:
            note = f"{len(shown)} of {n} ranks drawn, evenly spaced"
        tidy = tidy[tidy["rank"].isin(shown)]
        if groups is not None:
            gs = pd.Series(groups)
            tidy = tidy.assign(
                x=tidy["rank"].map(gs).fillna("").astype(str) + " r" + tidy["rank"].astype(str)
            )
        else:
            tidy = tidy.assign(x="r" + tidy["rank"].astype(str))
        xlab = "rank"
    for part, grp in tidy.groupby("part", sort=False):
        tag = "compute" if part == "compute" else part.replace("exposed ", "")
        fig.add_trace(
            go.Bar(
                name=part, x=grp["x"].tolist(), y=(grp["seconds"] * 1e3).tolist(), marker_color=color_of(tag)
            )
        )
    title = "Time breakdown per " + ("rank group" if xlab != "rank" else "rank") + " (mean over steps)"
    if note:
        title += f"<br><sub>{note}</sub>"
    fig.update_layout(
        barmode="stack", title=title, xaxis_title=xlab, yaxis_title="ms", xaxis={"type": "category"}
    )
    return with_aggregation_note(fig, note)
