"""`clustersim calibrate`: fit a calibration profile from benchmark output, or check one.

    clustersim calibrate LOGS... [GEMM.csv ...] -o PROFILE.yaml [--collective K --gpus N --nodes M]
        [--gpu GPU.yaml]
    clustersim calibrate --check PROFILE.yaml LOGS... [--in-place] [--max-error PCT] [--topology T.yaml]

The first form reads nccl-tests / rccl-tests logs or collective CSV tables (columns
size_bytes, time_us_oop, busbw_oop[, time_us_ip, busbw_ip], optionally algbw_oop / algbw_ip;
`simulator.calibration.csv_table`), and GEMM / memory-kernel CSV files, refuses a table whose
rows disagree with its collective and GPU count (`simulator.calibration.row_checks`),
fits every table, writes the profile (atomically) and its calibration page beside it
(`PROFILE.html`, plotly.js embedded; `simulator.viz.calibration.profile_dashboard_html`,
rebuilt by `clustersim dashboard PROFILE.yaml`), and prints the fit error per table against
the faster of the out-of-place and in-place times of each size (the time fitted; the
screen says so). The second form
predicts every measured size of the logs from the profile (across scales where the
profile lacks that GPU/node count) and prints the error per size against the out-of-place
times (`--in-place`: the in-place times; it says which it scores); `--max-error PCT` exits 1
when some table's median |error| over sizes >= 1 MiB is above PCT percent, or when some table
could not be checked; a table the profile has
no entry for is named in a note, and when no table at all could be checked the command
fails (exit 2, one line per table: `FILE: no entry of PROFILE matches KIND on N GPUs / M nodes`).
With `--topology` the check replays every table through the simulator on that system
resized to the table's nodes, the profile applied as a run applies it: its fitted
`collective_params` predict the scopes its curves lack (a one-node fit scored on two
nodes; `simulator.calibration.simulated_check`).

Both forms print a `warning:` line (stderr) for a table that looks cut short: largest size
under 1 MiB, or a complete header whose rows stop before its maxBytes with no
`# Avg bus bandwidth` trailer (see `simulator.calibration.truncation.cut_warnings`).

With `clustersim --format csv|json calibrate ...` standard output holds one table and
every other line goes to stderr: the fit error per table (`fit_records`: one record per
table, errors as fractions 0-1), or with --check the error at every size of every table
checked (`check_records`: one record per table and size).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from simulator.commands.common import (
    console,
    err_console,
    fail,
    output_format,
    print_table,
    progress_bar,
    say,
)
from simulator.errors import ClustersimError, InputError, InputErrors
from simulator.io import check_output_file, write_atomic

if TYPE_CHECKING:
    import numpy as np

    from simulator.calibration.compute import ComputeCalibration
    from simulator.calibration.fit import TableFit
    from simulator.calibration.profile import CalibrationProfile, CollectiveParamsFit
    from simulator.calibration.table import BenchmarkTable


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}%"


def _warn_cut(tables: list[BenchmarkTable], fits: dict[int, float] | None = None) -> None:
    """One `warning:` line (stderr) per table that looks cut short (`BenchmarkTable.warnings`
    name the file, line and largest size), with the bus bandwidth it fitted, if fitted."""
    for i, t in enumerate(tables):
        for w in t.warnings:
            extra = f" (fitted busbw {fits[i] / 1e9:.3g} GB/s)" if fits is not None and i in fits else ""
            err_console.print(f"warning: {w}{extra}", markup=False, soft_wrap=True)


def _check_replaced(output: Path, html: Path | None) -> None:
    """Refuse to replace a file a calibration did not write: `output` must be absent or a
    profile (a YAML mapping with `sources` and `collectives`); the page beside it, when not
    named with --html, absent or a calibration page. A page named with --html is replaced."""
    import yaml

    if output.is_file() and output.stat().st_size:  # an empty file (made to be written) is free
        try:
            data = yaml.safe_load(output.read_text(encoding="utf-8", errors="replace")[: 1 << 20])
        except yaml.YAMLError:
            data = None
        if not (isinstance(data, dict) and {"sources", "collectives"} <= data.keys()):
            raise InputError(
                "exists and is not a calibration profile; give a new file name (a profile is replaced)",
                file=output,
            )
    page = output.with_suffix(".html")
    if html is None and page.is_file():
        with page.open("rb") as f:
            head = f.read(4096)
        if _PAGE_TITLE not in head:
            raise InputError(
                "exists and is not a calibration page (it would be written beside the profile); "
                "give another profile name or --html PATH",
                file=page,
            )


#: what every calibration page holds in its first bytes (`profile_dashboard_html`)
_PAGE_TITLE = b"<title>clustersim calibration: "


def _fit_and_write(
    logs: list[Path],
    csvs: list[Path],
    output: Path,
    html: Path | None,
    collective: str | None,
    gpus: int | None,
    nodes: int | None,
    name: str | None,
    description: str,
    gpu_file: Path | None = None,
    topology: Path | None = None,
) -> None:
    # the fitting (numpy, scipy) and the calibration page (plotly) are imported inside the
    # functions of this module, so that `clustersim --help` stays fast
    from simulator.calibration.compute import ComputeCalibration
    from simulator.calibration.fit import fit_table
    from simulator.calibration.parser import read_benchmarks
    from simulator.calibration.profile import build_profile
    from simulator.viz.calibration import profile_dashboard_html

    inputs = [*logs, *csvs, *(f for f in (gpu_file, topology) if f is not None)]
    check_output_file(output, inputs)  # before any work: never an input, a folder or a device
    check_output_file(html or output.with_suffix(".html"), [*inputs, output])
    _check_replaced(output, html)
    tables = read_benchmarks(logs, collective=collective, n_gpus=gpus, n_nodes=nodes)
    fits = []
    with progress_bar("fitting", len(tables)) as on_done:
        for i, t in enumerate(tables):
            fits.append(fit_table(t))
            on_done(i, None)
    _warn_cut(tables, {i: f.busbw_bytes_per_s for i, f in enumerate(fits)})
    gpu = None
    if gpu_file is not None:
        from simulator.config.loader import load
        from simulator.network.hardware import GPUSpec

        gpu = load(GPUSpec, gpu_file)
    compute = ComputeCalibration.from_csv(csvs, gpu) if csvs else None
    profile = build_profile(name or output.stem, fits, description=description, compute=compute)
    if topology is not None and tables:
        from simulator.calibration.build import joint_block

        block = joint_block(tables, topology)
        profile = profile.model_copy(update={"collective_params": block})
        _print_joint(block)
        _warn_other_gpu(tables, topology, block)
    elif tables:
        say("no collective_params: give --topology FILE to fit them")
    write_atomic(output, profile.to_yaml())
    html_path = html or output.with_suffix(".html")
    if fits:
        # the same page `clustersim dashboard PROFILE.yaml` rebuilds; the logs are found
        # again (by name and sha256) in their own folders
        folders = list(dict.fromkeys(p.resolve().parent for p in logs))
        write_atomic(html_path, profile_dashboard_html(output, samples=folders))
    _print_fits(output.name, fits, tables, compute)
    say(f"wrote {output}" + (f" and {html_path}" if fits else ""))


def _print_joint(block: CollectiveParamsFit | None) -> None:
    """The jointly fitted physical parameters, their clamps and the fit error per table (lines
    for the reader: on stderr with `--format csv|json`; the values are in the profile)."""
    if block is None:
        say("no collective_params: no table the collective model prices")
        return
    values = ", ".join(f"{k} {v:.4g}" for k, v in block.values.items())
    say(f"collective_params (joint fit on {block.topology}): {values}")
    for k, b in block.at_bounds.items():
        say(f"warning: {k} ended on its physical bound {b:g} (clamped)")
    for label, err in block.table_errors.items():
        say(f"  joint fit {label}: median |error| {_pct(err)}")


def _warn_other_gpu(tables: list[BenchmarkTable], topology: Path, block: CollectiveParamsFit | None) -> None:
    """One `warning:` line (stderr) per table whose `# Rank` lines name another GPU model than
    the topology's (`other_model`): its parameters are fitted as if the table ran on that GPU,
    and the profile records the topology's GPU as the one fitted on."""
    from simulator.network.hardware import other_model

    gpu = block.gpu if block is not None else None
    for t in tables:
        if other_model(t.gpu_name, gpu):
            err_console.print(
                f"warning: {t.label}: measured on {t.gpu_name} (its '# Rank' lines), but the GPU of "
                f"{topology.name} is {gpu}: collective_params are fitted as if it ran there "
                "(and record that GPU); give the topology of the system the logs ran on",
                markup=False,
                soft_wrap=True,
            )


