"""Execute a prepared scenario: simulate its steps and collect frames and summary.

`execute(prepared)` runs the step simulation (and the run level when the scenario has
failures or a policy); `RunResult.write(folder)` saves frames, summary, the resolved
scenario, the topology and the dashboard.

The dashboard (plotly), the run level, and the several-jobs and cluster-level runs are
imported only by a run that uses them, so that a plain step run starts faster.
"""

from __future__ import annotations

import copy
import ctypes
import functools
import gc
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import simulator
from simulator.io import write_atomic
from simulator.metrics import frames as fr
from simulator.metrics.run_cost import cost_columns, run_power_frames
from simulator.metrics.store import node_link_data, write_frame, write_json
from simulator.metrics.summary import summarize
from simulator.network.prices import PriceSpec
from simulator.scenario.prepare import PreparedRun, run_identity, step_simulator

#: Op and flow records past which the engine is collected before the frames are built:
#: a full pass of the collector costs 0.1-0.3 CPU s in a 16,384-GPU process, worth it
#: only when the engine's state is large (it grows with the records).
COLLECT_AFTER_RECORDS = 1 << 20


def return_free_memory() -> None:
    """Hand the C heap's free pages back to the system: glibc's `malloc_trim`, on Linux
    only (nothing is done elsewhere, or where the C library has none). The program and the
    engine, once dropped, leave free pages scattered through the heap that the frames built
    next cannot reuse: large arrays are mapped afresh, so without this the process holds
    both. No result depends on it."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim(size_t pad)`, or None off Linux or without it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


@dataclass
class RunResult:
    """Frames and summary of one run."""

    name: str
    frames: dict[str, pd.DataFrame]
    summary: dict[str, Any]
    resolved: dict[str, Any]
    graph: Any = None

    def write(self, folder: str | Path, dashboard: bool = True, plotly_src: str | None = None) -> Path:
        """Save frames, summary, resolved scenario, topology and (if `dashboard`) the
        dashboard, which loads plotly from `plotly_src` (default: its file beside it)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        for name, df in self.frames.items():
            write_frame(out, name, df)
        write_json(out / "summary.json", self.summary, finite=True)
        write_atomic(out / "scenario.resolved.yaml", yaml.safe_dump(self.resolved, sort_keys=False))
        graph = None
        if self.graph is not None:
            write_json(out / "topology.json", node_link_data(self.graph, drop_graph_keys=("gpu",)))
        if dashboard:
            from simulator.viz.dashboard import PLOTLY_FILE, drawn_graph, run_dashboard_html, write_page

            if self.graph is not None:
                graph = drawn_graph(self.graph, out)  # what a rebuild would read
            src = PLOTLY_FILE if plotly_src is None else plotly_src
            page = run_dashboard_html(self.frames, self.summary, graph, src)
            write_page(out / "dashboard.html", page)
        return out


def resolved_scenario(prep: PreparedRun, seed: int) -> dict[str, Any]:
    """The scenario mapping that reproduces the run: the file's keys with the steps and seed
    actually run (command-line overrides included) and file references made absolute;
    `run.output` is left out (the file sits in the results folder)."""
    sc = prep.scenario
    data = copy.deepcopy(sc.doc.data) if isinstance(sc.doc.data, dict) else {}
    data["topology"] = {"file": str(sc.topology_path.resolve())}
    if sc.spec.jobs:
        data["jobs"] = [
            {**job, "workload": {"file": str(p.resolve())}}
            for job, p in zip(data.get("jobs") or [], sc.job_paths, strict=False)
        ]
    elif sc.spec.cluster is not None:
        if sc.spec.cluster.trace is not None:
            data["cluster"] = {**data["cluster"], "trace": {"file": str(sc.workload_path.resolve())}}
    elif sc.spec.workload is not None:
        workload = dict(data.get("workload") or {})
        workload["path" if sc.spec.workload.format else "file"] = str(sc.workload_path.resolve())
        data["workload"] = workload
    if sc.calibration_paths or "calibration" in data:
        data["calibration"] = [{"file": str(p.resolve())} for p in sc.calibration_paths]
    data["seed"] = seed
    run = {k: v for k, v in (data.get("run") or {}).items() if k != "output"}
    run["steps"] = sc.spec.run.steps
    data["run"] = run
    return data


