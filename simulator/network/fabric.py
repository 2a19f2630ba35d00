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
The active flows are kept as arrays (bytes left, rate, and their link entries), so an
update costs numpy work over the active entries and Python work only per flow started or
finished.
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
    crossings: float | None = None  # mult.sum(), when the caller gave it


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
        self._active = np.empty(0, dtype=object)  # the active Flows, in starting order
        self._pending: list[Flow] = []
        self._rem = np.empty(0)  # per active flow: bytes left, rate (bytes/s), size
        self._rate = np.empty(0)
        self._size = np.empty(0)
        self._e_links = np.empty(0, dtype=np.int64)  # per (active flow, link) entry
        self._e_mult = np.empty(0)
        self._e_flow = np.empty(0, dtype=np.int64)
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
        self,
        links: np.ndarray,
        mult: np.ndarray,
        size_bytes: float,
        *,
        op_id: str = "",
        label: str = "",
        crossings: float | None = None,
    ) -> simpy.Event:
        """Start a flow of `size_bytes` over `links` (with multiplicities `mult`).

        `crossings` is `mult.sum()` when the caller has it (it is recorded with the flow).
        Returns an event that succeeds when the last byte arrives.
        """
        env = self.env
        done = simpy.Event(env)
        flow = Flow(self._next_id, links, mult, float(size_bytes), op_id, label, env.now, done)
        self._next_id += 1
        flow.remaining_bytes = flow.size_bytes
        flow.crossings = crossings
        if size_bytes <= 0 or len(links) == 0:
            flow.finished_at_s = env.now
            self._record_flow(flow)
            done.succeed(flow)
            return done
        self._pending.append(flow)
        if not self._update_scheduled:
            self._update_scheduled = True
            env.timeout(0).callbacks.append(self._on_update)
        return done

    # -- internals -----------------------------------------------------------------
    # The active flows are kept as arrays (one slot per flow, in starting order): bytes left,
    # rate and size, and their (flow, link, multiplicity) entries concatenated in the same
    # order. Each update only filters out the finished flows' slots and appends the new ones.
    def _on_update(self, _event: simpy.Event) -> None:
        self._update_scheduled = False
        self._settle()

    def _on_wakeup(self, version: int, _event: simpy.Event | None = None) -> None:
        if version != self._version:
            return
        self._settle()

    def _settle(self) -> None:
        """Advance the active flows to now, finish those done, admit the pending, recompute."""
        self._advance()
        self._finish_done()
        if self._pending:
            self._admit(self._pending)
            self._pending = []
        self._recompute()

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._updated_at
        if dt > 0 and len(self._active):
            self._rem -= self._rate * dt
        self._updated_at = now

    def _finish_done(self) -> None:
        if not len(self._active):
            return
        now = self.env.now
        clock_resolution_s = _CLOCK_ULPS * float(np.spacing(now))
        rem, rate = self._rem, self._rate
        done = (rem <= _REL_EPS * self._size) | ((rate > 0) & (rem <= rate * clock_resolution_s))
        if not done.any():
            return
        active = self._active
        keep = ~done
        entry_keep = keep[self._e_flow]
        gone = ~entry_keep
        # settle the rounding of rate x time (either sign) on the finished flows' links, flow
        # after flow in starting order (np.add.at adds entry by entry, in order)
        e_gone = self._e_flow[gone]
        np.add.at(self.link_bytes, self._e_links[gone], rem[e_gone] * self._e_mult[gone])
        idx = np.flatnonzero(done)
        for f, rate_i in zip(active[idx].tolist(), rate[idx].tolist(), strict=True):
            f.rate_bytes_per_s = rate_i
            f.remaining_bytes = 0.0
            f.finished_at_s = now
            self._record_flow(f)
            f.done.succeed(f)
        self._active = active[keep]
        self._rem, self._rate, self._size = rem[keep], rate[keep], self._size[keep]
        renumber = np.cumsum(keep) - 1
        self._e_flow = renumber[self._e_flow[entry_keep]]
        self._e_links = self._e_links[entry_keep]
        self._e_mult = self._e_mult[entry_keep]

    def _admit(self, new: list[Flow]) -> None:
        n0 = len(self._active)
        added = np.empty(len(new), dtype=object)
        added[:] = new
        self._active = np.concatenate((self._active, added))
        sizes = np.fromiter((f.size_bytes for f in new), dtype=float, count=len(new))
        lens = np.fromiter((len(f.links) for f in new), dtype=np.int64, count=len(new))
        self._rem = np.concatenate((self._rem, sizes))
        self._rate = np.concatenate((self._rate, np.zeros(len(new))))
        self._size = np.concatenate((self._size, sizes))
        self._e_links = np.concatenate((self._e_links, *[f.links for f in new]))
        self._e_mult = np.concatenate((self._e_mult, *[f.mult for f in new]))
        self._e_flow = np.concatenate((self._e_flow, np.repeat(np.arange(n0, n0 + len(new)), lens)))

    def _recompute(self) -> None:
        now = self.env.now
        self.recomputations += 1
        n = len(self._active)
        if n:
            flow_of, all_mult = self._e_flow, self._e_mult
            used, compact = self._compact(self._e_links)
            rates = max_min_rates(flow_of, compact, all_mult, self.capacity_bytes_per_s[used], n)
            self._rate = rates
            per_link = np.bincount(compact, weights=all_mult * rates[flow_of], minlength=len(used))
        else:
            used = np.empty(0, dtype=np.int64)
            per_link = np.empty(0, dtype=float)
        self._update_link_rates(used, per_link, now)
        if n:
            ttf = float((self._rem / self._rate).min())
            self._version += 1
            ev = self.env.timeout(max(ttf, 0.0))
            ev.callbacks.append(partial(self._on_wakeup, self._version))

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
            slot = self._slot
            slot[touched] = np.arange(len(touched))
            new[slot[used]] = per_link  # (touched is sorted: the same as searchsorted)
        old = self._link_rate[touched]
        # ~np.isclose(old, new, rtol=1e-12, atol=0) for finite rates, without its overhead
        changed = ~(np.abs(old - new) <= 1e-12 * np.abs(new))
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
                f.crossings if f.crossings is not None else (float(f.mult.sum()) if len(f.mult) else 0.0),
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
