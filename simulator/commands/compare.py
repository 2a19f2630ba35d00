"""`clustersim compare FILE`: run a base scenario's variants side by side.

Writes one run folder per variant, `comparison.csv` (and `.parquet` with pyarrow),
`compare.resolved.yaml` and the comparison dashboard `comparison.html`, then prints the
comparison table.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.table import Table

from simulator.commands.common import fail, frame_records, print_table, progress_bar, say
from simulator.commands.run import interrupted
from simulator.errors import ClustersimError, InputError
from simulator.io import write_atomic

if TYPE_CHECKING:
    import pandas as pd

    from simulator.study.compare import Comparison


def _ms(v: float) -> str:
    return f"{v * 1e3:.2f} ms"


def _pct(v: float) -> str:
    return f"{v * 100:.1f}%"


def _usd(v: float) -> str:
    return f"${v:,.0f}"


def _hours(v: float) -> str:
    return f"{v / 3600:,.1f} h"


#: the printed columns (label, key in the comparison table, format), each shown when some
#: variant has a value for it: step-level runs, then several jobs or a cluster over days,
#: then run-level goodput, then cost
_COLUMNS: list[tuple[str, str, Any]] = [
    ("step time", "step_time_s", _ms),
    ("vs first", "relative_step_time", lambda v: f"{v:.2f}x"),
    ("exposed comm", "exposed_comm_s", _ms),
    ("MFU", "mfu", _pct),
    ("max slowdown", "max_slowdown", lambda v: f"{v:.2f}x"),
    ("GPU utilization", "gpu_utilization", _pct),
    ("mean queueing", "mean_queueing_delay_s", _hours),
    ("median JCT", "median_jct_s", _hours),
    ("goodput", "goodput", _pct),
    ("capex/GPU", "capex_per_gpu_usd", _usd),
    ("network capex", "network_capex_usd", _usd),
    ("network capex/GPU", "network_capex_per_gpu_usd", _usd),
    ("$/Mtoken (network)", "network_usd_per_mtoken", lambda v: f"${v:.4f}"),
]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def comparison_rich_table(table: pd.DataFrame, title: str) -> Table:
    """The comparison table as printed: one row per variant, the columns some variant has
    a value for (an empty cell where a variant has none)."""
    t = Table(title=title, show_header=True)
    shown = [
        (label, key, f)
        for label, key, f in [("variant", "variant", str), *_COLUMNS]
        if key in table.columns and not all(_missing(v) for v in table[key])
    ]
    for label, key, _ in shown:
        t.add_column(label, justify="left" if key == "variant" else "right", no_wrap=key == "variant")
    for _, row in table.iterrows():
        t.add_row(*("" if _missing(row[key]) else f(row[key]) for _, key, f in shown))
    return t


def _write_table(df: pd.DataFrame, folder: Path, stem: str) -> list[Path]:
    """CSV always; Parquet too when pyarrow is present (both atomic)."""
    from simulator.metrics.store import write_frame

    csv = folder / f"{stem}.csv"
    written = write_frame(folder, stem, df)  # Parquet, or the CSV without pyarrow
    if written == csv:
        return [csv]
    write_atomic(csv, df.to_csv(index=False))
    return [csv, written]


def _resolved(cmp: Comparison) -> str:
    """`compare.resolved.yaml`: the compare file, its base and every variant's merged scenario."""
    return yaml.safe_dump(
        {
            "compare": cmp.doc.data,
            "compare_file": str(cmp.path),
            "base_file": str(cmp.base.path),
            "variants": {
                v.name: {
                    "scenario": v.scenario_data,
                    "topology_params": v.topology_params,
                }
                for v in cmp.variants
            },
        },
        sort_keys=False,
    )


