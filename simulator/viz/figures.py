"""Figures of one run, each a pure function of the run's saved frames.

What is shown, and how large runs stay usable in a browser:

* Step timeline (`timeline_figure`): one lane per (rank, stream) for one step; bars for
  compute (by tag), each communication kind (by tag), waits (a communication op's
  ready -> start gap: the rank had reached the collective but its peers had not),
  compute-stream bubbles (no compute op running inside the step) and checkpoint stalls.
  Ranks are grouped by the ops frame's `role` column, or, when it is empty, by the server
  part of the GPU name (`n12.gpu3` -> `n12`); a dropdown shows one group at a time. At most
  `max_ranks` ranks per group and `max_groups` groups are drawn (chosen evenly; adjacent
  servers are merged into one group past `max_groups`); the title says what is sampled.
* Breakdown (`breakdown_figure`): compute / exposed communication by tag / idle per rank
  (mean over steps), or per rank group (mean over its ranks, weighted) past `max_ranks`.
* Link views: utilization over time of the busiest directed links (binned in time past
  `max_points` intervals per link), and a heatmap of mean utilization of loaded links per
  medium and tier in time bins.
* Failures (`incidents_figure`): incidents on a time axis and cumulative useful work
  against the ideal, from the `incidents` / `segments` frames of a run-level simulation.

Every figure that aggregates or samples says so in its title and in
`fig.layout.meta["aggregation"]`, which the dashboard lists under the headline cards.
Times are drawn in milliseconds since the step (or run) start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

PALETTE = {
    "compute": "#4C78A8",
    "fwd": "#4C78A8",
    "bwd": "#72B7B2",
    "recompute": "#9ECAE9",
    "optimizer": "#54A24B",
    "tp": "#F58518",
    "dp": "#E45756",
    "pp": "#B279A2",
    "ep": "#FF9DA6",
    "cp": "#9D755D",
    "checkpoint": "#8C6D31",
    "p2p": "#B279A2",
    "idle": "#DDDDDD",
    "wait": "#C7C7C7",
    "bubble": "#EEEEEE",
}
_NS_MS = 6  # decimals kept for times in ms (1 ns): keeps the page small, far below any op's length


def _color(tag: str) -> str:
    if tag in PALETTE:
        return PALETTE[tag]
    h = sum(map(ord, tag)) % 360
    return f"hsl({h},55%,55%)"


def _note(fig: go.Figure, text: str) -> go.Figure:
    """Record what a figure aggregates (read back by the dashboard)."""
    if text:
        meta = dict(fig.layout.meta or {}) if isinstance(fig.layout.meta, dict) else {}
        meta["aggregation"] = text
        fig.update_layout(meta=meta)
    return fig


def aggregation_note(fig: go.Figure) -> str:
    """The aggregation note a figure function left in the figure ('' if none)."""
    meta = fig.layout.meta
    return str(meta.get("aggregation", "")) if isinstance(meta, dict) else ""


def pick_ranks(ranks: np.ndarray, max_ranks: int) -> np.ndarray:
    """At most `max_ranks` of the distinct ranks, evenly spread, first and last included."""
    ranks = np.unique(ranks)
    if len(ranks) <= max_ranks:
        return ranks
    idx = np.linspace(0, len(ranks) - 1, max_ranks).round().astype(int)
    return ranks[np.unique(idx)]


# -- rank groups ---------------------------------------------------------------------------

_SERVER = re.compile(r"^(.*?)[._:/-]?(gpu|g|dev|rank)?\d+$", re.IGNORECASE)


def _server_of(gpu: str) -> str:
    """`n12.gpu3` -> `n12`; a name without a separator stays whole."""
    for sep in (".", "/", ":"):
        if sep in gpu:
            return gpu.rsplit(sep, 1)[0]
    m = _SERVER.match(gpu)
    return m.group(1) if m and m.group(1) else gpu


def _natural(s: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def rank_groups(ops: pd.DataFrame, max_groups: int = 16) -> pd.Series:
    """Group label of every rank in `ops` (index: rank), in natural order of first rank.

    The `role` column when it names roles, else the server part of the `gpu` column, else
    one group "ranks". Past `max_groups` groups, adjacent groups are merged ("n0…n7").
    """
    if ops.empty:
        return pd.Series(dtype=object)
    per_rank = ops.drop_duplicates("rank").set_index("rank").sort_index()
    if "role" in per_rank and (per_rank["role"].fillna("").astype(str) != "").any():
        labels = per_rank["role"].fillna("").astype(str).replace("", "other")
    elif "gpu" in per_rank:
        labels = per_rank["gpu"].astype(str).map(_server_of)
    else:
        labels = pd.Series("ranks", index=per_rank.index)
    order = sorted(labels.unique(), key=lambda g: (int(labels[labels == g].index.min()), _natural(g)))
    if len(order) > max_groups:
        size = -(-len(order) // max_groups)
        merged = {}
        for i in range(0, len(order), size):
            chunk = order[i : i + size]
            name = chunk[0] if len(chunk) == 1 else f"{chunk[0]}…{chunk[-1]}"
            merged.update({g: name for g in chunk})
        labels = labels.map(merged)
    return labels.rename("group")


# -- timeline ------------------------------------------------------------------------------


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
    cats = _category_order(list(seg["category"].unique()))
    fig = go.Figure()
    trace_group: list[str] = []
    lanes_by_group: dict[str, list[str]] = {}
    for gname in shown_by_group:
        gs = seg[seg["group"] == gname]
        lanes_by_group[gname] = list(dict.fromkeys(gs["y"]))
        for cat in cats:
            c = gs[gs["category"] == cat]
            if c.empty:
                continue
            start_ms = ((c["start_s"] - t0) * 1e3).round(_NS_MS).to_numpy()
            dur_ms = ((c["end_s"] - c["start_s"]) * 1e3).round(_NS_MS).to_numpy()
            label = {"wait": "wait (ready→start)", "bubble": "bubble (compute idle)"}.get(cat, cat)
            fig.add_trace(
                go.Bar(
                    name=label,
                    legendgroup=cat,
                    showlegend=False,
                    y=c["y"].to_numpy(),
                    x=dur_ms,
                    base=start_ms,
                    orientation="h",
                    marker={"color": _color(cat), "line": {"width": 0}},
                    customdata=np.stack(
                        [c["op_id"].to_numpy(), (c["size_bytes"] / 2**20).round(3).to_numpy()], axis=1
                    ),
                    hovertemplate="%{customdata[0]}<br>start %{base:.3f} ms<br>duration %{x:.3f} ms"
                    "<br>%{customdata[1]} MiB<extra>%{fullData.name}</extra>",
                )
            )
            trace_group.append(gname)
    # one always-visible, empty legend entry per category: the legend stays the same whichever
    # group the dropdown shows, and clicking it toggles the category in every group
    for cat in cats:
        label = {"wait": "wait (ready→start)", "bubble": "bubble (compute idle)"}.get(cat, cat)
        fig.add_trace(
            go.Bar(
                name=label,
                legendgroup=cat,
                x=[None],
                y=[None],
                orientation="h",
                marker={"color": _color(cat)},
                showlegend=True,
                hoverinfo="skip",
            )
        )
        trace_group.append("")
    names = list(shown_by_group)
    n_all = int(ops["rank"].nunique())
    n_shown = len(shown)
    notes = []
    if n_shown < n_all:
        notes.append(f"{n_shown} of {n_all} simulated ranks drawn (≤{max_ranks} per group, evenly spaced)")
    n_groups_src = ops["role"].nunique() if "role" in ops and (ops["role"].astype(str) != "").any() else None
    if n_groups_src and n_groups_src > len(names):
        notes.append(f"{n_groups_src} roles merged into {len(names)} groups")

    def height(lanes: int) -> int:
        return int(min(2400, max(260, 18 * lanes + 140)))

    lane_count = {g: len(v) for g, v in lanes_by_group.items()}
    total_lanes = sum(lane_count.values())
    start_all = len(names) == 1 or total_lanes <= 96
    if len(names) > 1:
        buttons = []
        if total_lanes <= 600:
            buttons.append(
                {
                    "label": "all groups",
                    "method": "update",
                    "args": [{"visible": [True] * len(trace_group)}, {"height": height(total_lanes)}],
                }
            )
        for g in names:
            buttons.append(
                {
                    "label": f"{g} ({len(shown_by_group[g])} ranks)",
                    "method": "update",
                    "args": [
                        {"visible": [tg in (g, "") for tg in trace_group]},
                        {"height": height(lane_count[g])},
                    ],
                }
            )
        active_all = start_all and buttons[0]["label"] == "all groups"
        if not active_all:
            for tr, tg in zip(fig.data, trace_group, strict=False):
                tr.visible = tg in (names[0], "")
        active = 0 if active_all else (1 if buttons[0]["label"] == "all groups" else 0)
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
        init_lanes = total_lanes if active_all else lane_count[names[0]]
    else:
        init_lanes = total_lanes
    title = f"Step {step} timeline by rank group" if len(names) > 1 else f"Step {step} timeline"
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
        height=height(init_lanes),
        legend_title="op tag",
        hovermode="closest",
    )
    return _note(fig, "; ".join(notes))


# -- breakdown -----------------------------------------------------------------------------


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
                name=part, x=grp["x"].tolist(), y=(grp["seconds"] * 1e3).tolist(), marker_color=_color(tag)
            )
        )
    title = "Time breakdown per " + ("rank group" if xlab != "rank" else "rank") + " (mean over steps)"
    if note:
        title += f"<br><sub>{note}</sub>"
    fig.update_layout(
        barmode="stack", title=title, xaxis_title=xlab, yaxis_title="ms", xaxis={"type": "category"}
    )
    return _note(fig, note)


# -- links ---------------------------------------------------------------------------------


def _integral_at(s: np.ndarray, e: np.ndarray, u: np.ndarray, x: np.ndarray) -> np.ndarray:
    """F(x) = sum_i u_i * |[s_i, e_i] ∩ (-inf, x]| for every x (O((n + m) log n))."""

    def ramp(t: np.ndarray) -> np.ndarray:  # sum_i u_i * max(x - t_i, 0)
        order = np.argsort(t, kind="stable")
        ts, us = t[order], u[order]
        cu = np.concatenate([[0.0], np.cumsum(us)])
        cut = np.concatenate([[0.0], np.cumsum(us * ts)])
        k = np.searchsorted(ts, x, side="right")
        return x * cu[k] - cut[k]

    return ramp(s) - ramp(e)


def link_series(
    links: pd.DataFrame, link: str, max_points: int = 2000
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Piecewise-constant utilization of one link (x: breakpoints in s, y: utilization
    from each breakpoint on); binned into `max_points` time-weighted means when longer."""
    df = links[links["link"] == link].sort_values("started_at_s", kind="stable")
    s, e, u = (df[c].to_numpy(dtype=float) for c in ("started_at_s", "finished_at_s", "utilization"))
    if len(s) > max_points:
        t0, t1 = float(links["started_at_s"].min()), float(links["finished_at_s"].max())
        edges = np.linspace(t0, t1, max_points + 1)
        f = _integral_at(s, e, u, edges)
        return edges, np.append(np.diff(f) / np.diff(edges), 0.0), True
    xs, ys = [], []
    cur = None
    for a, b, v in zip(s, e, u, strict=False):
        if cur is not None and a > cur:
            xs.append(cur)
            ys.append(0.0)
        xs.append(a)
        ys.append(v)
        cur = b if cur is None else max(cur, b)
    if cur is not None:
        xs.append(cur)
        ys.append(0.0)
    return np.array(xs), np.array(ys), False


