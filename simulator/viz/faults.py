"""Figures of failures: one run's incidents on its time axis, and run-level studies.

* `incidents_figure`: failures, checkpoints, restarts and repairs of one run (the
  `incidents` / `segments` frames of a run-level simulation) as bars on a time axis in
  hours, with cumulative useful work against the ideal.
* `sweep_figure`: a metric (goodput by default) against a swept parameter, mean over seeds
  with its 95% Student-t interval (`simulator.faults.metrics.aggregate`), every seed's
  value as a faint dot.

Simplified: incidents of a kind past `max_markers` are sampled evenly (the title says so);
intervals of fractions (goodput, ETTR) are clipped to [0, 1].
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from simulator.faults.metrics import aggregate
from simulator.viz.style import color_of, with_aggregation_note

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


_FRACTIONS = ("goodput", "ettr")


def _add_mean_line(
    fig: go.Figure, g: pd.DataFrame, x: str, metric: str, name: str, color: str, has_ci: bool
) -> None:
    """A numeric axis: the mean over seeds as a line, on a band of its 95% interval."""
    mean, lo, hi = g[f"{metric}_mean"], g[f"{metric}_lo"], g[f"{metric}_hi"]
    if has_ci:
        fig.add_trace(
            go.Scatter(
                x=list(g[x]) + list(g[x])[::-1],
                y=list(hi) + list(lo)[::-1],
                mode="lines",
                fill="toself",
                fillcolor=_rgba(color, 0.2),
                line={"width": 0},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=name,
                name=f"{name} 95% CI",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=g[x],
            y=mean,
            mode="lines+markers",
            name=name,
            legendgroup=name,
            line={"color": color},
            customdata=list(zip(lo, hi, g["n"], strict=True)),
            hovertemplate=f"{x}=%{{x}}: mean %{{y:.4f}}<br>95% interval "
            "[%{customdata[0]:.4f}, %{customdata[1]:.4f}], "
            "%{customdata[2]} seeds<extra>" + name + "</extra>",
        )
    )


def _add_mean_bars(
    fig: go.Figure, g: pd.DataFrame, x: str, metric: str, name: str, color: str, has_ci: bool
) -> None:
    """A categorical axis: the mean over seeds as bars, with its 95% interval as error bars."""
    mean, lo, hi = g[f"{metric}_mean"], g[f"{metric}_lo"], g[f"{metric}_hi"]
    err = (
        {"type": "data", "symmetric": False, "array": list(hi - mean), "arrayminus": list(mean - lo)}
        if has_ci
        else None
    )
    fig.add_trace(
        go.Bar(x=[str(v) for v in g[x]], y=mean, name=name, marker_color=color, legendgroup=name, error_y=err)
    )


def _add_seed_points(
    fig: go.Figure, sub: pd.DataFrame, x: str, metric: str, name: str, color: str, numeric: bool
) -> None:
    """Every seed's value as a small faint marker."""
    xs = sub[x] if numeric else sub[x].astype(str)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=sub[metric],
            mode="markers",
            showlegend=False,
            legendgroup=name,
            name=f"{name} seeds",
            marker={"color": _rgba(color, 0.45), "size": 5},
            hovertemplate=f"{x}=%{{x}}: %{{y:.4f}} (one seed)<extra>{name}</extra>",
        )
    )


def _sweep_title(agg: pd.DataFrame, x: str, metric: str, points: bool) -> str:
    """`metric vs x (what the line and band are; dots: single seeds)`."""
    single = bool(len(agg)) and bool((agg["n"] < 2).any())
    what = (
        "one seed per point: no interval"
        if single
        else "mean, 95% t-interval over seeds" + (" clipped to [0, 1]" if metric in _FRACTIONS else "")
    )
    return f"{metric} vs {x} ({what}; dots: single seeds)" if points else f"{metric} vs {x} ({what})"


def sweep_figure(
    runs: pd.DataFrame,
    x: str | None = None,
    color: str | None = None,
    metric: str = "goodput",
    points: bool = True,
) -> go.Figure:
    """Metric (default goodput) vs a swept parameter: mean line and 95% t-interval band.

    A numeric swept parameter gives lines with a band, a categorical one grouped bars with
    error bars. With `points`, every seed's value is drawn as a small faint marker. Groups
    with a single seed have no interval (the title says so). Intervals of fractions
    (goodput, ETTR) are clipped to [0, 1], where a t-interval over few seeds can spill.

    Args:
        runs: tidy per-seed rows (`run_study` output); axis columns named in
            `runs.attrs['axes']` unless `x` / `color` are given.
        x: column on the x axis (default: the first axis, else 'variant').
        color: column splitting lines (default: the second axis, if any).
        metric: summary column to plot.
        points: draw each seed's value too.
    """
    axes = list(runs.attrs.get("axes", []))
    x = x or (axes[0] if axes else "variant")
    if color is None and len(axes) > 1:
        color = axes[1] if axes[1] != x else None
    by = [c for c in (color, x) if c]
    agg = aggregate(runs, by=by, metrics=[metric])
    if metric in _FRACTIONS:
        agg[f"{metric}_lo"] = agg[f"{metric}_lo"].clip(lower=0.0)
        agg[f"{metric}_hi"] = agg[f"{metric}_hi"].clip(upper=1.0)
    fig = go.Figure()
    groups = agg.groupby(color, sort=False) if color else [(None, agg)]
    numeric = pd.api.types.is_numeric_dtype(agg[x])
    for i, (key, g) in enumerate(groups):
        c = _COLORS[i % len(_COLORS)]
        g = g.sort_values(x) if numeric else g
        name = f"{color}={key}" if color else metric
        lo, hi = g[f"{metric}_lo"], g[f"{metric}_hi"]
        has_ci = bool((g["n"] > 1).all() and lo.notna().all() and hi.notna().all())
        add_mean = _add_mean_line if numeric else _add_mean_bars
        add_mean(fig, g, x, metric, name, c, has_ci)
        if points:
            _add_seed_points(
                fig, runs if not color else runs[runs[color] == key], x, metric, name, c, numeric
            )
    fig.update_layout(
        title=_sweep_title(agg, x, metric, points),
        xaxis_title=x,
        yaxis_title=metric,
        template="plotly_white",
        barmode="group",
    )
    if numeric and len(agg):
        fig.update_xaxes(tickvals=sorted(agg[x].unique()))
    return fig


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
    for kind in kinds:
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
                marker_color=_INCIDENT_COLORS.get(kind, color_of(kind)),
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
    return with_aggregation_note(fig, "; ".join(notes))
