"""The `clustersim` command line: one typer app; each command module registers its commands.

Modules and their commands, in help order: `run` (run, validate, schema), `topo`,
`calibrate`, `compare`, `sweep`, `dashboard` (dashboard, trace), `query`. The simulator, pandas,
plotly and scipy are imported inside the command functions, so `clustersim --help` stays
fast.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys

import typer

from simulator import __version__
from simulator.commands import calibrate, compare, dashboard, importing, query, run, sweep, topo
from simulator.commands.common import FORMATS, err_console, process_ends_with_command, set_output_format

app = typer.Typer(
    name="clustersim",
    help="Discrete-event simulator of GPU training clusters: step time, network design, failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = (run, topo, calibrate, compare, sweep, dashboard, query, importing)

for _module in COMMAND_MODULES:
    _module.register(app)


def _print_version(given: bool) -> None:
    if given:
        typer.echo(f"clustersim {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the clustersim version and exit.",
    ),
    output_format: str = typer.Option(
        "table",
        "--format",
        help=f"How tables are printed: {' | '.join(FORMATS)} (csv/json: data only on stdout, "
        "notes on stderr).",
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details."),
    max_file_mb: float | None = typer.Option(
        None,
        "--max-file-mb",
        min=0.00001,
        help="Largest input file read, MiB (default 8, or CLUSTERSIM_MAX_FILE_MB).",
    ),
) -> None:
    """clustersim: simulate GPU training clusters."""
    set_output_format(output_format)
    if max_file_mb is not None:
        # read by simulator.config.loader.max_file_bytes (set here, not imported, so that
        # `clustersim --help` stays fast); workers inherit it
        os.environ["CLUSTERSIM_MAX_FILE_MB"] = repr(float(max_file_mb))
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


#: Allocations between two collections of the youngest generation while the command runs
#: (CPython's default is 700). Start-up builds ~1 M long-lived objects (modules, schemas),
#: and at the default every import of a library triggers passes over them.
CLI_GC_THRESHOLD = 100_000


def main() -> None:
    """Entry point of the `clustersim` script.

    Cyclic garbage is collected less often (`CLI_GC_THRESHOLD`; reference counting still
    frees everything else at once), and the objects alive when the command ends are frozen
    so that the interpreter's collections at exit do not walk them one last time only for
    the process to end (0.15-0.2 CPU s of a small run). No result depends on either.
    """
    old = gc.get_threshold()
    gc.set_threshold(max(CLI_GC_THRESHOLD, old[0]), old[1], old[2])
    # Ctrl-C before a command installs its own handler (while a command imports the
    # simulator) raises `_Stopped`, which typer does not turn into a silent exit 130
    signal.signal(signal.SIGINT, _stop)
    process_ends_with_command()  # commands may freeze what lives to the end (`freeze_long_lived`)
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        err_console.print("aborted", markup=False)
        code = 1
    except typer.TyperException as err:  # a bad option or argument: one line, as bad files get
        code = usage_error(err)
    except (KeyboardInterrupt, _Stopped):  # Ctrl-C outside a command's own handler
        err_console.print("interrupted (stopped by SIGINT)", markup=False)
        code = 130
    finally:
        gc.freeze()
    sys.exit(code if isinstance(code, int) else 0)


class _Stopped(Exception):
    """SIGINT outside a command's own handler (`main`)."""


def _stop(_signum: int, _frame: object) -> None:
    raise _Stopped


def usage_error(err: typer.TyperException) -> int:
    """Print a command-line usage error on one line (`error: COMMAND: message`); its exit code."""
    ctx = getattr(err, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    message = " ".join((err.format_message() if hasattr(err, "format_message") else str(err)).split())
    if message:  # none for a bare command: its help was printed, nothing to add
        err_console.print(f"error: {where}{message}", markup=False, soft_wrap=True)
    return int(getattr(err, "exit_code", 2))


if __name__ == "__main__":
    main()
