"""Run-level studies: one or two parameters varied across seeds, on a process pool or Dask.

A study file (YAML, loaded through `simulator.config.loader`) gives the base run —
job shape, step costs (constants, or `from_scenario: path` once the step-level engine is
connected), failures (a list and/or a `preset`), degradations, policy, duration — plus up
to two `axes`. An axis names a dotted path into the study document (`policy.interval_min`,
`mtbf_scale`, `policy.pool_hosts`, `policy` with whole policy mappings as values) and its
values (shallower paths are applied first, see `simulator.study.merge.with_settings`);
every combination of axis values is a variant, validated at load time, so a bad value is
reported against the file before anything runs.

Every (variant, seed) pair is an independent task whose result depends only on its
inputs, so results are identical whichever executor runs them: `serial`, a local
`ProcessPoolExecutor` (`pool`, the default), a `dask.distributed.Client` given as an object,
or an address string (`local` starts a `LocalCluster`). Rows come back in task order.
Seeds are common random numbers across variants: variant A and B with seed s see the same
failures (when their failure models agree), which makes differences between variants far
less noisy than the per-variant intervals suggest.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import ConfigDict, Field, field_validator, model_validator

from simulator.config.base import MAX_SEED, NAME_PATTERN, Spec
from simulator.config.loader import Document, check_file_kind, read_document, validate
from simulator.errors import FieldError, InputError, InputErrors
from simulator.faults.checks import job_problems
from simulator.faults.degradation import DegradationSpec
from simulator.faults.engine import simulate_run
from simulator.faults.failure import FailureSpec
from simulator.faults.metrics import aggregate
from simulator.faults.policy import PolicySpec
from simulator.faults.preset import PRESETS
from simulator.faults.state import JobShape, ScalingOracle, StepOracle
from simulator.scenario.oracle import answer_questions, oracle_from_scenario
from simulator.scenario.spec import MAX_RUN_DURATION_S
from simulator.study.executor import LOCAL_DASK, default_workers, run_tasks
from simulator.study.labels import axis_labels, reserved_column_problem, same_value_key, value_label
from simulator.study.merge import UnsettablePath, parse_path, with_settings
from simulator.study.step_costs import StepCostsSpec
from simulator.units import to_si

log = logging.getLogger(__name__)

#: Most runs (variants × seeds) one study may hold: 10,000, some 100 times the shipped
#: studies (80 and 112). A run is a whole Monte Carlo simulation of the job (the 54-day,
#: 16,384-GPU Llama 3 405B run takes about 10 s) with its own result file, and the store's
#: manifest is rewritten after every run (`simulator.study.store`; at 10,000 runs 1.4 MB,
#: 65 ms a time), so the limit is hours of simulation and minutes of bookkeeping, and a
#: typo such as `seeds: 100000000` is refused before the task list is built.
MAX_STUDY_RUNS = 10_000


def runs_problem(variants: int, seeds: int) -> str | None:
    """Why `variants` × `seeds` runs are too many for one study, or None."""
    runs = variants * seeds
    if runs <= MAX_STUDY_RUNS:
        return None
    return (
        f"{variants:,} variant(s) × {seeds:,} seed(s) = {runs:,} runs; a study runs at most "
        f"{MAX_STUDY_RUNS:,} (each a whole Monte Carlo simulation of the job, up to some 10 s, "
        "with its own result file)"
    )


class AxisSpec(Spec):
    """One swept parameter."""

    param: str = Field(min_length=1, description="Dotted path in the study file, e.g. 'policy.interval_min'.")
    values: list[Any] = Field(min_length=1, description="Values to try (numbers, strings or mappings).")
    name: str | None = Field(
        None,
        description="Column name in the results (default: param); not a column the study "
        "writes itself (goodput, seed, variant, kind, ...).",
    )

    @property
    def column(self) -> str:
        return self.name or self.param

    @field_validator("param")
    @classmethod
    def _not_the_runs(cls, v: str) -> str:
        if v in _NOT_SWEPT:
            raise ValueError(f"{v!r} is not a swept parameter: {_NOT_SWEPT[v]}")
        return v

    @field_validator("name")
    @classmethod
    def _not_a_result_column(cls, v: str | None) -> str | None:
        if v is not None and (problem := reserved_column_problem(v)):
            raise ValueError(problem)
        return v

    @field_validator("values")
    @classmethod
    def _each_once(cls, v: list[Any]) -> list[Any]:
        """Two equal values (`a` and `a`, `10` and `10.0`, two equal mappings such as a
        policy listed twice) would be two variants of one run: simulated twice, and as
        scalars pooled under one label by any grouping on the axis."""
        seen: dict[Any, int] = {}
        for i, x in enumerate(v):
            key = same_value_key(x)
            if key in seen:
                what = f"value {x!r}" if not isinstance(x, dict | list) else "setting"
                raise FieldError(
                    f"values {seen[key]} and {i} are the same {what}; list each value once",
                    field=str(i),
                )
            seen[key] = i
        return v


#: top-level keys of a study an axis cannot set (a variant would ignore them), and why
_NOT_SWEPT = {
    "seeds": "every variant runs the study's `seeds` Monte Carlo runs (set it at the top level)",
    "seed": "the seeds are common to every variant (paired runs)",
}


class StudySpec(Spec):
    """A run-level study: base run, failures, policy, axes, seeds."""

    model_config = ConfigDict(allow_inf_nan=False)

    name: str = Field(
        "study", pattern=NAME_PATTERN, description="Study name; default results folder results/<name>."
    )
    job: JobShape = Field(description="Job shape.")
    step: StepCostsSpec = Field(description="Step-level answers (constants or from_scenario).")
    preset: Literal["llama3_405b"] | None = Field(
        None, description="Failure preset added before `failures` (per-component rates)."
    )
    failures: list[FailureSpec] = Field(default_factory=list, description="Failure models.")
    degradations: list[DegradationSpec] = Field(default_factory=list, description="Degradations.")
    policy: PolicySpec = Field(description="Fault-tolerance policy.")
    duration_s: float = Field(
        gt=0,
        le=MAX_RUN_DURATION_S,
        description="Wall time of each run, s (YAML: duration_days, duration_h); at most 10 years.",
    )
    mtbf_scale: float = Field(1.0, gt=0, description="Multiplies every MTBF.")
    seeds: int = Field(
        8, ge=1, description="Seeds per variant (Monte Carlo runs); variants × seeds at most 10,000."
    )
    seed: int = Field(0, ge=0, le=MAX_SEED, description="First seed; runs use seed, seed+1, ...")
    axes: list[AxisSpec] = Field(default_factory=list, max_length=2, description="Swept parameters (0-2).")

    @model_validator(mode="before")
    @classmethod
    def _units(cls, data: Any) -> Any:
        return to_si(data, "duration_s")

    @model_validator(mode="after")
    def _failing_parts_exist(self) -> StudySpec:
        """A failure source of a class the job has none of (`job.storage: 0` with storage
        failures) would never fire: refused at its target."""
        for i, f in enumerate(self.failures):
            if f.target == "storage" and self.job.storage == 0:
                raise FieldError(
                    "the job has no storage (job.storage: 0): storage failures would never happen",
                    field=f"failures.{i}.target",
                )
        return self

    def all_failures(self) -> list[Any]:
        base = PRESETS[self.preset]() if self.preset else []
        return [*base, *self.failures]


@dataclass(frozen=True)
class Variant:
    """One combination of axis values and the study it gives."""

    index: int
    labels: dict[str, Any]
    spec: StudySpec


@dataclass(frozen=True)
class Study:
    """A loaded study: the base spec and every variant."""

    spec: StudySpec
    variants: list[Variant]
    base_dir: Path


def build_oracle(spec: StudySpec, base_dir: Path) -> StepOracle:
    """The step oracle a study asks: constants, or the scenario's step simulation."""
    s = spec.step
    if s.from_scenario is not None:
        return oracle_from_scenario(base_dir / s.from_scenario)
    step = float(s.step_time_s)  # type: ignore[arg-type]
    write = float(s.checkpoint_write_s)  # type: ignore[arg-type]
    return ScalingOracle(
        full_dp_replicas=spec.job.dp_replicas,
        compute_s=step * (1 - s.comm_fraction),
        comm_s=step * s.comm_fraction,
        down_link_penalty=s.down_link_penalty,
        drain_slowdown=s.drain_slowdown,
        write_s=write,
        snapshot_s=s.checkpoint_snapshot_s,
        load_storage_s=write if s.checkpoint_load_storage_s is None else s.checkpoint_load_storage_s,
        load_peer_s=s.checkpoint_load_peer_s,
    )


