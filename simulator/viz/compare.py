"""Figures comparing variants, and the comparison dashboard.

Every figure is a pure function of the comparison table or of frames of several runs
stacked with a `variant` column (`simulator.study.compare.concat_frames`); variants keep the
order in which they appear in their input (the compare file's order), never an order
that depends on which run finished first. The dashboard is one HTML page
(`simulator.viz.dashboard.page`) loading the folder's one copy of plotly.js.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.colors import qualitative

from simulator.faults.metrics import t_interval
from simulator.metrics.summary import busiest_links
from simulator.viz.breakdown import breakdown_frame
from simulator.viz.cost_compare import (
    capex_parts_figure,
    cost_axes,
    cost_cards,
    cost_pareto_figure,
    energy_figure,
)
from simulator.viz.dashboard import page
from simulator.viz.style import PALETTE

#: how the notes name the price table when a comparison names none of its own
DEFAULT_PRICES_NAME = "topologies/prices.yaml"


def _order(df: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(df["variant"].astype(str)))


def variant_stats(table: pd.DataFrame, column: str, confidence: float = 0.95) -> pd.DataFrame:
    """Per variant (in table order): `n` rows (seeds), `mean`, and the two-sided Student-t
    interval of the mean `lo`, `hi` (`simulator.faults.metrics.t_interval`; NaN with a
    single seed). Missing values are left out."""
    rows = []
    for variant in _order(table):
        x = table.loc[table["variant"].astype(str) == variant, column].astype(float).dropna()
        mean, lo, hi = t_interval(x, confidence)
        rows.append({"variant": variant, "n": len(x), "mean": mean, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=["variant", "n", "mean", "lo", "hi"])


def n_seeds(table: pd.DataFrame) -> int:
    """Most rows (seeds) any variant has in the comparison table."""
    return int(table.groupby(table["variant"].astype(str)).size().max()) if len(table) else 0


def _bars(table: pd.DataFrame, column: str, title: str, axis: str, scale: float = 1e3) -> go.Figure:
    """One bar per variant: the value, or with several seeds the mean and its 95% interval."""
    if column not in table.columns or table.empty:
        return go.Figure(layout={"title": f"{title} (not available)"})
    st = variant_stats(table, column)
    several = bool((st["n"] > 1).any())
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, row in st.iterrows():
        mean = row["mean"] * scale
        err = None
        if several and row["n"] > 1:
            err = {
                "type": "data",
                "symmetric": False,
                "array": [(row["hi"] - row["mean"]) * scale],
                "arrayminus": [(row["mean"] - row["lo"]) * scale],
            }
        fig.add_trace(
            go.Bar(
                x=[row["variant"]],
                y=[mean],
                name=row["variant"],
                marker_color=palette[i % len(palette)],
                error_y=err,
                texttemplate="%{y:.3s}",
                textposition="auto",
                hovertemplate=f"%{{x}}: %{{y:.4g}} {axis}"
                + (
                    f"<br>95% interval [{row['lo'] * scale:.4g}, {row['hi'] * scale:.4g}], {row['n']} seeds"
                    if err
                    else ""
                )
                + "<extra></extra>",
            )
        )
    if several:
        title += f" (mean, 95% t-interval over up to {int(st['n'].max())} seeds)"
    else:
        title += " (one seed per variant: no interval)"
    fig.update_layout(
        title=title,
        yaxis_title=axis,
        xaxis_title="variant",
        showlegend=False,
        xaxis={"categoryorder": "array", "categoryarray": list(st["variant"])},
    )
    return fig


def step_time_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: mean step time of every variant (ms)."""
    return _bars(table, "step_time_s", "Step time per variant", "step time (ms)")


def exposed_comm_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: communication not hidden under compute, per variant (ms)."""
    return _bars(table, "exposed_comm_s", "Exposed communication per variant", "exposed communication (ms)")


def cost_figure(table: pd.DataFrame) -> go.Figure:
    """Bars: estimated network capex per variant (USD), when the table has it (one value
    per variant: the topology does not depend on the seed)."""
    one = table.drop_duplicates("variant") if "variant" in table.columns else table
    fig = _bars(one, "network_capex_usd", "Estimated network capex per variant", "USD", scale=1.0)
    return fig.update_layout(title=str(fig.layout.title.text).split(" (")[0])


def variant_breakdown_frame(steps: pd.DataFrame) -> pd.DataFrame:
    """Mean step breakdown of each variant (tidy: variant, part, seconds).

    Per variant, `simulator.viz.breakdown.breakdown_frame` gives each simulated rank's mean
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
        w = tidy["rank"].map(weights).fillna(1.0) if weights is not None else pd.Series(1.0, index=tidy.index)
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
        run_time = float(st["finished_at_s"].max() - st["started_at_s"].min()) if not st.empty else 0.0
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


def _first(table: pd.DataFrame, column: str) -> str:
    return f"{float(table[column].iloc[0]):g}" if column in table.columns else "?"


