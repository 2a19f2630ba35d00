"""`clustersim schema KIND` accepts the files clustersim reads: every shipped scenario,
study, comparison, workload, model, trace and GPU file validates against its kind's JSON
schema (Draft 2020-12), human-unit spellings included (`mtbf_h`, `grad_bucket_mb`, `hbm_mib`,
the `repair_h` shorthand), and a spelling the loader would refuse fails it."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from simulator.commands.run import _schema_models, schema_with_human_keys
from simulator.config.loader import read_document
from simulator.config.schema_units import accepted_spellings
from simulator.faults.failure import ExponentialFailureSpec

ROOT = Path(__file__).resolve().parents[2]
#: shorthands the loader reads that are not unit spellings (`simulator.config.schema_units`)
NOT_IN_SCHEMA = {"two-dp-jobs-leaf-aligned.yaml", "two-dp-jobs-spread.yaml"}  # placement: "spread"


def _kind(data: dict) -> str:
    return "study" if "axes" in data else "compare" if "variants" in data else "scenario"


def _files() -> list[tuple[str, Path]]:
    out = [(p.name, p) for p in sorted((ROOT / "scenarios").rglob("*.yaml")) if p.name not in NOT_IN_SCHEMA]
    out = [(_kind(read_document(p).data), p) for _, p in out]
    out += [("workload", p) for p in sorted((ROOT / "workloads").glob("*.yaml"))]
    out += [("model", p) for p in sorted((ROOT / "workloads" / "models").glob("*.yaml"))]
    out += [("trace", p) for p in sorted((ROOT / "workloads" / "traces").glob("*.yaml"))]
    out += [("gpu", p) for p in sorted((ROOT / "topologies" / "gpus").glob("*.yaml"))]
    return out


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft202012Validator]:
    return {
        k: jsonschema.Draft202012Validator(schema_with_human_keys(m)) for k, m in _schema_models().items()
    }


def test_every_shipped_input_file_validates_against_its_schema(validators) -> None:  # noqa: ANN001
    bad = {}
    for kind, path in _files():
        errors = list(validators[kind].iter_errors(read_document(path).data))
        if errors:
            bad[str(path.relative_to(ROOT))] = errors[0].message[:200]
    assert bad == {}
    assert len(_files()) > 80  # the catalog is walked, not an empty glob


def test_a_spelling_the_loader_refuses_fails_the_schema(validators) -> None:  # noqa: ANN001
    failure = {"kind": "exponential", "target": "gpu", "mtbf_h": 2000}
    good = {
        "name": "x",
        "topology": {"file": "t.yaml"},
        "workload": {"file": "w.yaml"},
        "failures": [failure],
    }
    assert not list(validators["scenario"].iter_errors(good))
    bad = {**good, "failures": [{**failure, "mtbf_hours": 2000}]}
    assert list(validators["scenario"].iter_errors(bad))
    # a required SI field is required in one of its spellings
    assert list(
        validators["scenario"].iter_errors({**good, "failures": [{"kind": "exponential", "target": "gpu"}]})
    )


def test_the_spellings_a_model_accepts_are_those_its_validators_rewrite() -> None:
    got = accepted_spellings(ExponentialFailureSpec)
    assert got["mtbf_h"] == got["mtbf_days"] == "mtbf_s"
    assert got["repair_h"] == got["repair_s"] == "repair"  # the shorthand for a fixed repair time
    assert "mtbf_hours" not in got and "target_h" not in got
    # a validator that rewrites interval_h into interval_s also fills in `interval` (the
    # policy kind of interval): the spelling is interval_s's, whatever the fields' order
    from simulator.faults.policy import CheckpointRestartSpec

    got = accepted_spellings(CheckpointRestartSpec)
    assert got["interval_h"] == "interval_s" and "interval" not in got.values()
