"""Fault inputs that were accepted silently or crashed: each is one line
`file:line: field.path: message` and exit 2, from `validate` as from `run`, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.errors import SimulationError
from simulator.faults.degradation import sample_degradations
from simulator.faults.engine import simulate_run
from simulator.faults.failure import sample_failures
from simulator.faults.state import ConstantOracle

from .helpers import degradations, failures, job, policy

ROOT = Path(__file__).resolve().parents[2]
cli = CliRunner()

# the quickstart job: 16 GPUs on 2 hosts of 8; failures on line 5, the policy on line 7
SCENARIO = """\
name: faulty
topology: {{file: {root}/topologies/h100-rail-clos-2n.yaml}}
workload: {{file: {root}/workloads/traces/dp16-gpt1p3b-step.yaml}}
failures:
  - {failure}
policy:
  {policy}
reliability: {{duration_days: 3, seeds: 1, checkpoint_gbyte: 18.2, storage_gbyte_per_s: 10}}
"""
GPU = "{kind: exponential, target: gpu, mtbf_h: 1000}"
CR = "{kind: checkpoint_restart, interval: daly}"

CASES = [
    # (failure, policy, expected line)
    (
        "{kind: scheduled, target: gpu, at_h: -1}",
        CR,
        "5: failures.0.at_h.0: input should be greater than or equal to 0",
    ),
    (
        "{kind: scheduled, target: gpu, at_h: [1, -2]}",
        CR,
        "5: failures.0.at_h.1: input should be greater than or equal to 0",
    ),
    # a schedule that never fires: empty, or at the 3-day run's end or later
    (
        "{kind: scheduled, target: gpu, at_h: []}",
        CR,
        "5: failures.0.at_h: list should have at least 1 item after validation, not 0",
    ),
    (
        "{kind: scheduled, target: gpu, at_days: [1, 3]}",
        CR,
        "5: failures.0.at_days: a failure at 72 h is not before the run's end (72 h): it would never happen",
    ),
    (
        "{kind: scheduled, target: host, component: 9999, at_h: 1}",
        CR,
        "5: failures.0.component: no host 9999 in this job: its 2 host component(s) are 0 to 1",
    ),
    (
        "{kind: scheduled, target: host, node: host-16, at_h: 1}",
        CR,
        "5: failures.0.node: no host 16 in this job: its 2 host component(s) are 0 to 1",
    ),
    (
        "{kind: scheduled, target: host, node: spine, at_h: 1}",
        CR,
        "5: failures.0: node 'spine' names no component: a node is named by its class "
        "and index, e.g. host-12 (its trailing number is the index)",
    ),
    (
        GPU,
        "{kind: elastic, min_replicas: 17}",
        "7: policy.min_replicas: 17 is more than the job's 1 data-parallel replicas",
    ),
    (
        "{kind: weibull, target: gpu, mtbf_h: 1000, shape: 1.0e-9}",
        CR,
        "5: failures.0.shape: input should be greater than or equal to 0.2",
    ),
    (
        GPU,
        "{kind: checkpoint_restart, interval_min: .inf}",
        "7: policy.interval_min: input should be a finite number",
    ),
    (
        "{kind: exponential, target: gpu, mtbf_h: 0.000001}",
        CR,
        "5: failures.0: about 1,152,000,000 failures expected in a run of 259200 s, more than the "
        "1,000,000 a run may hold: an MTBF far too short for the run",
    ),
    (
        "{kind: exponential, target: gpu, mtbf_h: 1000, blast_gpus: 17}",
        CR,
        "5: failures.0.blast_gpus: 17 GPUs is more than the job's 16",
    ),
    # the repair_h shorthand: its value was said at the failure, with no key
    (
        "{kind: exponential, target: gpu, mtbf_h: 1000, repair_h: -4}",
        CR,
        "5: failures.0.repair_h: input should be greater than or equal to 0",
    ),
    (
        "{kind: exponential, target: gpu, mtbf_h: 1000, repair_h: 1.0e300}",
        CR,
        "5: failures.0.repair_h: must be at most 2.77778e+08 h (found 1e+300 h)",
    ),
    (
        "{kind: exponential, target: gpu, mtbf_h: 1000, repair_h: 4, repair: {kind: fixed, duration_h: 4}}",
        CR,
        "5: failures.0.repair: give either repair_h or repair, not both",
    ),
    # waiting for a repair that takes no time: refused at the failure source
    (
        GPU,
        "{kind: checkpoint_restart, wait_for_repair: true}",
        "5: failures.0: gpu failure 'gpu#0' has no repair_h (or repair), but the policy waits for "
        "repairs (wait_for_repair: true): its hardware would be back at once; give it a repair time",
    ),
    (
        "{kind: exponential, target: host, mtbf_h: 1000, cause: PSU}",
        "{kind: hot_spares, pool_hosts: 0, when_empty: wait_repair}",
        "5: failures.0: host failure 'PSU' has no repair_h (or repair), but the policy waits for "
        "repairs (when_empty: wait_repair): its hardware would be back at once; give it a repair time",
    ),
]


@pytest.mark.parametrize(("failure", "pol", "expected"), CASES)
def test_bad_fault_input_is_one_line(tmp_path: Path, failure: str, pol: str, expected: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(root=ROOT, failure=failure, policy=pol))
    r = cli.invoke(app, ["validate", str(path)])
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert lines == [f"error: {path}:{expected}"]


def test_run_rejects_before_simulating(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(root=ROOT, failure=GPU, policy="{kind: elastic, min_replicas: 17}"))
    out = tmp_path / "out"
    r = cli.invoke(app, ["run", str(path), "-o", str(out)])
    assert r.exit_code == 2 and "policy.min_replicas: 17 is more than" in r.output
    assert "Traceback" not in r.output and not out.exists()


STUDY = """\
name: s
job: {n_gpus: 64, gpus_per_node: 8, gpus_per_replica: 8}
step: {step_time_s: 10, checkpoint_write_s: 60}
failures:
  - {kind: scheduled, target: gpu, component: 9999, at_h: 1}
