"""Figures of the links of one run: utilization over time and by tier, mean utilization.

* `link_utilization_figure`: utilization over time of the busiest directed links (by
  bytes per unit capacity), as step lines; past `max_points` intervals per link, binned
  into time-weighted means (the title says so).
* `link_heatmap_figure`: mean utilization of the loaded links of each medium and tier in
  time bins.
* `link_mean_utilization`: mean utilization per undirected link over the run, to colour
  the topology drawing.

Simplified: utilization is the links frame's rate over capacity, piecewise constant
between recorded intervals; a link that never carries traffic is not in the frame, so the
per-tier mean is over loaded links only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from simulator.metrics.summary import link_totals, top_by
from simulator.network.graph import natural_key
from simulator.viz.style import TIME_MS_DECIMALS, with_aggregation_note


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


def _bin_edges(t0: float, t1: float, bins: int) -> np.ndarray:
    """`bins` equal time bins over [t0, t1], as their strictly increasing edges: edges that
    fall on the same float are kept once, so a span too short for the floats around t0 to
    resolve (traffic of a tiny collective, a few ulps long) has fewer bins, and a span of
    zero (all traffic in intervals of zero length) has none (a single edge)."""
    return np.unique(np.linspace(t0, t1, bins + 1))


def link_series(
    links: pd.DataFrame, link: str, max_points: int = 2000
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Piecewise-constant utilization of one link (x: breakpoints in s, y: utilization
    from each breakpoint on); binned into `max_points` time-weighted means when longer
    (fewer when the frame's span is too short to hold them; none, a single breakpoint at
    utilization 0, when it is zero: a mean over no time)."""
    df = links[links["link"] == link].sort_values("started_at_s", kind="stable")
    s, e, u = (df[c].to_numpy(dtype=float) for c in ("started_at_s", "finished_at_s", "utilization"))
    if len(s) > max_points:
        t0, t1 = float(links["started_at_s"].min()), float(links["finished_at_s"].max())
        edges = _bin_edges(t0, t1, max_points)
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
    agg = link_totals(links)  # one row per link name
    agg["score"] = agg["bytes"] / agg["capacity"]
    return list(top_by(agg, "score", top)["link"][:top])