def _variant_data(doc: Document, settings: Sequence[tuple[AxisSpec, int, Any]]) -> dict[str, Any]:
    """The study data (without its axes) with the axis settings applied (shallow paths first,
    so `policy: {...}` is replaced before `policy.interval_min` is set).

    Args:
        doc: the study document.
        settings: (axis, axis index in the file, value) triples.

    Raises:
        InputError: a setting's param does not fit the study, pointing at that axis.
    """
    base = {key: value for key, value in doc.data.items() if key != "axes"}
    try:
        return with_settings(base, [(axis.param, value) for axis, _, value in settings])
    except UnsettablePath as exc:
        axis, i, _ = settings[exc.position]
        raise doc.error(f"cannot set {axis.param!r} in the study", ("axes", i, "param")) from None


def _culprit(
    doc: Document,
    err: InputError,
    combo: Sequence[tuple[AxisSpec, int, int, Any]],
    fails_alone: Callable[[int], bool],
) -> tuple[int, tuple[str | int, ...]] | None:
    """Which setting of `combo` (position in it) an error of the variant comes from, and the
    error's path inside the axis value, or None when no axis touches the erring field.

    The base study is valid, so the axes did it. Candidates are the axes whose param holds
    the erring field, is it, or lies inside it. With several, the one whose value alone
    (on the base study) already fails wins; else the one whose param is the field, else the
    deepest param holding it, else the deepest inside it.
    """
    loc = parse_path(err.field) if err.field else ()
    params = [parse_path(a.param) for a, _, _, _ in combo]
    holds = [j for j, p in enumerate(params) if loc[: len(p)] == p]
    inside = [j for j, p in enumerate(params) if len(p) > len(loc) and p[: len(loc)] == loc]
    related = holds + inside
    if not related:
        return None
    if len(related) > 1:
        alone = [j for j in related if fails_alone(j)]
        if len(alone) == 1:
            related = alone
        else:
            equal = [j for j in holds if len(params[j]) == len(loc)]
            related = (
                equal
                or sorted(holds, key=lambda j: -len(params[j]))
                or sorted(inside, key=lambda j: -len(params[j]))
            )
    j = related[0]
    return j, loc[len(params[j]) :] if j in holds else ()


