"""Error of the uncalibrated collective model on every shipped nccl-tests / rccl-tests sample.

Each table of each sample in `topologies/calibration/samples/` runs on a topology built from
the system's catalog figures (GPU scale-up fabric and NIC rate, listed in `SYSTEMS` below
with where each figure comes from), with the scenario default for every collective
(`auto`: NCCL-shaped algorithm and protocol selection) and no calibration profile. A log
whose header says one thread drove several GPUs (`nGpus 8`) is held to that harness's
floor (`CollectiveParams.launch_floor_s`: GPUs per thread x the host's enqueue per GPU). One
collective of each measured size runs after another (flow fidelity). The table printed
gives, per file and table, the median and maximum |error| of the simulated time against
the measured out-of-place time, for sizes >= 1 MiB and below 1 MiB.

    .venv/bin/python benchmarks/collective_uncalibrated.py [--samples DIR]

Nothing is fitted here: every figure is a catalog value stated in `SYSTEMS`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.calibration.build import DEFAULT_SAMPLES
from simulator.calibration.parser import read_benchmark
from simulator.calibration.table import BenchmarkTable
from simulator.config.loader import load
from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSettings, StepSimulator
from simulator.network.cluster import Cluster
from simulator.network.collective_params import default_params
from simulator.network.design.clos import RailClosSpec, build_rail_clos
from simulator.network.hardware import GPUSpec
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20


@dataclass(frozen=True)
class System:
    """Catalog figures of one system: GPU file, scale-up fabric, NIC rate per GPU."""

    gpu_file: str
    scale_up: str  # nvswitch | xgmi_mesh
    scale_up_gbyte_per_s: float  # NVSwitch: per GPU per direction; xGMI: per link per direction
    nic_gbps: float  # scale-out rate per GPU, Gbit/s per direction
    medium: str
    nic: str | None = None  # NIC preset (topologies/nics/presets.yaml): its network step latency


# file-name prefix -> system; figures from the vendors' data sheets as quoted in
# topologies/gpus/*.yaml and in topologies/calibration/samples/sources.md
SYSTEMS: list[tuple[str, System]] = [
    # p4de: A100 NVLink 3 (300 GB/s per direction), 4 x 100G EFA = 400 Gbps per node
    ("a100-80gb-16gpu-2node", System("a100-80gb.yaml", "nvswitch", 300, 50, "ethernet", "efa-p4d")),
    ("a100", System("a100-80gb.yaml", "nvswitch", 300, 200, "ib", "connectx6-200g-hdr")),
    # GCP A3 High: 4 x 200G NICs for 8 GPUs (GPUDirect-TCPX)
    (
        "h100-16gpu-2node-allgather-gcp-a3high",
        System("h100-sxm.yaml", "nvswitch", 450, 100, "ethernet", "gcp-tcpx"),
    ),
    # GCP A3 Mega: 8 x 200G NICs (GPUDirect-TCPXO)
    (
        "h100-16gpu-2node-allgather-gcp-a3mega",
        System("h100-sxm.yaml", "nvswitch", 450, 200, "ethernet", "gcp-tcpxo"),
    ),
    (
        "h100-16gpu-2node-allreduce-gcp-a3mega",
        System("h100-sxm.yaml", "nvswitch", 450, 200, "ethernet", "gcp-tcpxo"),
    ),
    # AWS p5: 32 x 100G EFA = 3,200 Gbps per node, 400 per GPU
    ("h100", System("h100-sxm.yaml", "nvswitch", 450, 400, "ethernet", "efa-p5")),
    # MI300X / MI325X: 7 xGMI links of 64 GB/s per direction; MI325X with Thor2 400G RoCE
    ("mi300x", System("mi300x.yaml", "xgmi_mesh", 64, 400, "ethernet")),
    ("mi325x", System("mi300x.yaml", "xgmi_mesh", 64, 400, "ethernet", "thor2-400g")),
    # MI355X: 7 xGMI links of 76.8 GB/s per direction; Pollara 400 per GPU
    ("mi355x", System("mi355x.yaml", "xgmi_mesh", 76.8, 400, "ethernet", "pollara-400")),
]


def system_for(name: str) -> System:
    for prefix, system in SYSTEMS:
        if name.startswith(prefix):
            return system
    raise KeyError(f"no system for {name}")


def cluster_for(system: System, n_gpus: int, n_nodes: int) -> Cluster:
    gpu = load(GPUSpec, ROOT / "topologies" / "gpus" / system.gpu_file)
    gpn = max(1, n_gpus // max(1, n_nodes))
    spec = RailClosSpec(
        generator="rail_clos",
        nodes=max(1, n_nodes),
        gpus_per_node=gpn,
        scale_up=system.scale_up,  # type: ignore[arg-type]
        scale_up_gbyte_per_s=system.scale_up_gbyte_per_s,
        nic_gbps=system.nic_gbps,
        nic_medium=system.medium,  # type: ignore[arg-type]
        servers_per_leaf=max(1, n_nodes),
    )
    g = build_rail_clos(spec, gpu)
    g.graph["nic"] = system.nic  # as `load_topology` records a topology file's `nic:` preset
    return Cluster(g, gpu)


def simulate(table: BenchmarkTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Sizes, measured and simulated out-of-place times, and what ran per size."""
    rows = table.rows[(~table.rows["in_place"].astype(bool)) & (table.rows["size_bytes"] > 0)]
    measured = rows.groupby("size_bytes")["time_s"].min()
    cluster = cluster_for(system_for(table.source), table.n_gpus, table.n_nodes)
    n = table.n_gpus
    ops, prev = [], ()
    for i, size in enumerate(measured.index):
        op = Op(
            f"c{i}", "collective", tuple(range(n)), "comm", prev, collective=table.collective,
            group=tuple(range(n)), size_bytes=float(size),
        )  # fmt: skip
        ops.append(op)
        prev = (op.id,)
    sim = StepSimulator(
        SimContext(0), cluster, StepProgram("u", cluster.gpus[:n], ops), ComputeCost(cluster.gpu),
        StepSettings(record_links=False),
    )  # fmt: skip
    sim.run(1)
    rec = {r.op_id: r for r in sim.op_rows}
    # a benchmark thread driving several GPUs enqueues each call on them one after another
    floor_s = default_params(cluster.gpu.name, cluster.topo.nic).launch_floor_s(table.gpus_per_thread)
    simulated = np.maximum(
        [rec[f"c{i}"].finished_at_s - rec[f"c{i}"].started_at_s for i in range(len(measured))], floor_s
    )
    ran = [f"{rec[f'c{i}'].algorithm}/{getattr(rec[f'c{i}'], 'protocol', '-')}" for i in range(len(measured))]
    return measured.index.to_numpy(float), measured.to_numpy(), simulated, ran


