"""Prepare a scenario: load, validate and build everything a run needs, simulate nothing.

`prepare(path)` does all loading and validation, so `clustersim validate` and `run` share
it: the scenario, its topology (built into a `Cluster` with the scenario's link state), its
step program (a trace, or a model and its layout) and its calibration. `step_simulator`
builds the step simulation of a prepared run; `default_output` and `check_output_folder`
say where its results go.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import simulator
from simulator.config.loader import Document, check_file_kind, read_document
from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import CollectiveTuning, StepSettings, StepSimulator
from simulator.errors import InputError
from simulator.io import foreign_folder_problem
from simulator.network.cluster import Cluster
from simulator.network.collective import check_algorithm
from simulator.network.fabric import Fabric
from simulator.network.prices import PriceSpec, load_prices, power_capped_gpu
from simulator.network.topology import Topology, load_topology, resolve
from simulator.scenario.job import check_run_level
from simulator.scenario.spec import Scenario, load_scenario
from simulator.units import factor
from simulator.workload.program import StepProgram
from simulator.workload.trace import load_trace

_KIND, _DTYPE, _RANKS, _GROUP = (attrgetter(f) for f in ("kind", "dtype", "ranks", "group"))
_COLLECTIVE, _ALGORITHM = attrgetter("collective"), attrgetter("algorithm")
_COMM_KINDS = frozenset(("collective", "p2p"))

if TYPE_CHECKING:
    from simulator.scenario.job_place import PreparedJob


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
    #: a scenario with `jobs`: every job placed and built (`program` is the first job's)
    jobs: list[PreparedJob] = field(default_factory=list)
    #: the price table whose power-cap curve sets a capped GPU's speed (a comparison's own;
    #: None: topologies/prices.yaml)
    prices: PriceSpec | None = None


def run_identity(prep: PreparedRun, seed: int) -> dict[str, Any]:
    """The keys every summary starts with: what ran, on which topology, with which version."""
    return {
        "scenario": prep.scenario.spec.name,
        "seed": seed,
        "version": simulator.__version__,
        "topology": prep.topology.name,
        "gpu": prep.topology.gpu.name,
        "gpus_in_topology": len(prep.cluster.gpus),
    }


def load_workload(scenario: Scenario, topology: Topology, cluster: Cluster) -> StepProgram:
    """A trace file, a model with its parallel layout (generated into a step program), or a
    Chakra/Kineto trace imported as it is read; `tokens_per_step` of the scenario's
    workload is added to a trace's meta."""
    wl = scenario.spec.workload
    if wl is None:
        raise scenario.error("required field is missing (or give `jobs` or `cluster`)", ("workload",))
    if wl.format is not None:
        from simulator.workload.interchange.load import load_imported

        program = load_imported(
            wl.format,
            scenario.workload_path,
            cluster.gpus,
            wl.step,
            wl.dp_replicas,
            wl.unknown,
            wl.host_launches,
        )
    else:
        program = _load_workload_file(scenario, topology, cluster)
    if wl.tokens_per_step is not None:
        if "model_flops_per_step" in program.meta:
            raise scenario.error(
                "a model workload states its own tokens (global batch x sequence); "
                "tokens_per_step is for traces and imports",
                ("workload", "tokens_per_step"),
            )
        program.meta["tokens_per_step"] = wl.tokens_per_step
    return program


def _load_workload_file(scenario: Scenario, topology: Topology, cluster: Cluster) -> StepProgram:
    doc = read_document(scenario.workload_path)
    check_file_kind(doc, "workload")
    if not isinstance(doc.data, dict):
        raise doc.error("expected a mapping: a step trace (format: clustersim-step/1) or a model workload")
    if "format" in doc.data:
        return load_trace(scenario.workload_path, cluster.gpus)
    if "model" in doc.data:
        from simulator.workload.generate import program_from_workload

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
            raise scenario.error(
                f"no link between {u!r} and {v!r} in the topology", ("state", "down_links", i)
            )
    for i, d in enumerate(st.degraded_links):
        if not g.has_edge(*d.link):
            raise scenario.error(
                f"no link between {d.link[0]!r} and {d.link[1]!r}", ("state", "degraded_links", i)
            )
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