def _print_fit_table(profile_name: str, fits: list[TableFit]) -> None:
    """The fit error per collective table, its legend and which table each row is."""
    table = Table(title=f"fit error per table ({profile_name})")
    cols = ("#", "kind", "GPUs", "nodes", "alpha us", "busbw GB/s", "med>=1MiB", "max", "line")
    for col in cols:
        table.add_column(col, no_wrap=True, justify="right")
    for i, f in enumerate(fits, start=1):
        s = f.summary()
        table.add_row(
            str(i),
            str(s["collective"]),
            str(s["n_gpus"]),
            str(s["n_nodes"]),
            f"{s['alpha_us']:.1f}",
            f"{s['busbw_gbps']:.1f}",
            _pct(float(s["median_abs_error_ge_1mib"])),  # type: ignore[arg-type]
            _pct(float(s["max_abs_error"])),  # type: ignore[arg-type]
            _pct(float(s["line_max_abs_error"])),  # type: ignore[arg-type]
        )
    print_table(table, fit_records(fits))
    say(
        "med: median |model/measured - 1| over sizes >= 1 MiB; max: over every size; "
        "line: max without the efficiency curve",
        style="dim",
    )
    say(f"measured: {FIT_SCORES}", style="dim")
    for i, f in enumerate(fits, start=1):
        say(f"#{i} {f.table.label}")


