"""Self-contained HTML dashboards (plotly.js embedded once; works offline)."""

from __future__ import annotations

import html
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from simulator.viz import figures as F


def _fmt(v: Any, unit: str = "") -> str:
    if isinstance(v, float):
        if unit == "%":
            return f"{v * 100:.1f}%"
        if unit == "ms":
            return f"{v * 1e3:.3f} ms"
        return f"{v:.4g}"
    return html.escape(str(v))


def page(title: str, cards: list[tuple[str, str]], figures: list[go.Figure], notes: list[str] = ()) -> str:
    """One HTML page: headline cards, then figures; plotly.js inline."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
        ".cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0 24px}"
        ".card{border:1px solid #ddd;border-radius:8px;padding:10px 14px;min-width:140px}"
        ".card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:#666}"
        ".note{color:#666;font-size:13px}.fig{margin-bottom:28px}</style>",
        f"<script type='text/javascript'>{get_plotlyjs()}</script>",
        f"</head><body><h1>{html.escape(title)}</h1><div class='cards'>",
    ]
    for k, v in cards:
        parts.append(f"<div class='card'><div class='v'>{v}</div><div class='k'>{html.escape(k)}</div></div>")
    parts.append("</div>")
    for n in notes:
        parts.append(f"<p class='note'>{html.escape(n)}</p>")
    for i, fig in enumerate(figures):
        div = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=f"fig{i}", config={"responsive": True})
        parts.append(f"<div class='fig'>{div}</div>")
    parts.append("</body></html>")
    return "".join(parts)


def run_cards(summary: dict[str, Any]) -> list[tuple[str, str]]:
    cards = [("step time", _fmt(summary.get("step_time_s", float("nan")), "ms"))]
    for key, label, unit in (
        ("compute_s", "compute per rank", "ms"),
        ("exposed_comm_s", "exposed communication", "ms"),
        ("idle_s", "idle", "ms"),
        ("mfu", "MFU", "%"),
        ("tflops_per_gpu", "TFLOP/s per GPU", ""),
        ("tokens_per_s", "tokens/s", ""),
        ("goodput", "goodput", "%"),
        ("ettr", "ETTR", "%"),
    ):
        if key in summary:
            cards.append((label, _fmt(summary[key], unit)))
    cards.append(("GPUs", _fmt(summary.get("gpus_in_job", ""))))
    return cards


def run_figures(frames: dict[str, pd.DataFrame]) -> list[go.Figure]:
    figs = []
    if "ops" in frames:
        figs.append(F.timeline_figure(frames["ops"]))
    if "steps" in frames:
        figs.append(F.breakdown_figure(frames["steps"]))
    if "links" in frames:
        figs.append(F.link_utilization_figure(frames["links"]))
        figs.append(F.link_heatmap_figure(frames["links"]))
    return figs


def run_dashboard_html(frames: dict[str, pd.DataFrame], summary: dict[str, Any]) -> str:
    """The run dashboard, from saved frames and summary only."""
    title = f"clustersim: {summary.get('scenario', 'run')}"
    notes = [
        f"topology {summary.get('topology', '?')}, {summary.get('gpus_in_job', '?')} GPUs in the job, "
        f"{summary.get('simulated_ranks', '?')} simulated ranks, {summary.get('fidelity', '?')} fidelity, "
        f"seed {summary.get('seed', '?')}."
    ]
    return page(title, run_cards(summary), run_figures(frames), notes)
