"""Conventions of a topology graph, and its validation.

A topology is an undirected `networkx.Graph`. Each edge is one full-duplex link: its
bandwidth is per direction, so the fabric turns every edge into two directed links.

Node attributes:
    kind: one of `gpu`, `nic`, `switch`, `host`, `storage`.
    node: (gpu, nic, host, in-node switches) name of the server that holds it; the GPUs of
        one server form its scale-up domain.
    local_rank: (gpu, nic) index within the server, 0..G-1.
    rail: (nic, optional) the rail (plane) the NIC is cabled to; routing prefers sending
        from a NIC on the destination's rail (as NCCL's PXN does).
    tier: (switch) 0 for switches inside a server (NVSwitch, PCIe switch), 1 for leaf/ToR
        or rail switches, 2 for spine, 3 for core.
    role: (switch, optional) free text such as `nvswitch`, `pcie`, `leaf`, `spine`.
    ports: (switch, optional) port count, for cost estimates.
    write_bandwidth_bytes_per_s, read_bandwidth_bytes_per_s: (storage) media bandwidth.

Edge attributes:
    bandwidth_bytes_per_s: per direction, > 0.
    latency_s: one-way propagation plus switching latency of the hop, >= 0.
    medium: one of `nvlink`, `xgmi`, `pcie`, `ib`, `ethernet`.

Graph attributes: `name`, and `gpu` (the `GPUSpec` of its GPUs) when a generator built it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from itertools import repeat

import networkx as nx
import numpy as np

from simulator.errors import InputError

NODE_KINDS = frozenset({"gpu", "nic", "switch", "host", "storage"})
MEDIA = frozenset({"nvlink", "xgmi", "pcie", "ib", "ethernet"})
SCALE_UP_MEDIA = frozenset({"nvlink", "xgmi", "pcie"})
SCALE_OUT_MEDIA = frozenset({"ib", "ethernet"})


@functools.lru_cache(maxsize=1 << 18, typed=True)
def natural_key(name: object) -> tuple:
    """Sort key that orders embedded numbers by value: n2 before n10 (memoised: the same
    node names are sorted many times while a cluster is built; node names are hashable, as
    networkx requires, which the memo relies on)."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(str(name)))


_DIGITS = re.compile(r"(\d+)")


def server_major(g: nx.Graph, names: Iterable[str]) -> list[str]:
    """GPUs of `g` by server (natural order of server names: n2 before n10), then local
    rank, then name."""
    return _server_major(names, g.nodes)


def _server_major(names: Iterable[str], data: Mapping[str, dict]) -> list[str]:
    """`names` sorted by (server, local rank, name), each by its natural key. When no two
    share a (server, local rank) key, as in any generated topology, the name never decides
    and is not keyed (a natural key per GPU name is most of the sort's cost)."""
    names = list(names)
    places = [(natural_key(data[n].get("node", "")), data[n].get("local_rank", 0)) for n in names]
    try:
        distinct = len(set(places)) == len(places)
    except TypeError:  # an unhashable local rank: key every name
        distinct = False
    if distinct:
        order = sorted(range(len(names)), key=places.__getitem__)
    else:
        keys = [(*place, natural_key(n)) for place, n in zip(places, names, strict=True)]
        order = sorted(range(len(names)), key=keys.__getitem__)
    return [names[i] for i in order]


def gpus(g: nx.Graph) -> list[str]:
    """GPU node names in a stable order: server (natural order), local rank, name."""
    data = {n: d for n, d in g.nodes(data=True) if d.get("kind") == "gpu"}
    return _server_major(data, data)


def edge_list(g: nx.Graph) -> list[tuple[str, str, dict]]:
    """`list(g.edges(data=True))` of an undirected graph, in the same order (each edge once,
    from the first of its ends in node order), read from the adjacency in one pass."""
    if type(g) is not nx.Graph:
        return list(g.edges(data=True))
    out: list[tuple[str, str, dict]] = []
    seen: set[str] = set()
    for n, nbrs in g.adjacency():
        out += [(n, nbr, d) for nbr, d in nbrs.items() if nbr not in seen]
        seen.add(n)
    return out


