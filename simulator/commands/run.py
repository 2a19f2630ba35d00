"""`clustersim run`, `validate` and `schema`: simulate one scenario, check input files, print schemas."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

import typer
from rich.table import Table

from simulator.commands.common import (
    console,
    err_console,
    fail,
    first_per_file,
    freeze_long_lived,
    making_long_lived,
    one_line,
    print_table,
    progress_bar,
    say,
)
from simulator.commands.topo import topology_schema_tables
from simulator.errors import ClustersimError, InputError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from simulator.io import Interrupted

log = logging.getLogger(__name__)


def _ms(value_s: float) -> str:
    return f"{value_s * 1e3:.3f} ms"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.1f}%"


#: Rows of the run summary table: (label, summary key, formatter, unit of the key's value in
#: summary.json: SI, fractions 0-1), in print order.
SUMMARY_ROWS: list[tuple[str, str, Callable[[Any], str], str]] = [
    ("step time (simulated)", "step_time_s", _ms, "s"),
    ("compute per rank", "compute_s", _ms, "s"),
    ("exposed communication", "exposed_comm_s", _ms, "s"),
    ("idle", "idle_s", _ms, "s"),
    ("MFU", "mfu", _percent, "fraction"),
    ("TFLOP/s per GPU", "tflops_per_gpu", lambda v: f"{v:.1f}", "TFLOP/s"),
    ("tokens/s", "tokens_per_s", lambda v: f"{v:,.0f}", "tokens/s"),
    ("pipeline bubble (schedule)", "pipeline_bubble_fraction", _percent, "fraction"),
    ("pipeline bubble (measured idle)", "pipeline_bubble_measured", _percent, "fraction"),
    ("peak memory per GPU", "peak_memory_bytes", lambda v: f"{v / 2**30:.1f} GiB", "bytes"),
    ("goodput (mean over seeds)", "goodput", _percent, "fraction"),
    ("ETTR", "ettr", _percent, "fraction"),
    ("interruptions per run", "interruptions", lambda v: f"{v:.1f}", "count"),
    ("jobs", "n_jobs", str, "count"),
    ("jobs finished", "jobs_finished", str, "count"),
    ("worst slowdown next to other jobs", "max_slowdown", lambda v: f"x{v:.4f}", "ratio"),
    ("cluster GPU utilisation", "gpu_utilization", _percent, "fraction"),
    ("mean queueing delay", "mean_queueing_delay_s", lambda v: f"{v / 3600:.2f} h", "s"),
    ("median job completion time", "median_jct_s", lambda v: f"{v / 3600:.2f} h", "s"),
    ("work lost to failures", "lost_work_gpu_h", lambda v: f"{v:,.0f} GPU-h", "GPU-h"),
    ("GPUs in job", "gpus_in_job", str, "count"),
    ("simulated ranks", "simulated_ranks", str, "count"),
    ("host wall time of the simulation", "wall_time_s", lambda v: f"{v:.2f} s", "s"),
]


def _shown(value: Any, fmt: Callable[[Any], str], key: str, cluster: bool) -> str:
    """A row's value as shown: `n/a` where the run has none (null or NaN in summary.json,
    e.g. the median completion time of a cluster where no job finished); a cluster's
    interruptions are a count of its jobs, not a mean over seeds."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if cluster and key == "interruptions" and isinstance(value, int):
        return f"{value:,}"
    return fmt(value)


def _label(label: str, key: str, cluster: bool, several_jobs: bool) -> str:
    """A row's label, worded for a cluster over days or several jobs where it differs."""
    if cluster and key == "goodput":
        return "goodput (jobs of the cluster)"
    if cluster and key == "interruptions":
        return "interruptions (jobs hit by failures)"
    if several_jobs and key == "gpus_in_job":
        return "GPUs in the jobs"
    return label


#: jobs listed one per row under the summary of a scenario with `jobs:`
MAX_JOB_ROWS = 8


class SummaryRow(NamedTuple):
    """One row of the run summary: as shown, and as data (`--format csv|json`)."""

    figure: str
    value: str  # as shown
    key: str  # where it is in summary.json ("" for a note)
    si_value: Any  # the number in summary.json (SI units but for the few named in `unit`: TFLOP/s, GPU-h)
    unit: str


