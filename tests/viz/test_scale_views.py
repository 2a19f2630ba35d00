"""The views that keep a dashboard honest at scale: activity lanes, wall time by part,
incidents by kind, and the topology by tier and pod. Each is checked against the frame it
draws."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simulator.metrics.store import read_frames
from simulator.viz.activity import _per_rank_state_bins, activity_figure, rank_state_bins
from simulator.viz.dashboard import load_graph
from simulator.viz.goodput import incident_timeline_figure, step_shares, wall_time_figure, wall_time_parts
from simulator.viz.topology_groups import group_graph


def _lane_sums(fig, view: str | None = None) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for t in fig.data:
        if view is not None and t.meta["view"] != view:
            continue
        for y, x in zip(t.y, t.x, strict=True):
            out[(y, t.meta["state"])] = out.get((y, t.meta["state"]), 0.0) + float(x)
    return out


def test_activity_lanes_are_the_steps_frame(big_run: Path) -> None:
    frames = read_frames(big_run)
    ops, steps = frames["ops"], frames["steps"]
    fig = activity_figure(ops)
    sums = _lane_sums(fig)
    for _, row in steps.iterrows():
        rank = int(row["rank"])
        lane = f"{ops.loc[ops['rank'] == rank, 'role'].iloc[0]} r{rank}"
        compute = sum(v for (y, s), v in sums.items() if y == lane and s.startswith("compute:"))
        # the frame's breakdown, same rules (metrics/frames.py); bars rounded to 1 ns each
        assert compute == pytest.approx(row["compute_s"] * 1e3, abs=1e-3)
        assert sums[(lane, "exposed:tp")] == pytest.approx(row["exposed_tp_s"] * 1e3, abs=1e-3)
        assert sums[(lane, "idle")] == pytest.approx(row["idle_s"] * 1e3, abs=1e-3)
        total = sum(v for (y, _), v in sums.items() if y == lane)
        assert total == pytest.approx(row["step_time_s"] * 1e3, abs=1e-3)


def test_group_lanes_are_the_mean_of_their_ranks(big_run: Path) -> None:
    ops = read_frames(big_run)["ops"]
    fig = activity_figure(ops, max_rank_lanes=2)  # 4 ranks, so lanes become pipeline stages
    sums = _lane_sums(fig, "groups (mean of their ranks)")
    assert {y for y, _ in sums} == {f"pp{i} (1 ranks)" for i in range(4)}
    assert any(t.meta["view"] == "ranks of pp0" for t in fig.data)
    assert fig.layout.updatemenus[0].buttons[0].label == "groups (mean of their ranks)"


def test_state_bins_add_up_to_each_bin() -> None:
    ops = pd.DataFrame(
        {
            "kind": ["compute", "collective", "collective", "compute"],
            "tag": ["fwd", "tp", "dp", "bwd"],
            "started_at_s": [0.0, 0.5, 1.0, 2.0],
            "finished_at_s": [1.0, 1.5, 2.5, 3.0],
        }
    )
    bins = rank_state_bins(ops, 0.0, 4.0, 4)
    assert np.allclose(sum(bins.values()), 1.0)
    assert np.allclose(bins["compute:fwd"], [1, 0, 0, 0]) and np.allclose(bins["compute:bwd"], [0, 0, 1, 0])
    # [1, 1.5): tp and dp both run while compute idles: shared equally; [1.5, 2): dp alone
    assert np.allclose(bins["exposed:tp"], [0, 0.25, 0, 0]) and np.allclose(
        bins["exposed:dp"], [0, 0.75, 0, 0]
    )
    assert np.allclose(bins["idle"], [0, 0, 0, 1])


def test_all_ranks_at_once_are_each_rank_alone() -> None:
    """The dashboard computes every rank's lanes from one sort of the ops; each must equal
    `rank_state_bins` on that rank's rows alone, bit for bit (ranks interleaved, empty and
    missing tags, zero-length ops)."""
    rng = np.random.default_rng(3)
    n = 200
    starts = rng.uniform(0.0, 3.0, n).round(2)
    ops = pd.DataFrame(
        {
            "rank": rng.integers(0, 7, n),
            "kind": rng.choice(["compute", "collective"], n),
            "tag": rng.choice(["fwd", "bwd", "tp", "dp", "", None], n),
            "started_at_s": starts,
            "finished_at_s": starts + rng.choice([0.0, 0.05, 0.3, 1.0], n),
        }
    )
    together = _per_rank_state_bins(ops, 0.0, 4.5, 16)
    alone = {int(r): rank_state_bins(g, 0.0, 4.5, 16) for r, g in ops.groupby("rank", sort=True)}
    assert list(together) == list(alone)
    for r, states in alone.items():
        assert list(together[r]) == list(states)
        for state, times in states.items():
            assert together[r][state].tobytes() == times.tobytes()


def test_wall_time_parts_add_up_to_the_wall_time(failures_run: Path) -> None:
    frames = read_frames(failures_run)
    runs = frames["runs"]
    summary = json.loads((failures_run / "summary.json").read_text(encoding="utf-8"))
    parts = wall_time_parts(runs, step_shares(summary))
    assert np.allclose(parts.sum(axis=1), runs["wall_s"], rtol=1e-9)
    assert (parts["other"] == 0).all()  # every second is in a phase
    kept = parts[["compute", "exposed communication", "idle in step (bubbles, waits)"]].sum(axis=1)
    assert np.allclose(kept / runs["wall_s"], runs["goodput"], rtol=1e-9)
    assert np.allclose(parts["lost work (recomputed)"], runs["recompute_s"])
    fig = wall_time_figure(runs, step_shares(summary))
    assert [t.name for t in fig.data][:2] == ["compute", "exposed communication"]
    assert all(len(t.x) == len(runs) for t in fig.data)


def test_study_wall_time_shows_per_variant_means_with_intervals(failures_run: Path) -> None:
    runs = read_frames(failures_run)["runs"]
    two = pd.concat([runs.assign(policy="a"), runs.assign(policy="b")], ignore_index=True)
    two.attrs["axes"] = ["policy"]
    fig = wall_time_figure(two)
    bars = [t for t in fig.data if t.type == "bar"]
    assert all(list(t.x) == ["policy=a", "policy=b"] for t in bars)
    marker = next(t for t in fig.data if t.type == "scatter")
    assert np.allclose(marker.y, runs["goodput"].mean() * 100, rtol=1e-6)


def test_incidents_drawn_by_kind_with_counts(failures_run: Path) -> None:
    frames = read_frames(failures_run)
    fig = incident_timeline_figure(frames["incidents"], frames["segments"], 0.11)
    want = frames["incidents"]["kind"].value_counts().to_dict()
    drawn = {t.meta["kind"]: len(t.x) for t in fig.data if t.meta and "kind" in t.meta}
    assert drawn == want
    ettr = next(t for t in fig.data if t.name == "running ETTR")
    seg = frames["segments"]
    assert ettr.y[-1] == pytest.approx(
        seg["useful_s"].sum() / (seg["end_s"].max() - seg["start_s"].min()) * 100, rel=1e-4
    )


def test_topology_by_tier_and_pod(big_run: Path) -> None:
    g = load_graph(big_run)
    h = group_graph(g)
    servers = {d["node"] for _, d in g.nodes(data=True) if d.get("kind") == "gpu"}
    assert sum(d["members"] for n, d in h.nodes(data=True) if n.startswith("servers")) == len(servers) == 128
    # every scale-out link is in exactly one group link
    scale_out = sum(
        1
        for u, v in g.edges
        if {g.nodes[u].get("kind"), g.nodes[v].get("kind")} <= {"nic", "switch"}
        and max(g.nodes[u].get("tier", 0) or 0, g.nodes[v].get("tier", 0) or 0) >= 1
    )
    assert sum(d["links"] for _, _, d in h.edges(data=True)) == scale_out
    util = pd.Series({next(iter(g.edges)): 0.5})
    assert all(np.isnan(d["util"]) for _, _, d in group_graph(g, util).edges(data=True))  # an in-server link


def test_ranks_with_the_same_ops_share_their_bins() -> None:
    """Mirrored ranks (same ops at the same times) are binned once; each still equals
    `rank_state_bins` on its own rows, and a rank that differs by one time is not shared."""
    one = pd.DataFrame(
        {
            "kind": ["compute", "collective", "compute"],
            "tag": ["fwd", "ep", "bwd"],
            "started_at_s": [0.0, 1.0, 1.5],
            "finished_at_s": [1.0, 2.0, 3.0],
        }
    )
    other = one.assign(finished_at_s=[1.0, 2.5, 3.0])
    ops = pd.concat([one.assign(rank=r) for r in (4, 0, 9)] + [other.assign(rank=2)], ignore_index=True)
    together = _per_rank_state_bins(ops, 0.0, 3.0, 6)
    assert together[0] is together[4] is together[9] and together[2] is not together[0]
    for r, g in ops.groupby("rank"):
        alone = rank_state_bins(g, 0.0, 3.0, 6)
        shared = together[int(r)]
        assert {s: t.tobytes() for s, t in alone.items()} == {s: t.tobytes() for s, t in shared.items()}


def test_rank_groups_merge_in_order_of_first_rank() -> None:
    """Past `max_groups`, groups are merged in order of their first (smallest) rank, not of
    their names or rows: n10 holds rank 0, n1 rank 2, n2 rank 4, n3 rank 6."""
    from simulator.viz.rank_groups import rank_groups

    ranks = [5, 0, 3, 1, 2, 4, 6]
    gpus = ["n2.gpu0", "n10.gpu0", "n1.gpu1", "n10.gpu1", "n1.gpu0", "n2.gpu1", "n3.gpu0"]
    ops = pd.DataFrame({"rank": ranks, "gpu": gpus, "role": [""] * len(ranks)})
    labels = rank_groups(ops, max_groups=2)
    assert list(labels.index) == sorted(ranks)
    assert labels.to_dict() == {
        0: "n10…n1",
        1: "n10…n1",
        2: "n10…n1",
        3: "n10…n1",
        4: "n2…n3",
        5: "n2…n3",
        6: "n2…n3",
    }


def _read_back(g):  # noqa: ANN001, ANN202
    """The graph as `topology.json` saves it and `load_graph` reads it (node-link JSON)."""
    import networkx as nx

    data = json.loads(json.dumps(nx.node_link_data(g, edges="links")))
    return nx.node_link_graph(data, edges="links")


def test_server_groups_are_the_same_in_memory_and_read_back() -> None:
    """A NIC's neighbours come back in the order of the graph's links, not in the order its
    edges were added; a tie between two pods goes to the pod met first in that order, so the
    graph in memory and the saved one give the same groups."""
    import networkx as nx

    from simulator.viz.topology_groups import node_groups

    g = nx.Graph(name="t")
    g.add_node("leaf.1", kind="switch", tier=1, role="leaf")
    g.add_node("leaf.2", kind="switch", tier=1, role="leaf")
    g.add_node("s0.nic0", kind="nic", node="s0")
    g.add_edge("s0.nic0", "leaf.2", bandwidth_bytes_per_s=1.0)
    g.add_edge("leaf.1", "s0.nic0", bandwidth_bytes_per_s=1.0)
    back = _read_back(g)
    assert list(g.neighbors("s0.nic0")) != list(back.neighbors("s0.nic0"))  # the case at stake
    assert node_groups(g) == node_groups(back)
    assert node_groups(g)["s0.nic0"] == ("servers of leaf pod 1", 0.0)


def test_run_page_drawn_from_memory_is_the_rebuilt_page(big_run: Path) -> None:
    """The run drew its topology (by group: 128 servers) from the graph in memory; the page
    `clustersim dashboard` rebuilds from the saved files is the same, byte for byte."""
    from simulator.viz.dashboard import drawn_graph, run_dashboard_from_folder

    g = load_graph(big_run)
    assert drawn_graph(g, big_run) is g  # drawn by group, attributes plain: not read again
    assert run_dashboard_from_folder(big_run) == (big_run / "dashboard.html").read_text(encoding="utf-8")


def test_graph_with_attributes_json_changes_is_read_back(big_run: Path) -> None:
    from simulator.viz.dashboard import drawn_graph

    g = load_graph(big_run)
    g.nodes[next(iter(g.nodes))]["role"] = ("a", "b")  # saved as a list: not the same value
    assert drawn_graph(g, big_run) is not g
