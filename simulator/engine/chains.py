"""Chains of fixed-duration ops, timed by arithmetic instead of one SimPy event each.

What is modelled: the same step as the event-per-op engine (`simulator.engine.step`). Most
ops of a deep pipeline last a time known in advance that no other simulated rank and no
flow on the fabric can change: compute ops, and collectives whose only simulated member is
the rank that runs them and which are solved in closed form (inside one server with
`intra_node: analytic`, or `fidelity: analytic`). Such an op starts when its stream is
free and its deps are done, `start = max(stream free, deps' finish)`, and ends at
`start + duration` (a collective adds its overhead, then each phase's latency and time
alone one after the other), the same floating-point sums SimPy's timeouts make. A
`ChainRunner` follows each (rank, stream) through such ops by that arithmetic and makes
SimPy events only where the rest of the simulation needs one: a rank reaching an op with
another simulated member or with flows on the fabric (at its absolute time), and the end
of the step. The records, the flows and every time are those of the event-per-op engine.

What is simplified: nothing in the results. Events of one instant are processed in the
order they were scheduled; every event the runner makes carries the key (priority, when
and by what it was scheduled) the event-per-op engine's event would have had
(`StepEnvironment`), and where only SimPy's counter could order two events the run is not
trusted (`ChainsTied`, or a tie counted by the environment): `StepSimulator.run` makes it
again with an event per op. The runner is only used where durations are deterministic
(no compute jitter: its draws would follow another order), on a fabric of the simulator's
own, and when some collective is solved in closed form.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial

import simpy
from simpy.events import NORMAL, URGENT

from simulator.engine.context import ANY, EventKey, Place, StepEnvironment, Unknown
from simulator.engine.cost import ComputeCost
from simulator.engine.records import OpRecord, OpTable
from simulator.workload.program import Op

#: starts a collective: (step, op, its done event, the members' arrival times by rank)
StartCollective = Callable[[int, Op, simpy.Event, dict[int, float]], None]


class FixedComm:
    """A single-member collective solved in closed form: its increments and record fields."""

    __slots__ = ("increments_s", "collective", "algorithm", "protocol", "n_ranks")

    def __init__(
        self, increments_s: tuple[float, ...], collective: str, algorithm: str, protocol: str, n_ranks: int
    ) -> None:
        self.increments_s = increments_s  # overhead, then per phase latency and time alone (s)
        self.collective = collective
        self.algorithm = algorithm
        self.protocol = protocol
        self.n_ranks = n_ranks


class ChainsTied(Exception):
    """Raised inside a run when the order of two events of one instant cannot be told from
    the chains alone; the caller runs the step again with an event per op."""


def _cmp(x: object, y: object) -> int | None:
    """-1, 0 or 1 as `x` orders before, with or after `y` (keys, orders, places); None
    where a place not known (None or `Unknown`) would decide."""
    if x is y or x is ANY or y is ANY:
        return 0
    if x is None or y is None or type(x) is Unknown or type(y) is Unknown:
        return None
    if type(x) is tuple and type(y) is tuple:
        for u, v in zip(x, y, strict=False):
            c = _cmp(u, v)
            if c != 0:
                return c
        return (len(x) > len(y)) - (len(x) < len(y))
    if type(x) is Place or type(y) is Place:
        if type(x) is not type(y):
            return None
        return _cmp(x.rank, y.rank)  # type: ignore[attr-defined]
    return int(x > y) - int(x < y)  # type: ignore[operator]


def before(a: EventKey, b: EventKey) -> bool | None:
    """Whether the event with key `a` is processed before the one with key `b` (of the same
    time) under an event per op; None if only places not known could tell."""
    c = _cmp(a, b)
    return None if c is None else c < 0


def _then(env: StepEnvironment, key: EventKey, prio: int, at_s: float) -> EventKey:
    """The key of an event scheduled at `at_s` with `prio` while the event `key` is processed
    (its place not known)."""
    o, place = key[2], key[3]
    short = (o[0], o[1], o[4]) if o else ()
    return (prio, at_s, (key[0], key[1], place if type(place) is int else ANY, short, place), Unknown(env))


class _Stream:
    """One (rank, stream): its ops, their deps and fixed durations, and where it stands."""

    __slots__ = ("rank", "name", "gpu", "ops", "deps", "fixed", "i", "t_s", "trig")

    def __init__(
        self, rank: int, name: str, gpu: str, ops: list[Op], deps: list[tuple[str, ...]], fixed: list
    ) -> None:
        self.rank = rank
        self.name = name
        self.gpu = gpu
        self.ops = ops
        self.deps = deps
        self.fixed = fixed  # per op: True (compute), a FixedComm, or None (needs events)
        self.i = 0  # next op
        self.t_s: float = 0.0  # when the stream reached it
        # the key of the event that resumed the stream at `t_s` under an event per op
        self.trig: EventKey = (NORMAL, 0.0, (), -1)


class ChainRunner:
    """Runs the steps of a program whose fixed-duration ops are timed by arithmetic.

    Under an event per op, a stream resumes in the processing of one event (its previous
    op's timeout, scheduled where that op started; the success of the deps it waited for,
    scheduled when the last of them ended; or the end of its own communication op) and
    finds a dep done if that dep's event came first. The runner keeps the key that event
    would have (`StepEnvironment`), decides "done first" as SimPy would, and gives the
    events it schedules those keys. Where only SimPy's counter could decide (two events of
    one instant with equal priorities, scheduling times and scheduling events), it raises
    `ChainsTied` or the environment counts a tie, and the run is made again with an event
    per op.

    Args:
        env: the simulation's environment.
        streams: the ops of every (rank, stream), in program order.
        rank_gpus: GPU of every rank.
        deps: per (rank, stream), the deps each of its ops waits for on that rank.
        fixed: per op id: `FixedComm` for a collective timed by arithmetic; compute ops are.
        members: simulated members of every communication op.
        needed: ids of the ops some op depends on.
        cost: prices compute ops (deterministic: no jitter).
        records: where the op records go.
        start_collective: starts a communication op once its last member is ready.
    """

    def __init__(
        self,
        env: StepEnvironment,
        streams: dict[tuple[int, str], list[Op]],
        rank_gpus: list[str],
        deps: dict[tuple[int, str], list[tuple[str, ...]]],
        fixed: dict[str, FixedComm],
        members: dict[str, int],
        needed: frozenset[str],
        cost: ComputeCost,
        records: OpTable,
        start_collective: StartCollective,
    ) -> None:
        self.env = env
        self._streams = [
            _Stream(
                rank, name, rank_gpus[rank], ops, deps[(rank, name)],
                [True if op.kind == "compute" else fixed.get(op.id) for op in ops],
            )
            for (rank, name), ops in streams.items()
        ]  # fmt: skip
        self._external = [op_id for op_id in members if op_id not in fixed]
        self._members = members
        self._needed = needed
        # how many (op, rank) wait for each op: its finish is dropped once all have read it
        self._uses_all: dict[str, int] = {}
        for s in self._streams:
            for ds in s.deps:
                for d in ds:
                    self._uses_all[d] = self._uses_all.get(d, 0) + 1
        self._uses: dict[str, int] = {}
        self._cost = cost
        self._records = records
        self._start_collective = start_collective
        self._step = 0
        self._finish: dict[str, float] = {}
        self._signal: dict[str, EventKey] = {}  # key of the event that tells an op is done
        self._waiting: dict[str, list[_Stream]] = {}
        self._done: dict[str, simpy.Event] = {}
        self._arrivals: dict[str, dict[int, float]] = {}
        self._work: deque[_Stream] = deque()
        self._left = 0
        self._end_s: float = 0.0
        self._end = simpy.Event(env)

    def run_step(self, step: int) -> simpy.Event:
        """Start step `step` now; the returned event is processed when every stream is done."""
        env = self.env
        now = env.now
        self._step = step
        self._finish = {}
        self._signal = {}
        self._uses = dict(self._uses_all)
        self._waiting = {}
        self._arrivals = {}
        self._done = {}
        for op_id in self._external:
            ev = simpy.Event(env)
            ev.callbacks.append(partial(self._ext_finished, op_id))  # type: ignore[union-attr]
            self._done[op_id] = ev
        self._left = len(self._streams)
        self._end_s = now
        self._end = simpy.Event(env)
        # each stream's process starts with an urgent event scheduled now, by this one
        start: EventKey = (URGENT, now, env.order(), Unknown(env))
        for s in self._streams:
            s.i, s.t_s, s.trig = 0, now, start
        for s in self._streams:
            self._advance(s, True)
            self._drain()
        return self._end

    # -- callbacks of real events --------------------------------------------------------
    def _check(self) -> None:
        if self.env.ties:
            raise ChainsTied(f"step {self._step}: events at {self.env.now!r} s")

    def _ext_finished(self, op_id: str, _event: simpy.Event) -> None:
        self._finish[op_id] = self.env.now
        self._signal[op_id] = self.env.key()

    def _resumed(self, s: _Stream, _event: simpy.Event) -> None:
        """The stream's own communication op is done: go on from now, in this event."""
        s.i += 1
        s.t_s = self.env.now
        s.trig = self.env.key()
        self._advance(s, True)
        self._drain()
        self._check()

    def _dep_done(self, s: _Stream, _event: simpy.Event) -> None:
        """A dep the stream was blocked on is done."""
        self._advance(s, False)
        self._drain()
        self._check()

    def _arrive(self, s: _Stream, op: Op) -> None:
        arr = self._arrivals.setdefault(op.id, {})
        arr[s.rank] = self.env.now
        done = self._done[op.id]
        if len(arr) == self._members[op.id]:
            self._start_collective(self._step, op, done, arr)
        done.callbacks.append(partial(self._resumed, s))  # type: ignore[union-attr]

    def _arrive_event(self, s: _Stream, op: Op, _event: simpy.Event) -> None:
        self._check()
        self._arrive(s, op)

    # -- the arithmetic ------------------------------------------------------------------
    def _drain(self) -> None:
        work = self._work
        while work:
            self._advance(work.popleft(), False)

    def _resume_key(self, s: _Stream, deps: tuple[str, ...], t: float) -> tuple[float, EventKey] | None:
        """(when, key of the event that resumes the stream) if it waits for `deps` having
        reached them at `t`, None if they are done first. Raises `ChainsTied`."""
        finish, signal, trig = self._finish, self._signal, s.trig
        last_s, last = -1.0, None
        for d in deps:
            f = finish[d]
            if f < t:
                continue
            if f == t:
                first = before(trig, signal[d])
                if first is None:
                    raise ChainsTied(f"step {self._step}: {d!r} done at {t!r} s")
                if not first:
                    continue
            if f > last_s:
                last_s, last = f, signal[d]
            elif f == last_s:
                later = before(last, signal[d])  # type: ignore[arg-type]
                if later is None:
                    raise ChainsTied(f"step {self._step}: two deps done at {f!r} s")
                if later:
                    last = signal[d]
        if last is None:
            return None
        # the wait's success, scheduled by the last dep's; among the waits on it, in the
        # order the streams reached them (their callbacks' order)
        env = self.env
        return last_s, (*_then(env, last, NORMAL, last_s)[:3], Place(env, (t, *trig)))

    def _advance(self, s: _Stream, direct: bool) -> None:
        """Time the stream's ops from where it stands until one needs an event.

        `direct`: the stream resumes in the callback of the event being processed now.
        """
        ops, deps, fixed = s.ops, s.deps, s.fixed
        i, t = s.i, s.t_s
        n = len(ops)
        finish, needed = self._finish, self._needed
        step, rank, gpu, name = self._step, s.rank, s.gpu, s.name
        append = self._records.append
        env = self.env
        while i < n:
            if deps[i]:
                for d in deps[i]:
                    if d not in finish:
                        s.i, s.t_s = i, t
                        self._wait(s, d)
                        return
                resume = self._resume_key(s, deps[i], t)
                if resume is not None:
                    t, s.trig = resume
                    direct = False
                uses = self._uses
                for d in deps[i]:
                    left = uses[d] - 1
                    if left:
                        uses[d] = left
                    else:
                        del uses[d], finish[d]
                        self._signal.pop(d, None)
            op = ops[i]
            how = fixed[i]
            if how is True:
                end = t + self._cost.compute_s(op, gpu)
                # OpRecord(step, op_id, kind, tag, rank, stream, ready_at_s, started_at_s,
                # finished_at_s, size_bytes, flops, collective, algorithm, protocol, n_ranks)
                append(OpRecord(step, op.id, op.kind, op.tag, rank, name, t, t, end,
                                0.0, op.flops, "", "", "", 1))  # fmt: skip
                s.trig = _then(env, s.trig, NORMAL, t)  # the timeout, scheduled where it started
                if op.id in needed:  # its success, scheduled by the timeout: one place for its waits
                    self._signal[op.id] = _then(env, s.trig, NORMAL, end)
            elif how is None:
                s.i, s.t_s = i, t
                if direct:  # t is now
                    self._arrive(s, op)
                else:
                    ev = simpy.Event(self.env)
                    ev.callbacks.append(partial(self._arrive_event, s, op))  # type: ignore[union-attr]
                    self.env.schedule_at(ev, t, s.trig)
                return
            else:
                end, last = t, None
                key = _then(env, s.trig, URGENT, t)  # its process starts
                for inc in how.increments_s:
                    last, end = end, end + inc
                    key = _then(env, key, NORMAL, last)
                append(OpRecord(step, op.id, op.kind, op.tag, rank, name, t, t, end, op.size_bytes, 0.0,
                                how.collective, how.algorithm, how.protocol, how.n_ranks))  # fmt: skip
                s.trig = _then(env, key, NORMAL, end)  # its end, scheduled by its last event
                if op.id in needed:
                    self._signal[op.id] = s.trig
            direct = False
            t = end
            if op.id in needed:
                finish[op.id] = end
                waiting = self._waiting.pop(op.id, None)
                if waiting:
                    self._work.extend(waiting)
            i += 1
        s.i, s.t_s = n, t
        self._stream_done(t)

    def _wait(self, s: _Stream, dep: str) -> None:
        done = self._done.get(dep)
        if done is not None:
            done.callbacks.append(partial(self._dep_done, s))  # type: ignore[union-attr]
        else:
            self._waiting.setdefault(dep, []).append(s)

    def _stream_done(self, t: float) -> None:
        self._end_s = max(self._end_s, t)
        self._left -= 1
        if self._left == 0:
            self.env.schedule_last_at(self._end, self._end_s)
