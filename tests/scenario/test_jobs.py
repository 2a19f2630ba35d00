"""Several jobs on one fabric: one job in `jobs:` is the one-workload scenario; two jobs whose
only shared links are a spine uplink get exactly the max-min slowdown; leaf-aligned jobs get none;
bad `jobs:` inputs are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.network.design.parts import GBPS_IN_BYTES_PER_S
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
TOPO2 = ROOT / "topologies" / "h100-rail-clos-2n.yaml"
DP16 = ROOT / "workloads" / "traces" / "dp16-gpt1p3b-step.yaml"
LLAMA8B = ROOT / "workloads" / "llama3-8b-tp2-dp8.yaml"

NIC_GBPS = 400.0
SIZE_BYTES = 1.0e9

P2P = """\
format: clustersim-step/1
name: p2p
ranks: 2
ops:
  - {id: s, kind: send, ranks: [0], peer: 1, size_bytes: 1.0e9}
  - {id: r, kind: recv, ranks: [1], peer: 0}
"""


def _write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def _fabric(tmp: Path, oversubscription: float) -> Path:
    """Four 1-GPU servers, two per leaf, one spine: leaf uplink = 2 NICs / oversubscription."""
    return _write(
        tmp,
        "topo.yaml",
        f"name: t4\ngpu: {{file: {ROOT / 'topologies' / 'gpus' / 'h100-sxm.yaml'}}}\n"
        f"generator: rail_clos\nnodes: 4\ngpus_per_node: 1\nnic_gbps: {NIC_GBPS}\n"
        f"servers_per_leaf: 2\noversubscription: {oversubscription}\nspines: 1\n",
    )


def _two_jobs(tmp: Path, topo: Path, placement: str, **extra: str) -> Path:
    trace = _write(tmp, "p2p.yaml", P2P)
    jobs = "".join(
        f"  - {{name: {n}, workload: {{file: {trace}}}, gpus: 2, placement: {placement}}}\n"
        for n in ("a", "b")
    )
    body = f"name: two\ntopology: {{file: {topo}}}\njobs:\n{jobs}run: {{steps: 1}}\n"
    return _write(tmp, "two.yaml", body + "".join(f"{k}: {v}\n" for k, v in extra.items()))


def test_one_job_in_jobs_gives_the_frames_of_the_one_workload_scenario(tmp_path: Path) -> None:
    common = "seed: 7\nnetwork: {fidelity: flow, algorithms: {all_reduce: ring}}\nrun: {steps: 2}\n"
    one = _write(
        tmp_path, "one.yaml", f"name: one\ntopology: {{file: {TOPO2}}}\nworkload: {{file: {DP16}}}\n{common}"
    )
    jobs = _write(
        tmp_path,
        "jobs.yaml",
        f"name: one\ntopology: {{file: {TOPO2}}}\njobs:\n"
        f"  - {{name: a, workload: {{file: {DP16}}}, gpus: 16}}\n" + common,
    )
    a, b = execute(prepare(one)), execute(prepare(jobs))
    for name in ("ops", "flows", "links", "steps"):
        got = b.frames[name]
        assert (got["job"] == "a").all() if "job" in got else name == "links"
        pd.testing.assert_frame_equal(
            got.drop(columns=["job"], errors="ignore"), a.frames[name], check_exact=True
        )
    assert b.summary["jobs"][0]["step_time_s"] == a.summary["step_time_s"]
    assert b.summary["jobs"][0]["slowdown"] == 1.0


@pytest.mark.parametrize("oversubscription", [1.0, 2.0, 4.0])
def test_two_jobs_sharing_only_spine_uplinks_slow_down_by_max_min(
    tmp_path: Path, oversubscription: float
) -> None:
    """Max-min fair share (progressive filling, Bertsekas and Gallager, Data Networks, 6.5.2):
    two flows crossing one link of capacity U, each also on private NIC links of capacity C,
    each get min(C, U/2); alone, min(C, U). Spread placement puts job a on n0, n2 and job b on
    n1, n3: their only common links are leaf0.0->spine0 and spine0->leaf0.1. The latency is the
    same alone and together, so T_together - T_alone = S/min(C, U/2) - S/min(C, U)."""
    topo = _fabric(tmp_path, oversubscription)
    res = execute(prepare(_two_jobs(tmp_path, topo, "spread")))
    jobs = res.frames["jobs"].set_index("job")
    nic = NIC_GBPS * GBPS_IN_BYTES_PER_S
    uplink = 2 * nic / oversubscription
    expected = SIZE_BYTES / min(nic, uplink / 2) - SIZE_BYTES / min(nic, uplink)
    for job in ("a", "b"):
        got = jobs.loc[job, "step_time_s"] - jobs.loc[job, "step_time_alone_s"]
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)
    shared = res.frames["job_links"].query("jobs_on_link > 1")
    assert sorted(set(shared["link"])) == ["leaf0.0->spine0", "spine0->leaf0.1"]
    assert set(jobs["shared_with"]) == {"a", "b"}
    assert (shared["bytes"] == SIZE_BYTES).all()


def test_leaf_aligned_jobs_share_no_link_and_run_as_alone(tmp_path: Path) -> None:
    res = execute(prepare(_two_jobs(tmp_path, _fabric(tmp_path, 4.0), "leaf_aligned")))
    jobs = res.frames["jobs"]
    assert list(jobs["leaf_groups"]) == [1, 1]
    assert (jobs["shared_links"] == 0).all()
    for _, row in jobs.iterrows():
        assert row["step_time_s"] == pytest.approx(row["step_time_alone_s"], rel=1e-9, abs=0)
    assert set(res.frames["flows"]["job"]) == {"a", "b"}


def _error(path: Path) -> str:
    with pytest.raises(InputError) as exc:
        prepare(path)
    line = str(exc.value)
    assert "\n" not in line
    return line


def test_bad_jobs_are_one_line_errors(tmp_path: Path) -> None:
    topo = _fabric(tmp_path, 2.0)
    trace = _write(tmp_path, "p2p.yaml", P2P)
    head = f"name: bad\ntopology: {{file: {topo}}}\njobs:\n"

    def job(name: str, rest: str) -> str:
        return f"  - {{name: {name}, workload: {{file: {trace}}}, {rest}}}\n"

    too_big = _write(
        tmp_path, "big.yaml", head + job("a", "gpus: 2") + job("b", "gpus: 2") + job("c", "gpus: 2")
    )
    assert "big.yaml:6: jobs.2.gpus: job 'c' needs 2 GPUs and 0 of the topology's 4 are left" in _error(
        too_big
    )
    overlap = _write(
        tmp_path,
        "overlap.yaml",
        head
        + job("a", "gpus: 2, placement: [n0.gpu0, n1.gpu0]")
        + job("b", "gpus: 2, placement: [n1.gpu0, n2.gpu0]"),
    )
    assert "overlap.yaml:5: jobs.1.placement.gpus.0: job 'b' is placed on 'n1.gpu0', which job 'a' holds" in (
        _error(overlap)
    )
    both = _write(tmp_path, "both.yaml", head + job("a", "gpus: 2") + f"workload: {{file: {trace}}}\n")
    assert (
        "both.yaml:3: jobs: give one of `workload` (one job), `jobs` (several on one fabric) or "
        "`cluster` (days of a scheduler), not workload and jobs" in _error(both)
    )
    ranks = _write(tmp_path, "ranks.yaml", head + job("a", "gpus: 3"))
    assert "ranks.yaml:4: jobs.0.gpus: job 'a' has gpus: 3, and its workload has 2 ranks" in _error(ranks)
    twice = _write(tmp_path, "twice.yaml", head + job("a", "gpus: 2, placement: [n0.gpu0, n0.gpu0]"))
    # the message keeps its acronym ('gPU' when the first letter was lowered)
    assert "twice.yaml:4: jobs.0.placement: GPU 'n0.gpu0' is listed twice" in _error(twice)


def test_a_placement_that_splits_a_tp_group_is_an_error(tmp_path: Path) -> None:
    """llama3-8b tp2-dp8 needs TP pairs on one server; listing one GPU per server splits them."""
    topo = ROOT / "topologies" / "h100-rail-clos-16n.yaml"
    gpus = ", ".join(f"n{i}.gpu0" for i in range(16))
    path = _write(
        tmp_path,
        "tp.yaml",
        f"name: tp\ntopology: {{file: {topo}}}\njobs:\n"
        f"  - {{name: a, workload: {{file: {LLAMA8B}}}, gpus: 16, placement: [{gpus}]}}\n",
    )
    assert (
        "tp.yaml:4: jobs.0.placement: job 'a': the placement splits the tensor-parallel group of ranks 0..1"
        in (_error(path))
    )


def test_an_empty_list_of_jobs_says_so(tmp_path) -> None:
    """It used to say that `workload` is missing."""
    from typer.testing import CliRunner

    from simulator.commands.app import app
    from tests.conftest import ROOT

    p = tmp_path / "s.yaml"
    p.write_text(
        f"name: x\nseed: 1\ntopology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}\njobs: []\n"
    )
    res = CliRunner().invoke(app, ["validate", str(p)])
    assert res.exit_code == 2
    assert (
        res.output.strip()
        == f"error: {p}:4: jobs: the list of jobs is empty; give at least one job (or a `workload`)"
    )
