"""The time breakdown of the `steps` frame, computed for every (step, rank) group at once.

What is modelled (the rules of `simulator.metrics.frames`): *compute* is the length of the
union of a rank's compute intervals in a step; *comm* the length of the union of its
communication intervals; *exposed communication* the time some communication runs while
the compute stream is idle, shared equally among the tags running together; *idle* the
rest of the step time.

How: the ops of all groups are flat arrays sorted by group, and every quantity is computed
with whole-array NumPy calls (sorts, cumulative maxima and sums, elementwise arithmetic)
instead of a Python loop over groups (but for the running maximum of groups long enough
that one call per group costs less than a sort). Each group's value is the same IEEE result as a
computation on that group alone: maxima are exact in any order, interval counts are small
integers, the elementwise operations are the same, and a group's sum is NumPy's own sum
over the group's values in the same order (`segment_sums`; NumPy's pairwise summation
depends on the number of terms, so groups are summed as the rows of one 2-D array per
distinct length, never with `np.add.reduceat`, whose rounding differs).

Simplified: times are finite (no NaN); a group's sums are over at most the group's ops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def segment_sums(values: np.ndarray, seg: np.ndarray, n_seg: int) -> np.ndarray:
    """Sum of `values` per segment, each equal to `values[segment].sum()` bit for bit.

    Args:
        values: float values, grouped by segment (segment ids nondecreasing).
        seg: segment id of every value, 0 <= id < n_seg.
        n_seg: number of segments; a segment without values sums to 0.0.
    """
    counts = np.bincount(seg, minlength=n_seg)
    firsts = np.cumsum(counts) - counts
    out = np.zeros(n_seg)
    for length in np.unique(counts[counts > 0]).tolist():
        rows = np.flatnonzero(counts == length)
        # one row per segment of this length: NumPy sums each row as it sums a 1-D array
        out[rows] = values[firsts[rows, None] + np.arange(length)].sum(axis=1)
    return out


#: Mean rows per group from which a running maximum is taken group by group (one NumPy call
#: per group, cheaper than sorting the values once the groups are long; `_running_max`).
_ROWS_PER_CALL = 32


def _running_max(values: np.ndarray, gid: np.ndarray) -> np.ndarray:
    """Running maximum of `values` restarted at every group (`gid` nondecreasing).

    Long groups: `np.maximum.accumulate` on each group's slice. Many short groups: on the
    values' ranks offset by group (integers: one call for all groups), then read back. A
    maximum is exact in any order, so both give the same values.
    """
    cuts = np.flatnonzero(gid[1:] != gid[:-1]) + 1
    if (len(cuts) + 1) * _ROWS_PER_CALL <= len(values):
        out = np.empty_like(values)
        bounds = [0, *cuts.tolist(), len(values)]
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            np.maximum.accumulate(values[a:b], out=out[a:b])
        return out
    distinct, rank = np.unique(values, return_inverse=True)
    offset = gid.astype(np.int64) * len(distinct)
    return distinct[np.maximum.accumulate(offset + rank.reshape(-1)) - offset]  # type: ignore[no-any-return]


def union_lengths(gid: np.ndarray, starts: np.ndarray, ends: np.ndarray, n_groups: int) -> np.ndarray:
    """Length of the union of each group's intervals (0.0 for a group without any).

    Per group: intervals sorted by start (stable), cut into blocks where a start passes
    every earlier end, each block from its first start to its largest end (at least 0),
    and the blocks' lengths summed in order.

    Args:
        gid: group of every interval, nondecreasing.
        starts: interval starts, s.
        ends: interval ends, s.
        n_groups: number of groups.
    """
    if len(gid) == 0:
        return np.zeros(n_groups)
    order = np.lexsort((starts, gid))  # stable: ties keep their order within the group
    g, s, e = gid[order], starts[order], ends[order]
    run_end = _running_max(e, g)
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = (g[1:] != g[:-1]) | (s[1:] > run_end[:-1])
    firsts = np.flatnonzero(new_block)
    block_end = np.maximum(np.zeros(len(firsts)), np.maximum.reduceat(e, firsts))
    return segment_sums(block_end - s[firsts], g[firsts], n_groups)


def _group_bounds(gid: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (group, time) pairs in (group, time) order: the group and time of each,
    and the index of every row's pair (`gid` nondecreasing in each half, small integers).

    The times are sorted once and the groups stably on top: a radix sort for up to 65,536
    groups, instead of the two sorts of `np.unique` on the times and on the pairs' keys.
    """
    order = np.argsort(times, kind="stable")  # runs of sorted times (a group's starts) merged
    small = np.uint16 if int(gid.max()) < 1 << 16 else np.int64
    order = order[np.argsort(gid[order].astype(small), kind="stable")]
    g, t = gid[order], times[order]
    new = np.empty(len(order), dtype=bool)
    new[:1] = True
    new[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1])
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.cumsum(new) - 1
    return g[new], t[new], pos


