"""The shipped collective scenarios reproduce their samples' curves (busbw vs size).

Each `scenarios/collective-<family>.yaml` runs a collective sweep on a topology of its sample
family with that family's profile applied. The profile was fitted on the sample itself, so
this checks reproduction through the simulator (flows, fabric, calibration), not prediction
(benchmarks/collective_validation.py does leave-one-out). Bar: median |time error| over
sizes >= 1 MiB at most 5 % (the profiles fit their tables to 1-2 %, see the fit tables of
`make profiles`), unless the run says why not: a calibration clamp listed in summary.json.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import pandas as pd
import pytest

from simulator.calibration.curve import busbw_curve
from simulator.calibration.parser import read_benchmark
from simulator.scenario.execute import RunResult, execute
from simulator.scenario.prepare import prepare
from tests.calibration.logs import SAMPLES
from tests.conftest import ROOT

FAMILY_SCENARIOS = sorted((ROOT / "scenarios").glob("collective-*-[12]n.yaml"))


@functools.cache
def _run(path: Path) -> RunResult:
    """One run of a family scenario, shared by the tests below (each takes ~0.4 CPU s)."""
    return execute(prepare(path))


def test_every_sample_family_has_a_scenario() -> None:
    names = {p.stem for p in FAMILY_SCENARIOS}
    for family in ("h100-p5-efa", "h100-a3high-tcpx", "h100-a3mega-tcpxo", "a100-p4de-efa", "mi300x",
                   "mi325x-thor2", "mi355x-pollara"):  # fmt: skip
        assert any(n.startswith(f"collective-{family}") for n in names), family


@pytest.mark.parametrize("path", FAMILY_SCENARIOS, ids=lambda p: p.stem)
def test_family_scenario_reproduces_its_sample(path: Path) -> None:
    sample = re.search(r"samples/(\S+\.txt)", path.read_text())
    assert sample is not None, "the scenario names the sample it reproduces"
    n_nodes = int(path.stem[-2])
    (table,) = [t for t in read_benchmark(SAMPLES / sample.group(1)) if t.n_nodes == n_nodes]
    result = _run(path)
    curve = busbw_curve(result.frames["ops"])
    sim = curve[curve["collective"] == table.collective].set_index("size_bytes")["time_s"]
    measured = table.sizes("out_of_place").set_index("size_bytes")["time_s"]
    both = measured.to_frame("measured").join(sim.rename("simulated"), how="inner")
    big = both[both.index >= 2**20]
    assert len(big) >= 3, "the sweep covers the sample's large sizes"
    median = float((big["simulated"] / big["measured"] - 1).abs().median())
    clamps = [w for w in result.summary.get("calibration_warnings", []) if "capped" in w or "raised" in w]
    assert median <= 0.05 or clamps, f"median |error| {median:.1%} with no clamp to explain it"


def test_busbw_curve_reads_ops_as_nccl_tests_does() -> None:
    # one 16-rank all-reduce of 1 GB lasting 10 ms on its slowest rank:
    # busbw = S / t x 2(n-1)/n (nccl-tests doc/PERFORMANCE.md) = 1e9 / 0.01 x 30/16 = 187.5 GB/s
    ops = pd.DataFrame(
        {"kind": ["collective"] * 2 + ["compute"], "collective": ["all_reduce"] * 2 + [""],
         "n_ranks": [16, 16, 1], "size_bytes": [1e9, 1e9, 0.0], "op_id": ["a", "a", "c"],
         "started_at_s": [0.0, 0.001, 0.0], "finished_at_s": [0.009, 0.010, 1.0]}
    )  # fmt: skip
    (row,) = busbw_curve(ops).itertuples()
    assert row.time_s == pytest.approx(0.010) and row.busbw_bytes_per_s == pytest.approx(187.5e9)


def test_committed_sweep_traces_are_what_the_script_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "collective_traces", ROOT / "benchmarks/collective_traces.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for name, (ranks, kinds, sizes, where) in mod.SWEEPS.items():
        committed = (ROOT / "workloads/traces" / f"{name}.yaml").read_text()
        assert committed == mod.trace_text(name, ranks, kinds, sizes, where), name


def _page_script():  # noqa: ANN202
    script = ROOT / "benchmarks" / "collective_scenarios.py"
    spec = importlib.util.spec_from_file_location("collective_scenarios", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_generated_scenario_page_is_what_the_scenarios_give_now() -> None:
    """`docs/collective-scenarios.md` says "generated, do not edit"; it had gone ~400 commits
    without regeneration and showed busbw of models since changed (a 2-node MI300X at 64
    GB/s that simulates 325 GB/s now). Regenerate with `python benchmarks/collective_scenarios.py`.
    The family sections here (from the runs above); the whole page, with the ZAYA1
    comparison's runs, in the slow suite."""
    page = (ROOT / "docs" / "collective-scenarios.md").read_text()
    families = _page_script().families_text(_run)
    assert page.startswith(families + "\n## ZAYA1"), "regenerate docs/collective-scenarios.md"


@pytest.mark.slow
def test_the_whole_generated_scenario_page_is_what_the_scenarios_give_now() -> None:
    assert (ROOT / "docs" / "collective-scenarios.md").read_text() == _page_script().doc_text(_run)
