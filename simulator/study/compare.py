"""Compare files: one base scenario and named variants of it, run side by side.

```yaml
name: rail-only-vs-clos
base: {file: tp8-dp32-rail-clos.yaml}          # a scenario, relative to this file
variants:
  - {name: rail-clos}                            # the base as is
  - name: rail-only
    topology: {file: ../topologies/h100-rail-only-32n.yaml}
  - name: clos-2to1
    topology: {params: {oversubscription: 2}}    # edit the base's topology file's keys
  - name: tree
    network: {algorithms: {all_reduce: tree}}    # partial override, deep-merged
```

A variant overrides parts of the base scenario: its mapping is deep-merged into the base
scenario's YAML mapping (`simulator.study.merge.deep_merge`: mappings merge key by key;
lists and scalars replace; a key set to null is removed, so its default applies), then the
result is validated by `ScenarioSpec` exactly as a scenario file would be. File references
a variant names resolve relative to the compare file; those of the base, relative to the
base scenario. `topology.params` edits keys of the topology file itself (generator
parameters such as `oversubscription`, `nodes`) without writing a new file.

Errors name the compare file and the variant's line when the variant caused them, the
base scenario's file and line otherwise (the base is validated alone first).

Running: every variant is prepared (loaded, validated, cluster and program built) here,
so bad input fails before anything runs; then each variant is simulated by one task of
`simulator.study.executor.run_tasks` (serial, process pool or Dask). A task returns the run's
frames (with a `variant` column) and summary, plus the network's cost estimate when a
price table is found. The comparison table has one row per variant in file order, so
it is identical whichever executor ran the tasks.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import Field, field_validator

import simulator
from simulator.config.base import MAX_SEED, NAME_PATTERN, FileRef, Spec
from simulator.config.loader import Document, Loc, check_file_kind, read_document, validate
from simulator.errors import ClustersimError, InputError, lines_at
from simulator.network.cost import DEFAULT_PRICES, PriceSpec, cost_summary, estimate_cost, load_prices
from simulator.network.prices import with_amortization
from simulator.network.topology import resolve
from simulator.scenario.execute import execute
from simulator.scenario.oracle import check_run_level
from simulator.scenario.prepare import prepare_scenario
from simulator.scenario.spec import Scenario, ScenarioSpec, WorkloadRef, check_references, load_scenario
from simulator.study.executor import OnDone, run_tasks
from simulator.study.merge import deep_merge, leaf_paths

#: Files a comparison folder holds beside the variants' run folders (`clustersim compare`):
#: no variant may be named like one (its run folder would take the file's place).
FOLDER_FILES = (
    "comparison.csv",
    "comparison.parquet",
    "comparison.html",
    "compare.resolved.yaml",
    "manifest.json",
    "plotly.min.js",
)

# ----------------------------------------------------------------------------- schema


class TopologyOverride(Spec):
    """Which topology a variant runs on: another file, edited keys of a file, or both."""

    file: str | None = Field(
        None,
        description="Topology file relative to the compare file (default: the base scenario's).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Keys of the topology file to replace (deep-merged; null removes a key), "
        "e.g. {oversubscription: 2} or {nic: connectx7-400g-ib, nic_gbps: null}.",
    )


class VariantSpec(Spec):
    """One variant: a name and the parts of the base scenario it changes."""

    name: str = Field(
        pattern=NAME_PATTERN,
        description="Variant name (letters, digits, . _ + -); its results folder.",
    )
    description: str = Field("", description="What this variant changes and why.")
    seed: int | None = Field(
        None, ge=0, le=MAX_SEED, description="Seed of this variant (default: the base scenario's)."
    )

    topology: TopologyOverride | None = Field(None, description="Topology file and/or edited topology keys.")
    workload: WorkloadRef | None = Field(
        None, description="Workload (replaces the base's), its file or path relative to the compare file."
    )
    calibration: list[FileRef] | None = Field(
        None,
        description="Calibration profiles (replace the base's list; [] for none), "
        "relative to the compare file.",
    )
    network: dict[str, Any] | None = Field(
        None,
        description="Partial override of the scenario's `network` (e.g. {algorithms: {all_reduce: tree}}).",
    )
    compute: dict[str, Any] | None = Field(None, description="Partial override of the scenario's `compute`.")
    state: dict[str, Any] | None = Field(
        None,
        description="Partial override of the scenario's `state` (down/degraded links, stragglers).",
    )
    run: dict[str, Any] | None = Field(
        None, description="Partial override of the scenario's `run` (e.g. {steps: 2})."
    )
    jobs: list[dict[str, Any]] | None = Field(
        None,
        description="The scenario's `jobs` (replace the base's list; e.g. other placements); "
        "workload files relative to the compare file.",
    )
    cluster: dict[str, Any] | None = Field(
        None, description="Partial override of the scenario's `cluster` (e.g. {scheduler: fifo})."
    )

    @field_validator("calibration", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v

    @field_validator("name")
    @classmethod
    def _not_a_folder_file(cls, v: str) -> str:
        if v in FOLDER_FILES:
            raise ValueError(f"{v!r} is a file of the comparison folder; name the variant otherwise")
        return v


class CostSettings(Spec):
    """How the network cost columns are computed (when the cost model is available)."""

    prices: FileRef | None = Field(
        None,
        description="Price table relative to the compare file (default: topologies/prices.yaml).",
    )
    amortization_years: float | None = Field(
        None,
        gt=0,
        description="Years over which capex is spread, for every cost column of every variant "
        "(default: the price table's facility.amortization_years).",
    )


class CompareSpec(Spec):
    """A compare file: a base scenario and the variants to run side by side."""

    name: str = Field(
        pattern=NAME_PATTERN, description="Comparison name; default results folder results/<name>."
    )
    description: str = Field("", description="What this comparison shows.")
    base: FileRef = Field(description="The base scenario file, relative to the compare file.")
    variants: list[VariantSpec] = Field(
        min_length=1, description="Variants in display order (the first is the reference)."
    )
    cost: CostSettings = Field(default_factory=CostSettings, description="Network cost estimate settings.")


# ----------------------------------------------------------------------------- merging


class MergedDocument(Document):
    """A merged mapping whose errors point at whichever file supplied the offending key.

    Args:
        data: the merged mapping.
        base: the document the merge started from (errors default to it).
        over: the document holding the overrides (the compare file).
        over_prefix: where the overrides sit in `over` (e.g. ("variants", 2)).
        overridden: key paths (in `data`'s terms) the overrides supplied.
    """

    def __init__(
        self, data: Any, base: Document, over: Document, over_prefix: Loc, overridden: set[Loc]
    ) -> None:
        super().__init__(base.path, data, base.lines)
        self.base, self.over, self.over_prefix, self.overridden = (
            base,
            over,
            over_prefix,
            overridden,
        )

    def error(self, message: str, loc: Loc = ()) -> InputError:
        loc = tuple(loc)
        from_over = any(loc[:k] in self.overridden for k in range(len(loc), 0, -1)) or any(
            o[: len(loc)] == loc for o in self.overridden
        )
        if from_over:
            return self.over.error(message, (*self.over_prefix, *loc))
        return self.base.error(message, loc)


def _rebase(ref: str, from_file: Path, to_file: Path) -> str:
    """A file reference written relative to `from_file`, rewritten relative to `to_file`."""
    target = resolve(from_file, ref)
    if target.is_absolute() and not Path(ref).expanduser().is_absolute():
        return str(target)
    try:
        return os.path.relpath(target, to_file.parent)
    except ValueError:  # pragma: no cover - other drive on Windows
        return str(target.resolve())


# ----------------------------------------------------------------------------- loading


@dataclass
class Variant:
    """A variant, merged and validated; `prepared` is ready to execute."""

    name: str
    index: int
    description: str
    scenario_data: dict[str, Any]
    topology_params: dict[str, Any]
    prepared: Any  # PreparedRun


@dataclass
class Comparison:
    """A loaded compare file: its spec, base scenario and prepared variants."""

    spec: CompareSpec
    path: Path
    doc: Document
    base: Scenario
    variants: list[Variant] = field(default_factory=list)
    prices: PriceSpec | None = None  # price table of the network cost estimate, if one is found

    @property
    def name(self) -> str:
        return self.spec.name


def variant_overrides(v: VariantSpec, compare_path: Path, base_path: Path) -> dict[str, Any]:
    """The scenario mapping a variant merges into the base (file references rebased)."""
    over: dict[str, Any] = {}
    if v.seed is not None:
        over["seed"] = v.seed
    if v.topology is not None and v.topology.file is not None:
        over["topology"] = {"file": _rebase(v.topology.file, compare_path, base_path)}
    if v.workload is not None:
        key = "file" if v.workload.file is not None else "path"
        over["workload"] = {
            **v.workload.model_dump(exclude_defaults=True),
            key: _rebase(v.workload.ref, compare_path, base_path),
        }
    if v.calibration is not None:
        over["calibration"] = [{"file": _rebase(c.file, compare_path, base_path)} for c in v.calibration]
    if v.jobs is not None:
        over["jobs"] = [
            {
                **j,
                "workload": {
                    **j["workload"],
                    "file": _rebase(str(j["workload"]["file"]), compare_path, base_path),
                },
            }
            if isinstance(j.get("workload"), dict) and "file" in j["workload"]
            else j
            for j in v.jobs
        ]
    for key in ("network", "compute", "state", "run", "cluster"):
        part = getattr(v, key)
        if part is not None:
            over[key] = part
    return over


def _prepare_variant(cmp: Comparison, i: int, v: VariantSpec) -> Variant:
    base = cmp.base
    over = variant_overrides(v, cmp.path, base.path)
    data = deep_merge(base.doc.data, over)
    if "workload" in over:  # a workload replaces the base's (file and format do not mix)
        data["workload"] = over["workload"]
    overridden = leaf_paths(over)
    # the variant spells scenario keys at the same paths, under variants.<i>
    vdoc = _VariantView(cmp.doc, i)
    mdoc = MergedDocument(data, base.doc, vdoc, (), overridden)
    spec = validate(ScenarioSpec, mdoc)
    scenario = Scenario(spec, base.path, mdoc)
    check_references(scenario, mdoc)

    params = dict(v.topology.params) if v.topology is not None else {}
    tdoc = read_document(scenario.topology_path)
    if params:
        if not isinstance(tdoc.data, dict):
            raise tdoc.error("expected a mapping")
        tdata = deep_merge(tdoc.data, params)
        if "name" in tdata and "name" not in params:
            tdata["name"] = f"{tdata['name']} [" + ", ".join(f"{k}={params[k]}" for k in params) + "]"
        tdoc = MergedDocument(tdata, tdoc, cmp.doc, ("variants", i, "topology", "params"), leaf_paths(params))
    try:
        prep = prepare_scenario(scenario, topology_doc=tdoc, prices=cmp.prices)
    except InputError as exc:  # met in a file the variants share (workload, topology): say whose
        if exc.file == str(cmp.path):
            raise
        raise exc.prefixed(f"variant {v.name!r}: ") from None
    check_run_level(prep, f"variant {v.name!r}: ")  # a run-level variant's policy over its topology
    return Variant(v.name, i, v.description, data, params, prep)


class _VariantView(Document):
    """The compare file seen from one variant: scenario key paths map to the variant's keys."""

    def __init__(self, doc: Document, index: int) -> None:
        super().__init__(doc.path, doc.data, doc.lines)
        self.doc, self.index = doc, index

    def error(self, message: str, loc: Loc = ()) -> InputError:
        return self.doc.error(message, ("variants", self.index, *tuple(loc)))


def load_comparison(path: str | Path) -> Comparison:
    """Parse, validate and prepare a compare file and every variant (nothing runs)."""
    path = Path(path)
    doc = read_document(path)
    check_file_kind(doc, "compare")
    spec: CompareSpec = validate(CompareSpec, doc)
    seen: dict[str, int] = {}
    for i, v in enumerate(spec.variants):
        if v.name in seen:
            raise doc.error(
                f"variant name {v.name!r} is used twice (first at variant {seen[v.name]})",
                ("variants", i, "name"),
            )
        seen[v.name] = i
    base_path = resolve(path, spec.base.file)
    if not base_path.is_file():
        raise doc.error(
            f"file {str(base_path)!r} not found (resolved relative to the compare file)",
            ("base", "file"),
        )
    base = load_scenario(base_path)
    cmp = Comparison(spec, path, doc, base)
    if spec.cost.prices is not None:
        prices_path = resolve(path, spec.cost.prices.file)
        if not prices_path.is_file():
            raise doc.error(f"file {str(prices_path)!r} not found", ("cost", "prices", "file"))
        cmp.prices = load_prices(prices_path)
    elif DEFAULT_PRICES.is_file():
        cmp.prices = load_prices()
    if cmp.prices is not None and spec.cost.amortization_years is not None:
        cmp.prices = with_amortization(cmp.prices, spec.cost.amortization_years)
    for i, v in enumerate(spec.variants):
        cmp.variants.append(_prepare_variant(cmp, i, v))
    return cmp


# ----------------------------------------------------------------------------- running


@dataclass
class VariantTask:
    """What a worker needs to simulate one variant (picklable; no open files)."""

    compare: str
    variant: str
    prepared: Any
    prices: PriceSpec | None = None
    steps: int | None = None
    topology_params: dict[str, Any] = field(default_factory=dict)  # the variant's edits of the topology
    at: tuple[str | None, int | None, str | None] = (None, None, None)  # its place in the compare file


@dataclass
class VariantOutcome:
    """A worker's answer: the run result, or the user error it hit."""

    variant: str
    result: Any = None  # RunResult
    error: tuple[str, int, list[str]] | None = None  # (type, exit code, lines)


def network_cost(graph: Any, prices: PriceSpec | None, gpus: int | None) -> dict[str, float]:
    """Capex and power of a topology's network, `{}` without a price table.

    Args:
        graph: the topology graph.
        prices: the price table (None: no cost columns).
        gpus: GPUs of the topology, for the capex per GPU (None or 0: left out).
    """
    if prices is None:
        return {}
    totals = cost_summary(estimate_cost(graph, prices), gpus)
    out = {
        "network_capex_usd": float(totals["capex_usd"]),
        "network_power_w": float(totals["power_w"]),
    }
    if gpus:
        out["network_capex_per_gpu_usd"] = out["network_capex_usd"] / gpus
    return out


def simulate_variant(task: VariantTask) -> VariantOutcome:
    """Run one variant (executed in a worker). Deterministic given the task."""
    try:
        prep = task.prepared
        if task.steps is not None:
            sc = prep.scenario.spec
            prep.scenario.spec = sc.model_copy(
                update={"run": sc.run.model_copy(update={"steps": task.steps})}
            )
        overrides = {"run.steps": task.steps} if task.steps is not None else None
        result = execute(prep, overrides=overrides, prices=task.prices)  # the comparison's own table
    except ClustersimError as err:
        lines = lines_at(err, f"variant {task.variant!r}: ", *task.at)
        return VariantOutcome(task.variant, error=(type(err).__name__, err.exit_code, lines))
    frames = {}
    for name, df in result.frames.items():
        df = df.copy()
        df.insert(0, "variant", task.variant)
        frames[name] = df
    result.frames = frames
    result.summary = {"variant": task.variant, "compare": task.compare, **result.summary}
    # the whole cluster's network, where the run's cost columns (the job's share) left it out
    network = network_cost(prep.topology.graph, task.prices, result.summary.get("gpus_in_topology"))
    for k, v in network.items():
        result.summary.setdefault(k, v)
    # several jobs on one fabric are not priced per job (docs/cost.md), as `run` leaves them
    result.resolved["variant"] = task.variant
    result.resolved["compare"] = task.compare
    if task.topology_params:  # the topology file is the base's; these edits made the variant's
        result.resolved["topology_params"] = task.topology_params
        result.resolved["topology_name"] = prep.topology.name
    return VariantOutcome(task.variant, result=result)


def compare_fingerprint(cmp: Comparison, steps: int | None, dashboards: bool = True) -> str:
    """What makes two runs of a comparison the same: the compare file, every variant's merged
    scenario and topology edits, the steps override, whether the variants have dashboards
    and the version (the contents of the files they reference are not included)."""
    data = {
        "compare": cmp.doc.data,
        "variants": [[v.name, v.scenario_data, v.topology_params] for v in cmp.variants],
        "steps": steps,
        "version": simulator.__version__,
        **({} if dashboards else {"dashboards": False}),  # the default keeps its old fingerprint
    }
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def variant_tasks(cmp: Comparison, steps: int | None = None, skip: Iterable[str] = ()) -> list[VariantTask]:
    """One task per variant (file order), leaving out the variants named in `skip`."""
    left_out = set(skip)
    at = {v.name: cmp.doc.error("", ("variants", v.index)).place for v in cmp.variants}
    return [
        VariantTask(cmp.name, v.name, v.prepared, cmp.prices, steps, dict(v.topology_params), at[v.name])
        for v in cmp.variants
        if v.name not in left_out
    ]


class VariantFailed(ClustersimError):
    """A variant could not be simulated; carries the worker's error lines (each names the variant)."""

    def __init__(self, variant: str, kind: str, exit_code: int, lines: list[str]) -> None:
        self.exit_code = exit_code
        self._lines = list(lines)
        super().__init__(self._lines[0])

    def lines(self) -> list[str]:
        return self._lines


def run_comparison(
    cmp: Comparison,
    executor: Any = "pool",
    *,
    max_workers: int | None = None,
    on_done: OnDone | None = None,
    steps: int | None = None,
) -> list[Any]:
    """Simulate every variant; RunResults in the compare file's order."""
    tasks = variant_tasks(cmp, steps)
    outcomes = run_tasks(simulate_variant, tasks, executor, max_workers=max_workers, on_done=on_done)
    for o in outcomes:
        if o.error is not None:
            kind, code, lines = o.error
            raise VariantFailed(o.variant, kind, code, lines)
    return [o.result for o in outcomes]


# ----------------------------------------------------------------------------- tables

TABLE_FIRST = [
    "variant",
    "topology",
    "gpus_in_job",
    "steps",
    "step_time_s",
    "relative_step_time",
    "compute_s",
    "comm_s",
    "exposed_comm_s",
    "idle_s",
]
TABLE_OPTIONAL = [
    "mfu",
    "tflops_per_gpu",
    "tokens_per_s",
    "network_capex_usd",
    "network_power_w",
    "network_capex_per_gpu_usd",
    "network_usd_per_mtoken",
    "capex_usd",
    "capex_per_gpu_usd",
    "usd_per_step",
    "usd_per_mtoken",
    "energy_per_step_j",
    "energy_per_token_j",
    "mean_facility_power_w",
    *(f"capex_{part}_usd" for part in ("gpus", "servers", "storage", "switches", "nics", "cables")),
    "amortization_years",
    "electricity_usd_per_kwh",
    "pue",
    # several jobs on one fabric, and cluster runs
    "n_jobs",
    "max_slowdown",
    "mean_slowdown",
    "gpu_utilization",
    "jobs_finished",
    "mean_queueing_delay_s",
    "median_jct_s",
    "lost_work_gpu_h",
    # run-level scenarios (failures and checkpoints over the run's days)
    "goodput",
    "ettr",
]


def comparison_table(results: list[Any]) -> pd.DataFrame:
    """One row per variant (input order): step time, breakdown, MFU, cost where known.

    Columns (SI): variant, topology, gpus_in_job, steps, step_time_s, relative_step_time
    (step time over the first variant's), compute_s, comm_s, exposed_comm_s, idle_s,
    exposed_<tag>_s for every tag any variant has (0 where absent), then when any
    variant has them: mfu, tflops_per_gpu, tokens_per_s, network_capex_usd,
    network_power_w, network_capex_per_gpu_usd, network_usd_per_mtoken (the run's: the
    job's share of the network capex spread over the amortization years, per 10^6 tokens),
    the run's cost and energy columns, busiest_link and busiest_link_utilization (mean over
    the run).
    Wall time is left out so the table is identical whichever executor ran.
    """
    rows = []
    for r in results:
        s = r.summary
        row: dict[str, Any] = {k: s.get(k) for k in TABLE_FIRST if k != "relative_step_time"}
        row["variant"] = s.get("variant", r.name)
        for tag, v in sorted(s.get("exposed_comm_by_tag_s", {}).items()):
            row[f"exposed_{tag}_s"] = v
        for k in TABLE_OPTIONAL:
            if k in s:
                row[k] = s[k]
        links = s.get("busiest_links") or []
        row["busiest_link"] = links[0]["link"] if links else ""
        row["busiest_link_utilization"] = float(links[0]["mean_utilization"]) if links else 0.0
        rows.append(row)
    df = pd.DataFrame.from_records(rows)
    if df.empty:
        return df
    first = df["step_time_s"].iloc[0]
    df["relative_step_time"] = df["step_time_s"] / first if first and not math.isnan(first) else float("nan")
    tags = sorted(c for c in df.columns if c.startswith("exposed_") and c != "exposed_comm_s")
    df[tags] = df[tags].fillna(0.0)
    optional = [c for c in TABLE_OPTIONAL if c in df.columns]
    cols = [*TABLE_FIRST, *tags, *optional, "busiest_link", "busiest_link_utilization"]
    return df[cols].reset_index(drop=True)


def concat_frames(results: list[Any], name: str) -> pd.DataFrame:
    """One frame kind of every variant, stacked in variant order (each has a `variant` column)."""
    parts = [r.frames[name] for r in results if name in r.frames]
    if not parts:
        return pd.DataFrame()
    return pd.concat(parts, ignore_index=True)
