"""NCCL-shaped algorithm and protocol selection: formulas, availability, size switches."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.errors import SimulationError
from simulator.metrics import frames as fr
from simulator.network.cluster import Cluster
from simulator.network.collective import parse_algorithm
from simulator.network.collective_params import default_params, generation_of, with_fitted
from simulator.network.design.clos import RailClosSpec, build_rail_clos
from simulator.network.hardware import GPUSpec
from simulator.network.selection import (
    GroupFacts,
    available,
    choose,
    latency_us,
    nvls_chunk_bytes,
    pipeline_depth,
    pipeline_fill_s,
    predict,
)
from simulator.scenario.spec import NetworkSettings
from simulator.workload.program import Op, StepProgram

H100 = default_params("H100 SXM5 80GB")
MI300X = default_params("AMD Instinct MI300X")


def _facts(n=8, nodes=1, nvswitch=True, link="nvlink", inr=False):
    return GroupFacts(
        n_ranks=n, n_nodes=nodes, ppn=n // nodes, intra_link=link, intra_bytes_per_s=450e9,
        nic_bytes_per_s=50e9, nvswitch=nvswitch, in_network_reduction=inr,
    )  # fmt: skip


def test_generation_from_gpu_name():
    assert generation_of("H100 SXM5 80GB") == ("nccl", "hopper")
    assert generation_of("A100 SXM4 80GB") == ("nccl", "ampere")
    assert generation_of("AMD Instinct MI355X") == ("rccl", "cdna")
    assert generation_of("B200") == ("nccl", "blackwell")


def test_ring_latency_one_node_is_base_plus_steps_times_hop():
    """NCCL tuning.cc: ring latency = base + nsteps x hwLat[NVLink]; LL: 6.6 + 14 x 0.6 us."""
    assert latency_us("all_reduce", "ring", "ll", _facts(), H100, 1024) == pytest.approx(6.6 + 14 * 0.6)


def test_ring_latency_two_nodes_mixes_intra_and_inter_steps():
    """Across nodes: (nsteps - nInter) intra steps at max(hwLat, netOverhead x 1.8 for LL) and
    nInter = 2(nNodes-1) network steps: LL128 on 16 ranks / 2 nodes = 14 + 28 x 1.9 + 2 x 4.0."""
    f = _facts(16, 2)
    assert latency_us("all_reduce", "ring", "ll128", f, H100, 1024) == pytest.approx(
        14.0 + 28 * 1.9 + 2 * 4.0
    )


def test_tree_latency_two_nodes():
    """Tree: base + 2((ppn-1) x intraLat + log2(nNodes) x interLat); Simple intra floor 3 x 1 us."""
    f = _facts(16, 2)
    assert latency_us("all_reduce", "tree", "simple", f, H100, 1024) == pytest.approx(
        8.4 + 2 * (7 * 4.0 + 14.0)
    )


def test_availability_follows_nccl_rules():
    assert {a for a, _ in available("broadcast", _facts(), H100)} == {"ring"}
    assert "nvls" in {a for a, _ in available("all_reduce", _facts(), H100)}
    assert "nvls_tree" in {a for a, _ in available("all_reduce", _facts(16, 2), H100)}
    assert "pat" in {a for a, _ in available("all_gather", _facts(4, 4), H100)}
    assert "pat" not in {a for a, _ in available("all_gather", _facts(16, 2), H100)}
    assert "collnet" not in {a for a, _ in available("all_reduce", _facts(16, 2), H100)}
    assert "collnet" in {a for a, _ in available("all_reduce", _facts(16, 2, inr=True), H100)}
    # RCCL: no NVLS, no PAT
    assert {a for a, _ in available("all_reduce", _facts(16, 2), MI300X)} == {"ring", "tree"}
    # NVLS and CollNet run Simple only; LL128 never over PCIe
    assert {p for a, p in available("all_reduce", _facts(), H100) if a == "nvls"} == {"simple"}
    assert "ll128" not in {p for _, p in available("all_reduce", _facts(link="pci", nvswitch=False), H100)}


def test_small_messages_take_ll_and_large_ones_simple():
    small = choose("all_reduce", _facts(), H100, 4096)
    large = choose("all_reduce", _facts(), H100, 2**30)
    assert small.protocol == "ll" and large.protocol == "simple"
    assert small.predicted_s < 30e-6


def test_choice_is_the_minimum_of_the_library_estimate():
    # the library chooses on its own estimate (latency + size / bw), not on the pipeline fill
    f = _facts(16, 2)
    for size in (2**12, 2**20, 2**28):
        best = choose("all_reduce", f, H100, size)
        estimates = [
            predict("all_reduce", a, p, f, H100, size).select_s for a, p in available("all_reduce", f, H100)
        ]
        assert best.select_s == min(estimates)
        assert best.predicted_s >= best.select_s


def test_nvls_tree_chunk_follows_nccl_rules():
    # NVIDIA/nccl src/enqueue.cc calcCollChunking, NVLS_TREE: 128 KiB, 64 KiB below
    # 4 x ops x 128 KiB, 32 KiB below 1 x ops x 64 KiB; ops = 16 channels x 8 heads = 128
    f = _facts(16, 2)
    assert nvls_chunk_bytes("nvls_tree", f, 16, 2**30) == 131072
    assert nvls_chunk_bytes("nvls_tree", f, 16, 32 * 2**20) == 65536
    assert nvls_chunk_bytes("nvls_tree", f, 16, 4 * 2**20) == 32768
    # from four nodes on the chunk is capped at 64 KiB
    assert nvls_chunk_bytes("nvls_tree", _facts(32, 4), 16, 2**30) == 65536


def test_pipeline_fill_is_depth_minus_one_chunks():
    # fill = (depth - 1) x chunk x ops / bw: NVLSTree on 2 nodes, depth 3 + 2 log2(2) = 5;
    # 1 GiB -> 128 KiB chunks, 128 concurrent ops
    f = _facts(16, 2)
    bw = 200e9
    assert pipeline_depth("nvls_tree", f) == 5
    fill = pipeline_fill_s("all_reduce", "nvls_tree", "simple", f, H100, 2**30, bw)
    assert fill == pytest.approx(4 * 131072 * 128 / bw, rel=1e-12)
    # rings have no fill; a message smaller than one chunk per op fills with what it has
    assert pipeline_fill_s("all_reduce", "ring", "simple", f, H100, 2**30, bw) == 0.0
    small = pipeline_fill_s("all_reduce", "nvls_tree", "simple", f, H100, 2**20, bw)
    assert small == pytest.approx(4 * 2**20 / bw, rel=1e-12)


def test_fill_grows_with_size_then_stays_flat():
    # the excess over latency + size / bw ramps with the chunk, then stops at its cap
    f = _facts(16, 2)
    excess = []
    for size in (2**20, 2**24, 2**27, 2**30, 2**32):
        c = predict("all_reduce", "nvls_tree", "simple", f, H100, size)
        excess.append(c.predicted_s - c.select_s)
    assert excess[0] < excess[1] < excess[2]
    assert excess[3] == pytest.approx(excess[4], rel=1e-9)


def test_fixed_algorithm_without_protocol_is_ideal():
    c = choose("all_reduce", _facts(), H100, 2**20, "ring", None)
    assert (c.algorithm, c.protocol, c.latency_s, c.efficiency) == ("ring", "ideal", None, 1.0)


def test_ring_ll128_efficiency_is_protocol_factor_times_link_efficiency():
    """Ring LL128: min(0.92 x bw, nCh x 36.7 GB/s); bw = 450 GB/s x 20.6/25 (NCCL's NVLink rate)."""
    c = choose("all_reduce", _facts(), H100, 2**26, "ring", "ll128")
    assert c.efficiency == pytest.approx(0.92 * 20.6 / 25)


def test_parse_algorithm():
    assert parse_algorithm("all_reduce", "auto") == (None, None)
    assert parse_algorithm("all_reduce", "tree/ll") == ("tree", "ll")
    with pytest.raises(SimulationError, match="protocol"):
        parse_algorithm("all_reduce", "ring/fast")
    with pytest.raises(SimulationError, match="no 'tree'"):
        parse_algorithm("all_gather", "tree")


GPU = GPUSpec(
    name="H100 SXM5 80GB",
    peak_flops_per_s={"bf16": 1e15},
    hbm_bandwidth_bytes_per_s=3e12,
    hbm_capacity_bytes=8e10,
)


def _run(cluster, algorithm, size, params=None):
    n = len(cluster.gpus)
    op = Op("c", "collective", tuple(range(n)), "comm", collective="all_reduce", group=tuple(range(n)),
            size_bytes=size, algorithm=algorithm)  # fmt: skip
    sim = StepSimulator(SimContext(0), cluster, StepProgram("t", cluster.gpus, [op]), ComputeCost(GPU),
                        StepSettings(collective_params=params))  # fmt: skip
    sim.run(1)
    return sim


def _two_nodes():
    spec = RailClosSpec(generator="rail_clos", nodes=2, gpus_per_node=8, servers_per_leaf=2)
    return Cluster(build_rail_clos(spec, GPU), GPU)


def test_engine_runs_the_protocol_latency_and_efficiency():
    """A fixed ring/ll128 on 2 x 8 H100: T = NCCL latency + ring flows alone at efficiency e, so
    T - latency = (ideal ring time - ideal latency) / e (fluid model: exact up to rounding)."""
    c = _two_nodes()
    size = 2**28
    sim = _run(c, "ring/ll128", size)
    ideal = _run(c, "ring", size)
    plan = sim.prepare(sim.program.ops[0]).plan
    ideal_lat = sum(ph.latency_s for ph in ideal.prepare(ideal.program.ops[0]).phases)
    t, t0 = sim.step_rows[0].finished_at_s, ideal.step_rows[0].finished_at_s
    assert plan.protocol == "ll128" and plan.latency_s is not None
    assert t - plan.latency_s == pytest.approx((t0 - ideal_lat) / plan.efficiency, rel=1e-9)


def test_every_row_says_algorithm_and_protocol():
    sim = _run(_two_nodes(), None, 2**30)
    ops = fr.ops_frame(sim.op_rows, sim.program.rank_gpus, {})
    assert set(ops["protocol"]) == {"simple"}
    assert set(ops["algorithm"]) <= {"ring", "tree", "nvls_tree"}


def test_params_are_one_object_the_engine_uses():
    """A calibration can replace a field: halving NIC efficiency slows a NIC-bound 2-node ring."""
    c = _two_nodes()
    slow = dataclasses.replace(H100, nic_efficiency=0.5)
    t_fast = _run(c, "ring/simple", 2**30).step_rows[0].finished_at_s
    t_slow = _run(c, "ring/simple", 2**30, slow).step_rows[0].finished_at_s
    assert t_slow > 1.5 * t_fast


def test_scenario_network_algorithms_accept_auto_and_protocols():
    ok = NetworkSettings(algorithms={"all_reduce": "auto", "all_gather": "ring/ll128", "broadcast": "ring"})
    assert ok.algorithms["all_gather"] == "ring/ll128"
    assert NetworkSettings().algorithms == {}  # nothing given: every kind runs auto
    with pytest.raises(ValidationError, match="unknown protocol"):
        NetworkSettings(algorithms={"all_reduce": "ring/fast"})
    with pytest.raises(ValidationError, match="no 'nvls_tree'"):
        NetworkSettings(algorithms={"broadcast": "nvls_tree"})


def test_nic_preset_sets_the_network_step_latency_floor():
    # aws-ofi-nccl's tuner: 20 us per network step + 3 us completion overhead (topologies/nics/sources.md)
    efa = default_params("NVIDIA H100 80GB HBM3", "efa-p5")
    assert efa.net_latency_us == 23.0
    assert efa.hw_us("net", "ring", "ll") == 23.0
    assert efa.hw_us("net", "ring", "simple") == 23.0  # NCCL's 14 us is below the floor
    # InfiniBand: NCCL's own constants (tuning.cc hwLat[NET] ring LL 2.7 us)
    ib = default_params("NVIDIA H100 80GB HBM3", "connectx7-400g-ib")
    assert ib.hw_us("net", "ring", "ll") == 2.7


def test_fitted_fields_apply_to_latency_and_protocol_bandwidth():
    base = default_params("NVIDIA H100 80GB HBM3")
    p = with_fitted(base, {"ll_efficiency": 0.5, "latency_scale": 2.0, "launch_latency_us": 3.0})
    assert p.ring_factor["ll"] == base.ring_factor["ll"] * 0.5
    assert p.ring_factor["simple"] == base.ring_factor["simple"]
    assert p.tree_factor["ll128_one_node"] == base.tree_factor["ll128_one_node"]
    # base latency of ring/LL: NCCL's 6.6 us x 2 + 3 us
    assert p.base_us("ring", "ll") == pytest.approx(6.6 * 2 + 3.0)
    with pytest.raises(ValueError, match="unknown collective parameter"):
        with_fitted(base, {"magic": 1.0})


def test_all_to_all_latency_is_the_path_latency_unless_fitted_and_never_a_sends():
    f = _facts(16, 2)
    fitted = with_fitted(MI300X, {"all_to_all_latency_us": 32.5})
    for kind in ("all_to_all", "send_recv"):
        assert choose(kind, f, MI300X, 4096.0).latency_s is None  # the fabric's path latency
    assert choose("all_to_all", f, fitted, 4096.0).latency_s == pytest.approx(32.5e-6, rel=1e-12)
    # fitted on all-to-all tables only: a pipeline send keeps the path latency
    assert choose("send_recv", _facts(2, 2), fitted, 4096.0).latency_s is None
    assert choose("send_recv", f, fitted, 4096.0).latency_s is None
    # a group of one rank moves nothing: no latency either way
    one = dataclasses.replace(f, n_ranks=1, n_nodes=1, ppn=1)
    assert (
        choose("all_to_all", one, with_fitted(MI300X, {"all_to_all_latency_us": 32.5}), 4096.0).latency_s
        is None
    )
