"""Rings on one full-mesh server use every GPU-to-GPU link, and the engine meets the model.

RCCL lays one channel on each directed xGMI link of an 8-GPU server; the complete directed
graph K*_8 splits into 7 edge-disjoint directed Hamiltonian cycles (Tillson 1980), so a ring
all-reduce on one MI300X server moves at 7 links' rate, which is what the selection's cost
model assumes (`raw_algbw`: the GPU's whole mesh bandwidth).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.collective import plan_collective
from simulator.network.design.registry import build_design
from simulator.network.rings import disjoint_rings
from simulator.network.topology import load_topology
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("n", "expected"), [(3, 2), (4, 2), (5, 4), (6, 4), (7, 6), (8, 7)])
def test_disjoint_rings_are_hamiltonian_and_edge_disjoint(n: int, expected: int) -> None:
    # n-1 cycles exist for every n but 4 and 6 (Tillson 1980; Bermond-Faber; Bermond-Germa-Sotteau)
    rings = disjoint_rings(n)
    assert len(rings) == expected
    edges = [(r[i], r[(i + 1) % n]) for r in rings for i in range(n)]
    assert all(sorted(r) == list(range(n)) for r in rings)
    assert len(edges) == len(set(edges))


def test_one_mesh_server_ring_runs_at_the_model_rate() -> None:
    topo = load_topology(ROOT / "topologies" / "mi300x-zaya1-128n.yaml")
    spec = topo.spec.model_copy(update={"nodes": 1})
    cluster = Cluster(build_design(spec, topo.gpu), topo.gpu)
    gpus = list(cluster.gpus[:8])
    size = 2.0**30
    plan = plan_collective("all_reduce", "auto", cluster.topo, [gpus], size)
    assert plan.algorithm == "ring" and plan.protocol == "simple"
    op = Op("ar", "collective", tuple(range(8)), "comm", collective="all_reduce", group=tuple(range(8)),
            size_bytes=size)  # fmt: skip
    sim = StepSimulator(SimContext(0), cluster, StepProgram("t", gpus, [op]), ComputeCost(cluster.gpu),
                        StepSettings(record_links=False))  # fmt: skip
    sim.run(1)
    # every one of the 7 rings runs alone on its links: the engine's time is the model's
    # latency + size / algbw within the rounding of the fluid solver
    assert sim.step_rows[0].finished_at_s == pytest.approx(plan.predicted_s, rel=0.01)