def summary_rows(summary: dict[str, Any]) -> list[SummaryRow]:
    """The headline figures of a run's summary.json, in print order."""
    rows: list[SummaryRow] = []
    cluster = "scheduler" in summary  # days of a cluster: goodput is over its jobs, one seed
    for label, key, fmt, unit in SUMMARY_ROWS:
        if key in summary:
            shown = _label(label, key, cluster, "n_jobs" in summary)
            rows.append(SummaryRow(shown, _shown(summary[key], fmt, key, cluster), key, summary[key], unit))
        if key == "exposed_comm_s":  # its split by tag, right under it
            for tag, v in summary.get("exposed_comm_by_tag_s", {}).items():
                rows.append(SummaryRow(f"  exposed {tag}", _ms(v), f"exposed_comm_by_tag_s.{tag}", v, "s"))
    jobs = summary.get("jobs", []) if isinstance(summary.get("jobs"), list) else []
    for i, job in enumerate(jobs[:MAX_JOB_ROWS]):
        rows.append(
            SummaryRow(
                f"  job {job['job']}: step alone -> together",
                f"{_ms(job['step_time_alone_s'])} -> {_ms(job['step_time_s'])} (x{job['slowdown']:.4f})",
                f"jobs.{i}.step_time_s",
                job["step_time_s"],
                "s",
            )
        )
    if len(jobs) > MAX_JOB_ROWS:
        rows.append(SummaryRow(f"  ... {len(jobs) - MAX_JOB_ROWS} more jobs", "summary.json", "", None, ""))
    if "cost_note" in summary:  # why the run has no cost columns
        rows.append(SummaryRow("cost", str(summary["cost_note"]), "cost_note", summary["cost_note"], ""))
    for i, link in enumerate(summary.get("busiest_links", [])[:3]):
        rows.append(
            SummaryRow(
                f"busy link {link['link']}",
                f"{link['mean_utilization'] * 100:.1f}%",
                f"busiest_links.{i}.mean_utilization",
                link["mean_utilization"],
                "fraction",
            )
        )
    return rows


def summary_table(summary: dict[str, Any] | list[SummaryRow], title: str = "summary") -> Table:
    """The headline figures of a run's summary.json (or its `summary_rows`), as printed
    after `clustersim run`."""
    t = Table(title=title, show_header=True)
    t.add_column("figure")
    t.add_column("value", justify="right")
    for row in summary_rows(summary) if isinstance(summary, dict) else summary:
        t.add_row(row.figure, row.value)
    return t


def interrupted(stop: Interrupted, folder: Path, kept: str = "left as it was") -> NoReturn:
    """Report a SIGINT/SIGTERM that stopped a command on one line and exit 128 + signal."""
    err_console.print(f"interrupted ({stop}): {folder} {kept}", markup=False, soft_wrap=True)
    raise typer.Exit(code=stop.exit_code)


def overrides(**given: Any) -> dict[str, Any]:
    """The command-line overrides given, by the scenario key they replace (`run.steps`, `seed`)."""
    keys = {"steps": "run.steps", "seed": "seed"}
    return {keys.get(k, k): v for k, v in given.items() if v is not None}


def _check_file(path: Path) -> str:
    """Validate one file of `scenarios/` by its kind; a short description when it is fine."""
    # the simulator and the input specs are imported inside the functions of this module,
    # so that `clustersim --help` stays fast
    from simulator.config.loader import read_document
    from simulator.scenario.prepare import check_output_folder, default_output, prepare

    doc = read_document(path)
    data = doc.data if isinstance(doc.data, dict) else {}
    if "variants" in data:
        from simulator.study.compare import load_comparison

        cmp = load_comparison(path)
        return f"compare file, {len(cmp.variants)} variants"
    if "job" in data and "step" in data:
        from simulator.study.sweep import load_study

        study = load_study(path)
        from simulator.study.checks import check_study_checkpoints, check_study_step

        check_study_step(study, path, doc)  # what sweep checks first
        check_study_checkpoints(study)
        return f"study, {len(study.variants)} variants"
    prep = prepare(path)
    from simulator.scenario.oracle import check_run_level

    check_run_level(prep)
    check_output_folder(default_output(prep), prep)
    if prep.scenario.spec.cluster is not None:
        spec = prep.scenario.spec.cluster
        return f"{prep.topology.name}, {len(prep.cluster.gpus)} GPUs, a cluster over days ({spec.scheduler})"
    if prep.jobs:
        ops = sum(len(j.program.ops) for j in prep.jobs)
        return f"{prep.topology.name}, {len(prep.cluster.gpus)} GPUs, {len(prep.jobs)} jobs, {ops} ops"
    return (
        f"{prep.topology.name}, {len(prep.cluster.gpus)} GPUs, "
        f"{len(prep.program.ops)} ops on {len(prep.program.simulated_ranks)} simulated ranks"
    )


