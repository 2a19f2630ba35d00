"""What a network transport leaves to the collective library across servers (NIC presets).

AWS's EFA plugin forces `NCCL_PROTO=simple` on p4d (no in-order 128-byte delivery on its
SENDRECV transport); Google requires `NCCL_ALGO=Ring` / `Ring,Tree`, `NCCL_PROTO=Simple` and
no NVLS for GPUDirect-TCPX / -TCPXO (sources: topologies/nics/sources.md). The selection
must then choose among those only for groups spanning servers, and leave one-node groups
alone.
"""

from __future__ import annotations

import pytest

from simulator.network.collective_params import default_params
from simulator.network.selection import GroupFacts, available, choose

SIZES = [2.0**k for k in range(3, 34, 2)]  # 8 B to 8 GiB


def _facts(nodes: int) -> GroupFacts:
    return GroupFacts(
        n_ranks=8 * nodes, n_nodes=nodes, ppn=8, intra_link="nvlink", intra_bytes_per_s=450e9,
        nic_bytes_per_s=25e9, nvswitch=True, in_network_reduction=False,
    )  # fmt: skip


def test_presets_carry_the_transport_limits() -> None:
    p4d = default_params("A100 SXM4 80GB", "efa-p4d")
    assert p4d.net_protocols == ("simple",) and p4d.net_algorithms is None
    tcpx = default_params("H100 SXM5 80GB", "gcp-tcpx")
    assert tcpx.net_protocols == ("simple",) and tcpx.net_algorithms == ("ring",)
    p5 = default_params("H100 SXM5 80GB", "efa-p5")
    assert p5.net_protocols is None and p5.net_algorithms is None  # RDMA transport: LL, LL128 kept


@pytest.mark.parametrize(
    ("gpu", "nic", "algorithms"),
    [
        ("A100 SXM4 80GB", "efa-p4d", {"ring", "tree"}),
        ("H100 SXM5 80GB", "gcp-tcpx", {"ring"}),
        ("H100 SXM5 80GB", "gcp-tcpxo", {"ring", "tree"}),
    ],
)
def test_across_servers_only_what_the_transport_leaves(gpu: str, nic: str, algorithms: set[str]) -> None:
    params = default_params(gpu, nic)
    two = _facts(2)
    assert {p for _, p in available("all_reduce", two, params)} == {"simple"}
    assert {a for a, _ in available("all_reduce", two, params)} == algorithms
    chosen = {(c.algorithm, c.protocol) for c in (choose("all_reduce", two, params, s) for s in SIZES)}
    assert {p for _, p in chosen} == {"simple"} and {a for a, _ in chosen} <= algorithms
    # the same library without the preset picks LL for small sizes and NVLS / NVLSTree where it has them
    free = {choose("all_reduce", two, default_params(gpu), s).protocol for s in SIZES}
    assert "ll" in free


def test_one_node_groups_keep_every_protocol() -> None:
    params = default_params("H100 SXM5 80GB", "gcp-tcpxo")
    one = _facts(1)
    chosen = {choose("all_reduce", one, params, s).protocol for s in SIZES}
    assert "ll" in chosen and "simple" in chosen
    assert any(a == "nvls" for a, _ in available("all_reduce", one, params))