def link_utilization_figure(
    links: pd.DataFrame, top: int = 8, max_points: int = 2000, t0_s: float | None = None
) -> go.Figure:
    """Utilization over time of the `top` busiest directed links (step lines); time from
    `t0_s` (the run's start, as the step views count it), else from the first traffic."""
    fig = go.Figure()
    if links.empty:
        fig.update_layout(title="Link utilization (no traffic)")
        return fig
    names = busiest(links, top)
    t0 = links["started_at_s"].min() if t0_s is None else t0_s
    binned = False
    for name in names:
        xs, ys, b = link_series(links, name, max_points)
        binned |= b
        fig.add_trace(
            go.Scatter(
                x=((xs - t0) * 1e3).round(TIME_MS_DECIMALS),
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
        title=title,
        xaxis_title=_time_title(t0_s),
        yaxis_title="utilization (%)",
        yaxis_range=[0, 105],
    )
    return with_aggregation_note(fig, note)


def link_heatmap_frame(links: pd.DataFrame, bins: int = 60) -> pd.DataFrame:
    """Mean utilization of loaded links per medium/tier and time bin (tidy: group,
    bin_start_s, bin_end_s, utilization, links). The mean is over the links of the group that
    carry traffic at some time in the run, time-weighted within the bin. Bins are of
    positive length (`_bin_edges`): fewer than `bins` when the traffic's span is too short
    for them, and no row at all when it is zero (a time-weighted mean over no time)."""
    cols = ["group", "bin_start_s", "bin_end_s", "utilization", "links"]
    if links.empty:
        return pd.DataFrame(columns=cols)
    t0, t1 = float(links["started_at_s"].min()), float(links["finished_at_s"].max())
    edges = _bin_edges(t0, t1, bins)
    if len(edges) < 2:
        return pd.DataFrame(columns=cols)
    grp = links["medium"].astype(str) + " tier " + links["tier"].astype(str)
    out = []
    for group in sorted(grp.unique(), key=natural_key):
        df = links[grp == group]
        n_links = df["link"].nunique()
        s, e, u = (df[c].to_numpy(dtype=float) for c in ("started_at_s", "finished_at_s", "utilization"))
        f = _integral_at(s, e, u, edges)
        util = np.diff(f) / np.diff(edges) / n_links
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


def _time_title(t0_s: float | None) -> str:
    return "time since the first traffic (ms)" if t0_s is None else "time since the run's start (ms)"


def link_heatmap_figure(links: pd.DataFrame, bins: int = 60, t0_s: float | None = None) -> go.Figure:
    """Heatmap: mean utilization of loaded links by medium and tier, in time bins (an
    empty figure saying why when there is no traffic, or it all takes no time); time from
    `t0_s` (the run's start), else from the first bin."""
    hm = link_heatmap_frame(links, bins)
    if hm.empty:
        why = "no traffic" if links.empty else "all traffic takes no time"
        return go.Figure(layout={"title": f"Link utilization by tier ({why})"})
    piv = hm.pivot(index="group", columns="bin_start_s", values="utilization")
    piv = piv.loc[sorted(piv.index, key=natural_key)]
    n_links = hm.groupby("group")["links"].first()
    t0 = piv.columns.min() if t0_s is None else t0_s
    fig = go.Figure(
        go.Heatmap(
            z=(piv.to_numpy() * 100).round(4),
            x=[round((c - t0) * 1e3, TIME_MS_DECIMALS) for c in piv.columns],
            y=[f"{g} ({n_links[g]} links)" for g in piv.index],
            colorscale="Viridis",
            zmin=0,
            zmax=100,
            colorbar_title="%",
            hovertemplate="%{y}<br>from %{x:.3f} ms<br>%{z:.1f}%<extra></extra>",
        )
    )
    n_bins = len(piv.columns)  # fewer than `bins` when the span is too short for them
    note = (
        f"{n_bins} time bin{'s' if n_bins > 1 else ''}; mean over the links of each tier that carry traffic"
    )
    fig.update_layout(
        title=f"Link utilization by medium and tier<br><sub>{note}</sub>",
        xaxis_title=_time_title(t0_s),
        height=max(260, 40 * len(piv.index) + 160),
    )
    return with_aggregation_note(fig, note)


def link_mean_utilization(links: pd.DataFrame, run_time_s: float | None = None) -> pd.Series:
    """Mean utilization per undirected link over the run (max of both directions), indexed by
    (src, dst) tuples: the input of `simulator.viz.topology.topology_figure`.

    `run_time_s` defaults to the span of the links frame; pass the run's simulated time
    (steps frame) to match `summary.json`'s busiest links."""
    if links.empty:
        return pd.Series(dtype=float)
    return pd.Series(mean_utilization_by_link(links, run_time_s), dtype=float)


def mean_utilization_by_link(
    links: pd.DataFrame, run_time_s: float | None = None
) -> dict[tuple[str, str], float]:
    """`link_mean_utilization` as a plain mapping, in the same order.

    Directed links are summed per (src, dst) in name order; an undirected link is keyed by
    its direction met first in that order and takes the larger of its directions' means
    (at least 0; a NaN counts as 0).
    """
    if links.empty:
        return {}
    run = (
        float(links["finished_at_s"].max() - links["started_at_s"].min())
        if run_time_s is None
        else run_time_s
    )
    agg = links.groupby(["src", "dst"]).agg(bytes=("bytes", "sum"), cap=("capacity_bytes_per_s", "first"))
    util = agg["bytes"] / (agg["cap"] * run) if run > 0 else agg["bytes"] * 0.0
    src = agg.index.get_level_values(0).to_numpy(dtype=object)
    dst = agg.index.get_level_values(1).to_numpy(dtype=object)
    # one code per node name, one per undirected pair; pairs numbered in order of first meeting
    names = pd.factorize(np.concatenate([src, dst]))[0].astype(np.int64)
    a, b = names[: len(src)], names[len(src) :]
    pair, first = np.unique(np.minimum(a, b) * (names.max() + 1) + np.maximum(a, b), return_index=True)[:2]
    code = np.searchsorted(pair, np.minimum(a, b) * (names.max() + 1) + np.maximum(a, b))
    order = np.argsort(first, kind="stable")  # pairs in order of their first row
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    v = util.to_numpy(dtype=float)
    best = np.zeros(len(order))
    np.maximum.at(best, rank[code], np.where(v > 0.0, v, 0.0))  # max(0.0, ...) as Python's max
    rows = first[order]
    return dict(zip(zip(src[rows].tolist(), dst[rows].tolist(), strict=True), best.tolist(), strict=True))
