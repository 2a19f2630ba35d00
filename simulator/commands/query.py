"""`clustersim query RESULTS "SQL"`: SQL (DuckDB) over a results folder's frames.

Every frame of the folder is a table named after it: for a study, `runs`, `incidents` and
`segments` over every finished task of its dataset (`simulator.study.store`, so a study
still running or stopped can be queried), plus its consolidated tables (`summary`); for a
run folder, `ops`, `flows`, `links`, `steps`, ... from its Parquet files; for a comparison,
`comparison` (its table) and the `ops`, `steps`, ... of every finished variant stacked (their
`variant` column names the variant, as in `comparison`). The answer is
printed as a table (its first `--rows`), or whole as CSV with `--csv` or `--format csv|json`.

Simplified: only Parquet frames are tables (a CSV-only folder, written without pyarrow, is
refused); the query runs on an in-memory DuckDB database that reads the files in place. It
reads those files and nothing else: DuckDB's external access is off but for them, and locked
(a `COPY`, a `read_csv` of another file or an `INSTALL` is refused; tables made
inside the query's own database are allowed and vanish with it). Write an answer to a file with
`--csv` or `--format csv|json` and the shell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from simulator.commands.common import console, fail, output_format, print_table
from simulator.errors import ClustersimError, InputError


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def frame_tables(folder: Path) -> dict[str, list[Path]]:
    """Table name -> Parquet files, for every frame of a results folder (see the module docstring).

    Raises:
        InputError: the folder is missing or holds no Parquet frame.
    """
    from simulator.metrics.store import read_manifest

    if not folder.is_dir():
        raise InputError("results folder not found", file=folder)
    tables: dict[str, list[Path]] = {p.stem: [p] for p in sorted(folder.glob("*.parquet"))}
    manifest = read_manifest(folder)
    if manifest is not None and manifest.get("kind") == "compare":
        tables.update(_variant_tables(folder, manifest))
    elif manifest is not None:
        tasks = sorted(manifest["tasks"].values(), key=lambda t: (t["variant"], t["seed"]))
        for name in manifest.get("frames", []):
            files = [folder / t["files"][name] for t in tasks if name in t.get("files", {})]
            if files:
                tables[name] = files
    if not tables:
        raise InputError("no Parquet frames in this folder to query", file=folder)
    for files in tables.values():  # a file the manifest lists may have gone since it was written
        gone = next((p for p in files if not p.is_file()), None)
        if gone is not None:
            raise InputError(
                f"frame file {gone.relative_to(folder)} that the folder's manifest lists is missing "
                "(the folder was changed after it was written)",
                file=folder,
            )
    return tables


def _variant_tables(folder: Path, manifest: dict[str, Any]) -> dict[str, list[Path]]:
    """A comparison's run frames (`ops`, `steps`, ...): that frame of every finished variant's
    run folder (named after the variant in the manifest), in variant order; each file's rows
    carry their variant's name in a `variant` column (`simulator.study.compare`)."""
    tables: dict[str, list[Path]] = {}
    for variant in sorted(manifest["tasks"], key=lambda v: manifest["tasks"][v]["variant"]):
        for path in sorted((folder / variant).glob("*.parquet")):
            tables.setdefault(path.stem, []).append(path)
    return tables


