"""How large a generated topology may be: GPUs, links and storage NICs, checked on the spec.

What is modelled: a generator builds every GPU, NIC, switch and link of its graph in memory
before anything else runs, so a typo (`nodes: 1000000000`) would grow the process by
gigabytes a second and never end. Each design's spec counts what its parameters ask for
and refuses more than these limits, naming the parameter, the count and the limit, so the
loader reports `file:line: field: message` before anything is built. Measured costs (one
core): a 131,072-GPU `rail_clos` is 525,000 links, 0.34 GB and 4 s; a 524,288-GPU one
1.4 GB and 44 s; a 2,096,128-link xGMI mesh 0.5 GB and 13 s.

What is simplified: the counts are the terms that grow with the parameters (GPUs; full
meshes, leaf-to-spine and dragonfly links, which grow faster than the GPUs), not an exact
count of every node and edge; the offending field is the largest factor of the count.
"""

from __future__ import annotations

from simulator.errors import FieldError

#: Most GPUs a generated topology may hold: 1,048,576 (2**20), 64 times the catalog's
#: largest (16,384 GPUs, `h100-rail-clos-2048n`) and several times the largest clusters
#: built so far. A GPU costs some 3-4 KB of graph and 30-80 µs to build (with its NIC,
#: links and share of the switches), so the limit is a graph of a few GB built in a minute
#: or two.
MAX_TOPOLOGY_GPUS = 2**20
#: Most links (graph edges) a generated topology may draw: 8,388,608 (2**23), eight per GPU
#: at `MAX_TOPOLOGY_GPUS` (a rail-optimized Clos draws about four). A link costs some
#: 250-600 bytes and 6 µs to build, so the limit is again a few GB and about a minute.
MAX_TOPOLOGY_LINKS = 2**23
#: Most storage NICs (servers × NICs each) a topology may attach: 65,536, some ten times
#: the storage servers of the largest training clusters described (Llama 3's Tectonic:
#: 7,500 servers); each is a node and two links like a GPU's NIC.
MAX_STORAGE_NICS = 2**16

_COST = {
    "GPUs": (MAX_TOPOLOGY_GPUS, "each GPU is some 3-4 KB of graph and 30-80 µs to build"),
    "links": (MAX_TOPOLOGY_LINKS, "each link is some 250-600 bytes of graph and 6 µs to build"),
    "storage NICs": (MAX_STORAGE_NICS, "each is a node and two links of graph"),
}


def check_count(noun: str, count: int, factors: dict[str, int]) -> None:
    """Refuse a topology that asks for more `noun` ("GPUs", "links", "storage NICs") than
    its limit allows.

    Args:
        noun: what is counted; one of the keys of `_COST`.
        count: how many the parameters ask for.
        factors: the parameters the count grows with, by field name (the largest is blamed).

    Raises:
        FieldError: on the largest factor, naming the count, the parameters and the limit.
    """
    limit, why = _COST[noun]
    if count <= limit:
        return
    field = max(factors, key=lambda k: factors[k])
    given = " (" + ", ".join(f"{k} {v:,}" for k, v in factors.items()) + ")" if len(factors) > 1 else ""
    raise FieldError(
        f"asks for {count:,} {noun}{given}; a generated topology has at most {limit:,} {noun} ({why})",
        field=field,
    )


def check_servers(
    nodes: int, gpus_per_node: int, mesh: bool = False, links: int = 0, factors: dict[str, int] | None = None
) -> None:
    """Refuse `nodes` servers of `gpus_per_node` GPUs past the GPU limit, or past the link
    limit once each server's NIC, PCIe and scale-up links (three per GPU), a full mesh of
    its GPUs (`mesh`, G(G-1)/2 links a server) and `links` more are counted.

    Args:
        factors: further parameters the extra `links` grow with (e.g. `spines`).

    Raises:
        FieldError: see `check_count`.
    """
    gpus = nodes * gpus_per_node
    named = {"nodes": nodes, "gpus_per_node": gpus_per_node}
    check_count("GPUs", gpus, named)
    mesh_links = nodes * (gpus_per_node * (gpus_per_node - 1) // 2) if mesh else 0
    check_count("links", 3 * gpus + mesh_links + links, {**named, **(factors or {})})
