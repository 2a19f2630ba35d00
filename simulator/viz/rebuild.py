"""Rebuilding a dashboard from saved results only (nothing is simulated again).

What a path holds is recognized by its files, checked in this order:

* a calibration profile given as a YAML file -> `simulator.viz.calibration.profile_dashboard_html`,
  written as `PROFILE.html` beside it; its benchmark logs are looked for beside the
  profile, in the `samples` folders and in topologies/calibration/samples/;
* a comparison (`compare.resolved.yaml` or `comparison.parquet|csv`, one run folder per
  variant) -> `simulator.viz.compare.comparison_html`, written as `comparison.html`;
* a run (`summary.json` and at least one step-level or failure frame; a run with failures
  also has a `runs` frame) -> the run dashboard, as `dashboard.html`; a comparison's variant
  rebuilt in place loads the comparison folder's `../plotly.min.js`, as `compare` wrote it;
* a run-level study (`study.resolved.yaml`, `manifest.json` or `runs.parquet|csv`; the
  runs read from the study's dataset while it is unfinished) -> `study_page` (per-variant
  tiles, `simulator.viz.faults.sweep_figure` of goodput and ETTR, the wall time by part),
  as `sweep.html`, the same page `clustersim sweep` writes;
* a folder holding calibration profiles (YAML files with `sources:` and collective or
  compute tables) -> the page of its only profile.

Simplifications: recognition goes by file names (and, for a profile, the first 4000
characters of the YAML text), not by validating the contents; the page is whatever the
builder of that kind makes of the saved files, so it equals the page written at run time.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from simulator.errors import InputError
from simulator.metrics.store import (
    MANIFEST,
    check_frame,
    read_dataset,
    read_manifest,
    read_run_folder,
    read_table,
)
from simulator.viz.calibration import profile_dashboard_html
from simulator.viz.compare import DEFAULT_PRICES_NAME, comparison_html
from simulator.viz.dashboard import PLOTLY_FILE, page, run_dashboard_from_folder
from simulator.viz.faults import sweep_figure
from simulator.viz.goodput import wall_time_figure

#: A dashboard builder: results path -> (page HTML, default file name beside the results).
Builder = Callable[[Path], tuple[str, str]]

#: Frames whose presence (with summary.json) marks a run folder.
RUN_FRAMES = ("ops", "steps", "links", "incidents", "segments")

#: Characters of a YAML file read to tell whether it is a calibration profile.
PROFILE_HEAD_CHARS = 4000


@dataclass(frozen=True)
class RebuiltDashboard:
    """A dashboard rebuilt from saved results.

    Attributes:
        kind: what the results are: "run", "comparison", "study" or "calibration".
        html: the page (see `simulator.viz.dashboard.write_page` for writing it).
        default_path: where the page goes by default (in the results folder, or beside a
            profile file).
    """

    kind: str
    html: str
    default_path: Path


def _has_table(folder: Path, stem: str) -> bool:
    return (folder / f"{stem}.parquet").is_file() or (folder / f"{stem}.csv").is_file()


def _read_yaml(path: Path) -> dict[str, Any]:
    """A resolved file's mapping; {} when the file is missing (it only adds names and notes)."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read ({type(exc).__name__})", file=path) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {str(exc).splitlines()[0]}", file=path) from None
    return data if isinstance(data, dict) else {}


def build_run(folder: Path, in_place: bool = False) -> tuple[str, str]:
    """A run folder -> its run dashboard (the folder checked complete first). `in_place`: the
    page goes into the folder, so a comparison's variant loads its parent's plotly.js.

    Raises:
        InputError: a frame or the summary is missing, unreadable or incomplete.
    """
    read_run_folder(folder)
    parent = folder.resolve().parent
    variant = in_place and (parent / "compare.resolved.yaml").is_file() and (parent / PLOTLY_FILE).is_file()
    src = f"../{PLOTLY_FILE}" if variant else PLOTLY_FILE
    return run_dashboard_from_folder(folder, src), "dashboard.html"


