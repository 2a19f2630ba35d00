"""The Python API: run scenarios, comparisons and studies from a notebook or a script.

    from simulator import api

    result = api.run("scenarios/quickstart.yaml")        # or a mapping, see `run`
    result.summary["step_time_s"], result.frames["steps"]
    table = api.compare("scenarios/compare-oversubscription.yaml").table
    study = api.sweep("tests/study/data/interval_study.yaml", seeds=2)
    study.summary                                         # mean and 95% interval per variant

The same code paths as the command line (`clustersim run`, `compare`, `sweep`): same
validation, same one-line errors (raised as `simulator.errors.ClustersimError` subclasses
instead of printed), same frames and summary, same bytes when written. Nothing is written
unless asked (`output=`, or `Result.write`). `docs/api.md` has a worked example.

Simplified: runs go in this process one after the other (`compare` and `sweep` take an
`executor` for a process pool); there are no progress bars (pass `on_step` / `on_done`).
"""

from __future__ import annotations

import numbers
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel

from simulator.config.loader import Document
from simulator.errors import InputError, InputErrors, shown
from simulator.io import ResultsFolder
from simulator.metrics.store import read_frames, read_summary
from simulator.scenario.execute import RunResult, execute
from simulator.scenario.prepare import check_output_folder, prepare
from simulator.scenario.spec import RELATIVE_TO_SCENARIO, RunSettings, ScenarioSpec
from simulator.study.checks import check_study_checkpoints, check_study_step
from simulator.study.compare import comparison_table, load_comparison, run_comparison
from simulator.study.executor import LOCAL_DASK
from simulator.study.sweep import StudySpec, load_study, run_study, study_from_data, summarize_study
from simulator.viz.dashboard import load_graph, run_dashboard_html

__all__ = ["Comparison", "Result", "Study", "compare", "load", "run", "sweep"]


@dataclass
class Result:
    """One run: its frames (pandas DataFrames by name) and its summary (summary.json).

    Attributes:
        name: the scenario's name.
        frames: `ops`, `flows`, `links`, `steps` (and `incidents`, `segments`, `runs`,
            `power` for a run under failures); columns in `docs/metrics.md`.
        summary: the headline figures (`step_time_s`, `mfu`, `goodput`, ...).
        folder: where the run was written or read from, if anywhere.
    """

    name: str
    frames: dict[str, pd.DataFrame]
    summary: dict[str, Any]
    folder: Path | None = None
    _run: RunResult | None = field(default=None, repr=False)

    def __getitem__(self, frame: str) -> pd.DataFrame:
        """`result["steps"]` is `result.frames["steps"]`."""
        return self.frames[frame]

    def write(self, folder: str | Path, dashboard: bool = True) -> Path:
        """Write frames, summary.json and dashboard.html as `clustersim run -o FOLDER` does."""
        if self._run is None:
            raise InputError("this result was read from a folder; it is already written", file=self.folder)
        out = Path(folder)
        check_output_folder(out)
        with ResultsFolder(out) as staged:  # replaced whole, as by the command line
            self._run.write(staged.stage(), dashboard=dashboard)
            staged.commit()
        self.folder = out
        return out

    def dashboard_html(self) -> str:
        """The run's dashboard page (it loads `plotly.min.js` from beside it; see
        `simulator.viz.dashboard.write_page`): the page the run writes, or for a result
        read from a folder the page `clustersim dashboard` rebuilds there, topology
        included (from the folder's `topology.json`)."""
        if self._run is not None:
            return run_dashboard_html(self.frames, self.summary, self._run.graph)
        graph = load_graph(self.folder) if self.folder is not None else None
        return run_dashboard_html(self.frames, self.summary, graph)


def _of_mapping(exc: InputError, path: Path, base_dir: Path) -> InputError:
    """`exc` placed in the mapping given instead of the file it was written to for the run
    (gone by now, its lines not the caller's): `<scenario mapping>: field.path: message`. A
    reference the loader says it resolved "relative to the scenario" was resolved against
    `base_dir`, and the message says so (the mapping has no folder of its own)."""
    errors = exc.errors if isinstance(exc, InputErrors) else [exc]
    where = f"(resolved relative to base_dir {str(base_dir.resolve())!r})"
    placed = [
        InputError(e.message.replace(RELATIVE_TO_SCENARIO, where), file=MAPPING, field=e.field)
        if e.file == str(path)
        else e
        for e in errors
    ]
    return InputErrors(placed) if len(placed) > 1 else placed[0]


