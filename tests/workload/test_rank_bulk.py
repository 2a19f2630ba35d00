"""Rank coordinates, representatives and mirrors computed in bulk are those of the definitions.

`RankGrid.all_coords` writes `coords` out for every rank at once; `SimulatedRanks` finds each
representative with one `rank` call per (ep, pp, cp), builds a pipeline transfer's mirrors
from the rank at tp 0 plus tp times the tp stride, and keeps a mirror after looking each
server's leaf switches up once per simulated group. Each is compared here with the plain
definition (one `coords` or `rank` call per rank, the leaf test of every mirror redone).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import networkx as nx
import pytest

from simulator.network.graph import gpus
from simulator.network.topology import load_topology
from simulator.workload.layout import DIMS, LayoutSpec, RankGrid
from simulator.workload.placement import SimulatedRanks

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("order", [",".join(p) for p in itertools.permutations(DIMS)][::17])
def test_all_coords_are_coords_of_each_rank(order: str) -> None:
    grid = RankGrid(LayoutSpec(dp=4, tp=2, pp=3, cp=2, ep=2, global_batch_size=12, placement=order))
    assert grid.all_coords == [grid.coords(r) for r in range(grid.world_size)]


def _leaves_by_definition(g: nx.Graph) -> dict[str, set[str]]:
    """Server -> the tier-1 switches its NICs and GPUs are cabled to."""
    leaves: dict[str, set[str]] = {}
    for n, d in g.nodes(data=True):
        if d.get("kind") in ("nic", "gpu") and "node" in d:
            leaves.setdefault(str(d["node"]), set()).update(
                x
                for x in g.neighbors(n)
                if g.nodes[x].get("kind") == "switch" and int(g.nodes[x].get("tier", 1)) == 1
            )
    return leaves


def _keep_by_definition(
    sr: SimulatedRanks,
    leaves: dict[str, set[str]],
    mirror: tuple[int, ...],
    sim_group: tuple[int, ...],
    kind: str,
) -> bool:
    servers = {sr.server[r] for r in mirror}
    if len(servers) == 1 and not servers & sr.sim_servers:
        return False
    if sr.scope == "leaf" and kind not in ("dp_cp", "edp"):
        mine = {x for r in sim_group for x in leaves.get(sr.server[r], set())}
        return not mine or any(leaves.get(s, set()) & mine for s in servers)
    return True


@pytest.mark.parametrize("mirrors", ["leaf", "all"])
def test_representatives_and_mirrors_are_those_of_the_definitions(mirrors: str) -> None:
    topo = load_topology(ROOT / "topologies/h100-rail-clos-16n-4to1.yaml")
    g: nx.Graph = topo.graph
    layout = LayoutSpec(dp=8, tp=4, pp=4, ep=2, global_batch_size=16)
    sr = SimulatedRanks(layout, gpus(g)[: layout.world_size], g, representatives=True, mirrors=mirrors)
    grid, leaves = sr.grid, _leaves_by_definition(g)
    assert sr.rep == [
        grid.rank(dp=c.ep, pp=c.pp, tp=0, cp=c.cp) for c in map(grid.coords, range(grid.world_size))
    ]
    kept = 0
    for src in sr.simulated:
        for dst in sr.simulated:
            if src == dst:
                continue
            cs, cd = grid.coords(src), grid.coords(dst)
            want = []
            for edp in range(layout.edp):
                dp = cs.ep + layout.ep * edp
                for tp in range(layout.tp):
                    pair = (
                        grid.rank(dp=dp, pp=cs.pp, tp=tp, cp=cs.cp),
                        grid.rank(dp=dp, pp=cd.pp, tp=tp, cp=cd.cp),
                    )
                    if (edp, tp) != (0, 0) and _keep_by_definition(sr, leaves, pair, (src, dst), "pp"):
                        want.append(pair)
            assert sr.p2p_group(src, dst).mirrors == tuple(want)
            kept += len(want)
    for kind in ("tp", "pp", "ep", "dp_cp"):
        for grp in grid.groups(kind):
            for other in grid.groups(kind)[:6]:
                assert sr._keep_mirror(tuple(other), tuple(grp), kind) == _keep_by_definition(
                    sr, leaves, tuple(other), tuple(grp), kind
                )
    assert kept > 0
