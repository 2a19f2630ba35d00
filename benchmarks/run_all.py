"""Print every figure of the performance table next to a bare SimPy loop (`make bench`).

One command for the whole table of docs/performance.md. Each row runs in a subprocess of
its own and is measured from here: wall seconds, CPU seconds (user + system of the process
and the children it waited for, so that other load on a shared machine does not count) and
peak RSS. A row slower than `--timeout` is killed and printed as `> N s`. The bare SimPy
loop (one process yielding timeouts) is measured in the same run, as the yardstick of
what an event costs on this machine.

Rows (each with its target):
    1t        1T-parameter GPT step, 3,072 A100, TP8 x PP64, batch 3,072 (CLI, no dashboard)
    530b      GPT 530B step, 2,240 A100, TP8 x PP35 x v3 interleaved, batch 2,240 (CLI, no dashboard)
    405b      Llama 3 405B step on 16,384 H100 (CLI, dashboard on)
    ar16k     one 1 GiB all-reduce on 16,384 H100 (CLI, dashboard on)
    k128      128 concurrent ring all-reduces sharing 1,024 GPUs' links: SimPy run phase only
    help      `clustersim --help`
    smallest  smallest `clustersim run` (scenarios/quickstart.yaml, 1 step, no dashboard)
    study54   54-day 16k-GPU failure study: bench_runlevel.py (per seed, and 100 seeds)
    policies  80-run Llama 3 405B policy study (scenarios/study-llama3-405b-policies.yaml)

The 1T and 530B workloads follow Narayanan et al. SC'21, Table 1 and Korthikanti et al.
2022, Table 3 (models in workloads/models/); they are written to a temporary folder and
run on topologies/a100-rail-clos-1536n.yaml (a job uses the first tp.pp.dp GPUs).

    .venv/bin/python benchmarks/run_all.py [ROW ...] [--timeout S]

Also the older per-area scripts (run one alone for details): bench_collective.py,
bench_model_step.py, bench_runlevel.py, bench_dashboard.py, bench_design_build.py,
calibration_report.py, catalog_fingerprint.py (outputs unchanged by a speed-up).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import simpy

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLI = [sys.executable, "-m", "simulator.commands.app"]

#: name -> (label, bar); the command is made by `command()`
ROWS = {
    "1t": ("1T GPT step, 3,072 A100, TP8 x PP64, batch 3,072", "< 60 s, < 2 GiB"),
    "530b": ("530B step, 2,240 A100, TP8 x PP35 x v3", "< 20 s"),
    "405b": ("Llama-3-405B step, 16,384 GPUs (CLI, dashboard on)", "< 5 s"),
    "ar16k": ("one all-reduce on 16,384 GPUs (CLI, dashboard on)", "< 4 s"),
    "k128": ("128 concurrent all-reduces on 1,024 GPUs' links, run phase", "< 0.5 s"),
    "help": ("clustersim --help", "< 0.3 s"),
    "smallest": ("smallest clustersim run (quickstart, 1 step, no dashboard)", "< 0.8 s"),
    "study54": ("54-day 16k-GPU failure study, 100 seeds (bench_runlevel.py)", "< 0.2 s/seed; < 30 s"),
    "policies": ("80-run 405B policy study (clustersim sweep)", "< 2 min"),
}

_WORKLOAD = """name: {name}
model: {{file: {models}/{model}.yaml}}
layout:
  tp: 8
  sequence_parallel: true
  pp: {pp}
  pp_schedule: {schedule}
  virtual_stages: {v}
  dp: {dp}
  zero_stage: 1
  micro_batch_size: 1
  global_batch_size: {batch}
  recompute: selective
fidelity: {{representatives: true, mirrors: auto, intra_node: analytic}}
"""
_SCENARIO = """name: {name}
seed: 1
topology: {{file: {topology}}}
workload: {{file: {workload}}}
network: {{fidelity: flow, record_links: {record_links}}}
run: {{steps: 1}}
"""
_ALLREDUCE = """format: clustersim-step/1
name: allreduce-16384
ranks: 16384
groups:
  world: all
ops:
  - {id: ar, kind: collective, collective: all_reduce, group: world, size_bytes: 1073741824, tag: dp}
