"""The program's checks (acyclicity on op indices, ranks in range by min and max) agree with
the plain definitions: networkx on the dependency graph, and a test of every rank."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.workload.program import Op, StepProgram, _ranks_in_range

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
