"""The fabric's update as compiled calls (numba), for active flows that are classes of one.

What is modelled: the same update as `Fabric._settle` when every class of active flows has
one member (the case of deep pipelines, whose concurrent flows are mirrors over different
links). `finish_single`: the finish test, the rounding settled on the finished flows'
links and the filtering of the survivors. `keys_clash` and `append_single`: the admission
of new flows, each a class of its own. `recompute_single`: the compaction of the active
links, max-min progressive filling, the per-link rates, the closing of the link intervals
whose rate changes and the time to the next finish.

What is simplified: nothing. Each sum is taken in the order numpy takes it (`np.bincount`
and `np.add.at` add entry by entry, in order; a minimum does not depend on the order), each
product and quotient is the same IEEE operation on the same values, and no fast-math flag
is set (no contraction into FMA), so the results are bit-identical to the numpy path
(tests/network/test_fabric_jit.py). The module imports numba; the fabric imports it only
for runs long enough to repay the import (`Fabric.compiled_after`), and the compiled code
is cached on disk (`cache=True`: beside the module, or numba's user cache folder when that
is not writable). Errors follow numpy's rules (`error_model="numpy"`): a zero rate gives an
infinite time, as on the numpy path, instead of raising.
"""

from __future__ import annotations

import numba
import numpy as np

from simulator.network.maxmin import _SATURATED_SHARE

#: the relative tolerance under which a link's rate is unchanged (`close_intervals`)
_RATE_RTOL = 1e-12


@numba.njit(cache=True, error_model="numpy")
def _compact(e_links: np.ndarray, mark: np.ndarray, slot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct links in the order they first occur, index of each entry in them); leaves
    `mark` set on them. The order of the compact links changes no sum (each link's sum is
    over its entries in entry order) and no minimum."""
    n_e = len(e_links)
    used = np.empty(n_e, dtype=np.int64)
    compact = np.empty(n_e, dtype=np.int64)
    nu = 0
    for i in range(n_e):
        link = e_links[i]
        if not mark[link]:
            mark[link] = True
            slot[link] = nu
            used[nu] = link
            nu += 1
        compact[i] = slot[link]
    return used[:nu], compact


@numba.njit(cache=True, error_model="numpy")
def _fill(
    compact: np.ndarray, e_mult: np.ndarray, e_cls: np.ndarray, capacity: np.ndarray, n_cls: int, n_flows: int
) -> np.ndarray:
    """`max_min_class_rates` for classes of one member each (the same operations)."""
    nu = len(capacity)
    rates = np.zeros(n_cls)
    frozen = np.zeros(n_cls, dtype=np.bool_)
    has_links = np.zeros(n_cls, dtype=np.bool_)
    for i in range(len(e_cls)):
        has_links[e_cls[i]] = True
    for c in range(n_cls):
        if not has_links[c]:
            rates[c] = np.inf
            frozen[c] = True
    remaining = capacity.copy()
    floor = np.empty(nu)
    for j in range(nu):
        floor[j] = _SATURATED_SHARE * max(capacity[j], 1.0)
    link, mult, cls = compact.copy(), e_mult.copy(), e_cls.copy()
    n_live = len(link)
    w = np.empty(nu)
    for _ in range(n_flows + 1):
        if frozen.all():
            break
        w[:] = 0.0
        for i in range(n_live):
            w[link[i]] += mult[i]
        delta = np.inf
        for j in range(nu):
            if w[j] > 0:
                share = remaining[j] / w[j]
                if share < delta or share != share:
                    delta = share
        for c in range(n_cls):
            if not frozen[c]:
                rates[c] += delta
        for j in range(nu):
            remaining[j] -= delta * w[j]
        for i in range(n_live):
            j = link[i]
            if w[j] > 0 and remaining[j] <= floor[j]:
                frozen[cls[i]] = True
        k = 0
        for i in range(n_live):
            if not frozen[cls[i]]:
                link[k], mult[k], cls[k] = link[i], mult[i], cls[i]
                k += 1
        n_live = k
    return rates


@numba.njit(cache=True, error_model="numpy")
def recompute_single(
    e_links: np.ndarray,
    e_mult: np.ndarray,
    e_cls: np.ndarray,
    f_cls: np.ndarray,
    n_cls: int,
    rem: np.ndarray,
    capacity: np.ndarray,
    busy: np.ndarray,
    link_rate: np.ndarray,
    link_since: np.ndarray,
    link_bytes: np.ndarray,
    mark: np.ndarray,
    slot: np.ndarray,
    now: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """One recomputation over classes of one member each (see the module docstring).

    Args:
        e_links, e_mult, e_cls: the active (class, link, multiplicity) entries.
        f_cls: class of each active flow; n_cls: number of classes.
        rem: bytes left of each active flow.
        capacity: capacity of every link of the table, bytes/s.
        busy: links that carried a rate until now (any order).
        link_rate, link_since, link_bytes: per link of the table; updated in place.
        mark, slot: scratch arrays over the link table (`mark` all False, left so).
        now: the clock, s.

    Returns:
        (rate of each flow, the links used now (the next `busy`, not sorted), and of each
        closed interval: link, start, rate (not in link order); the time to the next finish).
    """
    used, compact = _compact(e_links, mark, slot)
    nu = len(used)
    cap = np.empty(nu)
    for j in range(nu):
        cap[j] = capacity[used[j]]
    rates = _fill(compact, e_mult, e_cls, cap, n_cls, len(f_cls))
    per_link = np.zeros(nu)
    for i in range(len(compact)):
        per_link[compact[i]] += e_mult[i] * rates[e_cls[i]]
    # links busy before that no flow uses now; each link's interval is its own (any order)
    n_b = len(busy)
    gone = np.empty(n_b, dtype=np.int64)
    n_g = 0
    for i in range(n_b):
        if not mark[busy[i]]:
            gone[n_g] = busy[i]
            n_g += 1
    for j in range(nu):
        mark[used[j]] = False
    closed_link = np.empty(nu + n_g, dtype=np.int64)
    closed_since = np.empty(nu + n_g)
    closed_rate = np.empty(nu + n_g)
    n_c = 0
    for k in range(nu + n_g):
        if k < nu:
            link, new = used[k], per_link[k]
        else:
            link, new = gone[k - nu], 0.0
        old = link_rate[link]
        if abs(old - new) <= _RATE_RTOL * abs(new):
            continue
        since = link_since[link]
        if old > 0:
            link_bytes[link] += old * (now - since)
            closed_link[n_c], closed_since[n_c], closed_rate[n_c] = link, since, old
            n_c += 1
        link_rate[link] = new
        link_since[link] = now
    flow_rate = np.empty(len(f_cls))
    ttf = np.inf
    for i in range(len(f_cls)):
        r = rates[f_cls[i]]
        flow_rate[i] = r
        t = rem[i] / r
        if t < ttf or t != t:
            ttf = t
    return flow_rate, used, closed_link[:n_c], closed_since[:n_c], closed_rate[:n_c], ttf


@numba.njit(cache=True, error_model="numpy")
def finish_single(
    rem: np.ndarray,
    rate: np.ndarray,
    size: np.ndarray,
    e_links: np.ndarray,
    e_mult: np.ndarray,
    e_cls: np.ndarray,
    link_bytes: np.ndarray,
    clock_resolution_s: float,
    rel_eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`Fabric._finish_done`'s test, rounding and filtering, for classes of one flow each
    in flow order (class i is flow i).

    A flow is done when `rem <= rel_eps * size` or (`rate > 0` and `rem <= rate *
    clock_resolution_s`); each done flow's `rem` (short or over) is added to its links,
    entry by entry in entry order (`np.add.at`'s order), as `rem * mult`.

    Returns:
        (the done flows, a keep mask over the flows, then rem, rate, size of the kept flows
        and the kept entries: links, multiplicities, classes renumbered). When no flow is
        done, only the first (empty) is meaningful.
    """
    n = len(rem)
    done = np.empty(n, dtype=np.bool_)
    n_done = 0
    for i in range(n):
        d = rem[i] <= rel_eps * size[i] or (rate[i] > 0 and rem[i] <= rate[i] * clock_resolution_s)
        done[i] = d
        n_done += d
    idx = np.empty(n_done, dtype=np.int64)
    keep = ~done
    if n_done == 0:
        return idx, keep, rem, rate, size, e_links, e_mult, e_cls
    new_index = np.empty(n, dtype=np.int64)
    k = 0
    j = 0
    for i in range(n):
        if done[i]:
            idx[j] = i
            j += 1
        else:
            new_index[i] = k
            k += 1
    n_e = len(e_links)
    n_ke = 0
    for e in range(n_e):
        c = e_cls[e]
        if done[c]:
            link_bytes[e_links[e]] += rem[c] * e_mult[e]
        else:
            n_ke += 1
    k_links = np.empty(n_ke, dtype=np.int64)
    k_mult = np.empty(n_ke)
    k_cls = np.empty(n_ke, dtype=np.int64)
    k = 0
    for e in range(n_e):
        c = e_cls[e]
        if not done[c]:
            k_links[k], k_mult[k], k_cls[k] = e_links[e], e_mult[e], new_index[c]
            k += 1
    return idx, keep, rem[keep], rate[keep], size[keep], k_links, k_mult, k_cls


