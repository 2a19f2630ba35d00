"""Network capex and power estimates from the price table."""

from __future__ import annotations

import pytest

from simulator.config.loader import parse_text, validate
from simulator.errors import InputError
from simulator.network.cost import (
    DEFAULT_PRICES,
    PriceSpec,
    cost_summary,
    estimate_cost,
    load_prices,
    lookup,
)
from simulator.network.design.clos import FatTreeSpec, SuperPodSpec
from simulator.network.design.registry import DESIGN_SPECS, build_design


@pytest.fixture(scope="module")
def prices() -> PriceSpec:
    return load_prices()


def test_price_file_validates(prices: PriceSpec) -> None:
    assert DEFAULT_PRICES.name == "prices.yaml"
    assert prices.currency == "USD"
    assert prices.nic_usd[400].value > 0


@pytest.mark.parametrize("spec_cls", DESIGN_SPECS)
def test_every_design_has_a_positive_cost(spec_cls: type, prices: PriceSpec) -> None:
    items = estimate_cost(build_design(spec_cls()), prices)
    total = cost_summary(items)
    assert total["capex_usd"] > 0 and total["power_w"] > 0
    assert (items["capex_usd"] >= 0).all()
    assert list(items.columns) == [
        "category",
        "item",
        "quantity",
        "unit_usd",
        "capex_usd",
        "unit_power_w",
        "power_w",
    ]


def test_cost_scales_with_size(prices: PriceSpec) -> None:
    small = cost_summary(estimate_cost(build_design(SuperPodSpec(nodes=32)), prices))
    big = cost_summary(estimate_cost(build_design(SuperPodSpec(nodes=128)), prices))
    assert big["capex_usd"] > 3 * small["capex_usd"]
    assert big["power_w"] > 3 * small["power_w"]


def test_oversubscription_is_cheaper(prices: PriceSpec) -> None:
    full = cost_summary(estimate_cost(build_design(SuperPodSpec(nodes=128)), prices))
    half = cost_summary(estimate_cost(build_design(SuperPodSpec(nodes=128, oversubscription=2)), prices))
    assert half["capex_usd"] < full["capex_usd"]


def test_fat_tree_line_items_follow_counts(prices: PriceSpec) -> None:
    """k = 4 fat-tree at 400G: 20 switches x 4 ports; 16 NICs; 16 DAC (host-edge),
    16 AOC (edge-agg), 16 optics (agg-core)."""
    items = estimate_cost(build_design(FatTreeSpec(k=4, link_gbps=400)), prices).set_index("item")
    port = prices.switch_port_usd["ethernet"][400].value
    switches = items[items.category == "switches"]
    assert switches["quantity"].sum() == 20
    assert switches["capex_usd"].sum() == pytest.approx(20 * 4 * port)
    assert items.loc["NIC 400G", "quantity"] == 16
    assert items.loc["dac 400G nic-edge", "quantity"] == 16
    assert items.loc["aoc 400G edge-aggregation", "quantity"] == 16
    assert items.loc["optics 400G aggregation-core", "quantity"] == 16
    summary = cost_summary(items.reset_index(), gpus=16)
    assert summary["capex_per_gpu_usd"] == pytest.approx(summary["capex_usd"] / 16)


def test_lookup_rounds_up_then_scales() -> None:
    table = {100.0: 1.0, 400.0: 4.0}
    assert lookup(table, 50) == 1.0
    assert lookup(table, 200) == 4.0
    assert lookup(table, 800) == 8.0


def test_bad_price_table_is_an_input_error(tmp_path) -> None:
    doc = parse_text("switch_port_usd: {ib: {400: 1}}\nnic_usd: {400: {value: -1}}\n", tmp_path / "p.yaml")
    with pytest.raises(InputError):
        validate(PriceSpec, doc)
