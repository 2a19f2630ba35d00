"""`clustersim compare` through typer's CliRunner: executors agree, files, bad input."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from tests.conftest import QUICKSTART, ROOT, compare_without_the_gpus_price


def _run(args: list[str]):
    return CliRunner().invoke(app, ["compare", *args])


def _pool_and_serial(small_compare: Path, tmp_path: Path) -> dict[str, Path]:
    outs = {}
    for label, extra in (("pool", []), ("serial", ["--serial"])):
        out = tmp_path / label
        res = _run([str(small_compare), "-o", str(out), "--no-dashboards", *extra])
        assert res.exit_code == 0, res.output
        outs[label] = out
    return outs


def _same_tables(outs: dict[str, Path]) -> None:
    ref = (outs["pool"] / "comparison.csv").read_bytes()
    for label, out in outs.items():
        assert (out / "comparison.csv").read_bytes() == ref, label
        for variant in ("ring", "tree", "hier-1step"):
            for frame in ("steps", "ops", "flows"):
                a = pd.read_parquet(outs["pool"] / variant / f"{frame}.parquet")
                b = pd.read_parquet(out / variant / f"{frame}.parquet")
                pd.testing.assert_frame_equal(a, b)
    table = pd.read_csv(outs["pool"] / "comparison.csv")
    assert list(table["variant"]) == ["ring", "tree", "hier-1step"]


def test_pool_and_serial_give_identical_tables(small_compare: Path, tmp_path: Path) -> None:
    """Determinism across executors: same table bytes and same frames (only wall time differs)."""
    _same_tables(_pool_and_serial(small_compare, tmp_path))


@pytest.mark.slow  # ~3 CPU s; a sweep's Dask run stays in the default suite (tests/study/test_sweep.py)
def test_pool_serial_and_dask_give_identical_tables(small_compare: Path, tmp_path: Path) -> None:
    """The same through a Dask LocalCluster."""
    from distributed import LocalCluster

    outs = _pool_and_serial(small_compare, tmp_path)
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        out = tmp_path / "dask"
        res = _run(
            [
                str(small_compare),
                "-o",
                str(out),
                "--no-dashboards",
                "--dask",
                cluster.scheduler_address,
            ]
        )
        assert res.exit_code == 0, res.output
        outs["dask"] = out
    _same_tables(outs)


def test_compare_writes_folder_and_prints_table(small_compare: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run([str(small_compare), "-o", str(out), "--serial"])
    assert res.exit_code == 0, res.output
    assert "small" in res.output and "ring" in res.output and "step" in res.output
    for name in (
        "comparison.csv",
        "comparison.parquet",
        "comparison.html",
        "compare.resolved.yaml",
    ):
        assert (out / name).is_file(), name
    for variant in ("ring", "tree", "hier-1step"):
        assert (out / variant / "summary.json").is_file()
        assert (out / variant / "dashboard.html").is_file()
        steps = pd.read_parquet(out / variant / "steps.parquet")
        assert set(steps["variant"]) == {variant}
    html = (out / "comparison.html").read_text()
    assert "Step time per variant" in html and "Busiest" in html and "breakdown" in html
    assert '<script src="https://cdn' not in html


def test_query_over_a_comparison_stacks_its_variants_frames(small_compare: Path, tmp_path: Path) -> None:
    """Every variant's `steps`, `ops`, ... is one table with its `variant` column, joinable with
    `comparison` (the query saw only `comparison`)."""
    out = tmp_path / "out"
    assert _run([str(small_compare), "-o", str(out), "--serial", "--steps", "1"]).exit_code == 0
    sql = (
        "select s.variant, max(s.step_time_s) = any_value(c.step_time_s) as same, count(*) as n "
        "from steps s join comparison c using (variant) group by 1 order by 1"
    )
    res = CliRunner().invoke(app, ["query", str(out), sql, "--csv"])
    assert res.exit_code == 0, res.output
    n = len(pd.read_parquet(out / "ring" / "steps.parquet"))
    assert res.output.split() == [
        "variant,same,n",
        f"hier-1step,True,{n}",
        f"ring,True,{n}",
        f"tree,True,{n}",
    ]
    res = CliRunner().invoke(
        app, ["query", str(out), "select count(distinct variant) as v from ops", "--csv"]
    )
    assert res.output.split() == ["v", "3"]


def _one_error_line(res) -> str:
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    return lines[0]


def test_unknown_key_in_a_variant_exits_2_with_file_line_field(small_compare: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(small_compare.read_text().replace("  - name: tree\n", "  - name: tree\n    netwrk: {}\n"))
    line = _one_error_line(_run([str(bad), "-o", str(tmp_path / "o")]))
    assert f"{bad}:7: variants.1.netwrk: unknown key" in line
    assert not (tmp_path / "o").exists()


def test_bad_override_points_at_the_compare_file_line(small_compare: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(small_compare.read_text().replace("all_reduce: tree", "all_reduce: teleport"))
    line = _one_error_line(_run([str(bad), "-o", str(tmp_path / "o")]))
    assert line.startswith(f"error: {bad}:7: variants.1.network.algorithms")
    assert "teleport" in line


def test_bad_override_value_deep_in_scenario_schema(small_compare: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(small_compare.read_text().replace("run: {steps: 1}", "run: {steps: 0}"))
    line = _one_error_line(_run([str(bad)]))
    assert f"{bad}:10: variants.2.run.steps:" in line


def test_missing_variant_file_and_bad_topology_param(small_compare: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(small_compare.read_text() + "  - name: other\n    workload: {file: nowhere.yaml}\n")
    line = _one_error_line(_run([str(bad)]))
    assert f"{bad}:12: variants.3.workload.file: file" in line and "nowhere.yaml" in line
    bad.write_text(
        small_compare.read_text() + "  - name: other\n    topology: {params: {oversubscription: 0.5}}\n"
    )
    line = _one_error_line(_run([str(bad)]))
    assert f"{bad}:12: variants.3.topology.params.oversubscription:" in line


def test_duplicate_variant_names_and_missing_base(small_compare: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(small_compare.read_text().replace("name: tree", "name: ring"))
    assert "variants.1.name: variant name 'ring' is used twice" in _one_error_line(_run([str(bad)]))
    bad.write_text("name: x\nbase: {file: none.yaml}\nvariants: [{name: a}]\n")
    assert f"{bad}:2: base.file: file" in _one_error_line(_run([str(bad)]))


def test_serial_and_dask_together_is_an_error(small_compare: Path) -> None:
    assert "either --serial or --dask" in _one_error_line(
        _run([str(small_compare), "--serial", "--dask", "local"])
    )


def test_the_page_names_the_price_table_the_compare_file_chose(tmp_path: Path) -> None:
    """With `cost: {prices: ...}` the page's notes cite that table, not the default one whose
    figures were not used; a page rebuilt by `clustersim dashboard` cites it too."""
    (tmp_path / "my-prices.yaml").write_text((ROOT / "topologies" / "prices.yaml").read_text())
    path = tmp_path / "c.yaml"
    path.write_text(
        f"name: t\nbase: {{file: {QUICKSTART}}}\ncost: {{prices: {{file: my-prices.yaml}}}}\n"
        "variants:\n  - name: a\n    run: {steps: 1}\n"
    )
    out = tmp_path / "out"
    res = _run([str(path), "-o", str(out), "--serial", "--no-dashboards"])
    assert res.exit_code == 0, res.output
    for rebuilt in (False, True):
        if rebuilt:
            res = CliRunner().invoke(app, ["dashboard", str(out)])
            assert res.exit_code == 0, res.output
        html = (out / "comparison.html").read_text()
        assert "price table (see my-prices.yaml)" in html and "from my-prices.yaml (every figure" in html
        assert "topologies/prices.yaml" not in html


def test_a_variant_failing_in_a_shared_file_is_named(small_compare: Path) -> None:
    """A variant's edit that breaks in the base's workload (too few GPUs for its ranks) is
    reported at the workload's line, where nothing says which variant it was: the line now
    names it."""
    one_server = "  - name: one-server\n    topology: {params: {nodes: 1}}\n"
    small_compare.write_text(small_compare.read_text() + one_server)
    line = _one_error_line(_run([str(small_compare)]))
    assert "variant 'one-server': 16 ranks do not fit on the topology's 8 GPUs" in line, line
    assert not line.startswith(f"error: {small_compare}")


def test_a_variant_failing_while_simulated_is_placed_at_its_line(
    small_compare: Path, tmp_path: Path, monkeypatch
) -> None:
    """An error a variant meets while it is simulated that names no file (a simulation
    error, exit 3) is placed at the variant in the compare file; one in a file the variants
    share keeps its place. Both name the variant (the line was `variant tree: <message>`)."""
    from simulator.errors import InputError, SimulationError
    from simulator.study import compare as cmpmod

    real = cmpmod.execute

    def failing(prep, **kw):
        if prep.scenario.spec.network.algorithms.get("all_reduce") != "tree":
            return real(prep, **kw)
        raise error

    monkeypatch.setattr(cmpmod, "execute", failing)
    error: Exception = SimulationError("the job cannot be scheduled")
    res = _run([str(small_compare), "-o", str(tmp_path / "a"), "--serial", "--no-dashboards"])
    assert res.exit_code == 3, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error: ")]
    assert lines == [f"error: {small_compare}:6: variants.1: variant 'tree': the job cannot be scheduled"]
    error = InputError("no such op", file="trace.yaml", line=9, field="ops.2")
    res = _run([str(small_compare), "-o", str(tmp_path / "b"), "--serial", "--no-dashboards"])
    assert res.exit_code == 2, res.output
    assert "error: trace.yaml:9: ops.2: variant 'tree': no such op" in res.output


def test_a_variant_left_unpriced_says_why_on_screen(tmp_path: Path) -> None:
    """A comparison's price table without the job's GPU leaves the cost columns out; the
    reason (the run's `cost_note`) was only in summary.json, so the table just lacked the
    columns. It is printed under the table, by variant."""
    path = compare_without_the_gpus_price(tmp_path)
    res = _run([str(path), "-o", str(tmp_path / "out"), "--serial", "--no-dashboards"])
    assert res.exit_code == 0, res.output
    note = "a: GPU 'H100 SXM5 80GB' has no price in the price table; cost columns left out"
    assert note in " ".join(res.output.split())
    # a compare file without a description: the page had an empty note the rebuild has not
    again = tmp_path / "again.html"
    res = CliRunner().invoke(app, ["dashboard", str(tmp_path / "out"), "-o", str(again)])
    assert res.exit_code == 0, res.output
    assert again.read_bytes() == (tmp_path / "out" / "comparison.html").read_bytes()