def build_comparison(folder: Path) -> tuple[str, str]:
    """A comparison folder -> the comparison dashboard, from its table and variant run folders.

    Raises:
        InputError: the comparison table or a variant's run folder is missing.
    """
    table = read_table(folder, "comparison")
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
        run, _ = read_run_folder(vdir)
        for k, parts in frames.items():
            if k in run:
                df = run[k]
                parts.append(df if "variant" in df else df.assign(variant=variant))
    stacked = {k: pd.concat(v, ignore_index=True) if v else pd.DataFrame() for k, v in frames.items()}
    notes = [str(spec["description"])] if spec.get("description") else []
    cost = spec.get("cost")
    named = cost.get("prices") if isinstance(cost, dict) else None
    prices = str(named.get("file") or DEFAULT_PRICES_NAME) if isinstance(named, dict) else DEFAULT_PRICES_NAME
    return comparison_html(name, table, stacked, notes, prices=prices), "comparison.html"


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


#: Variant tiles at most on a study page (the best ones by mean goodput; the page says so).
MAX_VARIANT_TILES = 24


def _study_cards(runs: pd.DataFrame, axes: list[str], n_variants: int, n_seeds: int) -> list[tuple[str, str]]:
    """Headline cards of a study: the run count, then one tile per variant (grouped by the
    `variant` column, best mean goodput first) with its axis values and its mean goodput and
    ETTR over seeds; nothing is averaged over variants."""
    cards = [("runs", f"{len(runs):,} <span class='s'>({n_variants} variants x {n_seeds} seeds)</span>")]
    if "goodput" not in runs:
        return cards
    keys = ["variant", *[a for a in axes if a != "variant"]] if "variant" in runs else axes
    if not keys:
        return cards
    metrics = [m for m in ("goodput", "ettr") if m in runs]
    per = runs.groupby(keys, sort=False)[metrics].mean().sort_values("goodput", ascending=False)
    shown = axes or ["variant"]
    for key, row in per.head(MAX_VARIANT_TILES).iterrows():
        values = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        where = ", ".join(f"{a}={values[a]}" for a in shown)
        value = f"{row['goodput'] * 100:.1f}%"
        if "ettr" in row:
            value += f" <span class='s'>ETTR {row['ettr'] * 100:.1f}%</span>"
        cards.append((f"goodput, {where}", value))
    if len(per) > MAX_VARIANT_TILES:
        cards.append(
            ("variants not tiled", f"{len(per) - MAX_VARIANT_TILES} <span class='s'>(see figures)</span>")
        )
    return cards


def _interval_note(n_runs: int, n_variants: int, n_seeds: int) -> str:
    """What the study page's lines and bands are, and how far to trust the bands."""
    return (
        f"{n_runs} runs: {n_variants} variants x {n_seeds} seeds. Lines are the mean over seeds, "
        "bands the 95% Student-t interval of the mean"
        + (
            " (a single seed gives none)."
            if n_seeds < 2
            else f" ({n_seeds} seeds: with so few the interval is wide)."
            if n_seeds < 5
            else "."
        )
    )


def build_study(folder: Path) -> tuple[str, str]:
    """A run-level study folder -> its page: cards, then goodput (and ETTR) against the axes.

    Raises:
        InputError: the runs table is missing.
    """
    runs = read_table(folder, "runs")
    if runs is None and (folder / MANIFEST).is_file():  # a study still running or stopped
        runs = read_dataset(folder, "runs")
    if runs is None or runs.empty:
        raise InputError(
            "no finished runs (runs.parquet / runs.csv, or a dataset) in this folder", file=folder
        )
    check_frame(folder, "runs", runs)
    resolved = _read_yaml(folder / "study.resolved.yaml")
    study = resolved.get("study") or {}
    if not runs.attrs.get("axes"):  # CSV keeps no attrs: take the axes from the resolved study
        runs.attrs["axes"] = [a for a in _axis_names(study.get("axes")) if a in runs.columns]
    name = str(study.get("name") or folder.name)
    return study_page(name, runs, study), "sweep.html"


def _page_axes(runs: pd.DataFrame) -> list[str]:
    """The columns a study page groups by: the axis columns when their values tell the
    variants apart (each label one variant), else `variant` (results whose axis labels
    name two variants alike are not pooled)."""
    axes = [a for a in runs.attrs.get("axes", []) if a in runs]
    if axes and "variant" in runs and (runs.groupby(axes, dropna=False)["variant"].nunique() > 1).any():
        return ["variant"]
    return axes