policy: {kind: checkpoint_restart, interval: daly}
duration_days: 2
axes:
  - param: policy
    values:
      - {kind: checkpoint_restart}
      - {kind: elastic,
         min_replicas: 9}
"""


def _validate(path: Path) -> tuple[int, list[str]]:
    """(exit code, non-blank output lines) of `clustersim validate PATH`."""
    r = cli.invoke(app, ["validate", str(path)])
    return r.exit_code, [line for line in r.output.splitlines() if line.strip()]


def test_scheduled_events_after_a_studys_end_are_refused(tmp_path: Path) -> None:
    """A study's scheduled failure after its end, and a scheduled degradation after a
    scenario's, ran without ever happening."""
    path = tmp_path / "study.yaml"
    path.write_text(STUDY.replace("component: 9999, at_h: 1", "component: 3, at_days: 2"))
    assert _validate(path) == (
        2,
        [
            f"error: {path}:5: failures.0.at_days: a failure at 48 h is not before the run's end (48 h): "
            "it would never happen"
        ],
    )
    path = tmp_path / "s.yaml"
    late = "degradations:\n  - {kind: straggler, component: 3, at_days: [4], duration_h: 2, slowdown: 1.5}\n"
    path.write_text(SCENARIO.format(root=ROOT, failure=GPU, policy=CR) + late)
    assert _validate(path) == (
        2,
        [
            f"error: {path}:10: degradations.0.at_days: an episode at 96 h is not before the run's end "
            "(72 h): it would never happen"
        ],
    )


def test_study_fault_inputs_are_checked_against_its_job(tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(STUDY)
    r = cli.invoke(app, ["validate", str(path)])
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert lines[0] == (
        f"error: {path}:5: failures.0.component: no gpu 9999 in this job: its 64 gpu component(s) are 0 to 63"
    )
    path.write_text(STUDY.replace("component: 9999", "component: 3"))
    r = cli.invoke(app, ["validate", str(path)])
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2 and lines == [
        f"error: {path}:13: axes.0.values.1: policy=elastic: policy.min_replicas: 9 is more than "
        "the job's 8 data-parallel replicas"
    ]


def test_samplers_stop_instead_of_hanging() -> None:
    """Beyond the validation (e.g. a Weibull law whose bursts the mean rate hides), the
    samplers refuse a run with more than a million failures or degradation changes."""
    with pytest.raises(SimulationError, match="more than 1,000,000 failures"):
        sample_failures(failures({"kind": "exponential", "target": "gpu", "mtbf_s": 1.0}), job(), 1e5, 0)
    flaps = degradations(
        {"kind": "flapping_link", "at_s": [0], "duration_h": 100, "down_s": 0.01, "up_s": 0.01}
    )
    with pytest.raises(SimulationError, match="more than 1,000,000 degradation changes"):
        sample_degradations(flaps, job(), 1e6, 0)


def test_interval_far_too_short_is_refused() -> None:
    with pytest.raises(SimulationError, match="lengthen the checkpoint interval"):
        simulate_run(
            job(),
            ConstantOracle(step_s=0.001),
            [],
            policy(kind="checkpoint_restart", interval_steps=1),
            1e5,
            0,
        )


@pytest.mark.parametrize(
    ("failure", "pol"),
    [
        (
            "{kind: exponential, target: software, mtbf_h: 1000}",
            "{kind: checkpoint_restart, wait_for_repair: true}",
        ),
        (
            "{kind: exponential, target: gpu, mtbf_h: 1000, repair_h: 4}",
            "{kind: checkpoint_restart, wait_for_repair: true}",
        ),
        (GPU, "{kind: hot_spares, pool_hosts: 1}"),
        (GPU, CR),
    ],
)
def test_no_repair_time_is_fine_when_nothing_waits_for_one(tmp_path: Path, failure: str, pol: str) -> None:
    """A software failure takes no hardware out, a repair time is given, or the policy
    queues for replacements: nothing to refuse."""
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(root=ROOT, failure=failure, policy=pol))
    r = cli.invoke(app, ["validate", str(path)])
    assert r.exit_code == 0, r.output


def test_storage_failures_of_a_job_without_storage_are_refused(tmp_path: Path) -> None:
    """`job.storage: 0` and a storage failure source: it would never fire (the run was simulated
    with no failure at all); refused at the source's target, and fine with one storage system."""
    study = (
        STUDY.split("axes:")[0]
        .replace("gpus_per_replica: 8}", "gpus_per_replica: 8, storage: 0}")
        .replace(
            "{kind: scheduled, target: gpu, component: 9999, at_h: 1}",
            "{kind: exponential, target: storage, mtbf_h: 100}",
        )
    )
    path = tmp_path / "study.yaml"
    path.write_text(study)
    r = cli.invoke(app, ["validate", str(path)])
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert r.exit_code == 2 and lines == [
        f"error: {path}:5: failures.0.target: the job has no storage (job.storage: 0): storage "
        "failures would never happen"
    ], r.output
    path.write_text(study.replace("storage: 0}", "storage: 1}"))
    assert cli.invoke(app, ["validate", str(path)]).exit_code == 0
