"""Figures of run-level studies (one run's incidents and wall time: `simulator.viz.goodput`).

* `sweep_figure`: a metric (goodput by default) against a swept parameter, mean over seeds
  with its 95% Student-t interval (`simulator.faults.metrics.aggregate`), every seed's
  value as a faint dot.

Simplified: intervals of fractions (goodput, ETTR) are clipped to [0, 1].
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from simulator.faults.metrics import aggregate

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