def study_page(name: str, runs: pd.DataFrame, study: dict[str, Any]) -> str:
    """The study page, written by `clustersim sweep` and rebuilt by `clustersim dashboard`:
    per-variant tiles, goodput (and ETTR) against the axes, and where each variant's wall
    time went (`simulator.viz.goodput`).

    Args:
        name: the study's name (page title).
        runs: the `runs` frame, its axes in `runs.attrs['axes']`.
        study: the resolved study mapping (its `description` is shown).
    """
    axes = _page_axes(runs)
    if axes != list(runs.attrs.get("axes", [])):
        runs = runs.copy()
        runs.attrs["axes"] = axes
    n_seeds = int(runs["seed"].nunique()) if "seed" in runs else 1
    n_variants = int(runs["variant"].nunique()) if "variant" in runs else len(runs) // max(n_seeds, 1)
    cards = _study_cards(runs, axes, n_variants, n_seeds)
    notes = [str(study["description"])] if study.get("description") else []
    notes.append(_interval_note(len(runs), n_variants, n_seeds))
    figures = [sweep_figure(runs)]
    if "ettr" in runs:
        figures.append(sweep_figure(runs, metric="ettr"))
    if {"wall_s", "useful_s"} <= set(runs.columns) and (axes or "variant" in runs):
        if not axes:
            runs = runs.copy()
            runs.attrs["axes"] = ["variant"]
        figures.append(wall_time_figure(runs))
    return page(f"clustersim study: {name}", cards, figures, notes)


def _looks_like_profile(p: Path) -> bool:
    """Whether `p` is a regular file whose head reads like a calibration profile. Only the
    head is read, and a pipe or a device named *.yaml is never opened (reading a FIFO
    waited for a writer forever, /dev/zero never ended)."""
    try:
        if not p.is_file():
            return False
        with p.open("rb") as fh:
            data = fh.read(PROFILE_HEAD_CHARS * 4)
        head = codecs.getincrementaldecoder("utf-8")().decode(data)[:PROFILE_HEAD_CHARS]
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
    """A calibration profile (a YAML file, or a folder holding exactly one) -> its page.

    Raises:
        InputError: the folder holds no profile, or several.
    """
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
    return profile_dashboard_html(path, samples=samples), f"{path.stem}.html"


def detect_results(path: Path, samples: Sequence[Path] = (), in_place: bool = False) -> tuple[str, Builder]:
    """What a results folder (or a calibration profile file) holds: (kind, builder).

    Args:
        path: a results folder, or a calibration profile's YAML file.
        samples: extra folders to look for a calibration profile's benchmark logs in.
        in_place: the page will be written to its default path (`build_run`).

    Raises:
        InputError: the path does not exist, or holds none of the known results.
    """
    calibration = partial(build_calibration, samples=samples)
    if path.is_file() and path.suffix.lower() in (".yaml", ".yml"):
        return "calibration", calibration
    if not path.is_dir():
        raise InputError("results folder not found", file=path)
    folder = path
    manifest = read_manifest(folder)
    if (
        (folder / "compare.resolved.yaml").is_file()
        or _has_table(folder, "comparison")
        or (manifest or {}).get("kind") == "compare"
    ):
        return "comparison", build_comparison
    # a run with failures has a runs table too: summary.json marks the run (a study has none)
    if (folder / "summary.json").is_file() and any(
        _has_table(folder, n) for n in (*RUN_FRAMES, "cluster_jobs")
    ):
        return "run", partial(build_run, in_place=in_place)
    if (
        (folder / "study.resolved.yaml").is_file()
        or (folder / MANIFEST).is_file()
        or _has_table(folder, "runs")
    ):
        return "study", build_study
    if _calibration_profiles(folder):
        return "calibration", calibration
    raise InputError(
        "not a results folder: expected a run (summary.json and frames), a comparison "
        "(compare.resolved.yaml), a study (study.resolved.yaml) or a calibration profile",
        file=folder,
    )


def rebuild_dashboard(path: Path, samples: Sequence[Path] = (), in_place: bool = False) -> RebuiltDashboard:
    """Recognize what `path` holds and rebuild its dashboard (see the module docstring).

    Args:
        path: a results folder, or a calibration profile's YAML file.
        samples: extra folders to look for a calibration profile's benchmark logs in.
        in_place: the page will be written to its default path (a run's folder).

    Raises:
        InputError: the path holds no known results, or they are incomplete or unreadable.
    """
    kind, build = detect_results(path, samples, in_place)
    page_html, default_name = build(path)
    base = path.parent if path.is_file() else path
    return RebuiltDashboard(kind, page_html, base / default_name)
