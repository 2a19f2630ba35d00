"""Run context: the SimPy environment, random streams and id counters of one run.

No global simulator object: every entity gets the context it needs. Random streams come
from `simulator.streams` by family name, so adding a new source of randomness does not
change the draws of the others.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import simpy

from simulator.streams import step_stream

#: allocations between two young-generation collections of the cyclic garbage collector
#: while a simulation runs (Python's default is 700)
RUN_GC_THRESHOLD = 100_000


@contextmanager
def run_gc() -> Iterator[None]:
    """Collect cyclic garbage less often while a simulation runs, then restore the settings.

    A run allocates millions of short-lived objects (events, records) next to a large
    program that lives throughout; with the default thresholds the collector's passes over
    them took ~20% of a deep-pipeline step. Reference counting still frees everything not
    in a cycle at once, so only cyclic garbage waits longer. No result depends on this.
    """
    old = gc.get_threshold()
    gc.set_threshold(max(RUN_GC_THRESHOLD, old[0]), old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)


class SimContext:
    """Holds the environment, the seed and named random streams."""

    def __init__(self, seed: int = 0) -> None:
        self.env = simpy.Environment()
        self.seed = seed
        self._streams: dict[str, np.random.Generator] = {}

    def rng(self, family: str) -> np.random.Generator:
        """The random stream of one component family (e.g. 'compute', 'gpu-failures')."""
        gen = self._streams.get(family)
        if gen is None:
            gen = step_stream(self.seed, family)
            self._streams[family] = gen
        return gen
