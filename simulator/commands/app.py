"""The `clustersim` command line: one typer app; each command group registers itself."""

from __future__ import annotations

import importlib
import logging

import typer

app = typer.Typer(
    name="clustersim",
    help="Discrete-event simulator of GPU training clusters: step time, network design, failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = ("run", "topo", "calibrate", "compare", "sweep", "dashboard")

for _name in COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"simulator.commands.{_name}")
    except ModuleNotFoundError as _exc:
        if _exc.name != f"simulator.commands.{_name}":
            raise
        continue
    _mod.register(app)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details.")) -> None:
    """clustersim: simulate GPU training clusters."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
