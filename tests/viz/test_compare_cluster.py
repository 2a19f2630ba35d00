"""The comparison dashboard of runs without a step (several jobs, or a cluster over days):
their own figures instead of empty step-time cards and plots; small costs keep their digits."""

from __future__ import annotations

import math

import pandas as pd

from simulator.viz.compare import comparison_cards, comparison_figures
from simulator.viz.cost_compare import cost_cards

CLUSTER = pd.DataFrame(
    {
        "variant": ["fifo", "backfill"],
        "step_time_s": [math.nan, math.nan],
        "exposed_comm_s": [math.nan, math.nan],
        "gpu_utilization": [0.678, 0.702],
        "mean_queueing_delay_s": [14_516.0, 4_307.0],
        "median_jct_s": [10_800.0, 9_000.0],
        "network_capex_usd": [617_600.0, 617_600.0],
    }
)


def test_cluster_runs_show_utilization_and_jct_not_na() -> None:
    cards = dict(comparison_cards(CLUSTER))
    assert cards["fifo: GPU utilization"] == "67.8%" and cards["backfill: median JCT"] == "2.50 h"
    assert not any(k.endswith("step time") for k in cards)
    titles = [str(f.layout.title.text) for f in comparison_figures(CLUSTER, {})]
    assert not any(t.startswith(("Step time", "Exposed communication")) for t in titles)
    assert [t.split(" (")[0] for t in titles[:3]] == [
        "GPU utilization per variant",
        "Mean queueing delay per variant",
        "Median job completion time per variant",
    ]
    bars = comparison_figures(CLUSTER, {})[1]
    assert [round(b.y[0], 3) for b in bars.data] == [4.032, 1.196]  # hours


def test_step_runs_keep_their_step_figures() -> None:
    step = pd.DataFrame({"variant": ["a", "b"], "step_time_s": [0.2, 0.3], "exposed_comm_s": [0.01, 0.02]})
    titles = [str(f.layout.title.text) for f in comparison_figures(step, {})]
    assert titles[0].startswith("Step time per variant") and titles[1].startswith("Exposed communication")
    assert dict(comparison_cards(step))["b: step time"].startswith("300.00 ms")


def test_a_cost_below_a_dollar_per_mtoken_keeps_three_digits() -> None:
    table = pd.DataFrame(
        {
            "variant": ["a", "b"],
            "usd_per_mtoken": [0.0129, 12.5],
            "usd_per_step": [1.0, 2.0],
            "tokens_per_s": [1e6, 2e6],
            "energy_per_token_j": [0.1, 0.2],
            "energy_per_step_j": [1e3, 2e3],
        }
    )
    cards = dict(cost_cards(table))
    values = " ".join(cards.values())
    assert "$0.0129 per Mtoken" in values and "$12.50 per Mtoken" in values
