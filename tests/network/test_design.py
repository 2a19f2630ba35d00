"""Structure of every design generator: node/link counts against their formulas."""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
import pytest

from simulator.errors import InputError
from simulator.network.design.clos import (
    FatTreeSpec,
    MI300XClusterSpec,
    MultiPlaneFatTreeSpec,
    RailClosSpec,
    RailOnlySpec,
    SuperPodSpec,
)
from simulator.network.design.direct import DragonflySpec, TorusSpec
from simulator.network.design.registry import DESIGN_SPECS, build_design
from simulator.network.design.scale_up import PCIeNodeSpec
from simulator.network.design.storage import StorageSpec
from simulator.network.graph import validate_graph


def kinds(g: nx.Graph) -> Counter[str]:
    return Counter(d["kind"] for _, d in g.nodes(data=True))


def switches_by_tier(g: nx.Graph) -> Counter[int]:
    return Counter(d["tier"] for _, d in g.nodes(data=True) if d["kind"] == "switch")


def media(g: nx.Graph) -> Counter[str]:
    return Counter(d["medium"] for _, _, d in g.edges(data=True))


@pytest.mark.parametrize("spec_cls", DESIGN_SPECS)
def test_every_default_design_follows_graph_conventions(spec_cls: type) -> None:
    g = build_design(spec_cls())
    validate_graph(g)
    for n, d in g.nodes(data=True):
        if d["kind"] in ("gpu", "nic"):
            assert "node" in d and "local_rank" in d, n
        if d["kind"] == "nic":
            assert "rail" in d, n
        if d["kind"] == "switch":
            assert d["tier"] in (0, 1, 2, 3) and d["ports"] > 0, n
    for u, v, d in g.edges(data=True):
        kinds_uv = {g.nodes[u]["kind"], g.nodes[v]["kind"]}
        if kinds_uv == {"gpu", "nic"}:
            assert d["medium"] == "pcie"
        tiers = {g.nodes[u].get("tier"), g.nodes[v].get("tier")} - {None}
        if kinds_uv == {"nic", "switch"} and tiers and min(tiers) >= 1:
            assert d["medium"] in ("ib", "ethernet")
    assert "bisection_bytes_per_s" in g.graph["structure"]


