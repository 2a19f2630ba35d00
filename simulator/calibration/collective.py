"""Collective kinds and the nccl-tests bus-bandwidth factors.

nccl-tests reports, per message size S and time t, the *algorithm bandwidth*
`algbw = S / t` and the *bus bandwidth* `busbw = algbw * factor(n)`, where the factor
makes busbw comparable with the link speed whatever the rank count n
(nccl-tests `doc/PERFORMANCE.md`):

| collective      | factor       |
| --------------- | ------------ |
| all_reduce      | 2(n-1)/n     |
| all_gather      | (n-1)/n      |
| reduce_scatter  | (n-1)/n      |
| all_to_all      | (n-1)/n      |
| broadcast       | 1            |
| reduce          | 1            |
| send_recv       | 1            |

The kind names are the ones the engine uses; `normalize_kind` maps the spellings found in
benchmark logs and file names (`allreduce`, `all_reduce_perf`, `alltoall`, `all2all`,
`sendrecv`, `reducescatter`, ...) onto them, and `kinds_in` finds the kinds named anywhere in
free text (headings, command lines, file names).
"""

from __future__ import annotations

import re

from simulator.network.collective import bus_factor

KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "send_recv",
)

# every spelling is compared after removing '_', '-', ' ' and lowercasing
_ALIASES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all",
    "all2all": "all_to_all",
    "a2a": "all_to_all",
    "sendrecv": "send_recv",
    "p2p": "send_recv",
}


def normalize_kind(name: str) -> str | None:
    """Engine kind for a spelling such as `all_reduce_perf`, `AllReduce` or `all2all`.

    Returns None when the name is no known collective.
    """
    key = re.sub(r"[\s_\-]", "", name.strip().lower())
    key = key.removesuffix("perf")
    return _ALIASES.get(key)


# collective names as they appear inside free text, after removing spaces, '_', '-' and '.'
_KIND_WORDS = re.compile(
    r"allreduce|allgather|reducescatter|alltoall|all2all|sendrecv|broadcast|bcast|reduce"
)
_WORD_KIND = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all2all": "all_to_all",
    "sendrecv": "send_recv",
    "broadcast": "broadcast",
    "bcast": "broadcast",
    "reduce": "reduce",
}


def kinds_in(text: str) -> set[str]:
    """Engine kinds whose names appear in `text` (`### All Reduce - 2 Nodes`, `alltoall_perf`).

    Args:
        text: a heading, command line or file name.

    Returns:
        Every kind named; empty when none is, several when the text names several.
    """
    squashed = re.sub(r"[\s_\-.]", "", text.lower())
    return {_WORD_KIND[w] for w in _KIND_WORDS.findall(squashed)}


def busbw_factor(kind: str, n_ranks: int) -> float:
    """busbw / algbw for `kind` on `n_ranks` ranks (nccl-tests doc/PERFORMANCE.md).

    Raises:
        ValueError: unknown kind or a rank count below 1.
    """
    if n_ranks < 1:
        raise ValueError(f"rank count must be at least 1, got {n_ranks}")
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; expected one of {list(KINDS)}")
    if n_ranks == 1 and kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        return 0.0  # nccl-tests' (n-1)/n on one rank: nothing crosses a link
    return bus_factor(kind, n_ranks)


def ranks_from_factor(kind: str, factor: float) -> float | None:
    """Invert `busbw_factor`: the (real-valued) rank count that gives `factor`.

    None where the factor does not depend on n (broadcast, reduce, send_recv) or is out of
    range.
    """
    if kind == "all_reduce":
        return 2.0 / (2.0 - factor) if factor < 2.0 else None
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return 1.0 / (1.0 - factor) if factor < 1.0 else None
    return None
