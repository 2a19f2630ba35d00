"""Run a scenario end to end: load, build the cluster and step program, simulate, collect.

`prepare(path)` does all loading and validation (so `clustersim validate` and `run` share
it); `execute(prepared)` simulates; `RunResult.write(folder)` saves frames, summary,
resolved scenario and dashboard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

import simulator
from simulator.config.loader import Document, read_document
from simulator.config.scenario import Scenario, load_scenario
from simulator.config.topology import Topology, load_topology
from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import CollectiveTuning, StepSettings, StepSimulator
from simulator.errors import InputError
from simulator.hardware.cluster import Cluster
from simulator.metrics import frames as fr
from simulator.metrics.store import write_frame, write_json
from simulator.metrics.summary import summarize
from simulator.workload.program import StepProgram
from simulator.workload.trace import load_trace

log = logging.getLogger(__name__)


@dataclass
class PreparedRun:
    """Everything a run needs, loaded and validated."""

    scenario: Scenario
    topology: Topology
    cluster: Cluster
    program: StepProgram
    tuning: CollectiveTuning | None = None
    compute_calibration: Any = None
    calibration_sources: list[str] = field(default_factory=list)


def load_workload(scenario: Scenario, topology: Topology, cluster: Cluster) -> StepProgram:
    """A trace file, or a model with its parallel layout (generated into a step program)."""
    doc = read_document(scenario.workload_path)
    if not isinstance(doc.data, dict):
        raise doc.error("expected a mapping: a step trace (format: clustersim-step/1) or a model workload")
    if "format" in doc.data:
        return load_trace(scenario.workload_path, cluster.gpus)
    if "model" in doc.data:
        try:
            from simulator.workload.generate import program_from_workload
        except ImportError:  # pragma: no cover - until model workloads land
            raise doc.error("model workloads are not available in this version", ("model",)) from None
        return program_from_workload(doc, topology, cluster)
    raise doc.error("a workload needs 'format: clustersim-step/1' (a trace) or 'model:' (a model and layout)")


def load_calibration(paths: list[Path]) -> tuple[CollectiveTuning | None, Any, list[str]]:
    if not paths:
        return None, None, []
    from simulator.calibration.apply import tuning_from_profiles

    return tuning_from_profiles(paths)


def build_cluster(scenario: Scenario, topology: Topology) -> Cluster:
    st = scenario.spec.state
    g = topology.graph
    for i, (u, v) in enumerate(st.down_links):
        if not g.has_edge(u, v):
            raise scenario.error(f"no link between {u!r} and {v!r} in the topology", ("state", "down_links", i))
    for i, d in enumerate(st.degraded_links):
        if not g.has_edge(*d.link):
            raise scenario.error(f"no link between {d.link[0]!r} and {d.link[1]!r}", ("state", "degraded_links", i))
    for i, s in enumerate(st.stragglers):
        if s.gpu not in g or g.nodes[s.gpu].get("kind") != "gpu":
            raise scenario.error(f"{s.gpu!r} is not a GPU of the topology", ("state", "stragglers", i))
    return Cluster(
        g,
        topology.gpu,
        down=st.down_links,
        degraded={(d.link[0], d.link[1]): d.factor for d in st.degraded_links},
        stragglers={s.gpu: s.slowdown for s in st.stragglers},
    )


def prepare(path: str | Path) -> PreparedRun:
    """Load and validate a scenario and everything it references."""
    return prepare_scenario(load_scenario(path))


def prepare_scenario(scenario: Scenario, topology_doc: Document | None = None) -> PreparedRun:
    """Load what a validated scenario references (the topology from `topology_doc` if given)."""
    topology = load_topology(scenario.topology_path, doc=topology_doc)
    cluster = build_cluster(scenario, topology)
    program = load_workload(scenario, topology, cluster)
    tuning, compute_cal, sources = load_calibration(scenario.calibration_paths)
    return PreparedRun(scenario, topology, cluster, program, tuning, compute_cal, sources)


@dataclass
class RunResult:
    """Frames and summary of one run."""

    name: str
    frames: dict[str, pd.DataFrame]
    summary: dict[str, Any]
    resolved: dict[str, Any]
    graph: Any = None

    def write(self, folder: str | Path, dashboard: bool = True) -> Path:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        for name, df in self.frames.items():
            write_frame(out, name, df)
        write_json(out / "summary.json", self.summary)
        from simulator.commands.common import write_atomic

        write_atomic(out / "scenario.resolved.yaml", yaml.safe_dump(self.resolved, sort_keys=False))
        graph = None
        if self.graph is not None:
            import networkx as nx

            from simulator.viz.dashboard import load_graph

            data = nx.node_link_data(self.graph, edges="links")
            data["graph"] = {k: v for k, v in data["graph"].items() if k != "gpu"}
            write_json(out / "topology.json", data)
            graph = load_graph(out)  # the dashboard draws what a rebuild would read
        if dashboard:
            from simulator.viz.dashboard import run_dashboard_html

            write_atomic(out / "dashboard.html", run_dashboard_html(self.frames, self.summary, graph))
        return out


def step_simulator(
    prep: PreparedRun, seed: int, cluster: Cluster | None = None, record_links: bool | None = None
) -> StepSimulator:
    """A step simulator for the prepared run (on `cluster` instead of the scenario's, if given)."""
    sc = prep.scenario.spec
    ctx = SimContext(seed)
    cost = ComputeCost(prep.topology.gpu, prep.compute_calibration, sc.compute.jitter_cv, ctx.rng("compute"))
    settings = StepSettings(
        fidelity=sc.network.fidelity,
        algorithms=dict(sc.network.algorithms),
        alpha_s=sc.network.alpha_us * 1e-6,
        intra_node=sc.network.intra_node or str(prep.program.meta.get("intra_node_fidelity", "flow")),
        record_links=sc.network.record_links if record_links is None else record_links,
    )
    return StepSimulator(ctx, cluster or prep.cluster, prep.program, cost, settings, prep.tuning)


def execute(prep: PreparedRun, on_step: Callable[[int], None] | None = None, seed: int | None = None) -> RunResult:
    """Simulate the prepared run and collect its frames and summary."""
    sc = prep.scenario.spec
    seed = sc.seed if seed is None else seed
    wall0 = time.perf_counter()
    sim = step_simulator(prep, seed)
    sim.run(sc.run.steps, on_step)
    wall = time.perf_counter() - wall0
    program = prep.program
    ops = fr.ops_frame(sim.op_rows, program.rank_gpus, program.role)
    frames = {
        "ops": ops,
        "flows": fr.flows_frame(sim.fabric.flow_records),
        "links": fr.links_frame(sim.fabric.link_intervals(), prep.cluster.links),
        "steps": fr.steps_frame(ops, sim.step_rows, program.weight),
    }
    n_job = len(program.rank_gpus)
    meta: dict[str, Any] = {
        "scenario": sc.name,
        "seed": seed,
        "version": simulator.__version__,
        "topology": prep.topology.name,
        "gpu": prep.topology.gpu.name,
        "gpus_in_topology": len(prep.cluster.gpus),
        "gpus_in_job": n_job,
        "simulated_ranks": len(program.simulated_ranks),
        "fidelity": sc.network.fidelity,
        "wall_time_s": wall,
        "fabric_recomputations": sim.fabric.recomputations,
        "flows": len(sim.fabric.flow_records),
        "bytes_forwarded_via_scale_up": sim.forwarded_bytes,
    }
    for k, v in program.meta.items():
        meta[k] = v
    if "model_flops_per_step" in program.meta:
        meta["peak_flops_per_s"] = prep.topology.gpu.peak(str(program.meta.get("dtype", "bf16")))
    if sim.tuned:
        meta["calibration_applied"] = dict(sim.tuned)
    summary = summarize(frames, meta)
    if sc.run_level:
        frames.update(run_level(prep, summary, seed))
    resolved = {
        "scenario": prep.scenario.doc.data,
        "scenario_file": str(prep.scenario.path),
        "topology_file": str(prep.scenario.topology_path),
        "workload_file": str(prep.scenario.workload_path),
        "calibration_files": [str(p) for p in prep.scenario.calibration_paths],
        "seed": seed,
        "clustersim_version": simulator.__version__,
    }
    return RunResult(sc.name, frames, summary, resolved, prep.topology.graph)


def run_level(prep: PreparedRun, summary: dict[str, Any], seed: int) -> dict[str, pd.DataFrame]:
    """Days of training under the scenario's failures and policy, over `reliability.seeds` seeds.

    Returns the `incidents` and `segments` frames of the first seed and a `runs` frame (one
    summary row per seed); adds the means and 95% intervals to `summary`.
    """
    from simulator.engine.oracle import SimulatedOracle, job_shape
    from simulator.faults import aggregate, simulate_run
    from simulator.faults.preset import PRESETS

    sc = prep.scenario.spec
    rel = sc.reliability
    # the step just simulated answers the healthy state: no second simulation of it
    oracle = SimulatedOracle(prep, healthy_step_s=summary.get("step_time_s"), compute_per_rank_s=summary.get("compute_s"))
    job = job_shape(prep, rel)
    failures = [*(PRESETS[sc.preset]() if sc.preset else []), *sc.failures]
    results = [
        simulate_run(job, oracle, failures, sc.policy, rel.duration_s, seed + k,
                     degradations=sc.degradations, mtbf_scale=rel.mtbf_scale)
        for k in range(rel.seeds)
    ]
    runs = pd.DataFrame([{"seed": r.seed, **r.summary} for r in results])
    agg = aggregate(runs).iloc[0].to_dict()
    for key in ("goodput", "ettr", "interruptions", "lost_work_s", "restart_s", "checkpoint_s", "job_mtti_s"):
        if f"{key}_mean" in agg:
            summary[key] = float(agg[f"{key}_mean"])
            summary[f"{key}_95ci"] = [float(agg[f"{key}_lo"]), float(agg[f"{key}_hi"])]
    summary["run_level"] = {
        "policy": sc.policy.kind if sc.policy is not None else None,
        "duration_days": rel.duration_s / 86400.0,
        "seeds": rel.seeds,
        "checkpoint_write_s": oracle.checkpoint_write_s(_healthy(job)),
        "step_simulations": oracle.simulations,
        "job_gpus": job.n_gpus,
    }
    return {"incidents": results[0].incidents, "segments": results[0].segments, "runs": runs}


def _healthy(job: Any) -> Any:
    from simulator.faults.state import ClusterState

    return ClusterState(dp_replicas=job.dp_replicas)


def default_output(prep: PreparedRun) -> Path:
    sc = prep.scenario.spec
    if sc.run.output:
        return Path(sc.run.output) if Path(sc.run.output).is_absolute() else prep.scenario.path.parent / sc.run.output
    return Path("results") / sc.name


def check_output_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise InputError("output path exists and is not a folder", file=folder)
