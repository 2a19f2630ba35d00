"""Rows held to the table's collective and GPU count: busbw/algbw, #wrong, GPU count; CSV
rows read as the log parser reads them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from simulator.calibration.csv_table import read_csv_table
from simulator.calibration.parser import parse_text, read_benchmark
from simulator.calibration.row_checks import agrees
from simulator.errors import InputError
from tests.calibration.logs import synthetic_log

SIZES = [2**k for k in range(10, 26)]


def _kindless(log: str) -> str:
    """The log without the lines that name its collective (the file name then does)."""
    return "\n".join(ln for ln in log.splitlines() if "_perf" not in ln) + "\n"


def _first_row_of(lines: list[str], size: int) -> int:
    return next(i for i, ln in enumerate(lines) if ln.split()[:1] == [str(size)])


def _calibrate(app: typer.Typer, *args: str) -> tuple[int, list[str]]:
    r = CliRunner().invoke(app, ["calibrate", *args])
    return r.exit_code, [ln.removeprefix("error: ") for ln in r.output.splitlines() if ln.strip()]


def test_agreement_tolerance_is_the_printed_rounding() -> None:
    # all_reduce on 8 GPUs: busbw = 1.75 algbw; both printed with 2 decimals
    assert agrees(1.75 * 100.00, 100.00, 1.75)
    assert agrees(0.02, 0.01, 1.75)  # 0.0149 -> 0.01 and 0.0261 -> 0.03 are both possible
    assert agrees(175.01, 100.00, 1.75) and not agrees(175.03, 100.00, 1.75)
    assert not agrees(0.875 * 100, 100.00, 1.75)


def test_a_table_of_another_collective_is_refused(tmp_path: Path) -> None:
    """An all_gather table that the file name calls all_reduce: the ratio 0.875 says so."""
    log = _kindless(synthetic_log("all_gather", 8, 8, 20e-6, 200e9, SIZES))
    path = tmp_path / "h100-8gpu-allreduce.txt"
    path.write_text(log)
    lines = log.splitlines()
    with pytest.raises(InputError) as exc:
        read_benchmark(path)
    msg = str(exc.value)
    row = _first_row_of(lines, SIZES[-1]) + 1  # the largest algbw: the least rounded ratio
    assert msg.startswith(f"{path}:{row}: busbw: busbw/algbw = ")
    assert (
        " = 0.875 fits all_gather, reduce_scatter or all_to_all, not all_reduce on 8 GPUs (factor 1.75;"
        in msg
    )
    assert "collective all_reduce from the file name" in msg
    # the same table read as what it is passes
    assert read_benchmark(path, collective="all_gather")[0].collective == "all_gather"


def test_a_wrong_gpu_count_is_refused() -> None:
    log = _kindless(synthetic_log("all_reduce", 16, 8, 20e-6, 200e9, SIZES))
    table_only = "\n".join(ln for ln in log.splitlines() if "Rank" not in ln)
    with pytest.raises(InputError, match=r"fits all_reduce on 16 GPUs, not all_reduce on 8 GPUs"):
        parse_text(table_only, "run-allreduce.log", n_gpus=8, n_nodes=2)
    assert parse_text(table_only, "run-allreduce.log", n_gpus=16, n_nodes=2)[0].n_gpus == 16


def test_mixed_tables_in_one_log_are_refused_at_the_other_one(tmp_path: Path) -> None:
    one = _kindless(synthetic_log("all_reduce", 8, 8, 20e-6, 200e9, SIZES))
    two = _kindless(synthetic_log("all_gather", 8, 8, 20e-6, 200e9, SIZES))
    with pytest.raises(InputError) as exc:
        parse_text(one + two, tmp_path / "allreduce.log")
    line = len(one.splitlines()) + _first_row_of(two.splitlines(), SIZES[-1]) + 1
    assert str(exc.value).startswith(f"{tmp_path / 'allreduce.log'}:{line}: busbw: ")
    assert "fits all_gather, reduce_scatter or all_to_all, not all_reduce" in str(exc.value)


def test_wrong_elements_are_refused() -> None:
    log = synthetic_log("all_reduce", 8, 8, 20e-6, 200e9, SIZES)
    lines = log.splitlines()
    i = _first_row_of(lines, 2**20)
    tok = lines[i].split()
    tok[-1] = "3"  # in-place #wrong
    lines[i] = "  ".join(tok)
    with pytest.raises(InputError) as exc:
        parse_text("\n".join(lines), "bad.log")
    assert str(exc.value) == (
        f"bad.log:{i + 1}: wrong: 3 wrong elements (in-place, size 1048576): nccl-tests' data check "
        "failed, so these times are not of a correct run; rerun until #wrong is 0"
    )
    failed = log.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 7 FAILED")
    line = next(n for n, ln in enumerate(failed.splitlines(), 1) if "Out of bounds" in ln)
    with pytest.raises(
        InputError, match=rf"^bad\.log:{line}: wrong: 7 values out of bounds: nccl-tests' data"
    ):
        parse_text(failed, "bad.log")


def test_an_error_column_is_a_magnitude_not_a_count() -> None:
    """Older nccl-tests print the largest error in an `error` column; it is not refused."""
    log = synthetic_log("all_reduce", 8, 8, 20e-6, 200e9, SIZES).replace("#wrong", " error")
    lines = log.splitlines()
    i = _first_row_of(lines, 2**20)
    tok = lines[i].split()
    tok[-1] = "2e-03"
    lines[i] = "  ".join(tok)
    t = parse_text("\n".join(lines), "old.log")[0]
    assert t.rows["wrong"].max() == pytest.approx(2e-3)


def test_one_gpu_is_refused_from_the_log_the_argument_and_csv(app: typer.Typer, tmp_path: Path) -> None:
    one = tmp_path / "one-allreduce.txt"
    log = synthetic_log("all_reduce", 1, 1, 20e-6, 200e9, SIZES)
    one.write_text(log)
    row = _first_row_of(log.splitlines(), SIZES[0]) + 1
    expected = "a collective needs at least 2 GPUs; on one GPU nothing crosses a link"
    code, out = _calibrate(app, str(one), "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and out == [
        f"{one}:{row}: n_gpus: 1 (1 GPUs from the '# Rank' lines): {expected} "
        "(nccl-tests' busbw factor 2(n-1)/n is 0)"
    ]
    norank = tmp_path / "norank-allreduce.txt"
    norank.write_text("\n".join(ln for ln in log.splitlines() if "Rank" not in ln) + "\n")
    code, out = _calibrate(app, str(norank), "--gpus", "1", "--nodes", "1", "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and len(out) == 1 and out[0].startswith(f"{norank}:")
    assert "n_gpus: 1 (1 GPUs from the argument): " + expected in out[0]
    csv = tmp_path / "g1.csv"
    csv.write_text(
        "collective,n_gpus,n_nodes,size_bytes,time_us_oop,busbw_oop\nall_reduce,1,1,1048576,123.2,0.00\n"
    )
    code, out = _calibrate(app, str(csv), "-o", str(tmp_path / "p.yaml"))
    assert code == 2 and len(out) == 1
    assert out[0].startswith(f"{csv}:2: n_gpus: 1 (1 GPUs from the n_gpus column): {expected}")
    assert not (tmp_path / "p.yaml").exists()


def _csv_from_log(log: str) -> str:
    """The rows of a log as a CSV with algbw columns, as people copy them."""
    out = ["size_bytes,time_us_oop,algbw_oop,busbw_oop,time_us_ip,algbw_ip,busbw_ip"]
    for ln in log.splitlines():
        tok = ln.split()
        if tok and tok[0].isdigit():
            out.append(",".join([tok[0], *tok[-8:-5], *tok[-4:-1]]))
    return "\n".join(out) + "\n"


def test_csv_rows_read_as_the_log_rows(samples: Path, tmp_path: Path) -> None:
    """busbw 0.00 at small sizes and size-0 rows: the CSV of a log's rows gives the log's table."""
    src = samples / "a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt"
    log = read_benchmark(src)[0]
    csv = tmp_path / "a100-8gpu-1node-allreduce.csv"
    csv.write_text(_csv_from_log(src.read_text()))
    table = read_csv_table(csv)
    assert (table.collective, table.n_gpus, table.n_nodes) == ("all_reduce", 8, 1)
    assert table.rows["busbw_bytes_per_s"].min() == 0.0
    sized = log.rows[log.rows["size_bytes"] > 0].reset_index(drop=True)
    assert len(table.rows) == len(sized) == 2 * 32
    for col in ("size_bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "in_place"):
        assert np.array_equal(table.rows[col].to_numpy(), sized[col].to_numpy()), col
    # the same table exported by a spreadsheet (UTF-8 with a byte-order mark) reads the same
    bom = tmp_path / "bom" / csv.name
    bom.parent.mkdir()
    bom.write_bytes(b"\xef\xbb\xbf" + csv.read_bytes())
    again = read_csv_table(bom)
    assert again.collective == "all_reduce" and again.rows["time_s"].equals(table.rows["time_s"])


def test_csv_of_another_collective_is_refused_where_algbw_is_given(samples: Path, tmp_path: Path) -> None:
    src = samples / "a100-40gb-8gpu-1node-allgather-superbench-fixture.txt"
    csv = tmp_path / "a100-8gpu-1node-allreduce.csv"
    csv.write_text(_csv_from_log(src.read_text()))
    with pytest.raises(
        InputError, match=r"fits all_gather, reduce_scatter or all_to_all, not all_reduce on 8"
    ):
        read_csv_table(csv)
    assert read_csv_table(csv, collective="all_gather").collective == "all_gather"
