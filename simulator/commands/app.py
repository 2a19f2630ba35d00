"""The `clustersim` command line: one typer app; each command module registers its commands.

Modules and their commands, in help order: `run` (run, validate, schema), `topo`,
`calibrate`, `compare`, `sweep`, `dashboard` (dashboard, trace). The simulator, pandas,
plotly and scipy are imported inside the command functions, so `clustersim --help` stays
fast.
"""

from __future__ import annotations

import logging

import typer

from simulator.commands import calibrate, compare, dashboard, importing, run, sweep, topo

app = typer.Typer(
    name="clustersim",
    help="Discrete-event simulator of GPU training clusters: step time, network design, failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = (run, topo, calibrate, compare, sweep, dashboard, importing)

for _module in COMMAND_MODULES:
    _module.register(app)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details.")) -> None:
    """clustersim: simulate GPU training clusters."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def main() -> None:
    """Entry point of the `clustersim` script."""
    app()


if __name__ == "__main__":
    main()
