"""Where the wall time of a run under failures went, and its incidents with their causes.

* `wall_time_parts`: every seed's (and variant's) wall time split into parts that add up to
  it, from the `runs` frame (`simulator.faults.metrics` glossary): kept training at the
  healthy step time (split into compute, exposed communication and in-step idle by the
  step's own shares when known), slowdown of degraded steps, lost work (recomputed),
  checkpoint stalls, restarts, waiting for hosts (in repair, or queued for replacement).
* `wall_time_figure`: those parts as stacked bars per seed, or per variant as the mean
  over seeds with the 95% Student-t interval of the goodput, the kept-training total.
* `incident_timeline_figure`: each failure, restart, checkpoint, repair and degradation as
  a marker on the run's time axis (hover: cause, component, duration, lost work), the
  legend giving each kind's count, and under it the running goodput and ETTR (kept and
  productive time over the time elapsed) through the run.

Simplified: the split of kept training into compute / exposed communication / idle is the
healthy step's (the step simulation's `summary.json`), applied to every kept step; a sweep
whose step times come from constants has no split. Incidents, segments and the curves are
those of the first seed (the frames a run keeps).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from simulator.faults.metrics import t_interval
from simulator.viz.style import color_of, with_aggregation_note

#: Parts of the wall time, in stacking order, with their colours.
PARTS = {
    "compute": "#4C78A8",
    "exposed communication": "#F58518",
    "idle in step (bubbles, waits)": "#BBBBBB",
    "kept training": "#4C78A8",
    "slowdown (degraded steps)": "#9ECAE9",
    "lost work (recomputed)": "#D62728",
    "checkpoint stall": "#8C6D31",
    "restart": "#FF9DA6",
    "waiting for hosts": "#B279A2",
    "other": "#333333",
}

#: The parts that make up the goodput (kept training at the healthy step time).
KEPT_PARTS = ("compute", "exposed communication", "idle in step (bubbles, waits)", "kept training")

INCIDENT_COLORS = {
    "failure": "#d62728",
    "checkpoint": "#8C6D31",
    "restart": "#ff7f0e",
    "repair": "#2ca02c",
    "degradation": "#9467bd",
    "rejoin": "#17becf",
}


def step_shares(summary: dict[str, Any]) -> dict[str, float] | None:
    """Compute / exposed communication / idle shares of the healthy step, or None."""
    step = summary.get("step_time_s")
    if not isinstance(step, (int, float)) or not step > 0:
        return None
    parts: dict[str, float] = {}
    for key in ("compute_s", "exposed_comm_s", "idle_s"):
        v = summary.get(key)
        if not isinstance(v, (int, float)):
            return None
        parts[key] = float(v)
    total = sum(parts.values())
    return {k: v / total for k, v in parts.items()} if total > 0 else None


def wall_time_parts(runs: pd.DataFrame, shares: dict[str, float] | None = None) -> pd.DataFrame:
    """Seconds of each part of the wall time, one row per row of `runs` (same index).

    Args:
        runs: the `runs` frame (wall_s, steps_kept, healthy_step_s, useful_s, recompute_s,
            checkpoint_s, restart_s, restart_wait_s, rejoin_s).
        shares: the healthy step's compute / exposed / idle shares (`step_shares`); without
            them kept training is one part.

    The parts add up to `wall_s`; `other` holds what no phase explains (zero for runs of
    this simulator, kept so that a sum that does not close shows instead of hiding).
    """

    def col(name: str) -> pd.Series:
        return runs[name].astype(float).fillna(0.0) if name in runs else pd.Series(0.0, index=runs.index)

    kept = col("steps_kept") * col("healthy_step_s")
    out = pd.DataFrame(index=runs.index)
    if shares is not None:
        out["compute"] = kept * shares["compute_s"]
        out["exposed communication"] = kept * shares["exposed_comm_s"]
        out["idle in step (bubbles, waits)"] = kept * shares["idle_s"]
    else:
        out["kept training"] = kept
    out["slowdown (degraded steps)"] = (col("useful_s") - kept).clip(lower=0.0)
    out["lost work (recomputed)"] = col("recompute_s")
    out["checkpoint stall"] = col("checkpoint_s")
    out["restart"] = (col("restart_s") - col("restart_wait_s")).clip(lower=0.0) + col("rejoin_s")
    out["waiting for hosts"] = col("restart_wait_s")  # in repair or queued for replacement
    other = col("wall_s") - out.sum(axis=1)
    out["other"] = other.where(other.abs() > 1e-6 * col("wall_s").abs(), 0.0)
    return out


def _labels(runs: pd.DataFrame, axes: list[str]) -> pd.Series:
    if axes:
        return runs[axes].astype(str).apply(lambda r: ", ".join(f"{a}={v}" for a, v in r.items()), axis=1)
    return "seed " + runs["seed"].astype(str) if "seed" in runs else pd.Series(runs.index.astype(str))


def wall_time_figure(runs: pd.DataFrame, shares: dict[str, float] | None = None) -> go.Figure:
    """Stacked wall-time parts (% of wall time): per seed for one run, per variant (mean over
    seeds, with the goodput's 95% interval) for a study."""
    axes = [a for a in runs.attrs.get("axes", []) if a in runs]
    parts = wall_time_parts(runs, shares).div(runs["wall_s"].astype(float), axis=0) * 100
    parts = parts.loc[:, (parts.abs() > 0).any()]
    label = _labels(runs, axes)
    kept_cols = [c for c in parts if c in KEPT_PARTS]
    if axes:
        mean = parts.groupby(label, sort=False).mean()
        intervals = [
            t_interval(parts.loc[label == k, kept_cols].sum(axis=1).to_numpy() / 100) for k in mean.index
        ]
        x = list(mean.index)
        title = "Wall time by part, mean over seeds per variant (goodput: 95% t-interval)"
    else:
        mean, intervals, x = parts, [], list(label)
        title = "Wall time by part, per seed"
    fig = go.Figure()
    for part in mean.columns:
        fig.add_trace(
            go.Bar(
                name=part,
                x=x,
                y=mean[part].round(4).to_numpy(),
                marker_color=PARTS.get(part, color_of(part)),
                hovertemplate="%{x}: %{y:.2f}% of wall time<extra>" + part + "</extra>",
            )
        )
    if intervals:
        m = np.array([i[0] for i in intervals]) * 100
        lo = np.clip([i[1] * 100 for i in intervals], 0, 100)
        hi = np.clip([i[2] * 100 for i in intervals], 0, 100)
        fig.add_trace(
            go.Scatter(
                name="goodput, 95% interval",
                x=x,
                y=m.round(4),
                mode="markers",
                marker={"color": "#000", "size": 6, "symbol": "line-ew-open"},
                error_y={"type": "data", "symmetric": False, "array": hi - m, "arrayminus": m - lo},
            )
        )
    fig.update_layout(
        title=title,
        barmode="stack",
        yaxis_title="% of wall time",
        yaxis_range=[0, 100],
        legend_traceorder="normal",
        height=420,
    )
    return fig


def _incident_hover(df: pd.DataFrame) -> list[str]:
    def text(row: Any) -> str:
        bits = [f"{row['time_s'] / 3600:.3f} h"]
        for col, name in (("cause", "cause"), ("component_class", "class"), ("component", "component")):
            v = row.get(col)
            if isinstance(v, str) and v:
                bits.append(f"{name} {v}")
        for col, name in (("duration_s", "duration"), ("lost_work_s", "lost work")):
            v = row.get(col)
            if isinstance(v, (int, float)) and np.isfinite(v) and v > 0:
                bits.append(f"{name} {v:,.0f} s")
        return "<br>".join(bits)

    return [text(r) for r in df.to_dict("records")]


def _running_ratios(segments: pd.DataFrame, healthy_step_s: float | None) -> tuple[np.ndarray, ...]:
    """Hours elapsed, running goodput and running ETTR (%) at the end of each segment."""
    seg = segments.sort_values("start_s", kind="stable")
    t0 = float(seg["start_s"].min())
    end = seg["end_s"].to_numpy(dtype=float)
    elapsed = np.maximum(end - t0, 1e-12)
    productive = np.cumsum(seg["useful_s"].fillna(0).to_numpy(dtype=float))
    ettr = productive / elapsed * 100
    if healthy_step_s and "steps_kept" in seg:
        kept = np.cumsum(seg["steps_kept"].fillna(0).to_numpy(dtype=float)) * healthy_step_s
        goodput = kept / elapsed * 100
    else:
        goodput = np.full(len(seg), np.nan)
    return (end - t0) / 3600, goodput, ettr


def incident_timeline_figure(
    incidents: pd.DataFrame, segments: pd.DataFrame | None = None, healthy_step_s: float | None = None
) -> go.Figure:
    """Incidents of one run as markers on its time axis, with the running goodput and ETTR.

    Every incident is drawn (a marker each, however short); the legend gives each kind's
    count. With `segments`, a second panel shows the running ratios (kept training time and
    productive time over the time elapsed).
    """
    has_seg = segments is not None and not segments.empty
    fig = make_subplots(
        rows=2 if has_seg else 1,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.1,
        row_heights=[0.45, 0.55] if has_seg else None,
    )
    kinds = list(dict.fromkeys(incidents["kind"].astype(str))) if not incidents.empty else []
    for kind in kinds:
        df = incidents[incidents["kind"].astype(str) == kind]
        fig.add_trace(
            go.Scatter(
                name=f"{kind} ({len(df):,})",
                x=(df["time_s"].to_numpy(dtype=float) / 3600).round(6),
                y=[kind] * len(df),
                mode="markers",
                marker={
                    "color": INCIDENT_COLORS.get(kind, color_of(kind)),
                    "size": 9 if len(df) < 200 else 5,
                    "symbol": "x" if kind == "failure" else "line-ns-open" if len(df) >= 200 else "circle",
                },
                text=_incident_hover(df),
                hovertemplate="%{text}<extra>" + kind + "</extra>",
                meta={"kind": kind, "count": len(df)},
            ),
            row=1,
            col=1,
        )
    if has_seg and segments is not None:
        hours, goodput, ettr = _running_ratios(segments, healthy_step_s)
        for name, y, color in (("running goodput", goodput, "#1f77b4"), ("running ETTR", ettr, "#2ca02c")):
            if np.isnan(y).all():
                continue
            fig.add_trace(
                go.Scatter(name=name, x=hours.round(6), y=y.round(4), mode="lines", line={"color": color}),
                row=2,
                col=1,
            )
        fig.update_yaxes(title_text="% of time elapsed", row=2, col=1)
    fig.update_yaxes(type="category", row=1, col=1)
    fig.update_xaxes(title_text="run time (h)", row=2 if has_seg else 1, col=1)
    counts = ", ".join(f"{(incidents['kind'] == k).sum():,} {k}" for k in kinds)
    fig.update_layout(
        title=f"Incidents over the run ({counts or 'none'})"
        + ("<br><sub>below: running goodput and ETTR since the start</sub>" if has_seg else ""),
        height=560 if has_seg else 320,
        hovermode="closest",
    )
    return with_aggregation_note(fig, "")