"""


def write_inputs(tmp: Path) -> dict[str, Path]:
    """Scenario files of the rows that have none in the catalog."""
    models = REPO / "workloads" / "models"
    a100 = REPO / "topologies" / "a100-rail-clos-1536n.yaml"
    out = {}
    for name, model, pp, schedule, v, dp, batch in (
        ("1t", "gpt-1t", 64, "1f1b", 1, 6, 3072),
        ("530b", "gpt-530b", 35, "interleaved_1f1b", 3, 8, 2240),
    ):
        wl = tmp / f"{name}-workload.yaml"
        wl.write_text(
            _WORKLOAD.format(
                name=name, models=models, model=model, pp=pp, schedule=schedule, v=v, dp=dp, batch=batch
            )
        )
        sc = tmp / f"{name}.yaml"
        sc.write_text(_SCENARIO.format(name=name, topology=a100, workload=wl, record_links="false"))
        out[name] = sc
    trace = tmp / "allreduce-16384-trace.yaml"
    trace.write_text(_ALLREDUCE)
    sc = tmp / "ar16k.yaml"
    topo = REPO / "topologies" / "h100-rail-clos-2048n.yaml"
    sc.write_text(_SCENARIO.format(name="ar16k", topology=topo, workload=trace, record_links="true"))
    out["ar16k"] = sc
    return out


def command(row: str, inputs: dict[str, Path], tmp: Path) -> list[str]:
    out = ["-o", str(tmp / f"out-{row}")]
    if row in ("1t", "530b"):
        return [*CLI, "run", str(inputs[row]), *out, "--no-dashboard"]
    if row == "405b":
        return [*CLI, "run", str(REPO / "scenarios" / "llama3-405b-16k-step.yaml"), *out]
    if row == "ar16k":
        return [*CLI, "run", str(inputs[row]), *out]
    if row == "k128":
        return [sys.executable, str(HERE / "run_all.py"), "--concurrent", "128"]
    if row == "help":
        return [*CLI, "--help"]
    if row == "smallest":
        quickstart = str(REPO / "scenarios" / "quickstart.yaml")
        return [*CLI, "run", quickstart, *out, "--no-dashboard", "--steps", "1"]
    if row == "study54":
        return [sys.executable, str(HERE / "bench_runlevel.py"), "--seeds", "100"]
    if row == "policies":
        study = REPO / "scenarios" / "study-llama3-405b-policies.yaml"
        return [*CLI, "sweep", str(study), *out, "--seeds", "16"]
    raise ValueError(row)


def run_row(args: list[str], timeout_s: float) -> tuple[float, float, float, int | None, str]:
    """(wall s, CPU s, peak RSS GiB, exit code or None if killed at the timeout, output).

    CPU and peak RSS are the kernel's accounting of this one child (os.wait4): user + system
    of the process and of the children it waited for; peak is the largest of those.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryFile("w+") as log:
        t0 = time.perf_counter()
        # in the repository: `python -m` puts the working folder first on the import path
        proc = subprocess.Popen(args, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout_s and not killed:
                proc.kill()
                killed = True
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        text = log.read().strip()
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 2**20, None if killed else proc.returncode, text


def bare_simpy_events_per_s(n: int = 200_000) -> float:
    """Events per second of SimPy itself: one process yielding n timeouts."""
    env = simpy.Environment()

    def loop():  # type: ignore[no-untyped-def]
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(loop())
    c0 = time.process_time()
    env.run()
    return n / (time.process_time() - c0)


def concurrent_allreduces(k: int) -> None:
    """Print the SimPy run phase (CPU s) of k ring all-reduces of 64 MiB + i MiB over all 1,024 GPUs
    of topologies/h100-rail-clos-128n.yaml, started together (every link shared k ways;
    different sizes, so each ending changes every other one's share)."""
    from simulator.engine.context import SimContext
    from simulator.engine.cost import ComputeCost
    from simulator.engine.step import StepSettings, StepSimulator
    from simulator.network.cluster import Cluster
    from simulator.network.topology import load_topology
    from simulator.workload.program import Op, StepProgram

    topo = load_topology(REPO / "topologies" / "h100-rail-clos-128n.yaml")
    cluster = Cluster(topo.graph, topo.gpu)
    n = len(cluster.gpus)
    ops = [
        Op(
            f"ar{i}",
            "collective",
            tuple(range(n)),
            collective="all_reduce",
            group=tuple(range(n)),
            size_bytes=2**26 + i * 2**20,
            algorithm="ring/simple",
            stream=f"s{i}",
        )  # fmt: skip
        for i in range(k)
    ]
    sim = StepSimulator(
        SimContext(0), cluster, StepProgram("k", cluster.gpus, ops), ComputeCost(topo.gpu),
        StepSettings(fidelity="flow", record_links=False),
    )  # fmt: skip
    for op in ops:
        sim.prepare(op)
    c0 = time.process_time()
    sim.run(1)
    run_s = time.process_time() - c0
    print(
        f"k={k}: run phase {run_s:.3f} CPU s, simulated {sim.step_rows[0].finished_at_s * 1e3:.3f} ms, "
        f"{sim.fabric.recomputations} recomputations, {len(sim.fabric.flow_records)} flows"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", choices=[*ROWS, []], default=[])
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per row")
    ap.add_argument("--concurrent", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.concurrent:
        concurrent_allreduces(a.concurrent)
        return 0
    print(f"bare SimPy loop: {bare_simpy_events_per_s():,.0f} events per CPU s", flush=True)
    print(f"{'row':9s} {'wall s':>8s} {'CPU s':>8s} {'peak GiB':>8s}  bar; what the row printed last")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        inputs = write_inputs(tmp)
        for row in a.rows or list(ROWS):
            label, bar = ROWS[row]
            wall, cpu, peak, code, text = run_row(command(row, inputs, tmp), a.timeout)
            if code is None:
                shown = f"{'> ' + format(a.timeout, '.0f'):>8s} {'':>8s} {'':>8s}"
            else:
                shown = f"{wall:8.2f} {cpu:8.2f} {peak:8.2f}"
            failed += code not in (0, None)
            last = text.splitlines()[-1][:140] if text else ""
            print(f"{row:9s} {shown}  {label} (bar {bar}); exit {code}; {last}", flush=True)
            if row in ("k128", "study54") and code == 0:
                for line in text.splitlines():
                    print(f"{'':9s} | {line[:150]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