def _ms(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{float(v) * 1e3:.2f} ms"


def _has(table: pd.DataFrame, column: str) -> bool:
    """Whether some variant has a value in `column` (a cluster run has no step time)."""
    return column in table.columns and bool(table[column].notna().any())


#: figures of runs of several jobs or of a cluster over days: (column, title, axis, scale)
_RUN_FIGURES = (
    ("gpu_utilization", "GPU utilization per variant", "%", 100.0),
    ("mean_queueing_delay_s", "Mean queueing delay per variant", "hours", 1 / 3600),
    ("median_jct_s", "Median job completion time per variant", "hours", 1 / 3600),
    ("goodput", "Goodput per variant", "%", 100.0),
)


def comparison_cards(table: pd.DataFrame) -> list[tuple[str, str]]:
    """Headline cards: each variant's step time (mean over seeds when there are several,
    relative to the first variant), or a cluster run's GPU utilization and median job
    completion time, and capex when known."""
    cards = []
    st = variant_stats(table, "step_time_s") if _has(table, "step_time_s") else None
    for i, variant in enumerate(_order(table)):
        if st is None:
            cards += _run_cards(table, variant)
            continue
        row = st.iloc[i]
        value = _ms(row["mean"])
        if row["n"] > 1:
            value += (
                f" <span class='s'>± {(row['hi'] - row['mean']) * 1e3:.2f} ms, {int(row['n'])} seeds</span>"
            )
        if i > 0 and st.iloc[0]["mean"] > 0:
            value += f" ({row['mean'] / st.iloc[0]['mean']:.2f}x)"
        cards.append((f"{variant}: step time", value))
    if "network_capex_usd" in table.columns:
        capex = table.groupby(table["variant"].astype(str), sort=False)["network_capex_usd"].first()
        for variant in _order(table):
            cards.append((f"{variant}: network capex", f"${capex[variant] / 1e6:.2f}M"))
    return cards + cost_cards(table)


def _run_cards(table: pd.DataFrame, variant: str) -> list[tuple[str, str]]:
    """A variant without a step: its GPU utilization and median job completion time."""
    rows = table[table["variant"].astype(str) == variant]
    cards = []
    if _has(rows, "gpu_utilization"):
        cards.append((f"{variant}: GPU utilization", f"{float(rows['gpu_utilization'].mean()) * 100:.1f}%"))
    if _has(rows, "median_jct_s"):
        cards.append((f"{variant}: median JCT", f"{float(rows['median_jct_s'].mean()) / 3600:.2f} h"))
    return cards or [(f"{variant}: step time", "n/a")]


def comparison_figures(table: pd.DataFrame, frames: dict[str, pd.DataFrame]) -> list[go.Figure]:
    """The comparison dashboard's figures, in page order, from the table and the frames present."""
    figs = []
    if _has(table, "step_time_s") or not any(_has(table, c) for c, *_ in _RUN_FIGURES):
        figs += [step_time_figure(table), exposed_comm_figure(table)]
    figs += [_bars(table, c, title, axis, scale) for c, title, axis, scale in _RUN_FIGURES if _has(table, c)]
    steps = frames.get("steps", pd.DataFrame())
    if not steps.empty:
        figs.append(breakdown_compare_figure(steps))
    links = frames.get("links", pd.DataFrame())
    if not links.empty:
        figs.append(busiest_links_figure(links, steps))
    if "network_capex_usd" in table.columns:
        figs.append(cost_figure(table))
    if cost_axes(table) is not None:
        figs += [cost_pareto_figure(table), energy_figure(table), capex_parts_figure(table)]
    return figs


def comparison_html(
    name: str,
    table: pd.DataFrame,
    frames: dict[str, pd.DataFrame],
    notes: Sequence[str] = (),
    prices: str = DEFAULT_PRICES_NAME,
) -> str:
    """The comparison dashboard: cards, then bars, breakdowns and busiest links per variant.

    The table has one row per variant, or one per variant and seed (a `seed` column):
    bars then show the mean and its 95% t-interval; with one seed, plain bars, as the
    notes say. `prices` names the price table the cost columns came from (the compare
    file's `cost.prices`, as written there), which the notes cite."""
    seeds = n_seeds(table)
    notes = (
        list(notes)
        + [
            f"Bars show the mean over up to {seeds} seeds per variant with its 95% Student-t interval."
            if seeds > 1
            else "Each variant ran with one seed: bars are single runs, without intervals.",
        ]
        + [
            "Relative step time is each variant's over the first variant's. Network capex is an "
            f"estimate from an illustrative price table (see {prices})."
            if "network_capex_usd" in table.columns
            else "Relative step time is each variant's over the first variant's."
        ]
        + (
            [
                "Cost per token: cluster capex (the job's share of its GPUs) spread over "
                f"{_first(table, 'amortization_years')} years plus facility energy (PUE "
                f"{_first(table, 'pue')}) at {_first(table, 'electricity_usd_per_kwh')} USD/kWh, "
                f"from {prices} (every figure there names its source and date)."
            ]
            if cost_axes(table) is not None
            else []
        )
    )
    return page(
        f"clustersim compare: {name}",
        comparison_cards(table),
        comparison_figures(table, frames),
        notes,
    )
