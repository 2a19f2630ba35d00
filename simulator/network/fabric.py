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
finished. Active flows with the same links and multiplicities (the same `class_key`: the
same ring channel of concurrent collectives over one group, say) are one *class* with a
member count, so the link entries and the max-min filling are per class; the rates are
bit-identical to solving the flows one by one (`simulator.network.maxmin`).
Flows started together (the flows of one phase of a collective and its mirrors) may be
started as one `FlowBatch` (`Fabric.transfer_batch`): one event for the batch instead of one
per flow, and no Python object per flow. The batch's event is processed exactly where a
SimPy `AllOf` over per-flow events would have been, so the order of every other event, and
every result, is that of starting the flows one by one.
When every class has one flow, long runs take compiled paths (`fabric_jit`): the same bits.
Records: one row per flow (a `FlowTable` of columns) and, per link, intervals of constant
rate (kept as numpy chunks and turned into a DataFrame once).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import simpy

from simulator.network.flow_batch import CallGroup, Flow, FlowBatch, flow_batch, succeed_after, usage
from simulator.network.flow_table import FlowRecord, FlowTable, close_intervals, flow_columns
from simulator.network.maxmin import class_link_sums, compact_links, max_min_class_rates, max_min_rates

__all__ = ["Fabric", "Flow", "FlowBatch", "FlowRecord", "FlowTable", "max_min_rates", "usage"]

