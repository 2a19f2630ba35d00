"""Cost figures of the comparison dashboard: the Pareto front, energy, capex by part."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.viz.cost_compare import (
    capex_parts_figure,
    cost_axes,
    cost_cards,
    cost_pareto_figure,
    energy_figure,
    pareto_front,
    tokens_notice,
    variants_without_tokens,
)
from tests.conftest import ROOT


def test_pareto_front_by_hand() -> None:
    # (cost, tokens/s): b is cheaper than a and as fast; c is fastest; d is dominated by b
    cost = np.array([2.0, 1.0, 3.0, 1.5])
    speed = np.array([10.0, 10.0, 12.0, 9.0])
    assert list(pareto_front(cost, speed, higher_is_better=True)) == [False, True, True, False]
    # step time: lower is better
    step = np.array([1.0, 2.0, 0.5])
    assert list(pareto_front(np.array([1.0, 1.0, 2.0]), step, higher_is_better=False)) == [True, False, True]


def _table(with_tokens: bool) -> pd.DataFrame:
    t = pd.DataFrame(
        {
            "variant": ["a", "b", "c"],
            "step_time_s": [1.0, 1.2, 0.9],
            "usd_per_step": [10.0, 8.0, 12.0],
            "energy_per_step_j": [1e6, 1.1e6, 0.9e6],
            "capex_gpus_usd": [5e6] * 3,
            "capex_switches_usd": [1e6, 0.5e6, 2e6],
        }
    )
    if with_tokens:
        t["tokens_per_s"] = 1e6 / t["step_time_s"]
        t["usd_per_mtoken"] = t["usd_per_step"]
        t["energy_per_token_j"] = t["energy_per_step_j"] / 1e6
    return t


@pytest.mark.parametrize("with_tokens", [True, False])
def test_cost_figures_mark_the_front(with_tokens: bool) -> None:
    t = _table(with_tokens)
    axes = cost_axes(t)
    assert axes is not None and axes[0] == ("usd_per_mtoken" if with_tokens else "usd_per_step")
    fig = cost_pareto_figure(t)
    stars = [tr.name for tr in fig.data if tr.marker and tr.marker.symbol == "star"]
    assert stars == ["a", "b", "c"]  # each trades cost for speed: none dominated
    front_line = fig.data[-1]
    assert front_line.name == "Pareto front" and list(front_line.x) == sorted(t["usd_per_step"])
    energy = energy_figure(t)
    assert list(energy.data[0].y) == list(t["energy_per_token_j" if with_tokens else "energy_per_step_j"])
    parts = capex_parts_figure(t)
    assert [tr.name for tr in parts.data] == ["gpus", "switches"]
    cards = cost_cards(t)
    assert [c[0] for c in cards] == ["a: cost", "b: cost", "c: cost"]


def test_dominated_variant_is_not_a_star() -> None:
    t = _table(True)
    t.loc[1, "usd_per_mtoken"] = 20.0  # b: slower and dearer than a
    fig = cost_pareto_figure(t)
    assert [tr.name for tr in fig.data if tr.marker and tr.marker.symbol == "star"] == ["a", "c"]


def test_no_cost_columns_is_said_not_hidden() -> None:
    t = pd.DataFrame({"variant": ["a"], "step_time_s": [1.0]})
    assert cost_axes(t) is None and "no cost columns" in cost_pareto_figure(t).layout.title.text


@pytest.mark.slow
@pytest.mark.parametrize("name", ["1k", "8k", "32k"])
def test_at_scale_compare_files_load(name: str) -> None:
    from simulator.study.compare import load_comparison

    cmp = load_comparison(ROOT / "scenarios" / "at-scale" / f"compare-rail-only-vs-clos-{name}.yaml")
    assert [v.name for v in cmp.variants] == ["rail-clos", "rail-only"]
    designs = {v.prepared.topology.graph.graph["structure"]["design"] for v in cmp.variants}
    assert designs == {"rail_optimized_clos", "rail_only"}


def test_variant_without_tokens_is_named_with_the_fix() -> None:
    t = _table(True)
    t.loc[1, ["usd_per_mtoken", "tokens_per_s", "energy_per_token_j"]] = np.nan  # b: a trace, no tokens
    assert variants_without_tokens(t) == ["b"]
    notice = tokens_notice(t)
    assert notice is not None and "tokens not stated for b" in notice and "tokens_per_step" in notice
    assert cost_axes(t)[0] == "usd_per_step"  # not every variant has a cost per token
    assert notice in cost_pareto_figure(t).layout.title.text
    cards = dict(cost_cards(t))
    assert cards["a: cost"].startswith("$10.00 per Mtoken") and cards["c: cost"].startswith(
        "$12.00 per Mtoken"
    )
    assert cards["b: cost"].startswith("$8 per step") and "tokens not stated" in cards["b: cost"]
    assert tokens_notice(_table(True)) is None
    assert variants_without_tokens(_table(False)) == ["a", "b", "c"]
