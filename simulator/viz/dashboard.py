"""HTML dashboards that work offline, with one copy of plotly.js per results folder.

A page loads plotly.js from `plotly.min.js` beside it by relative path (`write_page` writes
that file once per folder), so a results folder holding several pages, or a comparison
whose variant pages load `../plotly.min.js`, carries plotly.js once (about 4.6 MB), not
once per page. A page meant to travel alone (a calibration page beside its profile) is
built with `plotly_src=None` and embeds plotly.js instead.

`page(...)` assembles headline cards, notes and figures into one HTML file; the
comparison, calibration and study pages are built with it too. `run_dashboard_html(...)`
is the dashboard of one run, built from its saved frames and summary only (plus the
topology graph when the run folder holds `topology.json`), so `clustersim dashboard
RUN_FOLDER` rebuilds exactly what `clustersim run` wrote. Its figures, in page order: the
step timeline (`simulator.viz.timeline`), the time breakdown (`simulator.viz.breakdown`),
link utilization over time and by tier (`simulator.viz.links`), the topology drawing
(`simulator.viz.topology`) and, for a run with failures, its incidents
(`simulator.viz.faults`).

Page contract used by the browser test (`tests/viz/browser.py`): the page carries
`<meta name="clustersim-figures" content="N">` with its number of figures, and each figure
sits in a `div.fig`; figure data are kept small (numbers rounded to 1 ns / 1e-4 %,
sampled or binned past fixed budgets, each figure saying so).
"""

from __future__ import annotations

import html
import json
import math
import operator
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from simulator.errors import InputError
from simulator.io import write_atomic
from simulator.metrics.store import check_run_frames, read_frames, read_summary
from simulator.viz.activity import MAX_RANK_LANES, activity_figure
from simulator.viz.breakdown import breakdown_figure
from simulator.viz.goodput import incident_timeline_figure, step_shares, wall_time_figure
from simulator.viz.jobs import job_cards, job_figures
from simulator.viz.links import link_heatmap_figure, link_utilization_figure, mean_utilization_by_link
from simulator.viz.rank_groups import rank_groups
from simulator.viz.style import aggregation_note
from simulator.viz.timeline import timeline_figure
from simulator.viz.topology import topology_figure
from simulator.viz.topology_groups import GROUP_PAST_SERVERS, topology_group_figure

_CSS = (
    "body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1400px;"
    "padding:0 16px;color:#222}"
    "h1{font-size:24px;margin-bottom:4px}h2{font-size:18px;margin:28px 0 6px}"
    ".cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0 18px}"
    ".card{border:1px solid #ddd;border-radius:8px;padding:10px 14px;min-width:140px;background:#fafafa}"
    ".card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:#666}"
    ".card .s{font-size:11px;color:#888}"
    ".note{color:#555;font-size:13px;margin:4px 0}.fig{margin-bottom:28px}"
    "ul.notes{color:#555;font-size:13px;margin:4px 0 18px}"
)


def _fmt(v: Any, unit: str = "") -> str:
    if isinstance(v, bool) or v is None:
        return html.escape(str(v))
    if isinstance(v, (int, float)):
        v = float(v)
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "∞"
        if unit == "%":
            return f"{v * 100:.1f}%"
        if unit == "ms":
            return f"{v * 1e3:.3f} ms" if abs(v) < 10 else f"{v:.2f} s"
        if unit == "h":
            return f"{v / 3600:.1f} h"
        if unit == "int":
            return f"{v:,.0f}"
        return f"{v:,.4g}" if abs(v) < 1e5 else f"{v:,.0f}"
    return html.escape(str(v))


def _count(n: Any, noun: str) -> str:
    """`n noun` with the noun in the plural unless `n` is 1 ("1 step", "3 steps", "? steps")."""
    return f"{n} {noun}" if n == 1 else f"{'?' if n is None else n} {noun}s"


def _figure_div(fig: go.Figure, i: int) -> str:
    return pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        div_id=f"fig{i}",
        config={"responsive": True, "displaylogo": False},
    )


#: The one copy of plotly.js of a results folder, loaded by its pages with a relative path.
PLOTLY_FILE = "plotly.min.js"


def _plotly_script(plotly_src: str | None) -> str:
    if plotly_src is None:
        return f"<script type='text/javascript'>{get_plotlyjs()}</script>"
    return f"<script type='text/javascript' src='{html.escape(plotly_src, quote=True)}'></script>"