def test_fat_tree_counts() -> None:
    """k-ary fat-tree (Al-Fares 2008): k^3/4 hosts; 5k^2/4 switches = k^2/2 edge + k^2/2
    aggregation + k^2/4 core; 3k^3/4 switch links (host-edge, edge-agg, agg-core)."""
    for k in (4, 6, 8):
        g = build_design(FatTreeSpec(k=k))
        assert kinds(g)["gpu"] == k**3 // 4
        assert kinds(g)["nic"] == k**3 // 4
        assert kinds(g)["switch"] == 5 * k * k // 4
        assert switches_by_tier(g) == {1: k * k // 2, 2: k * k // 2, 3: k * k // 4}
        assert media(g)["ethernet"] == 3 * k**3 // 4
        assert all(d["ports"] == k for _, d in g.nodes(data=True) if d["kind"] == "switch")


def test_fat_tree_rejects_odd_k() -> None:
    with pytest.raises(ValueError):
        FatTreeSpec(k=5)


def test_superpod_two_tier_counts() -> None:
    """Rail-optimized Clos, N nodes x G GPUs, SU size s, radix R, oversubscription o:
    leaves L = ceil(N/s)*G, uplinks per leaf u = ceil(s/o), spines = ceil(L*u/R);
    GPUs = NICs = N*G, tier-0 NVSwitches = N."""
    N, G, s, R = 128, 8, 32, 64
    for o in (1, 2):
        g = build_design(SuperPodSpec(nodes=N, su_size=s, switch_radix=R, oversubscription=o))
        L = math.ceil(N / s) * G
        u = math.ceil(s / o)
        assert kinds(g)["gpu"] == N * G == kinds(g)["nic"]
        assert switches_by_tier(g) == {0: N, 1: L, 2: math.ceil(L * u / R)}
        leaf_up = sum(
            d["links"]
            for a, b, d in g.edges(data=True)
            if {g.nodes[a].get("tier"), g.nodes[b].get("tier")} == {1, 2}
        )
        assert leaf_up == L * u
        assert media(g)["nvlink"] == N * G


def test_superpod_16k_gpus_three_tiers() -> None:
    """2,048 nodes, 64-port switches: L = 512 leaves > R, so pods of R/2 = 32 leaves;
    16 pods x u = 32 spines = 512 spines; cores = u * ceil(pods/2) = 32 * 8 = 256."""
    g = build_design(SuperPodSpec(nodes=2048))
    assert kinds(g)["gpu"] == 16384
    assert switches_by_tier(g) == {0: 2048, 1: 512, 2: 512, 3: 256}
    assert max(d["ports"] for _, d in g.nodes(data=True) if d["kind"] == "switch") <= 64
    assert nx.is_connected(g)


def test_mi300x_cluster_counts() -> None:
    """N nodes x G MI300X on a full xGMI mesh: G(G-1)/2 xGMI links per node; one NIC per
    GPU; leaves = ceil(N/s)*G; spines = ceil(L*u/R)."""
    N, G = 128, 8
    g = build_design(MI300XClusterSpec())
    assert media(g)["xgmi"] == N * G * (G - 1) // 2
    assert kinds(g)["gpu"] == kinds(g)["nic"] == N * G
    L = math.ceil(N / 32) * G
    assert switches_by_tier(g) == {1: L, 2: math.ceil(L * 32 / 64)}
    degrees = {g.degree(f"n0.gpu{j}") for j in range(G)}
    assert degrees == {G - 1 + 1}  # 7 peers + its NIC


def test_rail_only_has_no_spine_and_rails_meet_only_in_servers() -> None:
    """Rail-only (Wang et al. 2023): G rail switches (tier 1), no tier >= 2; between NICs
    of different rails there is no path through scale-out switches alone."""
    g = build_design(RailOnlySpec(nodes=16))
    assert switches_by_tier(g) == {0: 16, 1: 8}
    fabric = g.subgraph(
        n for n, d in g.nodes(data=True) if d["kind"] == "nic" or (d["kind"] == "switch" and d["tier"] >= 1)
    )
    for comp in nx.connected_components(fabric):
        rails = {g.nodes[n]["rail"] for n in comp if g.nodes[n]["kind"] == "nic"}
        assert len(rails) == 1
    # ... while a cross-rail path exists through a server's NVSwitch
    assert nx.has_path(g, "n0.nic0", "n1.nic3")


def test_superpod_connects_rails_through_spines() -> None:
    g = build_design(SuperPodSpec(nodes=64))
    fabric = g.subgraph(
        n for n, d in g.nodes(data=True) if d["kind"] == "nic" or (d["kind"] == "switch" and d["tier"] >= 1)
    )
    assert nx.is_connected(fabric)


def test_multiplane_counts_and_plane_isolation() -> None:
    """G planes; per plane leaves = ceil(N/(R/2)), spines = ceil(leaves*(R/2)/R);
    NIC j of every node on plane j; planes share no switch."""
    N, G, R = 256, 8, 64
    g = build_design(MultiPlaneFatTreeSpec(nodes=N, switch_radix=R))
    leaves = math.ceil(N / (R // 2))
    assert switches_by_tier(g) == {0: N, 1: G * leaves, 2: G * math.ceil(leaves * (R // 2) / R)}
    fabric = g.subgraph(
        n for n, d in g.nodes(data=True) if d["kind"] == "nic" or (d["kind"] == "switch" and d["tier"] >= 1)
    )
    comps = list(nx.connected_components(fabric))
    assert len(comps) == G
    for comp in comps:
        assert len({g.nodes[n]["plane"] for n in comp if g.nodes[n]["kind"] == "switch"}) == 1


def test_multiplane_rejects_more_leaves_than_radix() -> None:
    with pytest.raises(InputError):
        build_design(MultiPlaneFatTreeSpec(nodes=2049, switch_radix=64))


def test_torus_counts() -> None:
    """Torus of N = prod(dims) GPUs, every dimension >= 3: D*N links (2 per GPU per dim,
    each shared by two GPUs); a dimension of 2 has one edge carrying 2 links per pair."""
    g = build_design(TorusSpec(dims=[4, 4, 4]))
    assert kinds(g) == {"gpu": 64}
    assert g.number_of_edges() == 3 * 64
    assert all(deg == 6 for _, deg in g.degree())
    g2 = build_design(TorusSpec(dims=[2, 6], gpus_per_node=2))
    assert g2.number_of_edges() == 6 + 12  # 6 pairs along dim 0, ring of 6 twice along dim 1
    assert sum(d["links"] for _, _, d in g2.edges(data=True)) == 2 * 12


def test_dragonfly_counts() -> None:
    """Dragonfly (Kim et al. 2008), g groups of a routers, p hosts and h global ports each:
    routers a*g, hosts a*p*g, local links g*a(a-1)/2, global cables C(g,2)*floor(a*h/(g-1))."""
    for a, p, h, groups in ((4, 2, 2, 9), (4, 2, 2, 5)):
        g = build_design(DragonflySpec(a=a, p=p, h=h, groups=groups))
        assert switches_by_tier(g) == {1: a * groups}
        assert kinds(g)["gpu"] == a * p * groups
        per_pair = (a * h) // (groups - 1)
        global_cables = sum(
            d["links"]
            for u, v, d in g.edges(data=True)
            if g.nodes[u]["kind"] == g.nodes[v]["kind"] == "switch"
            and g.nodes[u]["group"] != g.nodes[v]["group"]
        )
        local = sum(
            1
            for u, v, d in g.edges(data=True)
            if g.nodes[u]["kind"] == g.nodes[v]["kind"] == "switch"
            and g.nodes[u]["group"] == g.nodes[v]["group"]
        )
        assert global_cables == groups * (groups - 1) // 2 * per_pair
        assert local == groups * a * (a - 1) // 2


def test_dragonfly_rejects_too_many_groups() -> None:
    with pytest.raises(ValueError):
        DragonflySpec(a=2, h=1, groups=4)


def test_pcie_node_counts() -> None:
    """N servers x S PCIe switches x P GPUs: GPUs N*S*P, NICs and PCIe switches N*S,
    leaves ceil(N*S/(R/2)), spines ceil(leaves*(R/2)/R); NVLink bridges N*S*P/2."""
    N, S, P, R = 40, 2, 4, 40
    g = build_design(PCIeNodeSpec(nodes=N, pcie_switches=S, gpus_per_switch=P, nvlink_bridge_gbyte_per_s=300))
    assert kinds(g)["gpu"] == N * S * P
    assert kinds(g)["nic"] == N * S
    assert kinds(g)["host"] == N
    leaves = math.ceil(N * S / (R // 2))
    assert switches_by_tier(g) == {0: N * S, 1: leaves, 2: math.ceil(leaves * (R // 2) / R)}
    assert media(g)["nvlink"] == N * S * P // 2
    # GPU to NIC goes over PCIe through the PCIe switch
    assert nx.shortest_path(g, "n0.gpu0", "n0.nic0") == ["n0.gpu0", "n0.pcie0", "n0.nic0"]


@pytest.mark.parametrize("attach,tier", [("top", 2), ("leaf", 1)])
def test_storage_attaches_to_the_chosen_tier(attach: str, tier: int) -> None:
    stor = StorageSpec(
        nodes=3,
        nics_per_node=2,
        nic_gbps=200,
        write_gbyte_per_s=5,
        read_gbyte_per_s=10,
        attach=attach,
    )
    g = build_design(SuperPodSpec(nodes=64, storage=stor))
    assert kinds(g)["storage"] == 3
    assert g.nodes["stor0"]["write_bandwidth_bytes_per_s"] == 5e9
    for i in range(3):
        for j in range(2):
            nic = f"stor{i}.nic{j}"
            (sw,) = [n for n in g.adj[nic] if g.nodes[n]["kind"] == "switch"]
            assert g.nodes[sw]["tier"] == tier
            assert g.edges[nic, sw]["bandwidth_bytes_per_s"] == 200e9 / 8
    validate_graph(g)


@pytest.mark.parametrize("spec_cls", DESIGN_SPECS)
def test_storage_attaches_to_every_design(spec_cls: type) -> None:
    stor = StorageSpec(nodes=2, write_gbyte_per_s=5, read_gbyte_per_s=10)
    g = build_design(spec_cls(storage=stor))
    validate_graph(g)
    assert kinds(g)["storage"] == 2


def test_leaf_without_enough_ports_is_an_input_error() -> None:
    with pytest.raises(InputError, match="switch_radix"):
        build_design(SuperPodSpec(nodes=64, su_size=64, switch_radix=64))


def test_units_are_converted_to_si() -> None:
    g = build_design(SuperPodSpec(nodes=2, hop_latency_us=2))
    assert g.edges["n0.gpu0", "n0.nvsw"]["bandwidth_bytes_per_s"] == 450e9
    assert g.edges["n0.nic0", "leaf0.0"]["bandwidth_bytes_per_s"] == 50e9
    assert g.edges["n0.nic0", "leaf0.0"]["latency_s"] == pytest.approx(2e-6)


def test_a_rail_clos_ratio_that_leaves_no_bandwidth_is_refused() -> None:
    """`oversubscription: 1e300` passed every check and built spine links of 4e-289 B/s (a
    step of 1e297 ms, simulated): the spine link is held to the smallest bandwidth any file
    may give (`simulator.units.PHYSICAL_LIMITS`, 1e3 B/s), as the other generators' are by
    rounding their uplinks up at NIC speed."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        RailClosSpec(generator="rail_clos", nodes=2, servers_per_leaf=1, oversubscription=1e9)  # 400 B/s
    assert "leaves a spine link of 4e-07 Gbit/s, under the smallest bandwidth accepted" in str(err.value)
    assert err.value.errors()[0]["loc"] == ()  # the model's check; the loader names the key
    assert RailClosSpec(generator="rail_clos", nodes=2, servers_per_leaf=1, oversubscription=1e6).uplinks == 1
