"""The CLI through typer's CliRunner: exit codes, error text, files written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _copy_catalog(tmp_path: Path) -> Path:
    """A scratch copy of the catalog so tests can break files without touching the repo."""
    for d in ("scenarios", "topologies", "workloads"):
        shutil.copytree(ROOT / d, tmp_path / d)
    return tmp_path


def test_run_quickstart_writes_results(tmp_path):
    out = tmp_path / "res"
    r = runner.invoke(app, ["run", str(ROOT / "scenarios/quickstart.yaml"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["gpus_in_job"] == 16
    assert summary["compute_s"] + summary["exposed_comm_s"] + summary["idle_s"] == pytest.approx(
        summary["step_time_s"]
    )
    for name in ("ops", "flows", "links", "steps"):
        assert (out / f"{name}.parquet").is_file()
    html = (out / "dashboard.html").read_text()
    assert "cdn.plot.ly" not in html.split("<script type='text/javascript'>")[0]
    assert (out / "scenario.resolved.yaml").is_file()


def test_validate_and_schema():
    r = runner.invoke(app, ["validate", str(ROOT / "scenarios/quickstart.yaml")])
    assert r.exit_code == 0 and "ok" in r.output
    r = runner.invoke(app, ["schema"])
    assert r.exit_code == 0 and '"topology"' in r.output


def _bad(tmp_path: Path, rel: str, old: str, new: str) -> Path:
    base = _copy_catalog(tmp_path)
    p = base / rel
    text = p.read_text()
    assert old in text
    p.write_text(text.replace(old, new, 1))
    return base


@pytest.mark.parametrize(
    "rel, old, new, needle",
    [
        # unknown key in the scenario, with its line
        ("scenarios/quickstart.yaml", "seed: 7", "seed: 7\nsede: 8", "quickstart.yaml:6: sede: unknown key"),
        # malformed YAML
        ("scenarios/quickstart.yaml", "run:\n  steps: 3", "run: [steps: 3", "malformed YAML"),
        # wrong type
        ("scenarios/quickstart.yaml", "steps: 3", "steps: many", "run.steps:"),
        # missing referenced file
        ("scenarios/quickstart.yaml", "h100-rail-clos-2n.yaml", "nowhere.yaml", "topology.file: file"),
        # bad topology parameter (negative bandwidth)
        (
            "topologies/h100-rail-clos-2n.yaml",
            "nic_gbps: 400",
            "nic_gbps: -400",
            "h100-rail-clos-2n.yaml:11: nic_gbps:",
        ),
        # unknown algorithm
        ("scenarios/quickstart.yaml", "all_reduce: ring", "all_reduce: telepathy", "network.algorithms"),
        # more ranks than GPUs
        ("workloads/traces/dp16-gpt1p3b-step.yaml", "ranks: 16", "ranks: 64", "do not fit"),
        # dependency on an op that does not exist
        ("workloads/traces/dp16-gpt1p3b-step.yaml", "deps: [fwd]}", "deps: [fwdd]}", "unknown op 'fwdd'"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, rel, old, new, needle):
    base = _bad(tmp_path, rel, old, new)
    out = tmp_path / "out"
    r = runner.invoke(app, ["run", str(base / "scenarios/quickstart.yaml"), "-o", str(out)])
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert "Traceback" not in r.output
    errors = [line for line in r.output.splitlines() if line.startswith("error:")]
    assert errors and all(len(e) < 400 for e in errors)
    assert not out.exists()


def test_disconnected_topology_is_a_clear_error(tmp_path):
    g = {
        "directed": False,
        "multigraph": False,
        "graph": {},
        "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}, {"id": "s", "kind": "switch"}],
        "links": [{"source": "a", "target": "s", "bandwidth_gbps": 400, "medium": "ib"}],
    }
    (tmp_path / "g.json").write_text(json.dumps(g))
    (tmp_path / "t.yaml").write_text(
        f"name: t\ngpu: {{file: {ROOT}/topologies/gpus/h100-sxm.yaml}}\ngraph: {{file: g.json}}\n"
    )
    (tmp_path / "w.yaml").write_text(
        "format: clustersim-step/1\nranks: 2\nops:\n  - {id: a, kind: compute, ranks: all, duration_ms: 1}\n"
    )
    (tmp_path / "s.yaml").write_text("name: s\ntopology: {file: t.yaml}\nworkload: {file: w.yaml}\n")
    r = runner.invoke(app, ["run", str(tmp_path / "s.yaml"), "-o", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert "disconnected" in r.output and "g.json" in r.output


def test_gpu_cut_off_by_down_links_is_unschedulable(tmp_path):
    base = _copy_catalog(tmp_path)
    sc = base / "scenarios/quickstart.yaml"
    sc.write_text(sc.read_text() + "state:\n  down_links: [[n1.gpu3, n1.nvsw], [n1.gpu3, n1.nic3]]\n")
    r = runner.invoke(app, ["run", str(sc), "-o", str(tmp_path / "o")])
    assert r.exit_code == 3
    assert "n1.gpu3 is cut off" in r.output


def test_validate_of_a_bad_file_and_an_unsimulatable_one_exits_2(tmp_path):
    """Exit 3 says the files are valid but cannot be simulated: with a mistake in one of
    them, the answer is 2 (the mistake is what to fix first), in either order; each file
    still gets its line."""
    base = _copy_catalog(tmp_path)
    sc = base / "scenarios/quickstart.yaml"
    cut = sc.with_name("cut.yaml")
    cut.write_text(sc.read_text() + "state:\n  down_links: [[n1.gpu3, n1.nvsw], [n1.gpu3, n1.nic3]]\n")
    bad = sc.with_name("bad.yaml")
    bad.write_text(sc.read_text().replace("seed: 7", "seed: -1"))
    assert runner.invoke(app, ["validate", str(cut)]).exit_code == 3
    for files in ([cut, bad], [bad, cut]):
        r = runner.invoke(app, ["validate", *map(str, files)])
        assert r.exit_code == 2, r.output
        assert "n1.gpu3 is cut off" in r.output and "bad.yaml" in r.output


def test_the_gpu_named_cut_off_is_on_the_server_whose_links_are_down(tmp_path):
    """Every NIC link of n0 down: n0's GPUs still reach each other over NVSwitch, as many as
    n1's; the part of the fabric with the switches is the one they are cut off from."""
    base = _copy_catalog(tmp_path)
    sc = base / "scenarios/quickstart.yaml"
    down = ", ".join(f"[n0.nic{i}, leaf{i}.0]" for i in range(8))
    sc.write_text(sc.read_text() + f"state:\n  down_links: [{down}]\n")
    r = runner.invoke(app, ["run", str(sc), "-o", str(tmp_path / "o")])
    assert r.exit_code == 3, r.output
    assert "n0.gpu0 is cut off" in r.output


def test_existing_results_survive_a_failed_run(tmp_path):
    out = tmp_path / "res"
    assert runner.invoke(app, ["run", str(ROOT / "scenarios/quickstart.yaml"), "-o", str(out)]).exit_code == 0
    before = (out / "summary.json").read_text()
    base = _bad(tmp_path / "b", "scenarios/quickstart.yaml", "seed: 7", "seed: -1")
    r = runner.invoke(app, ["run", str(base / "scenarios/quickstart.yaml"), "-o", str(out)])
    assert r.exit_code == 2
    assert (out / "summary.json").read_text() == before


def test_steps_on_a_cluster_over_days_is_refused_as_run_steps_is(tmp_path):
    """`run.steps` in a cluster scenario is an input error; `--steps` was accepted and
    ignored (the run went on over its days). Now one line, exit 2, no folder written."""
    scenario = ROOT / "scenarios" / "jobs" / "cluster-example.yaml"
    out = tmp_path / "out"
    res = runner.invoke(app, ["run", str(scenario), "-o", str(out), "--steps", "3"])
    assert res.exit_code == 2, res.output
    line = " ".join(res.output.split())
    assert "--steps: a `cluster` runs every job for its length" in line
    assert "Traceback" not in res.output
    assert not out.exists()