def _print_fits(
    profile_name: str, fits: list[TableFit], tables: list[BenchmarkTable], compute: ComputeCalibration | None
) -> None:
    """The fit error of every table, what was inferred about each, and the compute fits.

    With `--format csv|json` the table is the data (`fit_records`: errors as fractions 0-1)
    and every other line goes to stderr. On screen, GEMM timings alone show no collective table.
    """
    if fits or output_format() != "table":
        _print_fit_table(profile_name, fits)
    for t in tables:
        inferred = [
            n for n in t.notes if any(w in n for w in ("inferred", "file name", "ratio", "own lines win"))
        ]
        if inferred:
            say(f"{t.label}: " + "; ".join(inferred), style="dim")
    if compute is not None:
        for dtype, fit in compute.gemm.items():
            say(
                f"GEMM {dtype}: overhead {fit.overhead_s * 1e6:.1f} us, "
                f"{fit.rate_per_s / 1e12:.2f} TFLOP/s sustained, max error {_pct(fit.max_abs_error)}"
            )
        for dtype, sf in compute.shape.items():
            given = sf.gpu.gemm_fraction(dtype)
            say(
                f"GEMM {dtype} shape model on {sf.gpu.name}: {100 * sf.peak_fraction:.1f}% of peak "
                f"achievable (GPU file: {'-' if given is None else f'{100 * given:.1f}%'}), "
                f"{sf.overhead_s * 1e6:.1f} us per kernel; median error {_pct(sf.median_abs_error)}, "
                f"max {_pct(sf.max_abs_error)} over {sf.n_points} shapes"
            )
        if compute.memory is not None:
            m = compute.memory
            say(
                f"memory: overhead {m.overhead_s * 1e6:.1f} us, {m.rate_per_s / 1e9:.1f} GB/s "
                f"sustained, max error {_pct(m.max_abs_error)}"
            )


#: which time of a size the fit errors score (`BenchmarkTable.sizes`, half="faster")
FIT_SCORES = (
    "the faster of the out-of-place and in-place times of each size (the time fitted); "
    "--check scores the out-of-place times (--in-place: the in-place times)"
)


def fit_records(fits: list[TableFit]) -> list[dict[str, object]]:
    """The fit error table as data (`--format csv|json`): one record per table, `index` (the
    `#` shown) and `TableFit.summary` (alpha in us, busbw in GB/s, errors as fractions 0-1)."""
    return [{"index": i, **f.summary()} for i, f in enumerate(fits, start=1)]