def prepare_scenario(
    scenario: Scenario, topology_doc: Document | None = None, prices: PriceSpec | None = None
) -> PreparedRun:
    """Load what a validated scenario references (the topology from `topology_doc` if given),
    and check that the run can start (`preflight`); `prices`: a comparison's price table."""
    topology = load_topology(scenario.topology_path, doc=topology_doc)
    cluster = build_cluster(scenario, topology)
    jobs: list[PreparedJob] = []
    rows: list[Any] = []  # the rows of a cluster's job trace
    if scenario.spec.jobs:
        from simulator.scenario.job_place import prepare_jobs

        jobs = prepare_jobs(scenario, topology, cluster)
    if scenario.spec.cluster is not None:
        # the run level's view of the whole cluster: every GPU, one replica per server
        servers = {str(cluster.graph.nodes[x].get("node", x)) for x in cluster.gpus}
        program = StepProgram("cluster", list(cluster.gpus), [], meta={"dp": float(len(servers))})
        if scenario.spec.cluster.trace is not None:  # read now, so `validate` rejects a bad row
            from simulator.jobs.trace import read_job_trace

            rows = read_job_trace(scenario.workload_path)
            for row in rows:
                if row.gpus > len(cluster.gpus):
                    raise InputError(
                        f"job {row.name!r} asks for {row.gpus} GPUs and the cluster has {len(cluster.gpus)}",
                        file=scenario.workload_path,
                        line=row.line,
                        field="gpus",
                    )
        synthetic = scenario.spec.cluster.synthetic
        if synthetic is not None and max(synthetic.sizes) > len(cluster.gpus):
            raise scenario.error(
                f"a job of {max(synthetic.sizes)} GPUs may be drawn and the cluster has {len(cluster.gpus)}",
                ("cluster", "synthetic", "sizes", synthetic.sizes.index(max(synthetic.sizes))),
            )
    else:
        program = jobs[0].program if jobs else load_workload(scenario, topology, cluster)
    tuning, compute_cal, sources = load_calibration(scenario.calibration_paths)
    prep = PreparedRun(scenario, topology, cluster, program, tuning, compute_cal, sources, jobs, prices)
    if jobs and scenario.spec.run_level:
        raise scenario.error(
            "a scenario with `jobs` simulates steps; days of a cluster with failures and a "
            "scheduler are a scenario with `cluster` (see docs/jobs.md)",
            ("policy",),
        )
    check_run_level(prep)
    _check_steps_interval(scenario, rows)
    _check_power_cap(scenario, prices)
    _check_row_models(prep, rows)
    for job in jobs:
        preflight(prep, job.program, job.path)
    if not jobs and scenario.spec.cluster is None:
        preflight(prep)
    return prep


def _check_row_models(prep: PreparedRun, rows: list[Any]) -> None:
    """Every distinct (model, GPUs) of a cluster's job trace builds and passes `preflight`
    (once each; its step is simulated only by `run`), so `validate` rejects the rows `run`
    would: a model of another rank count, a malformed file, a file that is no workload."""
    if not any(row.model is not None for row in rows):
        return  # (the job modules, and the workload generator's schemas, are not imported)
    from simulator.scenario.job_place import row_job

    seen: set[tuple[str, int]] = set()
    for row in rows:
        if row.model is not None and (str(row.model), row.gpus) not in seen:
            seen.add((str(row.model), row.gpus))
            row_job(prep.scenario, prep.topology, prep.cluster, row, partial(preflight, prep))


def _check_steps_interval(scenario: Scenario, rows: list[Any]) -> None:
    """A cluster's checkpoint interval in steps has a length only for jobs whose step is
    simulated (a row with a model): a job given as a duration, or a synthetic one, would
    take no checkpoint at all, so such an interval is refused at `policy.interval_steps`."""
    sc = scenario.spec
    policy = sc.policy
    if sc.cluster is None or policy is None or policy.interval != "fixed" or policy.interval_s is not None:
        return
    untimed = [r for r in rows if r.model is None]
    if sc.cluster.trace is None or untimed:
        which = (
            f"job {untimed[0].name!r} (line {untimed[0].line} of {scenario.workload_path.name}) is given "
            "as a duration"
            if untimed
            else "synthetic jobs are given as durations"
        )
        raise scenario.error(
            f"a checkpoint every {policy.interval_steps or 1} step(s) has no length: {which}, not a "
            "model's steps; give the interval as interval_min",
            ("policy", "interval_steps"),
        )


def _check_power_cap(scenario: Scenario, prices: PriceSpec | None) -> None:
    """A power cap below the lowest one of the price table's `power.power_cap_curve` has no
    known speed: it is refused (the curve was held at its first point, so a cap of 1% of
    TDP computed as fast as one of 30% while its energy fell with the cap)."""
    cap = scenario.spec.compute.power_cap_fraction
    if cap >= 1.0:
        return
    lowest = (prices or load_prices()).power.power_cap_curve.points[0][0]
    if cap < lowest:
        table = "the comparison's price table" if prices is not None else "topologies/prices.yaml"
        raise scenario.error(
            f"{cap:g} of TDP is below the lowest cap of power.power_cap_curve in "
            f"{table} ({lowest:g}); no compute speed is known below it",
            ("compute", "power_cap_fraction"),
        )


