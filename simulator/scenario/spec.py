"""Scenario files: one run of the simulator, referencing topology, workload and calibration.

```yaml
name: quickstart
seed: 7
topology: {file: ../topologies/h100-rail-clos-2n.yaml}
workload: {file: ../workloads/traces/dp16-step.yaml}   # or {format: chakra|kineto, path: ...}
calibration: [{file: ../topologies/calibration/h100-2node.yaml}]   # optional
network: {fidelity: flow, algorithms: {all_reduce: ring}}
run: {steps: 3}
```
References resolve relative to the scenario file. Validation happens here; nothing runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from simulator.config.base import MAX_SEED, FileRef, Spec
from simulator.config.loader import Document, check_file_kind, not_a_file, read_document, validate
from simulator.errors import FieldError, InputError, InputErrors, SimulationError
from simulator.faults.degradation import MAX_SLOWDOWN, MIN_BANDWIDTH_FACTOR, DegradationSpec
from simulator.faults.failure import FailureSpec
from simulator.faults.policy import PolicySpec
from simulator.network.collective import COLLECTIVES, parse_algorithm
from simulator.network.topology import resolve
from simulator.scenario.job_specs import ClusterSpec, JobSpec, check_name
from simulator.units import to_si

#: Longest run the run level simulates: ten years of 365.25 days, s.
MAX_RUN_DURATION_S = 10 * 365.25 * 86400.0


class NetworkSettings(Spec):
    """How communication is simulated."""

    fidelity: Literal["flow", "analytic"] = Field(
        "flow",
        description="flow: flows share links max-min fairly (contention is real); analytic: each "
        "collective costs its latency plus bytes over its bottleneck, alone on the fabric.",
    )
    intra_node: Literal["flow", "analytic"] | None = Field(
        None,
        description="Collectives that stay inside one server: flow (share links) or analytic (solved "
        "alone; exact when servers' scale-up fabrics carry nothing else). "
        "Default: what the workload says, else flow.",
    )
    algorithms: dict[str, str] = Field(
        default_factory=dict,
        description="Algorithm per collective kind: auto (the default: algorithm and protocol chosen "
        "per call and size by NCCL's cost model), an algorithm (e.g. {all_reduce: ring}: path "
        "latencies, full link rate) or algorithm/protocol (e.g. ring/ll128; protocols ll, ll128, simple).",
    )
    alpha_us: float = Field(
        0.0, ge=0, description="Per-step software overhead added to each latency step, us."
    )
    record_links: bool = Field(True, description="Record per-link rate intervals (the links frame).")

    @field_validator("algorithms")
    @classmethod
    def _algos(cls, v: dict[str, str]) -> dict[str, str]:
        for kind, algo in v.items():
            if kind not in COLLECTIVES:
                expected = list(COLLECTIVES)
                raise FieldError(f"unknown collective {kind!r}; expected one of {expected}", field=kind)
            try:
                parse_algorithm(kind, algo)
            except SimulationError as exc:
                raise FieldError(str(exc), field=kind) from None
        return v


class ComputeSettings(Spec):
    """How compute ops are priced."""

    jitter_cv: float = Field(
        0.0, ge=0, le=1, description="Coefficient of variation of a lognormal per-op jitter (0 = none)."
    )
    power_cap_fraction: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Per-GPU power limit as a fraction of TDP (what-if; 1 = uncapped): compute slows "
        "along power.power_cap_curve of topologies/prices.yaml and GPU draw is capped.",
    )


class LinkRef(Spec):
    """A link by its two end nodes."""

    link: tuple[str, str] = Field(description="The two nodes the link joins, e.g. [n0.nic0, leaf0.0].")
    factor: float = Field(
        ge=MIN_BANDWIDTH_FACTOR, le=1, description="Bandwidth factor (0.5 = half speed; at least 1e-6)."
    )


class StragglerSpec(Spec):
    """A GPU that computes slower than the rest."""

    gpu: str = Field(description="GPU node name.")
    slowdown: float = Field(
        ge=1, le=MAX_SLOWDOWN, description="Compute time multiplier (2 = twice as slow; at most 1e6)."
    )


class StateSpec(Spec):
    """The cluster's state for this run: links down or degraded, straggling GPUs."""

    down_links: list[tuple[str, str]] = Field(default_factory=list, description="Links that are down.")
    degraded_links: list[LinkRef] = Field(default_factory=list, description="Links running below speed.")
    stragglers: list[StragglerSpec] = Field(default_factory=list, description="Slow GPUs.")

    @model_validator(mode="after")
    def _each_once(self) -> StateSpec:
        """A GPU or link is listed at most once per list: a second entry would silently win
        over the first. A link is undirected (its factor applies to both directions), so
        [a, b] and [b, a] are one link."""
        lists: tuple[tuple[str, list[tuple[str, ...]]], ...] = (
            ("down_links", list(self.down_links)),
            ("degraded_links", [d.link for d in self.degraded_links]),
            ("stragglers", [(s.gpu,) for s in self.stragglers]),
        )
        for name, entries in lists:
            first: dict[frozenset[str], int] = {}
            for i, entry in enumerate(entries):
                j = first.setdefault(frozenset(entry), i)
                if j != i:
                    what = f"GPU {entry[0]!r}" if len(entry) == 1 else f"the link {entry[0]!r}-{entry[-1]!r}"
                    raise FieldError(f"{what} is listed twice (first as entry {j})", field=f"{name}.{i}")
        # a down link carries nothing: a factor on it would say it runs, slower
        down = {frozenset(link): j for j, link in enumerate(self.down_links)}
        for i, d in enumerate(self.degraded_links):
            if (k := down.get(frozenset(d.link))) is not None:
                raise FieldError(
                    f"the link {d.link[0]!r}-{d.link[-1]!r} is down (down_links.{k}); a down link "
                    "cannot also run degraded",
                    field=f"degraded_links.{i}",
                )
        return self