def check_tables(
    profile: CalibrationProfile,
    tables: list[BenchmarkTable],
    half: str = "out_of_place",
    topology: Path | None = None,
) -> list[tuple[BenchmarkTable, str, object]]:
    """Per table: (table, source text of the fit used, error frame or None).

    Args:
        profile: the profile that predicts.
        tables: the measured tables.
        half: which measured time is scored (`BenchmarkTable.sizes`).
        topology: the logs' system: each table is replayed through the simulator there,
            the profile applied as a run applies it (`simulator.calibration.simulated_check`;
            its warnings printed). None: the profile's curve entries alone predict.
    """
    import numpy as np

    from simulator.calibration.fit import error_frame

    out: list[tuple[BenchmarkTable, str, object]] = []
    for t in tables:
        m = t.sizes()
        m = m[m["size_bytes"] > 0]
        if m.empty:
            out.append((t, "no size above 0 bytes", None))
            continue
        if topology is not None:
            out.append(_simulated(profile, t, float(m["size_bytes"].iloc[0]), topology, half))
            continue
        probe = profile.collective(t.collective, t.n_gpus, t.n_nodes, float(m["size_bytes"].iloc[0]))
        if probe is None:
            out.append((t, f"profile has no {t.collective} entry for this scope", None))
            continue

        def predict(sizes: np.ndarray, t: BenchmarkTable = t) -> np.ndarray:
            vals = []
            for s in sizes:
                fit = profile.collective(t.collective, t.n_gpus, t.n_nodes, float(s))
                vals.append(fit.time_s(float(s)) if fit is not None else np.nan)
            return np.asarray(vals)

        out.append((t, probe.source, error_frame(t, predict, half=half)))
    return out


def _simulated(
    profile: CalibrationProfile, t: BenchmarkTable, first_size: float, topology: Path, half: str
) -> tuple[BenchmarkTable, str, object]:
    """`check_tables`' row of a table replayed through the simulator on `topology`."""
    from simulator.calibration.simulated_check import simulated_errors, simulated_source

    source = simulated_source(profile, t, first_size)
    if source is None:
        return t, f"profile has no {t.collective} entry for this scope and no collective_params", None
    frame, warnings = simulated_errors(profile, t, topology, half)
    for w in dict.fromkeys(warnings):
        err_console.print(f"warning: {t.label}: {w}", markup=False, soft_wrap=True)
    return t, f"the simulator on {topology.name} ({t.n_nodes} node(s)) with {source}", frame


def _check(profile_path: Path, logs: list[Path], collective: str | None, gpus: int | None,
           nodes: int | None, half: str, max_error: float | None,
           topology: Path | None = None) -> None:  # fmt: skip
    """Print the error per size of every table the profile can predict; a note for the others.

    Raises:
        InputErrors: no table could be checked (one line per table: why not).
        CheckFailed: `max_error` (a fraction) is given and some table's median |error| is
            above it, or some table could not be checked.
    """
    from simulator.calibration.parser import read_benchmark
    from simulator.calibration.profile import load_profile

    profile = load_profile(profile_path)
    tables: list[BenchmarkTable] = []
    paths: list[Path] = []
    for log in logs:
        found = read_benchmark(log, collective=collective, n_gpus=gpus, n_nodes=nodes)
        tables += found
        paths += [log] * len(found)
    if not tables:
        raise InputError("--check needs at least one nccl-tests log or collective CSV")
    _warn_cut(tables)
    for path, t in zip(paths, tables, strict=True):
        if half == "in_place" and not t.rows["in_place"].any():
            raise InputError(f"--in-place: {t.label} has no in-place times", file=path, line=t.first_line)
    results = check_tables(profile, tables, half, topology)
    skipped = _not_checked(
        paths, results, profile_path, topology is None and profile.collective_params is not None
    )
    if len(skipped) == len(results):
        raise InputErrors(skipped)
    say(
        f"scoring {half.replace('_', '-')} times"
        + (" (--in-place scores the in-place half)" if half == "out_of_place" else "")
        + "; the fit table of `calibrate -o` scores the faster of the two halves of each size"
    )
    worst: list[tuple[str, str, float]] = []
    records: list[dict[str, object]] = []
    for t, source, errors in results:
        if errors is not None:
            worst.append((t.label, *_print_check(t, source, errors)))
            records += check_records(t, source, errors, half)
    if output_format() != "table":  # one table of every size checked, as data
        print_table(Table(*records[0], title=f"error per size: {profile_path.name}"), records)
    for err in skipped:
        say(f"note: {err}; not checked")
    if max_error is not None:
        # a gate passes only on what it saw: a table it could not check fails it too
        over = [
            f"{label}: median |error| {scope} {100 * med:.4g}% above --max-error {100 * max_error:.4g}%"
            for label, scope, med in worst
            if not med <= max_error
        ]
        over += [f"{err.file}: not checked against --max-error ({err.message})" for err in skipped]
        if over:
            raise CheckFailed("; ".join(over))


