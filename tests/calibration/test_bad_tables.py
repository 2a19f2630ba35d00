"""Bad benchmark tables (logs and CSV): one line `file:line: field: message`, exit 2, no profile."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.calibration.logs import synthetic_log

SIZES = [2**k for k in range(10, 20)]
HEADER = "size_bytes,time_us_oop,busbw_oop,time_us_ip,busbw_ip"


def _rows(n: int = 3, factor: float = 1.75) -> list[str]:
    """Rows of an all_reduce on 8 GPUs (busbw = 2(n-1)/n x size / time, printed to 0.01)."""
    out = []
    for k in range(10, 10 + n):
        busbw = f"{factor * 2**k / (10.0 + k) / 1e3:.2f}"
        out.append(f"{2**k},{10.0 + k},{busbw},{10.0 + k},{busbw}")
    return out


def _log_lines() -> list[str]:
    return synthetic_log("all_reduce", 8, 8, 10e-6, 400e9, SIZES).splitlines()


def _first_row(lines: list[str]) -> int:
    return next(i for i, ln in enumerate(lines) if ln.strip().startswith(str(SIZES[0])))


def _no_rows(tmp: Path) -> tuple[Path, str]:
    p = tmp / "empty-allreduce-8gpu-1node.log"
    p.write_text("\n".join(ln for ln in _log_lines() if ln.startswith("#")) + "\n")
    return p, f"{p}:1: no nccl-tests result table found (expected rows of: size count type"


def _mixed_log(tmp: Path) -> tuple[Path, str]:
    lines = _log_lines()
    lines = [ln.replace("concluded: all_reduce_perf", "concluded: all_gather_perf") for ln in lines]
    p = tmp / "mixed.log"
    p.write_text("\n".join(lines) + "\n")
    line = _first_row(lines) + 1
    what = "mixed collectives in one table (start line all_reduce, end line all_gather)"
    return p, f"{p}:{line}: collective: {what}"


def _mixed_csv(tmp: Path) -> tuple[Path, str]:
    p = tmp / "mixed-8gpu-1node.csv"
    rows = [r + (",allreduce" if i != 2 else ",all_gather") for i, r in enumerate(_rows())]
    p.write_text("\n".join([HEADER + ",collective", *rows]) + "\n")
    return p, f"{p}:4: collective: mixed collectives in one table ('all_reduce' above, 'all_gather' here)"


def _missing_column(tmp: Path) -> tuple[Path, str]:
    p = tmp / "allreduce-8gpu-1node.csv"
    p.write_text("size_bytes,time_us_ip,busbw_ip\n1024,10,1\n")
    return p, f"{p}:1: time_us_oop: missing column(s) time_us_oop, busbw_oop; expected size_bytes,"


def _csv_unsaid(name: str, col: str, what: str) -> object:
    """A CSV whose columns and file name leave one of collective, GPUs, nodes unknown: the
    error names the column to add (it spoke of a log and its '# Rank' lines)."""

    def make(tmp: Path) -> tuple[Path, str]:
        p = tmp / name
        p.write_text("\n".join([HEADER, *_rows()]) + "\n")
        return p, f"{p}:2: {col}: the CSV does not say {what}: add the {col} column or pass --"

    return make


def _csv_extra_cell(tmp: Path) -> tuple[Path, str]:
    """A row with a cell the header has no column for (it was dropped without a word)."""
    p = tmp / "allreduce-8gpu-1node.csv"
    rows = _rows()
    rows[1] += ",7"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    return p, f"{p}:3: busbw_ip: row has 6 cells, the header 5 columns; expected one cell per column"


def _csv_out_of_order(tmp: Path) -> tuple[Path, str]:
    p = tmp / "allreduce-8gpu-1node.csv"
    rows = _rows()
    p.write_text("\n".join([HEADER, rows[1], rows[0], rows[2]]) + "\n")
    return p, f"{p}:3: size_bytes: sizes out of order: 1024 after 2048; expected increasing sizes"


def _log_out_of_order(tmp: Path) -> tuple[Path, str]:
    lines = _log_lines()
    i = _first_row(lines)
    lines.insert(i + 1, lines[i])
    p = tmp / "dup.log"
    p.write_text("\n".join(lines) + "\n")
    return p, f"{p}:{i + 2}: size: sizes out of order: 1024 again after line {i + 1}; expected increasing"


def _csv_value(value: str, col: int) -> object:
    def make(tmp: Path) -> tuple[Path, str]:
        p = tmp / "allreduce-8gpu-1node.csv"
        rows = _rows()
        cells = rows[1].split(",")
        cells[col] = value
        rows[1] = ",".join(cells)
        p.write_text("\n".join([HEADER, *rows]) + "\n")
        name = HEADER.split(",")[col]
        bound = "of at least 0" if name.startswith("busbw") else "above 0"  # busbw prints 0.00
        return p, f"{p}:3: {name}: expected a finite number {bound}, found {value}"

    return make


def _log_nan_time(tmp: Path) -> tuple[Path, str]:
    lines = _log_lines()
    i = _first_row(lines) + 2
    tok = lines[i].split()
    tok[5] = "nan"
    lines[i] = "  ".join(tok)
    p = tmp / "nan.log"
    p.write_text("\n".join(lines) + "\n")
    return p, f"{p}:{i + 1}: time: expected a finite number for time, found 'nan'"


def _log_field(col: int, value: str, expected: str) -> object:
    """The third row of a log with field `col` (0: size; 5-8: the out-of-place time, algbw,
    busbw, #wrong) replaced by `value`."""

    def make(tmp: Path) -> tuple[Path, str]:
        lines = _log_lines()
        i = _first_row(lines) + 2
        tok = lines[i].split()
        tok[col] = value
        lines[i] = "  ".join(tok)
        p = tmp / "field.log"
        p.write_text("\n".join(lines) + "\n")
        return p, f"{p}:{i + 1}: {expected}"

    return make


def _csv_of_other_gpus(tmp: Path) -> tuple[Path, str]:
    """8-GPU rows (busbw = 1.75 algbw) read as 16 GPUs: busbw disagrees with size / time."""
    p = tmp / "allreduce-16gpu-2node.csv"
    p.write_text("\n".join([HEADER, *_rows()]) + "\n")
    return p, f"{p}:4: busbw: busbw 0.33 GB/s against size/time = 4096/22 us = 0.1862 GB/s algbw: ratio 1.772"


def _csv_huge(col: str, value: str, expected: str) -> object:
    def make(tmp: Path) -> tuple[Path, str]:
        p = tmp / "allreduce-8gpu-1node.csv"
        rows = _rows()
        cells = rows[2].split(",")
        cells[HEADER.split(",").index(col)] = value
        rows[2] = ",".join(cells)
        p.write_text("\n".join([HEADER, *rows]) + "\n")
        return p, f"{p}:4: {col}: {expected}"

    return make


def _log_swapped_rows(tmp: Path) -> tuple[Path, str]:
    lines = _log_lines()
    i = _first_row(lines) + 3
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    p = tmp / "swapped.log"
    p.write_text("\n".join(lines) + "\n")
    return p, f"{p}:{i + 2}: size: sizes out of order: 8192 after 16384 on line {i + 1}; expected increasing"


def _log_one_gpu(tmp: Path) -> tuple[Path, str]:
    lines = synthetic_log("all_reduce", 1, 1, 10e-6, 400e9, SIZES).splitlines()
    p = tmp / "one.log"
    p.write_text("\n".join(lines) + "\n")
    return p, f"{p}:{_first_row(lines) + 1}: n_gpus: 1 (1 GPUs from the '# Rank' lines): a collective needs"


def _log_other_collective(tmp: Path) -> tuple[Path, str]:
    lines = [
        ln for ln in synthetic_log("all_gather", 8, 8, 10e-6, 400e9, SIZES).splitlines() if "_perf" not in ln
    ]
    p = tmp / "allreduce.log"
    p.write_text("\n".join(lines) + "\n")
    row = _first_row(lines) + len(SIZES)
    return p, f"{p}:{row}: busbw: busbw/algbw = "


def _log_wrong(tmp: Path) -> tuple[Path, str]:
    lines = _log_lines()
    i = _first_row(lines)
    lines[i] = lines[i].rstrip()[:-1] + "1"
    p = tmp / "wrong.log"
    p.write_text("\n".join(lines) + "\n")
    return p, f"{p}:{i + 1}: wrong: 1 wrong elements (in-place, size 1024): nccl-tests' data check failed"


def _log_latin1(tmp: Path) -> tuple[Path, str]:
    """A byte that is not UTF-8 (latin-1 'e' acute) on line 4: its line is named, not line 1."""
    lines = _log_lines()
    p = tmp / "latin1-allreduce-8gpu-1node.log"
    data = "\n".join(lines).encode() + b"\n"
    at = data.index(b"\n", data.index(b"\n", data.index(b"\n") + 1) + 1) + 1  # start of line 4
    p.write_bytes(data[:at] + b"\xe9" + data[at:])
    return p, f"{p}:4: not UTF-8 text (byte {at}; not nccl-tests output?)"


def _csv_latin1(tmp: Path) -> tuple[Path, str]:
    p = tmp / "allreduce-8gpu-1node.csv"
    data = ("\n".join([HEADER, *_rows()]) + "\n").encode()
    at = data.index(b"\n", data.index(b"\n") + 1) + 1  # start of line 3
    p.write_bytes(data[:at] + b"\xe9" + data[at:])
    return p, f"{p}:3: not UTF-8 text (byte {at})"


CASES = {
    "log with no rows": _no_rows,
    "log with a latin-1 byte on line 4": _log_latin1,
    "CSV with a latin-1 byte on line 3": _csv_latin1,
    "mixed collectives in a log table": _mixed_log,
    "mixed collectives in a CSV": _mixed_csv,
    "CSV with missing columns": _missing_column,
    "CSV sizes out of order": _csv_out_of_order,
    "CSV row with a cell beyond the header": _csv_extra_cell,
    "CSV without a collective": _csv_unsaid(
        "bench-8gpu-1node.csv", "collective", "which collective it measured"
    ),
    "CSV without a node count": _csv_unsaid("allreduce-8gpu.csv", "n_nodes", "how many nodes took part"),
    "log sizes out of order": _log_out_of_order,
    "CSV NaN time": _csv_value("nan", 1),
    "CSV negative time": _csv_value("-3.5", 3),
    "CSV negative busbw": _csv_value("-1", 2),
    "log NaN time": _log_nan_time,
    "log NaN busbw": _log_field(7, "nan", "busbw: expected a finite number for busbw, found 'nan'"),
    "log infinite busbw": _log_field(7, "inf", "busbw: expected a finite number for busbw, found 'inf'"),
    "log NaN algbw": _log_field(6, "nan", "algbw: expected a finite number for algbw, found 'nan'"),
    "log busbw that overflows": _log_field(7, "1e308", "busbw: expected a finite busbw of 0 to 1e+06 GB/s"),
    "log negative #wrong": _log_field(8, "-3", "wrong: expected a whole count of at least 0, found -3"),
    "log size of 400 digits": _log_field(
        0, "1" + "0" * 400, "size: message size a number of 401 digits bytes is above 1e+18 bytes"
    ),
    "log size of 1e30 bytes": _log_field(0, str(10**30), "size: message size 1.000e+30 bytes is above 1e+18"),
    "CSV of 8 GPUs read as 16": _csv_of_other_gpus,
    "CSV size of 400 digits": _csv_huge("size_bytes", "9" * 400, "message size a number of 400 digits bytes"),
    "CSV busbw above 1e6 GB/s": _csv_huge("busbw_oop", "1e7", "expected a finite busbw_oop of 0 to 1e+06"),
    "log with two rows swapped": _log_swapped_rows,
    "log of one GPU": _log_one_gpu,
    "log of another collective than its file name": _log_other_collective,
    "log with wrong elements": _log_wrong,
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_table_is_one_line_exit_2_no_profile(app: typer.Typer, tmp_path: Path, case: str) -> None:
    path, expected = CASES[case](tmp_path)  # type: ignore[operator]
    out = tmp_path / "profile.yaml"
    r = CliRunner().invoke(app, ["calibrate", str(path), "-o", str(out)])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].removeprefix("error: ").startswith(expected), r.output
    assert not out.exists() and not out.with_suffix(".html").exists()


def test_a_csv_written_from_a_real_log_with_coarser_digits_is_read(app: typer.Typer, tmp_path: Path) -> None:
    """The size / time check must not refuse real data rewritten with fewer digits: the DGX
    H100 sample's out-of-place half as a CSV, with busbw to 0.1 GB/s and times to whole
    microseconds above 100 us (rounded a second time)."""
    from simulator.calibration.parser import read_benchmark
    from tests.calibration.logs import SAMPLES

    (table,) = read_benchmark(SAMPLES / "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt")
    rows = table.sizes("out_of_place")
    lines = ["size_bytes,time_us_oop,busbw_oop"]
    for r in rows.itertuples():
        t = r.time_s * 1e6
        lines.append(f"{int(r.size_bytes)},{t:.0f}" if t >= 100 else f"{int(r.size_bytes)},{t:.2f}")
        lines[-1] += f",{r.busbw_bytes_per_s / 1e9:.1f}"
    csv = tmp_path / "allreduce-8gpu-1node.csv"
    csv.write_text("\n".join(lines) + "\n")
    r = CliRunner().invoke(app, ["calibrate", str(csv), "-o", str(tmp_path / "p.yaml")])
    assert r.exit_code == 0, r.output
