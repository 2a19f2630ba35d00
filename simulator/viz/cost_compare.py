"""Cost figures of the comparison dashboard: speed against cost with the Pareto front,
energy per token, and capex by part.

What is shown: each variant's mean over its seeds (the cost columns of
`simulator.metrics.run_cost` do not depend on the seed; step time may). The x axis is the
cost per million tokens when every variant states its tokens per step, else the cost per
step; the y axis is tokens/s (higher is better) or, without tokens, step time (lower is
better). A variant is on the Pareto front when no other variant is at least as good on
both axes and better on one. A variant whose workload states no tokens (a trace or an
import without `tokens_per_step`) is named in the figure title and its card, with the fix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

#: capex parts in stacking order (columns `capex_<part>_usd`)
CAPEX_PARTS = ("gpus", "servers", "storage", "switches", "nics", "cables")


def _means(table: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Mean of `columns` per variant, variants in table order."""
    order = list(dict.fromkeys(table["variant"].astype(str)))
    cols = [c for c in columns if c in table.columns]
    means = table.assign(variant=table["variant"].astype(str)).groupby("variant", sort=False)[cols].mean()
    return means.reindex(order).reset_index()


def pareto_front(cost: np.ndarray, speed: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """Which points are not dominated: no other point is at least as cheap and at least as
    fast, and strictly better in one of the two.

    Args:
        cost: cost of every point (lower is better).
        speed: speed of every point (tokens/s, higher is better; or step time, lower).
        higher_is_better: whether a larger `speed` is better.
    """
    s = speed if higher_is_better else -speed
    n = len(cost)
    front = np.ones(n, dtype=bool)
    for i in range(n):
        better_eq = (cost <= cost[i]) & (s >= s[i])
        strictly = (cost < cost[i]) | (s > s[i])
        if np.any(better_eq & strictly):
            front[i] = False
    return front


def cost_axes(table: pd.DataFrame) -> tuple[str, str, str, str, bool] | None:
    """(cost column, speed column, cost label, speed label, higher speed is better), or None
    when the table has no cost columns."""
    if "usd_per_mtoken" in table.columns and table["usd_per_mtoken"].notna().all():
        return "usd_per_mtoken", "tokens_per_s", "USD per million tokens", "tokens/s", True
    if "usd_per_step" in table.columns and table["usd_per_step"].notna().all():
        return "usd_per_step", "step_time_s", "USD per step", "step time (s)", False
    return None


#: how to state the tokens of a step, shown wherever a variant has none
TOKENS_FIX = (
    "state them in the scenario: workload: {file: ..., tokens_per_step: N} "
    "(or meta: {tokens_per_step: N} in the trace)"
)


def variants_without_tokens(table: pd.DataFrame) -> list[str]:
    """Variants (in table order) with a cost per step but no cost per token: their workload
    states no tokens per step."""
    if "usd_per_step" not in table.columns:
        return []
    m = _means(table, ["usd_per_step", "usd_per_mtoken"])
    if "usd_per_mtoken" not in m.columns:
        return [str(v) for v in m["variant"]]
    return [str(v) for v in m.loc[m["usd_per_mtoken"].isna(), "variant"]]


def tokens_notice(table: pd.DataFrame) -> str | None:
    """One line naming the variants without cost per token and how to add it, or None."""
    missing = variants_without_tokens(table)
    if not missing:
        return None
    return f"cost per token: tokens not stated for {', '.join(missing)}; {TOKENS_FIX}"


def cost_pareto_figure(table: pd.DataFrame) -> go.Figure:
    """Scatter of every variant's speed against its cost, the Pareto front marked."""
    axes = cost_axes(table)
    if axes is None or table.empty:
        return go.Figure(layout={"title": "Speed against cost (no cost columns: no price table?)"})
    cost_col, speed_col, cost_label, speed_label, higher = axes
    m = _means(table, [cost_col, speed_col])
    front = pareto_front(m[cost_col].to_numpy(float), m[speed_col].to_numpy(float), higher)
    palette = qualitative.Plotly
    fig = go.Figure()
    for i, row in m.iterrows():
        on = bool(front[i])
        fig.add_trace(
            go.Scatter(
                x=[row[cost_col]],
                y=[row[speed_col]],
                mode="markers+text",
                text=[row["variant"] + (" (Pareto)" if on else "")],
                textposition="top center",
                name=row["variant"],
                marker={
                    "size": 16 if on else 11,
                    "color": palette[i % len(palette)],
                    "symbol": "star" if on else "circle",
                    "line": {"width": 2 if on else 0, "color": "black"},
                },
                hovertemplate=f"%{{text}}<br>{cost_label}: %{{x:.4g}}<br>{speed_label}: %{{y:.4g}}"
                "<extra></extra>",
            )
        )
    fm = m[front].sort_values(cost_col)
    fig.add_trace(
        go.Scatter(
            x=fm[cost_col],
            y=fm[speed_col],
            mode="lines",
            line={"dash": "dash", "color": "black", "width": 1},
            name="Pareto front",
            hoverinfo="skip",
        )
    )
    better = "up and left" if higher else "down and left"
    title = f"{speed_label} against {cost_label} (Pareto front: stars and dashed line; better is {better})"
    notice = tokens_notice(table)
    fig.update_layout(
        title=title if notice is None else f"{title}<br><sub>{notice}</sub>",
        xaxis_title=cost_label,
        yaxis_title=speed_label,
        showlegend=False,
    )
    return fig


def energy_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: facility energy per token (J), or per step (kJ) when tokens are not stated."""
    per_token = "energy_per_token_j" in table.columns and table["energy_per_token_j"].notna().all()
    col, label = ("energy_per_token_j", "J per token") if per_token else ("energy_per_step_j", "J per step")
    if col not in table.columns or table.empty:
        return go.Figure(layout={"title": "Energy (no cost columns)"})
    m = _means(table, [col])
    palette = qualitative.Plotly
    fig = go.Figure(
        go.Bar(
            x=m["variant"],
            y=m[col],
            marker_color=[palette[i % len(palette)] for i in range(len(m))],
            texttemplate="%{y:.4s}",
            textposition="auto",
            hovertemplate=f"%{{x}}: %{{y:.4g}} {label}<extra></extra>",
        )
    )
    fig.update_layout(
        title=f"Facility energy ({label}, after PUE)",
        yaxis_title=label,
        xaxis_title="variant",
        showlegend=False,
    )
    return fig


def capex_parts_figure(table: pd.DataFrame) -> go.Figure:
    """Stacked bars: each variant's cluster capex by part (USD)."""
    cols = [f"capex_{p}_usd" for p in CAPEX_PARTS if f"capex_{p}_usd" in table.columns]
    if not cols or table.empty:
        return go.Figure(layout={"title": "Capex by part (no cost columns)"})
    m = _means(table, cols).fillna(0.0)
    fig = go.Figure()
    for col in cols:
        part = col[len("capex_") : -len("_usd")]
        fig.add_trace(
            go.Bar(
                x=m["variant"],
                y=m[col],
                name=part,
                hovertemplate=f"%{{x}} {part}: %{{y:,.0f}} USD<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Cluster capex by part",
        yaxis_title="USD",
        xaxis_title="variant",
        legend_title="part",
    )
    return fig


def cost_cards(table: pd.DataFrame) -> list[tuple[str, str]]:
    """Cards: each variant's cost per million tokens (or per step) and energy per token."""
    axes = cost_axes(table)
    if axes is None:
        return []
    cols = ["usd_per_mtoken", "usd_per_step", "energy_per_token_j", "energy_per_step_j"]
    m = _means(table, cols)
    no_tokens = set(variants_without_tokens(table))
    cards = []
    for _, row in m.iterrows():
        if row["variant"] not in no_tokens and "usd_per_mtoken" in m.columns:
            usd = float(row["usd_per_mtoken"])
            value = f"${usd:,.2f} per Mtoken" if usd >= 1 else f"${usd:.3g} per Mtoken"
            if "energy_per_token_j" in m.columns:
                value += f" <span class='s'>{row['energy_per_token_j']:.3g} J/token</span>"
        else:
            value = (
                f"${row['usd_per_step']:.4g} per step <span class='s'>{row['energy_per_step_j']:.4g} J/step; "
                f"tokens not stated: {TOKENS_FIX}</span>"
            )
        cards.append((f"{row['variant']}: cost", value))
    return cards