def busiest(links: pd.DataFrame, top: int) -> list[str]:
    """Links with the most bytes per unit capacity (= highest mean utilization), ties by name."""
    agg = links.groupby("link").agg(bytes=("bytes", "sum"), cap=("capacity_bytes_per_s", "first"))
    agg["score"] = agg["bytes"] / agg["cap"]
    agg = agg.reset_index().sort_values(["score", "link"], ascending=[False, True], kind="stable")
    return list(agg["link"][:top])


def link_utilization_figure(links: pd.DataFrame, top: int = 8, max_points: int = 2000) -> go.Figure:
    """Utilization over time of the `top` busiest directed links (step lines)."""
    fig = go.Figure()
    if links.empty:
        fig.update_layout(title="Link utilization (no traffic)")
        return fig
    names = busiest(links, top)
    t0 = links["started_at_s"].min()
    binned = False
    for name in names:
        xs, ys, b = link_series(links, name, max_points)
        binned |= b
        fig.add_trace(
            go.Scatter(
                x=((xs - t0) * 1e3).round(_NS_MS),
                y=(ys * 100).round(4),
                mode="lines",
                line_shape="hv",
                name=name,
            )
        )
    note = f"binned into {max_points} time bins per link (time-weighted mean)" if binned else ""
    title = f"Busiest {len(names)} of {links['link'].nunique()} loaded links"
    if note:
        title += f"<br><sub>{note}</sub>"
    fig.update_layout(
        title=title, xaxis_title="time (ms)", yaxis_title="utilization (%)", yaxis_range=[0, 105]
    )
    return _note(fig, note)


