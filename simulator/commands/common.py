"""Helpers shared by CLI commands: one-line errors, atomic writes, rich console."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
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


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write a file through a temporary sibling and a rename, so a crash never leaves half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    payload = data if isinstance(data, bytes) else data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
