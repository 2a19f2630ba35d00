"""Dashboards open in a real (headless) Chromium: every figure renders, no JavaScript error.

Needs a Chromium binary (Debian: `tests/viz/install_chromium.sh`); skipped otherwise.
Run with `pytest -m browser`. Screenshots land under each test's tmp_path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.scenario.prepare import prepare

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import find_chromium, render_page

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "topologies" / "calibration" / "samples"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        find_chromium() is None,
        reason="no chromium binary (install: tests/viz/install_chromium.sh, or set $CHROMIUM)",
    ),
]


def _check(page: Path, out: Path, expected: int | None = None) -> None:
    r = render_page(page, out, measure=False)
    assert r.errors == [] and r.stderr_errors == [], r.errors + r.stderr_errors
    want = r.figures_expected if expected is None else expected
    assert want > 0
    assert r.plots == want and r.figures_rendered == want, (r.plots, r.figures_rendered, want)
    assert r.screenshot is not None and r.screenshot.stat().st_size > 10_000


def _check_quick(page: Path, out: Path, expected: int) -> None:
    """One headless load (no screenshot, no timing run): every figure drawn, no JS error."""
    r = render_page(page, out, measure=False, screenshot=False)
    assert r.errors == [] and r.stderr_errors == [], r.errors + r.stderr_errors
    assert r.figures_expected == expected
    assert r.plots == expected and r.figures_rendered == expected, (r.plots, r.figures_rendered, expected)


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qs-browser")
    res = CliRunner().invoke(app, ["run", str(ROOT / "scenarios" / "quickstart.yaml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.slow  # ~7 s; the rebuilt run dashboard below draws the same page and more
def test_run_dashboard_renders_every_figure(quickstart: Path, tmp_path: Path) -> None:
    _check(quickstart / "dashboard.html", tmp_path, expected=5)  # with the topology drawing


def test_rebuilt_run_dashboard_with_failures_and_topology(quickstart: Path, tmp_path: Path) -> None:
    """A run folder with run-level frames (incidents, segments) and a saved topology."""
    import json

    import networkx as nx

    folder = tmp_path / "run"
    folder.mkdir()
    for p in quickstart.iterdir():
        if p.suffix in (".parquet", ".csv", ".json"):
            (folder / p.name).write_bytes(p.read_bytes())
    g = prepare(ROOT / "scenarios" / "quickstart.yaml").topology.graph
    try:
        data = nx.node_link_data(g, edges="links")
    except TypeError:
        data = nx.node_link_data(g)
    (folder / "topology.json").write_text(json.dumps(data, default=str))
    pd.DataFrame(
        {
            "time_s": [3600.0, 7200.0, 7300.0],
            "kind": ["checkpoint", "failure", "restart"],
            "duration_s": [30.0, 0.0, 600.0],
            "lost_work_s": [0.0, 1800.0, 0.0],
        }
    ).to_csv(folder / "incidents.csv", index=False)
    pd.DataFrame(
        {
            "start_s": [0.0, 7200.0, 7900.0],
            "end_s": [7200.0, 7900.0, 14400.0],
            "phase": ["compute", "restart", "compute"],
            "steps": [100.0, 0.0, 90.0],
            "useful_s": [5400.0, 0.0, 6500.0],
        }
    ).to_csv(folder / "segments.csv", index=False)
    res = CliRunner().invoke(app, ["dashboard", str(folder)])
    assert res.exit_code == 0, res.output
    _check(folder / "dashboard.html", tmp_path / "shots", expected=6)


@pytest.mark.slow  # ~3 s of Chromium; the saved sweep's and the rebuilt run's pages stay in the default suite
def test_comparison_dashboard(quickstart: Path, tmp_path: Path) -> None:
    from simulator.metrics.store import read_frames, read_summary
    from simulator.viz.compare import comparison_html
    from simulator.viz.dashboard import write_page

    frames = read_frames(quickstart)
    s = read_summary(quickstart)
    table = pd.DataFrame(
        {
            "variant": ["a", "b"],
            "step_time_s": [s["step_time_s"], s["step_time_s"] * 1.1],
            "exposed_comm_s": [s["exposed_comm_s"]] * 2,
        }
    )
    stacked = {
        k: pd.concat([frames[k].assign(variant=v) for v in ("a", "b")], ignore_index=True)
        for k in ("steps", "links")
    }
    html = comparison_html("two", table, stacked)
    page = tmp_path / "comparison.html"
    write_page(page, html)  # with the folder's plotly.min.js beside it
    _check_quick(page, tmp_path, expected=4)


@pytest.mark.slow  # ~4 CPU s of Chromium; the rebuilt run dashboard covers the renderer in the default suite
def test_study_dashboard_from_a_saved_sweep(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    runs = pd.DataFrame(
        {
            "interval_h": [1.0, 1.0, 2.0, 2.0],
            "seed": [0, 1, 0, 1],
            "goodput": [0.9, 0.92, 0.88, 0.87],
            "ettr": [0.9, 0.92, 0.88, 0.87],
        }
    )
    runs.to_csv(folder / "runs.csv", index=False)
    (folder / "study.resolved.yaml").write_text(
        yaml.safe_dump({"study": {"name": "s", "axes": {"interval_h": [1, 2]}}})
    )
    res = CliRunner().invoke(app, ["dashboard", str(folder)])
    assert res.exit_code == 0, res.output
    _check_quick(folder / "sweep.html", tmp_path / "shots", expected=2)  # goodput and ETTR


@pytest.mark.slow  # a fit and its page in Chromium: ~7 s (default suite: under 3 CPU min)
def test_calibration_figure_page(tmp_path: Path) -> None:
    files = sorted(SAMPLES.glob("h100-8gpu-1node-allreduce*.txt"))[:2]
    assert len(files) == 2
    res = CliRunner().invoke(app, ["calibrate", *map(str, files), "-o", str(tmp_path / "cal.yaml")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "cal.html").is_file()
    r = render_page(tmp_path / "cal.html", tmp_path / "shots", measure=False)
    assert r.errors == [] and r.plots >= 1 and r.figures_rendered == r.plots


@pytest.mark.slow  # ~3.5 s; the run dashboards cover the renderer (default suite: under 3 CPU min)
def test_calibration_page_of_a_committed_profile(tmp_path: Path) -> None:
    """Entries table plus one figure per source file (4), with or without the samples."""
    profile = ROOT / "topologies" / "calibration" / "h100-nvswitch-efa.yaml"
    page = tmp_path / "h100.html"
    res = CliRunner().invoke(app, ["dashboard", str(profile), "-o", str(page)])
    assert res.exit_code == 0, res.output
    _check_quick(page, tmp_path / "shots", expected=5)


@pytest.mark.slow  # ~8 s with its runs; the comparison and saved-sweep pages stay in the default suite
def test_real_comparison_and_sweep_dashboards(compare_run: Path, sweep_run: Path, tmp_path: Path) -> None:
    """Dashboards rebuilt from real `compare` (3 variants) and `sweep` (6 variants x 2 seeds)
    output folders (simulated once per session, conftest.py)."""
    cmp_dir, sw_dir = compare_run, sweep_run
    res = CliRunner().invoke(app, ["dashboard", str(cmp_dir), str(sw_dir)])
    assert res.exit_code == 0, res.output
    _check_quick(cmp_dir / "comparison.html", tmp_path / "shots", expected=8)  # 5 + Pareto, energy, capex
    _check_quick(sw_dir / "sweep.html", tmp_path / "shots", expected=3)  # goodput, ETTR, wall time