def _warn_unread_reliability(spec: Any) -> None:
    """One line when `reliability` is given but nothing here reads it: without a `policy`
    (or a `cluster`) the run is the step only; a study's `from_scenario` still reads it."""
    if spec.policy is None and spec.cluster is None and "reliability" in spec.model_fields_set:
        err_console.print(
            "warning: reliability is read by the run level (a `policy`) and by a study's "
            "from_scenario, not by this run: it simulates the step only",
            markup=False,
            soft_wrap=True,
        )


def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Results folder (default: the scenario's run.output, relative to the scenario; "
            "else results/<name> in the working folder).",
        ),
    ] = None,
    steps: Annotated[int | None, typer.Option(help="Override run.steps.", min=1)] = None,
    seed: Annotated[
        int | None,
        typer.Option(help="Override the scenario's seed.", min=0, max=2**62),  # config.base.MAX_SEED
    ] = None,
    dashboard: Annotated[bool, typer.Option(help="Write dashboard.html.")] = True,
) -> None:
    """Simulate a scenario and write frames, summary.json and dashboard.html."""
    from simulator.io import Interrupted, ResultsFolder, interrupted_in
    from simulator.scenario.execute import execute
    from simulator.scenario.oracle import check_run_level
    from simulator.scenario.prepare import check_output_folder, default_output, prepare

    freeze_long_lived()  # the modules just imported
    try:
        with making_long_lived():  # the prepared scenario: topology, cluster, program
            prep = prepare(scenario)
            check_run_level(prep)
        _warn_unread_reliability(prep.scenario.spec)
        if steps is not None and prep.scenario.spec.cluster is not None:  # as run.steps is refused
            raise InputError(
                "--steps: a `cluster` runs every job for its length over `reliability.duration`; "
                "it has no steps to set (run without --steps)"
            )
        if steps is not None:
            prep.scenario.spec = prep.scenario.spec.model_copy(
                update={"run": prep.scenario.spec.run.model_copy(update={"steps": steps})}
            )
        out = output or default_output(prep)
        check_output_folder(out, prep)
        n_steps = prep.scenario.spec.run.steps
        # checked writable and locked before anything is simulated; replaced whole at the end
        with ResultsFolder(out) as folder:
            with progress_bar(f"simulating {prep.scenario.name}", n_steps, unit="steps") as on_done:
                result = execute(
                    prep,
                    lambda k: on_done(k, None),
                    seed,
                    overrides(steps=steps, seed=seed),
                    release_ops=True,
                )
            freeze_long_lived()  # the frames and summary, written next
            log.info("writing results to %s", out)
            result.write(folder.stage(), dashboard=dashboard)
            folder.commit()
            log.info("results written to %s", out)
    except ClustersimError as err:
        fail(err, scenario)
    except Interrupted as stop:
        interrupted(stop, out)
    except Exception as err:  # a stop signal that arrived inside compiled code comes wrapped
        interrupted(interrupted_in(err), out)
    rows = summary_rows(result.summary)
    print_table(summary_table(rows, f"{prep.scenario.name}"), [r._asdict() for r in rows])
    for warning in result.summary.get("calibration_warnings", []):
        err_console.print(f"warning: {warning}", markup=False, soft_wrap=True)
    for note in (result.summary.get("run_level") or {}).get("notes", []):
        err_console.print(f"note: {note}", markup=False, soft_wrap=True)
    say(f"results: {out}/ ({'dashboard.html, ' if dashboard else ''}summary.json, frames)")


