"""Run dashboard: figures are pure functions of the saved frames, and their numbers match them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.engine.records import OpRecord
from simulator.metrics.store import read_frames, read_summary
from simulator.scenario.execute import RunResult, execute
from simulator.scenario.prepare import prepare
from simulator.viz import dashboard as D
from simulator.viz.breakdown import breakdown_figure, breakdown_frame, breakdown_group_frame
from simulator.viz.goodput import incident_timeline_figure
from simulator.viz.links import (
    busiest,
    link_heatmap_figure,
    link_heatmap_frame,
    link_mean_utilization,
    link_series,
    link_utilization_figure,
)
from simulator.viz.rank_groups import rank_groups
from simulator.viz.style import aggregation_note
from simulator.viz.timeline import timeline_figure

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    result = execute(prep)
    out = tmp_path_factory.mktemp("qs")
    result.write(out)
    return out, result


def _data(figs: list) -> list:
    return [json.loads(pio.to_json(f, validate=False))["data"] for f in figs]


def test_rebuilt_figures_equal_the_run_time_figures(run_dir) -> None:
    out, result = run_dir
    before = _data(D.run_figures(result.frames))
    after = _data(D.run_figures(read_frames(out)))
    assert len(before) == 4
    assert before == after


def test_dashboard_command_rebuilds_the_same_page(run_dir, tmp_path: Path) -> None:
    out, _ = run_dir
    target = tmp_path / "again.html"
    res = CliRunner().invoke(app, ["dashboard", str(out), "-o", str(target)])
    assert res.exit_code == 0, res.output
    assert res.output.count("\n") == 1 and "run dashboard" in res.output
    assert target.read_text(encoding="utf-8") == (out / "dashboard.html").read_text(encoding="utf-8")


def test_page_is_self_contained_and_counts_its_figures(run_dir) -> None:
    out, _ = run_dir
    text = (out / "dashboard.html").read_text(encoding="utf-8")
    assert "<meta name='clustersim-figures' content='5'>" in text
    assert text.count("Plotly.newPlot(") == 5  # timeline, breakdown, busiest links, heatmap, topology
    # plotly.js is loaded from the one copy beside the page, by relative path: no network needed
    from plotly.offline import get_plotlyjs

    scripts = re.findall(r"<script[^>]*src='([^']*)'", text)
    assert scripts == ["plotly.min.js"] and "<link " not in text and "http" not in " ".join(scripts)
    assert (out / "plotly.min.js").read_text(encoding="utf-8") == get_plotlyjs()
    assert get_plotlyjs()[:2000] not in text  # not embedded as well
    assert len(text) < 300_000  # the data part stays small


def test_cards_show_headline_figures() -> None:
    s = {
        "step_time_s": 0.1,
        "mfu": 0.42,
        "tflops_per_gpu": 415.0,
        "exposed_comm_s": 0.01,
        "goodput": 0.9,
        "ettr": 0.88,
        "gpus_in_job": 16,
        "busiest_links": [{"link": "a->b", "mean_utilization": 0.5}],
    }
    cards = dict(D.run_cards(s))
    assert cards["step time"] == "100.000 ms"
    assert cards["MFU"] == "42.0%"
    assert cards["goodput"] == "90.0%" and cards["ETTR"] == "88.0%"
    assert "10.0% of step" in cards["exposed communication"]
    assert cards["busiest link (a->b)"].startswith("50.0%")


def test_breakdown_sums_to_step_time_per_rank(run_dir) -> None:
    _, result = run_dir
    steps = result.frames["steps"]
    tidy = breakdown_frame(steps)
    total = tidy.groupby("rank")["seconds"].sum()
    expect = steps.groupby("rank")["step_time_s"].mean()
    np.testing.assert_allclose(total.to_numpy(), expect.loc[total.index].to_numpy(), rtol=1e-9)
    fig = breakdown_figure(steps)
    bar_sum = pd.concat([pd.Series(t.y, index=t.x) for t in fig.data]).groupby(level=0).sum()
    np.testing.assert_allclose(
        bar_sum.loc[[f"r{r}" for r in expect.index]].to_numpy(), expect.to_numpy() * 1e3, rtol=1e-9
    )


def test_group_breakdown_is_the_weighted_mean_of_its_ranks() -> None:
    steps = pd.DataFrame(
        {
            "step": [0, 0, 0],
            "rank": [0, 1, 2],
            "step_time_s": [1.0] * 3,
            "compute_s": [0.5, 0.7, 0.9],
            "exposed_tp_s": [0.3, 0.1, 0.1],
            "idle_s": [0.2, 0.2, 0.0],
            "exposed_comm_s": [0.3, 0.1, 0.1],
            "weight": [1, 3, 1],
        }
    )
    g = breakdown_group_frame(steps, {0: "a", 1: "a", 2: "b"})
    a = g[g["group"] == "a"].set_index("part")["seconds"]
    assert a["compute"] == pytest.approx((0.5 + 3 * 0.7) / 4)
    assert a.sum() == pytest.approx(1.0)
    fig = breakdown_figure(steps, max_ranks=2, groups={0: "a", 1: "a", 2: "b"})
    assert list(fig.data[0].x) == ["a (2)", "b (1)"]
    assert "averaged" in aggregation_note(fig)


def test_timeline_bars_are_the_ops(run_dir) -> None:
    _, result = run_dir
    ops = result.frames["ops"]
    step = int(ops["step"].max())
    fig = timeline_figure(ops)
    t0 = ops.loc[ops["step"] == step, "ready_at_s"].min()
    bars = [t for t in fig.data if t.x is not None and len(t.x) and t.x[0] is not None]
    got = sorted(
        (round(b, 4), round(d, 4))
        for t in bars
        if t.legendgroup not in ("wait", "bubble")
        for b, d in zip(t.base, t.x, strict=False)
    )
    mine = ops[ops["step"] == step]
    want = sorted(
        (round((s - t0) * 1e3, 4), round((e - s) * 1e3, 4))
        for s, e in zip(mine["started_at_s"], mine["finished_at_s"], strict=False)
    )
    assert got == want


def _synthetic_ops(n_ranks: int, roles: int) -> pd.DataFrame:
    rows = []
    for r in range(n_ranks):
        late = 0.001 * (r % 7)
        rows.append(
            (0, f"f@{r}", "compute", "fwd", r, "compute", 0.0, late, late + 0.01, 0.0, 1e12, "", "", "", 1)
        )
        rows.append(
            (
                0,
                "ar",
                "collective",
                "dp",
                r,
                "comm",
                late + 0.01,
                0.017,
                0.02,
                1e6,
                0.0,
                "all_reduce",
                "ring",
                "simple",
                n_ranks,
            )
        )
    df = pd.DataFrame.from_records(
        rows,
        columns=OpRecord._fields,
    )
    df["duration_s"] = df["finished_at_s"] - df["started_at_s"]
    df["wait_s"] = df["started_at_s"] - df["ready_at_s"]
    df["gpu"] = [f"n{r // 8}.gpu{r % 8}" for r in df["rank"]]
    df["role"] = [f"pp{r * roles // n_ranks}" if roles else "" for r in df["rank"]]
    return df


def test_large_timeline_groups_by_role_with_a_dropdown_and_samples() -> None:
    ops = _synthetic_ops(1024, 4)
    fig = timeline_figure(ops, max_ranks=32)
    menu = fig.layout.updatemenus[0]
    labels = [b.label for b in menu.buttons]
    assert labels[-4:] == [f"pp{i} (32 ranks)" for i in range(4)]
    ranks_drawn = {y.split(" ")[1] for t in fig.data if t.y is not None for y in t.y if y}
    assert len(ranks_drawn) == 128
    assert "128 of 1024" in aggregation_note(fig)
    # every button's visibility list covers every trace
    assert all(len(b.args[0]["visible"]) == len(fig.data) for b in menu.buttons)
    # waits (ready -> start) are drawn, with the ops' gaps
    waits = [t for t in fig.data if t.legendgroup == "wait" and t.x is not None and t.x[0] is not None]
    assert waits and all(0 < d <= 17.0 for t in waits for d in t.x)


def test_groups_fall_back_to_servers_and_merge_past_the_cap() -> None:
    ops = _synthetic_ops(256, 0)
    g = rank_groups(ops, max_groups=8)
    assert g.nunique() == 8 and g[0] == "n0…n3" and g[255] == "n28…n31"
    assert rank_groups(ops, max_groups=100)[9] == "n1"


def test_heatmap_mean_utilization_matches_link_bytes(run_dir) -> None:
    _, result = run_dir
    links = result.frames["links"]
    hm = link_heatmap_frame(links, bins=37)
    grp = links["medium"] + " tier " + links["tier"].astype(str)
    for g, df in hm.groupby("group"):
        busy_s = (links.loc[grp == g, "bytes"] / links.loc[grp == g, "capacity_bytes_per_s"]).sum()
        area = (df["utilization"] * (df["bin_end_s"] - df["bin_start_s"]) * df["links"]).sum()
        assert area == pytest.approx(busy_s, rel=1e-9)
    fig = link_heatmap_figure(links, bins=37)
    assert np.asarray(fig.data[0].z).shape == (hm["group"].nunique(), 37)


def test_link_series_integrates_to_link_bytes(run_dir) -> None:
    _, result = run_dir
    links = result.frames["links"]
    name = busiest(links, 1)[0]
    mine = links[links["link"] == name]
    want = (mine["bytes"] / mine["capacity_bytes_per_s"]).sum()
    for max_points in (10_000, 7):
        xs, ys, binned = link_series(links, name, max_points)
        assert binned == (max_points == 7)
        assert float((np.diff(xs) * ys[:-1]).sum()) == pytest.approx(want, rel=1e-9)
    fig = link_utilization_figure(links, top=3)
    assert [t.name for t in fig.data] == busiest(links, 3)


def test_failures_figure_from_incidents_and_segments() -> None:
    inc = pd.DataFrame(
        {
            "time_s": [3600.0, 7200.0, 7300.0],
            "kind": ["checkpoint", "failure", "restart"],
            "duration_s": [30.0, 0.0, 600.0],
            "lost_work_s": [0.0, 1800.0, 0.0],
        }
    )
    seg = pd.DataFrame(
        {
            "start_s": [0.0, 7200.0, 7900.0],
            "end_s": [7200.0, 7900.0, 14400.0],
            "phase": ["compute", "restart", "compute"],
            "steps": [100.0, 0.0, 90.0],
            "useful_s": [5400.0, 0.0, 6500.0],
        }
    )
    fig = incident_timeline_figure(inc, seg)
    names = [t.name for t in fig.data]
    # every incident a marker, the legend counting them (a 0-s failure stays visible)
    assert names[:3] == ["checkpoint (1)", "failure (1)", "restart (1)"]
    assert [len(t.x) for t in fig.data[:3]] == [1, 1, 1]
    # the running ETTR (productive time over time elapsed) replaces useful work against the
    # ideal, two lines that lay on top of each other at any real goodput
    ettr = next(t for t in fig.data if t.name == "running ETTR")
    assert ettr.y[-1] == pytest.approx((5400 + 6500) / 14400 * 100)
    html = D.run_dashboard_html({"incidents": inc, "segments": seg}, {"scenario": "f", "goodput": 0.8})
    assert "<meta name='clustersim-figures' content='1'>" in html and "goodput" in html


def test_topology_drawn_when_the_graph_is_saved(run_dir, tmp_path: Path) -> None:
    import networkx as nx

    out, result = run_dir
    g = prepare(ROOT / "scenarios" / "quickstart.yaml").topology.graph
    try:
        data = nx.node_link_data(g, edges="links")
    except TypeError:
        data = nx.node_link_data(g)
    for name in ("summary.json", "ops.parquet", "steps.parquet", "links.parquet", "flows.parquet"):
        (tmp_path / name).write_bytes((out / name).read_bytes())
    (tmp_path / "topology.json").write_text(json.dumps(data, default=str))
    html = D.run_dashboard_from_folder(tmp_path)
    assert "<meta name='clustersim-figures' content='5'>" in html
    steps = result.frames["steps"]
    util = link_mean_utilization(
        result.frames["links"], steps["finished_at_s"].max() - steps["started_at_s"].min()
    )
    assert util.max() == pytest.approx(read_summary(out)["busiest_links"][0]["mean_utilization"], rel=1e-9)


def test_dashboard_command_errors(tmp_path: Path, run_dir) -> None:
    out, _ = run_dir
    r = CliRunner().invoke(app, ["dashboard", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "results folder not found" in r.output
    r = CliRunner().invoke(app, ["dashboard", str(tmp_path)])
    assert r.exit_code == 2 and "not a results folder" in r.output
    r = CliRunner().invoke(app, ["dashboard", str(out), str(out), "-o", str(tmp_path / "x.html")])
    assert r.exit_code == 2 and "one results folder" in r.output


def test_page_note_counts_steps_in_words(run_dir) -> None:
    """The note under the title reads "3 steps" (the quickstart runs 3) and "1 step"."""
    out, _ = run_dir
    assert ", 3 steps, seed " in (out / "dashboard.html").read_text(encoding="utf-8")
    assert D._count(1, "step") == "1 step" and D._count(None, "step") == "? steps"
