"""The fabric's link bookkeeping (sort- and mark-based) equals numpy's set routines exactly.

`usage` and `Fabric._compact` replace `np.unique` (with counts / with the inverse) and
`_update_link_rates` replaces `np.union1d`; the flow-level results depend on these being the
same arrays, element for element and dtype for dtype.
"""

from __future__ import annotations

import numpy as np
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network.fabric import Fabric, usage

N_LINKS = 40
paths_strategy = st.lists(
    st.lists(st.integers(0, N_LINKS - 1), max_size=12).map(lambda p: np.asarray(p, dtype=np.int64)),
    max_size=5,
)


@settings(max_examples=80, deadline=None)
@given(paths=paths_strategy)
def test_usage_is_unique_with_counts(paths):
    links, counts = usage(paths)
    if not paths:
        assert len(links) == 0 and len(counts) == 0
        return
    want_links, want_counts = np.unique(np.concatenate(paths), return_counts=True)
    assert links.dtype == want_links.dtype and counts.dtype == np.float64
    assert links.tolist() == want_links.tolist()
    assert counts.tolist() == want_counts.astype(float).tolist()


@settings(max_examples=80, deadline=None)
@given(entries=st.lists(st.integers(0, N_LINKS - 1), min_size=1, max_size=60))
def test_compact_is_unique_with_inverse_and_leaves_scratch_clean(entries):
    fab = Fabric(simpy.Environment(), np.ones(N_LINKS))
    links = np.asarray(entries, dtype=np.int64)
    used, compact = fab._compact(links)
    want_used, want_inverse = np.unique(links, return_inverse=True)
    assert used.tolist() == want_used.tolist()
    assert compact.tolist() == want_inverse.tolist()
    assert not fab._mark.any()  # the next call starts from a clean mark


def test_link_intervals_close_on_the_union_of_busy_and_new_links():
    """A link busy before an update and idle after it gets its interval closed (the union)."""
    env = simpy.Environment()
    fab = Fabric(env, np.full(4, 10.0))
    fab._update_link_rates(np.array([0, 2]), np.array([5.0, 10.0]), 0.0)
    fab._update_link_rates(np.array([1, 2]), np.array([5.0, 4.0]), 2.0)
    fab._update_link_rates(np.empty(0, dtype=np.int64), np.empty(0), 3.0)
    idx, start, end, rate = fab.link_intervals()
    got = sorted(zip(idx.tolist(), start.tolist(), end.tolist(), rate.tolist(), strict=True))
    assert got == [(0, 0.0, 2.0, 5.0), (1, 2.0, 3.0, 5.0), (2, 0.0, 2.0, 10.0), (2, 2.0, 3.0, 4.0)]
    assert fab.link_bytes.tolist() == [10.0, 5.0, 24.0, 0.0]
    assert not fab._mark.any()


