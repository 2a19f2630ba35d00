"""A real profiled step re-simulated on the host it was recorded on (target: within 10%).

Source of the check: the recorded GPU step time of ProfilerStep#5 in
workloads/traces/kineto/hta-a100-ddp2/rank0.json.gz (first kernel start to last kernel end,
213.533 ms), a trace of Holistic Trace Analysis's test data (sources.md beside it). The
target is 10%; the step is host-bound (its kernels are busy ~51 of 214 ms), so the
measured launch delays carry most of the step and the check is asserted much tighter: 0.5%
(about 1 ms) is what the re-simulated all-reduces may add or remove before the test fails
(they are exposed for ~0.26 ms today), so a change of the communication model shows.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from simulator.scenario.prepare import prepare, step_simulator
from simulator.workload.interchange.kineto import import_kineto
from simulator.workload.interchange.tracebuild import program_from_dict

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "workloads/traces/kineto/hta-a100-ddp2/rank0.json.gz"
RECORDED_S = 0.21353275  # ProfilerStep#5 GPU span of the trace, read by hand from its events


def _step_s(prep) -> float:
    sim = step_simulator(prep, seed=1, record_links=False)
    sim.run(1)
    return sim.step_rows[0].finished_at_s - sim.step_rows[0].started_at_s


def test_real_step_resimulated_on_its_host_matches_the_recorded_time():
    prep = prepare(ROOT / "scenarios/kineto-hta-a100-ddp2.yaml")
    assert prep.program.meta["recorded_step_s"] == pytest.approx(RECORDED_S, rel=1e-12)
    assert _step_s(prep) == pytest.approx(RECORDED_S, rel=0.005)


@pytest.mark.slow
def test_without_launch_times_the_host_bound_step_collapses_to_its_kernels(tmp_path):
    """The same step imported without `host_launches`: its kernels back to back (-82%)."""
    prep = prepare(ROOT / "scenarios/kineto-hta-a100-ddp2.yaml")
    bare = import_kineto([TRACE], step=5)
    prog = program_from_dict(bare.data, tmp_path / "t.yaml", prep.cluster.gpus)
    bare_s = _step_s(dataclasses.replace(prep, program=prog))
    assert bare_s < 0.5 * RECORDED_S


def test_host_delays_follow_the_launch_times_of_the_trace():
    """One measured delay per GPU event of the step, each event waiting for its delay; with no
    synchronize call in this trace they add up to the last launch's offset from the step's
    first kernel start (read here straight from the events)."""
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    step = next(e for e in events if e.get("name") == "ProfilerStep#5")
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "cuda_runtime"}
    gpu = [
        e
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and step["ts"] <= launch[e["args"]["correlation"]] <= step["ts"] + step["dur"]
    ]
    last_offset_s = (max(launch[e["args"]["correlation"]] for e in gpu) - min(e["ts"] for e in gpu)) / 1e6
    ops = import_kineto([TRACE], step=5, host_launches=True).data["ops"]
    delays = [op for op in ops if op.get("tag") == "host"]
    assert len(delays) == len(gpu) and all(op["stream"] == "host" for op in delays)
    assert sum(op["duration_s"] for op in delays) == pytest.approx(last_offset_s, rel=1e-9)
    host_ids = {op["id"] for op in delays}
    others = [op for op in ops if op.get("tag") != "host"]
    assert all(host_ids & {d.split("@")[0] for d in op.get("deps", [])} for op in others)


def test_host_waits_are_idle_gpu_time_and_both_energy_paths_agree():
    """The host's launch delays are not GPU work: the breakdown counts them as idle, and the
    energy from the breakdown equals the integral of the power timeline (metrics/energy.py)
    to 1e-9 although host waits overlap kernels."""
    from simulator.scenario.execute import execute

    s = execute(prepare(ROOT / "scenarios/kineto-hta-a100-ddp2.yaml")).summary
    assert s["timeline_energy_j"] == pytest.approx(s["energy_run_j"], rel=1e-9)
    # compute kernels are ~20 ms of the 213.5 ms step; the rest is mostly the GPU waiting
    assert s["compute_s"] < 0.1 * s["step_time_s"] < s["idle_s"]
    assert s["compute_s"] + s["exposed_comm_s"] + s["idle_s"] == pytest.approx(s["step_time_s"], rel=1e-9)
