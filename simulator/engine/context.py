"""Run context: the SimPy environment, random streams and id counters of one run.

No global simulator object: every entity gets the context it needs. Random streams come
from `simulator.streams` by family name, so adding a new source of randomness does not
change the draws of the others.
"""

from __future__ import annotations

import numpy as np
import simpy

from simulator.streams import step_stream


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
