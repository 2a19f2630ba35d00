"""Channel layouts of rings and chains: which GPU follows which, per channel.

What is modelled (the way NCCL and RCCL lay out their channels):

* one server on a full mesh (xGMI): n-1 edge-disjoint directed Hamiltonian rings of
  the complete graph, one per channel, so every GPU-to-GPU link carries one channel;
* several servers with G GPUs each (G even): G channels. Inside a server each channel
  follows a different directed Hamiltonian path; the G paths are Walecki's zigzag paths of
  the complete graph K_G and their reverses, so together they use every directed GPU pair
  of the server exactly once (on a mesh no link carries two channels; on a switch every
  GPU sends and receives once per channel). Every GPU starts one channel and ends one
  channel, so every NIC sends and receives. Servers alternate a path and its reverse, so a
  channel leaves a server on local GPU k and enters the next server on local GPU k: the
  hop stays on rail k of a rail-optimized fabric (on a full mesh with an even G);
* a switched server (NVSwitch) with several servers: rotations of the server's GPU list
  and their reverses (same link loads, fewer distinct GPU pairs to route), also entering
  and leaving every server on the same rail;
* any other shape: one rotation of the server's GPU list per channel.

What is simplified: with an odd number of servers the hop that closes the ring joins two
different local GPUs (routing decides how it crosses); with an odd G on a full mesh the
rotation layout is used, which shares links between channels; a one-server mesh of 4 or 6
GPUs has no n-1 disjoint rings (2 and 4 are used, each link carrying at most one channel).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache


def by_server(server_of: Callable[[str], str], gpus: list[str]) -> list[list[str]]:
    """`gpus` grouped by server, servers in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for gname in gpus:
        groups.setdefault(server_of(gname), []).append(gname)
    return list(groups.values())


#: node budget of the backtracking search for edge-disjoint rings (K_8: 151 nodes, K_16:
#: about 130,000); past it the most rings found so far are used
_RING_SEARCH_BUDGET = 300_000


@lru_cache(maxsize=64)
def disjoint_rings(n: int) -> list[list[int]]:
    """Edge-disjoint directed Hamiltonian cycles of the complete graph K_n, n-1 when they exist.

    A depth-first search over cycles through vertex 0 that backtracks into the previous
    cycle when the remaining pairs hold no further one (deterministic order). The complete
    directed graph splits into n-1 directed Hamiltonian cycles for every n except 4 and 6
    (Tillson, "A Hamiltonian decomposition of K*_2m, 2m >= 8", J. Combin. Theory B 29, 1980;
    Bermond and Faber 1976 for n = 4, Bermond, Germa and Sotteau 1979 for n = 6): there the
    most found within the search budget are used (2 for n = 4, 4 for n = 6). With 8 GPUs on a
    full xGMI mesh this gives 7 rings, every directed link carrying exactly one channel.
    """
    used: set[tuple[int, int]] = set()
    rings: list[list[int]] = []
    best: list[list[int]] = []
    budget = [_RING_SEARCH_BUDGET if n not in (4, 6) else 2_000]

    def cycles() -> Iterator[list[int]]:  # Hamiltonian cycles from 0 over unused directed pairs
        stack = [[0]]
        while stack and budget[0] > 0:
            budget[0] -= 1
            path = stack.pop()
            if len(path) == n:
                if (path[-1], 0) not in used:
                    yield path
                continue
            last = path[-1]
            stack.extend(
                [*path, nxt] for nxt in range(n - 1, -1, -1) if nxt not in path and (last, nxt) not in used
            )

    def search() -> bool:
        if len(rings) > len(best):
            best[:] = list(rings)
        if len(rings) == n - 1:
            return True
        for cyc in cycles():
            edges = [(cyc[i], cyc[(i + 1) % n]) for i in range(n)]
            used.update(edges)
            rings.append(cyc)
            if search():
                return True
            rings.pop()
            used.difference_update(edges)
        return False

    search()
    return [list(r) for r in best] or [list(range(n))]


def walecki_paths(n: int) -> list[list[int]]:
    """n directed Hamiltonian paths of K_n (n even) using every directed pair exactly once.

    Walecki's zigzag c, c+1, c-1, c+2, c-2, ..., c+n/2 (mod n) for c < n/2 are n/2
    edge-disjoint undirected Hamiltonian paths covering K_n; each is taken forwards (channel
    c) and backwards (channel c + n/2).
    """
    half = n // 2
    fwd = []
    for c in range(half):
        path = [c]
        for k in range(1, n):
            step = (k + 1) // 2 if k % 2 else -(k // 2)
            path.append((c + step) % n)
        fwd.append(path)
    return fwd + [p[::-1] for p in fwd]


def multi_server_paths(g_local: int, mesh: bool = True) -> list[tuple[list[int], list[int]]]:
    """Per channel, the local path on even-numbered and on odd-numbered servers.

    A full mesh (and an even G) gets Walecki's paths, so no GPU-to-GPU link carries two
    channels. A switched server gets rotations c, c+1, ..., c-1 and their reverses: every
    GPU still starts and ends one channel and hops stay on their rail, with fewer distinct
    GPU pairs to route (each GPU's switch link carries every channel either way).
    """
    if mesh and g_local >= 2 and g_local % 2 == 0:
        return [(p, p[::-1]) for p in walecki_paths(g_local)]
    rot = [[(c + j) % g_local for j in range(g_local)] for c in range(g_local)]
    return [(r, r[::-1]) for r in rot]


def ring_orders(
    server_of: Callable[[str], str], is_mesh: Callable[[tuple[str, ...]], bool], gpus: list[str]
) -> list[list[str]]:
    """Channel orders of a ring over `gpus` (see the module docstring)."""
    servers = by_server(server_of, gpus)
    if len(servers) == 1:
        if is_mesh(tuple(gpus)):
            return [[gpus[i] for i in ring] for ring in disjoint_rings(len(gpus))]
        return [list(gpus)]
    per = len(servers[0])
    if any(len(s) != per for s in servers):
        return [list(gpus)]
    orders = []
    for even, odd in multi_server_paths(per, is_mesh(tuple(servers[0]))):
        order: list[str] = []
        for k, s in enumerate(servers):
            order.extend(s[j] for j in (odd if k % 2 else even))
        orders.append(order)
    return orders


def chain_paths(g_local: int, mesh: bool = True) -> list[list[int]]:
    """Per channel, the local chain of a tree (head first): disjoint paths on a mesh."""
    return [even for even, _ in multi_server_paths(g_local, mesh)]