def link_heatmap_frame(links: pd.DataFrame, bins: int = 60) -> pd.DataFrame:
    """Mean utilization of loaded links per medium/tier and time bin (tidy: group,
    bin_start_s, bin_end_s, utilization, links). The mean is over the links of the group that
    carry traffic at some time in the run, time-weighted within the bin."""
    cols = ["group", "bin_start_s", "bin_end_s", "utilization", "links"]
    if links.empty:
        return pd.DataFrame(columns=cols)
    t0, t1 = float(links["started_at_s"].min()), float(links["finished_at_s"].max())
    edges = np.linspace(t0, t1, bins + 1)
    grp = links["medium"].astype(str) + " tier " + links["tier"].astype(str)
    out = []
    for group in sorted(grp.unique(), key=_natural):
        df = links[grp == group]
        n_links = df["link"].nunique()
        s, e, u = (df[c].to_numpy(dtype=float) for c in ("started_at_s", "finished_at_s", "utilization"))
        f = _integral_at(s, e, u, edges)
        width = np.diff(edges)
        util = np.where(width > 0, np.diff(f) / np.where(width > 0, width, 1) / n_links, 0.0)
        out.append(
            pd.DataFrame(
                {
                    "group": group,
                    "bin_start_s": edges[:-1],
                    "bin_end_s": edges[1:],
                    "utilization": util,
                    "links": n_links,
                }
            )
        )
    return pd.concat(out, ignore_index=True)[cols]


