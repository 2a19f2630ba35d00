"""Figures comparing variants, and the comparison dashboard.

Every figure is a pure function of the comparison table or of frames of several runs
stacked with a `variant` column (`simulator.compare.concat_frames`); variants keep the
order in which they appear in their input (the compare file's order), never an order
that depends on which run finished first. The dashboard is one self-contained HTML page
(`simulator.viz.dashboard.page`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from simulator.metrics.summary import busiest_links
from simulator.viz.dashboard import page
from simulator.viz.figures import PALETTE, breakdown_frame


def _order(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(df["variant"].astype(str)))


def _bars(table: pd.DataFrame, column: str, title: str, axis: str, scale: float = 1e3) -> go.Figure:
    if column not in table.columns or table.empty:
        return go.Figure(layout={"title": f"{title} (not available)"})
    df = table.assign(value=table[column] * scale)
    fig = px.bar(
        df,
        x="variant",
        y="value",
        color="variant",
        text_auto=".3s",
        category_orders={"variant": _order(df)},
        title=title,
    )
    fig.update_layout(yaxis_title=axis, xaxis_title="variant", showlegend=False)
    return fig


def step_time_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: mean step time of every variant (ms)."""
    return _bars(table, "step_time_s", "Step time per variant", "step time (ms)")


def exposed_comm_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: communication not hidden under compute, per variant (ms)."""
    return _bars(
        table, "exposed_comm_s", "Exposed communication per variant", "exposed communication (ms)"
    )


def cost_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: estimated network capex per variant (USD), when the table has it."""
    return _bars(
        table, "network_capex_usd", "Estimated network capex per variant", "USD", scale=1.0
    )


