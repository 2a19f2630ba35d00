"""Helpers shared by CLI commands: one-line errors, the rich console and progress bars."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from simulator.errors import ClustersimError, InputErrors
from simulator.study.executor import OnDone

console = Console(stderr=False, highlight=False)
err_console = Console(stderr=True, highlight=False)


def first_per_file(err: ClustersimError) -> list[str]:
    """The lines to show for an error: the first problem of each file, in order.

    One mistake often upsets several checks (a union type tried every way); its first
    report is the one that names it, and the user fixes one thing at a time.
    """
    if not isinstance(err, InputErrors):
        return [str(err)]
    seen: set[str | None] = set()
    lines = []
    for e in err.errors:
        if e.file not in seen:
            seen.add(e.file)
            lines.append(str(e))
    return lines


def fail(err: ClustersimError) -> NoReturn:
    """Print a user error as one line per file with problems (no traceback) and exit non-zero."""
    for line in first_per_file(err):
        err_console.print(f"error: {one_line(line)}", markup=False, soft_wrap=True)
    raise typer.Exit(code=err.exit_code)


def one_line(text: str) -> str:
    """`text` with every line break and other unprintable character escaped (`\\x85`), so a
    message quoting a user's key or value stays on one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


@contextmanager
def progress_bar(description: str, total: int, unit: str = "") -> Iterator[OnDone]:
    """A transient progress bar on the console, gone once the block ends.

    Args:
        description: what is being done, shown left of the bar.
        total: how many items the bar counts to.
        unit: word after the count (`3/8 steps`); without one, rich's aligned `3/8`.

    Yields:
        An `on_done(index, result)` callback that advances the bar by one item (the
        arguments are ignored, so it fits `simulator.study.executor.run_tasks`).
    """
    count = TextColumn(f"{{task.completed}}/{{task.total}} {unit}") if unit else MofNCompleteColumn()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        count,
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda _index, _result: progress.advance(task)