def _stats(err: np.ndarray) -> str:
    if len(err) == 0:
        return f"{'-':>7} {'-':>7}"
    return f"{np.median(err):>7.1%} {err.max():>7.1%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    ap.add_argument("--verbose", action="store_true", help="print every size")
    args = ap.parse_args()
    head = f"{'file':<70} {'collective':<14} {'nodes':>5}"
    print(f"{head}  {'>=1MiB med':>7} {'max':>7}  {'<1MiB med':>7} {'max':>7}")
    for path in sorted(args.samples.glob("*.txt")):
        for table in read_benchmark(path):
            sizes, meas, sim, ran = simulate(table)
            err = np.abs(sim / meas - 1)
            big = sizes >= MIB
            section = f" [{table.section}]" if table.section else ""
            label = path.name[: 70 - len(section)] + section
            print(
                f"{label[:70]:<70} {table.collective:<14} {table.n_nodes:>5}  "
                f"{_stats(err[big])}  {_stats(err[~big])}"
            )
            if args.verbose:
                for s, m, t, r in zip(sizes, meas, sim, ran, strict=True):
                    print(f"    {s:>14.0f} {m * 1e6:>10.1f} us {t * 1e6:>10.1f} us {t / m - 1:>+7.1%} {r}")


if __name__ == "__main__":
    main()
