"""Catalog tests: every topology, workload and scenario file validates, and scenarios run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.config.loader import load
from simulator.network.hardware import GPUSpec
from simulator.network.topology import load_topology
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare

ROOT = Path(__file__).resolve().parents[1]


def _yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


TOPOLOGIES = sorted(
    p for p in (ROOT / "topologies").glob("*.yaml") if "name" in _yaml(p) and "gpu" in _yaml(p)
)
GPUS = sorted((ROOT / "topologies/gpus").glob("*.yaml"))
SCENARIOS = sorted(
    p for p in (ROOT / "scenarios").glob("*.yaml") if {"topology", "workload"} <= set(_yaml(p))
)


@pytest.mark.parametrize("path", GPUS, ids=lambda p: p.name)
def test_gpu_specs_validate(path):
    spec = load(GPUSpec, path)
    assert spec.peak("bf16") > 0 and spec.hbm_capacity_bytes > 0


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.name)
def test_topologies_build(path):
    topo = load_topology(path)
    assert topo.graph.number_of_nodes() > 0


def _topology_gpus(scenario: Path) -> int:
    """GPUs of a scenario's generated topology, read from its YAML without building it."""
    topo = _yaml((scenario.parent / _yaml(scenario)["topology"]["file"]).resolve())
    return int(topo.get("nodes", 1)) * int(topo.get("gpus_per_node", 8))


# scenarios above this many GPUs run in the slow suite; deciding it from the files alone
# keeps the default suite from preparing a 16k-GPU step only to skip it
LARGE_GPUS = 4096
SMALL_SCENARIOS = [p for p in SCENARIOS if _topology_gpus(p) <= LARGE_GPUS]
LARGE_SCENARIOS = [p for p in SCENARIOS if _topology_gpus(p) > LARGE_GPUS]


def test_there_is_a_default_scenario():
    assert (ROOT / "scenarios/quickstart.yaml") in SCENARIOS


@pytest.mark.parametrize("path", SMALL_SCENARIOS, ids=lambda p: p.name)
def test_scenarios_validate_and_run_one_step(path):
    prep = prepare(path)
    prep.scenario.spec = prep.scenario.spec.model_copy(
        update={"run": prep.scenario.spec.run.model_copy(update={"steps": 1})}
    )
    result = execute(prep)
    s = result.summary
    assert s["step_time_s"] > 0
    assert s["compute_s"] + s["exposed_comm_s"] + s["idle_s"] == pytest.approx(s["step_time_s"], rel=1e-9)


def test_large_scenarios_are_the_16k_gpu_ones():
    assert {p.name for p in LARGE_SCENARIOS} == {"llama3-405b-16k-step.yaml", "llama3-405b-16k-54days.yaml"}


@pytest.mark.slow
@pytest.mark.parametrize("path", LARGE_SCENARIOS, ids=lambda p: p.name)
def test_large_scenarios_run_one_step(path):
    prep = prepare(path)
    prep.scenario.spec = prep.scenario.spec.model_copy(
        update={"run": prep.scenario.spec.run.model_copy(update={"steps": 1})}
    )
    assert execute(prep).summary["step_time_s"] > 0


def test_same_scenario_and_seed_give_identical_frames():
    import pandas as pd

    a = execute(prepare(ROOT / "scenarios/quickstart.yaml"))
    b = execute(prepare(ROOT / "scenarios/quickstart.yaml"))
    for name in ("ops", "flows", "links", "steps"):
        pd.testing.assert_frame_equal(a.frames[name], b.frames[name])


COMPARES = sorted(p for p in (ROOT / "scenarios").glob("*.yaml") if "variants" in _yaml(p))
STUDIES = sorted(p for p in (ROOT / "scenarios").glob("*.yaml") if "job" in _yaml(p) and "step" in _yaml(p))


def test_every_scenarios_file_is_a_scenario_compare_or_study():
    every = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert sorted([*SCENARIOS, *COMPARES, *STUDIES]) == every


@pytest.mark.parametrize("path", COMPARES, ids=lambda p: p.name)
def test_compare_files_validate(path):
    from simulator.study.compare import load_comparison

    assert len(load_comparison(path).variants) >= 2


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_study_files_validate(path):
    from simulator.study.sweep import load_study

    assert load_study(path).variants