class RunSettings(Spec):
    """How long to run and where results go."""

    steps: int = Field(1, ge=1, le=100_000, description="Training steps to simulate.")
    output: str | None = Field(
        None,
        description=(
            "Results folder, relative to this file (default results/<name>, relative to the "
            "working folder); CLI -o wins."
        ),
    )


class ReliabilitySpec(Spec):
    """Run-level settings: how long, how many seeds, and what a checkpoint costs.

    Step times per cluster state come from the step simulation; checkpoint writes and loads
    are flows from every GPU of the job to the topology's storage nodes (or, without storage
    nodes, `storage_gbyte_per_s` of aggregate bandwidth).
    """

    model_config = ConfigDict(allow_inf_nan=False)

    duration_s: float = Field(
        30 * 86400.0,
        gt=0,
        le=MAX_RUN_DURATION_S,
        description="Wall time of the run, s (YAML: duration_days, duration_h); at most 10 years.",
    )
    seeds: int = Field(8, ge=1, le=10_000, description="Monte Carlo runs (seeds seed, seed+1, ...).")
    mtbf_scale: float = Field(1.0, gt=0, description="Multiplies every MTBF (2 = half the failures).")
    checkpoint_gbyte: float | None = Field(
        None, gt=0, description="Checkpoint size, GB (default: parameters x checkpoint_bytes_per_param)."
    )
    checkpoint_bytes_per_param: float = Field(
        14.0,
        gt=0,
        description="Bytes saved per parameter: bf16 weights (2) + fp32 master (4) + Adam m, v (8).",
    )
    host_copy_gbyte_per_s: float = Field(
        25.0, gt=0, description="GPU-to-host-memory copy bandwidth per GPU for snapshots, GB/s."
    )
    storage_gbyte_per_s: float | None = Field(
        None,
        gt=0,
        description="Aggregate storage bandwidth, GB/s, used only when the topology has no storage nodes.",
    )
    gpus_per_switch: int | None = Field(
        None, gt=0, description="GPUs cut off when a leaf switch fails (default: from the topology)."
    )

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return to_si(data, "duration_s")