# A flow is finished when the bytes it has left are below this share of its size, or when
# the time they would take is below the clock's resolution at `now` (the next event could
# not be told apart from this one). Whatever rounding leaves, short or over, is settled on the
# flow's links as it finishes, so bytes carried equal bytes sent whatever the size or rate.
_REL_EPS = 1e-12
_CLOCK_ULPS = 4.0
#: recomputations after which the compiled paths are taken: importing numba and loading its
#: cached code costs ~0.3 CPU s (a first compile ~5 s), repaid by ~100 us per update
_COMPILED_AFTER = 2000
_jit: Any = None  # the module `fabric_jit` once imported, False if numba is missing


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
        flow_records: a `FlowTable`: one row per finished flow, in finishing order.
        link_bytes: bytes each directed link has carried so far.
        recomputations: how many times the rates were recomputed.
        compiled_after: recomputations after which the compiled path is used (the same
            results; 0: from the start).

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
        # the active flows, in starting order: bytes left, rate (bytes/s), size, class, id,
        # group (the call that started it), label, distinct links, crossings
        self._pending: list[tuple[FlowBatch, int, int]] = []  # (batch, first flow id, group)
        self._groups: dict[int, CallGroup] = {}
        self._next_group = 0
        self._rem = np.empty(0)
        self._rate = np.empty(0)
        self._size = np.empty(0)
        self._f_cls = np.empty(0, dtype=np.int64)
        self._f_id = np.empty(0, dtype=np.int64)
        self._f_grp = np.empty(0, dtype=np.int64)
        self._f_label = np.empty(0, dtype=object)
        self._f_nlinks = np.empty(0, dtype=np.int64)
        self._f_cross = np.empty(0)
        # classes of active flows with equal links and multiplicities, in the order of their
        # first member: members, key, and their (class, link, multiplicity) entries
        self._c_count = np.empty(0, dtype=np.int64)
        self._c_key = np.empty(0, dtype=np.int64)  # -1: a class of one flow without key
        self._slot_of_key = np.full(64, -1, dtype=np.int64)  # key -> class slot, -1 if none
        self._key_ids: dict[tuple[bytes, bytes], int] = {}
        self._key_seen = np.zeros(64, dtype=bool)  # scratch over the keys (compiled path)
        self._reorder = False  # a class lost its first member: its place may have moved
        self._keys_stale = False  # classes moved since the key index was written
        self._e_links = np.empty(0, dtype=np.int64)
        self._e_mult = np.empty(0)
        self._e_cls = np.empty(0, dtype=np.int64)
        self._updated_at = 0.0
        self._version = 0
        self._update_scheduled = False
        self._next_id = 0
        self.flow_records = FlowTable()
        self._link_rate = np.zeros(len(base_capacity))
        self._link_since = np.zeros(len(base_capacity))
        self._busy_links: np.ndarray = np.empty(0, dtype=np.int64)
        self._busy_sorted = True
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.link_bytes = np.zeros(len(base_capacity))
        self.recomputations = 0
        self.compiled_after = _COMPILED_AFTER
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
        key: int = -1,
    ) -> simpy.Event:
        """Start a flow of `size_bytes` over `links` (with multiplicities `mult`).

        `crossings` is `mult.sum()` when the caller has it (it is recorded with the flow).
        `key` (`class_key(links, mult)`, or -1) is equal for flows with equal `links` and
        `mult`, and only for those: active flows with one key are solved as one class (the
        same rates, bit for bit, as solving them one by one). Returns an event that succeeds,
        with the `Flow` as its value, when the last byte arrives.
        """
        env = self.env
        done = simpy.Event(env)
        flow = Flow(self._next_id, links, mult, float(size_bytes), op_id, label, env.now, done)
        flow.remaining_bytes = flow.size_bytes
        flow.crossings = crossings
        flow.key = key
        batch = flow_batch([links], [mult], [size_bytes], [label], [crossings], [key])
        self._start(batch, op_id, done, flow)
        return done

    def transfer_batch(self, batch: FlowBatch, op_id: str = "") -> tuple[simpy.Event, int]:
        """Start the flows of `batch` (flow ids in its order) for op `op_id`.

        Returns the event and the first flow id. The event succeeds one step after the last
        flow finishes, where an `AllOf` over one event per flow (each succeeding as its flow
        finishes) would: every other event keeps its order.
        """
        env = self.env
        inner, after = simpy.Event(env), simpy.Event(env)
        if not len(batch.sizes):  # an AllOf over no event succeeds when it is made
            return after.succeed(), self._next_id
        inner.callbacks.append(partial(succeed_after, after))
        first = self._start(batch, op_id, inner, None)
        return after, first

    # -- internals -----------------------------------------------------------------
    # The active flows are kept as arrays (one slot per flow, in starting order): bytes left,
    # rate, size, class, and what their records need. Flows with equal links and
    # multiplicities (equal keys) form one class; the classes' (class, link, multiplicity)
    # entries are concatenated in the order of each class's first member. Each update only
    # filters out what finished and appends what started.
    def _start(self, batch: FlowBatch, op_id: str, done: simpy.Event, flow: Flow | None) -> int:
        """Start a batch's flows: record those that finish at once, queue the others."""
        env = self.env
        n = len(batch.sizes)
        first = self._next_id
        self._next_id += n
        n_live = len(batch.live)
        if n_live < n:  # flows without bytes or links finish when they start
            dead = np.ones(n, dtype=bool)
            dead[batch.live] = False
            idx = np.flatnonzero(dead)
            self.flow_records.add_columns(
                flow_columns(first + idx, op_id, batch.labels[idx], batch.n_links[idx], batch.crossings[idx],
                         batch.sizes[idx], env.now, env.now)
            )  # fmt: skip
        if n_live == 0:
            if flow is not None:
                flow.finished_at_s = env.now
            done.succeed(flow)
            return first
        group = self._next_group
        self._next_group += 1
        self._groups[group] = CallGroup(done, n_live, env.now, op_id, flow)
        self._pending.append((batch, first, group))
        if not self._update_scheduled:
            self._update_scheduled = True
            env.timeout(0).callbacks.append(self._on_update)
        return first

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
        if dt > 0 and len(self._rem):
            self._rem -= self._rate * dt
        self._updated_at = now

    def _finish_done(self) -> None:
        if not len(self._rem):
            return
        now = self.env.now
        clock_resolution_s = _CLOCK_ULPS * float(np.spacing(now))
        if len(self._f_cls) == len(self._c_count) and self._compiled():
            self._finish_compiled(now, clock_resolution_s)  # classes of one flow each
            return
        rem, rate = self._rem, self._rate
        done = (rem <= _REL_EPS * self._size) | ((rate > 0) & (rem <= rate * clock_resolution_s))
        if not done.any():
            return
        keep = ~done
        idx = np.flatnonzero(done)
        self._settle_rounding(idx)
        self._finished(idx, now)
        self._rem, self._rate, self._size = rem[keep], rate[keep], self._size[keep]
        self._f_id, self._f_grp, self._f_label = self._f_id[keep], self._f_grp[keep], self._f_label[keep]
        self._f_nlinks, self._f_cross = self._f_nlinks[keep], self._f_cross[keep]
        f_cls = self._f_cls
        if len(f_cls) == len(self._c_count):  # classes of one flow, in flow order: drop alike
            self._drop_classes(keep)
            return
        count = self._c_count - np.bincount(f_cls[idx], minlength=len(self._c_count))
        self._f_cls = f_cls[keep]
        self._c_count = count
        if (count[f_cls[idx]] > 0).any():
            self._reorder = True  # a class lost a member but not all
        c_keep = count > 0
        if not c_keep.all():
            self._drop_classes(c_keep)

    def _finish_compiled(self, now: float, clock_resolution_s: float) -> None:
        """`_finish_done` as one compiled call when class i is flow i (the same bits)."""
        idx, keep, rem, rate, size, e_links, e_mult, e_cls = _jit.finish_single(
            self._rem, self._rate, self._size, self._e_links, self._e_mult, self._e_cls,
            self.link_bytes, clock_resolution_s, _REL_EPS,
        )  # fmt: skip
        if not len(idx):
            return
        self._finished(idx, now)  # from the arrays before filtering
        self._rem, self._rate, self._size = rem, rate, size
        self._e_links, self._e_mult, self._e_cls = e_links, e_mult, e_cls
        self._f_id, self._f_grp, self._f_label = self._f_id[keep], self._f_grp[keep], self._f_label[keep]
        self._f_nlinks, self._f_cross = self._f_nlinks[keep], self._f_cross[keep]
        n, self._keys_stale = len(rem), True  # classes 0..n-1 of one member each
        self._f_cls, self._c_count, self._c_key = self._f_cls[:n], self._c_count[:n], self._c_key[keep]

    def _finished(self, idx: np.ndarray, now: float) -> None:
        """Record the finished flows `idx` (in starting order) and succeed the events of the
        calls whose last flow they are, in the order of those last flows."""
        grp = self._f_grp[idx]  # non-decreasing: groups are numbered in starting order
        if grp[0] == grp[-1]:  # the flows of one call (the common case)
            bounds, first = [0, len(grp)], [int(grp[0])]
        else:
            bounds = [0, *(np.flatnonzero(grp[1:] != grp[:-1]) + 1).tolist(), len(grp)]
            first = grp[np.array(bounds[:-1])].tolist()
        groups = self._groups
        completed, ops, starts = [], [], []
        for lo, hi, g in zip(bounds[:-1], bounds[1:], first, strict=True):
            group = groups[g]
            ops.append(group.op_id)
            starts.append(group.started_at_s)
            group.left -= hi - lo
            if group.left == 0:
                del groups[g]
                completed.append((hi - 1, group))
        op_col: str | np.ndarray = ops[0]
        started: float | np.ndarray = starts[0]
        if len(ops) > 1:  # else filled by `flow_columns`, as this repeat would fill them
            counts = np.diff(bounds)
            started = np.repeat(np.array(starts), counts)
            op_col = np.repeat(np.array(ops, dtype=object), counts)
        self.flow_records.add_columns(
            flow_columns(self._f_id[idx], op_col, self._f_label[idx], self._f_nlinks[idx], self._f_cross[idx],
                     self._size[idx], started, now)
        )  # fmt: skip
        for pos, group in completed:
            flow = group.flow
            if flow is not None:
                flow.rate_bytes_per_s = float(self._rate[idx[pos]])
                flow.remaining_bytes = 0.0
                flow.finished_at_s = now
            group.done.succeed(flow)

    def _settle_rounding(self, idx: np.ndarray) -> None:
        """Settle the rounding of rate x time (either sign) of the finished flows `idx` on
        their links, flow after flow in starting order (np.add.at adds entry by entry)."""
        e_cls = self._e_cls
        if len(self._f_cls) == len(self._c_count):  # classes of one flow, in flow order
            gone = np.zeros(len(self._c_count), dtype=bool)
            gone[self._f_cls[idx]] = True
            e_gone = gone[e_cls]
            rem_c = np.zeros(len(self._c_count))
            rem_c[self._f_cls[idx]] = self._rem[idx]
            np.add.at(self.link_bytes, self._e_links[e_gone], rem_c[e_cls[e_gone]] * self._e_mult[e_gone])
            return
        lens = np.bincount(e_cls, minlength=len(self._c_count))
        starts = np.cumsum(lens) - lens
        fl = lens[self._f_cls[idx]]
        offsets = np.cumsum(fl) - fl
        entries = np.repeat(starts[self._f_cls[idx]] - offsets, fl) + np.arange(int(fl.sum()))
        rem_e = np.repeat(self._rem[idx], fl)
        np.add.at(self.link_bytes, self._e_links[entries], rem_e * self._e_mult[entries])

    def _drop_classes(self, c_keep: np.ndarray) -> None:
        """Drop the classes not in `c_keep` (and their flows, if any are left)."""
        renumber = np.cumsum(c_keep) - 1
        entry_keep = c_keep[self._e_cls]
        self._e_cls = renumber[self._e_cls[entry_keep]]
        self._e_links = self._e_links[entry_keep]
        self._e_mult = self._e_mult[entry_keep]
        self._f_cls = renumber[self._f_cls[c_keep[self._f_cls]]]
        self._c_count = self._c_count[c_keep]
        self._c_key = self._c_key[c_keep]
        self._keys_stale = True

    def _admit(self, pending: list[tuple[FlowBatch, int, int]]) -> None:
        """Append the pending batches' live flows (in order) to the active flows and classes."""
        parts = []
        for batch, first, group in pending:
            live = batch.live
            cols = (batch.sizes, batch.keys, batch.labels, batch.n_links, batch.crossings)
            if len(live) == len(batch.sizes):
                ids = np.arange(first, first + len(live))
            else:
                cols, ids = tuple(c[live] for c in cols), first + live
            parts.append((*cols, ids, group, batch.e_links, batch.e_mult))
        if len(parts) == 1:
            sizes, keys, labels, lens, cross, ids, group, e_links, e_mult = parts[0]
            grp = np.full(len(sizes), group, dtype=np.int64)
        else:
            sizes, keys, labels, lens, cross, ids = (np.concatenate([p[i] for p in parts]) for i in range(6))
            grp = np.repeat(np.array([p[6] for p in parts], dtype=np.int64), [len(p[0]) for p in parts])
            e_links = np.concatenate([p[7] for p in parts])
            e_mult = np.concatenate([p[8] for p in parts])
        if self._admit_compiled(sizes, keys, labels, lens, cross, ids, grp, e_links, e_mult):
            return
        self._rem = np.concatenate((self._rem, sizes))
        self._rate = np.concatenate((self._rate, np.zeros(len(sizes))))
        self._size = np.concatenate((self._size, sizes))
        self._f_id = np.concatenate((self._f_id, ids))
        self._f_grp = np.concatenate((self._f_grp, grp))
        self._f_label = np.concatenate((self._f_label, labels))
        self._f_nlinks = np.concatenate((self._f_nlinks, lens))
        self._f_cross = np.concatenate((self._f_cross, cross))
        self._admit_classes(keys, lens, e_links, e_mult)

    def _admit_compiled(self, sizes, keys, labels, lens, cross, ids, grp, e_links, e_mult) -> bool:  # noqa: ANN001
        """`_admit` as one compiled call if class i is flow i and so are the new (else False)."""
        if self._reorder or len(self._f_cls) != len(self._c_count) or not self._compiled():
            return False
        top = int(max(keys.max(), self._c_key.max(initial=-1)))  # every key the scan marks
        if top >= len(self._key_seen):
            self._key_seen = np.zeros(2 * top + 1, dtype=bool)
        if _jit.keys_clash(self._c_key, keys, self._key_seen):
            return False
        (self._rem, self._rate, self._size, self._f_cross, self._f_id, self._f_grp, self._f_nlinks,
         self._c_key, self._e_links, self._e_mult, self._e_cls) = _jit.append_single(
            (self._rem, self._rate, self._size, self._f_cross, self._f_id, self._f_grp, self._f_nlinks,
             self._c_key, self._e_links, self._e_mult, self._e_cls),
            (sizes, cross, ids, grp, lens, keys, e_links.astype(np.int64, copy=False), e_mult),
        )  # fmt: skip
        self._f_label = np.concatenate((self._f_label, labels))
        n = len(self._rem)
        self._f_cls, self._c_count = np.arange(n), np.ones(n, dtype=np.int64)
        self._keys_stale = True
        return True

    def _admit_classes(
        self, keys: np.ndarray, lens: np.ndarray, e_links: np.ndarray, e_mult: np.ndarray
    ) -> None:
        """Put new flows (with `keys`, and entries `e_links`/`e_mult` of `lens` per flow) in
        classes: an active class of their key, else a new class."""
        nc = len(self._c_count)
        top = int(keys.max())
        if top >= len(self._slot_of_key):
            self._slot_of_key = np.full(2 * top + 1, -1, dtype=np.int64)
            self._keys_stale = True
        if self._keys_stale:
            self._slot_of_key.fill(-1)
            self._index_keys()
            self._keys_stale = False
        found = np.where(keys >= 0, self._slot_of_key[np.maximum(keys, 0)], -1)
        old = found >= 0
        if not old.any():
            keyed = keys[keys >= 0]
            if len(keyed) < 2 or len(np.unique(keyed)) == len(keyed):
                self._admit_alone(keys, lens, e_links, e_mult)  # each flow a class of its own
                return
        f_cls = found.copy()
        joined = np.bincount(found[old], minlength=nc)
        # flows of no active class: the first flow of each key (or a flow without key) starts
        # a class, in the order of the flows; later flows with that key join it
        miss = np.flatnonzero(~old)
        mk = keys[miss]
        first = np.arange(len(miss))
        pos = np.flatnonzero(mk >= 0)
        if len(pos):
            order = pos[np.argsort(mk[pos], kind="stable")]
            sk = mk[order]
            starts = np.concatenate(([True], sk[1:] != sk[:-1]))
            first[order] = order[starts][np.cumsum(starts) - 1]
        born = np.flatnonzero(first == np.arange(len(miss)))
        slot = np.full(len(miss), -1, dtype=np.int64)
        slot[born] = nc + np.arange(len(born))
        f_cls[miss] = slot[first]
        born_keys = mk[born]
        self._slot_of_key[born_keys[born_keys >= 0]] = slot[born][born_keys >= 0]
        self._c_key = np.concatenate((self._c_key, born_keys))
        self._f_cls = np.concatenate((self._f_cls, f_cls))
        counts = np.bincount(f_cls[miss] - nc, minlength=len(born))
        self._c_count = np.concatenate((self._c_count + joined, counts))
        flows = miss[born]  # the new flows that start a class: their entries, in order
        b_lens = lens[flows]
        offsets = np.cumsum(lens) - lens
        entries = np.repeat(offsets[flows] - (np.cumsum(b_lens) - b_lens), b_lens) + np.arange(
            int(b_lens.sum())
        )
        self._e_links = np.concatenate((self._e_links, e_links[entries]))
        self._e_mult = np.concatenate((self._e_mult, e_mult[entries]))
        self._e_cls = np.concatenate((self._e_cls, np.repeat(np.arange(nc, nc + len(born)), b_lens)))

    def _admit_alone(
        self, keys: np.ndarray, lens: np.ndarray, e_links: np.ndarray, e_mult: np.ndarray
    ) -> None:
        """Admit flows of distinct keys, none in an active class: one new class each."""
        nc = len(self._c_count)
        slots = np.arange(nc, nc + len(keys))
        keyed = keys >= 0
        self._slot_of_key[keys[keyed]] = slots[keyed]
        self._c_key = np.concatenate((self._c_key, keys))
        self._f_cls = np.concatenate((self._f_cls, slots))
        self._c_count = np.concatenate((self._c_count, np.ones(len(keys), dtype=np.int64)))
        self._e_links = np.concatenate((self._e_links, e_links))
        self._e_mult = np.concatenate((self._e_mult, e_mult))
        self._e_cls = np.concatenate((self._e_cls, np.repeat(slots, lens)))

    def _index_keys(self) -> None:
        keyed = self._c_key >= 0
        self._slot_of_key[self._c_key[keyed]] = np.flatnonzero(keyed)

    def class_key(self, links: np.ndarray, mult: np.ndarray) -> int:
        """The class key of a flow over `links` with `mult` (equal exactly when both are)."""
        k = (links.astype(np.int64, copy=False).tobytes(), mult.astype(float, copy=False).tobytes())
        return self._key_ids.setdefault(k, len(self._key_ids))

    def _order_classes(self) -> None:
        """Put the classes back in the order of their first member (after a class lost its
        first member, its first member is a later flow)."""
        self._reorder = False
        nc = len(self._c_count)
        first = np.full(nc, len(self._f_cls))
        np.minimum.at(first, self._f_cls, np.arange(len(self._f_cls)))
        if (first[1:] > first[:-1]).all():
            return
        perm = np.argsort(first, kind="stable")
        rank = np.empty(nc, dtype=np.int64)
        rank[perm] = np.arange(nc)
        order = np.argsort(rank[self._e_cls], kind="stable")
        self._e_cls = rank[self._e_cls][order]
        self._e_links = self._e_links[order]
        self._e_mult = self._e_mult[order]
        self._f_cls = rank[self._f_cls]
        self._c_count = self._c_count[perm]
        self._c_key = self._c_key[perm]
        self._keys_stale = True

    def _recompute(self) -> None:
        now = self.env.now
        self.recomputations += 1
        n = len(self._rem)
        if n and self._reorder:
            self._order_classes()
        if n and len(self._f_cls) == len(self._c_count) and self._compiled():
            self._recompute_compiled(now)  # classes of one flow each: the compiled path
            return
        if n:
            e_cls, all_mult, f_cls, count = self._e_cls, self._e_mult, self._f_cls, self._c_count
            used, compact = self._compact(self._e_links)
            rates = max_min_class_rates(
                e_cls, compact, all_mult, self.capacity_bytes_per_s[used], count, f_cls
            )
            self._rate = rates[f_cls]
            if len(f_cls) > len(count):  # some class has several members
                per_link = class_link_sums(compact, all_mult * rates[e_cls], e_cls, count, f_cls, len(used))
            else:
                per_link = np.bincount(compact, weights=all_mult * rates[e_cls], minlength=len(used))
        else:
            used = np.empty(0, dtype=np.int64)
            per_link = np.empty(0, dtype=float)
        self._update_link_rates(used, per_link, now)
        if n:
            ttf = float((self._rem / self._rate).min())
            self._version += 1
            ev = self.env.timeout(max(ttf, 0.0))
            ev.callbacks.append(partial(self._on_wakeup, self._version))

    def _compiled(self) -> bool:
        """Whether to take the compiled paths (`fabric_jit`): after `compiled_after`
        recomputations, if numba is installed (the numpy paths give the same results)."""
        global _jit
        if _jit is None and self.recomputations >= self.compiled_after:
            try:
                from simulator.network import fabric_jit as _jit
            except (ImportError, RuntimeError):  # no numba, or no writable cache for it
                _jit = False
        return bool(_jit) and self.recomputations >= self.compiled_after

    def _recompute_compiled(self, now: float) -> None:
        """`_recompute` when every class has one member, as one compiled call (the same bits)."""
        rate, used, link, since, old, ttf = _jit.recompute_single(
            self._e_links, self._e_mult, self._e_cls, self._f_cls, len(self._c_count), self._rem,
            self.capacity_bytes_per_s, self._busy_links, self._link_rate, self._link_since,
            self.link_bytes, self._mark, self._slot, float(now),
        )  # fmt: skip
        self._rate, self._busy_links, self._busy_sorted = rate, used, False
        if self.record_links and len(link):
            order = np.argsort(link)  # in link order, as `_update_link_rates` records them
            self._chunks.append((link[order], since[order], np.full(len(link), now), old[order]))
        self._version += 1
        ev = self.env.timeout(max(ttf, 0.0))
        ev.callbacks.append(partial(self._on_wakeup, self._version))

    def _compact(self, links: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`compact_links` over this fabric's scratch arrays."""
        return compact_links(links, self._mark, self._slot)

    def _update_link_rates(self, used: np.ndarray, per_link: np.ndarray, now: float) -> None:
        """Close the rate interval of every link whose rate changes (links of `used`, and
        links busy before that no flow uses now), in link order (`close_intervals`)."""
        busy = self._busy_links
        if not self._busy_sorted:  # left by the compiled path
            busy, self._busy_sorted = np.sort(busy), True
        self._busy_links = used
        closed = close_intervals(
            used, per_link, busy, self._link_rate, self._link_since, self.link_bytes, self._mark, now
        )
        if closed is not None and self.record_links:
            self._chunks.append((closed[0], closed[1], np.full(len(closed[0]), now), closed[2]))

    def link_intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(link, started_at_s, finished_at_s, rate_bytes_per_s) of every closed interval."""
        if not self._chunks:
            e = np.empty(0)
            return np.empty(0, dtype=np.int64), e, e, e
        return tuple(np.concatenate(c) for c in zip(*self._chunks, strict=False))  # type: ignore[return-value]
