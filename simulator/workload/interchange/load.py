"""A trace of another tool as a scenario's workload: `workload: {format: chakra|kineto, path: ...}`.

What is modelled: the same import as `clustersim import chakra|kineto` (`chakra_read`,
`kineto`), done in memory when the scenario is prepared, then validated and placed like
a step trace file (`tracebuild.program_from_dict`). Simplified: the imported trace is not
written anywhere; its warnings go into the program's meta (`import_warnings`), so the
summary of the run carries them.
"""

from __future__ import annotations

from pathlib import Path

from simulator.errors import InputError
from simulator.workload.interchange.chakra_read import import_chakra
from simulator.workload.interchange.kineto import import_kineto
from simulator.workload.interchange.tracebuild import program_from_dict
from simulator.workload.program import StepProgram

#: file name endings of PyTorch profiler traces in a folder
KINETO_SUFFIXES = (".json", ".json.gz")


def kineto_files(path: Path) -> list[Path]:
    """The profiler traces `path` names: the file itself, or every `.json`/`.json.gz` file of
    the folder, sorted by name.

    Raises:
        InputError: a folder with no such file.
    """
    if path.is_file():
        return [path]
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(KINETO_SUFFIXES))
    if not files:
        raise InputError(f"no PyTorch profiler trace (*.json, *.json.gz) in the folder {str(path)!r}")
    return files


def load_imported(
    fmt: str,
    path: Path,
    gpus: list[str],
    step: int | None = None,
    dp_replicas: int = 1,
    unknown: str = "reject",
    host_launches: bool = False,
) -> StepProgram:
    """Import the trace at `path` (format `chakra` or `kineto`) as the step program on `gpus`.

    Raises:
        InputError: the trace is malformed (one line naming its file and record), or its
            ranks do not fit on `gpus`.
    """
    if fmt == "chakra":
        chakra = import_chakra(path, unknown)
        data, warnings = chakra.data, chakra.warnings
    elif fmt == "kineto":
        kineto = import_kineto(kineto_files(path), step, dp_replicas, host_launches)
        data, warnings = kineto.data, kineto.warnings
    else:
        raise InputError(f"unknown workload format {fmt!r}; expected chakra or kineto")
    program = program_from_dict(data, path, gpus)
    if warnings:
        program.meta["import_warnings"] = "; ".join(warnings)
    return program
