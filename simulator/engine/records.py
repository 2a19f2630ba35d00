"""What the step simulation records: one row per op instance on a rank, one per step.

What is modelled: the times an op instance was ready, started and finished on one rank in
one step, with the quantities that priced it (bytes moved, FLOPs) and, for communication,
the collective, algorithm and protocol that ran; and the start and end of every step. Quantities
are SI (seconds, bytes). `simulator.metrics.frames` turns the records into the run's
`ops` and `steps` frames, naming the columns after the fields.

What is simplified: a compute op has no ready time of its own (it is ready when it
starts); a collective's record on each member rank shares the collective's start and end.
"""

from __future__ import annotations

from typing import NamedTuple


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
