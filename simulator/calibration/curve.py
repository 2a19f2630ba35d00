"""A run's collectives as an nccl-tests-style curve: time and bus bandwidth per size.

A collective sweep (`workloads/traces/collective-sweep-*.yaml`) runs one collective per
message size; this reads the `ops` frame of its result back as the table nccl-tests prints:
per (collective, ranks, size) the op's duration and `busbw = size / time x factor(n)`
(nccl-tests doc/PERFORMANCE.md; `simulator.calibration.collective.busbw_factor`).

Simplified: an op's time is the span from its start to its end on the slowest rank (the
`ops` frame has one row per rank); nccl-tests reports the mean over iterations of rank 0's
time, which the simulator's deterministic run has no spread to average.
"""

from __future__ import annotations

import pandas as pd

from simulator.calibration.collective import busbw_factor


def busbw_curve(ops: pd.DataFrame) -> pd.DataFrame:
    """Per collective op of a run: columns collective, n_ranks, size_bytes, time_s, busbw_bytes_per_s.

    Args:
        ops: the `ops` frame of a run (`simulator.metrics.frames.ops_frame`).

    Returns:
        One row per (collective, n_ranks, size_bytes), sorted by them.
    """
    coll = ops[(ops["kind"] == "collective") & (ops["size_bytes"] > 0)]
    spans = coll.groupby(["collective", "n_ranks", "size_bytes", "op_id"], sort=True).agg(
        started=("started_at_s", "min"), finished=("finished_at_s", "max")
    )
    spans["time_s"] = spans["finished"] - spans["started"]
    out = spans.groupby(["collective", "n_ranks", "size_bytes"], sort=True)["time_s"].min().reset_index()
    factors = [busbw_factor(k, int(n)) for k, n in zip(out["collective"], out["n_ranks"], strict=True)]
    out["busbw_bytes_per_s"] = out["size_bytes"] / out["time_s"] * factors
    return out