def preflight(
    prep: PreparedRun, program: StepProgram | None = None, workload_path: Path | None = None
) -> None:
    """What the step simulation would refuse, found before it starts (so `validate` and
    `run` agree): a GPU of the job cut off from the fabric, a collective algorithm its
    group cannot use, a checkpoint with no storage to write to, a compute dtype the GPU
    has no peak for, a field of the GPU's kernel model that an op's kernels need.

    Raises:
        SimulationError: the scenario is valid but cannot be simulated (exit 3).
        InputError: a compute op names a dtype the topology's GPU has no peak for, or
            kernels its GPU spec cannot price (`check_kernel_model`).
    """
    program = program or prep.program
    algorithms = prep.scenario.spec.network.algorithms
    prep.cluster.check_gpus_reachable(program.used_gpus())
    if not _passes_at_a_glance(prep, program, algorithms):
        _check_ops(prep, program, algorithms, workload_path)
    check_kernel_model(prep, program)


def _check_ops(
    prep: PreparedRun, program: StepProgram, algorithms: dict[str, str], workload_path: Path | None
) -> None:
    """`preflight`'s checks op by op, in program order (the first op at fault is named)."""
    checked: set[tuple[str, str | None, int]] = set()
    for op in program.ops:
        if op.kind in ("collective", "p2p"):
            kind = op.collective or "send_recv"
            key = (kind, op.algorithm or algorithms.get(kind), len(op.group) or len(op.ranks))
            if key not in checked:
                checked.add(key)
                check_algorithm(*key)
        elif op.kind == "checkpoint":
            prep.cluster.storage_sink(op.target, op.ranks[0])
        elif op.kind == "compute" and op.flops > 0:
            try:
                prep.topology.gpu.peak(op.dtype)
            except KeyError:
                gpu, has = prep.topology.gpu, sorted(prep.topology.gpu.peak_flops_per_s)
                give = f"give {op.dtype} in the GPU's peak_tflops"
                raise InputError(
                    f"the workload computes in {op.dtype} (op {op.id!r}), and the GPU {gpu.name!r} has no "
                    f"peak FLOP/s for {op.dtype} (it has {', '.join(has) or 'none'}); "
                    + (f"compute in one of those or {give}" if has else give),
                    file=workload_path or prep.scenario.workload_path,
                ) from None


def check_kernel_model(prep: PreparedRun, program: StepProgram) -> None:
    """The GPU spec gives every field of the kernel model that the compute ops' kernels
    need (`simulator.workload.kernels`: SMs and GEMM tile for a GEMM, its achievable
    fraction of peak, the fused-attention fraction of a variant, the per-kernel overhead):
    each distinct kernel list is priced once, as the step prices it (a GPU spec with no
    kernel-model field prices no kernels). The error is placed in the file that gives the
    GPU (its GPU file, or the topology's inline `gpu`).

    Raises:
        InputError: `file:line: field: GPU ... gives no FIELD; op ... needs it ...`.
    """
    gpu = power_capped_gpu(prep.topology.gpu, prep.scenario.spec.compute.power_cap_fraction, prep.prices)
    if not gpu.has_kernel_model:
        return
    cost: ComputeCost | None = None  # made at the first op with kernels (a trace may have none)
    priced: set[tuple[int, str]] = set()
    try:
        for op in program.ops:
            if op.kernels and op.kind == "compute" and op.duration_s is None:
                key = (id(op.kernels), op.dtype)
                if key not in priced:
                    priced.add(key)
                    if cost is None:
                        cost = ComputeCost(gpu, prep.compute_calibration)
                    cost.kernels_s(op)
    except InputError as exc:
        raise _in_gpu_file(prep.topology, exc) from None


def _in_gpu_file(topology: Topology, exc: InputError) -> InputError:
    """`exc`, about the field `gpu.<field>` of `topology`'s GPU, placed in the file that
    gives it: the GPU file the topology names, or the topology's inline `gpu`."""
    doc = read_document(topology.source)
    loc = tuple((exc.field or "gpu").split("."))
    ref = doc.data.get("gpu") if isinstance(doc.data, dict) else None
    if isinstance(ref, dict) and isinstance(ref.get("file"), str):
        return read_document(resolve(doc.path, ref["file"])).error(exc.message, loc[1:])
    return doc.error(exc.message, loc)


