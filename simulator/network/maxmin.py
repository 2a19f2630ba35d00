"""Max-min fair rates by progressive filling, over classes of identical flows.

What is modelled: flows load directed links (with a multiplicity per link); progressive
filling raises every unfrozen flow's rate by the same step until a link saturates, then
freezes the flows crossing it. Flows with the same links and multiplicities always freeze
together and end with the same rate, so they are solved as one *class* with a member
count: the work per filling step is per class entry, not per flow.

What is simplified: nothing is approximated. The per-link sums (the load a step adds to a
link, the rate a link carries) are the same IEEE sums, in the same order, as summing flow by
flow in starting order would give, so the rates are bit-identical to solving every flow
separately. A link's sum is taken over class entries where that is provably the same sum:
where every class on it has one member (then the class order is the flow order), or where
every flow on it adds the same value (then the order does not matter and the sum is that
value added to itself once per flow). On the remaining links the classes are expanded into
their flows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: a link is saturated when less than this share of its capacity (at least 1 byte/s) is left
_SATURATED_SHARE = 1e-9


@lru_cache(maxsize=4096)
def repeated_sum(value: float, count: int) -> float:
    """`value` added to 0.0 `count` times, left to right (what summing `count` equal
    entries one by one gives; not always `count * value` in floating point)."""
    acc = 0.0
    for _ in range(count):
        acc += value
    return acc


def _repeated_sums(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """`repeated_sum` of each (value, count) pair, computed once per distinct pair."""
    order = np.lexsort((counts, values))
    v, c = values[order], counts[order]
    first = np.flatnonzero(np.concatenate(([True], (v[1:] != v[:-1]) | (c[1:] != c[:-1]))))
    distinct = [repeated_sum(x, int(n)) for x, n in zip(v[first].tolist(), c[first].tolist(), strict=True)]
    out = np.empty(len(values))
    out[order] = np.repeat(distinct, np.diff(np.append(first, len(v))))
    return out


def _expanded_sums(
    link: np.ndarray, value: np.ndarray, cls: np.ndarray, flow_cls: np.ndarray, n_links: int
) -> np.ndarray:
    """Per-link sums of the entries expanded flow by flow (flows in order, then entries).

    `cls` must be non-decreasing (the entries grouped by class, classes in slot order).
    """
    starts = np.searchsorted(cls, flow_cls, side="left")
    lens = np.searchsorted(cls, flow_cls, side="right") - starts
    total = int(lens.sum())
    offsets = np.cumsum(lens) - lens
    idx = np.repeat(starts - offsets, lens) + np.arange(total)
    return np.bincount(link[idx], weights=value[idx], minlength=n_links)


def class_link_sums(
    link: np.ndarray,
    value: np.ndarray,
    cls: np.ndarray,
    class_count: np.ndarray,
    flow_cls: np.ndarray,
    n_links: int,
) -> np.ndarray:
    """Per-link sum of every flow's value, flow by flow in order, computed over class entries.

    Args:
        link, value, cls: one entry per (class, link): the link (0..n_links-1), the value
            each member of the class adds to it, the class. Entries are grouped by class,
            classes in the order of their first member among the flows.
        class_count: members of each class.
        flow_cls: class of each flow, flows in order.
        n_links: number of links.

    Returns:
        float64 sums, bit-identical to `np.bincount` over the entries of every flow in order.
    """
    sums = np.bincount(link, weights=value, minlength=n_links)
    counts = class_count[cls]
    multi = counts > 1
    if not multi.any():
        return sums  # every class a single flow: the class order is the flow order
    shared = np.zeros(n_links, dtype=bool)
    shared[link[multi]] = True
    on = shared[link]
    l_on, v_on = link[on], value[on]
    ref = np.zeros(n_links)
    ref[l_on] = v_on  # any one entry's value on each such link
    mixed = np.zeros(n_links, dtype=bool)
    mixed[l_on[v_on != ref[l_on]]] = True
    flows_on = np.bincount(l_on, weights=counts[on], minlength=n_links)  # exact: small integers
    equal = np.flatnonzero(shared & ~mixed)
    if len(equal):
        sums[equal] = _repeated_sums(ref[equal], flows_on[equal])
    if mixed.any():
        m = mixed[link]
        sums[mixed] = _expanded_sums(link[m], value[m], cls[m], flow_cls, n_links)[mixed]
    return sums


def max_min_class_rates(
    cls_of_entry: np.ndarray,
    link_of_entry: np.ndarray,
    mult_of_entry: np.ndarray,
    capacity: np.ndarray,
    class_count: np.ndarray,
    flow_cls: np.ndarray,
) -> np.ndarray:
    """Max-min fair rate of each class of identical flows, by progressive filling.

    Args:
        cls_of_entry, link_of_entry, mult_of_entry: one entry per (class, link), grouped by
            class, classes in the order of their first member; links compact
            (0..len(capacity)-1).
        capacity: capacity of each compact link, bytes/s.
        class_count: members of each class.
        flow_cls: class of each flow, flows in order.

    Returns:
        rate of each class (of each of its flows), bytes/s; +inf for a class with no link.
    """
    n_classes = len(class_count)
    rates = np.zeros(n_classes)
    frozen = np.zeros(n_classes, dtype=bool)
    has_links = np.bincount(cls_of_entry, minlength=n_classes) > 0
    if not has_links.all():
        rates[~has_links] = np.inf
        frozen[~has_links] = True
    remaining = capacity.astype(float)  # a copy
    n_links = len(capacity)
    floor = _SATURATED_SHARE * np.maximum(capacity, 1.0)
    merged = len(flow_cls) > n_classes  # some class has several members
    link, mult, cls = link_of_entry, mult_of_entry, cls_of_entry
    for _ in range(len(flow_cls) + 1):
        if frozen.all():
            break
        if merged:
            w = class_link_sums(link, mult, cls, class_count, flow_cls, n_links)
        else:
            w = np.bincount(link, weights=mult, minlength=n_links)
        loaded = w > 0
        # remaining / w on loaded links, +inf elsewhere (the same quotients)
        share = np.divide(remaining, w, out=np.full(n_links, np.inf), where=loaded)
        delta = share.min()
        rates[~frozen] += delta
        remaining -= delta * w
        saturated = loaded & (remaining <= floor)
        # link, mult and cls hold the entries of unfrozen classes only (a class never thaws)
        frozen[cls[saturated[link]]] = True
        keep = ~frozen[cls]
        link, mult, cls = link[keep], mult[keep], cls[keep]
    return rates


def max_min_rates(
    flow_of_entry: np.ndarray,
    link_of_entry: np.ndarray,
    mult_of_entry: np.ndarray,
    capacity: np.ndarray,
    n_flows: int,
) -> np.ndarray:
    """Max-min fair rates by progressive filling, one flow per class.

    Args:
        flow_of_entry, link_of_entry, mult_of_entry: one entry per (flow, link) pair, grouped
            by flow in order; link indices are compact (0..len(capacity)-1).
        capacity: capacity of each compact link, bytes/s.
        n_flows: number of flows.

    Returns:
        rate of each flow, bytes/s. A flow that crosses no link gets +inf.
    """
    flows = np.arange(n_flows)
    return max_min_class_rates(
        flow_of_entry, link_of_entry, mult_of_entry, capacity, np.ones(n_flows, dtype=np.int64), flows
    )


def compact_links(links: np.ndarray, mark: np.ndarray, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct links, index of each entry in them): `np.unique(links,
    return_inverse=True)` by a slot table over the link table (`slot`, overwritten where
    used). The distinct links are found by a sort of the entries when they are few against
    the table, else by marking them on it (`mark`, all False, left so): one pass over the
    table then costs less than the sort.
    """
    if 4 * len(links) >= len(mark):
        mark[links] = True
        used = np.flatnonzero(mark)
        mark[used] = False
    else:
        s = np.sort(links)
        first = np.empty(len(s), dtype=bool)
        first[:1] = True
        np.not_equal(s[1:], s[:-1], out=first[1:])
        used = s[first]
    slot[used] = np.arange(len(used))
    return used, slot[links]