def validate(
    files: Annotated[list[Path], typer.Argument(help="Scenario, compare or study files to check.")],
) -> None:
    """Check scenario, compare and study files and everything they reference, without simulating.

    With --format csv|json, stdout holds one table: a record per file (file, ok, description
    when ok, error when not: the error lines of the file, joined by "; "); the error lines
    still go to stderr and the exit code is the same. The exit code is 2 if any file has a
    mistake, else 3 if any valid file cannot be simulated, else 0.
    """
    from simulator.commands.common import output_format

    lines: list[str] = []  # one line per file with a problem (its first)
    records: list[dict[str, Any]] = []  # --format csv|json: one per file
    codes: set[int] = set()
    for f in files:
        try:
            description = _check_file(f)
            records.append({"file": str(f), "ok": True, "description": description, "error": ""})
            if output_format() == "table":
                console.print(f"{f}: ok ({description})", soft_wrap=True)
        except ClustersimError as err:
            found = first_per_file(err, f)
            lines.extend(found)
            error = "; ".join(one_line(line) for line in found)
            records.append({"file": str(f), "ok": False, "description": "", "error": error})
            codes.add(err.exit_code)
    if output_format() != "table":
        print_table(Table(*records[0], title="validate"), records)
    if lines:
        for line in lines:
            err_console.print(f"error: {one_line(line)}", markup=False, soft_wrap=True)
        # a mistake in any file is the answer to fix first: "valid but unsimulatable" (3)
        # would say every file is valid
        raise typer.Exit(code=2 if 2 in codes else max(codes))


def _schema_models() -> dict[str, type[BaseModel]]:
    """The input file kinds `clustersim schema` knows, by name, and their specs."""
    from simulator.calibration.profile import CalibrationProfile
    from simulator.network.hardware import GPUSpec
    from simulator.network.topology import TopologyHeader
    from simulator.scenario.spec import ScenarioSpec
    from simulator.study.compare import CompareSpec
    from simulator.study.sweep import StudySpec
    from simulator.workload.generate import WorkloadSpec
    from simulator.workload.model import ModelSpec
    from simulator.workload.trace import TraceSpec

    return {
        "scenario": ScenarioSpec,
        "trace": TraceSpec,
        "topology-header": TopologyHeader,
        "gpu": GPUSpec,
        "compare": CompareSpec,
        "study": StudySpec,
        "workload": WorkloadSpec,
        "model": ModelSpec,
        "profile": CalibrationProfile,
    }


def schema(
    kind: Annotated[
        str,
        typer.Argument(
            help="scenario | trace | workload | model | topology | topology-header | gpu | compare | "
            "study | profile (topology: every generator's parameters, units and the NIC presets)"
        ),
    ] = "scenario",
) -> None:
    """Print the JSON schema of an input file kind (topology: tables of every generator's
    parameters; with --format csv|json one table of them, the NIC presets beside it)."""
    if kind == "topology":
        _print_topology_schema()
        return
    kinds = _schema_models()
    if kind not in kinds:
        fail(InputError(f"unknown schema {kind!r}; expected one of {sorted([*kinds, 'topology'])}"))
    console.print_json(json.dumps(schema_with_human_keys(kinds[kind])))


def _print_topology_schema() -> None:
    """The topology generators' parameter tables; as CSV or JSON one table of every
    generator's parameters (a `section` column naming the generator) and the NIC presets."""
    from rich.table import Table

    from simulator.commands.common import output_format, print_tables, table_records

    tables = topology_schema_tables()
    if output_format() == "table":
        for table in tables:
            console.print(table)
        return
    records = [
        {"section": str(t.title).split(" — ")[0].removeprefix("generator: "), **r}
        for t in tables[:-1]
        for r in table_records(t)
    ]
    params = Table(title="topology generator parameters")
    print_tables("topology schema", [(params, records), (tables[-1], None)])


def schema_with_human_keys(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of `model`, plus the human-unit keys its files may use instead of SI
    fields (`peak_tflops` for `peak_flops_per_s`, `mtbf_h` for `mtbf_s`), in every model it
    holds (`simulator.config.schema_units`)."""
    from simulator.config.schema_units import with_human_units

    return with_human_units(model)


def register(app: typer.Typer) -> None:
    """Add `run`, `validate` and `schema` to the CLI."""
    for command in (run, validate, schema):
        app.command()(command)