def _passes_at_a_glance(prep: PreparedRun, program: StepProgram, algorithms: dict[str, str]) -> bool:
    """Whether `preflight`'s op checks would all pass, judged on the distinct values of the
    fields they read (one pass of `map` per field, not one Python test per op). False when
    one might fail, or the program has checkpoint ops: `preflight` then checks op by op, so
    that the first op at fault is the one named."""
    ops = program.ops
    kind_of = list(map(_KIND, ops))
    kinds = set(kind_of)
    if "checkpoint" in kinds:
        return False
    try:
        for dtype in set(map(_DTYPE, ops)) if "compute" in kinds else ():
            prep.topology.gpu.peak(dtype)  # every op's dtype: a superset of those checked
        comm = list(compress(ops, map(_COMM_KINDS.__contains__, kind_of)))  # the ops checked
        for coll, algo, n_group, n_ranks in set(
            zip(
                map(_COLLECTIVE, comm),
                map(_ALGORITHM, comm),
                map(len, map(_GROUP, comm)),
                map(len, map(_RANKS, comm)),
                strict=True,
            )
        ):
            coll = coll or "send_recv"
            check_algorithm(coll, algo or algorithms.get(coll), n_group or n_ranks)
    except Exception:  # the op-by-op checks below raise it again, for the first op at fault
        return False
    return True


def step_simulator(
    prep: PreparedRun,
    seed: int,
    cluster: Cluster | None = None,
    record_links: bool | None = None,
    *,
    ctx: SimContext | None = None,
    program: StepProgram | None = None,
    fabric: Fabric | None = None,
    compute_stream: str = "compute",
) -> StepSimulator:
    """A step simulator for the prepared run (on `cluster` instead of the scenario's, if given).

    Several jobs share one run by passing the same `ctx` and a view of one `fabric`, each
    with its `program` and its own `compute_stream` (the family of its jitter draws).
    """
    sc = prep.scenario.spec
    ctx = ctx or SimContext(seed)
    program = program or prep.program
    gpu = power_capped_gpu(prep.topology.gpu, sc.compute.power_cap_fraction, prep.prices)
    params = None
    if prep.tuning is not None:  # a calibration profile was given
        from simulator.calibration.apply import fitted_collective_params

        params = fitted_collective_params(prep.tuning, cluster or prep.cluster)
    cost = ComputeCost(gpu, prep.compute_calibration, sc.compute.jitter_cv, ctx.rng(compute_stream))
    settings = StepSettings(
        fidelity=sc.network.fidelity,
        algorithms=dict(sc.network.algorithms),
        alpha_s=sc.network.alpha_us * factor("_us"),
        intra_node=sc.network.intra_node or str(program.meta.get("intra_node_fidelity", "flow")),
        record_links=sc.network.record_links if record_links is None else record_links,
        collective_params=params,
    )
    return StepSimulator(ctx, cluster or prep.cluster, program, cost, settings, prep.tuning, fabric)


def default_output(prep: PreparedRun) -> Path:
    """The results folder: `run.output` (relative to the scenario), else results/<name>."""
    sc = prep.scenario.spec
    if sc.run.output:
        return (
            Path(sc.run.output)
            if Path(sc.run.output).is_absolute()
            else prep.scenario.path.parent / sc.run.output
        )
    return Path("results") / sc.name


def output_problem(folder: Path) -> str | None:
    """Why results cannot be written to `folder`, or None: it is a file, it lies under a
    file, it holds files that are not a run's results (`foreign_folder_problem`), or the
    nearest folder that exists is not writable."""
    if folder.exists():
        if not folder.is_dir():
            return f"output path {str(folder)!r} exists and is not a folder"
        foreign = foreign_folder_problem(folder)
        if foreign is not None:
            return foreign
        existing = folder
    else:
        existing = folder.absolute().parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return f"output path {str(folder)!r} lies under {str(existing)!r}, which is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"output folder {str(existing)!r} is not writable"
    return None


def check_output_folder(folder: Path, prep: PreparedRun | None = None) -> None:
    """Raise a one-line InputError if results cannot be written to `folder`; with `prep`
    and a folder that came from its `run.output`, the error names that line."""
    problem = output_problem(folder)
    if problem is None:
        return
    if prep is not None and prep.scenario.spec.run.output and folder == default_output(prep):
        raise prep.scenario.error(problem, ("run", "output"))
    raise InputError(problem)
