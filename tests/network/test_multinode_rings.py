"""Two servers never make an all-reduce slower than one server's NICs allow.

For every topology in `topologies/` whose generator takes a node count, the same design is
built with two nodes. The bandwidth term of a 2-node all-reduce (busbw from the slope of time
against size, so latency drops out) must reach the bound a single server sets: the smaller of

* the NIC bound: the sum of the catalog rates of one server's NIC ports into the network
  (the NIC-to-switch links, per direction). A ring all-reduce crosses from one server to the
  other and back once per channel, so each server sends and receives 2(n-1)/n·S through its
  NICs: busbw = 2(n-1)/n·S / t cannot exceed that sum, and a correct channel layout reaches it;
* the busbw of the same all-reduce on one server alone (its scale-up fabric), since a second
  server cannot make the in-server part faster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.design.registry import build_design
from simulator.network.topology import load_topology
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    p.name
    for p in (ROOT / "topologies").glob("*.yaml")
    if p.name != "prices.yaml" and "\nnodes:" in p.read_text(encoding="utf-8")
)
S1, S2 = 2.0**30, 2.0**31


def _two_nodes(name: str) -> Cluster:
    topo = load_topology(ROOT / "topologies" / name)
    spec = topo.spec.model_copy(update={"nodes": 2})
    return Cluster(build_design(spec, topo.gpu), topo.gpu)


def _time_s(cluster: Cluster, gpus: list[str], size: float, algorithm: str | None) -> float:
    n = len(gpus)
    op = Op(
        "ar", "collective", tuple(range(n)), "comm", collective="all_reduce",
        group=tuple(range(n)), size_bytes=size, algorithm=algorithm,
    )  # fmt: skip
    sim = StepSimulator(
        SimContext(0), cluster, StepProgram("t", gpus, [op]), ComputeCost(cluster.gpu), StepSettings()
    )
    sim.run(1)
    return sim.step_rows[0].finished_at_s


def _slope_busbw(cluster: Cluster, gpus: list[str], algorithm: str | None) -> float:
    n = len(gpus)
    dt = _time_s(cluster, gpus, S2, algorithm) - _time_s(cluster, gpus, S1, algorithm)
    return (S2 - S1) / dt * 2 * (n - 1) / n


def _nic_bound(cluster: Cluster, server: str) -> float:
    """Sum over the server's NICs of their links to nodes outside the server, bytes/s."""
    g = cluster.graph
    total = 0.0
    for nic, d in g.nodes(data=True):
        if d.get("kind") != "nic" or d.get("node") != server:
            continue
        for other in g.neighbors(nic):
            if g.nodes[other].get("node") != server:
                total += g.edges[nic, other]["bandwidth_bytes_per_s"]
    return total


def test_catalog_has_multi_node_servers():
    assert {"mi300x-zaya1-128n.yaml", "h100-rail-clos-2n.yaml", "h800-multiplane-256n.yaml"} <= set(FILES)


@pytest.mark.parametrize("algorithm", ["ring", None])
@pytest.mark.parametrize("name", FILES)
def test_two_node_all_reduce_reaches_nic_bound(name, algorithm):
    cluster = _two_nodes(name)
    server0 = cluster.topo.server(cluster.gpus[0])
    local = [x for x in cluster.gpus if cluster.topo.server(x) == server0]
    nic = _nic_bound(cluster, server0)
    assert nic > 0
    bound = nic if len(local) == 1 else min(nic, _slope_busbw(cluster, local, algorithm))
    two = _slope_busbw(cluster, cluster.gpus, algorithm)
    # the fluid model is exact, so only floating-point error separates a reached bound from it
    assert two >= bound * (1 - 1e-6), f"{name}: 2-node busbw {two / 1e9:.1f} GB/s < bound {bound / 1e9:.1f}"
