"""The jobs of a several-job scenario, placed on the cluster and built into step programs.

Jobs are placed in file order, each on GPUs no earlier job holds (`simulator.jobs.placement`):
explicit placements first, so a policy never takes a GPU an explicit job names. A job's
workload (a trace, or a model with its layout) is then built on exactly its GPUs: rank r
runs on the r-th GPU of its placement (server-major for the policies, as listed for
`explicit`).

Errors, one line each against the scenario file: a job that does not fit in the GPUs left,
an explicit GPU that is not in the topology, a workload whose rank count is not the job's
`gpus`, a trace that places its ranks outside the job's GPUs, and a placement that splits a
tensor-parallel group across servers (the layout keeps TP peers on one server's scale-up
fabric).

`row_job` builds the model of a row of a cluster's job trace the same way, on the GPUs a
packed placement gives it alone; its errors name the row of the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import networkx as nx

from simulator.config.base import FileRef
from simulator.config.loader import read_document, validate
from simulator.errors import InputError
from simulator.jobs.placement import ClusterLayout, place
from simulator.jobs.trace import JobRow
from simulator.network.cluster import Cluster
from simulator.network.topology import Topology
from simulator.scenario.spec import JobSpec, Scenario, check_name
from simulator.workload.generate import WorkloadSpec, program_from_workload
from simulator.workload.layout import RankGrid
from simulator.workload.placement import server_major_gpus
from simulator.workload.program import StepProgram
from simulator.workload.trace import load_trace


@dataclass
class PreparedJob:
    """One job of the scenario: its spec, workload file, GPUs and step program."""

    index: int
    spec: JobSpec
    path: Path
    gpus: list[str]
    program: StepProgram
    leaf_groups: int

    @property
    def name(self) -> str:
        return self.spec.name


def _check_model_job(scenario: Scenario, job: PreparedJob, g: nx.Graph) -> None:
    """A model job's layout needs exactly its GPUs, and each tensor-parallel group sits on one
    server (rank r on the r-th GPU, server-major, as the generator places them)."""
    layout = validate(WorkloadSpec, read_document(job.path)).layout
    if layout.world_size != job.spec.gpus:
        raise scenario.error(
            f"job {job.name!r} has gpus: {job.spec.gpus}, and its layout needs {layout.world_size}",
            ("jobs", job.index, "gpus"),
        )
    grid = RankGrid(layout)
    groups: dict[tuple[int, ...], list[int]] = {}
    for r in range(layout.world_size):
        c = grid.coords(r)
        groups.setdefault((c.dp, c.pp, c.cp), []).append(r)
    ranked = server_major_gpus(g, job.gpus)
    server = {x: str(g.nodes[x].get("node", x)) for x in ranked}
    for grp in groups.values():
        hosts = sorted({server[ranked[r]] for r in grp})
        if len(hosts) > 1:
            raise scenario.error(
                f"job {job.name!r}: the placement splits the tensor-parallel group of ranks "
                f"{grp[0]}..{grp[-1]} across servers ({', '.join(hosts)}); use whole servers "
                "(packed or leaf_aligned) or list GPUs server by server",
                ("jobs", job.index, "placement"),
            )


def job_program(scenario: Scenario, job: PreparedJob, topology: Topology, cluster: Cluster) -> StepProgram:
    """Build the job's workload on its GPUs; check it has the job's rank count."""
    i, spec = job.index, job.spec
    doc = read_document(job.path)
    view = SimpleNamespace(graph=cluster.graph, gpus=list(job.gpus))
    if isinstance(doc.data, dict) and "model" in doc.data:
        _check_model_job(scenario, job, cluster.graph)
        program = program_from_workload(doc, topology, view)
    elif isinstance(doc.data, dict) and "format" in doc.data:
        ranks = doc.data.get("ranks")
        if isinstance(ranks, int) and not isinstance(ranks, bool) and ranks != spec.gpus:
            raise scenario.error(
                f"job {spec.name!r} has gpus: {spec.gpus}, and its workload has {ranks} ranks",
                ("jobs", i, "gpus"),
            )
        program = load_trace(job.path, list(job.gpus))
    else:
        raise doc.error(
            "a workload needs 'format: clustersim-step/1' (a trace) or 'model:' (a model and layout)"
        )
    n = len(program.rank_gpus)
    if n != spec.gpus:
        raise scenario.error(
            f"job {spec.name!r} has gpus: {spec.gpus}, and its workload has {n} ranks", ("jobs", i, "gpus")
        )
    outside = [x for x in program.rank_gpus if x not in set(job.gpus)]
    if outside:
        raise scenario.error(
            f"the trace of job {spec.name!r} places a rank on {outside[0]!r}, outside the job's GPUs; "
            "drop the trace's placement",
            ("jobs", i, "workload"),
        )
    return program


def prepare_jobs(scenario: Scenario, topology: Topology, cluster: Cluster) -> list[PreparedJob]:
    """Place every job of the scenario and build its step program.

    Raises:
        InputError: one line naming the job's field (see the module docstring).
    """
    specs = scenario.spec.jobs
    layout = ClusterLayout.of(cluster.graph)
    known = set(cluster.gpus)
    taken: set[str] = set()
    placed: dict[int, list[str]] = {}
    for i, spec in enumerate(specs):
        if spec.placement.policy != "explicit":
            continue
        for k, x in enumerate(spec.placement.gpus):
            if x not in known:
                raise scenario.error(
                    f"{x!r} is not a GPU of the topology", ("jobs", i, "placement", "gpus", k)
                )
        placed[i] = list(spec.placement.gpus)
        taken.update(spec.placement.gpus)
    for i, spec in enumerate(specs):
        if i in placed:
            continue
        gpus = place(layout, spec.placement.policy, spec.gpus, taken, spec.placement.seed)
        if gpus is None:
            free = len(known) - len(taken)
            raise scenario.error(
                f"job {spec.name!r} needs {spec.gpus} GPUs and {free} of the topology's "
                f"{len(known)} are left by the jobs before it",
                ("jobs", i, "gpus"),
            )
        placed[i] = gpus
        taken.update(gpus)
    out = []
    for i, spec in enumerate(specs):
        job = PreparedJob(i, spec, scenario.job_paths[i], placed[i], StepProgram("", [], []), 0)
        job.program = job_program(scenario, job, topology, cluster)
        job.leaf_groups = len(layout.groups_of(job.gpus))
        out.append(job)
    return out


def _usable_name(name: str) -> bool:
    """Whether a job trace's name is also a valid scenario job name (`check_name`)."""
    try:
        check_name(name)
    except ValueError:
        return False
    return True


def row_job(
    scenario: Scenario,
    topology: Topology,
    cluster: Cluster,
    row: JobRow,
    check: Callable[[StepProgram, Path], None] | None = None,
) -> PreparedJob:
    """The model workload of a cluster's job-trace row, built on the GPUs a packed
    placement gives it alone on the cluster, and passed to `check` with its file (the
    preflight).

    Raises:
        InputError: at the row's `model` (the model's own file:line in the message where
            the mistake is in it), when the model cannot be loaded, built or checked.
    """
    gpus = place(ClusterLayout.of(cluster.graph), "packed", row.gpus, set()) or []
    name = row.name if _usable_name(row.name) else "job"
    spec = JobSpec(name=name, workload=FileRef(file=str(row.model)), gpus=row.gpus)
    job = PreparedJob(0, spec, row.model or Path(), gpus, StepProgram("", [], []), 1)
    try:
        job.program = job_program(scenario, job, topology, cluster)
        if check is not None:
            check(job.program, job.path)
    except InputError as exc:
        inner = str(exc) if exc.file not in (None, str(scenario.path)) else exc.message
        raise InputError(
            f"the model of job {row.name!r}: {inner}",
            file=scenario.workload_path,
            line=row.line,
            field="model",
        ) from None
    return job