def link_heatmap_figure(links: pd.DataFrame, bins: int = 60) -> go.Figure:
    """Heatmap: mean utilization of loaded links by medium and tier, in time bins."""
    hm = link_heatmap_frame(links, bins)
    if hm.empty:
        return go.Figure(layout={"title": "Link utilization by tier (no traffic)"})
    piv = hm.pivot(index="group", columns="bin_start_s", values="utilization")
    piv = piv.loc[sorted(piv.index, key=_natural)]
    n_links = hm.groupby("group")["links"].first()
    t0 = piv.columns.min()
    fig = go.Figure(
        go.Heatmap(
            z=(piv.to_numpy() * 100).round(4),
            x=[round((c - t0) * 1e3, _NS_MS) for c in piv.columns],
            y=[f"{g} ({n_links[g]} links)" for g in piv.index],
            colorscale="Viridis",
            zmin=0,
            zmax=100,
            colorbar_title="%",
            hovertemplate="%{y}<br>from %{x:.3f} ms<br>%{z:.1f}%<extra></extra>",
        )
    )
    note = f"{bins} time bins; mean over the links of each tier that carry traffic"
    fig.update_layout(
        title=f"Link utilization by medium and tier<br><sub>{note}</sub>",
        xaxis_title="time (ms)",
        height=max(260, 40 * len(piv.index) + 160),
    )
    return _note(fig, note)


def link_mean_utilization(links: pd.DataFrame, run_time_s: float | None = None) -> pd.Series:
    """Mean utilization per undirected link over the run (max of both directions), indexed by
    (src, dst) tuples: the input of `simulator.viz.topology.topology_figure`.

    `run_time_s` defaults to the span of the links frame; pass the run's simulated time
    (steps frame) to match `summary.json`'s busiest links."""
    if links.empty:
        return pd.Series(dtype=float)
    run = (
        float(links["finished_at_s"].max() - links["started_at_s"].min())
        if run_time_s is None
        else run_time_s
    )
    agg = links.groupby(["src", "dst"]).agg(bytes=("bytes", "sum"), cap=("capacity_bytes_per_s", "first"))
    util = agg["bytes"] / (agg["cap"] * run) if run > 0 else agg["bytes"] * 0.0
    out: dict[tuple[str, str], float] = {}
    for (s, d), v in util.items():
        key = (s, d) if (d, s) not in out else (d, s)
        out[key] = max(out.get(key, 0.0), float(v))
    return pd.Series(out, dtype=float)


