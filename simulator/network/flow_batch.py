"""Flows started together: the description of a batch of flows the fabric starts at once.

What is modelled: the flows of one phase of a collective (and of its mirrors) start at the
same moment for the same op; their links, multiplicities, sizes, labels, crossings and
class keys are described once, when the phase is first run, and the fabric starts them all
with one call (`Fabric.transfer_batch`) instead of one call and one event per flow.

What is simplified: nothing; a batch holds what the per-flow calls were given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

__all__ = ["CallGroup", "Flow", "FlowBatch", "flow_batch", "succeed_after", "usage"]


@dataclass(slots=True, eq=False)
class FlowBatch:
    """Flows started together, described once and reused (`flow_batch` builds it).

    Per flow, in starting order: `links`/`mult`, `sizes` (bytes), `labels`, `crossings`
    (`mult.sum()`), `keys` (the fabric's `class_key`), `n_links`. `live`: the flows that
    load the fabric (a positive size and some link; the others finish when started);
    `e_links`/`e_mult`: the live flows' links and multiplicities, concatenated.
    """

    links: list[np.ndarray]
    mult: list[np.ndarray]
    sizes: np.ndarray
    labels: np.ndarray
    crossings: np.ndarray
    keys: np.ndarray
    n_links: np.ndarray
    live: np.ndarray
    e_links: np.ndarray
    e_mult: np.ndarray


def flow_batch(
    links: list[np.ndarray],
    mult: list[np.ndarray],
    sizes: list[float],
    labels: list[str],
    crossings: list[float | None] | None = None,
    keys: list[int] | None = None,
) -> FlowBatch:
    """Describe flows to start together (see `Fabric.transfer` for `crossings` and `keys`;
    crossings not given are `mult.sum()`, keys not given are -1)."""
    n = len(links)
    cross = [
        c if c is not None else (float(m.sum()) if len(m) else 0.0)
        for m, c in zip(mult, crossings or [None] * n, strict=True)
    ]
    size_arr = np.array(sizes, dtype=float)
    if not np.isfinite(size_arr).all() or (size_arr < 0).any():
        raise ValueError(f"flow sizes must be finite and non-negative bytes, got {sizes}")
    n_links = np.array([len(x) for x in links], dtype=np.int64)
    live = np.flatnonzero((size_arr > 0) & (n_links > 0))
    live_list = live.tolist()
    return FlowBatch(
        links,
        mult,
        size_arr,
        np.array(labels, dtype=object),
        np.array(cross, dtype=float),
        np.array(keys if keys is not None else [-1] * n, dtype=np.int64),
        n_links,
        live,
        np.concatenate([links[i] for i in live_list]) if live_list else np.empty(0, dtype=np.int64),
        np.concatenate([mult[i] for i in live_list]) if live_list else np.empty(0),
    )


def usage(paths: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Merge several paths into (distinct links, multiplicity)."""
    if not paths:
        return np.empty(0, dtype=np.int64), np.empty(0)
    allp = np.sort(np.concatenate(paths) if len(paths) > 1 else paths[0])
    if len(allp) == 0:
        return allp.astype(np.int64), np.empty(0)
    # np.unique(allp, return_counts=True) by a sort (numpy's hash-based unique is slower here)
    first = np.flatnonzero(np.concatenate(([True], allp[1:] != allp[:-1])))
    counts = np.diff(np.append(first, len(allp)))
    return allp[first], counts.astype(float)


@dataclass(slots=True, eq=False)
class Flow:
    """One fluid flow. `links`/`mult`: distinct directed links and how often it crosses each."""

    flow_id: int
    links: np.ndarray
    mult: np.ndarray
    size_bytes: float
    op_id: str
    label: str
    started_at_s: float
    done: simpy.Event
    remaining_bytes: float = 0.0
    rate_bytes_per_s: float = 0.0
    finished_at_s: float = field(default=float("nan"))
    crossings: float | None = None  # mult.sum(), when the caller gave it
    key: int = -1  # flows with one key >= 0 have equal links and multiplicities


@dataclass(slots=True, eq=False)
class CallGroup:
    """The flows of one `transfer` or `transfer_batch` call while some are unfinished."""

    done: simpy.Event  # succeeded when the last flow finishes
    left: int  # flows not finished yet
    started_at_s: float
    op_id: str
    flow: Flow | None = None  # the flow of a single `transfer` (the value of `done`)


def succeed_after(event: simpy.Event, _cause: simpy.Event) -> None:
    """Succeed `event` (a callback of the event it follows)."""
    event.succeed()
