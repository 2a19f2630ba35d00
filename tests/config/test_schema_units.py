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


def _kind(data: dict) -> str:
    return "study" if "axes" in data else "compare" if "variants" in data else "scenario"


def _files() -> list[tuple[str, Path]]:
    out = [(_kind(read_document(p).data), p) for p in sorted((ROOT / "scenarios").rglob("*.yaml"))]
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


def test_shorthands_their_fields_declare_are_in_the_schema(validators) -> None:  # noqa: ANN001
    """A job's placement by policy name or GPU list, and `zero_stage: fsdp`, validate; a
    policy name the loader refuses, or another word for the stage, fails the schema."""
    job = {"name": "a", "workload": {"file": "w.yaml"}, "gpus": 2}
    scenario = {"name": "x", "topology": {"file": "t.yaml"}, "jobs": [job]}
    for placement in ("spread", ["n0.gpu0", "n0.gpu1"], {"policy": "random", "seed": 4}):
        sc = {**scenario, "jobs": [{**job, "placement": placement}]}
        assert not list(validators["scenario"].iter_errors(sc)), placement
    for placement in ("scattered", "explicit", []):
        sc = {**scenario, "jobs": [{**job, "placement": placement}]}
        assert list(validators["scenario"].iter_errors(sc)), placement
    workload = read_document(ROOT / "workloads" / "llama3-405b-tp8-pp16-dp128.yaml").data
    for stage, ok in (("fsdp", True), ("FSDP", True), (3, True), ("zero3", False), (4, False)):
        layout = {**workload["layout"], "zero_stage": stage}
        errors = list(validators["workload"].iter_errors({**workload, "layout": layout}))
        assert not errors if ok else errors, stage


def test_a_human_unit_key_has_its_bounds_in_its_unit(validators) -> None:  # noqa: ANN001
    """`zero3_gather_bucket_mb: 100` is accepted by the loader (at least 1 MiB) but failed the
    schema: the key carried the SI field's `minimum: 1048576` (and its SI default). Bounds are
    now in the key's unit, and the key has no default of its own."""
    wl = {"name": "w", "model": {"file": "m.yaml"}, "layout": {"global_batch_size": 8}}
    ok = {**wl, "layout": {**wl["layout"], "zero3_gather_bucket_mb": 100}}
    assert not list(validators["workload"].iter_errors(ok))
    too_small = {**wl, "layout": {**wl["layout"], "zero3_gather_bucket_mb": 0.5}}
    assert list(validators["workload"].iter_errors(too_small))
    layout = schema_with_human_keys(_schema_models()["workload"])["$defs"]["LayoutSpec"]["properties"]
    assert layout["zero3_gather_bucket_mib"]["minimum"] == 1.0
    assert "default" not in layout["zero3_gather_bucket_mib"]
    assert layout["zero3_gather_bucket_bytes"]["minimum"] == 1048576  # the SI field as it was
