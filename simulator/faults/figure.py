"""Figures of run-level studies (pure `DataFrame -> plotly Figure`)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from simulator.faults.metrics import aggregate

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def sweep_figure(runs: pd.DataFrame, x: str | None = None, color: str | None = None,
                 metric: str = "goodput") -> go.Figure:
    """Metric (default goodput) vs a swept parameter: mean line and 95% t-interval band.

    Args:
        runs: tidy per-seed rows (`run_study` output); axis columns named in
            `runs.attrs['axes']` unless `x` / `color` are given.
        x: column on the x axis (default: the first axis, else 'variant').
        color: column splitting lines (default: the second axis, if any).
        metric: summary column to plot.
    """
    axes = list(runs.attrs.get("axes", []))
    x = x or (axes[0] if axes else "variant")
    if color is None and len(axes) > 1:
        color = axes[1] if axes[1] != x else None
    by = [c for c in (color, x) if c]
    agg = aggregate(runs, by=by, metrics=[metric])
    fig = go.Figure()
    groups = agg.groupby(color, sort=False) if color else [(None, agg)]
    numeric = pd.api.types.is_numeric_dtype(agg[x])
    for i, (key, g) in enumerate(groups):
        c = _COLORS[i % len(_COLORS)]
        g = g.sort_values(x) if numeric else g
        name = f"{color}={key}" if color else metric
        mean, lo, hi = g[f"{metric}_mean"], g[f"{metric}_lo"], g[f"{metric}_hi"]
        if numeric:
            fig.add_trace(go.Scatter(x=list(g[x]) + list(g[x])[::-1], y=list(hi) + list(lo)[::-1],
                                     fill="toself", fillcolor=_rgba(c, 0.2), line={"width": 0},
                                     hoverinfo="skip", showlegend=False, name=f"{name} 95% CI"))
            fig.add_trace(go.Scatter(x=g[x], y=mean, mode="lines+markers", name=name, line={"color": c}))
        else:
            fig.add_trace(go.Bar(x=[str(v) for v in g[x]], y=mean, name=name, marker_color=c,
                                 error_y={"type": "data", "symmetric": False,
                                          "array": list(hi - mean), "arrayminus": list(mean - lo)}))
    fig.update_layout(title=f"{metric} vs {x} (mean, 95% t-interval over seeds)",
                      xaxis_title=x, yaxis_title=metric, template="plotly_white",
                      barmode="group")
    return fig
