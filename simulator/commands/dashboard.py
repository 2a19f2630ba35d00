"""`clustersim dashboard` (rebuild dashboards from saved results) and `clustersim trace`.

`dashboard RESULTS_DIR... [-o FILE]` reads saved results only (never re-simulates) and
recognizes what a folder holds by its files:

* a comparison (`compare.resolved.yaml` + `comparison.parquet|csv`, one run folder per
  variant) -> `simulator.viz.compare.comparison_html`, written to `comparison.html`;
* a run-level study (`study.resolved.yaml` + `runs.parquet|csv`) -> the faults room's
  `sweep_figure` in a dashboard page, written to `sweep.html`;
* a calibration profile (a profile YAML file, or a folder holding exactly one profile
  with `sources:` and no frames) -> `simulator.viz.calibration.profile_dashboard_html`,
  written to `PROFILE.html` beside it; its benchmark logs are looked for beside the
  profile, in `--samples` folders and in ../shared/calibration/nccl-tests;
* a run (`summary.json` + frames) -> the run dashboard, written to `dashboard.html`.

Other rooms' builders are imported lazily, so a missing one gives a clear error for its
kind only. Several folders rebuild each one in place (`-o` needs a single folder).

`trace RESULTS_DIR [-o FILE]` writes the run's step timeline as a Chrome/Perfetto trace
(`trace.json` in the folder by default).
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
import yaml

from simulator.commands.common import console, fail
from simulator.errors import ClustersimError, InputError
from simulator.io import write_atomic


def _table(folder: Path, stem: str) -> pd.DataFrame | None:
    from simulator.metrics.store import read_table

    return read_table(folder, stem)


def _has_table(folder: Path, stem: str) -> bool:
    return (folder / f"{stem}.parquet").is_file() or (folder / f"{stem}.csv").is_file()


def _missing(kind: str, module: str, folder: Path) -> InputError:
    return InputError(
        f"this folder holds a {kind} result, but this version of clustersim has no {kind} "
        f"dashboard builder ({module})",
        file=folder,
    )


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", file=path) from None
    return data if isinstance(data, dict) else {}


# -- builders: folder -> (html, default file name) ---------------------------------------------


def build_run(folder: Path) -> tuple[str, str]:
    from simulator.viz.dashboard import run_dashboard_from_folder

    return run_dashboard_from_folder(folder), "dashboard.html"


def build_comparison(folder: Path) -> tuple[str, str]:
    try:
        from simulator.viz.compare import comparison_html
    except ImportError:
        raise _missing("comparison", "simulator.viz.compare", folder) from None
    from simulator.metrics.store import read_frames

    table = _table(folder, "comparison")
    if table is None:
        raise InputError("comparison.parquet / comparison.csv not found", file=folder)
    resolved = _read_yaml(folder / "compare.resolved.yaml")
    spec = resolved.get("compare") or {}
    name = str(spec.get("name") or folder.name)
    frames: dict[str, list[pd.DataFrame]] = {"steps": [], "links": []}
    for variant in table["variant"].astype(str):
        vdir = folder / variant
        if not vdir.is_dir():
            raise InputError(f"run folder of variant {variant!r} not found", file=vdir)
        run = read_frames(vdir)
        for k, parts in frames.items():
            if k in run:
                df = run[k]
                parts.append(df if "variant" in df else df.assign(variant=variant))
    stacked = {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in frames.items()}
    notes = [str(spec["description"])] if spec.get("description") else []
    return comparison_html(name, table, stacked, notes), "comparison.html"


def build_sweep(folder: Path) -> tuple[str, str]:
    try:
        from simulator.viz import faults as faults_figure
    except ImportError:
        raise _missing("run-level study", "simulator.viz.faults", folder) from None
    custom = getattr(faults_figure, "sweep_dashboard_html", None)
    if callable(custom):
        return custom(folder), "sweep.html"
    from simulator.viz.dashboard import page

    runs = _table(folder, "runs")
    if runs is None:
        raise InputError("runs.parquet / runs.csv not found", file=folder)
    resolved = _read_yaml(folder / "study.resolved.yaml")
    study = resolved.get("study") or {}
    if not runs.attrs.get("axes"):  # CSV keeps no attrs: take the axes from the resolved study
        runs.attrs["axes"] = [a for a in _axis_names(study.get("axes")) if a in runs.columns]
    axes = list(runs.attrs.get("axes", []))
    name = str(study.get("name") or folder.name)
    n_seeds = int(runs["seed"].nunique()) if "seed" in runs else 1
    n_variants = int(runs["variant"].nunique()) if "variant" in runs else len(runs) // max(n_seeds, 1)
    cards = [("runs", f"{len(runs):,} <span class='s'>({n_variants} variants x {n_seeds} seeds)</span>")]
    for col, label in (("goodput", "mean goodput"), ("ettr", "mean ETTR")):
        if col in runs:
            cards.append((label, f"{runs[col].mean() * 100:.1f}%"))
    if "goodput" in runs and axes:
        best = runs.groupby(axes, sort=False)["goodput"].mean().sort_values(ascending=False)
        key = best.index[0] if isinstance(best.index[0], tuple) else (best.index[0],)
        where = ", ".join(f"{a}={v}" for a, v in zip(axes, key, strict=True))
        cards.append(
            ("best mean goodput", f"{best.iloc[0] * 100:.1f}% <span class='s'>({html.escape(where)})</span>")
        )
    notes = [str(study["description"])] if study.get("description") else []
    notes.append(
        f"{len(runs)} runs: {n_variants} variants x {n_seeds} seeds. Lines are the mean over seeds, "
        "bands the 95% Student-t interval of the mean"
        + (
            " (a single seed gives none)."
            if n_seeds < 2
            else f" ({n_seeds} seeds: with so few the interval is wide)."
            if n_seeds < 5
            else "."
        )
    )
    figures = [faults_figure.sweep_figure(runs)]
    if "ettr" in runs:
        figures.append(faults_figure.sweep_figure(runs, metric="ettr"))
    return page(f"clustersim study: {name}", cards, figures, notes), "sweep.html"


def _axis_names(axes: object) -> list[str]:
    """Axis names of a resolved study: a mapping `{name: values}` or a list of
    `{param, values, name}` items (the column is the name, else the param)."""
    if isinstance(axes, dict):
        return [str(a) for a in axes]
    if isinstance(axes, list):
        out = []
        for a in axes:
            if isinstance(a, dict) and (a.get("name") or a.get("param")):
                out.append(str(a.get("name") or a["param"]))
        return out
    return []


def _looks_like_profile(p: Path) -> bool:
    try:
        head = p.read_text(encoding="utf-8")[:4000]
    except (OSError, UnicodeDecodeError):
        return False
    return "\nsources:" in head and ("collectives" in head or "compute" in head)


def _calibration_profiles(folder: Path) -> list[Path]:
    return [
        p
        for p in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
        if not p.name.endswith(".resolved.yaml") and _looks_like_profile(p)
    ]


def build_calibration(path: Path, samples: Sequence[Path] = ()) -> tuple[str, str]:
    """A calibration profile (a YAML file, or a folder holding exactly one) -> its page."""
    if path.is_dir():
        found = _calibration_profiles(path)
        if not found:
            raise InputError("no calibration profile in this folder", file=path)
        if len(found) > 1:
            raise InputError(
                f"{len(found)} calibration profiles in this folder "
                f"({', '.join(p.name for p in found)}); name the one to show",
                file=path,
            )
        path = found[0]
    from simulator.viz.calibration import profile_dashboard_html

    return profile_dashboard_html(path, samples=samples), f"{path.stem}.html"


def detect(path: Path, samples: Sequence[Path] = ()) -> tuple[str, Callable[[Path], tuple[str, str]]]:
    """What a results folder (or a calibration profile file) holds: (kind, builder)."""
    calibration = partial(build_calibration, samples=samples)
    if path.is_file() and path.suffix.lower() in (".yaml", ".yml"):
        return "calibration", calibration
    if not path.is_dir():
        raise InputError("results folder not found", file=path)
    folder = path
    if (folder / "compare.resolved.yaml").is_file() or _has_table(folder, "comparison"):
        return "comparison", build_comparison
    if (folder / "study.resolved.yaml").is_file() or _has_table(folder, "runs"):
        return "study", build_sweep
    if (folder / "summary.json").is_file() and any(
        _has_table(folder, n) for n in ("ops", "steps", "links", "incidents", "segments")
    ):
        return "run", build_run
    if _calibration_profiles(folder):
        return "calibration", calibration
    raise InputError(
        "not a results folder: expected a run (summary.json and frames), a comparison "
        "(compare.resolved.yaml), a study (study.resolved.yaml) or a calibration profile",
        file=folder,
    )


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def register(app: typer.Typer) -> None:
    """Add `dashboard` and `trace` to the CLI."""

    @app.command()
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
                "../shared/calibration/nccl-tests).",
            ),
        ] = None,
    ) -> None:
        """Rebuild dashboards from saved results only (no simulation)."""
        try:
            if output is not None and len(results) > 1:
                raise InputError(
                    "-o/--output takes one results folder; without it each folder is rebuilt in place"
                )
            for folder in results:
                t = time.perf_counter()
                kind, build = detect(folder, samples or ())
                html, default_name = build(folder)
                base = folder.parent if folder.is_file() else folder
                path = output or base / default_name
                write_atomic(path, html)
                console.print(
                    f"{kind} dashboard: {path} ({_size(len(html.encode()))}, "
                    f"built in {time.perf_counter() - t:.1f} s)",
                    markup=False,
                    soft_wrap=True,
                )
        except ClustersimError as err:
            fail(err)

    @app.command()
    def trace(
        results: Annotated[Path, typer.Argument(help="Run results folder.")],
        output: Annotated[
            Path | None,
            typer.Option("-o", "--output", help="Trace JSON to write (default RESULTS/trace.json)."),
        ] = None,
        step: Annotated[
            list[int] | None, typer.Option("--step", help="Only these steps (repeatable; default all).")
        ] = None,
        links: Annotated[
            int, typer.Option(help="Busiest links given a utilization counter track.", min=0)
        ] = 8,
    ) -> None:
        """Write the step timeline as a Chrome/Perfetto trace (open in ui.perfetto.dev)."""
        from simulator.metrics.store import read_frames
        from simulator.viz.chrome_trace import write_chrome_trace

        try:
            frames = read_frames(results)
            if "ops" not in frames:
                raise InputError(
                    "no ops frame (ops.parquet / ops.csv): not a step-level run folder", file=results
                )
            path = output or results / "trace.json"
            counts = write_chrome_trace(frames, path, steps=step or None, top_links=links)
        except ClustersimError as err:
            fail(err)
        console.print(
            f"trace: {path} ({counts['ops']:,} ops, {counts['counter_samples']:,} counter samples on "
            f"{counts['link_counters']} links; open in https://ui.perfetto.dev)",
            markup=False,
            soft_wrap=True,
        )
