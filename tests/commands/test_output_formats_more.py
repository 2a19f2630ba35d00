"""`--format csv|json` of `topo`, `calibrate` (fit and --check) and `validate`: standard output
parses as ONE CSV table or ONE JSON document, with the numbers the table shows; every other
line goes to standard error, and the exit codes stay those of the table format."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from simulator.commands import common

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "topologies" / "h100-dgx-node.yaml"  # the smallest topology file
SAMPLE = ROOT / "topologies" / "calibration" / "samples" / "h100-8gpu-1node-allreduce-aws-p5-batch.txt"
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"

FIT_COLUMNS = [
    "index",
    "label",
    "collective",
    "n_gpus",
    "n_nodes",
    "n_sizes",
    "alpha_us",
    "busbw_gbps",
    "median_abs_error_ge_1mib",
    "max_abs_error",
    "line_median_abs_error_ge_1mib",
    "line_max_abs_error",
]
CHECK_COLUMNS = [
    "table",
    "collective",
    "n_gpus",
    "n_nodes",
    "half",
    "source",
    "size_bytes",
    "measured_time_s",
    "model_time_s",
    "rel_error",
]


@pytest.fixture(autouse=True)
def _table_format_after() -> Iterator[None]:
    """The format is process state: leave `table` for the tests that run sub-apps after these."""
    yield
    common.set_output_format("table")


def _json(stdout: str) -> Any:
    """Standard output as one strict JSON document (`json.loads` rejects a second one)."""
    return json.loads(stdout, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))


def _csv(stdout: str) -> tuple[list[str], list[dict[str, str]]]:
    """Standard output as one CSV table: its header and rows, every row as wide as the header."""
    reader = csv.DictReader(io.StringIO(stdout))
    rows = list(reader)
    assert rows, stdout
    for r in rows:  # a second table would show as rows of another width
        assert None not in r and None not in r.values(), r
    return list(reader.fieldnames or []), rows


def _cost(topology: Path) -> list[dict[str, Any]]:
    from simulator.network.cost import estimate_cost, load_prices
    from simulator.network.topology import load_topology

    items = estimate_cost(load_topology(topology).graph, load_prices(None), scope="cluster")
    return common.frame_records(items)


def test_topo_as_json_is_one_document_with_facts_and_cost_items(app: typer.Typer, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["--format", "json", "topo", str(TOPOLOGY), "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    doc = _json(res.stdout)
    assert doc["title"] == "topology h100-dgx-node"
    facts, cost = doc["tables"]
    assert facts["title"] == "Topology facts: h100-dgx-node"
    by_key = {r["key"]: r for r in facts["rows"]}
    assert list(facts["rows"][0]) == ["fact", "value", "key", "si_value", "unit"]
    assert by_key["gpus"]["si_value"] == 8 and by_key["gpus"]["value"] == "8"
    bisection = by_key["bisection_bytes_per_s"]
    assert bisection["fact"] == "bisection" and bisection["unit"] == "B/s"
    assert bisection["value"] == f"{bisection['si_value'] / 1e12:.3g} TB/s"  # as the table shows it
    assert by_key["links_by_medium"]["si_value"] == {"nvlink": 8}
    assert cost["title"].startswith("Cluster capex and rated power by part (USD")
    assert cost["rows"] == _cost(TOPOLOGY)  # the line items, numbers as numbers
    assert sum(r["capex_usd"] for r in cost["rows"]) == 320_000  # the table's total
    assert "drawing:" in res.stderr and "drawing:" not in res.stdout
    assert (tmp_path / "h100-dgx-node.html").exists()


def test_topo_as_csv_is_the_cost_line_items(app: typer.Typer, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["--format", "csv", "topo", str(TOPOLOGY), "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    fields, rows = _csv(res.stdout)
    assert fields == ["category", "item", "quantity", "unit_usd", "capex_usd", "unit_power_w", "power_w"]
    expected = _cost(TOPOLOGY)
    assert [(r["category"], r["item"]) for r in rows] == [(e["category"], e["item"]) for e in expected]
    for r, e in zip(rows, expected, strict=True):
        assert int(r["quantity"]) == e["quantity"]
        assert float(r["capex_usd"]) == e["capex_usd"] == float(r["unit_usd"]) * int(r["quantity"])
        assert float(r["power_w"]) == e["power_w"]
    assert "Topology facts" in res.stderr and "Topology facts" not in res.stdout  # the note
    assert "drawing:" in res.stderr


def _fit_summary() -> dict[str, object]:
    from simulator.calibration.fit import fit_table
    from simulator.calibration.parser import read_benchmarks

    (table,) = read_benchmarks([SAMPLE])
    return fit_table(table).summary()


def test_calibrate_as_json_and_csv_prints_the_fit_errors(app: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "p.yaml"
    res = runner.invoke(app, ["--format", "json", "calibrate", str(SAMPLE), "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = _json(res.stdout)
    assert doc["title"] == "fit error per table (p.yaml)"
    (row,) = doc["rows"]
    assert list(row) == FIT_COLUMNS
    expected = _fit_summary()
    assert row["index"] == 1 and row["label"] == SAMPLE.name
    assert (row["collective"], row["n_gpus"], row["n_nodes"]) == ("all_reduce", 8, 1)
    for key in FIT_COLUMNS[5:]:
        assert row[key] == pytest.approx(expected[key], rel=1e-9), key
    assert f"wrote {out}" in res.stderr and "wrote" not in res.stdout
    assert "med: median" in res.stderr and "no collective_params" in res.stderr
    assert out.exists() and out.with_suffix(".html").exists()

    res = runner.invoke(app, ["--format", "csv", "calibrate", str(SAMPLE), "-o", str(tmp_path / "q.yaml")])
    assert res.exit_code == 0, res.output
    fields, rows = _csv(res.stdout)
    assert fields == FIT_COLUMNS and len(rows) == 1
    assert rows[0]["label"] == SAMPLE.name and int(rows[0]["n_gpus"]) == 8
    assert float(rows[0]["busbw_gbps"]) == pytest.approx(float(expected["busbw_gbps"]))  # type: ignore[arg-type]
    assert float(rows[0]["max_abs_error"]) == pytest.approx(float(expected["max_abs_error"]))  # type: ignore[arg-type]
    assert "wrote" in res.stderr


def test_calibrate_check_as_json_and_csv_prints_every_size(app: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    profile = tmp_path / "p.yaml"
    assert runner.invoke(app, ["calibrate", str(SAMPLE), "-o", str(profile)]).exit_code == 0
    res = runner.invoke(app, ["--format", "json", "calibrate", "--check", str(profile), str(SAMPLE)])
    assert res.exit_code == 0, res.output
    doc = _json(res.stdout)
    assert doc["title"] == "error per size: p.yaml"
    rows = doc["rows"]
    assert rows and all(list(r) == CHECK_COLUMNS for r in rows)
    assert {(r["table"], r["half"], r["n_gpus"]) for r in rows} == {(SAMPLE.name, "out_of_place", 8)}
    sizes = [r["size_bytes"] for r in rows]
    assert sizes == sorted(sizes) and sizes[0] > 0 and len(sizes) == _fit_summary()["n_sizes"]
    for r in rows:
        assert r["rel_error"] == pytest.approx(r["model_time_s"] / r["measured_time_s"] - 1)
    assert "scoring out-of-place times" in res.stderr and "median |error|" in res.stderr
    assert "scoring" not in res.stdout

    # --max-error: the data still printed as one table, the failure on stderr, exit 1
    args = ["--format", "csv", "calibrate", "--check", str(profile), str(SAMPLE), "--max-error", "0.001"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1, res.output
    fields, csv_rows = _csv(res.stdout)
    assert fields == CHECK_COLUMNS and len(csv_rows) == len(rows)
    assert [int(r["size_bytes"]) for r in csv_rows] == sizes
    assert [float(r["rel_error"]) for r in csv_rows] == [r["rel_error"] for r in rows]
    assert "above --max-error" in res.stderr and "above --max-error" not in res.stdout


def test_validate_as_json_and_csv_prints_one_record_per_file(app: typer.Typer, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = tmp_path / "missing.yaml"
    res = runner.invoke(app, ["--format", "json", "validate", str(QUICKSTART), str(missing)])
    assert res.exit_code == 2, res.output  # a bad file: the same exit code as with tables
    doc = _json(res.stdout)
    assert doc["title"] == "validate"
    good, bad = doc["rows"]
    assert good == {
        "file": str(QUICKSTART),
        "ok": True,
        "description": "h100-rail-clos-2n, 16 GPUs, 100 ops on 16 simulated ranks",
        "error": "",
    }
    assert bad["file"] == str(missing) and bad["ok"] is False and bad["description"] == ""
    assert bad["error"] == f"{missing}: file not found"
    assert f"error: {missing}: file not found" in res.stderr  # the error line, still on stderr
    assert "ok (" not in res.stdout

    res = runner.invoke(app, ["--format", "csv", "validate", str(QUICKSTART)])
    assert res.exit_code == 0, res.output
    fields, rows = _csv(res.stdout)
    assert fields == ["file", "ok", "description", "error"]
    assert rows == [{"file": str(QUICKSTART), "ok": "True", "description": good["description"], "error": ""}]


def test_print_tables_is_one_document_in_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    """`print_tables`: rich tables in order; JSON, one object of every table; CSV, the primary
    table on stdout and the others on stderr."""
    from rich.table import Table

    def table(title: str, col: str) -> Table:
        t = Table(col, title=title)
        t.add_row("shown")
        return t

    tables = [(table("first", "a"), [{"a": 1.5}]), (table("second", "b"), [{"b": float("nan")}])]
    common.set_output_format("json")
    common.print_tables("both", tables)
    assert _json(capsys.readouterr().out) == {
        "title": "both",
        "tables": [{"title": "first", "rows": [{"a": 1.5}]}, {"title": "second", "rows": [{"b": None}]}],
    }
    common.set_output_format("csv")
    common.print_tables("both", tables, primary=1)
    printed = capsys.readouterr()
    assert printed.out == "b\nnan\n" and "first" in printed.err
    common.set_output_format("table")
    common.print_tables("both", tables)
    out = capsys.readouterr().out
    assert out.index("first") < out.index("second") and "shown" in out
