"""`clustersim sweep FILE`: a run-level study over seeds (process pool or Dask).

Writes `runs` (one row per variant and seed) and `summary` (mean and 95% interval per
variant) as Parquet or CSV, `summary.csv`, the goodput figure `sweep.html` and
`study.resolved.yaml`, then prints the summary table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.table import Table

from simulator.commands.common import console, fail, progress_bar
from simulator.errors import ClustersimError
from simulator.io import write_atomic

if TYPE_CHECKING:
    import pandas as pd


def _mean_interval(row: Any, metric: str, fmt: str = "{:.3f}") -> str:
    """`mean [lo, hi]` of one metric in a summary row."""
    mean, lo, hi = (fmt.format(row[f"{metric}_{part}"]) for part in ("mean", "lo", "hi"))
    return f"{mean} [{lo}, {hi}]"


def _summary_table(title: str, summary: pd.DataFrame, axes: list[str]) -> Table:
    """The printed summary: one row per variant, each metric as `mean [95% interval]`."""
    table = Table(title=f"{title}: mean [95% interval]")
    for col in (*axes, "goodput", "ettr", "interruptions", "lost work/int. (s)"):
        table.add_column(col)
    for _, row in summary.iterrows():
        table.add_row(
            *[str(row[a]) for a in axes],
            _mean_interval(row, "goodput"),
            _mean_interval(row, "ettr"),
            _mean_interval(row, "interruptions", "{:.1f}"),
            _mean_interval(row, "lost_work_per_interruption_s", "{:.0f}"),
        )
    return table


def sweep(
    file: Annotated[Path, typer.Argument(help="Study file (YAML): base run, failures, policy, axes.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Folder for results.")] = Path("results/sweep"),
    seeds: Annotated[
        int | None, typer.Option("--seeds", min=1, help="Seeds per variant (default: the file's).")
    ] = None,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Dask scheduler address, or 'local' for a LocalCluster.")
    ] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Local process-pool size.")] = None,
) -> None:
    """Run a run-level study (checkpoint interval, MTBF scale, spares, policy) across seeds."""
    # the simulator and the figures are imported inside the command, so that `clustersim --help` stays fast
    from simulator import __version__
    from simulator.metrics.store import write_frame
    from simulator.study.sweep import load_study, run_study, summarize_study
    from simulator.viz.faults import sweep_figure

    try:
        study = load_study(file)
        n_runs = len(study.variants) * (seeds or study.spec.seeds)
        console.print(
            f"study {study.spec.name}: {len(study.variants)} variant(s) x "
            f"{seeds or study.spec.seeds} seed(s) = {n_runs} runs on "
            f"{'dask ' + dask if dask else 'a local process pool'}"
        )
        with progress_bar(f"simulating {study.spec.name}", n_runs) as on_done:
            runs = run_study(
                study, seeds=seeds, executor=dask or "pool", max_workers=workers, on_done=on_done
            )
    except ClustersimError as err:
        fail(err)
    summary = summarize_study(runs)
    runs_path = write_frame(out, "runs", runs)
    write_frame(out, "summary", summary)
    write_atomic(out / "summary.csv", summary.to_csv(index=False))
    write_atomic(out / "sweep.html", sweep_figure(runs).to_html(include_plotlyjs=True, full_html=True))
    resolved = {
        "version": __version__,
        "file": str(file),
        "seeds": seeds or study.spec.seeds,
        "study": study.spec.model_dump(mode="json"),
    }
    write_atomic(out / "study.resolved.yaml", yaml.safe_dump(resolved, sort_keys=False))
    console.print(_summary_table(study.spec.name, summary, list(runs.attrs.get("axes", []))))
    console.print(f"wrote {runs_path}, {out / 'summary.csv'}, {out / 'sweep.html'}")


def register(app: typer.Typer) -> None:
    """Add the `sweep` command to the CLI."""
    app.command("sweep")(sweep)
