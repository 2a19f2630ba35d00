"""Results folders simulated once per test session and shared by the dashboard tests (each
costs a few seconds): two shipped scenarios' runs, a real comparison and a real study."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_outputs import run_compare, run_sweep

ROOT = Path(__file__).resolve().parents[2]


def _run(scenario: str, out: Path) -> Path:
    res = CliRunner().invoke(app, ["run", str(ROOT / "scenarios" / scenario), "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="session")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clustersim run scenarios/llama3-70b-tp8-pp4-dp32.yaml` (1,024 GPUs, 4 simulated ranks)."""
    return _run("llama3-70b-tp8-pp4-dp32.yaml", tmp_path_factory.mktemp("big") / "run")


@pytest.fixture(scope="session")
def failures_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clustersim run scenarios/quickstart-failures.yaml` (30 days of failures, 8 seeds)."""
    return _run("quickstart-failures.yaml", tmp_path_factory.mktemp("fail") / "run")


@pytest.fixture(scope="session")
def compare_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clustersim compare scenarios/compare-oversubscription.yaml --serial` (3 variants)."""
    return run_compare(tmp_path_factory.mktemp("cmp") / "out")


@pytest.fixture(scope="session")
def sweep_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`clustersim sweep tests/study/data/interval_study.yaml --seeds 2` (6 variants)."""
    return run_sweep(tmp_path_factory.mktemp("sw") / "out")