def variant_breakdown_frame(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean step breakdown of each variant (tidy: variant, part, seconds).

    Per variant, `simulator.viz.figures.breakdown_frame` gives each simulated rank's mean
    compute / exposed comm by tag / idle; ranks are averaged weighted by how many ranks
    each stands for, so the parts add up to the variant's step time.
    """
    if steps.empty:
        return pd.DataFrame(columns=["variant", "part", "seconds"])
    out = []
    for variant in _order(steps):
        sub = steps[steps["variant"] == variant].drop(columns="variant")
        tidy = breakdown_frame(sub)
        weights = sub.groupby("rank")["weight"].first() if "weight" in sub.columns else None
        w = (
            tidy["rank"].map(weights).fillna(1.0)
            if weights is not None
            else pd.Series(1.0, index=tidy.index)
        )
        tidy = tidy.assign(w=w.to_numpy(dtype=float), ws=tidy["seconds"] * w.to_numpy(dtype=float))
        agg = tidy.groupby("part", sort=False)[["ws", "w"]].sum()
        for part, row in agg.iterrows():
            out.append({"variant": variant, "part": part, "seconds": float(row["ws"] / row["w"])})
    df = pd.DataFrame(out)
    # every variant shows every part (0 where it has none), parts in a stable order
    parts = list(dict.fromkeys(df["part"]))
    parts = ["compute", *sorted(p for p in parts if p not in ("compute", "idle")), "idle"]
    parts = [p for p in parts if p in set(df["part"])]
    full = pd.MultiIndex.from_product([_order(steps), parts], names=["variant", "part"])
    return df.set_index(["variant", "part"]).reindex(full, fill_value=0.0).reset_index()


def breakdown_compare_figure(steps: pd.DataFrame) -> go.Figure:
    """Stacked bars side by side: where each variant's step time goes."""
    tidy = variant_breakdown_frame(steps)
    if tidy.empty:
        return go.Figure(layout={"title": "Step time breakdown (no steps)"})
    tidy = tidy.assign(ms=tidy["seconds"] * 1e3)
    parts = list(dict.fromkeys(tidy["part"]))
    colors = {p: PALETTE.get(p.replace("exposed ", ""), None) for p in parts}
    fig = px.bar(
        tidy,
        x="variant",
        y="ms",
        color="part",
        barmode="stack",
        category_orders={"variant": _order(tidy), "part": parts},
        color_discrete_map={p: c for p, c in colors.items() if c},
        title="Step time breakdown per variant (weighted mean over ranks and steps)",
    )
    fig.update_layout(yaxis_title="ms", xaxis_title="variant", legend_title="part")
    return fig


def busiest_links_frame(links: pd.DataFrame, steps: pd.DataFrame, top: int = 5) -> pd.DataFrame:
    """The `top` busiest directed links of each variant (mean utilization over its run)."""
    cols = ["variant", "link", "medium", "tier", "bytes", "mean_utilization", "peak_utilization"]
    if links.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for variant in _order(links):
        st = steps[steps["variant"] == variant]
        run_time = (
            float(st["finished_at_s"].max() - st["started_at_s"].min()) if not st.empty else 0.0
        )
        bl = busiest_links(links[links["variant"] == variant], run_time, top)
        out.append(bl.assign(variant=variant))
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def busiest_links_figure(links: pd.DataFrame, steps: pd.DataFrame, top: int = 5) -> go.Figure:
    """Horizontal bars: each variant's busiest links, colored by variant."""
    bl = busiest_links_frame(links, steps, top)
    if bl.empty:
        return go.Figure(layout={"title": "Busiest links (no link records)"})
    bl = bl.assign(
        label=bl["variant"] + ": " + bl["link"],
        utilization=bl["mean_utilization"] * 100,
        peak=bl["peak_utilization"] * 100,
    )
    fig = px.bar(
        bl,
        x="utilization",
        y="label",
        color="variant",
        orientation="h",
        category_orders={"variant": _order(bl), "label": list(bl["label"])},
        hover_data={"medium": True, "tier": True, "peak": ":.1f", "label": False},
        title=f"Busiest {top} links of each variant (mean utilization over the run)",
    )
    fig.update_layout(
        xaxis_title="mean utilization (%)",
        yaxis_title="",
        xaxis_range=[0, 105],
        height=max(320, 26 * len(bl) + 140),
    )
    return fig


def _ms(v: Any) -> str:
    return (
        "n/a" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{float(v) * 1e3:.2f} ms"
    )


def comparison_cards(table: pd.DataFrame) -> list[tuple[str, str]]:
    """Headline cards: each variant's step time (and capex when known)."""
    cards = []
    for _, row in table.iterrows():
        value = _ms(row.get("step_time_s"))
        rel = row.get("relative_step_time")
        if rel is not None and not np.isnan(rel) and row.name != table.index[0]:
            value += f" ({rel:.2f}x)"
        cards.append((f"{row['variant']}: step time", value))
    if "network_capex_usd" in table.columns:
        for _, row in table.iterrows():
            cards.append(
                (f"{row['variant']}: network capex", f"${row['network_capex_usd'] / 1e6:.2f}M")
            )
    return cards


def comparison_figures(table: pd.DataFrame, frames: dict[str, pd.DataFrame]) -> list[go.Figure]:
    figs = [step_time_figure(table), exposed_comm_figure(table)]
    steps = frames.get("steps", pd.DataFrame())
    if not steps.empty:
        figs.append(breakdown_compare_figure(steps))
    links = frames.get("links", pd.DataFrame())
    if not links.empty:
        figs.append(busiest_links_figure(links, steps))
    if "network_capex_usd" in table.columns:
        figs.append(cost_figure(table))
    return figs


def comparison_html(
    name: str, table: pd.DataFrame, frames: dict[str, pd.DataFrame], notes: Sequence[str] = ()
) -> str:
    """The comparison dashboard: cards, then bars, breakdowns and busiest links per variant."""
    notes = list(notes) + [
        "Relative step time is each variant's over the first variant's. Network capex is an "
        "estimate from an illustrative price table (see topologies/prices.yaml)."
        if "network_capex_usd" in table.columns
        else "Relative step time is each variant's over the first variant's."
    ]
    return page(
        f"clustersim compare: {name}",
        comparison_cards(table),
        comparison_figures(table, frames),
        notes,
    )
