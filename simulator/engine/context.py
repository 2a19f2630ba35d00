"""Run context: the SimPy environment, random streams and id counters of one run.

No global simulator object: every entity gets the context it needs. Random streams come
from `simulator.streams` by family name, so adding a new source of randomness does not
change the draws of the others.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from heapq import heappop, heappush

import numpy as np
import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, EventPriority

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


class Unknown:
    """A place in the order of one instant that only an event per op would know.

    Compared with anything but itself it counts a tie on its environment (`ties`) and
    answers "not less": a run that met one is not trusted (`simulator.engine.chains`).
    """

    __slots__ = ("env",)

    def __init__(self, env: StepEnvironment) -> None:
        self.env = env

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def _tie(self, _other: object) -> bool:
        self.env.ties += 1
        return False

    __lt__ = __le__ = __gt__ = __ge__ = _tie


class _Any:
    """Equal to anything: in an `order`, the place of a scheduling event that only an event
    per op would know (the comparison goes on to that event's own order)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


ANY = _Any()


def _known(short: tuple) -> bool:
    return not short or type(short[2]) is int


class Place:
    """The place of an event among the events scheduled by one event (a callback order the
    caller knows, as a tuple); before any place that is not a `Place`, it counts a tie."""

    __slots__ = ("env", "rank")

    def __init__(self, env: StepEnvironment, rank: tuple) -> None:
        self.env = env
        self.rank = rank

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __lt__(self, other: object) -> bool:
        if type(other) is Place and self.rank != other.rank:
            return self.rank < other.rank
        self.env.ties += 1
        return False

    def __gt__(self, other: object) -> bool:
        if type(other) is Place and self.rank != other.rank:
            return self.rank > other.rank
        self.env.ties += 1
        return False

    __le__ = __lt__
    __ge__ = __gt__


#: (priority, scheduled at, order, place) of an event: its queue entry without the time
EventKey = tuple[int, float, tuple, object]


class StepEnvironment(simpy.Environment):
    """SimPy's environment, its events ordered by the events that scheduled them.

    SimPy processes the events of one instant in the order they were scheduled (a counter).
    Here a queue entry is (time, priority, scheduled at, order, place, event): `order` is
    (priority, scheduled at, place or `ANY`, short order, place) of the event being
    processed when it was scheduled (its short order: (priority, scheduled at, place) of
    the event that scheduled that one), `place` its own counter value. Events scheduled
    the usual way are ordered exactly as SimPy orders them: the scheduling order is that
    of the events that scheduled them (their places, as their places are known), and
    within one, the counter. `schedule_at` puts an event at an absolute time with the key
    of an event an event-per-op engine would have scheduled (`simulator.engine.chains`:
    the last timeout of a chain of fixed-duration ops); its place is not known (`Unknown`,
    or a `Place` among the events one event schedules), so events it schedules compare by
    its short order, then its place. What only the counter could decide counts a tie
    (`ties`), and the run is not trusted.
    """

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self.ties = 0
        # what is scheduled before the run comes first: priority -1
        self._entry: tuple = (initial_time, -1, initial_time, (), -1, None)
        self._previous: tuple = self._entry
        self._order: tuple = (-1, initial_time, -1, (), -1)

    def schedule(self, event: simpy.Event, priority: EventPriority = NORMAL, delay: float = 0) -> None:
        """Schedule `event` with `priority`, `delay` from now (as SimPy does)."""
        now = self._now
        heappush(self._queue, (now + delay, priority, now, self._order, next(self._eid), event))  # type: ignore[misc,arg-type]

    def schedule_at(self, event: simpy.Event, at_s: float, key: EventKey) -> None:
        """Trigger `event` (value None) and schedule it at the absolute time `at_s` with `key`
        (places not known given as `Unknown`; the event gets a place of its own unless
        `key`'s is a `Place`)."""
        event._ok = True
        event._value = None
        prio, sched_s, order, place = key
        place = place if type(place) is Place else Unknown(self)  # a place of its own
        entry = (at_s, prio, sched_s, order, place, event)
        heappush(self._queue, entry)  # type: ignore[misc,arg-type]

    def schedule_last_at(self, event: simpy.Event, at_s: float) -> None:
        """Trigger `event` and schedule it at `at_s` after every event of that instant that
        is scheduled the usual way or with `schedule_at`."""
        event._ok = True
        event._value = None
        heappush(self._queue, (at_s, NORMAL, at_s, (NORMAL + 1, at_s, 0, (), 0), next(self._eid), event))  # type: ignore[misc,arg-type]

    def order(self) -> tuple:
        """The `order` of an event scheduled now: (priority, scheduled at, short order, place)
        of the event being processed, its short order the (priority, scheduled at, place) of
        the event that scheduled it."""
        return self._order

    def key(self) -> EventKey:
        """The key of the event being processed."""
        e = self._entry
        return e[1], e[2], e[3], e[4]

    def step(self) -> None:
        """Process the next event (SimPy's `Environment.step` for this queue's entries).

        Raises:
            EmptySchedule: no event is left.
        """
        try:
            entry: tuple = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
        self._previous, self._entry = self._entry, entry
        self._now = entry[0]
        order, place = entry[3], entry[4]
        short = (order[0], order[1], order[4]) if order else ()
        self._order = (entry[1], entry[2], place if type(place) is int else ANY, short, place)
        if type(place) is not int or (order and (type(order[4]) is not int or not _known(order[3]))):
            self._check_neighbours(entry)
        event = entry[5]
        callbacks, event.callbacks = event.callbacks, None
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:
            event.callbacks = callbacks[callbacks.index(callback) + 1 :]
            self.schedule(event, EventPriority(-1))
            raise
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def _check_neighbours(self, entry: tuple) -> None:
        """Compare an entry with a place not known with the entries processed just before
        and due just after it: a tie the queue did not meet is counted too."""
        q = self._queue
        for other in (self._previous, q[0] if q else None):
            if other is not None and other[:3] == entry[:3]:
                _ = other[3:5] < entry[3:5]  # an `Unknown` met counts a tie


class SimContext:
    """Holds the environment, the seed and named random streams."""

    def __init__(self, seed: int = 0) -> None:
        self.env: simpy.Environment = StepEnvironment()
        self.seed = seed
        self._streams: dict[str, np.random.Generator] = {}

    def rng(self, family: str) -> np.random.Generator:
        """The random stream of one component family (e.g. 'compute', 'gpu-failures')."""
        gen = self._streams.get(family)
        if gen is None:
            gen = step_stream(self.seed, family)
            self._streams[family] = gen
        return gen
