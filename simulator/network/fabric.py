"""Flow-level network: fluid flows sharing directed links max-min fairly.

What is modeled: every transfer is a *flow* with a number of bytes to move and a set of
directed links it loads. A flow may load a link several times (multiplicity): a pipelined
ring channel is one flow whose edges all move at the same rate, so a link crossed by k of
its edges carries k times that rate. Active flows get max-min fair rates (progressive
filling); rates are recomputed only when a flow starts or ends, and only the earliest
completion is scheduled. A lone flow over one path therefore moves at the path's
bottleneck bandwidth.

What is simplified: no packets, queues, congestion control or propagation inside the
fluid (callers add path latency before a flow starts); switches are non-blocking.

Links can be degraded: the caller gives each link a capacity factor when it builds the
fabric, and the factors hold for the whole run.
Records: one `FlowRecord` per flow and, per link, intervals of constant rate (kept as
numpy chunks and turned into a DataFrame once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
import simpy

# A flow is finished when the bytes it has left are below this share of its size, or when
# the time they would take is below the clock's resolution at `now` (the next event could
# not be told apart from this one). Whatever rounding leaves, short or over, is settled on the
# flow's links as it finishes, so bytes carried equal bytes sent whatever the size or rate.
_REL_EPS = 1e-12
_CLOCK_ULPS = 4.0


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


def max_min_rates(
    flow_of_entry: np.ndarray,
    link_of_entry: np.ndarray,
    mult_of_entry: np.ndarray,
    capacity: np.ndarray,
    n_flows: int,
) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    Args:
        flow_of_entry, link_of_entry, mult_of_entry: one entry per (flow, link) pair;
            link indices are compact (0..len(capacity)-1).
        capacity: capacity of each compact link, bytes/s.
        n_flows: number of flows.

    Returns:
        rate of each flow, bytes/s. A flow that crosses no link gets +inf.
    """
    rates = np.zeros(n_flows)
    frozen = np.zeros(n_flows, dtype=bool)
    has_links = np.bincount(flow_of_entry, minlength=n_flows) > 0
    rates[~has_links] = np.inf
    frozen[~has_links] = True
    remaining = capacity.astype(float).copy()
    n_links = len(capacity)
    live = np.ones(len(flow_of_entry), dtype=bool)
    for _ in range(n_flows + 1):
        if frozen.all():
            break
        w = np.bincount(link_of_entry[live], weights=mult_of_entry[live], minlength=n_links)
        loaded = w > 0
        share = np.full(n_links, np.inf)
        share[loaded] = remaining[loaded] / w[loaded]
        delta = share.min()
        rates[~frozen] += delta
        remaining -= delta * w
        saturated = loaded & (remaining <= 1e-9 * np.maximum(capacity, 1.0))
        hit = live & saturated[link_of_entry]
        frozen[flow_of_entry[hit]] = True
        live &= ~frozen[flow_of_entry]
    return rates


