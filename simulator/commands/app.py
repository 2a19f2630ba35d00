"""The `clustersim` command line: one typer app; each command module registers its commands.

Modules and their commands, in help order: `run` (run, validate, schema), `topo`,
`calibrate`, `compare`, `sweep`, `dashboard` (dashboard, trace), `query`. The simulator, pandas,
plotly and scipy are imported inside the command functions, so `clustersim --help` stays
fast.
"""

from __future__ import annotations

import logging
import os

import typer

from simulator import __version__
from simulator.commands import calibrate, compare, dashboard, importing, query, run, sweep, topo
from simulator.commands.common import FORMATS, set_output_format

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


def main() -> None:
    """Entry point of the `clustersim` script."""
    app()


if __name__ == "__main__":
    main()
