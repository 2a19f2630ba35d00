"""Dashboard figures of several jobs on one cluster, from the run's frames only.

Step level (a scenario with `jobs`): each job's step breakdown (compute, exposed
communication, idle; weighted per-rank means), interference (step time alone vs together,
with the slowdown), and the load of the busiest links coloured by job (bytes each job put
on the link; links shared by several jobs come first). Cluster level (a scenario with
`cluster`): the occupancy timeline (busy and down GPUs, queued jobs) and each job's life
(queued, then running to its end or to the end of the run).

What is simplified: the link figure shows bytes over the run, not rates over time; the job
lives show the first start to the end, not the gaps of restarts (their count is in the hover).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from simulator.viz.style import PALETTE

#: One colour per job, in job order (Okabe and Ito's colour-blind-safe palette, then repeats).
JOB_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

#: Links drawn in the link-load figure (the shared ones first, then the busiest).
TOP_LINKS = 30


def job_breakdown_figure(steps: pd.DataFrame) -> go.Figure:
    """Per job: mean compute, exposed communication and idle time of a step, ms."""
    fig = go.Figure()
    parts = [("compute_s", "compute"), ("exposed_comm_s", "dp"), ("idle_s", "idle")]
    jobs = list(dict.fromkeys(steps["job"]))
    for col, colour in parts:
        vals = []
        for j in jobs:
            s = steps[steps["job"] == j]
            vals.append(float(np.average(s[col], weights=s["weight"])) * 1e3)
        fig.add_bar(
            x=jobs, y=vals, name=col.removesuffix("_s").replace("_", " "), marker_color=PALETTE[colour]
        )
    fig.update_layout(barmode="stack", title="Step breakdown per job (ms, per-rank mean)", yaxis_title="ms")
    return fig


def interference_figure(jobs: pd.DataFrame) -> go.Figure:
    """Per job: step time alone and together, ms, with the slowdown as text."""
    fig = go.Figure()
    fig.add_bar(x=jobs["job"], y=jobs["step_time_alone_s"] * 1e3, name="alone", marker_color="#9ECAE9")
    fig.add_bar(
        x=jobs["job"],
        y=jobs["step_time_s"] * 1e3,
        name="together",
        marker_color="#E45756",
        text=[f"x{v:.4f}" for v in jobs["slowdown"]],
        textposition="outside",
    )
    fig.update_layout(
        barmode="group", title="Interference: step time alone vs together (ms)", yaxis_title="ms"
    )
    return fig


def job_link_load_figure(job_links: pd.DataFrame, top: int = TOP_LINKS) -> go.Figure:
    """Bytes per link coloured by job: the shared links, then the busiest, at most `top`."""
    per_link = job_links.groupby("link", sort=False).agg(
        total=("bytes", "sum"), users=("jobs_on_link", "first")
    )
    order = per_link.sort_values(["users", "total"], ascending=False, kind="stable").head(top).index
    fig = go.Figure()
    for k, j in enumerate(dict.fromkeys(job_links["job"])):
        rows = job_links[(job_links["job"] == j) & job_links["link"].isin(order)].set_index("link")
        fig.add_bar(
            x=list(order),
            y=[float(rows["bytes"].get(link, 0.0)) / 1e9 for link in order],
            name=str(j),
            marker_color=JOB_COLOURS[k % len(JOB_COLOURS)],
        )
    shown = len(order)
    fig.update_layout(
        barmode="stack",
        title=f"Link load by job (GB; {shown} of {len(per_link)} links: shared first, then busiest)",
        yaxis_title="GB",
    )
    return fig


def occupancy_figure(occupancy: pd.DataFrame, n_gpus: int) -> go.Figure:
    """Busy and down GPUs over time (steps), and queued jobs on a second axis."""
    t_h = occupancy["time_s"] / 3600.0
    fig = go.Figure()
    fig.add_scatter(x=t_h, y=occupancy["busy_gpus"], name="busy GPUs", line_shape="hv", fill="tozeroy")
    fig.add_scatter(x=t_h, y=occupancy["down_gpus"], name="down GPUs", line_shape="hv", line_color="#E45756")
    fig.add_scatter(
        x=t_h, y=occupancy["queued_jobs"], name="queued jobs", line_shape="hv", yaxis="y2", line_dash="dot"
    )
    fig.update_layout(
        title=f"Cluster occupancy ({n_gpus:,} GPUs)",
        xaxis_title="hours",
        yaxis={"title": "GPUs", "range": [0, n_gpus]},
        yaxis2={"title": "jobs", "overlaying": "y", "side": "right"},
    )
    return fig


def job_lives_figure(table: pd.DataFrame, end_s: float) -> go.Figure:
    """Each job's queueing (grey) and running (coloured by size) span, hours."""
    t = table.sort_values(["submit_s", "job"], kind="stable")
    # a job submitted after the end of the run has no span: both bars are empty at its submit
    start = t["first_start_s"].fillna(end_s).clip(lower=t["submit_s"])
    stop = t["end_s"].fillna(end_s).clip(lower=start)
    fig = go.Figure()
    fig.add_bar(
        y=t["job"],
        x=(start - t["submit_s"]) / 3600.0,
        base=t["submit_s"] / 3600.0,
        orientation="h",
        name="queued",
        marker_color="#C7C7C7",
    )
    fig.add_bar(
        y=t["job"],
        x=(stop - start) / 3600.0,
        base=start / 3600.0,
        orientation="h",
        name="running (to end or end of run)",
        marker={"color": np.log2(t["gpus"].to_numpy(dtype=float)), "colorscale": "Viridis"},
        customdata=np.stack([t["gpus"], t["restarts"]], axis=1),
        hovertemplate="%{y}: %{customdata[0]} GPUs, %{customdata[1]} restarts<extra></extra>",
    )
    fig.update_layout(
        barmode="overlay",
        title="Job lives (hours; colour: log2 GPUs)",
        xaxis_title="hours",
        yaxis={"autorange": "reversed", "showticklabels": len(t) <= 60},
        height=max(400, min(1200, 8 * len(t))),
    )
    return fig