def compare(
    file: Annotated[Path, typer.Argument(help="Compare file: a base scenario and its variants.")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Comparison folder (default results/<name>)."),
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option("--dask", help="Dask scheduler address, or 'local' for a LocalCluster on 127.0.0.1."),
    ] = None,
    serial: Annotated[
        bool, typer.Option("--serial", help="Run variants one by one in this process.")
    ] = False,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Local pool size cap.")] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Override run.steps of every variant.")
    ] = None,
    dashboards: Annotated[bool, typer.Option(help="Also write each variant's dashboard.html.")] = True,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the variants this folder already holds; run only the rest.")
    ] = False,
) -> None:
    """Run every variant of a compare file; write a comparison table, dashboard and run folders.

    Each variant's run folder is written (whole) as soon as it finishes; a stopped
    comparison keeps them, and `--resume` runs only the missing ones.
    """
    # the simulator and the figures are imported inside the command, so that `clustersim --help` stays fast
    from simulator.io import (
        Interrupted,
        folder_lock,
        foreign_folder_problem,
        foreign_study_problem,
        interrupted_in,
        stop_signals_raise,
    )
    from simulator.study import compare as cmpmod
    from simulator.study.executor import LOCAL_DASK, describe

    try:
        if serial and dask:
            raise InputError("give either --serial or --dask, not both")
        executor: Any = "serial" if serial else ("pool" if dask is None else dask)
        if executor == "local":
            executor = LOCAL_DASK
        cmp = cmpmod.load_comparison(file)
        out = output or Path("results") / cmp.name
        with stop_signals_raise(), folder_lock(out):
            problem = foreign_study_problem(out, "compare")  # before the manifest is written
            if problem is not None:
                raise InputError(problem)
            for v in cmp.variants:  # each variant's run folder is replaced whole when it is done
                problem = foreign_folder_problem(out / v.name)
                if problem is not None:
                    raise InputError(problem)
            fingerprint = cmpmod.compare_fingerprint(cmp, steps, dashboards)
            done = _open_manifest(out, fingerprint, resume, [v.name for v in cmp.variants])
            tasks = cmpmod.variant_tasks(cmp, steps, skip=done)
            where = describe(executor, len(tasks), workers)
            say(
                f"comparing {len(cmp.variants)} variant(s) of {cmp.name} on {where}"
                + (f" ({len(done)} done already)" if done else "")
            )
            with progress_bar(f"simulating {cmp.name}", len(tasks)) as on_done:
                order = {v.name: i for i, v in enumerate(cmp.variants)}  # file order, resumed or not
                _run_variants(out, tasks, order, executor, workers, dashboards, on_done)
            table, notes = _write_comparison(out, cmp)
    except ClustersimError as err:
        fail(err, file)
    except Interrupted as stop:
        interrupted(stop, out, "keeps the finished variants; continue with --resume")
    except Exception as err:  # a stop signal that arrived inside compiled code comes wrapped
        interrupted(interrupted_in(err), out, "keeps the finished variants; continue with --resume")
    print_table(comparison_rich_table(table, cmp.name), frame_records(table))
    for name, note in notes:  # why a variant has no cost columns (its summary.json says it too)
        say(f"{name}: {note}")
    say(f"results: {out}/ (comparison.html, comparison.csv, one run folder per variant)")


def _open_manifest(out: Path, fingerprint: str, resume: bool, variants: list[str]) -> set[str]:
    """The variants already done (resuming), after checking the folder holds this comparison;
    starting afresh, an empty manifest in a folder cleared of the comparison it held."""
    from simulator.metrics.store import MANIFEST, read_manifest

    if not resume:
        try:
            old = list((read_manifest(out) or {}).get("tasks", {}))
        except InputError:  # an unreadable manifest is replaced, as it was written: by us
            old = []
        _clear_comparison(out, [*old, *variants])
        _save_manifest(out, fingerprint, {})
        return set()
    manifest = read_manifest(out)
    if manifest is None:
        raise InputError("nothing to resume: no manifest.json in this folder", file=out)
    if manifest.get("fingerprint") != fingerprint:
        raise InputError(
            "this folder holds a different comparison (or --steps, or --no-dashboards); run without "
            "--resume to replace it",
            file=out / MANIFEST,
        )
    tasks = {k: t for k, t in manifest.get("tasks", {}).items() if (out / k / "summary.json").is_file()}
    _save_manifest(out, fingerprint, tasks)
    return set(tasks)


