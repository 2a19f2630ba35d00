"""`clustersim sweep FILE`: a run-level study over seeds (process pool or Dask).

Each run is written as it finishes into the study's store (`simulator.study.store`);
`--resume` continues a stopped study, Ctrl-C stops the workers and keeps what finished.
Once all are done, writes `runs` (one row per variant and seed) and `summary` (mean and
95% interval per variant) as Parquet or CSV, `summary.csv`, the study page `sweep.html`
(the page `clustersim dashboard` rebuilds) and `study.resolved.yaml`, then prints the
summary table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.markup import escape
from rich.table import Table

from simulator.commands.common import fail, frame_records, phased_progress, print_table, say
from simulator.commands.run import interrupted
from simulator.errors import ClustersimError, InputError
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
    for row in summary.to_dict("records"):  # each column's own type (iterrows makes ints floats)
        table.add_row(
            *[escape(str(row[a])) for a in axes],  # a label such as `[exponential] ...` is no markup
            _mean_interval(row, "goodput"),
            _mean_interval(row, "ettr"),
            _mean_interval(row, "interruptions", "{:.1f}"),
            _mean_interval(row, "lost_work_per_interruption_s", "{:.0f}"),
        )
    return table


def sweep(
    file: Annotated[Path, typer.Argument(help="Study file (YAML): base run, failures, policy, axes.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--out", help="Folder for results (default results/<name>).")
    ] = None,
    seeds: Annotated[
        int | None, typer.Option("--seeds", min=1, help="Seeds per variant (default: the file's).")
    ] = None,
    dask: Annotated[
        str | None, typer.Option("--dask", help="Dask scheduler address, or 'local' for a LocalCluster.")
    ] = None,
    serial: Annotated[
        bool, typer.Option("--serial", help="Run the tasks one by one in this process.")
    ] = False,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Local process-pool size.")] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Keep the tasks this folder already holds; run only the rest.")
    ] = False,
    frames: Annotated[
        str,
        typer.Option(
            "--frames",
            help="Frames kept per run under OUT/dataset/: runs (always), incidents, segments "
            "(comma-separated; 'runs' alone keeps long studies small).",
        ),
    ] = "runs,incidents,segments",
) -> None:
    """Run a run-level study (checkpoint interval, MTBF scale, spares, policy) across seeds.

    Each finished run is written at once under OUT/dataset/ (see `clustersim query`); a
    stopped study keeps them, and `--resume` runs only the missing ones.
    """
    # the simulator and the figures are imported inside the command, so that `clustersim --help` stays fast
    from simulator.io import Interrupted, interrupted_in, stop_signals_raise
    from simulator.study.checks import check_study_checkpoints, check_study_step
    from simulator.study.store import open_store, run_into_store
    from simulator.study.sweep import load_study

    out = output or Path("results/study")  # until the file names its study
    try:
        if serial and dask:
            raise InputError("give either --serial or --dask, not both")
        kept = _frames(frames)
        study = load_study(file)
        out = output or Path("results") / study.spec.name
        # a bad step scenario, or far too many checkpoints, is one line before the results
        # folder is touched
        check_study_step(study, file)
        check_study_checkpoints(study)
        n_seeds = seeds or study.spec.seeds
        n_runs = len(study.variants) * n_seeds
        with stop_signals_raise(), open_store(out, study, n_seeds, resume, kept) as (store, done):
            where = "this process" if serial else "dask " + dask if dask else "a local process pool"
            say(
                f"study {study.spec.name}: {len(study.variants)} variant(s) x {n_seeds} seed(s) = "
                f"{n_runs} runs ({len(done)} done already) on {where}"
            )
            executor = "serial" if serial else dask or "pool"
            write_atomic(out / "study.resolved.yaml", _resolved(file, study, n_seeds))
            with phased_progress("step simulations", f"simulating {study.spec.name}", n_runs - len(done)) as (
                on_warm,
                on_done,
            ):
                run_into_store(store, study, n_seeds, done, executor, workers, on_done, kept, on_warm)
            runs, summary = _write_tables(out, file, study, n_seeds, store.read("runs"))
    except ClustersimError as err:
        fail(err, file)
    except Interrupted as stop:
        interrupted(stop, out, "keeps the finished runs; continue with --resume")
    except Exception as err:  # a stop signal that arrived inside compiled code comes wrapped
        interrupted(interrupted_in(err), out, "keeps the finished runs; continue with --resume")
    table = _summary_table(study.spec.name, summary, list(runs.attrs.get("axes", [])))
    print_table(table, frame_records(summary))
    say(f"wrote {out / 'runs.parquet'}, {out / 'summary.csv'}, {out / 'sweep.html'}, {out / 'dataset'}/")


def _frames(given: str) -> tuple[str, ...]:
    """The frames named by `--frames`, `runs` first; an unknown name is an input error."""
    from simulator.metrics.store import STORE_FRAMES

    names = {n.strip() for n in given.split(",") if n.strip()}
    unknown = sorted(names - set(STORE_FRAMES))
    if unknown:
        raise InputError(
            f"--frames: unknown frame(s) {', '.join(unknown)}; expected {', '.join(STORE_FRAMES)}"
        )
    return tuple(n for n in STORE_FRAMES if n in names or n == "runs")


def _write_tables(
    out: Path, file: Path, study: Any, n_seeds: int, runs: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The consolidated tables of a finished study: runs, summary, figure, resolved study."""
    from simulator.metrics.store import write_frame
    from simulator.study.sweep import summarize_study
    from simulator.viz.dashboard import write_page
    from simulator.viz.rebuild import build_study

    summary = summarize_study(runs)
    write_frame(out, "runs", runs)
    write_frame(out, "summary", summary)
    write_atomic(out / "summary.csv", summary.to_csv(index=False))
    # the study page `clustersim dashboard OUT` rebuilds, built the same way from the same files
    page, name = build_study(out)
    write_page(out / name, page)
    return runs, summary


def _resolved(file: Path, study: Any, n_seeds: int) -> str:
    """`study.resolved.yaml`: the validated study and the seeds run (written when it starts)."""
    from simulator import __version__

    resolved = {
        "version": __version__,
        "file": str(file),
        "seeds": n_seeds,
        "study": study.spec.model_dump(mode="json"),
    }
    return yaml.safe_dump(resolved, sort_keys=False)


def register(app: typer.Typer) -> None:
    """Add the `sweep` command to the CLI."""
    app.command("sweep")(sweep)