def _not_checked(
    paths: list[Path], results: list[tuple[BenchmarkTable, str, object]], profile_path: Path, hint: bool
) -> list[InputError]:
    """Why each table `check_tables` could not predict was not checked (one error each, at
    its file); `hint`: say that --topology would predict it from the profile's parameters."""
    skipped: list[InputError] = []
    for path, (t, _, errors) in zip(paths, results, strict=True):
        if errors is not None:
            continue
        if t.sizes()["size_bytes"].gt(0).any():
            why = (f"no entry of {profile_path} matches {t.collective} on {t.n_gpus} GPUs / "
                   f"{t.n_nodes} nodes")  # fmt: skip
            if hint:
                why += " (its collective_params can predict it through the simulator: give --topology FILE)"
        else:
            why = "no size above 0 bytes to check"
        label = "" if t.label == t.source else f" ({t.label})"
        skipped.append(InputError(why + label, file=path))
    return skipped


class CheckFailed(ClustersimError):
    """`--check --max-error`: a prediction misses the measurement by more than allowed (exit 1)."""

    exit_code = 1


#: what a table's median |error| is over when it has no size of 1 MiB or more
ALL_SIZES = "over every size (none >= 1 MiB)"


def _print_check(t: BenchmarkTable, source: str, errors: object) -> tuple[str, float]:
    """Print the error per size of one table; return what its scored median |error| is over
    and that median (sizes >= 1 MiB, every size when none is that large). With `--format
    csv|json` only the lines, on stderr (the sizes are in the one table of `check_records`
    that `_check` prints)."""
    say(f"\n{t.label}: {t.collective}, {t.n_gpus} GPUs / {t.n_nodes} node(s)")
    say(f"  using {source}", style="dim")
    table = Table(show_header=True)
    for col in ("size (B)", "measured (us)", "predicted (us)", "error"):
        table.add_column(col, justify="right")
    for _, r in errors.iterrows():  # type: ignore[attr-defined]
        table.add_row(
            f"{int(r['size_bytes'])}",
            f"{r['measured_time_s'] * 1e6:.1f}",
            f"{r['model_time_s'] * 1e6:.1f}",
            f"{100 * r['rel_error']:+.1f}%",
        )
    if output_format() == "table":
        console.print(table)
    e = errors
    rel = e["rel_error"].abs()  # type: ignore[index]
    big = rel[e["size_bytes"] >= 2**20]  # type: ignore[index]
    scope, med = (">= 1 MiB", float(big.median())) if len(big) else (ALL_SIZES, float(rel.median()))
    say(f"  median |error| {scope}: {_pct(med)}, max |error|: {_pct(float(rel.max()))}")
    return scope, med


def check_records(t: BenchmarkTable, source: str, errors: object, half: str) -> list[dict[str, object]]:
    """The error per size of one checked table as data (`--format csv|json`): the table's
    label, collective, GPUs, nodes, the half scored and the fit used, then per size the
    measured and predicted times (s) and the relative error (model/measured - 1)."""
    head = {
        "table": t.label,
        "collective": t.collective,
        "n_gpus": t.n_gpus,
        "n_nodes": t.n_nodes,
        "half": half,
        "source": source,
    }
    return [
        {
            **head,
            "size_bytes": int(r["size_bytes"]),
            "measured_time_s": float(r["measured_time_s"]),
            "model_time_s": float(r["model_time_s"]),
            "rel_error": float(r["rel_error"]),
        }
        for _, r in errors.iterrows()  # type: ignore[attr-defined]
    ]


