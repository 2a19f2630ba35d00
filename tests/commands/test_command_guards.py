"""Requests a command cannot honour are one line and exit 2, before any work and without
touching what exists; and the comparison table shows what the compared runs have.

Each case is what a user tried: exporting a cluster-over-days scenario (no step to write),
sweeping the seeds (which every variant shares), a background-drain policy over a topology
without storage (the run would stop part-way with exit 3), a calibration profile written
over a file that is not one, the topology schema as CSV or JSON, a comparison of cluster
runs (no step time), a variant's resolved scenario (its topology edits recorded).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import typer
import yaml
from typer.testing import CliRunner

from simulator.commands.common import table_records
from simulator.commands.compare import comparison_rich_table

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
SAMPLE = ROOT / "topologies" / "calibration" / "samples" / "h100-16gpu-2node-allreduce-aws-p5-efa.txt"


def _one_error_line(res) -> str:  # noqa: ANN001
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    return lines[0]


@pytest.mark.parametrize("fmt", ["chrome", "chakra"])
def test_exporting_a_cluster_scenario_is_one_line_and_writes_nothing(
    app: typer.Typer, tmp_path: Path, fmt: str
) -> None:
    out = tmp_path / ("t.json" if fmt == "chrome" else "et")
    scenario = SCENARIOS / "jobs" / "cluster-example.yaml"
    line = _one_error_line(CliRunner().invoke(app, ["export", fmt, str(scenario), "-o", str(out)]))
    assert f"{scenario}:8: cluster: export {fmt} writes a step" in line
    assert not out.exists() or not any(out.iterdir())


def _study(
    tmp_path: Path, axis: str, values: str, step: str = "step_time_s: 1.0, checkpoint_write_s: 10"
) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(
        "name: s\n"
        "job: {n_gpus: 16, gpus_per_node: 8, gpus_per_replica: 8}\n"
        f"step: {{{step}}}\n"
        "policy: {kind: checkpoint_restart, interval_min: 30}\n"
        "duration_days: 1\n"
        "seeds: 1\n"
        "axes:\n"
        f"  - {{param: {axis}, values: {values}}}\n"
    )
    return path


@pytest.mark.parametrize("axis", ["seeds", "seed"])
def test_a_study_cannot_sweep_its_seeds(app: typer.Typer, tmp_path: Path, axis: str) -> None:
    """Every variant runs the study's seeds (paired runs): an axis over them used to be
    ignored, each variant reporting the file's single seed."""
    study = _study(tmp_path, axis, "[2, 3]")
    line = _one_error_line(CliRunner().invoke(app, ["sweep", str(study), "-o", str(tmp_path / "o")]))
    assert f"{study}:8: axes.0.param: '{axis}' is not a swept parameter" in line
    assert not (tmp_path / "o").exists()


def test_a_background_drain_over_a_topology_without_storage_fails_validation(
    app: typer.Typer, tmp_path: Path
) -> None:
    """`validate` used to pass what `run` then stopped with exit 3 after the step simulation."""
    text = (SCENARIOS / "quickstart-failures.yaml").read_text()
    text = "\n".join(
        "policy: {kind: in_memory, interval: young}" if ln.startswith("policy:") else ln
        for ln in text.splitlines()
    )
    scenario = tmp_path / "drain.yaml"
    scenario.write_text(text.replace("../", f"{ROOT}/") + "\n")
    line_no = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("policy:"))
    for cmd in (["validate", str(scenario)], ["run", str(scenario), "-o", str(tmp_path / "o")]):
        line = _one_error_line(CliRunner().invoke(app, cmd))
        assert f"{scenario}:{line_no}: policy.kind: policy in_memory drains checkpoints" in line
    assert not (tmp_path / "o").exists()


