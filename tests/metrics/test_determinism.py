"""Same scenario and seed, same bytes: printed sets in one order, and from the resolved scenario.

The across-PYTHONHASHSEED check of a failure run is tests/faults/test_determinism.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import yaml
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.metrics import store
from simulator.metrics.frames import canonical_text
from simulator.metrics.store import write_frame

ROOT = Path(__file__).resolve().parents[2]


def _frames(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.parquet"))}


def test_printed_sets_are_written_in_one_order(tmp_path: Path) -> None:
    a = "S(x=frozenset({('gpu12', 1.5), ('gpu5', 1.5)}), y=frozenset(), z=frozenset({'b', 'a'}))"
    b = "S(x=frozenset({('gpu5', 1.5), ('gpu12', 1.5)}), y=frozenset(), z=frozenset({'a', 'b'}))"
    # elements sorted by their repr: "('gpu12'" before "('gpu5'", 'a' before 'b'
    canonical = "S(x=frozenset({('gpu12', 1.5), ('gpu5', 1.5)}), y=frozenset(), z=frozenset({'a', 'b'}))"
    assert canonical_text(a) == canonical_text(b) == canonical
    write_frame(tmp_path / "1", "segments", pd.DataFrame({"state": [a]}))
    write_frame(tmp_path / "2", "segments", pd.DataFrame({"state": [b]}))
    assert (tmp_path / "1/segments.parquet").read_bytes() == (tmp_path / "2/segments.parquet").read_bytes()


def test_a_text_column_canonical_already_is_written_as_the_rewrite_would(tmp_path: Path, monkeypatch) -> None:
    """A run's `state` column is canonical as built (sets printed sorted): it is checked on its
    distinct values instead of rewritten row by row, and the bytes are those of the rewrite."""
    df = pd.DataFrame({"state": ["dp_replicas=8 draining", "dp_replicas=8", None] * 3, "x": range(9)})
    assert store._canonical_already(df["state"])
    fast = write_frame(tmp_path / "1", "segments", df)
    monkeypatch.setattr(store, "_canonical_already", lambda col: False)
    slow = write_frame(tmp_path / "2", "segments", df)
    assert fast.read_bytes() == slow.read_bytes()


def test_resolved_scenario_records_overrides_and_reproduces_the_run(tmp_path: Path) -> None:
    runner = CliRunner()
    first = tmp_path / "first"
    args = ["run", str(ROOT / "scenarios/quickstart.yaml"), "-o", str(first), "--no-dashboard"]
    r = runner.invoke(app, [*args, "--steps", "2", "--seed", "7"])
    assert r.exit_code == 0, r.output
    resolved = yaml.safe_load((first / "scenario.resolved.yaml").read_text())
    assert resolved["overrides"] == {"run.steps": 2, "seed": 7}
    assert resolved["scenario"]["run"]["steps"] == 2 and resolved["scenario"]["seed"] == 7
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump(resolved["scenario"]))
    r = runner.invoke(app, ["run", str(again), "-o", str(tmp_path / "second"), "--no-dashboard"])
    assert r.exit_code == 0, r.output
    assert _frames(first) == _frames(tmp_path / "second")
    assert len(pd.read_parquet(first / "steps.parquet")["step"].unique()) == 2
