"""The fixed-radix rail-optimized Clos and fixed-radix rail-only rails: switch counts and capex."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from simulator.errors import InputError
from simulator.network.cost import cost_summary, estimate_cost, load_prices
from simulator.network.design.clos import RailOnlySpec
from simulator.network.design.rail_optimized import RailOptimizedClosSpec
from simulator.network.design.registry import build_design


def _switches(g: nx.Graph) -> Counter[str]:
    return Counter(d["role"] for _, d in g.nodes(data=True) if d.get("kind") == "switch" and d["tier"] >= 1)


def _ports_used(g: nx.Graph, n: str) -> int:
    return sum(int(e.get("links", 1)) for e in g.adj[n].values())


def test_three_tiers_are_a_k_ary_fat_tree() -> None:
    """64 servers x 2 GPUs = 128 NICs on 8-port switches: the k = 8 fat-tree of Al-Fares et al.
    (SIGCOMM 2008) holds k^3/4 = 128 hosts with 5k^2/4 = 80 switches: 32 leaves (one per rail
    per 4 servers), 8 pods x 4 spines, 16 cores."""
    g = build_design(RailOptimizedClosSpec(nodes=64, gpus_per_node=2, switch_radix=8))
    assert _switches(g) == {"leaf": 32, "spine": 32, "core": 16}
    assert g.graph["structure"]["tiers"] == 3
    for n, d in g.nodes(data=True):
        if d.get("kind") == "switch" and d["tier"] >= 1:
            assert d["radix"] == 8 and _ports_used(g, n) <= 8, n
    nic_bw = 400e9 / 8
    assert g.graph["structure"]["bisection_bytes_per_s"] == pytest.approx(128 * nic_bw / 2)


def test_fewest_tiers_by_default_and_three_on_request() -> None:
    two = build_design(RailOptimizedClosSpec(nodes=16, gpus_per_node=2, switch_radix=8))
    assert _switches(two) == {"leaf": 8, "spine": 4}  # 8 leaves x 4 uplinks over 8-port spines
    three = build_design(RailOptimizedClosSpec(nodes=16, gpus_per_node=2, switch_radix=8, tiers=3))
    assert three.graph["structure"]["tiers"] == 3 and _switches(three)["core"] > 0
    with pytest.raises(InputError, match="use tiers: 3"):
        build_design(RailOptimizedClosSpec(nodes=64, gpus_per_node=2, switch_radix=8, tiers=2))


def test_rail_only_saves_the_tier_a_rail_does_not_need() -> None:
    """32 servers x 2 GPUs on 8-port switches: the rail-optimized Clos needs 16 leaves, hence
    three tiers (16 leaves + 16 spines + 8 cores = 40); each rail-only rail of 32 NICs fits in
    two (8 leaves + 4 spines), 24 switches for both rails."""
    clos = build_design(RailOptimizedClosSpec(nodes=32, gpus_per_node=2, switch_radix=8))
    rail = build_design(RailOnlySpec(nodes=32, gpus_per_node=2, switch_radix=8))
    assert sum(_switches(clos).values()) == 40
    assert _switches(rail) == {"leaf": 16, "spine": 8}
    prices = load_prices()
    a, b = (cost_summary(estimate_cost(g, prices)) for g in (clos, rail))
    assert a["capex_nics_usd"] == b["capex_nics_usd"]
    port = prices.switch_port_usd["ib"][400].value
    assert a["capex_switches_usd"] - b["capex_switches_usd"] == pytest.approx((40 - 24) * 8 * port)
    # one rail that fits in one switch: no spine at all
    small = build_design(RailOnlySpec(nodes=8, gpus_per_node=2, switch_radix=8))
    assert _switches(small) == {"rail": 2}


def test_rail_only_without_radix_is_unchanged() -> None:
    g = build_design(RailOnlySpec(nodes=32))
    assert _switches(g) == {"rail": 8}
    assert all("radix" not in d for _, d in g.nodes(data=True))