def test_a_study_variant_with_a_background_drain_points_at_its_axis(app: typer.Typer, tmp_path: Path) -> None:
    step = f"from_scenario: {SCENARIOS / 'quickstart-failures.yaml'}"
    values = "[{kind: checkpoint_restart, interval_min: 30}, {kind: async_checkpoint, interval_min: 30}]"
    study = _study(tmp_path, "policy", values, step)
    for cmd in (["validate", str(study)], ["sweep", str(study), "-o", str(tmp_path / "o")]):
        line = _one_error_line(CliRunner().invoke(app, cmd))
        assert f"{study}:8: axes.0.values: policy async_checkpoint drains checkpoints" in line


def test_calibrate_replaces_only_its_own_files(app: typer.Typer, tmp_path: Path) -> None:
    page = tmp_path / "mine.html"
    page.write_text("my notes\n")
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("name: x\n")
    runner = CliRunner()
    line = _one_error_line(runner.invoke(app, ["calibrate", str(SAMPLE), "-o", str(tmp_path / "mine.yaml")]))
    assert f"{page}: exists and is not a calibration page" in line
    assert page.read_text() == "my notes\n"
    line = _one_error_line(runner.invoke(app, ["calibrate", str(SAMPLE), "-o", str(scenario)]))
    assert f"{scenario}: exists and is not a calibration profile" in line
    assert scenario.read_text() == "name: x\n"
    profile = tmp_path / "p.yaml"
    for _ in range(2):  # a profile and its page are replaced by the next calibration
        res = runner.invoke(app, ["calibrate", str(SAMPLE), "-o", str(profile)])
        assert res.exit_code == 0, res.output
    assert {"sources", "collectives"} <= yaml.safe_load(profile.read_text()).keys()


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_topology_schema_as_one_table(app: typer.Typer, fmt: str) -> None:
    res = CliRunner().invoke(app, ["--format", fmt, "schema", "topology"])
    assert res.exit_code == 0, res.output
    if fmt == "json":
        doc = json.loads(res.stdout)
        params = doc["tables"][0]["rows"]
    else:
        lines = res.stdout.splitlines()
        assert lines[0] == "section,parameter,type,default,unit,description"
        params = [dict(zip(lines[0].split(","), ln.split(","), strict=False)) for ln in lines[1:]]
    sections = {r["section"] for r in params}
    assert {"rail_clos", "fat_tree", "storage: (inside a design)"} <= sections
    assert any(r["section"] == "rail_clos" and r["parameter"] == "nodes" for r in params)


def test_a_comparison_of_cluster_runs_prints_their_figures_not_empty_step_columns() -> None:
    table = pd.DataFrame(
        {
            "variant": ["fifo", "backfill"],
            "step_time_s": [math.nan, math.nan],
            "relative_step_time": [math.nan, math.nan],
            "exposed_comm_s": [None, None],
            "gpu_utilization": [0.678, 0.702],
            "mean_queueing_delay_s": [14_516.0, 4_307.0],
            "network_capex_per_gpu_usd": [4825.0, 4825.0],
            "capex_per_gpu_usd": [math.nan, 47_900.0],
        }
    )
    rows = table_records(comparison_rich_table(table, "t"))
    assert list(rows[0]) == ["variant", "GPU utilization", "mean queueing", "capex/GPU", "network capex/GPU"]
    assert rows[0]["GPU utilization"] == "67.8%" and rows[1]["mean queueing"] == "1.2 h"
    assert rows[0]["capex/GPU"] == "" and rows[1]["capex/GPU"] == "$47,900"
    assert all("nan" not in v for r in rows for v in r.values())


