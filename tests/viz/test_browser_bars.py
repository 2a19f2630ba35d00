"""The two run pages with stated targets, opened in headless Chromium and read back.

* The 1,024-GPU run (scenarios/llama3-70b-tp8-pp4-dp32.yaml): the page without plotly.js is
  under 2 MB and draws in under 5 s; its step timeline, as the browser holds it, shows
  compute and exposed TP communication in the proportions of `summary.json`.
* The run under failures (scenarios/quickstart-failures.yaml): the incidents drawn by kind
  are as many as `incidents.parquet` holds.

Screenshots are kept under `results/browser/` (a CI artifact). Needs a Chromium binary
(`tests/viz/install_chromium.sh`); skipped otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from browser import find_chromium, render_page

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "results" / "browser"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        find_chromium() is None,
        reason="no chromium binary (install: tests/viz/install_chromium.sh, or set $CHROMIUM)",
    ),
]


@pytest.mark.slow  # a 1,024-GPU run and its page in Chromium: ~7 CPU s of the default suite's 3 minutes
def test_1024_gpu_page_is_small_and_draws_the_summary_proportions(big_run: Path) -> None:
    """How fast it renders is `benchmarks/bench_dashboard.py`'s figure, not a test's (a
    wall-time bound fails on a loaded machine): here, that it renders at all."""
    out = big_run
    page = out / "dashboard.html"
    assert page.stat().st_size < 2 * 2**20  # plotly.js is the sibling file, not in the page
    assert (out / "plotly.min.js").is_file()
    r = render_page(page, SHOTS / "llama3-70b-1024", measure=True, screenshot=True)
    assert r.errors == [] and r.stderr_errors == [], r.errors + r.stderr_errors
    assert r.figures_rendered == r.plots == r.figures_expected > 0
    assert r.render_ms is not None  # the page reported its render: every figure drawn
    assert r.screenshot is not None
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    timeline = r.figures[0]
    lanes: dict[str, float] = {}
    drawn = {"compute": 0.0, "tp": 0.0}
    for t in timeline["traces"]:
        if not t["visible"] or t["visible"] == "legendonly":
            continue
        assert t["n"] > 0, t["name"]
        if t["name"].startswith("compute: "):
            drawn["compute"] += t["sum_x"]
        elif t["name"] == "exposed tp comm":
            drawn["tp"] += t["sum_x"]
        for lane, ms in t["per_y"].items():
            lanes[lane] = lanes.get(lane, 0.0) + ms
    # one lane per simulated rank (4 stand for the 1,024), each as long as the step
    assert len(lanes) == summary["simulated_ranks"] == 4
    step_ms = summary["step_time_s"] * 1e3
    assert all(abs(v - step_ms) < 1e-3 for v in lanes.values()), (lanes, step_ms)
    # the lanes' mean compute and exposed TP are summary.json's (equal rank weights here,
    # 256 each); bars are rounded to 1 ns, so 1e-6 of a 4.5 s step is far above rounding
    want_compute = summary["compute_s"] * 1e3
    want_tp = summary["exposed_comm_by_tag_s"]["tp"] * 1e3
    assert drawn["compute"] / 4 == pytest.approx(want_compute, rel=1e-6)
    assert drawn["tp"] / 4 == pytest.approx(want_tp, rel=1e-6)
    assert drawn["compute"] / drawn["tp"] == pytest.approx(want_compute / want_tp, rel=1e-6)


@pytest.mark.slow  # ~9 s in Chromium; test_browser's rebuilt failures dashboard stays in the default suite
def test_failures_page_draws_every_incident_of_the_run(failures_run: Path) -> None:
    out = failures_run
    r = render_page(out / "dashboard.html", SHOTS / "quickstart-failures", measure=False, screenshot=True)
    assert r.errors == [] and r.stderr_errors == [], r.errors + r.stderr_errors
    assert r.figures_rendered == r.plots == r.figures_expected > 0
    incidents = pd.read_parquet(out / "incidents.parquet")
    want = incidents["kind"].value_counts().to_dict()
    assert {"failure", "restart", "checkpoint"} <= set(want)
    fig = next(f for f in r.figures if f["title"].startswith("Incidents over the run"))
    drawn = {t["meta"]["kind"]: t["n"] for t in fig["traces"] if t["meta"] and "kind" in t["meta"]}
    assert drawn == want
    # the legend says the counts too, e.g. "failure (3)"
    names = {t["name"] for t in fig["traces"]}
    assert all(f"{k} ({n:,})" in names for k, n in want.items())
    # and the wall-time page splits every seed's wall time into parts adding to 100 %
    parts = next(f for f in r.figures if f["title"].startswith("Wall time by part"))
    bars = [t for t in parts["traces"] if t["type"] == "bar"]
    runs = pd.read_parquet(out / "runs.parquet")
    assert all(t["n"] == len(runs) for t in bars)
    assert {t["name"] for t in bars} >= {"compute", "checkpoint stall", "restart", "lost work (recomputed)"}
