"""`clustersim import chakra|kineto ...` and `export chakra|chrome SCENARIO`.

Import reads a folder of per-rank Chakra execution traces, or PyTorch profiler traces of
one step, and writes a `clustersim-step/1` trace, checked by the trace format's own
validation before it is written. Export writes the step of a scenario (a trace, or a
model and its layout) as Chakra ET files, or simulates it and writes its Chrome trace with
flow arrows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from simulator.commands.common import console, err_console, fail, progress_bar
from simulator.config.loader import recording_reads
from simulator.errors import ClustersimError, InputError, SimulationError
from simulator.io import check_output_file, check_writable_folder

import_app = typer.Typer(help="Turn traces of other tools into clustersim step traces.", no_args_is_help=True)
export_app = typer.Typer(help="Write a scenario's step in the formats of other tools.", no_args_is_help=True)


def _count_rank_files(folder: Path) -> int:
    from simulator.workload.interchange.chakra_io import rank_files

    return len(rank_files(folder))


def _step_level(prep: object, scenario: Path, what: str, jobs_ok: bool) -> None:
    """Raise `InputError` for a scenario with no step to write: a `cluster` over days (no
    step timeline), or `jobs` where the export writes one job's step (`jobs_ok` False)."""
    spec = prep.scenario.spec  # type: ignore[attr-defined]
    kind = "cluster" if spec.cluster is not None else "jobs" if spec.jobs and not jobs_ok else None
    if kind is not None:
        raise InputError(
            f"{what} writes a step; this scenario has `{kind}` instead of one `workload` "
            "(export a scenario of one of its jobs)",
            file=scenario,
            line=prep.scenario.doc.line_of((kind,)),  # type: ignore[attr-defined]
            field=kind,
        )


#: ops `export chakra` generates at most (every rank's own work: about 100,000 ops and 3 CPU s
#: for Llama 3 8B on 16 GPUs; memory and time grow with them)
_MAX_EXPORT_OPS = 1_000_000


def _every_rank(prep: Any, scenario: Path) -> Any:
    """The step program with every rank's ops. A model workload simulated with
    representatives holds the work of one rank per group (the others are its weight and
    mirrors); an execution trace per rank must hold that rank's own work, so the workload is
    generated again without representatives. Other programs are returned as they are."""
    program = prep.program
    if program.meta.get("representatives") != "yes":
        return program
    ranks = len(program.rank_gpus)
    estimate = len(program.ops) * ranks // max(1, len(program.simulated_ranks))
    if estimate > _MAX_EXPORT_OPS:
        raise SimulationError(
            f"{scenario}: export chakra writes every rank's own work: about {estimate:,} ops over {ranks:,} "
            f"rank files for this job, over the limit of {_MAX_EXPORT_OPS:,}; export a smaller "
            "job of the same layout (fewer data-parallel replicas)"
        )
    from simulator.config.loader import read_document
    from simulator.workload.generate import program_from_workload

    doc = read_document(prep.scenario.workload_path)
    data = dict(doc.data)
    data["fidelity"] = {**(data.get("fidelity") or {}), "representatives": False}
    return program_from_workload(doc.with_data(data), prep.topology, prep.cluster)


