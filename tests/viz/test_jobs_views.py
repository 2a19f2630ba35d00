"""The job views draw what the frames say: interference bars are the alone / together step
times, the link-load figure puts shared links first and stacks each job's bytes, and the
occupancy timeline follows the busy GPUs; a several-jobs run page carries the job figures."""

from __future__ import annotations

import pandas as pd

from simulator.viz.dashboard import run_dashboard_html
from simulator.viz.jobs import (
    interference_figure,
    job_cards,
    job_link_load_figure,
    job_lives_figure,
    occupancy_figure,
)

JOBS = pd.DataFrame(
    {
        "job": ["a", "b"],
        "step_time_alone_s": [0.100, 0.200],
        "step_time_s": [0.125, 0.200],
        "slowdown": [1.25, 1.0],
    }
)
JOB_LINKS = pd.DataFrame(
    {
        "job": ["a", "a", "b", "b"],
        "link": ["x->y", "busy->z", "x->y", "b->c"],
        "bytes": [1e9, 9e9, 3e9, 2e9],
        "jobs_on_link": [2, 1, 2, 1],
    }
)


def test_interference_bars_are_the_step_times() -> None:
    fig = interference_figure(JOBS)
    alone, together = fig.data
    assert list(alone.y) == [100.0, 200.0] and list(together.y) == [125.0, 200.0]
    assert list(together.text) == ["x1.2500", "x1.0000"]


def test_link_load_puts_shared_links_first_and_stacks_jobs() -> None:
    fig = job_link_load_figure(JOB_LINKS)
    a, b = fig.data
    assert list(a.x) == ["x->y", "busy->z", "b->c"]
    assert list(a.y) == [1.0, 9.0, 0.0] and list(b.y) == [3.0, 0.0, 2.0]


def test_occupancy_follows_busy_gpus() -> None:
    occ = pd.DataFrame(
        {
            "time_s": [0.0, 3600.0],
            "busy_gpus": [8, 16],
            "down_gpus": [0, 8],
            "queued_jobs": [1, 0],
            "running_jobs": [1, 2],
        }
    )
    fig = occupancy_figure(occ, 32)
    assert list(fig.data[0].x) == [0.0, 1.0] and list(fig.data[0].y) == [8, 16]
    assert list(fig.data[1].y) == [0, 8]


def test_a_several_jobs_page_carries_the_job_figures() -> None:
    steps = pd.DataFrame(
        {
            "job": ["a", "b"],
            "step": [0, 0],
            "compute_s": [0.08, 0.15],
            "exposed_comm_s": [0.04, 0.05],
            "idle_s": [0.005, 0.0],
            "weight": [1, 1],
        }
    )
    summary = {"scenario": "t", "n_jobs": 2, "max_slowdown": 1.25, "gpus_in_job": 32, "gpus_in_topology": 64}
    html = run_dashboard_html({"jobs": JOBS, "job_links": JOB_LINKS, "steps": steps}, summary)
    assert "clustersim-figures' content='3'" in html
    assert "Interference: step time alone vs together" in html and "worst slowdown" in html


def test_cluster_cards_say_n_a_for_figures_the_run_has_none_of() -> None:
    """No job finished: median JCT is NaN in the run's summary and null in summary.json read
    back (`clustersim dashboard`); the card says n/a in both, and the page still builds."""
    base = {"n_jobs": 1, "jobs_finished": 0, "gpu_utilization": 0.0625, "mean_queueing_delay_s": 0.0}
    for missing in (float("nan"), None):
        cards = dict(job_cards({**base, "median_jct_s": missing, "goodput": missing}))
        assert cards["median JCT"] == "n/a" and cards["goodput"] == "n/a"
        assert cards["GPU utilization"] == "6.2%" and cards["mean queueing"] == "0.00 h"


def test_job_lives_draw_no_negative_span_for_a_job_submitted_after_the_run() -> None:
    """A 1-day run: `a` ran 0-1 h; `b`, submitted at 30 h, never entered the run. Its bars
    are empty at 30 h (they ran backwards from 30 h to 24 h)."""
    table = pd.DataFrame(
        {
            "job": ["a", "b"],
            "gpus": [8, 8],
            "restarts": [0, 0],
            "submit_s": [0.0, 30 * 3600.0],
            "first_start_s": [0.0, float("nan")],
            "end_s": [3600.0, float("nan")],
        }
    )
    queued, running = job_lives_figure(table, 86400.0).data
    assert list(queued.x) == [0.0, 0.0] and list(running.x) == [1.0, 0.0]
    assert list(queued.base) == [0.0, 30.0]
