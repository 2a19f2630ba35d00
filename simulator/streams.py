"""Named random streams: one `numpy.random.Generator` per component family and seed.

What is modelled: every source of randomness draws from its own stream, derived from the
run's seed and the stream's name (CRC-32 of the name), so adding a source, or drawing more
from one, never changes the draws of another; the same seed and name always give the same
stream, whatever the process, executor or `PYTHONHASHSEED`.

What is simplified: two derivations exist and both are kept on purpose. The run level
(failures, repairs, degradations) spawns the stream from `SeedSequence(seed)` with the
name's key (`stream`); the step level (compute jitter) mixes the key into the entropy,
`SeedSequence([seed, key])` (`step_stream`). Merging them would change every seeded number
the catalog reports, so they stay two functions in this one module until a change that may
move those numbers merges them.
"""

from __future__ import annotations

import zlib

import numpy as np


def _key(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


def stream(seed: int, name: str) -> np.random.Generator:
    """The run-level stream `name` of `seed` (a spawned child of `SeedSequence(seed)`)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_key(name),)))


def unique_names(names: list[str]) -> list[str]:
    """Stream names for sources whose natural names may repeat (two failure sources with
    one target and cause): the first source with a name keeps it, the k-th repeat (k >= 1)
    gets `<name>/<k>` (the next such suffix no other source is named), so repeated
    sources draw independently while every first one keeps its stream."""
    taken = set(names)
    seen: set[str] = set()
    out = []
    for name in names:
        unique, k = name, 0
        while unique in seen or (k and unique in taken):  # a suffix may be another's own name
            k += 1
            unique = f"{name}/{k}"
        seen.add(unique)
        out.append(unique)
    return out


def step_stream(seed: int, name: str) -> np.random.Generator:
    """The step-level stream `name` of `seed` (the name's key mixed into the entropy)."""
    return np.random.default_rng(np.random.SeedSequence([seed, _key(name)]))