def write_plotly_js(folder: str | Path) -> Path:
    """Write `plotly.min.js` into `folder` unless the same file is already there."""
    path = Path(folder) / PLOTLY_FILE
    js = get_plotlyjs()
    if not path.is_file() or path.stat().st_size != len(js.encode("utf-8")):
        write_atomic(path, js)
    return path


def write_page(path: str | Path, text: str) -> None:
    """Write a page and, when it loads plotly.js from a sibling `plotly.min.js`, that file.

    A page loading `../plotly.min.js` (a comparison's variant) relies on its parent folder's
    copy, written with the parent's own page; a page with plotly.js inline needs nothing.
    """
    path = Path(path)
    write_atomic(path, text)
    if _plotly_script(PLOTLY_FILE) in text:
        write_plotly_js(path.parent)


def page(
    title: str,
    cards: Sequence[tuple[str, str]],
    figures: Sequence[go.Figure],
    notes: Sequence[str] = (),
    plotly_src: str | None = PLOTLY_FILE,
) -> str:
    """One HTML page: headline cards, notes, then figures.

    plotly.js is loaded from `plotly_src` (a relative path; see `write_page`), or embedded
    when it is None.

    Args:
        title: page title and heading.
        cards: (label, value) pairs; a value is shown as given (HTML allowed, so escape
            untrusted text), a label is escaped.
        figures: plotly figures, drawn in order; a figure's aggregation note (see
            `simulator.viz.style.aggregation_note`) is listed under the notes.
        notes: sentences shown under the cards (escaped).
        plotly_src: where the page loads plotly.js from, or None to embed it.
    """
    figures = list(figures)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<meta name='clustersim-figures' content='{len(figures)}'>",
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>",
        _plotly_script(plotly_src),
        f"</head><body><h1>{html.escape(title)}</h1><div class='cards'>",
    ]
    for k, v in cards:
        parts.append(f"<div class='card'><div class='v'>{v}</div><div class='k'>{html.escape(k)}</div></div>")
    parts.append("</div>")
    for n in notes:
        parts.append(f"<p class='note'>{html.escape(n)}</p>")
    agg = [(i, aggregation_note(f)) for i, f in enumerate(figures)]
    agg = [(i, a) for i, a in agg if a]
    if agg:
        parts.append(
            "<p class='note'>Shown aggregated to keep this page small and fast:</p><ul class='notes'>"
        )
        for i, a in agg:
            name = _plain_title(figures[i]) or f"figure {i + 1}"
            parts.append(f"<li>{html.escape(name)}: {html.escape(a)}</li>")
        parts.append("</ul>")
    for i, fig in enumerate(figures):
        parts.append(f"<div class='fig'>{_figure_div(fig, i)}</div>")
    parts.append("</body></html>")
    return "".join(parts)


def _plain_title(fig: go.Figure) -> str:
    t = fig.layout.title.text if fig.layout.title is not None else None
    return str(t).split("<br>")[0] if t else ""


