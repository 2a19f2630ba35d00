"""Link traffic of (near) zero length: a collective of 1e-9 bytes on 16 ranks puts every
link interval on one float instant; the link figures and the run dashboard still render,
with time bins of positive length only."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.viz.dashboard import run_dashboard_html
from simulator.viz.links import link_heatmap_figure, link_heatmap_frame, link_series
from tests.conftest import ROOT

TOPOLOGY = ROOT / "topologies" / "h100-rail-clos-2n.yaml"


def _links(starts: list[float], ends: list[float]) -> pd.DataFrame:
    n = len(starts)
    return pd.DataFrame(
        {
            "link": [f"l{i % 2}" for i in range(n)],
            "medium": "ib",
            "tier": 1,
            "started_at_s": starts,
            "finished_at_s": ends,
            "utilization": 0.5,
            "bytes": 1.0,
            "capacity_bytes_per_s": 1.0,
        }
    )


def test_tiny_collective_run_dashboard_renders(tmp_path: Path) -> None:
    trace = tmp_path / "trace.yaml"
    trace.write_text(
        "format: clustersim-step/1\nname: tiny\nranks: 16\ngroups: {world: all}\nops:\n"
        "  - {id: ar0, kind: collective, collective: all_reduce, group: world, size_bytes: 1.0e-9}\n"
    )
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(
        f"name: tiny\nseed: 7\ntopology: {{file: {TOPOLOGY}}}\nworkload: {{file: {trace}}}\n"
        "network: {fidelity: flow, algorithms: {all_reduce: ring}}\nrun: {steps: 1}\n"
    )
    result = execute(prepare(scenario))
    links = result.frames["links"]
    assert not links.empty
    page = run_dashboard_html(result.frames, result.summary, result.graph, "plotly.min.js")
    assert "Link utilization by medium and tier" in page
    # the traffic spans a few ulps: fewer bins than 60, each of positive length
    stated = re.search(r"(\d+) time bins?;", page)
    assert stated is not None and 1 <= int(stated.group(1)) < 60
    assert "NaN" not in page


def test_heatmap_of_zero_span_traffic_has_no_bins() -> None:
    t = 6e-5
    links = _links([t, t, t], [t, t, t])
    assert link_heatmap_frame(links).empty
    fig = link_heatmap_figure(links)
    assert "takes no time" in fig.layout.title.text


def test_heatmap_bins_of_a_span_of_few_ulps_are_positive_and_unique() -> None:
    t0 = 6e-5
    t1 = float(np.nextafter(np.nextafter(t0, 1.0), 1.0))  # 2 ulps: fewer than 60 bins fit
    links = _links([t0, t0], [t1, t1])
    hm = link_heatmap_frame(links)
    assert 1 <= len(hm) <= 2
    assert (hm["bin_end_s"] > hm["bin_start_s"]).all()
    assert hm["bin_start_s"].is_unique
    assert np.isfinite(hm["utilization"]).all()
    assert len(link_heatmap_figure(links).data) == 1


def test_binned_link_series_of_zero_span_is_finite() -> None:
    t = 6e-5
    xs, ys, binned = link_series(_links([t] * 6, [t] * 6), "l0", max_points=2)
    assert binned
    assert np.isfinite(ys).all() and np.isfinite(xs).all()


def test_link_figures_count_time_from_the_run_start_the_step_views_use() -> None:
    """Traffic from 46 ms of a step that starts at 0: the link charts put it at 46 ms, as
    the step timeline does (they used to start their axis at the first flow, 0 ms)."""
    from simulator.viz.links import link_utilization_figure

    links = _links([0.046, 0.062], [0.050, 0.070])
    line = link_utilization_figure(links, t0_s=0.0)
    assert min(min(t.x) for t in line.data) == 46.0
    assert line.layout.xaxis.title.text == "time since the run's start (ms)"
    heat = link_heatmap_figure(links, bins=4, t0_s=0.0)
    assert min(heat.data[0].x) == 46.0
    assert min(min(t.x) for t in link_utilization_figure(links).data) == 0.0  # no start given
