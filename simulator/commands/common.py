"""Helpers shared by CLI commands: one-line errors, the rich console, tables and progress bars.

Tables go to standard output as rich tables, or as CSV / JSON records with the root
`--format` option (`clustersim --format csv run ...`); piped to a file, rich tables keep
their full width instead of the 80 columns rich assumes without a terminal. Progress bars
and other chatter go to standard error, so that standard output stays parseable.
"""

from __future__ import annotations

import csv
import gc
import io
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from simulator.errors import ClustersimError, InputErrors, SimulationError

if TYPE_CHECKING:
    # types only: importing the executor at run time would load concurrent.futures.process
    # for `clustersim --help`, and pandas is imported by the commands that use it
    import pandas as pd

    from simulator.study.executor import OnDone

#: width of a table written to a file or a pipe: wide enough that no cell is cut ("GP…")
PIPED_WIDTH = 1000

console = Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else PIPED_WIDTH)
err_console = Console(stderr=True, highlight=False)

#: the ways `--format` prints tables
FORMATS = ("table", "csv", "json")
_output = {"format": "table"}


def set_output_format(fmt: str) -> None:
    """Print tables as `fmt` from now on (one of `FORMATS`; the root `--format` option)."""
    if fmt not in FORMATS:
        raise typer.BadParameter(f"expected one of {', '.join(FORMATS)}", param_hint="--format")
    _output["format"] = fmt


#: whether the process ends with the command (`simulator.commands.app.main`), as opposed to
#: a command invoked inside a longer-lived process (tests, a notebook)
_process = {"ends_with_command": False}


def process_ends_with_command() -> None:
    """Declare that the process ends when the command does (`simulator.commands.app.main`)."""
    _process["ends_with_command"] = True


def freeze_long_lived() -> None:
    """Take every object alive now out of the cyclic collector's passes (`gc.freeze`), when
    the process ends with the command and they live until it does (imported modules, the
    prepared scenario, the results).

    Without it, every pass over the older generation walks them again (0.1-0.15 CPU s of a
    16,384-GPU run). Garbage among them is never collected: the process ends first. A
    command run inside a longer-lived process freezes nothing. No result depends on it.
    """
    if _process["ends_with_command"]:
        gc.freeze()


@contextmanager
def making_long_lived() -> Iterator[None]:
    """Pause the cyclic collector while objects that live until the command ends are made
    (the prepared scenario), then `freeze_long_lived` them before it runs again.

    Re-enabled with them still young, the collector's next pass would walk them all (1.4
    million objects of a 530B step's program: 0.18 CPU s) to find no garbage. Garbage made
    meanwhile is frozen too, and held: a maker of cyclic garbage (reading a trace) collects
    it itself while the collector is paused (`simulator.workload.trace`). A command run
    inside a longer-lived process only gets the collector back as it was. No result depends
    on it.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        freeze_long_lived()
    finally:
        if enabled:
            gc.enable()


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def table_records(table: Table) -> list[dict[str, str]]:
    """The rows of a rich table as records keyed by column header (cells as plain text)."""
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    return [dict(zip(headers, row, strict=True)) for row in zip(*columns, strict=True)]


def _json_value(v: Any) -> Any:
    """A value as strict JSON has it: NaN and infinities (no such number in JSON) are null,
    inside lists and objects too."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_value(x) for x in v]
    return v


