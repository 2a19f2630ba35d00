"""Replay a benchmark table through the simulator: the end-to-end check of a calibration.

One collective of each measured size runs, one after another, on a topology matching the
table (an NVSwitch server for one node, a rail-optimized Clos with one leaf group for
several), with the profile applied through the engine's calibration hook. The result says
how well the *simulator* (flows, fabric, calibration), not just the fitted curve,
reproduces the measurement.

A table measured by one benchmark thread driving several GPUs (`nGpus 8` in its header) is
held to that harness's floor: back-to-back calls take at least GPUs per thread x the host's
enqueue per GPU (`CollectiveParams.launch_floor_s`, under the profile's parameters).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simulator.calibration.apply import ProfileTuning, fitted_collective_params
from simulator.calibration.profile import CalibrationProfile
from simulator.calibration.table import BenchmarkTable
from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.collective_params import default_params
from simulator.network.design.clos import RailClosSpec, build_rail_clos
from simulator.network.design.scale_up import NVSwitchNodeSpec, build_nvswitch_node
from simulator.network.hardware import GPUSpec
from simulator.workload.program import Op, StepProgram

# compute never runs in a replay; the GPU spec only has to exist
_GPU = GPUSpec(
    name="replay", peak_flops_per_s={"bf16": 1e15}, hbm_bandwidth_bytes_per_s=3e12, hbm_capacity_bytes=8e10
)


def replay_cluster(n_gpus: int, n_nodes: int) -> Cluster:
    gpn = max(1, n_gpus // max(1, n_nodes))
    if n_nodes <= 1:
        return Cluster(build_nvswitch_node(NVSwitchNodeSpec(generator="nvswitch_node", gpus=gpn), _GPU), _GPU)
    spec = RailClosSpec(generator="rail_clos", nodes=n_nodes, gpus_per_node=gpn, servers_per_leaf=n_nodes)
    return Cluster(build_rail_clos(spec, _GPU), _GPU)


def replay(
    table: BenchmarkTable,
    profile: CalibrationProfile,
    fidelity: str = "flow",
    *,
    cluster: Cluster | None = None,
    half: str = "faster",
    tuning: ProfileTuning | None = None,
) -> pd.DataFrame:
    """Simulated vs measured time per size (columns size_bytes, measured_s, simulated_s, rel_error).

    Args:
        table: the measured table.
        profile: the calibration applied (a profile without entries: the uncalibrated model).
        fidelity: the engine's network fidelity.
        cluster: the cluster to run on (its first `table.n_gpus` GPUs); default
            `replay_cluster` (a generic NVSwitch server or rail-optimized Clos).
        half: which measured time to compare with (`BenchmarkTable.sizes`).
        tuning: the `ProfileTuning` to apply instead of a new one over `profile` (to read
            its `warnings` afterwards).
    """
    sizes = table.sizes(half)
    measured = sizes.set_index("size_bytes")["time_s"]
    measured = measured[measured.index > 0]
    cluster = cluster or replay_cluster(table.n_gpus, table.n_nodes)
    n = table.n_gpus
    ops: list[Op] = []
    prev: tuple[str, ...] = ()
    for i, size in enumerate(measured.index):
        op = Op(
            f"c{i}",
            "collective",
            tuple(range(n)),
            "comm",
            prev,
            collective=table.collective,
            group=tuple(range(n)),
            size_bytes=float(size),
        )
        ops.append(op)
        prev = (op.id,)
    tuning = tuning or ProfileTuning([(profile.name, profile)])
    params = fitted_collective_params(tuning, cluster)
    settings = StepSettings(fidelity=fidelity, collective_params=params)
    sim = StepSimulator(
        SimContext(0),
        cluster,
        StepProgram("replay", cluster.gpus[:n], ops),
        ComputeCost(cluster.gpu),
        settings,
        tuning,
    )
    sim.run(1)
    dur = {r.op_id: r.finished_at_s - r.started_at_s for r in sim.op_rows}
    floor_s = (params or default_params(cluster.gpu.name, cluster.topo.nic)).launch_floor_s(
        table.gpus_per_thread
    )
    simulated = np.maximum(np.array([dur[f"c{i}"] for i in range(len(measured))]), floor_s)
    out = pd.DataFrame(
        {
            "size_bytes": measured.index.to_numpy(dtype=float),
            "measured_s": measured.to_numpy(),
            "simulated_s": simulated,
        }
    )
    out["rel_error"] = out["simulated_s"] / out["measured_s"] - 1
    return out