def _variant_errors(
    doc: Document,
    exc: InputErrors,
    combo: Sequence[tuple[AxisSpec, int, int, Any]],
    fails_alone: Callable[[int, int], bool],
) -> list[InputError]:
    """The errors of one variant, each pointing at the axis value that caused it:
    `FILE:LINE: axes.N.values.K: param=value: field: message`."""
    out = []
    for e in exc.errors:
        found = _culprit(doc, e, combo, lambda j: fails_alone(combo[j][1], combo[j][2]))
        field = f"{e.field}: " if e.field else ""
        sub: tuple[str | int, ...] = ()
        if found is None:  # no axis touches the field: name every setting, point at the first
            j = 0
            what = "with " + ", ".join(f"{a.param}={value_label(v)}" for a, _, _, v in combo)
        else:
            j, sub = found
            a, _, _, v = combo[j]
            what = f"{a.param}={value_label(v)}"
        _, i, k, _ = combo[j]
        loc = ("axes", i, "values", k)
        out.append(
            InputError(
                f"{what}: {field}{e.message}",
                file=doc.path,
                line=doc.line_of((*loc, *sub)),
                field=".".join(map(str, loc)),
            )
        )
    return out


def _validated(doc: Document) -> StudySpec:
    """Validate a study document, then its fault inputs against its job and duration.

    Raises:
        InputErrors: one per problem, each `file:line: field.path: message`.
    """
    spec: StudySpec = validate(StudySpec, doc)
    preset = PRESETS[spec.preset]() if spec.preset else []
    problems = job_problems(
        spec.failures, spec.degradations, spec.policy, spec.job, spec.duration_s, spec.mtbf_scale, preset
    )
    if problems:
        raise InputErrors([doc.error(message, loc) for loc, message in problems])
    return spec


def study_from_document(doc: Document) -> Study:
    """Validate a study document and expand its axes into variants.

    A variant that does not validate is reported against the axis value that made it
    invalid (`FILE:LINE: axes.N.values.K: ...`); every such problem is reported at once.
    """
    spec = _validated(doc)
    check_study(spec, doc)
    axes = spec.axes
    variants: list[Variant] = []
    errors: dict[str, InputError] = {}
    alone: dict[tuple[int, int], bool] = {}

    def fails_alone(i: int, k: int) -> bool:
        """Whether value K of axis I fails on the base study, the other axes left out."""
        if (i, k) not in alone:
            try:
                _validated(doc.with_data(_variant_data(doc, [(axes[i], i, axes[i].values[k])])))
                alone[(i, k)] = False
            except InputError:
                alone[(i, k)] = True
        return alone[(i, k)]

    combos = itertools.product(*[list(enumerate(a.values)) for a in axes]) if axes else [()]
    axis_label = [axis_labels(a.values) for a in axes]
    for index, combo in enumerate(combos):
        settings = [(a, i, k, v) for i, (a, (k, v)) in enumerate(zip(axes, combo, strict=True))]
        data = _variant_data(doc, [(a, i, v) for a, i, _, v in settings])
        labels = {a.column: axis_label[i][k] for a, i, k, _ in settings}
        try:
            vspec = _validated(doc.with_data(data))
        except InputErrors as exc:
            for e in _variant_errors(doc, exc, settings, fails_alone):
                errors.setdefault(str(e), e)
            continue
        variants.append(Variant(index, labels, vspec))
    if errors:
        raise InputErrors(list(errors.values()))
    return Study(spec, variants, doc.path.parent)


