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

from simulator.commands.common import console, fail, progress_bar
from simulator.errors import ClustersimError, InputError
from simulator.io import write_atomic

if TYPE_CHECKING:
    import pandas as pd

    from simulator.study.compare import Comparison


def _ms(v: Any) -> str:
    return f"{v * 1e3:.2f} ms" if v is not None and not math.isnan(v) else "n/a"


def comparison_rich_table(table: pd.DataFrame, title: str) -> Table:
    """The comparison table as printed: one row per variant."""
    t = Table(title=title, show_header=True)
    cols: list[tuple[str, str, Any]] = [
        ("variant", "variant", str),
        ("step time", "step_time_s", _ms),
        ("vs first", "relative_step_time", lambda v: f"{v:.2f}x"),
        ("exposed comm", "exposed_comm_s", _ms),
        ("MFU", "mfu", lambda v: f"{v * 100:.1f}%"),
        ("network capex", "network_capex_usd", lambda v: f"${v:,.0f}"),
        ("capex/GPU", "network_capex_per_gpu_usd", lambda v: f"${v:,.0f}"),
        ("$/Mtoken (network)", "network_usd_per_mtoken", lambda v: f"${v:.4f}"),
    ]
    shown = [(label, key, f) for label, key, f in cols if key in table.columns]
    for label, key, _ in shown:
        t.add_column(label, justify="left" if key == "variant" else "right", no_wrap=key == "variant")
    for _, row in table.iterrows():
        t.add_row(*(f(row[key]) if row[key] is not None else "" for _, key, f in shown))
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
) -> None:
    """Run every variant of a compare file; write a comparison table, dashboard and run folders."""
    # the simulator and the figures are imported inside the command, so that `clustersim --help` stays fast
    from simulator.study import compare as cmpmod
    from simulator.study.executor import LOCAL_DASK, describe
    from simulator.viz.compare import comparison_html

    try:
        if serial and dask:
            raise InputError("give either --serial or --dask, not both")
        executor: Any = "serial" if serial else ("pool" if dask is None else dask)
        if executor == "local":
            executor = LOCAL_DASK
        cmp = cmpmod.load_comparison(file)
        out = output or Path("results") / cmp.name
        if out.exists() and not out.is_dir():
            raise InputError("output path exists and is not a folder", file=out)
        console.print(f"comparing {len(cmp.variants)} variant(s) of {cmp.name} on {describe(executor)}")
        with progress_bar(f"simulating {cmp.name}", len(cmp.variants)) as on_done:
            results = cmpmod.run_comparison(cmp, executor, max_workers=workers, on_done=on_done, steps=steps)
        table = cmpmod.comparison_table(results, cmp.spec.cost.amortization_years)
        for r in results:
            r.write(out / r.summary["variant"], dashboard=dashboards)
        _write_table(table, out, "comparison")
        frames = {k: cmpmod.concat_frames(results, k) for k in ("steps", "links")}
        write_atomic(out / "compare.resolved.yaml", _resolved(cmp))
        write_atomic(
            out / "comparison.html",
            comparison_html(cmp.name, table, frames, [cmp.spec.description]),
        )
    except ClustersimError as err:
        fail(err)
    console.print(comparison_rich_table(table, cmp.name))
    console.print(f"results: {out}/ (comparison.html, comparison.csv, one run folder per variant)")


def register(app: typer.Typer) -> None:
    """Add the `compare` command to the CLI."""
    app.command("compare")(compare)
