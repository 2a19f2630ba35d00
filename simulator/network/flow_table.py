"""The fabric's record of finished flows, kept as columns.

What is modelled: one row per finished flow (a row of the run's `flows` frame): its id, op,
label, links, size and when it started and ended. Rows are buffered 65,536 at a time and
then stored as one chunk of NumPy arrays (8 bytes a value, strings shared with the flows),
not as a Python object per row, so a run of millions of flows holds a few arrays.

What is simplified: nothing is dropped. Each numeric column keeps the type the values had,
as a frame built from the rows would: a column whose values were all Python ints is int64,
one with any float is float64 (the clock starts at the int 0).

Links are recorded as intervals of constant rate: `close_intervals` closes, in link order,
the interval of every link whose rate changes at an update of the fabric.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np


class FlowRecord(NamedTuple):
    """What the fabric records of one finished flow (a row of the run's `flows` frame)."""

    flow_id: int
    op_id: str
    label: str
    n_links: int  # distinct directed links the flow loads
    link_crossings: float  # directed links it loads, with multiplicity
    size_bytes: float  # bytes per edge of the flow
    started_at_s: float
    finished_at_s: float


class FinishedFlow(Protocol):
    """What the table reads of a finished flow."""

    flow_id: int
    op_id: str
    label: str
    links: np.ndarray
    mult: np.ndarray
    size_bytes: float
    started_at_s: float
    finished_at_s: float
    crossings: float | None


_TEXT = frozenset(("op_id", "label"))


#: rows buffered before they are turned into a chunk of columns
_CHUNK_ROWS = 65_536


class ColumnChunks:
    """Rows of named fields buffered as tuples, then stored as chunks of NumPy columns.

    Each numeric column keeps the type its values had, as a frame built from the rows
    would: NumPy infers int64 for an all-int list and float64 otherwise. `text` columns
    are object arrays (the strings are shared, not copied), unless `convert` has replaced
    one (then whatever it made, e.g. Arrow strings).
    """

    def __init__(self, fields: tuple[str, ...], text: frozenset[str], chunk_rows: int = _CHUNK_ROWS) -> None:
        self._fields = fields
        self._text = text
        self._chunk_rows = chunk_rows
        self._rows: list[tuple] = []
        self._pieces: list[dict[str, np.ndarray]] = []  # columns added as columns, not chunked yet
        self._piece_rows = 0
        self._chunks: list[dict[str, np.ndarray]] = []
        self._n_chunked = 0

    def _added(self) -> None:
        if self._pieces:
            self._merge_pieces()  # rows come after the pieces: keep the order
        if len(self._rows) >= self._chunk_rows:
            self._flush()

    def add_columns(self, columns: dict[str, np.ndarray]) -> None:
        """Append rows given as columns (every field, of equal lengths; a numeric column is
        int64 only if every value was an int, as a column made from the rows would be)."""
        if self._rows:  # rows before these columns (pieces before the rows are chunked already)
            self._flush()
        self._pieces.append(columns)
        self._piece_rows += len(columns[self._fields[0]])
        if self._piece_rows >= self._chunk_rows:
            self._merge_pieces()

    def _merge_pieces(self) -> None:
        pieces = self._pieces
        if len(pieces) == 1:
            self._chunks.append(dict(pieces[0]))  # the table's own (`columns` empties chunks)
        else:
            self._chunks.append({k: np.concatenate([p[k] for p in pieces]) for k in self._fields})
        self._n_chunked += self._piece_rows
        self._pieces, self._piece_rows = [], 0

    def _flush(self) -> None:
        if self._pieces:
            self._merge_pieces()
        if not self._rows:
            return
        cols = zip(*self._rows, strict=True)
        self._chunks.append(
            {
                k: np.array(v, dtype=object if k in self._text else None)
                for k, v in zip(self._fields, cols, strict=True)
            }
        )
        self._n_chunked += len(self._rows)
        self._rows = []

    def __len__(self) -> int:
        return self._n_chunked + self._piece_rows + len(self._rows)

    def convert(self, name: str, convert: Callable[[np.ndarray], Any]) -> None:
        """Replace column `name` (over all rows) by `convert(column)`: the text of the
        records moved out of Python objects (`simulator.metrics.frames.text_array`), so that
        the objects it was shared with can be freed while the records live on. For a
        finished table: rows added afterwards are not converted, and merging them turns the
        column back into objects."""
        cols = self.columns()
        if len(cols[name]):
            self._chunks[0][name] = convert(cols[name])

    def columns(self) -> dict[str, np.ndarray]:
        """Every column (named and ordered as the fields) over all rows, in order."""
        self._flush()
        if not self._chunks:
            return {k: np.empty(0, dtype=object) for k in self._fields}
        if len(self._chunks) > 1:
            # column by column, each chunk's piece released once copied (not the whole
            # table twice at once); the chunks stay whole until their column is merged
            chunks, merged = self._chunks, {}
            for k in self._fields:
                merged[k] = np.concatenate([c[k] for c in chunks])
                for c in chunks:
                    del c[k]
            self._chunks = [merged]
        return dict(self._chunks[0])


class FlowTable(ColumnChunks):
    """Finished flows' records as columns, in finishing order (see the module docstring)."""

    def __init__(self, chunk_rows: int = _CHUNK_ROWS) -> None:
        super().__init__(FlowRecord._fields, _TEXT, chunk_rows)

    def add(self, flows: Sequence[FinishedFlow]) -> None:
        """Record flows that just finished, in their finishing order."""
        self._rows.extend(
            (
                f.flow_id,
                f.op_id,
                f.label,
                len(f.links),
                f.crossings if f.crossings is not None else (float(f.mult.sum()) if len(f.mult) else 0.0),
                f.size_bytes,
                f.started_at_s,
                f.finished_at_s,
            )
            for f in flows
        )
        self._added()

    def __iter__(self) -> Iterator[FlowRecord]:
        cols = self.columns()
        return (FlowRecord(*row) for row in zip(*(cols[k].tolist() for k in FlowRecord._fields), strict=True))


def flow_columns(
    ids: np.ndarray,
    op_id: str | np.ndarray,
    labels: np.ndarray,
    n_links: np.ndarray,
    crossings: np.ndarray,
    sizes: np.ndarray,
    started_at_s: float | np.ndarray,
    finished_at_s: float,
) -> dict[str, np.ndarray]:
    """Flow records as columns (a clock value that is a Python int stays an int column)."""
    n = len(ids)
    if isinstance(op_id, str):  # one object shared by the rows (`np.full` would copy it per row)
        ops = np.empty(n, dtype=object)
        ops.fill(op_id)
    else:
        ops = op_id
    return {
        "flow_id": ids,
        "op_id": ops,
        "label": labels,
        "n_links": n_links,
        "link_crossings": crossings,
        "size_bytes": sizes,
        "started_at_s": started_at_s if isinstance(started_at_s, np.ndarray) else np.full(n, started_at_s),
        "finished_at_s": np.full(n, finished_at_s),
    }


def close_intervals(
    used: np.ndarray,
    per_link: np.ndarray,
    busy: np.ndarray,
    link_rate: np.ndarray,
    link_since: np.ndarray,
    link_bytes: np.ndarray,
    mark: np.ndarray,
    now: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Close the rate interval of every link whose rate changes, in link order.

    Args:
        used, per_link: the links that carry a rate from now (sorted) and that rate, bytes/s.
        busy: the links that carried a rate until now (sorted); those not in `used` drop to 0.
        link_rate, link_since, link_bytes: per link of the table (rate, since when, bytes
            carried); updated in place.
        mark: a scratch array over the link table (all False, left so).
        now: the clock, s.

    Returns:
        (link, started_at_s, rate) of each closed interval of a positive rate, or None.
    """
    touched, new = used, per_link
    gone = busy
    if len(busy) and len(used):
        mark[used] = True
        gone = busy[~mark[busy]]  # sorted, as busy is
        mark[used] = False
    if len(gone):
        touched = np.concatenate((used, gone))
        new = np.concatenate((per_link, np.zeros(len(gone))))
    if len(touched) == 0:
        return None
    old = link_rate[touched]
    # ~np.isclose(old, new, rtol=1e-12, atol=0) for finite rates, without its overhead
    changed = ~(np.abs(old - new) <= 1e-12 * np.abs(new))
    if not changed.any():
        return None
    idx = touched[changed]
    old_c, new_c = old[changed], new[changed]
    if len(gone) and len(used):  # two sorted runs: put them in link order (np.union1d's)
        order = np.argsort(idx, kind="stable")
        idx, old_c, new_c = idx[order], old_c[order], new_c[order]
    since = link_since[idx]
    closing = old_c > 0
    closed = None
    if closing.any():
        link_bytes[idx[closing]] += old_c[closing] * (now - since[closing])
        closed = idx[closing], since[closing], old_c[closing]
    link_rate[idx] = new_c
    link_since[idx] = now
    return closed
