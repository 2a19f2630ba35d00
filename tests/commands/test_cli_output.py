"""What the command line prints: its version, tables as rich, CSV or JSON, tables at full
width when piped, a `--help` that loads no numeric library, and a study's progress through
its step simulations."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from simulator import __version__
from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def test_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout == f"clustersim {__version__}\n"


def test_run_table_as_csv_and_json_gives_the_summary_numbers(tmp_path: Path) -> None:
    """`--format csv|json`: each row as shown, with its summary.json key, its number as
    stored (SI units, fractions 0-1) and the unit, so a script reads numbers, not text."""
    runner = CliRunner()
    res = runner.invoke(
        app, ["--format", "csv", "run", str(QUICKSTART), "--steps", "1", "-o", str(tmp_path / "a")]
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))  # stdout is the table only
    assert list(rows[0]) == ["figure", "value", "key", "si_value", "unit"]
    by_key = {r["key"]: r for r in rows}
    summary = json.loads((tmp_path / "a" / "summary.json").read_text(encoding="utf-8"))
    step = by_key["step_time_s"]
    assert step["figure"] == "step time (simulated)" and step["unit"] == "s"
    assert step["value"] == f"{summary['step_time_s'] * 1e3:.3f} ms"
    assert float(step["si_value"]) == summary["step_time_s"]  # the number, written in full
    assert by_key["busiest_links.0.mean_utilization"]["unit"] == "fraction"
    assert float(by_key["tokens_per_s"]["si_value"]) == summary["tokens_per_s"]
    assert by_key["wall_time_s"]["figure"] == "host wall time of the simulation"
    assert "results:" in res.stderr and "results:" not in res.stdout
    res = runner.invoke(
        app, ["--format", "json", "run", str(QUICKSTART), "--steps", "1", "-o", str(tmp_path / "b")]
    )
    assert res.exit_code == 0, res.output
    table = json.loads(res.stdout)
    first = table["rows"][0]
    assert table["title"] == "quickstart" and first["figure"] == "step time (simulated)"
    assert first["key"] == "step_time_s" and first["si_value"] == summary["step_time_s"]


def test_piped_table_keeps_long_cells_whole(tmp_path: Path) -> None:
    CliRunner().invoke(app, ["run", str(QUICKSTART), "--steps", "1", "-o", str(tmp_path / "r")])
    long_a = "a_column_name_long_enough_that_eighty_columns_would_cut_it_short"
    long_b = "and_another_one_beside_it_so_the_row_is_far_wider_than_a_terminal"
    sql = f"select 1 as {long_a}, 2 as {long_b}"
    res = CliRunner().invoke(app, ["query", str(tmp_path / "r"), sql])
    assert res.exit_code == 0, res.output
    assert long_a in res.stdout and long_b in res.stdout and "…" not in res.stdout


def test_query_as_json_gives_numbers_as_numbers(tmp_path: Path) -> None:
    """--format json: a number as the number (every digit), a missing one as null, a time as
    the text the table shows."""
    from simulator.commands import common

    CliRunner().invoke(app, ["run", str(QUICKSTART), "--steps", "1", "-o", str(tmp_path / "r")])
    sql = (
        "select step, step_time_s, 'nan'::double as m, TIMESTAMP '2024-01-01 00:00:00' as t "
        "from steps limit 1"
    )
    try:
        res = CliRunner().invoke(app, ["--format", "json", "query", str(tmp_path / "r"), sql])
    finally:
        common.set_output_format("table")
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)["rows"]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert row == {"step": 0, "step_time_s": summary["step_time_s"], "m": None, "t": "2024-01-01 00:00:00"}


def test_query_as_csv_or_json_gives_every_row(tmp_path: Path) -> None:
    """--format csv|json prints the whole answer, as `--csv` does: `--rows` (50 by default)
    cuts only the rich table (the 160 ops of a step came out as 50 CSV rows)."""
    from simulator.commands import common

    CliRunner().invoke(app, ["run", str(QUICKSTART), "--steps", "1", "-o", str(tmp_path / "r")])
    sql = "select step, rank, op_id from ops order by rank, op_id"
    n_ops = len(pd.read_parquet(tmp_path / "r" / "ops.parquet"))
    assert n_ops > 50
    try:
        as_csv = CliRunner().invoke(app, ["--format", "csv", "query", str(tmp_path / "r"), sql])
        as_json = CliRunner().invoke(
            app, ["--format", "json", "query", str(tmp_path / "r"), sql, "--rows", "3"]
        )
    finally:
        common.set_output_format("table")
    assert as_csv.exit_code == 0 and as_json.exit_code == 0, as_csv.output + as_json.output
    plain = CliRunner().invoke(app, ["query", str(tmp_path / "r"), sql, "--csv"])
    assert as_csv.stdout == plain.stdout and len(list(csv.DictReader(io.StringIO(as_csv.stdout)))) == n_ops
    assert len(json.loads(as_json.stdout)["rows"]) == n_ops


@pytest.mark.parametrize("sql", ["", "  ", ";", "/* nothing */"])
def test_a_query_without_a_statement_is_one_line(sql: str, tmp_path: Path) -> None:
    """DuckDB answers None to SQL holding no statement; `.df()` of it was a traceback."""
    CliRunner().invoke(app, ["run", str(QUICKSTART), "--steps", "1", "-o", str(tmp_path / "r")])
    res = CliRunner().invoke(app, ["query", str(tmp_path / "r"), sql])
    assert res.exit_code == 2, res.output
    assert res.output.strip().endswith("query failed: no SQL statement (the query is empty or only comments)")
    assert len(res.output.strip().splitlines()) == 1


def test_a_query_reads_the_frames_and_writes_nothing(tmp_path: Path) -> None:
    """A query may read the folder's frames and make tables of its own, but write no file (a
    `COPY ... TO` overwrote a frame), read no other file, install nothing, and not turn the
    guard off: each of those is one line, exit 2, every file left as it was."""
    out = tmp_path / "r"
    CliRunner().invoke(app, ["run", str(QUICKSTART), "--steps", "1", "-o", str(out)])
    (tmp_path / "other.csv").write_text("a\n1\n")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    ok = CliRunner().invoke(
        app, ["query", str(out), "create table t as select * from ops; select count(*) from t"]
    )
    assert ok.exit_code == 0, ok.output
    for sql in (
        f"copy ops to '{out / 'ops.parquet'}'",
        f"copy (select 1) to '{tmp_path / 'new.csv'}'",
        f"select * from read_csv('{tmp_path / 'other.csv'}')",
        "install httpfs",
        "set enable_external_access = true",
    ):
        res = CliRunner().invoke(app, ["query", str(out), sql])
        assert res.exit_code == 2, (sql, res.output)
        assert len(res.output.strip().splitlines()) == 1 and "query failed" in res.output, res.output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not (tmp_path / "new.csv").exists()


def test_a_query_overwrites_no_frame_in_place(tmp_path: Path) -> None:
    """A frame is readable to the query, and DuckDB's allowed paths are writable too: a
    `COPY ... TO` a frame without DuckDB's temporary file (`use_tmp_file false`) overwrote
    it. Any COPY is refused: one line, exit 2, every frame left as it was."""
    out = tmp_path / "r"
    CliRunner().invoke(app, ["run", str(QUICKSTART), "--steps", "1", "-o", str(out)])
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for sql in (
        f"copy (select 1 as a) to '{out / 'steps.parquet'}' (format parquet, use_tmp_file false)",
        f"select 1; COPY ops TO '{out / 'ops.parquet'}' (FORMAT csv, USE_TMP_FILE 0)",
    ):
        res = CliRunner().invoke(app, ["query", str(out), sql])
        assert res.exit_code == 2, (sql, res.output)
        assert len(res.output.strip().splitlines()) == 1 and "query failed" in res.output, res.output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_help_loads_no_numeric_library() -> None:
    """`clustersim --help` stays light: the simulator, pandas, plotly and scipy are imported
    inside the commands (the CPU time is measured in the report, not asserted here)."""
    code = (
        "import sys\n"
        "from simulator.commands.app import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'pandas', 'scipy', 'plotly', 'networkx', 'simpy', 'pyarrow')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert "run" in out.stdout and out.stderr.strip().splitlines()[-1] == "[]"


def test_a_trace_run_loads_neither_the_job_modules_nor_the_workload_generator() -> None:
    """Preparing the quickstart (a trace, one job, no cluster) imports no module of several
    jobs and not the generator's schemas: their import was ~25 ms of a 0.8 s smallest run
    when the cluster rows' check imported them for no rows."""
    code = (
        "import sys\n"
        "from simulator.scenario.prepare import prepare_scenario\n"
        "from simulator.scenario.spec import load_scenario\n"
        "prepare_scenario(load_scenario('scenarios/quickstart.yaml'))\n"
        "mods = ('simulator.scenario.job_place', 'simulator.workload.generate')\n"
        "print(sorted(m for m in mods if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout


def test_collective_names_of_the_help_are_the_calibration_kinds() -> None:
    from simulator.calibration.collective import KINDS
    from simulator.commands.calibrate import COLLECTIVE_NAMES

    assert COLLECTIVE_NAMES == KINDS


def test_study_reports_progress_through_its_step_simulations() -> None:
    from simulator.study.sweep import study_from_data, study_oracles

    data = {
        "name": "progress",
        "job": {"n_gpus": 16, "gpus_per_node": 8, "gpus_per_replica": 16},
        "step": {"from_scenario": "quickstart-failures.yaml"},
        "failures": [{"kind": "exponential", "target": "gpu", "mtbf_h": 2000, "repair_h": 4}],
        "policy": {"kind": "checkpoint_restart", "interval_min": 30},
        "duration_days": 1,
        "seeds": 1,
        "axes": [{"param": "policy.interval_min", "values": [10, 30], "name": "interval_min"}],
    }
    study = study_from_data(data, ROOT / "scenarios" / "progress.yaml")
    calls: list[tuple[int, int]] = []
    oracles = study_oracles(study, lambda done, total: calls.append((done, total)))
    assert len({id(o) for o in oracles.values()}) == 1  # both variants share one step spec
    assert calls == [(k, 6) for k in range(1, 7)]  # healthy step, checkpoint write/snapshot/loads, compute


def test_run_table_shows_each_job_and_the_cluster_figures() -> None:
    """A scenario with `jobs:` prints every job's step alone and together; a cluster run its
    utilisation, queueing and completion times (summary keys of `scenario/multi.py` and
    `scenario/cluster_level.py`)."""
    from rich.console import Console

    from simulator.commands.run import summary_table

    def text(summary: dict[str, object]) -> str:
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(summary_table(summary))
        return console.export_text()

    job = {"job": "a", "step_time_alone_s": 0.1, "step_time_s": 0.125, "slowdown": 1.25}
    out = text({"n_jobs": 2, "max_slowdown": 1.25, "jobs": [job, {**job, "job": "b"}]})
    assert "job a: step alone -> together" in out and "100.000 ms -> 125.000 ms (x1.2500)" in out
    assert "job b" in out and "x1.2500" in out
    cluster = {"scheduler": "fifo", "goodput": 0.9, "gpu_utilization": 0.7, "median_jct_s": 7200.0}
    out = text(cluster)
    assert "goodput (jobs of the cluster)" in out and "mean over seeds" not in out
    assert "70.0%" in out and "2.00 h" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", str(QUICKSTART), "--steps", "0"],
            "run: Invalid value for '--steps': Input should be greater",
        ),
        (["run"], "run: Missing argument 'scenario'."),
        (["nosuch"], "No such command 'nosuch'."),
        (["run", str(QUICKSTART), "--bogus"], "run: No such option: --bogus"),
    ],
)
def test_a_bad_option_or_argument_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    """The command line is input too: one `error:` line on stderr, nothing on stdout, exit 2."""
    r = subprocess.run(
        [sys.executable, "-m", "simulator.commands.app", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], r.stderr


@pytest.mark.parametrize(
    ("command", "file", "message"),
    [
        ("topo", "scenarios/quickstart.yaml", "this is a scenario file, not a topology file; run it with"),
        ("compare", "scenarios/quickstart.yaml", "this is a scenario file, not a compare file"),
        ("sweep", "scenarios/quickstart.yaml", "this is a scenario file, not a study file"),
        ("run", "topologies/h100-rail-clos-2n.yaml", "this is a topology file, not a scenario file"),
        ("run", "scenarios/compare-rail-only-vs-clos.yaml", "this is a compare file, not a scenario file"),
        ("run", "workloads/gpt3-175b-tp8-pp8-dp2.yaml", "this is a workload file, not a scenario file"),
        ("topo", "topologies/gpus/h100-sxm.yaml", "this is a GPU file, not a topology file"),
    ],
)
def test_a_file_of_another_kind_is_named_as_such(command: str, file: str, message: str, tmp_path: Path):
    """Handing a command the wrong kind of file says which kind it is and how that kind is
    used, on one line (not a missing or unknown key of the schema it was read against)."""
    r = CliRunner().invoke(app, [command, str(ROOT / file), "-o", str(tmp_path / "out")])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 2 and len(lines) == 1, r.output
    assert message in lines[0] and f"{ROOT / file}:" in lines[0], lines[0]
    assert not (tmp_path / "out").exists()


def test_json_has_null_where_a_figure_is_not_a_number(capsys) -> None:
    """Strict JSON has no NaN: a summary figure that is NaN (no job finished) is null."""
    from simulator.commands import common
    from simulator.commands.run import summary_rows, summary_table

    summary = {"step_time_s": 0.5, "median_jct_s": float("nan")}
    old = common._output["format"]
    common.set_output_format("json")
    try:
        common.print_table(summary_table(summary), [r._asdict() for r in summary_rows(summary)])
    finally:
        common.set_output_format(old)
    rows = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))["rows"]
    assert [(r["key"], r["si_value"]) for r in rows] == [("step_time_s", 0.5), ("median_jct_s", None)]