def _warn_if_over_input_limit(output: Path) -> None:
    """A trace written larger than the input limit cannot be run as it is: say how to."""
    from simulator.config.loader import max_file_bytes

    size, limit = output.stat().st_size, max_file_bytes()
    if size > limit:
        mib = -(-size // 2**20)  # rounded up
        err_console.print(
            f"warning: {output} is {size:,} bytes, over the limit of {limit:,} bytes on input files: "
            f"run it with --max-file-mb {mib} (or CLUSTERSIM_MAX_FILE_MB={mib})",
            markup=False,
            soft_wrap=True,
        )


def import_chakra_command(
    folder: Annotated[Path, typer.Argument(help="Folder of PREFIX.RANK.et files (and comm_group.json).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Step trace YAML to write.")],
    unknown: Annotated[
        str, typer.Option(help="Node types with no model: reject, or run as compute ops of their duration.")
    ] = "reject",
    keep_placement: Annotated[
        bool, typer.Option(help="Keep the GPU placement the trace was exported with (else packed).")
    ] = False,
) -> None:
    """Import a Chakra execution trace as a clustersim step trace."""
    from simulator.workload.interchange.chakra_read import import_chakra
    from simulator.workload.interchange.tracebuild import program_from_dict, write_trace_yaml

    try:
        if unknown not in ("reject", "compute"):
            raise InputError(f"--unknown must be reject or compute, not {unknown!r}")
        check_output_file(output, [folder, *sorted(folder.glob("*.et")), folder / "comm_group.json"])
        n = _count_rank_files(folder)
        with progress_bar("reading ranks", n, unit="ranks") as on_done:
            result = import_chakra(
                folder, unknown, on_rank=lambda r: on_done(r, None), keep_placement=keep_placement
            )
        data = result.data
        gpus = data.get("placement") or [f"rank{r}" for r in range(int(data["ranks"]))]
        program = program_from_dict(data, folder, list(gpus))  # errors name the imported trace
        write_trace_yaml(data, output, header=f"Imported from the Chakra execution trace {folder.name}/.")
    except ClustersimError as err:
        fail(err)
    for warning in result.warnings:
        err_console.print(f"warning: {folder}: {warning}", markup=False, soft_wrap=True)
    _warn_if_over_input_limit(output)
    console.print(f"{result.node_count} nodes of {n} ranks -> {len(program.ops)} ops: {output}")


def import_kineto_command(
    files: Annotated[
        list[Path], typer.Argument(help="PyTorch profiler JSON traces (.json or .json.gz), one per rank.")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Step trace YAML to write.")],
    step: Annotated[
        int | None, typer.Option(help="Profiled step N (ProfilerStep#N); default: the first.")
    ] = None,
    dp_replicas: Annotated[
        int, typer.Option(min=1, help="What-if: the recorded ranks as this many data-parallel copies.")
    ] = 1,
    host_launches: Annotated[
        bool, typer.Option(help="Keep the measured kernel launch times (host-bound steps).")
    ] = False,
) -> None:
    """Import a PyTorch profiler (Kineto) trace of one training step as a clustersim step trace."""
    from simulator.workload.interchange.kineto import import_kineto
    from simulator.workload.interchange.tracebuild import program_from_dict, write_trace_yaml

    try:
        check_output_file(output, files)
        with progress_bar("reading ranks", len(files), unit="files"):
            result = import_kineto(list(files), step, dp_replicas, host_launches)
        data = result.data
        source = files[0] if len(files) == 1 else files[0].parent  # named in errors
        program = program_from_dict(data, source, [f"rank{r}" for r in range(int(data["ranks"]))])
        which = "the whole trace (no ProfilerStep#)" if result.step is None else f"ProfilerStep#{result.step}"
        header = (
            f"Imported from PyTorch profiler traces ({', '.join(f.name for f in files)}), "
            f"{which}.\nCompute kernels keep their measured durations; collectives are "
            f"re-simulated. Recorded GPU step time: {result.recorded_step_s * 1e3:.3f} ms."
        )
        write_trace_yaml(data, output, header=header)
    except ClustersimError as err:
        fail(err)
    for warning in result.warnings:
        err_console.print(f"warning: {warning}", markup=False, soft_wrap=True)
    _warn_if_over_input_limit(output)
    console.print(
        f"{len(files)} rank trace(s), {which} ({result.recorded_step_s * 1e3:.3f} ms recorded) "
        f"-> {len(program.ops)} ops: {output}"
    )


def export_chakra_command(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file (trace or model workload).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder for the ET files.")],
    prefix: Annotated[str, typer.Option(help="File name prefix: PREFIX.RANK.et.")] = "trace",
) -> None:
    """Export a scenario's step as Chakra execution traces (one file per rank)."""
    from simulator.engine.cost import ComputeCost
    from simulator.scenario.prepare import prepare
    from simulator.workload.interchange.chakra_write import export_chakra

    try:
        check_writable_folder(output)
        with recording_reads() as reads:
            prep = prepare(scenario)
        _step_level(prep, scenario, "export chakra", jobs_ok=False)
        program = _every_rank(prep, scenario)
        written = [output / f"{prefix}.{r}.et" for r in range(len(program.rank_gpus))]
        check_output_file(output / "comm_group.json", reads)
        for path in written:
            check_output_file(path, reads)
        cost = ComputeCost(prep.topology.gpu, prep.compute_calibration)
        paths = export_chakra(program, output, prefix, duration_of=cost.roofline_s)
    except ClustersimError as err:
        fail(err)
    note = (
        " (every rank's work: the scenario simulates one rank per group)"
        if program is not prep.program
        else ""
    )
    console.print(f"{len(program.ops)} ops -> {len(paths)} rank files in {output}/{note}")


def export_chrome_command(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML file.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Trace JSON to write.")],
    links: Annotated[int, typer.Option(help="Busiest links given a utilization counter track.", min=0)] = 8,
) -> None:
    """Simulate a scenario and write its timeline as a Chrome/Perfetto trace with flow arrows
    (send -> recv, dependencies across ranks)."""
    from simulator.scenario.execute import execute
    from simulator.scenario.prepare import prepare
    from simulator.viz.chrome_trace import flow_edges, write_chrome_trace

    try:
        check_output_file(output, [scenario])
        with recording_reads() as reads:
            prep = prepare(scenario)
        check_output_file(output, reads)
        _step_level(prep, scenario, "export chrome", jobs_ok=True)
        result = execute(prep)
        edges = {j.name: flow_edges(j.program) for j in prep.jobs} if prep.jobs else flow_edges(prep.program)
        counts = write_chrome_trace(result.frames, output, top_links=links, edges=edges)
    except ClustersimError as err:
        fail(err)
    console.print(
        f"trace: {output} ({counts['ops']:,} ops, {counts['flows']:,} flow arrows; open in https://ui.perfetto.dev)"
    )


def register(app: typer.Typer) -> None:
    """Add `import chakra`, `import kineto` and `export chakra` to the CLI."""
    import_app.command("chakra")(import_chakra_command)
    import_app.command("kineto")(import_kineto_command)
    export_app.command("chakra")(export_chakra_command)
    export_app.command("chrome")(export_chrome_command)
    app.add_typer(import_app, name="import")
    app.add_typer(export_app, name="export")