#: The collectives `--collective` accepts, for its help text (the help must not import the
#: calibration code, which pulls in scipy and pandas; a test keeps it equal to
#: `simulator.calibration.collective.KINDS`).
COLLECTIVE_NAMES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
)

TOPOLOGY_HELP = (
    "Topology file of the system the logs ran on (topologies/*.yaml): also fit the collective "
    "model's physical parameters jointly over every table (collective_params); with --check, "
    "predict every table through the simulator on it, as a run applies the profile."
)


def calibrate(
    files: Annotated[
        list[Path], typer.Argument(help="nccl-tests / rccl-tests logs; GEMM or memory-kernel CSV files.")
    ],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Profile YAML to write.")] = None,
    collective: Annotated[
        str | None,
        typer.Option(help=f"Collective where a log does not say it: {', '.join(COLLECTIVE_NAMES)}."),
    ] = None,
    gpus: Annotated[
        int | None, typer.Option(help="GPU (rank) count where a log does not say it.", min=1)
    ] = None,
    nodes: Annotated[int | None, typer.Option(help="Node count where a log does not say it.", min=1)] = None,
    check: Annotated[
        Path | None,
        typer.Option(help="Compare this profile's predictions with FILES instead of fitting."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(help="Calibration page to write (default: PROFILE.html beside the profile)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Profile name (default: the output file's stem).")] = None,
    description: Annotated[str, typer.Option(help="Profile description.")] = "",
    in_place: Annotated[
        bool,
        typer.Option("--in-place", help="--check: score the in-place times (default: out-of-place)."),
    ] = False,
    max_error: Annotated[
        float | None,
        typer.Option(
            "--max-error",
            metavar="PCT",
            min=0.0,
            help="--check: exit 1 when a table's median |error| (sizes >= 1 MiB; every size when it has"
            " none that large) is above PCT percent or a table could not be checked.",
        ),
    ] = None,
    gpu: Annotated[
        Path | None,
        typer.Option(
            "--gpu",
            help="GPU file the GEMM CSV was measured on (topologies/gpus/*.yaml): also fit the "
            "shape-aware GEMM model's achievable fraction and per-kernel cost.",
        ),
    ] = None,
    topology: Annotated[Path | None, typer.Option("--topology", help=TOPOLOGY_HELP)] = None,
) -> None:
    """Fit a calibration profile from benchmark output (or --check one against it)."""
    from simulator.calibration.collective import KINDS, normalize_kind
    from simulator.calibration.csv_table import is_collective_csv

    try:
        if collective is not None:
            kind = normalize_kind(collective)
            if kind is None:
                raise InputError(
                    f"--collective: unknown collective {collective!r}; expected one of {', '.join(KINDS)}"
                )
            collective = kind
        csvs = [f for f in files if f.suffix.lower() == ".csv" and not is_collective_csv(f)]
        logs = [f for f in files if f not in csvs]
        if check is not None:
            _refuse_with_check(output, csvs)
            half = "in_place" if in_place else "out_of_place"
            limit = None if max_error is None else max_error / 100
            _check(check, logs, collective, gpus, nodes, half, limit, topology)
            return
        if in_place or max_error is not None:
            raise InputError("--in-place and --max-error go with --check PROFILE")
        if output is None:
            raise InputError("missing -o/--output PROFILE.yaml (or use --check PROFILE)")
        _fit_and_write(logs, csvs, output, html, collective, gpus, nodes, name, description, gpu, topology)
    except ClustersimError as err:
        fail(err)


def _refuse_with_check(output: Path | None, csvs: list[Path]) -> None:
    """Refuse what `--check` cannot take: an output profile, a CSV of GEMM timings."""
    if output is not None:
        raise InputError("--check writes no profile: leave out -o/--output (it scores PROFILE)")
    if csvs:
        raise InputError(
            "--check compares collective tables (logs, or CSV with columns "
            "size_bytes,time_us_oop,busbw_oop[,time_us_ip,busbw_ip]); this CSV has none",
            file=csvs[0],
            line=1,
        )


def register(app: typer.Typer) -> None:
    """Add the `calibrate` command to `app`."""
    app.command("calibrate")(calibrate)
