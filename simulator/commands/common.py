"""Helpers shared by CLI commands: one-line errors and the rich console."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

from simulator.errors import ClustersimError, InputErrors

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


def fail(err: ClustersimError) -> NoReturn:
    """Print a user error as one line per problem (no traceback) and exit non-zero."""
    lines = err.lines() if isinstance(err, InputErrors) else [str(err)]
    for line in lines:
        err_console.print(f"error: {line}", markup=False, soft_wrap=True)
    raise typer.Exit(code=err.exit_code)
