"""The column checks of `validate_graph` agree with the walk of nodes and edges they spare."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import InputError
from simulator.network.graph import _attributes_pass, _check_attributes, natural_key, server_major

numbers = st.sampled_from(
    [1, 0, -1, 2.5, -0.0, math.nan, math.inf, True, np.float64(3.0), None, "7", 10**400]
)
kinds = st.sampled_from(["gpu", "switch", "nic", "router", None])
media = st.sampled_from(["nvlink", "ib", "pcie", "carrier pigeon", None])
edge = st.tuples(st.integers(0, 3), st.integers(0, 3), numbers, numbers, media, st.booleans())


@settings(max_examples=300, deadline=None)
@given(node_kinds=st.lists(kinds, min_size=1, max_size=4), edges=st.lists(edge, max_size=6))
def test_the_column_checks_pass_only_graphs_the_walk_passes(node_kinds, edges):
    g = nx.Graph()
    for i, kind in enumerate(node_kinds):
        g.add_node(f"n{i}", **({} if kind is None else {"kind": kind}))
    for u, v, bw, lat, medium, has_latency in edges:
        attrs = {"bandwidth_bytes_per_s": bw, "medium": medium}
        if has_latency:
            attrs["latency_s"] = lat
        g.add_edge(f"n{u % len(node_kinds)}", f"n{v % len(node_kinds)}", **attrs)
    try:
        _check_attributes(g, "t")
        walk_passes = True
    except InputError:
        walk_passes = False
    if _attributes_pass(g):
        assert walk_passes
    elif walk_passes:  # only values of other types than int and float (or huge ints) go to the walk
        numbers = ("bandwidth_bytes_per_s", "latency_s")
        assert any(_unusual(d[k]) for _, _, d in g.edges(data=True) for k in numbers if k in d)


def _unusual(x: object) -> bool:
    return type(x) not in (int, float) or (type(x) is int and abs(x) > 2**1023)


def test_a_graph_of_plain_numbers_passes_the_column_checks():
    g = nx.Graph()
    g.add_node("a", kind="gpu")
    g.add_node("b", kind="switch")
    g.add_edge("a", "b", bandwidth_bytes_per_s=1e9, latency_s=0, medium="nvlink")
    assert _attributes_pass(g)
    g.edges["a", "b"]["latency_s"] = -1.0
    assert not _attributes_pass(g)
    with pytest.raises(InputError, match="latency"):
        _check_attributes(g, "t")


@settings(max_examples=200, deadline=None)
@given(
    gpus=st.lists(
        st.tuples(st.sampled_from(["n1", "n2", "n10", "n01", None]), st.sampled_from([0, 1, 2, None])),
        max_size=8,
    )
)
def test_server_major_is_the_sort_by_server_local_rank_and_name(gpus):
    g = nx.Graph()
    for i, (node, rank) in enumerate(gpus):
        attrs = (
            {"kind": "gpu"}
            | ({} if node is None else {"node": node})
            | ({} if rank is None else {"local_rank": rank})
        )
        g.add_node(f"g{(7 * i) % 11}x{i}", **attrs)
    data = g.nodes
    expected = sorted(
        g,
        key=lambda n: (natural_key(data[n].get("node", "")), data[n].get("local_rank", 0), natural_key(n)),
    )
    assert server_major(g, list(g)) == expected
