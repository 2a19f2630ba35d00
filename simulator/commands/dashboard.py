"""`clustersim dashboard` (rebuild dashboards from saved results) and `clustersim trace`.

`dashboard RESULTS_DIR... [-o FILE] [--samples DIR]` reads saved results only (never
re-simulates): a run, a comparison, a run-level study or a calibration profile, recognized
by its files (`simulator.viz.rebuild`), each rebuilt in place (`-o` needs a single folder).

`trace RESULTS_DIR [-o FILE]` writes the run's step timeline as a Chrome/Perfetto trace
(`trace.json` in the folder by default; `simulator.viz.chrome_trace`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from simulator.commands.common import console, fail
from simulator.errors import ClustersimError, InputError
from simulator.io import check_output_file, note_in_results


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def dashboard(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="Results folders (run, comparison, study) or calibration profiles (a YAML file, "
            "or a folder holding one)."
        ),
    ],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="HTML file to write (one folder only).")
    ] = None,
    samples: Annotated[
        list[Path] | None,
        typer.Option(
            "--samples",
            help="Folder to look for a calibration profile's benchmark logs in "
            "(repeatable; also searched: beside the profile, "
            "topologies/calibration/samples/).",
        ),
    ] = None,
) -> None:
    """Rebuild dashboards from saved results only (no simulation)."""
    # the figure modules (pandas, plotly) are imported inside the commands: `clustersim --help` stays fast
    from simulator.viz.dashboard import PLOTLY_FILE, write_page
    from simulator.viz.rebuild import rebuild_dashboard

    try:
        if output is not None and len(results) > 1:
            raise InputError(
                "-o/--output takes one results folder; without it each folder is rebuilt in place"
            )
        if output is not None:
            check_output_file(output, results)
        for folder in results:
            t = time.perf_counter()
            rebuilt = rebuild_dashboard(folder, samples or (), in_place=output is None)
            path = output or rebuilt.default_path
            write_page(path, rebuilt.html)  # with plotly.min.js beside it when the page loads it
            plotly_js = path.parent / PLOTLY_FILE
            note_in_results(path, *([plotly_js] if plotly_js.is_file() else []))
            console.print(
                f"{rebuilt.kind} dashboard: {path} ({_size(len(rebuilt.html.encode()))}, "
                f"built in {time.perf_counter() - t:.1f} s)",
                markup=False,
                soft_wrap=True,
            )
    except ClustersimError as err:
        fail(err)


def trace(
    results: Annotated[Path, typer.Argument(help="Run results folder.")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Trace JSON to write (default RESULTS/trace.json)."),
    ] = None,
    step: Annotated[
        list[int] | None, typer.Option("--step", help="Only these steps (repeatable; default all).")
    ] = None,
    links: Annotated[int, typer.Option(help="Busiest links given a utilization counter track.", min=0)] = 8,
) -> None:
    """Write the step timeline as a Chrome/Perfetto trace (open in ui.perfetto.dev)."""
    from simulator.metrics.store import read_run_folder
    from simulator.viz.chrome_trace import write_chrome_trace

    try:
        if not results.is_dir():
            raise InputError("results folder not found", file=results)
        if not any((results / f"ops.{ext}").is_file() for ext in ("parquet", "csv")):
            raise InputError(
                "no ops frame (ops.parquet / ops.csv): not a step-level run folder", file=results
            )
        path = check_output_file(output or results / "trace.json")
        frames, _ = read_run_folder(results)
        missing = sorted(set(step or ()) - set(frames["ops"]["step"].tolist()))
        if missing:
            have = sorted(set(frames["ops"]["step"].tolist()))
            span = f"steps {have[0]}..{have[-1]}" if have else "no steps"
            raise InputError(f"--step {missing[0]}: the run has {span}", file=results)
        counts = write_chrome_trace(frames, path, steps=step or None, top_links=links)
        note_in_results(path)
    except ClustersimError as err:
        fail(err)
    console.print(
        f"trace: {path} ({counts['ops']:,} ops, {counts['counter_samples']:,} counter samples on "
        f"{counts['link_counters']} links; open in https://ui.perfetto.dev)",
        markup=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add `dashboard` and `trace` to the CLI."""
    app.command()(dashboard)
    app.command()(trace)
