"""Which ranks a figure draws, and how ranks are grouped when there are too many to show.

Ranks are grouped by the ops frame's `role` column, or, when it is empty, by the server
part of the GPU name (`n12.gpu3` -> `n12`). Simplified: the server is read from the GPU
name only (the topology is not consulted), and past a budget of groups adjacent groups
are merged in natural name order, whatever their sizes.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from simulator.network.graph import natural_key

_SERVER = re.compile(r"^(.*?)[._:/-]?(gpu|g|dev|rank)?\d+$", re.IGNORECASE)


def pick_ranks(ranks: np.ndarray, max_ranks: int) -> np.ndarray:
    """At most `max_ranks` of the distinct ranks, evenly spread, first and last included."""
    ranks = np.unique(ranks)
    if len(ranks) <= max_ranks:
        return ranks
    idx = np.linspace(0, len(ranks) - 1, max_ranks).round().astype(int)
    return ranks[np.unique(idx)]


def server_of(gpu: str) -> str:
    """`n12.gpu3` -> `n12`; a name without a separator stays whole."""
    for sep in (".", "/", ":"):
        if sep in gpu:
            return gpu.rsplit(sep, 1)[0]
    m = _SERVER.match(gpu)
    return m.group(1) if m and m.group(1) else gpu


def rank_groups(ops: pd.DataFrame, max_groups: int = 16) -> pd.Series:
    """Group label of every rank in `ops` (index: rank), in natural order of first rank.

    The `role` column when it names roles, else the server part of the `gpu` column, else
    one group "ranks". Past `max_groups` groups, adjacent groups are merged ("n0…n7").
    """
    if ops.empty:
        return pd.Series(dtype=object)
    per_rank = ops.drop_duplicates("rank").set_index("rank").sort_index()
    if "role" in per_rank and (per_rank["role"].fillna("").astype(str) != "").any():
        labels = per_rank["role"].fillna("").astype(str).replace("", "other")
    elif "gpu" in per_rank:
        labels = per_rank["gpu"].astype(str).map(server_of)
    else:
        labels = pd.Series("ranks", index=per_rank.index)
    first: dict[str, int] = {}  # a group's first (smallest) rank: the index is sorted
    for rank, g in zip(labels.index.tolist(), labels.tolist(), strict=True):
        first.setdefault(g, int(rank))
    order = sorted(labels.unique(), key=lambda g: (first[g], natural_key(g)))
    if len(order) > max_groups:
        size = -(-len(order) // max_groups)
        merged = {}
        for i in range(0, len(order), size):
            chunk = order[i : i + size]
            name = chunk[0] if len(chunk) == 1 else f"{chunk[0]}…{chunk[-1]}"
            merged.update({g: name for g in chunk})
        labels = labels.map(merged)
    return labels.rename("group")
