"""Figures of one run, each a pure function of the run's frames.

Large runs are shown aggregated: the timeline shows at most `max_ranks` simulated ranks
(chosen evenly), link views show the busiest links and per-tier heatmaps binned in time.
Each figure's title says when it aggregates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

PALETTE = {
    "compute": "#4C78A8", "fwd": "#4C78A8", "bwd": "#72B7B2", "recompute": "#9ECAE9", "optimizer": "#54A24B",
    "tp": "#F58518", "dp": "#E45756", "pp": "#B279A2", "ep": "#FF9DA6", "cp": "#9D755D",
    "checkpoint": "#BAB0AC", "p2p": "#B279A2", "idle": "#DDDDDD", "wait": "#EEEEEE",
}


def _color(tag: str) -> str:
    if tag in PALETTE:
        return PALETTE[tag]
    h = sum(map(ord, tag)) % 360
    return f"hsl({h},55%,55%)"


def pick_ranks(ranks: np.ndarray, max_ranks: int) -> np.ndarray:
    ranks = np.unique(ranks)
    if len(ranks) <= max_ranks:
        return ranks
    idx = np.linspace(0, len(ranks) - 1, max_ranks).round().astype(int)
    return ranks[np.unique(idx)]


def timeline_figure(ops: pd.DataFrame, step: int | None = None, max_ranks: int = 64) -> go.Figure:
    """Per-rank timeline of one step: one bar per op, colored by tag; comm on its own lane."""
    if ops.empty:
        return go.Figure(layout={"title": "Step timeline (no ops)"})
    step = int(ops["step"].max()) if step is None else step
    df = ops[ops["step"] == step]
    shown = pick_ranks(df["rank"].to_numpy(), max_ranks)
    df = df[df["rank"].isin(shown)]
    t0 = df["ready_at_s"].min()
    fig = go.Figure()
    df = df.assign(lane=np.where(df["kind"] == "compute", "compute", "comm"))
    df = df.assign(y=df["role"].where(df["role"] != "", "rank").astype(str) + " r" + df["rank"].astype(str) + " " + df["lane"])
    for tag, grp in df.groupby("tag", sort=True):
        fig.add_trace(
            go.Bar(
                name=str(tag),
                y=grp["y"],
                x=(grp["finished_at_s"] - grp["started_at_s"]) * 1e3,
                base=(grp["started_at_s"] - t0) * 1e3,
                orientation="h",
                marker_color=_color(str(tag)),
                customdata=np.stack([grp["op_id"], grp["kind"], grp["size_bytes"] / 2**20], axis=1),
                hovertemplate="%{customdata[0]} (%{customdata[1]})<br>start %{base:.3f} ms<br>"
                "duration %{x:.3f} ms<br>%{customdata[2]:.1f} MiB<extra>%{fullData.name}</extra>",
            )
        )
    n_all = ops["rank"].nunique()
    note = f" ({len(shown)} of {n_all} simulated ranks shown)" if len(shown) < n_all else ""
    fig.update_layout(
        title=f"Step {step} timeline{note}",
        barmode="overlay",
        xaxis_title="time since step start (ms)",
        yaxis={"autorange": "reversed", "type": "category"},
        height=max(300, 22 * df["y"].nunique() + 120),
        legend_title="op tag",
    )
    return fig


def breakdown_frame(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean compute / exposed comm by tag / idle per simulated rank (tidy: rank, part, seconds)."""
    tag_cols = [c for c in steps.columns if c.startswith("exposed_") and c != "exposed_comm_s"]
    cols = ["compute_s", *tag_cols, "idle_s"]
    mean = steps.groupby("rank")[cols].mean().reset_index()
    tidy = mean.melt(id_vars="rank", var_name="part", value_name="seconds")
    tidy["part"] = tidy["part"].str.replace("exposed_", "exposed ", regex=False).str.removesuffix("_s")
    return tidy


def breakdown_figure(steps: pd.DataFrame, max_ranks: int = 64) -> go.Figure:
    """Stacked bars: where each rank's step time goes (sums to the step time)."""
    tidy = breakdown_frame(steps)
    shown = pick_ranks(tidy["rank"].to_numpy(), max_ranks)
    tidy = tidy[tidy["rank"].isin(shown)]
    fig = go.Figure()
    for part, grp in tidy.groupby("part", sort=False):
        tag = part.replace("exposed ", "").replace("compute", "compute")
        fig.add_trace(
            go.Bar(name=part, x=grp["rank"].astype(str), y=grp["seconds"] * 1e3, marker_color=_color(tag))
        )
    fig.update_layout(
        barmode="stack", title="Time breakdown per rank (mean over steps)", xaxis_title="rank", yaxis_title="ms"
    )
    return fig


def link_utilization_figure(links: pd.DataFrame, top: int = 8) -> go.Figure:
    """Utilization over time of the busiest directed links (step lines)."""
    fig = go.Figure()
    if links.empty:
        fig.update_layout(title="Link utilization (no traffic)")
        return fig
    by = links.groupby("link")["bytes"].sum().sort_values(ascending=False, kind="stable")
    names = list(by.index[:top])
    t0 = links["started_at_s"].min()
    for name in names:
        df = links[links["link"] == name].sort_values("started_at_s")
        xs, ys = [], []
        for s, e, u in zip(df["started_at_s"], df["finished_at_s"], df["utilization"]):
            xs += [(s - t0) * 1e3, (e - t0) * 1e3, None]
            ys += [u * 100, u * 100, None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=name))
    fig.update_layout(
        title=f"Busiest {len(names)} of {links['link'].nunique()} loaded links",
        xaxis_title="time (ms)",
        yaxis_title="utilization (%)",
        yaxis_range=[0, 105],
    )
    return fig


def link_heatmap_frame(links: pd.DataFrame, bins: int = 60) -> pd.DataFrame:
    """Mean utilization of loaded links per tier/medium and time bin (tidy)."""
    if links.empty:
        return pd.DataFrame(columns=["group", "bin_start_s", "utilization"])
    t0, t1 = links["started_at_s"].min(), links["finished_at_s"].max()
    edges = np.linspace(t0, t1, bins + 1)
    links = links.assign(group=links["medium"] + " tier " + links["tier"].astype(str))
    out = []
    for group, df in links.groupby("group", sort=True):
        n_links = df["link"].nunique()
        s, e, b = df["started_at_s"].to_numpy(), df["finished_at_s"].to_numpy(), df["utilization"].to_numpy()
        for i in range(bins):
            lo, hi = edges[i], edges[i + 1]
            overlap = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)
            util = float((overlap * b).sum() / ((hi - lo) * n_links)) if hi > lo else 0.0
            out.append({"group": group, "bin_start_s": lo, "utilization": util})
    return pd.DataFrame(out)


def link_heatmap_figure(links: pd.DataFrame, bins: int = 60) -> go.Figure:
    hm = link_heatmap_frame(links, bins)
    if hm.empty:
        return go.Figure(layout={"title": "Link utilization by tier (no traffic)"})
    piv = hm.pivot(index="group", columns="bin_start_s", values="utilization")
    t0 = piv.columns.min()
    fig = go.Figure(
        go.Heatmap(
            z=piv.to_numpy() * 100,
            x=[(c - t0) * 1e3 for c in piv.columns],
            y=list(piv.index),
            colorscale="Viridis",
            zmin=0,
            zmax=100,
            colorbar_title="%",
        )
    )
    fig.update_layout(
        title=f"Mean utilization of loaded links by medium and tier ({bins} time bins)", xaxis_title="time (ms)"
    )
    return fig
