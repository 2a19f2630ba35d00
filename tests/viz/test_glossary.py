"""Every column of every frame a run writes, and every key of its summary.json, is named in
docs/metrics.md (a name in backticks; `exposed_<tag>_s` stands for every tag)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simulator.metrics.store import read_frames
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def _documented() -> tuple[set[str], list[re.Pattern[str]]]:
    """Names in backticks in the glossary, and the patterns of the `<placeholder>` ones."""
    names: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for quoted in re.findall(r"`([^`]+)`", DOC.read_text(encoding="utf-8")):
        for name in re.findall(r"[A-Za-z_][A-Za-z0-9_<>]*", quoted):
            if "<" in name:
                patterns.append(re.compile(re.sub(r"<[^>]*>", "[a-z0-9_]+", name) + "$"))
            else:
                names.add(name)
    return names, patterns


def _missing(keys: set[str]) -> list[str]:
    names, patterns = _documented()
    return sorted(
        k
        for k in keys
        if k.split(":")[-1] not in names and not any(p.match(k.split(":")[-1]) for p in patterns)
    )


def _keys(folder: Path) -> set[str]:
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    keys = set(summary)
    keys |= {k for k in summary.get("run_level", {})}
    for name, df in read_frames(folder).items():
        keys |= {f"{name}:{c}" for c in df.columns}
    return keys


@pytest.mark.parametrize("run", ["big_run", "failures_run"])
def test_every_column_and_summary_key_is_in_the_glossary(run: str, request: pytest.FixtureRequest) -> None:
    folder = request.getfixturevalue(run)
    keys = _keys(folder)
    assert len(keys) > 60  # frames and summary were read
    assert _missing(keys) == []


@pytest.mark.parametrize("scenario", ["two-dp-jobs-spread.yaml", "cluster-example.yaml"])
def test_every_column_and_key_of_a_jobs_or_cluster_run_is_in_the_glossary(
    scenario: str, tmp_path: Path
) -> None:
    """The frames and summary of a scenario with `jobs:` and one with `cluster:` (about 1 s)."""
    path = Path(__file__).resolve().parents[2] / "scenarios" / "jobs" / scenario
    execute(prepare(path)).write(tmp_path, dashboard=False)
    keys = _keys(tmp_path)
    assert len(keys) > 30  # frames and summary were read
    assert _missing(keys) == []


def test_an_undocumented_name_is_caught() -> None:
    assert _missing({"ops:op_id", "steps:exposed_tp_s", "goodput_95ci"}) == []
    assert _missing({"ops:no_such_column", "no_such_key"}) == ["no_such_key", "ops:no_such_column"]