def validate_graph(g: nx.Graph, source: str = "topology") -> None:
    """Check the conventions above; raise one clear InputError for the first violation.

    Checks: node kinds and edge media are known, bandwidths positive, latencies
    non-negative, at least one GPU, and the graph connected (every GPU reachable). The
    attributes are checked a column at a time (`_attributes_pass`); only a graph that may
    fail is walked node by node and edge by edge, to name the first at fault.
    """
    if g.number_of_nodes() == 0:
        raise InputError("topology has no nodes", file=source)
    if not _attributes_pass(g):
        _check_attributes(g, source)
    if not any(d.get("kind") == "gpu" for _, d in g.nodes(data=True)):
        raise InputError("topology has no GPU (no node of kind 'gpu')", file=source)
    if not nx.is_connected(g):
        parts = sorted(nx.connected_components(g), key=len, reverse=True)
        main = parts[0]
        cut = sorted(str(n) for part in parts[1:] for n in part)
        example = ", ".join(cut[:3]) + (" ..." if len(cut) > 3 else "")
        raise InputError(
            f"topology is disconnected: {len(parts)} parts; {len(cut)} node(s) cannot reach "
            f"the largest part of {len(main)} nodes (e.g. {example})",
            file=source,
        )


_NUMBER_TYPES = frozenset({int, float})


def _attributes_pass(g: nx.Graph) -> bool:
    """Whether `_check_attributes` would pass, judged on columns (each edge's attributes are
    read from both ends). False when one might fail: a value of another type than int or
    float (bool, numpy scalars: the walk decides), or one out of range."""
    kinds = list(map(dict.get, dict(g.nodes(data=True)).values(), repeat("kind")))
    attrs = [d for _, nbrs in g.adjacency() for d in nbrs.values()]
    bandwidth = list(map(dict.get, attrs, repeat("bandwidth_bytes_per_s")))
    latency = list(map(dict.get, attrs, repeat("latency_s"), repeat(0.0)))
    try:
        if not set(kinds) <= NODE_KINDS or not set(map(dict.get, attrs, repeat("medium"))) <= MEDIA:
            return False
        if not set(map(type, bandwidth)) | set(map(type, latency)) <= _NUMBER_TYPES:
            return False
        # nan is not > 0 (refused) and not < 0 (accepted), as in the walk
        return bool((np.asarray(bandwidth, dtype=float) > 0).all()) and not bool(
            (np.asarray(latency, dtype=float) < 0).any()
        )
    except (TypeError, OverflowError):  # an unhashable kind or medium, a huge int
        return False


def _check_attributes(g: nx.Graph, source: str) -> None:
    """Raise an InputError for the first node with an unknown kind, else for the first edge
    (in edge order) with a bad bandwidth, latency or medium."""
    for n, d in g.nodes(data=True):
        kind = d.get("kind")
        if kind not in NODE_KINDS:
            raise InputError(
                f"node {n!r} has kind {kind!r}; expected one of {sorted(NODE_KINDS)}",
                file=source,
                field="nodes.kind",
            )
    for u, v, d in edge_list(g):
        bw = d.get("bandwidth_bytes_per_s")
        if not isinstance(bw, (int, float)) or not bw > 0:
            raise InputError(
                f"link {u!r}-{v!r} has bandwidth {bw!r}; expected a positive number of bytes/s",
                file=source,
                field="links.bandwidth_bytes_per_s",
            )
        lat = d.get("latency_s", 0.0)
        if not isinstance(lat, (int, float)) or lat < 0:
            raise InputError(
                f"link {u!r}-{v!r} has latency {lat!r}; expected seconds >= 0",
                file=source,
                field="links.latency_s",
            )
        medium = d.get("medium")
        if medium not in MEDIA:
            raise InputError(
                f"link {u!r}-{v!r} has medium {medium!r}; expected one of {sorted(MEDIA)}",
                file=source,
                field="links.medium",
            )