def test_compare_as_csv_prints_the_comparison_numbers(small_compare: Path, tmp_path: Path) -> None:
    """`--format csv compare`: the numbers of comparison.csv, not the printed cells."""
    import pandas as pd

    out = tmp_path / "cmp"
    args = ["--format", "csv", "compare", str(small_compare), "-o", str(out), "--serial", "--no-dashboards"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    printed = pd.read_csv(io.StringIO(res.stdout))
    written = pd.read_csv(out / "comparison.csv")
    assert list(printed.columns) == list(written.columns)
    pd.testing.assert_frame_equal(printed, written, check_exact=True)


def test_sweep_as_json_prints_the_summary_numbers(tmp_path: Path) -> None:
    """`--format json sweep`: the rows of the written summary (means and intervals as numbers)."""
    import pandas as pd

    out = tmp_path / "sw"
    study = ROOT / "tests" / "study" / "data" / "interval_study.yaml"
    res = CliRunner().invoke(
        app, ["--format", "json", "sweep", str(study), "-o", str(out), "--seeds", "2", "--serial"]
    )
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    written = pd.read_csv(out / "summary.csv")
    assert [r["goodput_mean"] for r in rows] == written["goodput_mean"].tolist()
    assert list(rows[0]) == list(written.columns)


def test_summary_rows_say_n_a_for_a_figure_the_run_has_none_of_and_count_a_clusters_interruptions():
    """A cluster where no job finished has no median completion time (null in summary.json,
    NaN in memory): the table says n/a, not 'nan h'; a cluster's interruptions are a count of
    its jobs (an int), not a mean over seeds printed as 2.0."""
    from simulator.commands.run import summary_rows

    got = {
        r.key: r.value for r in summary_rows({"scheduler": "fifo", "interruptions": 2, "median_jct_s": None})
    }
    assert got == {"interruptions": "2", "median_jct_s": "n/a"}
    got = {r.key: r.value for r in summary_rows({"scheduler": "fifo", "median_jct_s": float("nan")})}
    assert got == {"median_jct_s": "n/a"}
    # a study's interruptions stay a mean over seeds
    assert [r.value for r in summary_rows({"interruptions": 2.0})] == ["2.0"]


def test_a_run_without_cost_columns_says_why_in_its_summary_table():
    """`cost_note` (the GPU has no price, or no tdp_w) was in summary.json only: the table
    simply lacked the cost rows. It is a row of its own, after the figures."""
    from simulator.commands.run import summary_rows

    note = "GPU 'X' has no tdp_w in its GPU file; cost columns left out"
    rows = summary_rows({"step_time_s": 1.0, "cost_note": note})
    assert [(r.figure, r.value, r.key) for r in rows][-1] == ("cost", note, "cost_note")
