"""The program's checks (acyclicity on op indices, ranks in range by min and max, the column
checks of `validate`) agree with the plain definitions: networkx on the dependency graph, a
test of every rank, a walk of the ops one by one."""

from __future__ import annotations

from dataclasses import fields
from unittest.mock import patch

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.workload import program as program_module
from simulator.workload.program import (
    OP_KINDS,
    Op,
    StepProgram,
    _first_ranks,
    _rank_columns,
    _ranks_in_range,
    _runs_acyclic,
    _stream_edges,
    comm_op,
    compute_op,
)

N_OPS = 8

op_strategy = st.tuples(
    st.lists(st.integers(0, N_OPS - 1), max_size=3),  # deps, as op indices (any direction)
    st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True),  # ranks
    st.sampled_from(["compute", "comm"]),  # stream
)


@settings(max_examples=150, deadline=None)
@given(spec=st.lists(op_strategy, min_size=1, max_size=N_OPS))
def test_acyclic_is_networkx_on_the_dependency_graph(spec):
    n = len(spec)
    ops = [
        Op(f"op{i}", "compute", tuple(ranks), stream, tuple(f"op{d % n}" for d in deps))
        for i, (deps, ranks, stream) in enumerate(spec)
    ]
    program = StepProgram("p", ["g0", "g1", "g2"], ops)
    assert program._acyclic() == nx.is_directed_acyclic_graph(program.dependency_graph())


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(op_strategy, min_size=1, max_size=N_OPS))
def test_runs_acyclic_only_says_true_of_a_graph_without_a_cycle(spec):
    """The test on runs of ops suffices: it never accepts a graph with a cycle (and it
    accepts one whose deps all point forward)."""
    n = len(spec)
    ops = [
        Op(f"op{i}", "compute", tuple(ranks), stream, tuple(f"op{d % n}" for d in deps))
        for i, (deps, ranks, stream) in enumerate(spec)
    ]
    program = StepProgram("p", ["g0", "g1", "g2"], ops)
    s, t = _dep_and_stream_edges(ops)
    got = _runs_acyclic(_first_ranks(*_rank_columns(ops)), s, t)
    if got:
        assert nx.is_directed_acyclic_graph(program.dependency_graph())
    if (s < t).all():
        assert got


def _dep_and_stream_edges(ops: list[Op]) -> tuple[np.ndarray, np.ndarray]:
    index = {op.id: i for i, op in enumerate(ops)}
    deps = [(index[d], i) for i, op in enumerate(ops) for d in op.deps]
    chain_src, chain_dst = _stream_edges(ops)
    src = np.array([d for d, _ in deps], dtype=np.int64)
    dst = np.array([i for _, i in deps], dtype=np.int64)
    return np.concatenate((src, chain_src)), np.concatenate((dst, chain_dst))


def test_a_cycle_is_named_and_a_forward_dep_without_one_is_accepted():
    later = [Op("a", "compute", (0,), deps=("b",)), Op("b", "compute", (1,))]
    StepProgram("p", ["g0", "g1"], later).validate()  # depends on a later op, no cycle
    cyclic = [Op("a", "compute", (0,), deps=("b",)), Op("b", "compute", (1,), deps=("a",))]
    with pytest.raises(ValueError, match="dependency cycle"):
        StepProgram("p", ["g0", "g1"], cyclic).validate()


@settings(max_examples=150, deadline=None)
@given(
    ranks=st.lists(st.integers(-2, 6), max_size=3),
    group=st.lists(st.integers(-2, 6), max_size=3),
    mirrors=st.lists(st.lists(st.integers(-2, 6), max_size=3), max_size=3),
)
def test_ranks_in_range_tests_every_rank(ranks, group, mirrors):
    op = Op("x", "collective", tuple(ranks), group=tuple(group), mirrors=tuple(map(tuple, mirrors)))
    every = [*ranks, *group, *(r for m in mirrors for r in m)]
    assert _ranks_in_range(op, 5) == all(0 <= r < 5 for r in every)