def run_query(folder: Path, sql: str) -> Any:
    """The answer of `sql` over the folder's frames, as a pandas DataFrame.

    Raises:
        InputError: the folder holds no frames, the query holds no statement, or DuckDB
            rejects it.
    """
    import duckdb

    tables = frame_tables(folder)
    con = duckdb.connect(":memory:")
    try:
        # the query reads the frames and nothing else: no file written (`COPY`, `_refuse_copy`), none
        # read outside them, no extension installed; and it cannot set that back
        frames = [str(p) for files in tables.values() for p in files]
        con.execute(f"SET allowed_paths = [{', '.join(map(_quoted, frames))}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        unreadable: dict[str, str] = {}  # a frame DuckDB cannot read fails only the queries of it
        for name, files in tables.items():
            paths = "[" + ", ".join(_quoted(str(p)) for p in files) + "]"
            # a study's frame files sit in `<axis>=<value>` folders: DuckDB would read the axis
            # from the folder name (as text, in place of the file's own column) unless told not to
            options = "union_by_name = true, hive_partitioning = false"
            try:
                con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet({paths}, {options})')
            except duckdb.PermissionException:
                raise
            except duckdb.Error as exc:
                unreadable[name] = str(exc).splitlines()[0]
        _refuse_copy(con, sql, folder)
        try:
            answer = con.execute(sql)
        except duckdb.CatalogException as exc:
            said = str(exc).lower()
            missing = next((n for n in unreadable if f"name {n.lower()} does not exist" in said), None)
            if missing is None:
                raise
            raise InputError(
                f"query failed: frame {missing} cannot be read ({unreadable[missing]})", file=folder
            ) from None
        if answer is None:  # DuckDB answers nothing at all to SQL without a statement
            raise InputError(
                "query failed: no SQL statement (the query is empty or only comments)", file=folder
            )
        return answer.df()
    except duckdb.PermissionException as exc:
        said = str(exc).splitlines()[0]
        raise InputError(
            f"query failed: a query reads this folder's frames only, it writes no file ({said})", file=folder
        ) from None
    except duckdb.Error as exc:
        raise InputError(f"query failed: {str(exc).splitlines()[0]}", file=folder) from None
    finally:
        con.close()


def _refuse_copy(con: Any, sql: str, folder: Path) -> None:
    """Refuse a query holding a COPY before any of it runs: the frames are DuckDB's allowed
    paths, which are writable as well as readable (a `COPY ... TO` a frame with
    `use_tmp_file false` overwrote it). SQL DuckDB cannot parse is left to its own error."""
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error:
        return
    if any(s.type == duckdb.StatementType.COPY for s in statements):
        raise InputError(
            "query failed: a query reads this folder's frames only, it writes no file (COPY is refused; "
            "print the answer with --csv or --format csv|json and redirect it)",
            file=folder,
        )


def query(
    results: Annotated[Path, typer.Argument(help="Results folder: a study (sweep) or a run.")],
    sql: Annotated[
        str, typer.Argument(help="SQL over tables named after the frames (runs, segments, ops, ...).")
    ],
    csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead of a table.")] = False,
    limit: Annotated[
        int, typer.Option("--rows", min=1, help="Rows shown in the table (--csv, --format csv|json: all).")
    ] = 50,
) -> None:
    """Query a results folder with SQL (DuckDB); each frame is a table named after it."""
    try:
        df = run_query(results, sql)
    except ClustersimError as err:
        fail(err)
    if csv:
        console.out(df.to_csv(index=False), end="", highlight=False)
        return
    table = Table(show_header=True, title=f"{len(df)} row(s)")
    for col in df.columns:
        table.add_column(str(col))
    for row in df.head(limit).itertuples(index=False):
        table.add_row(*(str(v) for v in row))
    # --format csv / json: every row of the answer (--rows cuts the table shown only), numbers
    # as numbers (not the text shown), a missing one as null
    whole = df if output_format() != "table" else df.head(limit)
    print_table(table, [{str(k): _plain(v) for k, v in r.items()} for r in whole.to_dict(orient="records")])


def _plain(v: object) -> object:
    """A cell as JSON holds it: a number as a number (NaN as None), text and booleans as
    they are, anything else (a time, a list) as the text the table shows."""
    import numpy as np  # (numpy is loaded by then: the query's frame is pandas)

    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, float) and v != v:
        return None
    return v if v is None or isinstance(v, str | int | float | bool) else str(v)


def register(app: typer.Typer) -> None:
    """Add the `query` command to the CLI."""
    app.command()(query)