# -- failures ------------------------------------------------------------------------------

_INCIDENT_COLORS = {
    "failure": "#d62728",
    "checkpoint": "#8C6D31",
    "restart": "#ff7f0e",
    "repair": "#2ca02c",
    "degradation": "#9467bd",
    "rejoin": "#17becf",
}


def incidents_figure(
    incidents: pd.DataFrame, segments: pd.DataFrame | None = None, max_markers: int = 5000
) -> go.Figure:
    """Failures, checkpoints and restarts on the run's time axis (hours), with cumulative
    useful work against the ideal (every second useful) when segments are given.

    Incidents of a kind past `max_markers` are sampled evenly (the title says so).
    """
    from plotly.subplots import make_subplots

    has_seg = segments is not None and not segments.empty
    fig = make_subplots(
        rows=2 if has_seg else 1,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        row_heights=[0.35, 0.65] if has_seg else None,
    )
    notes = []
    kinds = list(dict.fromkeys(incidents["kind"].astype(str))) if not incidents.empty else []
    for _i, kind in enumerate(kinds):
        df = incidents[incidents["kind"].astype(str) == kind]
        if len(df) > max_markers:
            df = df.iloc[np.unique(np.linspace(0, len(df) - 1, max_markers).round().astype(int))]
            notes.append(f"{max_markers} of {int((incidents['kind'] == kind).sum())} {kind} incidents drawn")
        t_h = df["time_s"].to_numpy(dtype=float) / 3600
        dur = df["duration_s"].fillna(0).to_numpy(dtype=float)
        lost = df["lost_work_s"].fillna(0).to_numpy(dtype=float) if "lost_work_s" in df else np.zeros(len(df))
        fig.add_trace(
            go.Bar(
                name=kind,
                y=[kind] * len(df),
                x=np.maximum(dur / 3600, 1e-4).round(6),
                base=t_h.round(6),
                orientation="h",
                marker_color=_INCIDENT_COLORS.get(kind, _color(kind)),
                customdata=np.stack([dur, lost], axis=1).round(3),
                hovertemplate="%{base:.3f} h<br>duration %{customdata[0]:.0f} s<br>lost work "
                "%{customdata[1]:.0f} s<extra>%{fullData.name}</extra>",
            ),
            row=1,
            col=1,
        )
    if segments is not None and has_seg:
        seg = segments.sort_values("start_s", kind="stable")
        useful_col = "useful_s" if "useful_s" in seg else ("useful" if "useful" in seg else None)
        end = seg["end_s"].to_numpy(dtype=float)
        t_h = np.concatenate([[float(seg["start_s"].min())], end]) / 3600
        useful = seg[useful_col].fillna(0).to_numpy(dtype=float) if useful_col else np.zeros(len(seg))
        cum_h = np.concatenate([[0.0], np.cumsum(useful)]) / 3600
        fig.add_trace(
            go.Scatter(
                x=t_h.round(6),
                y=cum_h.round(6),
                mode="lines",
                name="useful work (kept)",
                line={"color": "#1f77b4"},
            ),
            row=2,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[t_h[0], t_h[-1]],
                y=[0.0, t_h[-1] - t_h[0]],
                mode="lines",
                name="ideal",
                line={"color": "#999", "dash": "dash"},
            ),
            row=2,
            col=1,
        )
        fig.update_yaxes(title_text="useful work (h)", row=2, col=1)
    fig.update_xaxes(title_text="run time (h)", row=2 if has_seg else 1, col=1)
    title = "Incidents, checkpoints and restarts" + (" with useful work against the ideal" if has_seg else "")
    if notes:
        title += f"<br><sub>{'; '.join(notes)}</sub>"
    fig.update_layout(title=title, barmode="overlay", height=560 if has_seg else 320)
    return _note(fig, "; ".join(notes))
