"""`clustersim compare --resume`: variants written as they finish, a stopped comparison resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.io import Interrupted
from simulator.study import compare as cmpmod


def _stop_at_the_second(monkeypatch: pytest.MonkeyPatch):
    """Make the comparison stop (SIGTERM) when it reaches its second variant, `tree`; the
    real `simulate_variant`, to put back."""
    simulate = cmpmod.simulate_variant

    def stop_at_the_second(task: cmpmod.VariantTask) -> cmpmod.VariantOutcome:
        if task.variant == "tree":
            raise Interrupted(15)
        return simulate(task)

    monkeypatch.setattr(cmpmod, "simulate_variant", stop_at_the_second)
    return simulate


def _run(*args: str):
    return CliRunner().invoke(app, ["compare", *args, "--serial", "--steps", "1", "--no-dashboards"])


def test_a_stopped_comparison_keeps_finished_variants_and_resumes_to_the_same_table(
    small_compare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert _run(str(small_compare), "-o", str(straight)).exit_code == 0
    simulate = _stop_at_the_second(monkeypatch)
    r = _run(str(small_compare), "-o", str(resumed))
    assert r.exit_code == 128 + 15, r.output
    assert "continue with --resume" in r.output
    assert (resumed / "ring" / "steps.parquet").is_file() and not (resumed / "tree").exists()
    assert list(json.loads((resumed / "manifest.json").read_text())["tasks"]) == ["ring"]
    monkeypatch.setattr(cmpmod, "simulate_variant", simulate)
    r = _run(str(small_compare), "-o", str(resumed), "--resume")
    assert r.exit_code == 0, r.output
    assert "(1 done already)" in r.output
    assert (resumed / "comparison.csv").read_text() == (straight / "comparison.csv").read_text()
    # each variant under its place in the file, as an uninterrupted run records it
    assert (resumed / "manifest.json").read_text() == (straight / "manifest.json").read_text()
    for variant in ("ring", "tree", "hier-1step"):
        for frame in ("ops", "steps", "links"):
            got = (resumed / variant / f"{frame}.parquet").read_bytes()
            assert got == (straight / variant / f"{frame}.parquet").read_bytes(), (variant, frame)


def test_resume_of_another_comparison_is_refused(small_compare: Path, tmp_path: Path) -> None:
    """A folder whose manifest was written for other inputs (another file, or other --steps)."""
    out = tmp_path / "c"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"kind": "compare", "fingerprint": "other", "tasks": {}}))
    r = _run(str(small_compare), "-o", str(out), "--resume")
    assert r.exit_code == 2, r.output
    assert "holds a different comparison" in r.output and len(r.output.strip().splitlines()) == 1
    r = _run(str(small_compare), "-o", str(tmp_path / "empty"), "--resume")
    assert r.exit_code == 2 and "nothing to resume" in r.output


def test_resume_with_other_dashboards_is_refused(
    small_compare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped with --no-dashboards and resumed without it, the finished variants would have
    no dashboard while the new ones had one (it resumed without a word)."""
    out = tmp_path / "c"
    simulate = _stop_at_the_second(monkeypatch)
    assert _run(str(small_compare), "-o", str(out)).exit_code == 128 + 15  # (_run: --no-dashboards)
    monkeypatch.setattr(cmpmod, "simulate_variant", simulate)
    r = CliRunner().invoke(
        app, ["compare", str(small_compare), "-o", str(out), "--serial", "--steps", "1", "--resume"]
    )
    assert r.exit_code == 2 and "(or --steps, or --no-dashboards)" in r.output, r.output
    r = _run(str(small_compare), "-o", str(out), "--resume")
    assert r.exit_code == 0 and "(1 done already)" in r.output, r.output


def test_another_comparison_stopped_half_way_leaves_no_table_or_run_of_the_first(
    small_compare: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second comparison into a folder holding a first one replaces it: stopped after its
    first variant, the folder holds that variant and the second's manifest, and none of the
    first's tables or runs (before, the first's comparison.csv and its `tree` run stayed
    beside the second's `ring`, contradicting it). A folder the user put in is kept."""
    out = tmp_path / "c"
    assert _run(str(small_compare), "-o", str(out)).exit_code == 0
    first_ring = (out / "ring" / "summary.json").read_bytes()
    (out / "notes").mkdir()
    (out / "notes" / "mine.txt").write_text("keep")
    second = tmp_path / "second.yaml"
    second.write_text(
        small_compare.read_text()
        .replace("name: small", "name: second")
        .replace("  - name: ring\n", "  - name: ring\n    topology: {params: {nic_gbps: 200}}\n")
    )
    simulate = _stop_at_the_second(monkeypatch)
    r = _run(str(second), "-o", str(out))
    assert r.exit_code == 128 + 15, r.output
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "notes", "plotly.min.js", "ring"]
    assert (out / "notes" / "mine.txt").read_text() == "keep"
    assert (out / "ring" / "summary.json").read_bytes() != first_ring  # the second's ring
    assert list(json.loads((out / "manifest.json").read_text())["tasks"]) == ["ring"]
    monkeypatch.setattr(cmpmod, "simulate_variant", simulate)
    r = _run(str(second), "-o", str(out), "--resume")
    assert r.exit_code == 0, r.output
    assert "(1 done already)" in r.output