class WorkloadRef(Spec):
    """The workload of a scenario: a clustersim file (`{file: ...}`, a step trace or a model
    with its layout), or a trace of another tool imported as the run starts
    (`{format: chakra, path: DIR}`, `{format: kineto, path: FILE_OR_DIR}`)."""

    file: str | None = Field(None, description="Workload file (step trace or model), relative to this file.")
    format: Literal["chakra", "kineto"] | None = Field(
        None,
        description="Import a trace of another tool: chakra (a folder of PREFIX.RANK.et files) or kineto "
        "(a PyTorch profiler JSON trace, or a folder of one per rank).",
    )
    path: str | None = Field(
        None, description="With `format`: the trace file or folder, relative to this file."
    )
    step: int | None = Field(
        None, ge=0, description="kineto: the profiled step N (ProfilerStep#N); default the first."
    )
    dp_replicas: int = Field(
        1, ge=1, description="kineto: what-if, the recorded ranks as this many data-parallel copies."
    )
    host_launches: bool = Field(
        False,
        description="kineto: keep the measured kernel launch times as a host stream (host-bound steps).",
    )
    unknown: Literal["reject", "compute"] = Field(
        "reject", description="chakra: node types with no model are rejected, or run as compute ops."
    )
    tokens_per_step: float | None = Field(
        None,
        gt=0,
        description="Tokens one step trains (global batch), for cost and energy per token; for traces "
        "and imports (a model workload states its own).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadRef:
        if (self.file is None) == (self.format is None):
            raise ValueError("give either 'file' or 'format' with 'path', not both or neither")
        if self.format is not None and self.path is None:
            raise ValueError(f"format {self.format!r} needs 'path' (the trace file or folder)")
        if self.file is not None and self.path is not None:
            raise ValueError("'path' goes with 'format'; a clustersim workload is named by 'file' alone")
        if self.format != "kineto" and (self.step is not None or self.dp_replicas != 1 or self.host_launches):
            raise ValueError("'step', 'dp_replicas' and 'host_launches' apply to format: kineto only")
        if self.format != "chakra" and self.unknown != "reject":
            raise ValueError("'unknown' applies to format: chakra only")
        return self

    @property
    def ref(self) -> str:
        """The file or folder named (`file`, else `path`)."""
        return self.file if self.file is not None else str(self.path)


class ScenarioSpec(Spec):
    """A scenario file."""

    name: str = Field(description="Scenario name, used for the default results folder.")
    description: str = Field("", description="What this scenario shows.")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="Seed of every random stream in the run.")
    topology: FileRef = Field(description="Topology file.")
    workload: WorkloadRef | None = Field(
        None,
        description="Workload: {file: ...} (a step trace or a model with its layout), or "
        "{format: chakra|kineto, path: ...} (a trace imported as the run starts); "
        "or give `jobs` or `cluster`.",
    )
    jobs: list[JobSpec] = Field(
        default_factory=list,
        description="Several jobs sharing the cluster and its fabric (instead of `workload`).",
    )
    cluster: ClusterSpec | None = Field(
        None, description="A cluster over days with many jobs and a scheduler (instead of `workload`)."
    )
    calibration: list[FileRef] = Field(default_factory=list, description="Calibration profiles to apply.")
    network: NetworkSettings = Field(NetworkSettings(), description="Communication model.")
    compute: ComputeSettings = Field(ComputeSettings(), description="Compute model.")
    state: StateSpec = Field(StateSpec(), description="Degraded or down parts.")
    run: RunSettings = Field(RunSettings(), description="Run length and output.")
    preset: Literal["llama3_405b"] | None = Field(
        None, description="Failure preset (per-component rates) added before `failures`."
    )
    failures: list[FailureSpec] = Field(
        default_factory=list, description="Failure models per component class."
    )
    degradations: list[DegradationSpec] = Field(
        default_factory=list, description="Stragglers, slow or flapping links."
    )
    policy: PolicySpec | None = Field(
        None,
        description="Fault-tolerance policy; when given, the run level simulates days of training "
        "(failures, degradations and a preset need one, except under `cluster`).",
    )
    reliability: ReliabilitySpec = Field(ReliabilitySpec(), description="Run-level settings.")

    @property
    def run_level(self) -> bool:
        return self.policy is not None

    @field_validator("name")
    @classmethod
    def _one_path_component(cls, v: str) -> str:
        return check_name(v)

    @field_validator("jobs", mode="before")
    @classmethod
    def _some_jobs(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("the list of jobs is empty; give at least one job (or a `workload`)")
        return v

    @model_validator(mode="after")
    def _workload_or_jobs(self) -> ScenarioSpec:
        given = [
            k for k, v in (("workload", self.workload), ("jobs", self.jobs), ("cluster", self.cluster)) if v
        ]
        if len(given) > 1:  # none given: `load_scenario` says `workload` is missing
            raise FieldError(
                "give one of `workload` (one job), `jobs` (several on one fabric) or `cluster` (days of "
                f"a scheduler), not {' and '.join(given)}",
                field=given[-1],
            )
        return self

    @model_validator(mode="after")
    def _no_steps_for_a_cluster(self) -> ScenarioSpec:
        """A cluster runs each job for its length: `run.steps` would be ignored (refused)."""
        if self.cluster is not None and "steps" in self.run.model_fields_set:
            why = "a `cluster` runs every job for its length over `reliability.duration`"
            raise FieldError(f"{why}; `run.steps` does not apply (remove it)", field="run.steps")
        return self

    @model_validator(mode="after")
    def _faults_need_a_policy(self) -> ScenarioSpec:
        """Failures and degradations are simulated by the run level, which a `policy` turns
        on (a `cluster` runs them with or without one): without it they would be ignored."""
        if self.policy is not None or self.cluster is not None:
            return self
        what = {
            "preset": "a failure preset is",
            "failures": "failures are",
            "degradations": "degradations are",
        }
        given = [k for k in what if getattr(self, k)]
        if given:
            raise FieldError(
                f"{what[given[0]]} simulated only under a fault-tolerance `policy` (the run "
                "level): without one this scenario runs the step only; give a policy, e.g. "
                "{kind: checkpoint_restart}, or remove them",
                field=given[0],
            )
        return self

    @field_validator("calibration", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v


class Scenario:
    """A validated scenario with its file references resolved to paths."""

    def __init__(self, spec: ScenarioSpec, path: Path, doc: Document) -> None:
        self.spec = spec
        self.path = path
        self.doc = doc
        self.topology_path = resolve(path, spec.topology.file)
        if spec.workload is not None:
            first: str | None = spec.workload.ref
        elif spec.jobs:
            first = spec.jobs[0].workload.file
        else:
            first = spec.cluster.trace.file if spec.cluster and spec.cluster.trace else None
        self.workload_path = resolve(path, first) if first else path
        self.job_paths = [resolve(path, j.workload.file) for j in spec.jobs]
        self.calibration_paths = [resolve(path, c.file) for c in spec.calibration]

    @property
    def name(self) -> str:
        return self.spec.name

    def error(self, message: str, loc: tuple) -> InputError:
        return self.doc.error(message, loc)


def check_jobs(spec: ScenarioSpec, doc: Document) -> None:
    """Job names are distinct and no two explicit placements share a GPU.

    Raises:
        InputError: naming the later job's line.
    """
    seen: dict[str, int] = {}
    owner: dict[str, str] = {}
    for i, job in enumerate(spec.jobs):
        if job.name in seen:
            raise doc.error(f"job name {job.name!r} is also job {seen[job.name]}'s", ("jobs", i, "name"))
        seen[job.name] = i
        for k, x in enumerate(job.placement.gpus):
            if x in owner:
                raise doc.error(
                    f"job {job.name!r} is placed on {x!r}, which job {owner[x]!r} holds too",
                    ("jobs", i, "placement", "gpus", k),
                )
            owner[x] = job.name


#: how a missing reference says where it was looked for (`simulator.api` rewrites it for a
#: scenario given as a mapping, which has no folder of its own)
RELATIVE_TO_SCENARIO = "(resolved relative to the scenario)"


def load_scenario(path: str | Path) -> Scenario:
    """Parse and validate a scenario file; check its references exist."""
    doc = read_document(path)
    check_file_kind(doc, "scenario")
    # `workload` is required unless `jobs` or `cluster` stands in for it
    no_workload = isinstance(doc.data, dict) and not any(
        k in doc.data for k in ("workload", "jobs", "cluster")
    )
    try:
        spec = validate(ScenarioSpec, doc)
    except InputErrors as exc:
        if no_workload:
            raise InputErrors([*exc.errors, doc.error("required field is missing", ("workload",))]) from None
        raise
    if no_workload:
        raise doc.error("required field is missing", ("workload",))
    check_jobs(spec, doc)
    sc = Scenario(spec, Path(path), doc)
    check_references(sc, doc, f" {RELATIVE_TO_SCENARIO}")
    return sc


def check_references(sc: Scenario, doc: Document, where: str = "") -> None:
    """Check that the files and folders a scenario names exist.

    Raises:
        InputError: one line at the key naming the missing file or folder.
    """
    problem = not_a_file(sc.topology_path, where)
    if problem:
        raise doc.error(problem, ("topology", "file"))
    wl, p = sc.spec.workload, sc.workload_path
    if wl is not None and wl.format is None and (problem := not_a_file(p, where)):
        raise doc.error(problem, ("workload", "file"))
    if wl is not None and wl.format == "chakra" and not p.is_dir():
        raise doc.error(f"folder {str(p)!r} of Chakra trace files not found{where}", ("workload", "path"))
    if wl is not None and wl.format == "kineto" and not p.exists():
        raise doc.error(f"PyTorch profiler trace {str(p)!r} not found{where}", ("workload", "path"))
    has_trace = sc.spec.cluster is not None and sc.spec.cluster.trace is not None
    if has_trace and (problem := not_a_file(p, where)):
        raise doc.error(problem, ("cluster", "trace", "file"))
    for i, jp in enumerate(sc.job_paths):
        if problem := not_a_file(jp, where):
            raise doc.error(problem, ("jobs", i, "workload", "file"))
    for i, c in enumerate(sc.calibration_paths):
        if problem := not_a_file(c, where):
            raise doc.error(problem, ("calibration", i, "file"))
