"""Job traces: the shipped example reads, bad rows are one-line errors naming line and column,
the synthetic generator is seeded and round-trips through the CSV format."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.jobs.trace import format_job_trace, read_job_trace, synthetic_jobs

ROOT = Path(__file__).resolve().parents[2]
HEADER = "job,submit_h,gpus,duration_h,steps,model,priority\n"


def test_the_example_trace_reads() -> None:
    rows = read_job_trace(ROOT / "workloads" / "jobs" / "example-jobs.csv")
    assert len(rows) == 12
    model_rows = [r for r in rows if r.model is not None]
    assert [r.steps for r in model_rows] == [200000, 100000]
    assert rows[0].duration_s == 20 * 3600.0 and rows[0].gpus == 64


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("a,0,eight,1,,,0", "jobs.csv:2: gpus: expected an integer, found 'eight'"),
        ("a,0,8,,,,0", "jobs.csv:2: duration_h: give duration_h, or steps with a model, not both or neither"),
        ("a,0,8,,10,,0", "jobs.csv:2: model: steps need a model (a workload file) to price them"),
        ("a,-1,8,1,,,0", "jobs.csv:2: submit_h: must be a finite number >= 0, found '-1'"),
        ("a,0,8,1,,nowhere.yaml,0", "jobs.csv:2: model: file"),
    ],
)
def test_bad_rows_are_one_line_errors(tmp_path: Path, row: str, expected: str) -> None:
    p = tmp_path / "jobs.csv"
    p.write_text(HEADER + row + "\n")
    with pytest.raises(InputError) as exc:
        read_job_trace(p)
    assert expected in str(exc.value) and "\n" not in str(exc.value)


def test_a_duplicate_name_and_an_unknown_column_are_errors(tmp_path: Path) -> None:
    p = tmp_path / "jobs.csv"
    p.write_text(HEADER + "a,0,8,1,,,0\n# comment\na,1,8,1,,,0\n")
    with pytest.raises(InputError, match="jobs.csv:4: job: job name 'a' is given twice"):
        read_job_trace(p)
    p.write_text("job,submit_h,gpus,walltime\n")
    with pytest.raises(InputError, match="jobs.csv:1: unknown column 'walltime'"):
        read_job_trace(p)


def test_a_spreadsheet_byte_order_mark_is_not_part_of_the_first_column(tmp_path: Path) -> None:
    """A CSV saved by a spreadsheet starts with U+FEFF; it read as column '\\ufeffjob'."""
    p = tmp_path / "jobs.csv"
    p.write_bytes("\ufeff".encode() + (HEADER + "a,0,8,1,,,0\n").encode())
    assert [(r.name, r.gpus) for r in read_job_trace(p)] == [("a", 8)]


def test_a_column_given_twice_is_an_error(tmp_path: Path) -> None:
    """Two `gpus` columns are refused at the header, not read as the last one's value."""
    p = tmp_path / "jobs.csv"
    p.write_text("job,submit_h,gpus,duration_h,gpus\na,0,8,1,16\n")
    with pytest.raises(InputError, match="jobs.csv:1: column 'gpus' is given twice"):
        read_job_trace(p)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", "jobs.csv:1: the job trace has a header and no jobs"),
        ('"a\nb",0,8,1,,,0\n', "jobs.csv:2: expected 7 fields"),
        ("a,0,8,1,,,0,extra\n", "jobs.csv:2: expected 7 fields (one per header column), found 8"),
        ("a,0,8,1,,,high\n", "jobs.csv:2: priority: expected an integer, found 'high'"),
        ("a,0,8,1,,,2.5\n", "jobs.csv:2: priority: expected an integer, found '2.5'"),
        ("a,0,8,1,,," + "9" * 400 + "\n", "jobs.csv:2: priority: expected an integer of at most 2**63 - 1"),
        ("a,0," + "9" * 400 + ",1,,,0\n", "jobs.csv:2: gpus: must be a finite number >= 0, found '99999"),
    ],
)
def test_no_jobs_stray_fields_and_a_bad_priority_are_errors(tmp_path: Path, body: str, expected: str) -> None:
    p = tmp_path / "jobs.csv"
    p.write_text(HEADER + body)
    with pytest.raises(InputError) as exc:
        read_job_trace(p)
    assert expected in str(exc.value) and "\n" not in str(exc.value)