def job_figures(frames: dict[str, pd.DataFrame], summary: dict[str, Any]) -> list[go.Figure]:
    """The job figures the frames allow, in page order."""
    figs = []
    if "jobs" in frames and "steps" in frames and not frames["steps"].empty:
        figs.append(job_breakdown_figure(frames["steps"]))
        figs.append(interference_figure(frames["jobs"]))
    if "job_links" in frames and not frames["job_links"].empty:
        figs.append(job_link_load_figure(frames["job_links"]))
    if "occupancy" in frames and not frames["occupancy"].empty:
        figs.append(occupancy_figure(frames["occupancy"], int(summary.get("gpus_in_topology", 0))))
    if "cluster_jobs" in frames and not frames["cluster_jobs"].empty:
        figs.append(job_lives_figure(frames["cluster_jobs"], float(summary.get("duration_s", 0.0))))
    return figs


def _shown(value: Any, scale: float, fmt: str) -> str:
    """`value * scale` in `fmt`, or "n/a" for a figure the run has none of (NaN in the
    summary, null once summary.json is read back: no job finished, none was allocated)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "n/a"
    return fmt.format(float(value) * scale)


def job_cards(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Headline figures of a several-jobs or cluster run (label, formatted value)."""
    cards = [("jobs", f"{summary.get('n_jobs', 0):,}")]
    if "max_slowdown" in summary:
        cards.append(("worst slowdown", f"x{summary['max_slowdown']:.4f}"))
        cards.append(
            ("GPUs in jobs", f"{summary.get('gpus_in_job', 0):,} of {summary.get('gpus_in_topology', 0):,}")
        )
    if "gpu_utilization" in summary:
        cards += [
            ("GPU utilization", _shown(summary["gpu_utilization"], 100, "{:.1f}%")),
            ("finished", f"{summary.get('jobs_finished', 0)} of {summary.get('n_jobs', 0)}"),
            ("mean queueing", _shown(summary.get("mean_queueing_delay_s"), 1 / 3600, "{:.2f} h")),
            ("median JCT", _shown(summary.get("median_jct_s"), 1 / 3600, "{:.2f} h")),
            ("goodput", _shown(summary.get("goodput"), 100, "{:.1f}%")),
            ("interruptions", f"{summary.get('interruptions', 0)}"),
        ]
    return cards