flow_starts_strategy = st.lists(
    st.tuples(
        st.floats(0.0, 3.0),  # start, s
        st.lists(st.integers(0, N_LINKS - 1), min_size=1, max_size=6, unique=True),
        st.floats(0.5, 20.0),  # size, bytes
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(starts=flow_starts_strategy)
def test_incremental_active_arrays_equal_a_fresh_concatenation(starts):
    """The active flows' arrays, filtered and appended at every update, hold exactly what
    concatenating the active flows afresh (what the fabric once did per update) gives."""
    env = simpy.Environment()
    fab = Fabric(env, np.linspace(1.0, 4.0, N_LINKS))
    checked = []
    recompute = fab._recompute
    started = []  # (links, mult, size) of every flow, by flow id (ids count the transfers)

    def checked_recompute():
        flows = [started[i] for i in fab._f_id.tolist()]
        if flows:
            lens = [len(links) for links, _, _ in flows]
            assert fab._e_links.tolist() == np.concatenate([links for links, _, _ in flows]).tolist()
            assert fab._e_mult.tolist() == np.concatenate([mult for _, mult, _ in flows]).tolist()
            # flows without a key are classes of one, in starting order
            assert fab._e_cls.tolist() == np.repeat(np.arange(len(flows)), lens).tolist()
            assert fab._f_cls.tolist() == list(range(len(flows)))
            assert fab._c_count.tolist() == [1] * len(flows)
            assert fab._size.tolist() == [size for _, _, size in flows]
        assert len(fab._rem) == len(fab._rate) == len(flows)
        checked.append(len(flows))
        recompute()

    fab._recompute = checked_recompute

    def start(at, links, size):
        yield env.timeout(at)
        path, mult = np.array(sorted(links)), np.ones(len(links))
        started.append((path, mult, size))
        yield fab.transfer(path, mult, size)

    for at, links, size in starts:
        env.process(start(at, links, size))
    env.run()
    assert len(fab.flow_records) == len(starts) and checked and checked[-1] == 0


@settings(max_examples=80, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(st.floats(0.0, 1e12), st.floats(0.0, 1e12) | st.just(0.0)), min_size=1, max_size=30
    ),
    nudge=st.floats(-1e-11, 1e-11),
)
def test_rate_change_test_is_numpys_isclose(pairs, nudge):
    """`_update_link_rates` writes ~np.isclose(old, new, rtol=1e-12, atol=0) out by hand."""
    old = np.array([a for a, _ in pairs])
    new = np.array([b if b else a * (1 + nudge) for a, b in pairs])
    by_hand = ~(np.abs(old - new) <= 1e-12 * np.abs(new))
    assert by_hand.tolist() == (~np.isclose(old, new, rtol=1e-12, atol=0.0)).tolist()


class _UnionLinkRates:
    """`_update_link_rates` as it was: the union of busy and used links by `np.union1d`."""

    def __init__(self, n: int) -> None:
        self.rate, self.since, self.bytes = np.zeros(n), np.zeros(n), np.zeros(n)
        self.busy = np.empty(0, dtype=np.int64)
        self.chunks: list[tuple] = []

    def update(self, used, per_link, now):  # noqa: ANN001, ANN201
        touched = np.union1d(self.busy, used)
        new = np.zeros(len(touched))
        new[np.searchsorted(touched, used)] = per_link
        old = self.rate[touched]
        changed = ~np.isclose(old, new, rtol=1e-12, atol=0.0)
        idx = touched[changed]
        closing = old[changed] > 0
        self.bytes[idx[closing]] += old[changed][closing] * (now - self.since[idx[closing]])
        if closing.any():
            self.chunks.append((idx[closing], self.since[idx[closing]], now, old[changed][closing]))
        self.rate[idx] = new[changed]
        self.since[idx] = now
        self.busy = used


@settings(max_examples=80, deadline=None)
@given(
    updates=st.lists(
        st.dictionaries(st.integers(0, N_LINKS - 1), st.sampled_from([1.0, 2.5, 4.0]), max_size=8),
        min_size=1,
        max_size=8,
    )
)
def test_link_rate_intervals_equal_those_of_the_union(updates):
    """Closing intervals from the used links and the busy links gone idle, in link order,
    gives the intervals, bytes and rates of the union of both (what the fabric once did)."""
    fab = Fabric(simpy.Environment(), np.ones(N_LINKS))
    ref = _UnionLinkRates(N_LINKS)
    for t, rates in enumerate(updates):
        used = np.array(sorted(rates), dtype=np.int64)
        per_link = np.array([rates[i] for i in used.tolist()])
        fab._update_link_rates(used, per_link, float(t + 1))
        ref.update(used, per_link, float(t + 1))
    idx, start, end, rate = fab.link_intervals()
    want = []
    for links, since, end_s, rates in ref.chunks:
        want += [
            (i, s, end_s, r) for i, s, r in zip(links.tolist(), since.tolist(), rates.tolist(), strict=True)
        ]
    assert list(zip(idx.tolist(), start.tolist(), end.tolist(), rate.tolist(), strict=True)) == want
    assert fab.link_bytes.tolist() == ref.bytes.tolist() and not fab._mark.any()
    assert fab._link_rate.tolist() == ref.rate.tolist() and fab._link_since.tolist() == ref.since.tolist()