def test_a_variant_records_its_topology_edits(app: typer.Typer, tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = CliRunner().invoke(
        app,
        [
            "compare",
            str(SCENARIOS / "compare-oversubscription.yaml"),
            "--serial",
            "--steps",
            "1",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    resolved = yaml.safe_load((out / "2to1" / "scenario.resolved.yaml").read_text())
    summary = json.loads((out / "2to1" / "summary.json").read_text())
    assert resolved["topology_params"]["oversubscription"] == 2
    assert resolved["topology_name"] == summary["topology"]


def test_a_chakra_export_holds_every_ranks_work(app: typer.Typer, tmp_path: Path) -> None:
    """A model workload simulated with representatives has one rank's ops per group; each
    exported rank file must still hold its own rank's compute, so that the imported trace is
    the job (it used to be one computing rank and fifteen with collectives only)."""
    (tmp_path / "tiny.yaml").write_text(
        "name: tiny\nlayers: 2\nhidden_size: 256\nffn_hidden_size: 1024\nattention_heads: 4\n"
        "vocab_size: 512\nseq_len: 256\n"
    )
    (tmp_path / "w.yaml").write_text(
        "name: w\nmodel: {file: tiny.yaml}\n"
        "layout: {tp: 2, dp: 8, micro_batch_size: 1, global_batch_size: 16}\n"
        "fidelity: {representatives: true}\n"
    )
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"name: s\ntopology: {{file: {ROOT / 'topologies' / 'h100-rail-clos-2n.yaml'}}}\n"
        "workload: {file: w.yaml}\n"
    )
    runner = CliRunner()
    res = runner.invoke(app, ["export", "chakra", str(scenario), "-o", str(tmp_path / "et")])
    assert res.exit_code == 0, res.output
    assert "16 rank files" in res.output and "every rank's work" in res.output
    res = runner.invoke(app, ["import", "chakra", str(tmp_path / "et"), "-o", str(tmp_path / "back.yaml")])
    assert res.exit_code == 0, res.output
    ops = yaml.safe_load((tmp_path / "back.yaml").read_text())["ops"]
    computing = {r for op in ops if op["kind"] == "compute" for r in op["ranks"]}
    assert computing == set(range(16))


def test_a_trace_of_a_step_the_run_does_not_have_is_one_line(app: typer.Typer, tmp_path: Path) -> None:
    """It used to write an empty trace (with every step's link counters) and exit 0."""
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(app, ["run", str(SCENARIOS / "quickstart.yaml"), "-o", str(out), "--no-dashboard"])
    assert res.exit_code == 0, res.output
    line = _one_error_line(
        runner.invoke(app, ["trace", str(out), "--step", "5", "-o", str(tmp_path / "t.json")])
    )
    assert line == f"error: {out}: --step 5: the run has steps 0..2"
    assert not (tmp_path / "t.json").exists()


def test_a_chakra_export_too_big_to_write_every_rank_is_refused(app: typer.Typer, tmp_path: Path) -> None:
    """1,024 GPUs of Llama 3 70B would be about 8 M ops (it ran out of memory instead)."""
    scenario = SCENARIOS / "llama3-70b-tp8-pp4-dp32.yaml"
    res = CliRunner().invoke(app, ["export", "chakra", str(scenario), "-o", str(tmp_path / "et")])
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 3 and len(lines) == 1, res.output
    assert lines[0].startswith(f"error: {scenario}: export chakra writes every rank's own work: about ")
    assert not (tmp_path / "et").exists() or not any((tmp_path / "et").iterdir())


def test_a_study_whose_variants_do_not_drain_runs_over_a_topology_without_storage(
    app: typer.Typer, tmp_path: Path
) -> None:
    """Only the policies the variants run are checked: a base policy every variant replaces
    is not one of them."""
    study = _study(
        tmp_path,
        "policy",
        "[{kind: checkpoint_restart, interval_min: 30}, {kind: hot_spares, pool_hosts: 1, interval_min: 30}]",
        f"from_scenario: {SCENARIOS / 'quickstart-failures.yaml'}",
    )
    study.write_text(
        study.read_text().replace("policy: {kind: checkpoint_restart", "policy: {kind: async_checkpoint")
    )
    res = CliRunner().invoke(app, ["validate", str(study)])
    assert res.exit_code == 0, res.output


def test_a_compare_variant_that_drains_without_storage_is_one_line(app: typer.Typer, tmp_path: Path) -> None:
    """The base drains to its topology's storage; a variant moves it to a topology without."""
    (tmp_path / "st.yaml").write_text(
        f"name: sp-2n-storage\ngenerator: superpod\ngpu: {{file: {ROOT}/topologies/gpus/h100-sxm.yaml}}\n"
        "nodes: 2\nsu_size: 2\nnic_gbps: 400\nswitch_radix: 64\n"
        "storage: {nodes: 2, nics_per_node: 1, nic_gbps: 400, write_gbyte_per_s: 40, read_gbyte_per_s: 80}\n"
    )
    text = (SCENARIOS / "quickstart-failures.yaml").read_text().replace("../", f"{ROOT}/")
    lines = [
        "topology: {file: st.yaml}" if ln.startswith("topology:") else
        "policy: {kind: in_memory, interval: daly}" if ln.startswith("policy:") else ln
        for ln in text.splitlines()
    ]  # fmt: skip
    (tmp_path / "base.yaml").write_text("\n".join(lines) + "\n")
    policy_line = next(i for i, ln in enumerate(lines, 1) if ln.startswith("policy:"))
    cmp = tmp_path / "cmp.yaml"
    cmp.write_text(
        "name: c\nbase: {file: base.yaml}\nvariants:\n  - {name: storage}\n"
        f"  - {{name: nostorage, topology: {{file: {ROOT}/topologies/h100-rail-clos-2n.yaml}}}}\n"
    )
    for cmd in (["validate", str(cmp)], ["compare", str(cmp), "--serial", "-o", str(tmp_path / "o")]):
        line = _one_error_line(CliRunner().invoke(app, cmd))
        where = f"{tmp_path / 'base.yaml'}:{policy_line}: policy.kind: variant 'nostorage': policy in_memory"
        assert where in line
    assert not (tmp_path / "o").exists()


def test_calibrate_writes_into_an_empty_file(app: typer.Typer, tmp_path: Path) -> None:
    profile = tmp_path / "made-by-mktemp.yaml"
    profile.write_text("")
    res = CliRunner().invoke(app, ["calibrate", str(SAMPLE), "-o", str(profile)])
    assert res.exit_code == 0, res.output
    assert {"sources", "collectives"} <= yaml.safe_load(profile.read_text()).keys()


def test_an_import_larger_than_the_input_limit_says_how_to_run_it(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace is written whole; a warning names its size, the limit and the option that
    lets `run` read it (the default limit would refuse it)."""
    monkeypatch.setenv("CLUSTERSIM_MAX_FILE_MB", "0.001")  # about 1 KiB
    traces = sorted((ROOT / "workloads/traces/kineto/ddp4-synthetic").glob("rank*.json"))
    out = tmp_path / "step.yaml"
    res = CliRunner().invoke(app, ["import", "kineto", *map(str, traces), "-o", str(out)])
    assert res.exit_code == 0, res.output
    size = out.stat().st_size
    assert size > 1024
    mib = -(-size // 2**20)
    limit = int(0.001 * 2**20)
    assert (
        f"is {size:,} bytes, over the limit of {limit:,} bytes on input files: "
        f"run it with --max-file-mb {mib}" in " ".join(res.output.split())
    )


def test_topo_of_a_missing_file_leaves_no_results_folder(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, ["topo", "nope.yaml"])
    assert res.exit_code == 2 and res.output.strip() == "error: nope.yaml: file not found"
    assert list(tmp_path.iterdir()) == []


def test_trace_of_a_missing_folder_says_so(app: typer.Typer, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["trace", str(tmp_path / "nope"), "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: {tmp_path / 'nope'}: results folder not found"


def test_a_dask_address_that_is_not_one_is_a_bad_option(app: typer.Typer, tmp_path: Path) -> None:
    """Exit 2 (a bad option value), not 1 (a scheduler that cannot be reached)."""
    compare = SCENARIOS / "compare-oversubscription.yaml"
    res = CliRunner().invoke(app, ["compare", str(compare), "--dask", "foo bar", "-o", str(tmp_path / "c")])
    assert res.exit_code == 2, res.output
    assert "error: --dask 'foo bar' is not a scheduler address (missing port number" in res.output


def test_calibrate_check_given_a_scenario_for_its_profile_says_what_the_file_is(app: typer.Typer) -> None:
    res = CliRunner().invoke(app, ["calibrate", "--check", str(SCENARIOS / "quickstart.yaml"), str(SAMPLE)])
    assert res.exit_code == 2, res.output
    assert "quickstart.yaml:3: this is a scenario file, not a calibration profile file" in res.output


def test_ctrl_c_before_a_command_handles_it_is_one_line_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """SIGINT while a command is still importing the simulator (typer turned it into a silent
    exit 130) or while the command line itself loads (a traceback): one line, exit 130."""
    import builtins
    import signal

    from simulator.commands import app as appmod
    from simulator.commands import entry as cli

    def stopped(**_: object) -> None:
        raise appmod._Stopped

    monkeypatch.setattr(appmod, "app", stopped)
    monkeypatch.setattr(appmod.gc, "freeze", lambda: None)
    old = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as exc:
            appmod.main()
    finally:
        signal.signal(signal.SIGINT, old)
    assert exc.value.code == 130 and "interrupted (stopped by SIGINT)" in capsys.readouterr().err

    real_import = builtins.__import__

    def interrupted_import(name: str, *args: object, **kw: object) -> object:
        if name == "simulator.commands.app":
            raise KeyboardInterrupt
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", interrupted_import)
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 130
    assert (
        capsys.readouterr().err
        == "interrupted (stopped by SIGINT) before the command started; nothing was written\n"
    )


def test_the_collector_is_paused_while_long_lived_objects_are_made_and_restored(monkeypatch) -> None:  # noqa: ANN001
    """`making_long_lived`: no collection while the prepared scenario is made (its objects
    all live on), the collector back as it was afterwards, even when making them fails;
    what was made frozen only in a process that ends with the command."""
    import gc

    from simulator.commands import common

    monkeypatch.setattr(common, "_process", {"ends_with_command": False})
    was = gc.isenabled()
    frozen = gc.get_freeze_count()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            with common.making_long_lived():
                assert not gc.isenabled()
                made = [[i] for i in range(1000)]
            assert gc.isenabled() == enabled
            with pytest.raises(ValueError), common.making_long_lived():
                raise ValueError("bad input")
            assert gc.isenabled() == enabled
        assert gc.get_freeze_count() == frozen  # a command inside a longer-lived process
        monkeypatch.setattr(common, "_process", {"ends_with_command": True})
        with common.making_long_lived():
            made = [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= frozen + len(made)
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()


def test_garbage_of_a_trace_import_is_not_frozen_for_the_run() -> None:
    """`clustersim run` pauses the collector while it prepares a scenario and freezes what
    was made (`making_long_lived`). Reading a trace leaves cyclic garbage behind (networkx
    graphs of its checks, about 1.4 kB an op): it was frozen with the prepared scenario and
    held for the whole run. It is collected before the freeze now."""
    import os
    import subprocess
    import sys

    probe = (
        "import gc\n"
        "from simulator.commands import common\n"
        "from simulator.scenario.prepare import prepare\n"
        "gc.collect()\n"
        "common.process_ends_with_command()\n"
        "common.freeze_long_lived()\n"
        "with common.making_long_lived():\n"
        f"    prep = prepare({str(SCENARIOS / 'kineto-hta-a100-ddp2.yaml')!r})\n"
        "gc.unfreeze()\n"
        "print(gc.collect())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert int(done.stdout.split()[-1]) < 1000, done.stdout  # 10,256 objects before
