"""`_AllDone` resumes a waiting process exactly where `simpy.AllOf` would.

The step's streams wait for their deps with `_AllDone` instead of `env.all_of`; every other
event keeps its order only if the wait succeeds at the same point of the event queue. The
runs below mix waits on events succeeded at the same instants as other processes' timeouts
(ties broken by the order of scheduling) and compare the order of every resume.
"""

from __future__ import annotations

import random

import pytest
import simpy

from simulator.engine.step import _AllDone


def _trace(wait, seed: int) -> list[tuple[str, float]]:  # noqa: ANN001
    rng = random.Random(seed)
    env = simpy.Environment()
    events = [env.event() for _ in range(8)]
    log: list[tuple[str, float]] = []

    def trigger():  # noqa: ANN202
        order = list(range(8))
        rng.shuffle(order)
        for i in order:
            yield env.timeout(rng.choice([0, 0, 1, 1.5]))
            events[i].succeed()
            log.append((f"t{i}", env.now))

    def waiter(name: str, deps: list[int]):  # noqa: ANN202
        yield env.timeout(rng.choice([0, 0.5, 1]))
        pending = [events[d] for d in deps if not events[d].processed]
        if pending:
            yield wait(env, pending)
        log.append((name, env.now))

    def bystander(name: str):  # noqa: ANN202
        for _ in range(4):
            yield env.timeout(rng.choice([0, 0.5, 1]))
            log.append((name, env.now))

    env.process(trigger())
    for k in range(12):
        env.process(waiter(f"w{k}", rng.sample(range(8), rng.randint(1, 4))))
        if k % 3 == 0:
            env.process(bystander(f"b{k}"))
    env.run()
    return log


@pytest.mark.parametrize("seed", range(20))
def test_all_done_resumes_where_all_of_does(seed):
    want = _trace(lambda env, events: env.all_of(events), seed)
    got = _trace(_AllDone, seed)
    assert len(want) > 12 and got == want
