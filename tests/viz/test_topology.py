"""Topology drawing: layered layout, colors by medium or utilization, aggregation."""

from __future__ import annotations

import pandas as pd

from simulator.network.design.clos import FatTreeSpec, SuperPodSpec
from simulator.network.design.direct import TorusSpec
from simulator.network.design.registry import build_design
from simulator.viz.topology import topology_figure


def test_small_graph_draws_every_node_layered() -> None:
    g = build_design(SuperPodSpec(nodes=4, su_size=4))
    fig = topology_figure(g)
    nodes = sum(len(t.x) for t in fig.data if t.mode == "markers")
    assert nodes == g.number_of_nodes()
    names = {t.name for t in fig.data}
    assert {"nvlink", "pcie", "ib", "gpu", "nic", "switch tier 1", "switch tier 2"} <= names
    ys = {t.name: set(t.y) for t in fig.data if t.mode == "markers"}
    assert max(ys["gpu"]) < min(ys["nic"]) < min(ys["switch tier 1"]) < min(ys["switch tier 2"])
    assert "aggregated" not in fig.layout.title.text


def test_link_utilization_colors_links() -> None:
    g = build_design(FatTreeSpec(k=4))
    edges = list(g.edges())
    util = pd.Series([0.95] * 4 + [0.05] * 4, index=pd.Index(edges[:8], tupleize_cols=False))
    fig = topology_figure(g, util)
    names = {t.name for t in fig.data if t.mode == "lines"}
    assert {"util 0.9-1.0", "util 0.0-0.1", "no data"} <= names
    hot = next(t for t in fig.data if t.name == "util 0.9-1.0")
    assert len(hot.x) == 4 * 3  # two points and a gap per link


def test_large_graph_is_aggregated_and_says_so() -> None:
    g = build_design(SuperPodSpec(nodes=512))
    fig = topology_figure(g, max_elements=3000)
    title = fig.layout.title.text
    assert "one node per server" in title and "showing the first" in title
    drawn = sum(len(t.x) for t in fig.data if t.mode == "markers")
    edges = sum(len(t.x) // 3 for t in fig.data if t.mode == "lines")
    assert drawn + edges <= 3000


def test_switchless_torus_uses_spring_layout() -> None:
    fig = topology_figure(build_design(TorusSpec(dims=[3, 3], gpus_per_node=1)))
    gpu = next(t for t in fig.data if t.name == "gpu")
    assert len(set(gpu.y)) > 1