def _clear_comparison(out: Path, run_folders: list[str]) -> None:
    """Remove the comparison a folder holds: its tables, resolved file and page, and the run
    folders named (the old manifest's variants and the new comparison's), each only if it
    is a run's results and nothing else. A comparison stopped half way then never leaves
    another comparison's table or runs beside its own (a sweep clears its folder alike)."""
    import re
    import shutil

    from simulator.config.base import NAME_PATTERN
    from simulator.io import foreign_folder_problem
    from simulator.metrics.store import MANIFEST
    from simulator.study.compare import FOLDER_FILES
    from simulator.viz.dashboard import PLOTLY_FILE

    for name in sorted(set(run_folders)):
        folder = out / name
        if re.fullmatch(NAME_PATTERN, name) and folder.is_dir() and foreign_folder_problem(folder) is None:
            shutil.rmtree(folder)
    for name in FOLDER_FILES:
        if name not in (MANIFEST, PLOTLY_FILE):  # the manifest is rewritten; plotly.js is the same file
            (out / name).unlink(missing_ok=True)


def _save_manifest(out: Path, fingerprint: str, tasks: dict[str, Any]) -> None:
    import json

    from simulator.metrics.store import MANIFEST

    ordered = dict(sorted(tasks.items(), key=lambda kv: kv[1]["variant"]))  # file order, not finish order
    data = {"kind": "compare", "fingerprint": fingerprint, "tasks": ordered}
    write_atomic(out / MANIFEST, json.dumps(data, indent=1) + "\n")


def _run_variants(
    out: Path,
    tasks: list[Any],
    index: dict[str, int],
    executor: Any,
    workers: int | None,
    dashboards: bool,
    on_done: Any,
) -> None:
    """Simulate the variants; each run folder is written whole as it finishes, then recorded
    under its position in the file (`index`)."""
    from simulator.io import replace_folder
    from simulator.metrics.store import read_manifest
    from simulator.study import compare as cmpmod
    from simulator.study.executor import for_each_task
    from simulator.viz.dashboard import PLOTLY_FILE

    failed: dict[int, Any] = {}

    def _write(i: int, outcome: Any) -> None:
        if outcome.error is not None:
            failed[i] = outcome
            return
        # variant pages load the comparison folder's one plotly.js copy (`../plotly.min.js`)
        replace_folder(
            out / outcome.variant,
            lambda d: outcome.result.write(d, dashboard=dashboards, plotly_src=f"../{PLOTLY_FILE}"),
        )
        manifest = read_manifest(out) or {}
        entry = {"variant": index[outcome.variant], "seed": 0, "files": {}}
        tasks_done = {**manifest.get("tasks", {}), outcome.variant: entry}
        _save_manifest(out, str(manifest.get("fingerprint")), tasks_done)
        on_done(i, None)

    for_each_task(cmpmod.simulate_variant, tasks, _write, executor, max_workers=workers)
    if failed:
        kind, code, lines = failed[min(failed)].error
        raise cmpmod.VariantFailed(failed[min(failed)].variant, kind, code, lines)


def _write_comparison(out: Path, cmp: Comparison) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The comparison table, resolved file and page, from the variants' run folders; and the
    variants' cost notes (why a variant has no cost columns), by variant."""
    from simulator.metrics.store import read_run_folder
    from simulator.scenario.execute import RunResult
    from simulator.study import compare as cmpmod
    from simulator.viz.compare import DEFAULT_PRICES_NAME, comparison_html
    from simulator.viz.dashboard import write_page

    results = []
    for v in cmp.variants:  # summaries and the two frames the page draws, one variant at a time
        frames, summary = read_run_folder(out / v.name)
        drawn: dict[str, pd.DataFrame] = {k: frames[k] for k in ("steps", "links") if k in frames}
        results.append(RunResult(v.name, drawn, summary, {}))
    table = cmpmod.comparison_table(results)
    _write_table(table, out, "comparison")
    frames = {k: cmpmod.concat_frames(results, k) for k in ("steps", "links")}
    write_atomic(out / "compare.resolved.yaml", _resolved(cmp))
    prices = cmp.spec.cost.prices.file if cmp.spec.cost.prices is not None else DEFAULT_PRICES_NAME
    notes = [cmp.spec.description] if cmp.spec.description else []  # as the rebuilt page's
    page = comparison_html(cmp.name, table, frames, notes, prices=prices)
    write_page(out / "comparison.html", page)
    return table, [(r.name, str(r.summary["cost_note"])) for r in results if "cost_note" in r.summary]


def register(app: typer.Typer) -> None:
    """Add the `compare` command to the CLI."""
    app.command("compare")(compare)
