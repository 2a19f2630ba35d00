"""Fuzzing the input files from their own JSON schemas: whatever a file says, `validate`
either accepts it or answers with exactly one `error: ...` line, exit 2 or 3, and no
traceback.

Documents are drawn from each spec's `model_json_schema()` by hypothesis-jsonschema (so
they are mostly schema-valid and reach the checks past the schema), then half of them get
one hostile value at a random place: text for a number, a boolean, an infinity, a NaN, a
huge or negative number, a list, a mapping, deep nesting. File references point at the
corpus's valid bases, so schema-valid scenarios load and prepare for real. The default
suite draws a few examples per kind (derandomized, so it is the same run every time); the
slow suite draws many.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as _cu
from hypothesis_jsonschema import _from_schema as _hjs
from hypothesis_jsonschema import from_schema
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.scenario.spec import ScenarioSpec
from simulator.study.compare import CompareSpec
from simulator.study.sweep import StudySpec
from simulator.workload.trace import TraceSpec
from tests.inputs.corpus_cli import BASE


class _Many:
    """`many(...).more()/.reject()` as hypothesis-jsonschema 0.23 calls it: newer Hypothesis
    releases replaced that interface with an iterator, so the collection size is decided
    here the same way (each further element drawn with a fixed continue probability)."""

    def __init__(self, data: Any, min_size: int, max_size: float, average_size: float) -> None:
        self.data, self.min_size, self.max_size, self.count = data, min_size, max_size, 0
        spread = max(average_size - min_size, 0.0)
        self.p_continue = spread / (spread + 1.0)

    def more(self) -> bool:
        if self.count < self.min_size or (
            self.count < self.max_size and self.data.draw_boolean(self.p_continue)
        ):
            self.count += 1
            return True
        return False

    def reject(self, why: str | None = None) -> None:
        self.count = max(self.count - 1, 0)


if not hasattr(_cu.many, "more"):
    _hjs.cu = SimpleNamespace(many=_Many)

SPECS = {"scenario": ScenarioSpec, "trace": TraceSpec, "study": StudySpec, "compare": CompareSpec}

HOSTILE = st.sampled_from(
    ["3", True, math.inf, -math.inf, math.nan, 1e308, -1, 0, None, [], {}, [[[[[]]]]], "../../x", ""]
)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a document."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _set(doc: Any, path: tuple, value: Any) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


def _point_at_bases(kind: str, doc: Any) -> None:
    """Replace file references by the corpus bases, so valid documents go all the way."""
    if not isinstance(doc, dict):
        return
    if kind == "scenario":
        doc["topology"] = {"file": str(BASE / "topology.yaml")}
        doc["workload"] = {"file": str(BASE / "trace.yaml")}
        doc.pop("calibration", None)
        doc.get("run", {}).pop("output", None) if isinstance(doc.get("run"), dict) else None
    elif kind == "compare":
        doc["base"] = {"file": str(BASE / "scenario.yaml")}
        for v in doc.get("variants") or []:
            if isinstance(v, dict):
                for key in ("topology", "workload", "calibration", "run"):
                    v.pop(key, None)
        doc.pop("cost", None)
    elif kind == "study" and isinstance(doc.get("step"), dict):
        doc["step"].pop("from_scenario", None)


@st.composite
def documents(draw: st.DrawFn, kind: str) -> Any:
    doc = draw(from_schema(SPECS[kind].model_json_schema()))
    _point_at_bases(kind, doc)
    if draw(st.booleans()):
        paths = _paths(doc)
        if paths:
            _set(doc, draw(st.sampled_from(paths)), draw(HOSTILE))
    return doc


def _check_one_line_or_success(kind: str, doc: Any, tmp: Path) -> None:
    path = tmp / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = CliRunner().invoke(app, ["validate", str(path)])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exception is None or isinstance(r.exception, SystemExit), (doc, r.exception)
    if r.exit_code == 0:
        assert not lines, (doc, r.stderr)
        return
    assert r.exit_code in (2, 3), (doc, r.exit_code, r.output)
    assert len(lines) == 1 and lines[0].startswith("error: "), (doc, r.stderr)
    assert "Traceback" not in r.output, doc


def _fuzz(kind: str, examples: int, tmp: Path) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(documents(kind))
    def check(doc: Any) -> None:
        _check_one_line_or_success(kind, doc, tmp)

    check()


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_fuzz_from_schema_short(kind: str, tmp_path: Path) -> None:
    _fuzz(kind, 3, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SPECS))
def test_fuzz_from_schema_long(kind: str, tmp_path: Path) -> None:
    _fuzz(kind, 300, tmp_path)
