"""The group-wise helpers of `simulator.metrics.step_breakdown` against plain references:
each path (few long groups, many short ones) must give the reference's values exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.metrics import step_breakdown as sb

#: group sizes from all-singletons (the ranks path) to a few long groups (the per-group path)
_sizes = st.lists(st.integers(1, 200), min_size=1, max_size=12)
#: times with ties: a few distinct values, or any finite float
_time = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.5]), st.floats(0.0, 1e6, allow_nan=False))


@settings(max_examples=30, deadline=None)
@given(sizes=_sizes, data=st.data())
def test_running_max_restarts_at_every_group(sizes, data) -> None:
    values = np.array(data.draw(st.lists(_time, min_size=sum(sizes), max_size=sum(sizes))))
    gid = np.repeat(np.arange(len(sizes)), sizes)
    want = np.concatenate([np.maximum.accumulate(values[gid == g]) for g in range(len(sizes))])
    np.testing.assert_array_equal(sb._running_max(values, gid), want)


@settings(max_examples=30, deadline=None)
@given(sizes=_sizes, data=st.data())
def test_group_bounds_are_the_distinct_pairs_in_order(sizes, data) -> None:
    n = sum(sizes)
    gid = np.repeat(np.arange(len(sizes)), sizes)
    gid2 = np.concatenate([gid, gid])
    times = np.array(data.draw(st.lists(_time, min_size=2 * n, max_size=2 * n)))
    # the reference: `np.unique` of the times, then of the (group, rank of the time) keys
    values, rank = np.unique(times, return_inverse=True)
    keys, pos = np.unique(gid2 * len(values) + rank.reshape(-1), return_inverse=True)
    got_gid, got_times, got_pos = sb._group_bounds(gid2, times)
    np.testing.assert_array_equal(got_gid, keys // len(values))
    np.testing.assert_array_equal(got_times, values[keys % len(values)])
    np.testing.assert_array_equal(got_pos, pos.reshape(-1))


def test_many_groups_take_the_wide_group_ids() -> None:
    """Past 65,536 groups the group ids are not narrowed to 16 bits."""
    gid = np.repeat(np.arange(70_000), 2)
    times = np.tile([1.0, 0.0], 70_000)
    got_gid, got_times, _ = sb._group_bounds(gid, times)
    np.testing.assert_array_equal(got_gid, gid)
    np.testing.assert_array_equal(got_times, np.tile([0.0, 1.0], 70_000))