#: how errors in a scenario given as a mapping name it
MAPPING = "<scenario mapping>"


def _absolute_files(node: Any, base: Path) -> Any:
    """A copy of a scenario mapping with every `{file: relative}` reference, and the `path` of
    an imported trace (`{format: ..., path: relative}`), made absolute."""
    if isinstance(node, Mapping):
        out = {k: _absolute_files(v, base) for k, v in node.items()}
        for key in ("file", "path") if "format" in out else ("file",):
            ref = out.get(key)
            if isinstance(ref, str) and not Path(ref).is_absolute():
                out[key] = str((base / ref).resolve())
        return out
    if isinstance(node, list):
        return [_absolute_files(v, base) for v in node]
    return node


def _whole(value: Any, argument: str, model: type[BaseModel], key: str) -> int | None:
    """`value` of the keyword `argument`, an override of the field `key` of `model`, checked as
    the loader checks that field in a file: a whole number (not a bool, a float or text)
    within the field's bounds. None (no override) stays None.

    Raises:
        InputError: `argument: message`, one line.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"expected a whole number, found {shown(value)}", field=argument)
    for bound in model.model_fields[key].metadata:
        if (lo := getattr(bound, "ge", None)) is not None and value < lo:
            raise InputError(f"input should be greater than or equal to {lo}, got {value}", field=argument)
        if (hi := getattr(bound, "le", None)) is not None and value > hi:
            raise InputError(f"input should be less than or equal to {hi:,}, got {value}", field=argument)
    return int(value)


def _source(value: Any, argument: str, mapping: bool = True) -> None:
    """Refuse a file or folder argument (`scenario`, `study`, `file`, `output`, `base_dir`,
    `folder`) that is neither a path (str or Path) nor, where `mapping` allows one, a
    mapping of the file's content."""
    kinds = (str, Path, Mapping) if mapping else (str, Path)
    if not isinstance(value, kinds):
        what = "a file (str or Path) or a mapping" if mapping else "a file (str or Path)"
        raise InputError(f"expected {what}, found {type(value).__name__} {shown(value)}", field=argument)


def _executor(value: Any) -> None:
    """Refuse an executor that is neither a name ('serial', 'pool', 'local-dask'), a
    scheduler address (`host:port`, `tcp://...`) nor a Dask client: it would fail deep in the
    task runner (a word such as 'bogus' was tried as an address, in the command line's words,
    and left a half-made client behind); None is the local pool."""
    named = isinstance(value, str) and (value in ("serial", "pool", LOCAL_DASK) or ":" in value)
    if value is not None and not named and not callable(getattr(value, "submit", None)):
        raise InputError(
            f"expected 'serial', 'pool', a Dask scheduler address or a Dask client, found {shown(value)}",
            field="executor",
        )


def _callback(value: Any, argument: str) -> None:
    """Refuse a progress callback that cannot be called (it would fail deep in the engine)."""
    if value is not None and not callable(value):
        raise InputError(f"expected a function or None, found {shown(value)}", field=argument)


def _counted(on_done: Callable[[int, int], None] | None, total: int) -> Callable[[int, Any], None] | None:
    """The task runner's callback (task index, result) as the API's (tasks finished, total)."""
    if on_done is None:
        return None
    finished = [0]

    def done(_index: int, _result: Any) -> None:
        finished[0] += 1
        on_done(finished[0], total)

    return done