def check_study(spec: StudySpec, doc: Document) -> None:
    """What the schema cannot see: an axis named by its param like a result column, two
    axes with one column name, more runs (variants ×
    seeds) than `MAX_STUDY_RUNS`, a `from_scenario` file that does not exist.

    Raises:
        InputError: with the line of the offending key.
    """
    seen: dict[str, int] = {}
    for i, axis in enumerate(spec.axes):
        if axis.name is None and (problem := reserved_column_problem(axis.column)):
            raise doc.error(problem, ("axes", i, "param"))
        if axis.column in seen:
            key = "name" if axis.name else "param"
            raise doc.error(
                f"axis {axis.column!r} is used twice (first at axes.{seen[axis.column]}); give each a "
                "different name",
                ("axes", i, key),
            )
        seen[axis.column] = i
    sizes = [len(axis.values) for axis in spec.axes]
    if problem := runs_problem(math.prod(sizes), spec.seeds):
        if spec.seeds >= math.prod(sizes):
            raise doc.error(problem, ("seeds",))
        raise doc.error(problem, ("axes", max(range(len(sizes)), key=sizes.__getitem__), "values"))
    if spec.step.from_scenario is not None:
        target = doc.path.parent / spec.step.from_scenario
        if not target.is_file():
            raise doc.error(
                f"file {str(target)!r} not found (resolved relative to the study file)",
                ("step", "from_scenario"),
            )


def load_study(path: str | Path) -> Study:
    """Read, validate and expand a study file."""
    doc = read_document(path)
    check_file_kind(doc, "study")
    return study_from_document(doc)


def study_from_data(data: dict[str, Any], path: str | Path = "<study>") -> Study:
    """A study from an in-memory mapping (tests, notebooks)."""
    return study_from_document(Document(Path(path), data, {}))


# --- running ---------------------------------------------------------------------------


def run_one(spec: StudySpec, seed: int, base_dir: Path | str = ".") -> dict[str, float]:
    """Simulate one seed of one study variant and return its summary."""
    return _simulate(spec, seed, build_oracle(spec, Path(base_dir))).summary


def _simulate(spec: StudySpec, seed: int, oracle: StepOracle) -> Any:
    """One run of a study variant on `oracle` (the `RunLevelResult`)."""
    return simulate_run(
        spec.job,
        oracle,
        spec.all_failures(),
        spec.policy,
        spec.duration_s,
        seed,
        degradations=spec.degradations,
        mtbf_scale=spec.mtbf_scale,
    )


def _task(args: tuple[int, dict[str, Any], StudySpec, int, StepOracle]) -> dict[str, Any]:
    index, labels, spec, seed, oracle = args
    row: dict[str, Any] = {"variant": index, **labels, "seed": seed}
    result = _simulate(spec, seed, oracle)
    row.update(result.summary)
    return row


def store_task(
    args: tuple[int, dict[str, Any], StudySpec, int, StepOracle, tuple[str, ...]],
) -> dict[str, pd.DataFrame]:
    """One task of a stored study: its summary row (`runs`) and the other frames asked for
    (`incidents`, `segments`), each with the variant, axis and seed columns first."""
    index, labels, spec, seed, oracle, kept = args
    result = _simulate(spec, seed, oracle)
    keys: dict[str, Any] = {"variant": index, **labels, "seed": seed}
    frames = {"runs": pd.DataFrame([{**keys, **result.summary}])}
    for name in (n for n in ("incidents", "segments") if n in kept):
        df = getattr(result, name).copy()
        for pos, (col, value) in enumerate(keys.items()):
            df.insert(pos, col, [value] * len(df))
        frames[name] = df
    return frames