def test_a_negative_priority_reads(tmp_path: Path) -> None:
    """Priority is any integer (higher runs first), so -1 is a valid value."""
    p = tmp_path / "jobs.csv"
    p.write_text(HEADER + "a,0,8,1,,,-1\n")
    assert read_job_trace(p)[0].priority == -1


def test_synthetic_jobs_are_seeded_and_round_trip(tmp_path: Path) -> None:
    a = synthetic_jobs(50, 3, mean_interarrival_h=1.0, median_duration_h=4.0)
    assert a == synthetic_jobs(50, 3, mean_interarrival_h=1.0, median_duration_h=4.0)
    assert a != synthetic_jobs(50, 4, mean_interarrival_h=1.0, median_duration_h=4.0)
    assert a[0].submit_s == 0.0 and all(x.submit_s <= y.submit_s for x, y in zip(a, a[1:], strict=False))
    p = tmp_path / "jobs.csv"
    p.write_text(format_job_trace(a))
    back = read_job_trace(p)
    assert [(r.name, r.gpus) for r in back] == [(r.name, r.gpus) for r in a]
    # hours in shortest round-trip form: only the x 3600 of reading may move the last bit
    # (6 significant digits had moved submits by up to seconds)
    assert [r.duration_s for r in back] == pytest.approx([r.duration_s for r in a], rel=1e-15, abs=0)
    assert [r.submit_s for r in back] == pytest.approx([r.submit_s for r in a], rel=1e-15, abs=0)


def test_a_model_that_is_a_folder_is_said_to_be_one(tmp_path: Path) -> None:
    """A row's model naming a folder was reported as 'not found'."""
    (tmp_path / "models").mkdir()
    p = tmp_path / "jobs.csv"
    p.write_text(HEADER + "a,0,8,,10,models,0\n")
    with pytest.raises(InputError) as exc:
        read_job_trace(p)
    where = tmp_path / "models"
    assert (
        str(exc.value)
        == f"{p}:2: model: {str(where)!r} is a folder; expected a file (relative to the job trace)"
    )


def test_an_interval_in_steps_over_jobs_given_as_durations_is_refused(tmp_path: Path) -> None:
    """`interval_steps` over rows with `duration_h` (no model, so no step time) made every
    job's interval infinite: no checkpoint at all, without a word. Refused by validate and run
    alike at policy.interval_steps; an interval in time runs."""
    from typer.testing import CliRunner

    from simulator.commands.app import app

    (tmp_path / "two.csv").write_text("job,submit_h,gpus,duration_h\na,0,4,2\nb,0,4,2\n")
    topo = ROOT / "topologies" / "h100-rail-clos-16n-4to1.yaml"
    sc = tmp_path / "sc.yaml"
    text = (
        f"name: fix\nseed: 1\ntopology: {{file: {topo}}}\n"
        "cluster: {trace: {file: two.csv}, scheduler: backfill, checkpoint_min: 2}\n"
        "failures:\n  - {kind: scheduled, target: gpu, at_h: 1.9, component: 1, repair_h: 1}\n"
        "policy: {kind: checkpoint_restart, interval: fixed, interval_steps: 100}\n"
        "reliability: {duration_h: 10}\n"
    )
    sc.write_text(text)
    for args in (["validate", str(sc)], ["run", str(sc), "-o", str(tmp_path / "out"), "--no-dashboard"]):
        r = CliRunner().invoke(app, args)
        lines = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert r.exit_code == 2 and lines == [
            f"error: {sc}:7: policy.interval_steps: a checkpoint every 100 step(s) has no length: "
            "job 'a' (line 2 of two.csv) is given as a duration, not a model's steps; give the interval "
            "as interval_min"
        ], r.output
    sc.write_text(text.replace("interval_steps: 100", "interval_min: 30"))
    assert CliRunner().invoke(app, ["validate", str(sc)]).exit_code == 0