@numba.njit(cache=True, error_model="numpy")
def keys_clash(c_key: np.ndarray, keys: np.ndarray, seen: np.ndarray) -> bool:
    """Whether a new flow's key (>= 0) is an active class's key or another new flow's.

    `seen` is a scratch table over the keys (all False, left so).
    """
    for k in c_key:
        if k >= 0:
            seen[k] = True
    clash = False
    for k in keys:
        if k >= 0:
            clash = clash or seen[k]
            seen[k] = True
    for k in c_key:
        if k >= 0:
            seen[k] = False
    for k in keys:
        if k >= 0:
            seen[k] = False
    return clash


@numba.njit(cache=True, error_model="numpy")
def append_single(old: tuple[np.ndarray, ...], new: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Flows appended as one new class each (`Fabric._admit_alone`), one call.

    `old`: rem, rate, size, cross (float), id, group, n_links, key, e_links (int), e_mult
    (float), e_cls (int); `new`: sizes, cross, id, group, n_links, key, e_links, e_mult.
    Returns the eleven arrays of `old` with the new flows and their entries appended (bytes
    left = size, rate 0, classes numbered on from the last).
    """
    rem, rate, size, cross, fid, grp, nlinks, key, e_links, e_mult, e_cls = old
    n_sizes, n_cross, n_id, n_grp, n_nlinks, n_key, n_e_links, n_e_mult = new
    n_cls = len(rem)
    slots = np.arange(n_cls, n_cls + len(n_sizes))
    return (
        np.concatenate((rem, n_sizes)),
        np.concatenate((rate, np.zeros(len(n_sizes)))),
        np.concatenate((size, n_sizes)),
        np.concatenate((cross, n_cross)),
        np.concatenate((fid, n_id)),
        np.concatenate((grp, n_grp)),
        np.concatenate((nlinks, n_nlinks)),
        np.concatenate((key, n_key)),
        np.concatenate((e_links, n_e_links)),
        np.concatenate((e_mult, n_e_mult)),
        np.concatenate((e_cls, np.repeat(slots, n_nlinks))),
    )
