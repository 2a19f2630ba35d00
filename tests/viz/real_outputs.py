"""Real `clustersim compare` and `clustersim sweep` output folders for dashboard tests."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from simulator.commands.app import app

ROOT = Path(__file__).resolve().parents[2]
COMPARE_FILE = ROOT / "scenarios" / "compare-oversubscription.yaml"
STUDY_FILE = ROOT / "tests" / "study" / "data" / "interval_study.yaml"


def run_compare(out: Path) -> Path:
    """`clustersim compare scenarios/compare-oversubscription.yaml -o OUT --serial` (about 9 s)."""
    res = CliRunner().invoke(app, ["compare", str(COMPARE_FILE), "-o", str(out), "--serial"])
    if res.exit_code != 0:
        raise RuntimeError(res.output)
    return out


def run_sweep(out: Path, seeds: int = 2) -> Path:
    """`clustersim sweep tests/study/data/interval_study.yaml -o OUT --seeds 2` (about 4 s)."""
    res = CliRunner().invoke(app, ["sweep", str(STUDY_FILE), "-o", str(out), "--seeds", str(seeds)])
    if res.exit_code != 0:
        raise RuntimeError(res.output)
    return out