def run_cards(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Headline cards of a run: step time, MFU, TFLOP/s per GPU, exposed communication,
    goodput/ETTR when the summary has them, and the busiest link."""
    st = summary.get("step_time_s", float("nan"))
    cards = [("step time", _fmt(st, "ms"))]
    for key, label, unit in (
        ("mfu", "MFU", "%"),
        ("tflops_per_gpu", "TFLOP/s per GPU", ""),
        ("tokens_per_s", "tokens/s", "int"),
        ("compute_s", "compute per rank", "ms"),
    ):
        if key in summary:
            cards.append((label, _fmt(summary[key], unit)))
    if "exposed_comm_s" in summary:
        v = _fmt(summary["exposed_comm_s"], "ms")
        if isinstance(st, (int, float)) and st and not math.isnan(st):
            v += f" <span class='s'>({summary['exposed_comm_s'] / st * 100:.1f}% of step)</span>"
        cards.append(("exposed communication", v))
    if "idle_s" in summary:
        cards.append(("idle per rank", _fmt(summary["idle_s"], "ms")))
    for key, label, unit in (
        ("goodput", "goodput", "%"),
        ("ettr", "ETTR", "%"),
        ("interruptions", "interruptions", "int"),
        ("lost_work_s", "lost work", "h"),
    ):
        if key in summary:
            cards.append((label, _fmt(summary[key], unit)))
    bl = summary.get("busiest_links") or []
    if bl:
        top = bl[0]
        cards.append(
            (
                f"busiest link ({top.get('link', '?')})",
                _fmt(top.get("mean_utilization", float("nan")), "%") + " mean",
            )
        )
    cards.append(("GPUs in job", _fmt(summary.get("gpus_in_job", "?"), "int")))
    return cards


def _topology_fig(graph: Any, frames: dict[str, pd.DataFrame]) -> go.Figure:
    """The topology drawing, links coloured by their mean utilization over the run."""
    links, steps = frames.get("links"), frames.get("steps")
    run_s = None
    if steps is not None and not steps.empty:  # the run time summary.json uses
        run_s = float(steps["finished_at_s"].max() - steps["started_at_s"].min())
    util = mean_utilization_by_link(links, run_s) if links is not None and not links.empty else None
    if drawn_by_group(graph):
        return topology_group_figure(graph, util)
    return topology_figure(graph, util)


def drawn_by_group(graph: Any) -> bool:
    """Whether the dashboard draws the topology by tier and pod (past `GROUP_PAST_SERVERS`
    servers one node per server is a hairball)."""
    servers = {d.get("node") for _, d in graph.nodes(data=True) if d.get("kind") == "gpu"}
    return len(servers) > GROUP_PAST_SERVERS


def drawn_graph(graph: Any, folder: str | Path) -> Any:
    """The topology graph a run's dashboard draws, as `clustersim dashboard` would read it.

    `graph` is the run's graph in memory and `folder` the run folder it was just saved to
    (`topology.json`). Drawn by tier and pod, the figure reads node names, kinds, tiers,
    roles and server names, link bandwidths, the graph's name, and neighbours in the order
    of the links (`simulator.viz.topology_groups`): all the same in memory as saved and read
    back when they are text and numbers (checked), so the graph in memory is drawn and the
    file is not read again. A smaller topology is drawn node by node from the saved file.
    """
    if graph is None:
        return None
    return graph if drawn_by_group(graph) and _plain_group_attributes(graph) else load_graph(folder)


#: Types that JSON writes and reads back as the same value of the same type.
_JSON_EXACT = frozenset({str, int, float, type(None)})


def _plain_group_attributes(graph: Any) -> bool:
    """Whether every node name and attribute the drawing by group reads is text, a number
    or absent (see `drawn_graph`), the types gathered in one pass per attribute. (Link
    bandwidths are read through `float()`, which gives the same value for anything JSON
    writes as a number or text and reads back.)"""
    nodes = [d for _, d in graph.nodes(data=True)]
    types = {type(graph.graph.get("name")), *map(type, graph)}
    for key in ("kind", "tier", "role", "node"):
        types.update(map(type, map(operator.methodcaller("get", key), nodes)))
    return types <= _JSON_EXACT


#: Ops in the drawn step past which the timeline shows activity lanes instead of one bar per op.
MAX_OP_BARS = 3000


def step_figure(ops: pd.DataFrame) -> go.Figure:
    """The step's timeline: one bar per op while the step is small enough to read that way
    (`simulator.viz.timeline`), else activity lanes (`simulator.viz.activity`): exact
    compute / exposed-communication / idle lengths, lanes per rank group at scale."""
    if ops.empty:
        return timeline_figure(ops)
    last = ops[ops["step"] == ops["step"].max()]
    if len(last) > MAX_OP_BARS or last["rank"].nunique() > MAX_RANK_LANES:
        return activity_figure(ops)
    return timeline_figure(ops)


def run_figures(
    frames: dict[str, pd.DataFrame], graph: Any = None, summary: dict[str, Any] | None = None
) -> list[go.Figure]:
    """The run dashboard's figures, in page order, from the frames present (the summary
    gives the healthy step's compute / communication split to the failure views)."""
    figs = []
    ops = frames.get("ops")
    groups = rank_groups(ops) if ops is not None and not ops.empty else None
    if "jobs" in frames or "cluster_jobs" in frames:  # several jobs: per-job views (viz.jobs)
        ops = None
        frames = {k: v for k, v in frames.items() if k != "steps"}
    if ops is not None:
        figs.append(step_figure(ops))
    if "steps" in frames and not frames["steps"].empty:
        figs.append(breakdown_figure(frames["steps"], groups=groups))
    if "links" in frames and not frames["links"].empty:
        steps = frames.get("steps")
        # time from the run's start, as the step views count it (not from the first traffic)
        t0 = float(steps["started_at_s"].min()) if steps is not None and not steps.empty else None
        figs.append(link_utilization_figure(frames["links"], t0_s=t0))
        figs.append(link_heatmap_figure(frames["links"], t0_s=t0))
    if graph is not None:
        figs.append(_topology_fig(graph, frames))
    figs.extend(failure_figures(frames, summary or {}))
    return figs


def failure_figures(frames: dict[str, pd.DataFrame], summary: dict[str, Any]) -> list[go.Figure]:
    """A run under failures: where its wall time went (per seed) and its incidents with the
    running goodput and ETTR (`simulator.viz.goodput`)."""
    figs = []
    runs = frames.get("runs")
    healthy = None
    if runs is not None and not runs.empty and {"wall_s", "useful_s"} <= set(runs.columns):
        figs.append(wall_time_figure(runs, step_shares(summary)))
        if "healthy_step_s" in runs:
            healthy = float(runs["healthy_step_s"].iloc[0])
    if "incidents" in frames:
        figs.append(incident_timeline_figure(frames["incidents"], frames.get("segments"), healthy))
    return figs


def run_dashboard_html(
    frames: dict[str, pd.DataFrame],
    summary: dict[str, Any],
    graph: Any = None,
    plotly_src: str | None = PLOTLY_FILE,
) -> str:
    """The run dashboard, from saved frames and summary only.

    Args:
        frames: the run's frames (`ops`, `steps`, `links`, ... ; `incidents`/`segments`
            for run-level failure studies).
        summary: the run's summary.json.
        graph: the topology graph (networkx) when the run saved it; the page then draws
            it with links colored by mean utilization.
        plotly_src: where the page loads plotly.js from (see `page`).
    """
    title = f"clustersim: {summary.get('scenario', 'run')}"
    notes = [
        (
            f"topology {summary.get('topology', '?')}, {summary.get('gpus_in_job', '?')} GPUs in the job, "
            f"{summary.get('simulated_ranks', '?')} simulated ranks, "
            f"{summary.get('fidelity', '?')} fidelity, "
            f"{_count(summary.get('steps'), 'step')}, seed {summary.get('seed', '?')}, "
            f"clustersim {summary.get('version', '?')}."
        )
    ]
    if summary.get("calibration_applied"):
        notes.append(
            "calibrated collectives: "
            + ", ".join(f"{k} ({v})" for k, v in dict(summary["calibration_applied"]).items())
        )
    if "links" in frames and frames["links"].empty:
        notes.append(
            "no link intervals were recorded (network.record_links: false), so link views are left out"
        )
    if "n_jobs" in summary:
        notes[0] = (
            f"topology {summary.get('topology', '?')} ({summary.get('gpus_in_topology', '?')} GPUs), "
            f"{summary.get('n_jobs')} jobs, seed {summary.get('seed', '?')}, "
            f"clustersim {summary.get('version', '?')}."
        )
        figs = job_figures(frames, summary) + run_figures(frames, graph, summary)
        return page(title, job_cards(summary), figs, notes, plotly_src)
    return page(title, run_cards(summary), run_figures(frames, graph, summary), notes, plotly_src)


def load_graph(folder: str | Path) -> Any:
    """The topology graph saved in a run folder (`topology.json`, node-link), or None."""
    p = Path(folder) / "topology.json"
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        try:
            return nx.node_link_graph(data, edges="links")
        except TypeError:  # networkx < 3.4
            return nx.node_link_graph(data)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg}", file=p, line=exc.lineno) from None
    except Exception as exc:  # a damaged file: the decoder and networkx raise many kinds
        raise InputError(f"not a saved topology ({type(exc).__name__})", file=p) from None


def run_dashboard_from_folder(folder: str | Path, plotly_src: str | None = PLOTLY_FILE) -> str:
    """Rebuild a run folder's dashboard from its saved frames, summary and topology."""
    frames = read_frames(folder)
    check_run_frames(frames, folder)
    return run_dashboard_html(frames, read_summary(folder), load_graph(folder), plotly_src)
