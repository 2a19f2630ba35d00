"""Flows solved as classes (equal keys) give bit-identical results to flows solved one by one.

The fabric merges active flows with equal links and multiplicities into one class; the
max-min rates, finishing times, flow records, link intervals and link bytes must be the very
same floats as without the merging (`simulator/network/maxmin.py` explains why they are).
"""

from __future__ import annotations

import numpy as np
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network.fabric import Fabric
from simulator.network.maxmin import class_link_sums, repeated_sum

N_LINKS = 12
#: multiplicities as the engine makes them: crossings divided by a protocol efficiency
EFF = 0.927

paths_strategy = st.lists(
    st.tuples(
        st.lists(st.integers(0, N_LINKS - 1), min_size=1, max_size=5, unique=True),
        st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=5, max_size=5),
    ),
    min_size=1,
    max_size=4,
)
starts_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from([0.0, 0.0, 0.5, 1.25]), st.floats(0.5, 50.0)),
    min_size=1,
    max_size=24,
)


def _run(paths, starts, keyed: bool):  # noqa: ANN001, ANN202
    env = simpy.Environment()
    fab = Fabric(env, np.linspace(1.0, 3.0, N_LINKS))
    pool = [(np.array(sorted(links)), np.array(m[: len(links)]) / EFF) for links, m in paths]

    def start(at, p, size):  # noqa: ANN001, ANN202
        yield env.timeout(at)
        links, mult = pool[p]
        yield fab.transfer(links, mult, size, key=p if keyed else -1)

    for p, at, size in starts:
        env.process(start(at, p % len(pool), size))
    env.run()
    intervals = [a.tolist() for a in fab.link_intervals()]
    return [tuple(r) for r in fab.flow_records], intervals, fab.link_bytes.tolist(), fab.recomputations


@settings(max_examples=50, deadline=None)
@given(paths=paths_strategy, starts=starts_strategy)
def test_keyed_flows_give_the_same_records_bit_for_bit(paths, starts):
    assert _run(paths, starts, keyed=True) == _run(paths, starts, keyed=False)


def test_many_equal_flows_merge_into_few_classes():
    """64 flows over 2 link sets are 2 classes while they run, and end as 64 records."""
    env = simpy.Environment()
    fab = Fabric(env, np.ones(4))
    seen = []
    recompute = fab._recompute

    def watched():
        seen.append(len(fab._c_count))
        recompute()

    fab._recompute = watched
    for i in range(64):
        links = np.array([0, 1]) if i % 2 else np.array([1, 2, 3])
        fab.transfer(links, np.ones(len(links)), 1.0 + i, key=i % 2)
    env.run()
    assert seen[0] == 2 and len(fab.flow_records) == 64


@settings(max_examples=60, deadline=None)
@given(
    classes=st.lists(
        st.tuples(
            st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True),
            st.sampled_from([1.0 / EFF, 2.0 / EFF, 0.1, 0.3]),
            st.booleans(),  # one value on every link, or a value per link
        ),
        min_size=1,
        max_size=5,
    ),
    members=st.lists(st.integers(0, 4), min_size=1, max_size=40),
)
def test_class_link_sums_equal_the_flow_by_flow_sums(classes, members):
    """Over entries grouped by class (classes in order of first member), the per-link sums
    are exactly `np.bincount` over every flow's entries in flow order."""
    flow_cls = np.array([m % len(classes) for m in members])
    used = list(dict.fromkeys(flow_cls.tolist()))  # classes in order of first member
    flow_cls = np.array([used.index(c) for c in flow_cls.tolist()])
    links = [np.array(sorted(classes[c][0])) for c in used]
    values = [
        np.full(len(lk), classes[c][1]) if classes[c][2] else classes[c][1] * (1 + lk / 7.0)
        for c, lk in zip(used, links, strict=True)
    ]
    cls = np.repeat(np.arange(len(used)), [len(lk) for lk in links])
    count = np.bincount(flow_cls, minlength=len(used))
    got = class_link_sums(np.concatenate(links), np.concatenate(values), cls, count, flow_cls, 8)
    want = np.bincount(
        np.concatenate([links[c] for c in flow_cls]),
        weights=np.concatenate([values[c] for c in flow_cls]),
        minlength=8,
    )
    assert got.tolist() == want.tolist()


def test_repeated_sum_is_the_left_to_right_sum_not_the_product():
    """Ten additions of 0.1 give 0.9999999999999999, not 10 x 0.1 = 1.0 (IEEE 754 doubles)."""
    assert repeated_sum(0.1, 10) == 0.9999999999999999
    assert repeated_sum(0.1, 10) != 10 * 0.1
    assert repeated_sum(1.0 / EFF, 0) == 0.0