def study_oracles(
    study: Study,
    on_progress: Callable[[int, int], None] | None = None,
    executor: Executor = "serial",
    max_workers: int | None = None,
) -> dict[int, StepOracle]:
    """One oracle per distinct step spec, built here and, for a scenario, warmed before the
    runs, so that the runs' workers get the answers instead of re-running step simulations.

    The warming step simulations run on `executor` too (in groups that are independent, see
    `SimulatedOracle.warm_groups`): the same simulations as in this process, so the same
    answers.

    Args:
        on_progress: called with (questions answered, questions in all) as the scenario
            oracles are warmed (the step simulations a study starts with).
        executor: where the warming simulations run ('serial': in this process).
        max_workers: pool size (default: CPU count).
    """
    by_step: dict[str, StepOracle] = {}
    out: dict[int, StepOracle] = {}
    for v in study.variants:
        key = v.spec.step.model_dump_json()
        if key not in by_step:
            by_step[key] = build_oracle(v.spec, study.base_dir)
        out[v.index] = by_step[key]
    draining = any(
        getattr(x.spec.policy, "kind", "") in ("async_checkpoint", "in_memory") for x in study.variants
    )
    first: dict[str, Any] = {}
    for v in study.variants:
        first.setdefault(v.spec.step.model_dump_json(), v)
    warmable = [(by_step[k], v) for k, v in first.items() if getattr(by_step[k], "warm", None) is not None]
    total = sum(o.warm_questions(draining) for o, _ in warmable)  # type: ignore[attr-defined]
    done = [0]

    def tick() -> None:
        done[0] += 1
        if on_progress is not None:
            on_progress(done[0], total)

    if executor == "serial" or (executor in (None, "pool") and default_workers(2, max_workers) == 1):
        for oracle, v in warmable:
            oracle.warm(v.spec.job.dp_replicas, draining=draining, on_answer=tick)  # type: ignore[attr-defined]
        return out
    tasks = [
        (o, (str(o.scenario_path), v.spec.job.dp_replicas, group))  # type: ignore[attr-defined]
        for o, v in warmable
        for group in o.warm_groups(v.spec.job.dp_replicas, draining)  # type: ignore[attr-defined]
    ]

    def learned(i: int, answers: Any) -> None:
        tasks[i][0].learn(answers)  # type: ignore[attr-defined]
        for _ in tasks[i][1][2]:
            tick()

    map_tasks(answer_questions, [t for _, t in tasks], executor, max_workers, learned)
    return out


Executor = Literal["serial", "pool"] | str | Any


def map_tasks(
    fn: Callable[[Any], Any],
    tasks: Sequence[Any],
    executor: Executor = "pool",
    max_workers: int | None = None,
    on_done: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """Run `fn` over `tasks`, results in task order, on the chosen executor.

    Args:
        executor: 'serial'; 'pool' (local process pool); a `dask.distributed.Client`; or a
            Dask scheduler address ('local' starts a `LocalCluster` for the call).
        max_workers: pool size (default: CPU count).
    """

    return run_tasks(
        fn, tasks, LOCAL_DASK if executor == "local" else executor, max_workers=max_workers, on_done=on_done
    )


def run_study(
    study: Study,
    seeds: int | None = None,
    executor: Executor = "pool",
    max_workers: int | None = None,
    on_done: Callable[[int, Any], None] | None = None,
) -> pd.DataFrame:
    """Every variant × seed; a tidy frame (one row per run: variant, axis columns, seed, metrics)."""
    n = seeds or study.spec.seeds
    if problem := runs_problem(len(study.variants), n):
        raise InputError(problem, field="seeds")
    oracles = study_oracles(study, executor=executor, max_workers=max_workers)
    tasks = [
        (v.index, v.labels, v.spec, v.spec.seed + k, oracles[v.index])
        for v in study.variants
        for k in range(n)
    ]
    rows = map_tasks(_task, tasks, executor, max_workers, on_done)
    df = pd.DataFrame(rows)
    df.attrs["axes"] = [a.column for a in study.spec.axes]
    return df


def run_seeds(
    job: JobShape,
    oracle: StepOracle,
    failures: Sequence[Any],
    policy: Any,
    duration_s: float,
    seeds: Iterable[int],
    executor: Executor = "serial",
    max_workers: int | None = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """Monte Carlo of one configuration: one summary row per seed (oracle must pickle for pools)."""
    tasks = [(job, oracle, list(failures), policy, duration_s, s, kwargs) for s in seeds]
    return pd.DataFrame(map_tasks(_seed_task, tasks, executor, max_workers))


def _seed_task(args: tuple[Any, ...]) -> dict[str, Any]:
    job, oracle, failures, policy, duration_s, seed, kwargs = args
    return {"seed": seed, **simulate_run(job, oracle, failures, policy, duration_s, seed, **kwargs).summary}


def summarize_study(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and 95% t-interval of each metric per variant."""
    axes = list(runs.attrs.get("axes", []))
    return aggregate(runs, by=["variant", *axes])
