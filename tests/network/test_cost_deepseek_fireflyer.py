"""Switch counts and capex of the designs of the DeepSeek and Fire-Flyer 2 compare files
(scenarios/at-scale/compare-multiplane-vs-fat-tree-*.yaml, compare-fireflyer2-vs-dgx-a100.yaml)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from simulator.config.loader import Document, read_document
from simulator.network.cost import cost_summary, estimate_cost, load_prices
from simulator.network.topology import load_topology

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "topologies"


def _switches(g: nx.Graph) -> Counter[str]:
    return Counter(d["role"] for _, d in g.nodes(data=True) if d.get("kind") == "switch" and d["tier"] >= 1)


def _scaled(name: str, nodes: int):
    """The topology file `name` with `nodes` servers (read in place, so its GPU file resolves)."""
    path = TOPO / f"{name}.yaml"
    doc = read_document(path)
    return load_topology(path, doc=Document(path, {**doc.data, "nodes": nodes}, doc.lines))


def test_two_thousand_gpus_multi_plane_and_one_fat_tree_are_the_same_ft2():
    """2,048 NICs on 64-port switches (32 down, 32 up): 2,048 / 32 = 64 leaves and
    64 x 32 / 64 = 32 spines, in 8 planes or in one fabric alike: DeepSeek's FT2 of 96
    switches ("Insights into DeepSeek-V3", arXiv 2505.09343, Table 3)."""
    prices = load_prices()
    totals = []
    for name in ("h800-multiplane-256n", "h800-fat-tree-256n"):
        g = load_topology(TOPO / f"{name}.yaml").graph
        assert _switches(g) == {"leaf": 64, "spine": 32}, name
        totals.append(cost_summary(estimate_cost(g, prices, "cluster"), 2048)["network_capex_usd"])
    assert totals[0] == totals[1]


@pytest.mark.slow
def test_sixteen_thousand_gpus_multi_plane_is_two_tiers_and_one_fat_tree_three():
    """16,384 NICs: 8 planes x (64 leaves + 32 spines) = 768 switches, as DeepSeek's MPFT
    (Table 3); one fat-tree of 64-port switches needs 512 leaves, 512 spines (8 pods) and
    256 cores = 1,280 switches, a quarter of the k = 64 fat-tree's 5k^2/4 = 5,120 (FT3)."""
    mp = _scaled("h800-multiplane-256n", 2048).graph
    ft = _scaled("h800-fat-tree-256n", 2048).graph
    assert _switches(mp) == {"leaf": 512, "spine": 256}
    assert _switches(ft) == {"leaf": 512, "spine": 512, "core": 256}
    prices = load_prices()
    mp_net, ft_net = (
        cost_summary(estimate_cost(g, prices, "cluster"), 16384)["network_capex_usd"] for g in (mp, ft)
    )
    assert mp_net < ft_net


@pytest.mark.slow
def test_fire_flyer_two_has_one_nic_per_server_and_two_tiers():
    """800 servers, one 200G NIC each, 40-port switches (20 down, 20 up): 40 leaves and
    40 x 20 / 40 = 20 spines; the DGX-A100 side has 8 NICs per server (6,400) in SUs of 20
    servers: 320 leaves, three tiers."""
    ff = load_topology(TOPO / "fireflyer2-pcie-a100-800n.yaml").graph
    assert _switches(ff) == {"leaf": 40, "spine": 20}
    assert sum(1 for _, d in ff.nodes(data=True) if d.get("kind") == "nic") == 800
    dgx = load_topology(TOPO / "dgx-a100-superpod-800n.yaml").graph
    assert sum(1 for _, d in dgx.nodes(data=True) if d.get("kind") == "nic") == 6400
    assert _switches(dgx)["leaf"] == 320 and dgx.graph["structure"]["tiers"] == 3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["multiplane-vs-fat-tree-2k", "fireflyer2-vs-dgx-a100"])
def test_cost_compare_files_load(name: str) -> None:
    from simulator.study.compare import load_comparison

    cmp = load_comparison(ROOT / "scenarios" / "at-scale" / f"compare-{name}.yaml")
    assert len(cmp.variants) == 2
    assert all(v.prepared.program.meta.get("tokens_per_step") for v in cmp.variants)
