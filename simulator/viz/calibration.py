"""Figures of a calibration: measured against fitted bus bandwidth per message size.

Figures are pure `DataFrame -> plotly Figure` functions of tidy frames:

* `fit_frame(fits)` -> `calibration_figure`: table fits straight from `fit_table` (one row
  per table and size: `file`, `size_bytes`, measured / model busbw, `rel_error`).
* `profile_frame(profile, tables)` -> `profile_file_figure`, `profile_entries_figure`,
  `profile_cards`: the calibration view of a saved profile. The fitted values are the
  profile entries themselves (`CollectiveFit.busbw_bytes_per_s`, what the engine uses),
  the measured ones come from the source files when they are found.

`profile_dashboard_html(profile_path, samples)` is the page `clustersim calibrate -o`
writes beside the profile and `clustersim dashboard PROFILE.yaml` rebuilds. A profile
records its source files by name and sha256 only, so the page looks for them beside the
profile, in `--samples` folders and in the samples shipped with the repository
(`topologies/calibration/samples/`); a file is used only when its sha256 matches,
otherwise its entries show the fitted curve and the errors the profile recorded (the page
says so). The page names no paths, so it is the same wherever the
files were found.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from simulator.calibration.fit import TableFit
from simulator.calibration.parser import DEFAULT_SAMPLES, read_benchmark
from simulator.calibration.profile import (
    CalibrationProfile,
    CollectiveEntry,
    CollectiveFit,
    load_profile,
)
from simulator.calibration.table import BenchmarkTable
from simulator.errors import InputError
from simulator.viz.dashboard import page

FRAME_COLUMNS = (
    "file",
    "size_bytes",
    "measured_busbw_bytes_per_s",
    "model_busbw_bytes_per_s",
    "rel_error",
)


def fit_frame(fits: Sequence[TableFit]) -> pd.DataFrame:
    """The tidy frame `calibration_figure` draws, from table fits."""
    parts = []
    for f in fits:
        e = f.errors
        parts.append(
            pd.DataFrame(
                {
                    "file": f.table.label,
                    "size_bytes": e["size_bytes"],
                    "measured_busbw_bytes_per_s": e["measured_busbw_bytes_per_s"],
                    "model_busbw_bytes_per_s": e["model_busbw_bytes_per_s"],
                    "rel_error": e["rel_error"],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=list(FRAME_COLUMNS))
    return pd.concat(parts, ignore_index=True)


def calibration_figure(frame: pd.DataFrame) -> go.Figure:
    """Measured (markers) and fitted (lines) bus bandwidth in GB/s against message size
    (log x), one colour per file; hover shows the relative time error."""
    missing = set(FRAME_COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks columns {sorted(missing)}")
    fig = go.Figure()
    palette = qualitative.Plotly
    for i, (name, g) in enumerate(frame.groupby("file", sort=False)):
        g = g.sort_values("size_bytes")
        color = palette[i % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=g["size_bytes"],
                y=g["measured_busbw_bytes_per_s"] / 1e9,
                mode="markers",
                name=f"{name} (measured)",
                legendgroup=str(name),
                marker={"color": color, "size": 7},
                customdata=g["rel_error"] * 100,
                hovertemplate="%{x:.3s}B: %{y:.1f} GB/s measured<br>model error %{customdata:+.1f}%",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=g["size_bytes"],
                y=g["model_busbw_bytes_per_s"] / 1e9,
                mode="lines",
                name=f"{name} (fit)",
                legendgroup=str(name),
                line={"color": color},
                hovertemplate="%{x:.3s}B: %{y:.1f} GB/s fitted",
            )
        )
    fig.update_layout(
        title="Bus bandwidth: measured (markers) and fitted (lines)",
        xaxis={"type": "log", "title": "message size (bytes)"},
        yaxis={"title": "bus bandwidth (GB/s)", "rangemode": "tozero"},
        legend={"font": {"size": 10}},
        template="plotly_white",
    )
    return fig


# -- the calibration view of a whole profile -------------------------------------------------

PROFILE_COLUMNS = (
    "file",
    "table",
    "collective",
    "n_gpus",
    "n_nodes",
    "size_bytes",
    "measured",
    "measured_busbw_bytes_per_s",
    "model_busbw_bytes_per_s",
    "rel_error",
)


@dataclass(frozen=True)
class SourceStatus:
    """Where a profile's source file was found, if anywhere.

    Attributes:
        file: file name as the profile records it.
        path: the file whose sha256 matches the profile's, or None.
        note: one sentence for the page when the file is not used ('' when it is).
    """

    file: str
    path: Path | None
    note: str = ""


def search_dirs(profile_path: str | Path, samples: Sequence[str | Path] = ()) -> list[Path]:
    """Folders searched for a profile's source files.

    Args:
        profile_path: the profile file; its own folder is searched first.
        samples: further folders (the `--samples` options), searched next.

    Returns:
        The folders, resolved and without repeats, ending with the samples shipped in
        `topologies/calibration/samples/`.
    """
    out: list[Path] = []
    for d in (Path(profile_path).parent, *map(Path, samples), DEFAULT_SAMPLES):
        r = d.resolve()
        if r not in out:
            out.append(r)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def locate_sources(profile: CalibrationProfile, dirs: Sequence[Path]) -> dict[str, SourceStatus]:
    """Find each source file of `profile` in `dirs` (first match of name and sha256 wins)."""
    out: dict[str, SourceStatus] = {}
    for src in profile.sources:
        mismatched = False
        found: Path | None = None
        for d in dirs:
            p = d / src.file
            if not p.is_file():
                continue
            if _sha256(p) == src.sha256:
                found = p
                break
            mismatched = True
        if found is not None:
            out[src.file] = SourceStatus(src.file, found)
        elif mismatched:
            out[src.file] = SourceStatus(
                src.file,
                None,
                f"{src.file}: a file of this name was found, but its sha256 differs from the "
                "profile's (another run); not used, fitted curve only.",
            )
        else:
            out[src.file] = SourceStatus(
                src.file,
                None,
                f"{src.file}: not found beside the profile, in --samples folders or in "
                "topologies/calibration/samples/; fitted curve only.",
            )
    return out


def entry_file(profile: CalibrationProfile, entry: CollectiveEntry) -> str:
    """The source file an entry was fitted on (its `source` is the file name, or
    `file#i (section)` for files holding several tables)."""
    for s in profile.sources:
        if entry.source == s.file or entry.source.startswith(s.file + "#"):
            return s.file
    return entry.source.split("#", 1)[0]


def read_sources(
    profile: CalibrationProfile, located: Mapping[str, SourceStatus]
) -> tuple[dict[str, BenchmarkTable], list[str]]:
    """Read the verified source files; tables keyed by the entry label they belong to.

    Each file is read with the collective, GPU and node counts of its entries as hints
    (used only where the log does not say them, as `clustersim calibrate` did), so logs
    that needed `--collective/--gpus/--nodes` read back the same. Returns the tables and a
    note per entry whose table could not be read or no longer matches.
    """
    tables: dict[str, BenchmarkTable] = {}
    notes: list[str] = []
    by_file: dict[str, list[CollectiveEntry]] = {}
    for e in profile.collectives:
        by_file.setdefault(entry_file(profile, e), []).append(e)
    for file, entries in by_file.items():
        status = located.get(file)
        if status is None or status.path is None:
            continue

        def hint(values: set[Any]) -> Any:
            return values.pop() if len(values) == 1 else None

        try:
            read = read_benchmark(
                status.path,
                collective=hint({e.collective for e in entries}),
                n_gpus=hint({e.n_gpus for e in entries}),
                n_nodes=hint({e.n_nodes for e in entries}),
            )
        except InputError as err:
            notes.append(f"{file}: could not be read ({err}); fitted curve only.")
            continue
        by_label = {t.label: t for t in read}
        for e in entries:
            t = by_label.get(e.source)
            if t is None:
                notes.append(f"{e.source}: table not found in {file}; fitted curve only.")
            elif (t.collective, t.n_gpus, t.n_nodes) != (e.collective, e.n_gpus, e.n_nodes):
                notes.append(
                    f"{e.source}: the file reads as {t.collective} on {t.n_gpus} GPUs / "
                    f"{t.n_nodes} node(s), not as the profile says; fitted curve only."
                )
            else:
                tables[e.source] = t
    return tables, notes


def profile_frame(
    profile: CalibrationProfile, tables: Mapping[str, BenchmarkTable] | None = None
) -> pd.DataFrame:
    """The tidy frame of the calibration view: one row per profile entry and message size.

    Columns (`PROFILE_COLUMNS`): `file` (source file), `table` (entry label), `collective`,
    `n_gpus`, `n_nodes`, `size_bytes`, `measured` (the table was read from a verified
    file), `measured_busbw_bytes_per_s` (NaN without the file), `model_busbw_bytes_per_s`
    (the profile entry's `CollectiveFit.busbw_bytes_per_s`, what the engine uses) and
    `rel_error` (model time / measured time - 1: computed from the data when read, else
    the value the profile recorded). Sizes are the measured sizes above 0 (from the
    table, else from the entry's recorded errors).
    """
    tables = tables or {}
    parts = []
    for e in profile.collectives:
        fit = CollectiveFit.from_entry(e)
        t = tables.get(e.source)
        if t is not None:
            m = t.sizes()
            m = m[m["size_bytes"] > 0]
            s = m["size_bytes"].to_numpy(dtype=float)
            measured_t = m["time_s"].to_numpy(dtype=float)
            model_t = fit.times_s(s)
            measured_bw = s * fit.factor / measured_t
            rel = model_t / measured_t - 1.0
        else:
            s = np.asarray([size for size, _ in e.errors if size > 0], dtype=float)
            rel = np.asarray([err for size, err in e.errors if size > 0], dtype=float)
            model_t = fit.times_s(s)
            measured_bw = np.full(len(s), np.nan)
        parts.append(
            pd.DataFrame(
                {
                    "file": entry_file(profile, e),
                    "table": e.source,
                    "collective": e.collective,
                    "n_gpus": e.n_gpus,
                    "n_nodes": e.n_nodes,
                    "size_bytes": s,
                    "measured": t is not None,
                    "measured_busbw_bytes_per_s": measured_bw,
                    "model_busbw_bytes_per_s": s * fit.factor / model_t,
                    "rel_error": rel,
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=list(PROFILE_COLUMNS))
    return pd.concat(parts, ignore_index=True)


def _check_columns(frame: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = set(columns) - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks columns {sorted(missing)}")


def profile_file_figure(frame: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Bus bandwidth (top: measured markers, fitted lines, GB/s) and error per size (bottom,
    %) against message size (log x), one colour per table of `frame` (usually the rows of
    one source file). Tables without data show the fitted line and the recorded error."""
    _check_columns(frame, PROFILE_COLUMNS)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.62, 0.38])
    palette = qualitative.Plotly
    for i, (name, g) in enumerate(frame.groupby("table", sort=False)):
        g = g.sort_values("size_bytes")
        color = palette[i % len(palette)]
        measured = bool(g["measured"].all())
        label = f"{g['collective'].iloc[0]} {g['n_gpus'].iloc[0]} GPUs/{g['n_nodes'].iloc[0]} node(s)"
        if frame["table"].nunique() > 1 or "#" in str(name):
            label = f"{name}: {label}"
        err_pct = g["rel_error"] * 100
        if measured:
            fig.add_trace(
                go.Scatter(
                    x=g["size_bytes"],
                    y=g["measured_busbw_bytes_per_s"] / 1e9,
                    mode="markers",
                    name=f"{label} measured",
                    legendgroup=str(name),
                    marker={"color": color, "size": 7},
                    customdata=err_pct,
                    hovertemplate="%{x:.3s}B: %{y:.2f} GB/s measured<br>model error %{customdata:+.2f}%"
                    "<extra></extra>",
                ),
                row=1,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=g["size_bytes"],
                y=g["model_busbw_bytes_per_s"] / 1e9,
                mode="lines",
                name=f"{label} fitted",
                legendgroup=str(name),
                line={"color": color},
                hovertemplate="%{x:.3s}B: %{y:.2f} GB/s fitted<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=g["size_bytes"],
                y=err_pct,
                mode="lines+markers",
                name=f"{label} error" + ("" if measured else " (recorded in profile)"),
                legendgroup=str(name),
                showlegend=False,
                line={"color": color, "width": 1, "dash": "solid" if measured else "dot"},
                marker={"color": color, "size": 5},
                hovertemplate="%{x:.3s}B: model/measured - 1 = %{y:+.2f}%<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.add_hline(y=0, line={"color": "#999", "width": 1}, row=2, col=1)
    if title is None:
        files = list(dict.fromkeys(frame["file"]))
        title = ", ".join(files) if files else "calibration"
        if len(frame) and not frame["measured"].all():
            title += (
                "<br><sup>source file not available: fitted curve, error as recorded in the profile</sup>"
            )
    fig.update_layout(
        title=title,
        legend={"font": {"size": 10}},
        template="plotly_white",
        height=560,
        margin={"t": 80},
    )
    fig.update_xaxes(type="log", exponentformat="power", row=1, col=1)
    fig.update_xaxes(type="log", exponentformat="power", title_text="message size (bytes)", row=2, col=1)
    fig.update_yaxes(title_text="bus bandwidth (GB/s)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="error (%)", tickformat="~g", row=2, col=1)
    return fig


def profile_entries_figure(profile: CalibrationProfile, frame: pd.DataFrame) -> go.Figure:
    """A table of the profile's entries: fitted alpha and busbw, errors, data status."""
    _check_columns(frame, PROFILE_COLUMNS)
    rows = []
    for e in profile.collectives:
        g = frame[frame["table"] == e.source]
        big = g[g["size_bytes"] >= 2**20]["rel_error"].abs()
        rows.append(
            (
                e.source,
                e.collective,
                f"{e.n_gpus}/{e.n_nodes}",
                f"{e.alpha_s * 1e6:.2f}",
                f"{e.busbw_bytes_per_s / 1e9:.1f}",
                f"{len(g)}",
                f"{big.median() * 100:.2f}%" if len(big) else "-",
                f"{g['rel_error'].abs().max() * 100:.2f}%" if len(g) else "-",
                "measured" if len(g) and g["measured"].all() else "recorded",
            )
        )
    header = [
        "table",
        "collective",
        "GPUs/nodes",
        "alpha (us)",
        "busbw (GB/s)",
        "sizes",
        "median |error| >= 1 MiB",
        "max |error|",
        "errors from",
    ]
    cols = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in header]
    fig = go.Figure(
        go.Table(
            columnwidth=[5, 2, 1.4, 1.4, 1.6, 1, 2.2, 1.6, 1.6],
            header={"values": header, "align": "left", "fill_color": "#eee"},
            cells={"values": cols, "align": "left"},
        )
    )
    fig.update_layout(
        title="Profile entries (the fitted line t(S) = (alpha + S factor(n) / busbw) / e(S))",
        height=120 + 28 * max(len(rows), 1),
        margin={"t": 60, "b": 10},
    )
    return fig


def profile_cards(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """Headline cards: entries, files (how many verified), median |error| over sizes
    >= 1 MiB and the max |error| (with where)."""
    _check_columns(frame, PROFILE_COLUMNS)
    n_files = frame["file"].nunique()
    verified = frame.loc[frame["measured"].astype(bool), "file"].nunique()
    big = frame.loc[frame["size_bytes"].astype(float) >= 2**20, "rel_error"].abs()
    cards = [
        ("entries", f"{frame['table'].nunique()}"),
        ("source files (data found)", f"{n_files} <span class='s'>({verified} with data)</span>"),
        ("median |error|, sizes >= 1 MiB", f"{big.median() * 100:.2f}%" if len(big) else "-"),
    ]
    if len(frame):
        worst = frame.loc[frame["rel_error"].abs().idxmax()]
        where = f"{worst['table']} at {int(worst['size_bytes']):,} B"
        cards.append(
            (
                "max |error|",
                (f"{abs(worst['rel_error']) * 100:.2f}% <span class='s'>({html.escape(where)})</span>"),
            )
        )
    else:
        cards.append(("max |error|", "-"))
    return cards


def profile_dashboard(
    profile: CalibrationProfile,
    tables: Mapping[str, BenchmarkTable] | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The calibration page of a profile from its entries and the tables read (no I/O)."""
    frame = profile_frame(profile, tables)
    figures = [profile_entries_figure(profile, frame)]
    for file in dict.fromkeys(entry_file(profile, e) for e in profile.collectives):
        figures.append(profile_file_figure(frame[frame["file"] == file]))
    head = [profile.description] if profile.description else []
    head.append(
        "Bus bandwidth is nccl-tests' busbw (size x factor(n) / time); 'fitted' is the profile "
        "entry the simulator uses, t(S) = (alpha + S factor(n) / busbw) / e(S); error = "
        "model time / measured time - 1 at each measured size (the smaller of the out-of-place "
        "and in-place times)."
    )
    if profile.compute is not None:
        c = profile.compute
        parts = [f"GEMM {', '.join(sorted(c.gemm))}"] if c.gemm else []
        if c.memory is not None:
            parts.append("memory-bound kernels")
        head.append(
            "The profile also calibrates compute (" + "; ".join(parts or ["empty"]) + "); not drawn here."
        )
    # embedded: the page sits beside its profile, often in a folder of profiles that travel alone
    return page(
        f"clustersim calibration: {profile.name}",
        profile_cards(frame),
        figures,
        [*head, *notes],
        plotly_src=None,
    )


def profile_dashboard_html(profile_path: str | Path, samples: Sequence[str | Path] = ()) -> str:
    """The calibration page of the profile at `profile_path` (self-contained HTML).

    Source files are looked up by name in `search_dirs(profile_path, samples)` and used
    only when their sha256 matches the profile's; a file not found (or different) gives
    its fitted curves only, with a note.

    Raises:
        InputError: the profile is missing or invalid.
    """
    profile = load_profile(profile_path)
    located = locate_sources(profile, search_dirs(profile_path, samples))
    tables, read_notes = read_sources(profile, located)
    n_ok = sum(1 for s in located.values() if s.path is not None)
    notes = [f"Source files: {n_ok} of {len(located)} found with the sha256 the profile records."]
    notes += [s.note for s in located.values() if s.note]
    notes += read_notes
    return profile_dashboard(profile, tables, notes)