def frame_records(df: pd.DataFrame, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of a results frame as records of plain Python values (the `data` of
    `print_table`): the numbers the frame holds, not their printed form."""
    part = df if columns is None else df[list(columns)]
    return [
        {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in part.to_dict("records")
    ]


def output_format() -> str:
    """How tables are printed now: one of `FORMATS` (the root `--format` option)."""
    return _output["format"]


def _json_table(table: Table, data: Sequence[dict[str, Any]] | None) -> dict[str, Any]:
    records = table_records(table) if data is None else [dict(r) for r in data]
    title = _plain(table.title) if table.title is not None else ""
    return {"title": title, "rows": [{k: _json_value(v) for k, v in r.items()} for r in records]}


def _write_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=1, allow_nan=False) + "\n")


def _write_csv(table: Table, data: Sequence[dict[str, Any]] | None) -> None:
    records = table_records(table) if data is None else [dict(r) for r in data]
    buf = io.StringIO()
    fields = list(records[0]) if data is not None and records else [_plain(c.header) for c in table.columns]
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    sys.stdout.write(buf.getvalue())


def print_table(table: Table, data: Sequence[dict[str, Any]] | None = None) -> None:
    """Print a table on standard output in the chosen `--format`.

    `table`: rich; `csv`: a header line and one line per row; `json`: one object with the
    table's title and its rows as records, `{"title": ..., "rows": [{...}, ...]}`. `data`: the
    rows as records to print instead of the table's cells with `csv` and `json` (numbers as
    numbers, not as shown). A command prints at most one table (or one `print_tables`), so
    that standard output parses as one CSV table or one JSON document.
    """
    fmt = _output["format"]
    if fmt == "table":
        console.print(table)
    elif fmt == "json":
        _write_json(_json_table(table, data))
    else:
        _write_csv(table, data)


def print_tables(
    title: str, tables: Sequence[tuple[Table, Sequence[dict[str, Any]] | None]], primary: int = 0
) -> None:
    """Print several tables of one command as ONE document in the chosen `--format`.

    `tables`: (rich table, its records or None) pairs, as `print_table` takes them.
    `table`: each rich table on standard output, in order (as many `print_table` calls);
    `json`: one object, `{"title": title, "tables": [{"title": ..., "rows": [...]}, ...]}`,
    each table as `print_table` prints it alone; `csv`: the `tables[primary]` only (one CSV
    table on standard output), the others as rich tables on standard error (notes).
    """
    fmt = _output["format"]
    if fmt == "table":
        for table, _ in tables:
            console.print(table)
    elif fmt == "json":
        _write_json({"title": title, "tables": [_json_table(t, d) for t, d in tables]})
    else:
        for i, (table, data) in enumerate(tables):
            if i == primary:
                _write_csv(table, data)
            else:
                err_console.print(table)


def say(text: str, style: str | None = None) -> None:
    """A line for the reader (where results went, what runs, notes around a table): standard
    output with rich tables, standard error with `--format csv|json` so that standard output
    stays data. `style`: a rich style for the whole line (`"dim"`)."""
    target = console if _output["format"] == "table" else err_console
    target.print(text, markup=False, soft_wrap=True, style=style)


def first_per_file(err: ClustersimError, source: Path | None = None) -> list[str]:
    """The lines to show for an error: the first problem of each file, in order.

    One mistake often upsets several checks (a union type tried every way); its first
    report is the one that names it, and the user fixes one thing at a time. A valid
    input that cannot be simulated (exit 3) is named by `source`, the file that was run.
    """
    if isinstance(err, SimulationError) and source is not None:
        return [f"{source}: {err}"]
    if not isinstance(err, InputErrors):
        return [str(err)]
    seen: set[str | None] = set()
    lines = []
    for e in err.errors:
        if e.file not in seen:
            seen.add(e.file)
            lines.append(str(e))
    return lines


def fail(err: ClustersimError, source: Path | None = None) -> NoReturn:
    """Print a user error as one line per file with problems (no traceback) and exit non-zero;
    `source` names the scenario, compare or study file a simulation error came from."""
    for line in first_per_file(err, source):
        err_console.print(f"error: {one_line(line)}", markup=False, soft_wrap=True)
    raise typer.Exit(code=err.exit_code)


def one_line(text: str) -> str:
    """`text` with every line break and other unprintable character escaped (`\\x85`), so a
    message quoting a user's key or value stays on one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _progress(count: TextColumn | MofNCompleteColumn) -> Progress:
    """A transient progress display on stderr: description, bar, count, host time elapsed
    and the estimated time left (rich's estimate from the recent rate); none when stderr is
    not a terminal (a log or a pipe gets the one-line messages alone)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        count,
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,  # off a terminal it would leave a blank line
    )


@contextmanager
def progress_bar(description: str, total: int, unit: str = "") -> Iterator[OnDone]:
    """A transient progress bar on the console, gone once the block ends: count, host
    time elapsed and the estimated time left.

    Args:
        description: what is being done, shown left of the bar.
        total: how many items the bar counts to.
        unit: word after the count (`3/8 steps`); without one, rich's aligned `3/8`.

    Yields:
        An `on_done(index, result)` callback that advances the bar by one item (the
        arguments are ignored, so it fits `simulator.study.executor.run_tasks`).
    """
    count = TextColumn(f"{{task.completed}}/{{task.total}} {unit}") if unit else MofNCompleteColumn()
    with _progress(count) as progress:
        task = progress.add_task(description, total=total)
        yield lambda _index, _result: progress.advance(task)


@contextmanager
def phased_progress(
    first: str, description: str, total: int
) -> Iterator[tuple[Callable[[int, int], None], OnDone]]:
    """Two bars in one display: a first phase whose size is known only once it starts
    (a study's step simulations), then the counted items (its runs).

    Yields:
        (`on_phase(done, of)` for the first phase, `on_done(index, result)` for the items).
    """
    with _progress(MofNCompleteColumn()) as progress:
        phase: list[TaskID] = []
        items = progress.add_task(description, total=total, start=False)

        def on_phase(done: int, of: int) -> None:
            if not phase:
                phase.append(progress.add_task(first, total=of))
            progress.update(phase[0], completed=done, total=of)

        def on_done(_index: int, _result: object) -> None:
            if not progress.tasks[items].started:
                progress.start_task(items)
            progress.advance(items)

        yield on_phase, on_done
