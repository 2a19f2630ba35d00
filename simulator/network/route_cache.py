"""Look-ups of many cached routes at once.

What is modelled: nothing; this is bookkeeping of the router (`simulator.network.routing`),
whose per-pair answers (routes, latencies, forwarding) are cached in dicts keyed by
(source, destination) and asked for by the thousand (every edge of a collective's flow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any


def lookup(cache: dict[tuple[str, str], Any], keys: Sequence[tuple[str, str]], fill: Callable) -> list:
    """`cache[k]` of every k of `keys`, in order, after `fill(*missing)` has cached the keys
    not cached yet (each once). The look-ups are one C call (`operator.itemgetter`)."""
    if not keys:
        return []
    get = itemgetter(*keys)
    try:
        got = get(cache)
    except KeyError:
        fill(*dict.fromkeys(k for k in keys if k not in cache))
        got = get(cache)
    return list(got) if len(keys) > 1 else [got]