def execute(
    prep: PreparedRun,
    on_step: Callable[[int], None] | None = None,
    seed: int | None = None,
    overrides: dict[str, Any] | None = None,
    release_ops: bool = False,
    prices: PriceSpec | None = None,
) -> RunResult:
    """Simulate the prepared run and collect its frames and summary.

    Args:
        prep: the prepared run (its spec already carries any override of run.steps).
        on_step: called with each finished step.
        seed: the seed (default: the scenario's).
        overrides: the command-line overrides given (dotted key -> value), recorded in
            the resolved scenario.
        release_ops: the caller will not simulate `prep` again: once the step is simulated,
            `prep.program` keeps everything but its ops (which nothing after the simulation
            reads), so that their memory is free before the frames are built (`_release_ops`).
            Ignored when the scenario has a run level, which simulates the step again, and
            by runs of several jobs or of a cluster, which release nothing.
        prices: the price table of the cost columns (default: topologies/prices.yaml); a
            comparison gives its own.
    """
    sc = prep.scenario.spec
    seed = sc.seed if seed is None else seed
    if prep.jobs or sc.cluster is not None:
        from simulator.scenario.cluster_level import run_cluster
        from simulator.scenario.multi import run_jobs

        frames, summary = run_jobs(prep, seed, on_step) if prep.jobs else run_cluster(prep, seed)
        return RunResult(sc.name, frames, summary, _resolved(prep, seed, overrides), prep.topology.graph)
    out = _simulate(prep, seed, on_step)
    n_simulated = len(prep.program.simulated_ranks)
    if sum(map(len, out.tables.values())) > COLLECT_AFTER_RECORDS:
        # the engine (SimPy processes, the fabric) is garbage in cycles: freed here, before
        # the frames are built, not at the collector's next full pass (0.8 CPU s at 1T, which
        # that pass costs as well; left to it, the 1T peak went from 1.8 to 3.2 GiB)
        gc.collect()
    if release_ops and not sc.run_level:
        _release_ops(prep, out.tables)
    program = prep.program
    # each table's columns handed over: a record column is released as soon as it is framed
    # (in a smaller run, at the collector's next pass over the dropped engine);
    # the steps before the flows, whose frame is then not yet alive beside the breakdown's arrays
    ops = fr.ops_frame(out.tables.pop("ops").columns(), program.rank_gpus, program.role)
    steps = fr.steps_frame(ops, out.step_rows, program.weight)
    frames = {
        "ops": ops,
        "flows": fr.flows_frame(out.tables.pop("flows").columns()),
        "links": fr.links_frame(out.intervals, prep.cluster.links, prep.cluster.capacity_factors()),
        "steps": steps,
    }
    meta = _meta(prep, out, seed, n_simulated)
    summary = summarize(frames, meta)
    cap = sc.compute.power_cap_fraction
    summary.update(
        cost_columns(frames, summary, prep.topology.graph, prep.topology.gpu, prices, power_cap_fraction=cap)
    )
    if sc.run_level:
        from simulator.scenario.run_level import run_level

        frames.update(run_level(prep, summary, seed))
        frames.update(run_power_frames(frames, summary, prices))
    return RunResult(sc.name, frames, summary, _resolved(prep, seed, overrides), prep.topology.graph)


def _meta(prep: PreparedRun, out: _EngineOutput, seed: int, n_simulated: int) -> dict[str, Any]:
    """The summary's figures that are not read from the frames: the run's identity, the
    job's size, the program's and engine's figures, the calibration applied."""
    program = prep.program
    n_job = len(program.rank_gpus)
    meta: dict[str, Any] = {
        **run_identity(prep, seed),
        "gpus_in_job": n_job,
        "simulated_ranks": n_simulated,
        "fidelity": prep.scenario.spec.network.fidelity,
        **out.meta,
    }
    for k, v in program.meta.items():
        meta[k] = v
    if "model_flops_per_step" in program.meta:
        meta["peak_flops_per_s"] = prep.topology.gpu.peak(str(program.meta.get("dtype", "bf16")))
    applied = dict(out.tuned)
    if prep.tuning is not None:  # a calibration profile was given
        from simulator.calibration.apply import ProfileTuning

        if isinstance(prep.tuning, ProfileTuning):
            # kinds priced by a profile's fitted physical parameters rather than a curve entry
            applied = {**prep.tuning.by_params, **applied}
            if prep.tuning.warnings:
                # clamps applied and collectives no profile speaks for (simulator.calibration.apply)
                meta["calibration_warnings"] = prep.tuning.warnings
    if applied:
        meta["calibration_applied"] = dict(sorted(applied.items()))
    return meta


@dataclass
class _EngineOutput:
    """What `execute` reads of a step simulation once it has run (not the engine itself)."""

    tables: dict[str, Any]  # "ops": the op records, "flows": the flow records
    step_rows: list[Any]
    intervals: tuple[Any, ...]  # the links' intervals of constant rate
    meta: dict[str, Any]  # the summary's keys from the engine
    tuned: dict[str, Any]  # the calibrated collectives, if any


def _simulate(prep: PreparedRun, seed: int, on_step: Callable[[int], None] | None) -> _EngineOutput:
    """Run the step simulation and keep its records; the engine is dropped on return."""
    wall0 = time.perf_counter()
    sim = step_simulator(prep, seed)
    sim.run(prep.scenario.spec.run.steps, on_step)
    wall = time.perf_counter() - wall0
    return _EngineOutput(
        tables={"ops": sim.op_rows, "flows": sim.fabric.flow_records},
        step_rows=list(sim.step_rows),
        intervals=sim.fabric.link_intervals(),
        meta={
            "wall_time_s": wall,
            "fabric_recomputations": sim.fabric.recomputations,
            "flows": len(sim.fabric.flow_records),
            "bytes_forwarded_via_scale_up": sim.forwarded_bytes,
        },
        tuned=dict(sim.tuned),
    )


def _release_ops(prep: PreparedRun, tables: dict[str, Any]) -> None:
    """Drop the program's ops (nothing after the simulation reads them) and give their
    memory back to the system before the frames are built.

    The records' op ids are the program's own string objects, scattered through the memory
    the ops were built in, so they are moved out of them first (`frames.text_array`: the
    text column the frame would make of them anyway); each step hands the heap's free pages
    back (`return_free_memory`), so that the next one does not map fresh memory beside
    them. 1T step (3,072 GPUs, `benchmarks/run_all.py 1t`): peak 2.31 -> 1.78 GiB.
    """
    return_free_memory()
    for table in tables.values():
        table.convert("op_id", fr.text_array)
        return_free_memory()
    prep.program = replace(prep.program, ops=[])
    return_free_memory()


def _resolved(prep: PreparedRun, seed: int, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """What `scenario.resolved.yaml` holds: the scenario that reproduces the run and its files."""
    return {
        "scenario": resolved_scenario(prep, seed),
        "overrides": dict(overrides or {}),
        "scenario_file": str(prep.scenario.path),
        "topology_file": str(prep.scenario.topology_path),
        "workload_file": str(prep.scenario.workload_path),
        "calibration_files": [str(p) for p in prep.scenario.calibration_paths],
        "seed": seed,
        "clustersim_version": simulator.__version__,
    }