def exposed_breakdown(
    gid: np.ndarray,
    is_comp: np.ndarray,
    is_comm: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    tags: np.ndarray,
    n_groups: int,
) -> dict[str, np.ndarray]:
    """Exposed communication per group, in total (`exposed_comm_s`) and by tag.

    A group's time is cut at every start and end of its compute and communication
    intervals; a segment is exposed when no compute and some communication covers it, and
    its width is shared equally among the communication intervals covering it. Only
    groups with communication have segments (the others get 0.0).

    Args:
        gid: group of every op, nondecreasing.
        is_comp: the op is compute on the GPU.
        is_comm: the op is communication lasting a positive time.
        starts: op starts, s.
        ends: op ends, s.
        tags: op tags (text).
        n_groups: number of groups.

    Returns:
        `exposed_comm_s`, and `exposed_<tag>_s` for every tag of a communication op
        ("" and "comm" are both `exposed_other_s`).
    """
    with_comm = np.zeros(n_groups, dtype=bool)
    with_comm[gid[is_comm]] = True
    keep = (is_comp | is_comm) & with_comm[gid]
    g, comp, st, en, tg = gid[keep], is_comp[keep], starts[keep], ends[keep], tags[keep]
    out = {"exposed_comm_s": np.zeros(n_groups)}
    if not len(g):
        return out
    # the group's bounds: its distinct times, sorted by (group, time)
    bound_gid, bounds, pos = _group_bounds(np.concatenate([g, g]), np.concatenate([st, en]))
    pos_start, pos_end = pos[: len(g)], pos[len(g) :]
    seg = np.flatnonzero(bound_gid[1:] == bound_gid[:-1])  # segment i: bounds i .. i + 1
    seg_gid = bound_gid[seg]
    widths = bounds[seg + 1] - bounds[seg]

    def cover(mask: np.ndarray) -> np.ndarray:
        # intervals open minus closed at every bound (small integers: exact as floats)
        diff = np.bincount(pos_start[mask], minlength=len(bounds))
        diff -= np.bincount(pos_end[mask], minlength=len(bounds))
        return np.cumsum(diff)[seg]

    in_comp = cover(comp) > 0
    comm = ~comp
    # the tags in sorted order, as np.unique gives them (a set: np.unique sorts every row's
    # text); each row's tag compared as a code, each distinct tag once as text
    codes, names = pd.factorize(tg)
    code_of = {name: i for i, name in enumerate(names.tolist())}
    comm_tags = sorted(set(names[np.unique(codes[comm])].tolist()))
    per_tag = {tag: cover(comm & (codes == code_of[tag])) for tag in comm_tags}
    n_cover = np.sum(list(per_tag.values()), axis=0)
    exposed = (~in_comp) & (n_cover > 0)
    out["exposed_comm_s"] = segment_sums(widths[exposed], seg_gid[exposed], n_groups)
    share = np.where(exposed, widths / np.maximum(n_cover, 1), 0.0)
    for tag, tag_cover in per_tag.items():
        name = tag if tag and tag != "comm" else "other"  # "comm" would shadow the total
        key = f"exposed_{name}_s"
        out[key] = out.get(key, np.zeros(n_groups)) + segment_sums(tag_cover * share, seg_gid, n_groups)
    return out
