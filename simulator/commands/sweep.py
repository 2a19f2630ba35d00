"""`clustersim sweep FILE`: a run-level study over seeds (process pool or Dask)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.table import Table

from simulator.commands.common import console, fail
from simulator.errors import ClustersimError
from simulator.io import write_atomic


def register(app: typer.Typer) -> None:
    """Add the `sweep` command to the CLI."""

    @app.command("sweep")
    def sweep(
        file: Annotated[Path, typer.Argument(help="Study file (YAML): base run, failures, policy, axes.")],
        out: Annotated[Path, typer.Option("-o", "--out", help="Folder for results.")] = Path("results/sweep"),
        seeds: Annotated[
            int | None, typer.Option("--seeds", min=1, help="Seeds per variant (default: the file's).")
        ] = None,
        dask: Annotated[
            str | None, typer.Option("--dask", help="Dask scheduler address, or 'local' for a LocalCluster.")
        ] = None,
        workers: Annotated[
            int | None, typer.Option("--workers", min=1, help="Local process-pool size.")
        ] = None,
    ) -> None:
        """Run a run-level study (checkpoint interval, MTBF scale, spares, policy) across seeds."""
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
            from simulator.study.executor import progress_bar

            total = len(study.variants) * (seeds or study.spec.seeds)
            with progress_bar(f"simulating {study.spec.name}", total, console) as on_done:
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
        axes = list(runs.attrs.get("axes", []))
        table = Table(title=f"{study.spec.name}: mean [95% interval]")
        for col in (*axes, "goodput", "ettr", "interruptions", "lost work/int. (s)"):
            table.add_column(col)
        for _, row in summary.iterrows():

            def ci(m: str, fmt: str = "{:.3f}") -> str:
                return f"{fmt.format(row[m + '_mean'])} [{fmt.format(row[m + '_lo'])}, {fmt.format(row[m + '_hi'])}]"

            table.add_row(
                *[str(row[a]) for a in axes],
                ci("goodput"),
                ci("ettr"),
                ci("interruptions", "{:.1f}"),
                ci("lost_work_per_interruption_s", "{:.0f}"),
            )
        console.print(table)
        console.print(f"wrote {runs_path}, {out / 'summary.csv'}, {out / 'sweep.html'}")


__all__ = ["register"]