def _reference_validate(program: StepProgram) -> None:
    """`StepProgram.validate` by its definition, one op at a time (what the column checks
    must agree with, message for message)."""
    n = len(program.rank_gpus)
    index: dict[str, int] = {}
    for i, op in enumerate(program.ops):
        if op.id in index:
            raise ValueError(f"op id {op.id!r} is used twice")
        if op.kind not in ("compute", "collective", "p2p", "checkpoint"):
            raise ValueError(f"op {op.id!r} has kind {op.kind!r}; expected one of {list(OP_KINDS)}")
        for r in (*op.ranks, *op.group, *(x for m in op.mirrors for x in m)):
            if not 0 <= r < n:
                raise ValueError(f"op {op.id!r} names rank {r}, but ranks are 0..{n - 1}")
        index[op.id] = i
    for op in program.ops:
        for d in op.deps:
            if d not in index:
                raise ValueError(f"op {op.id!r} depends on unknown op {d!r}")
    if not nx.is_directed_acyclic_graph(program.dependency_graph()):
        raise ValueError("dependency cycle")


faulty_op = st.tuples(
    st.sampled_from(["a", "b", "c", "d", "e", "f"]),  # id: repeats happen
    st.sampled_from(["compute", "collective", "p2p", "toaster"]),
    st.lists(st.integers(-1, 3), min_size=1, max_size=2, unique=True),  # ranks (3 is out)
    st.lists(st.integers(-1, 3), max_size=2),  # group
    st.lists(st.lists(st.integers(-1, 3), max_size=2), max_size=2),  # mirrors
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f", "zz"]), max_size=2),  # deps
    st.sampled_from(["compute", "comm"]),
)


@settings(max_examples=300, deadline=None)
@given(spec=st.lists(faulty_op, min_size=1, max_size=6), share=st.booleans(), collide=st.booleans())
def test_validate_reports_what_the_op_by_op_definition_reports(spec, share, collide):
    """Same outcome and same message (the first op at fault, in program order) as the plain
    walk, with tuples shared between ops (as a generator shares them) or not, and with every
    id hashed alike (`collide`: the lookup by hashes must then fall back to a dict)."""
    with patch.object(program_module, "hash", (lambda _: 7) if collide else hash, create=True):
        _check_validate(spec, share)


def _check_validate(spec: list, share: bool) -> None:
    shared: dict[tuple, tuple] = {}
    keep = (lambda t: shared.setdefault(t, t)) if share else (lambda t: t)
    ops = [
        Op(
            oid,
            kind,
            keep(tuple(ranks)),
            stream,
            tuple(deps),
            group=keep(tuple(group)),
            mirrors=keep(tuple(keep(tuple(m)) for m in mirrors)),
        )
        for oid, kind, ranks, group, mirrors, deps, stream in spec
    ]
    program = StepProgram("p", ["g0", "g1", "g2"], ops)
    try:
        _reference_validate(program)
        expected = None
    except ValueError as exc:
        expected = str(exc)
    if expected is None:
        program.validate()
        return
    with pytest.raises(ValueError) as got:
        program.validate()
    if expected == "dependency cycle":
        assert str(got.value).startswith("dependency cycle: ")
    else:
        assert str(got.value) == expected


@settings(max_examples=150, deadline=None)
@given(spec=st.lists(op_strategy, min_size=1, max_size=N_OPS))
def test_stream_edges_are_the_order_on_each_rank_and_stream(spec):
    ops = [Op(f"op{i}", "compute", tuple(ranks), stream) for i, (_, ranks, stream) in enumerate(spec)]
    last: dict[tuple[int, str], int] = {}
    expected = set()
    for i, op in enumerate(ops):
        for r in op.ranks:
            if (r, op.stream) in last:
                expected.add((last[(r, op.stream)], i))
            last[(r, op.stream)] = i
    src, dst = _stream_edges(ops)
    assert set(zip(src.tolist(), dst.tolist(), strict=True)) == expected  # (repeats allowed)


def test_positional_constructors_set_every_field_as_keywords_do():
    kernels = (object(),)
    a = compute_op("x", (1,), ("d",), "fwd", 1.5, 2.5, "fp8", kernels, 0.25)
    b = Op("x", "compute", (1,), deps=("d",), tag="fwd", flops=1.5, bytes_accessed=2.5, dtype="fp8")
    b.kernels, b.kernel_scale = kernels, 0.25
    c = comm_op("y", "p2p", (1, 2), "pp0>1", ("x",), "pp", "send_recv", (1, 2), ((3, 4),), 8.0, 1e-6)
    d = Op("y", "p2p", (1, 2), "pp0>1", ("x",), "pp", collective="send_recv", group=(1, 2))
    d.mirrors, d.size_bytes, d.overhead_s = ((3, 4),), 8.0, 1e-6
    for got, want in ((a, b), (c, d)):
        assert [getattr(got, f.name) for f in fields(Op)] == [getattr(want, f.name) for f in fields(Op)]
