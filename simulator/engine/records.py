"""What the step simulation records: one row per op instance on a rank, one per step.

What is modelled: the times an op instance was ready, started and finished on one rank in
one step, with the quantities that priced it (bytes moved, FLOPs) and, for communication,
the collective, algorithm and protocol that ran; and the start and end of every step. Quantities
are SI (seconds, bytes). `simulator.metrics.frames` turns the records into the run's
`ops` and `steps` frames, naming the columns after the fields.

What is simplified: a compute op has no ready time of its own (it is ready when it
starts); a collective's record on each member rank shares the collective's start and end.
The records are kept as columns (`OpTable`), not as an object per row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from simulator.network.flow_table import ColumnChunks


class OpRecord(NamedTuple):
    """One op instance on one rank in one step (a row of the run's `ops` frame)."""

    step: int
    op_id: str
    kind: str  # compute, collective, p2p or checkpoint
    tag: str  # what the op belongs to (fwd, bwd, tp, dp, ...)
    rank: int
    stream: str
    ready_at_s: float  # the rank reached the op: deps done, stream free
    started_at_s: float  # a collective starts when its last member is ready
    finished_at_s: float
    size_bytes: float  # bytes a communication op moves; 0 for compute
    flops: float  # floating-point operations of a compute op; 0 for communication
    collective: str  # collective kind, "checkpoint", or "" for compute
    algorithm: str  # collective algorithm, "direct" for checkpoints, "" for compute
    protocol: str  # ll, ll128, simple, or ideal (path latency, full rate); "" for compute and checkpoints
    n_ranks: int  # ranks in the collective; 1 for compute and checkpoints


class StepRecord(NamedTuple):
    """One training step: from the moment every rank began it to the moment all finished."""

    step: int
    started_at_s: float
    finished_at_s: float


#: op records buffered as rows before they are turned into a chunk of columns
_CHUNK_ROWS = 65_536
_OP_TEXT = frozenset(("op_id", "kind", "tag", "stream", "collective", "algorithm", "protocol"))


class OpTable(ColumnChunks):
    """The op records of a run, kept as columns (a chunk of NumPy arrays per 65,536 rows).

    Rows are appended as `OpRecord`s and iterate back as `OpRecord`s, in order; a long
    run holds 8 bytes a value instead of a Python object per row. Each numeric column keeps
    the type its values had, as a frame built from the rows would: int64 when every value
    was a Python int, float64 when any was a float (the clock starts at the int 0).
    """

    def __init__(self, chunk_rows: int = _CHUNK_ROWS) -> None:
        super().__init__(OpRecord._fields, _OP_TEXT, chunk_rows)

    def append(self, row: OpRecord) -> None:
        """Add one record."""
        self._rows.append(row)
        self._added()

    def extend(self, rows: list[OpRecord]) -> None:
        """Add records in order (as `append` one by one; chunks may run longer)."""
        self._rows.extend(rows)
        self._added()

    def add_members(self, first: OpRecord, ranks: list[int], ready_at_s: list[float]) -> None:
        """Add the records of one communication op on each of its member `ranks`: `first`'s
        fields but rank and ready time, which are each member's (as `extend` with one
        record per member, given as columns: one row object per member costs more than
        the columns for a collective of hundreds of ranks)."""
        own = {"rank": np.array(ranks), "ready_at_s": np.array(ready_at_s)}
        self.add_columns(
            {
                k: own[k] if k in own else np.full(len(ranks), v, dtype=object if k in _OP_TEXT else None)
                for k, v in zip(OpRecord._fields, first, strict=True)
            }
        )

    def __iter__(self) -> Iterator[OpRecord]:
        cols = self.columns()
        return (OpRecord(*row) for row in zip(*(cols[k].tolist() for k in OpRecord._fields), strict=True))