def run(
    scenario: str | Path | Mapping[str, Any],
    *,
    steps: int | None = None,
    seed: int | None = None,
    output: str | Path | None = None,
    base_dir: str | Path = ".",
    on_step: Callable[[int], None] | None = None,
) -> Result:
    """Simulate a scenario and return its frames and summary.

    Args:
        scenario: a scenario file, or the same content as a mapping (its `{file: ...}`
            references resolved against `base_dir`).
        steps: override `run.steps`.
        seed: override the scenario's seed.
        output: also write the results folder there (as `clustersim run -o`).
        base_dir: folder that relative file references of a mapping start from.
        on_step: called with each finished step.

    Raises:
        InputError: the scenario or a file it references is not valid (one line each).
        ClustersimError: the run cannot be simulated (exit code 3 on the command line).
    """
    _source(scenario, "scenario")
    if output is not None:
        _source(output, "output", mapping=False)  # checked before anything is simulated
    _source(base_dir, "base_dir", mapping=False)
    steps = _whole(steps, "steps", RunSettings, "steps")
    seed = _whole(seed, "seed", ScenarioSpec, "seed")
    _callback(on_step, "on_step")
    if isinstance(scenario, Mapping):
        data = _absolute_files(dict(scenario), Path(base_dir))
        with tempfile.TemporaryDirectory(prefix="clustersim-api-") as tmp:
            path = Path(tmp) / "scenario.yaml"
            path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
            try:
                return run(path, steps=steps, seed=seed, output=output, on_step=on_step)
            except InputError as exc:
                raise _of_mapping(exc, path, Path(base_dir)) from None
    prep = prepare(scenario)
    if steps is not None:
        spec = prep.scenario.spec
        prep.scenario.spec = spec.model_copy(update={"run": spec.run.model_copy(update={"steps": steps})})
    given = {k: v for k, v in (("run.steps", steps), ("seed", seed)) if v is not None}
    result = execute(prep, on_step, seed, given)
    out = Result(result.name, result.frames, result.summary, None, result)
    if output is not None:
        out.write(output)
    return out


def load(folder: str | Path) -> Result:
    """The frames and summary of a results folder written earlier (`clustersim run`)."""
    _source(folder, "folder", mapping=False)
    summary = read_summary(folder)
    return Result(str(summary.get("scenario", Path(folder).name)), read_frames(folder), summary, Path(folder))


@dataclass
class Comparison:
    """A comparison: one row per variant (`table`) and every variant's run (`results`)."""

    name: str
    table: pd.DataFrame
    results: dict[str, Result]


def compare(
    file: str | Path,
    *,
    steps: int | None = None,
    executor: Any = "serial",
    on_done: Callable[[int, int], None] | None = None,
) -> Comparison:
    """Run every variant of a compare file (`clustersim compare`, without writing).

    Args:
        file: the compare file.
        steps: override every variant's `run.steps`.
        executor: "serial" (this process), "pool" (local processes) or a Dask client.
        on_done: called in this process as each variant finishes, with (variants
            finished, variants in all).
    """
    _source(file, "file", mapping=False)
    steps = _whole(steps, "steps", RunSettings, "steps")
    _executor(executor)
    _callback(on_done, "on_done")
    cmp = load_comparison(file)
    runs = run_comparison(cmp, executor, steps=steps, on_done=_counted(on_done, len(cmp.variants)))
    table = comparison_table(runs)
    results = {
        str(r.summary.get("variant", r.name)): Result(r.name, r.frames, r.summary, None, r) for r in runs
    }
    return Comparison(cmp.name, table, results)


@dataclass
class Study:
    """A run-level study: one row per variant and seed (`runs`) and per variant (`summary`)."""

    name: str
    runs: pd.DataFrame
    summary: pd.DataFrame


def sweep(
    study: str | Path | Mapping[str, Any],
    *,
    seeds: int | None = None,
    executor: Any = "serial",
    on_done: Callable[[int, int], None] | None = None,
) -> Study:
    """Run a run-level study (`clustersim sweep`, without writing) across seeds.

    Args:
        study: a study file, or its content as a mapping.
        seeds: seeds per variant (default: the study's).
        executor: "serial", "pool" or a Dask client.
        on_done: called in this process as each run (variant x seed) finishes, with (runs
            finished, runs in all).
    """
    _source(study, "study")
    seeds = _whole(seeds, "seeds", StudySpec, "seeds")
    _executor(executor)
    _callback(on_done, "on_done")
    if isinstance(study, Mapping):
        loaded = study_from_data(dict(study))
        check_study_step(loaded, "<study>", Document(Path("<study>"), dict(study), {}))
    else:
        loaded = load_study(study)
        check_study_step(loaded, study)
    check_study_checkpoints(loaded)  # as `clustersim sweep` checks before it runs
    total = len(loaded.variants) * (seeds or loaded.spec.seeds)
    runs = run_study(loaded, seeds, executor, on_done=_counted(on_done, total))
    return Study(loaded.spec.name, runs, summarize_study(runs))
