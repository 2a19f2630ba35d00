"""What every figure of a run's dashboard shares: colours, time rounding, natural name
order, and the note a figure leaves when it aggregates or samples what it shows.

Colours are fixed per op tag (compute parts in blues and greens, each parallelism's
communication in its own colour); a tag without one gets a hue derived from its name, so
a tag keeps its colour from one page to the next. Simplified: nothing here depends on how
many tags a page has, so two rare tags may get close hues.
"""

from __future__ import annotations

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

#: Decimals kept for times in ms (1 ns): keeps the page small, far below any op's length.
TIME_MS_DECIMALS = 6


def color_of(tag: str) -> str:
    """The colour of an op tag (or part, category): `PALETTE`, else a hue from its name."""
    if tag in PALETTE:
        return PALETTE[tag]
    h = sum(map(ord, tag)) % 360
    return f"hsl({h},55%,55%)"


def with_aggregation_note(fig: go.Figure, text: str) -> go.Figure:
    """Record what a figure aggregates (read back by the dashboard); no-op for ''."""
    if text:
        meta = dict(fig.layout.meta or {}) if isinstance(fig.layout.meta, dict) else {}
        meta["aggregation"] = text
        fig.update_layout(meta=meta)
    return fig


def aggregation_note(fig: go.Figure) -> str:
    """The aggregation note a figure function left in the figure ('' if none)."""
    meta = fig.layout.meta
    return str(meta.get("aggregation", "")) if isinstance(meta, dict) else ""