class Fabric:
    """The set of active flows on a table of directed links.

    Args:
        env: the SimPy environment.
        capacity_bytes_per_s: per directed link capacity.
        record_links: keep per-link rate intervals (turn off for very long runs).
        link_factors: per directed link capacity factor (0 < factor <= 1 degrades the link),
            fixed for the run; all 1 when omitted. A link that is down is not degraded to
            0: the router avoids it.

    Attributes:
        capacity_bytes_per_s: capacity of each directed link with its factor applied.
        flow_records: one `FlowRecord` per finished flow, in finishing order.
        link_bytes: bytes each directed link has carried so far.
        recomputations: how many times the rates were recomputed.

    Raises:
        ValueError: `link_factors` does not match the links, or a factor is not positive.
    """

    def __init__(
        self,
        env: simpy.Environment,
        capacity_bytes_per_s: np.ndarray,
        record_links: bool = True,
        link_factors: np.ndarray | None = None,
    ) -> None:
        self.env = env
        base_capacity = np.asarray(capacity_bytes_per_s, dtype=float)
        factors = (
            np.ones_like(base_capacity) if link_factors is None else np.asarray(link_factors, dtype=float)
        )
        if factors.shape != base_capacity.shape:
            raise ValueError(
                f"link_factors has shape {factors.shape}; the fabric has {len(base_capacity)} links"
            )
        if not (factors > 0).all():
            raise ValueError("a link factor must be positive; mark a link down in the router instead")
        self.capacity_bytes_per_s = base_capacity * factors
        self.record_links = record_links
        self._active: list[Flow] = []
        self._pending: list[Flow] = []
        self._updated_at = 0.0
        self._version = 0
        self._update_scheduled = False
        self._next_id = 0
        self.flow_records: list[FlowRecord] = []
        self._link_rate = np.zeros(len(base_capacity))
        self._link_since = np.zeros(len(base_capacity))
        self._busy_links: np.ndarray = np.empty(0, dtype=np.int64)
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.link_bytes = np.zeros(len(base_capacity))
        self.recomputations = 0
        # scratch arrays over the link table (all False / unset between uses)
        self._mark = np.zeros(len(base_capacity), dtype=bool)
        self._slot = np.zeros(len(base_capacity), dtype=np.int64)

    # -- API -----------------------------------------------------------------------
    def transfer(
        self, links: np.ndarray, mult: np.ndarray, size_bytes: float, *, op_id: str = "", label: str = ""
    ) -> simpy.Event:
        """Start a flow of `size_bytes` over `links` (with multiplicities `mult`).

        Returns an event that succeeds when the last byte arrives.
        """
        done = self.env.event()
        flow = Flow(self._next_id, links, mult, float(size_bytes), op_id, label, self.env.now, done)
        self._next_id += 1
        flow.remaining_bytes = float(size_bytes)
        if size_bytes <= 0 or len(links) == 0:
            flow.finished_at_s = self.env.now
            self._record_flow(flow)
            done.succeed(flow)
            return done
        self._pending.append(flow)
        self._schedule_update()
        return done

    # -- internals -----------------------------------------------------------------
    def _schedule_update(self) -> None:
        if not self._update_scheduled:
            self._update_scheduled = True
            ev = self.env.timeout(0)
            ev.callbacks.append(self._on_update)

    def _on_update(self, _event: simpy.Event) -> None:
        self._update_scheduled = False
        self._advance()
        self._finish_done()
        if self._pending:
            self._active.extend(self._pending)
            self._pending.clear()
        self._recompute()

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._updated_at
        if dt > 0:
            for f in self._active:
                f.remaining_bytes -= f.rate_bytes_per_s * dt
        self._updated_at = now

    def _finish_done(self) -> None:
        now = self.env.now
        still: list[Flow] = []
        clock_resolution_s = _CLOCK_ULPS * float(np.spacing(now))
        for f in self._active:
            if f.remaining_bytes <= _REL_EPS * f.size_bytes or (
                f.rate_bytes_per_s > 0 and f.remaining_bytes <= f.rate_bytes_per_s * clock_resolution_s
            ):
                # settle the rounding of rate x time (either sign) on the flow's links
                self.link_bytes[f.links] += f.remaining_bytes * f.mult
                f.remaining_bytes = 0.0
                f.finished_at_s = now
                self._record_flow(f)
                f.done.succeed(f)
            else:
                still.append(f)
        self._active = still

    def _recompute(self) -> None:
        now = self.env.now
        self.recomputations += 1
        flows = self._active
        if flows:
            lens = np.fromiter((len(f.links) for f in flows), dtype=np.int64, count=len(flows))
            all_links = np.concatenate([f.links for f in flows])
            all_mult = np.concatenate([f.mult for f in flows])
            flow_of = np.repeat(np.arange(len(flows)), lens)
            used, compact = self._compact(all_links)
            rates = max_min_rates(flow_of, compact, all_mult, self.capacity_bytes_per_s[used], len(flows))
            for f, r in zip(flows, rates, strict=False):
                f.rate_bytes_per_s = float(r)
            per_link = np.bincount(compact, weights=all_mult * rates[flow_of], minlength=len(used))
        else:
            used = np.empty(0, dtype=np.int64)
            per_link = np.empty(0, dtype=float)
        self._update_link_rates(used, per_link, now)
        if flows:
            ttf = min(f.remaining_bytes / f.rate_bytes_per_s for f in flows)
            self._version += 1
            version = self._version
            ev = self.env.timeout(max(ttf, 0.0))
            ev.callbacks.append(partial(self._on_wakeup, version))

    def _on_wakeup(self, version: int, _event: simpy.Event | None = None) -> None:
        if version != self._version:
            return
        self._advance()
        self._finish_done()
        if self._pending:
            self._active.extend(self._pending)
            self._pending.clear()
        self._recompute()

    def _compact(self, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(sorted distinct links, index of each entry in them): `np.unique(links,
        return_inverse=True)` by a mark on the link table, without sorting the entries."""
        mark = self._mark
        mark[links] = True
        used = np.flatnonzero(mark)
        mark[used] = False
        slot = self._slot
        slot[used] = np.arange(len(used))
        return used, slot[links]

    def _update_link_rates(self, used: np.ndarray, per_link: np.ndarray, now: float) -> None:
        mark = self._mark
        mark[self._busy_links] = True
        mark[used] = True
        touched = np.flatnonzero(mark)  # np.union1d(busy, used), sorted
        mark[touched] = False
        if len(touched) == 0:
            return
        new = np.zeros(len(touched))
        if len(used):
            new[np.searchsorted(touched, used)] = per_link
        old = self._link_rate[touched]
        changed = ~np.isclose(old, new, rtol=1e-12, atol=0.0)
        if changed.any():
            idx = touched[changed]
            since = self._link_since[idx]
            old_c = old[changed]
            closing = old_c > 0
            if closing.any():
                self.link_bytes[idx[closing]] += old_c[closing] * (now - since[closing])
                if self.record_links:
                    self._chunks.append(
                        (
                            idx[closing].copy(),
                            since[closing].copy(),
                            np.full(int(closing.sum()), now),
                            old_c[closing].copy(),
                        )
                    )
            self._link_rate[idx] = new[changed]
            self._link_since[idx] = now
        self._busy_links = used

    def _record_flow(self, f: Flow) -> None:
        self.flow_records.append(
            FlowRecord(
                f.flow_id,
                f.op_id,
                f.label,
                len(f.links),
                float(f.mult.sum()) if len(f.mult) else 0.0,
                f.size_bytes,
                f.started_at_s,
                f.finished_at_s,
            )
        )

    def link_intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(link, started_at_s, finished_at_s, rate_bytes_per_s) of every closed interval."""
        if not self._chunks:
            e = np.empty(0)
            return np.empty(0, dtype=np.int64), e, e, e
        return tuple(np.concatenate(c) for c in zip(*self._chunks, strict=False))  # type: ignore[return-value]
