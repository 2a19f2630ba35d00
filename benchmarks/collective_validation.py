"""Leave-one-out validation of the collective model over every shipped sample.

For each nccl-tests / rccl-tests file in `topologies/calibration/samples/`:

1. fit a profile on the *other* files of the same system: the same GPU family (`a100`,
   `h100`, `mi300x`, `mi325x`, `mi355x`) measured on one node or on the left-out file's
   own system (same NIC and cloud): what a user calibrating one machine has; a profile
   holding another GPU's or network's figures would speak for the wrong hardware.
   `--scope family` fits on every file of the family, `--scope all` on every other file;
2. predict every table of the left-out file through the simulator (`replay`: one collective
   per measured size, one after another, on a topology of the file's system with the
   table's node count) with that profile, and with no profile (the uncalibrated model:
   default algorithm, catalog GPU and NIC specs);
3. score the out-of-place times: median and max |simulated / measured - 1| for sizes
   >= 1 MiB and < 1 MiB.

The fitting step is `FITTERS[name]`, a function (tables of the training files) -> profile,
chosen with `--fit NAME`: `joint` (the default: the collective model's physical parameters
fitted jointly over every training table, `simulator.calibration.joint`) or `curves` (one
line plus efficiency curve per table, as `clustersim calibrate` fitted before).

    python benchmarks/collective_validation.py            # prints, writes docs/collective-validation.md
    python benchmarks/collective_validation.py --no-write # prints only

Simplified: a table whose kind and scope no training file has is predicted uncalibrated
(said in the `note` column, as the run's calibration warning says it).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration.apply import ProfileTuning
from simulator.calibration.build import DEFAULT_SAMPLES
from simulator.calibration.fit import fit_table
from simulator.calibration.joint import (
    RUN_SPREAD_LOG,
    TABLE_WEIGHTS,
    FitOptions,
    fit_joint,
    make_sample,
    resized_cluster,
)
from simulator.calibration.parser import read_benchmark
from simulator.calibration.profile import CalibrationProfile, CollectiveParamsFit, build_profile
from simulator.calibration.replay import replay
from simulator.calibration.table import BenchmarkTable
from simulator.network.cluster import Cluster

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "collective-validation.md"
MIB = 2**20

#: the topology of each sample's system, by the first pattern its file name matches
SYSTEM_TOPOLOGY = (
    (r"^a100", "a100-p4de-efa-2n.yaml"),
    (r"^h100.*tcpxo", "h100-a3mega-tcpxo-2n.yaml"),
    (r"^h100.*tcpx", "h100-a3high-tcpx-2n.yaml"),
    (r"^h100", "h100-p5-efa-2n.yaml"),
    (r"^mi300x", "mi300x-zaya1-128n.yaml"),
    (r"^mi325x", "mi325x-thor2-2n.yaml"),
    (r"^mi355x", "mi355x-pollara-2n.yaml"),
)


def family(path: Path) -> str:
    """GPU family of a sample: the first token of its name (`mi300x-vf` counts as `mi300x`)."""
    return re.split(r"[-_]", path.name)[0]


def fit_curves(tables: list[BenchmarkTable]) -> CalibrationProfile:
    """Today's fit: one line plus efficiency curve per table, as `clustersim calibrate` writes."""
    return build_profile("leave-one-out", [fit_table(t) for t in tables])


def system_topology(name: str) -> Path:
    """The topology file of a sample's system, by its file name."""
    return ROOT / "topologies" / next(topo for pat, topo in SYSTEM_TOPOLOGY if re.search(pat, name))


def fit_joint_params(tables: list[BenchmarkTable], opts: FitOptions | None = None) -> CalibrationProfile:
    """The joint fit of physical parameters (`simulator.calibration.joint`, with `opts`), each
    table on its own system's topology; a profile with no block when no table is one the
    model prices."""
    samples = [make_sample(t, resized_cluster(system_topology(t.source), t.n_nodes)) for t in tables]
    try:
        fit = fit_joint(samples, opts)
    except ValueError:
        return CalibrationProfile(name="leave-one-out")
    block = CollectiveParamsFit(topology="(per table)", values=fit.values, at_bounds=fit.at_bounds,
                                table_errors=fit.table_errors)  # fmt: skip
    return CalibrationProfile(name="leave-one-out", collective_params=block)


FITTERS: dict[str, Callable[[list[BenchmarkTable]], CalibrationProfile]] = {
    "curves": fit_curves,
    "joint": fit_joint_params,
}


def system_cluster(path: Path, n_nodes: int) -> Cluster:
    """The topology of the sample's system, resized to `n_nodes` servers."""
    return resized_cluster(system_topology(path.name), n_nodes)


def in_scope(train: Path, left_out: Path, scope: str) -> bool:
    """Whether `train` may be fitted on when `left_out` is predicted (`--scope`)."""
    if scope == "all":
        return True
    if family(train) != family(left_out):
        return False
    if scope == "family":
        return True
    # system: the same GPU family, measured on one node or on the left-out file's system
    one_node = all(t.n_nodes == 1 for t in read_benchmark(train))
    return one_node or system_topology(train.name) == system_topology(left_out.name)


def _errors(res: pd.DataFrame) -> dict[str, float]:
    err = res["rel_error"].abs()
    big, small = err[res["size_bytes"] >= MIB], err[res["size_bytes"] < MIB]

    def stat(s: pd.Series, f: Callable[[np.ndarray], float]) -> float:
        return float(f(s.to_numpy())) if len(s) else float("nan")

    return {"med_ge": stat(big, np.median), "max_ge": stat(big, np.max),
            "med_lt": stat(small, np.median), "max_lt": stat(small, np.max)}  # fmt: skip


def validate(samples: Path, fit: str, scope: str, opts: FitOptions | None = None) -> pd.DataFrame:
    """One row per table of every sample: uncalibrated and leave-one-out calibrated errors
    (`opts`: the joint fit's objective)."""
    files = sorted(samples.glob("*.txt"))
    tables = {p: read_benchmark(p) for p in files}
    rows = []
    for path in files:
        train = [t for p in files if p != path and in_scope(p, path, scope) for t in tables[p]]
        fitter = FITTERS[fit]
        profile = CalibrationProfile(name="none")
        if train:
            profile = fit_joint_params(train, opts) if fitter is fit_joint_params else fitter(train)
        for table in tables[path]:
            cluster = system_cluster(path, table.n_nodes)
            uncal = replay(table, CalibrationProfile(name="none"), cluster=cluster, half="out_of_place")
            tuning = ProfileTuning([("leave-one-out fit", profile)])
            cal = replay(table, profile, cluster=cluster, half="out_of_place", tuning=tuning)
            if tuning.unmatched:
                note = "no training entry of this kind and scope: uncalibrated"
            else:
                note = "; ".join(re.sub(r" \(\d+ size.*", "", w.split(": ", 1)[1]) for w in tuning.warnings)
            rows.append({"table": table.label, "kind": table.collective, "gpus": table.n_gpus,
                         "nodes": table.n_nodes, "train_files": len({t.source for t in train}),
                         **{f"uncal_{k}": v for k, v in _errors(uncal).items()},
                         **{f"cal_{k}": v for k, v in _errors(cal).items()}, "note": note})  # fmt: skip
    return pd.DataFrame(rows)


def cross_scale(samples: Path, opts: FitOptions | None = None) -> pd.DataFrame:
    """Fit on one-node tables only, predict the multi-node ones: one row per multi-node table.

    For each multi-node table, the joint fit runs on every one-node table of its GPU family
    (never on a multi-node table), each on its own system's topology, and the table is
    replayed through the simulator with the fitted parameters on its own system.
    """
    files = sorted(samples.glob("*.txt"))
    tables = {p: read_benchmark(p) for p in files}
    rows = []
    for path in files:
        for table in (t for t in tables[path] if t.n_nodes > 1):
            train = [t for p in files if family(p) == family(path) for t in tables[p] if t.n_nodes == 1]
            profile = fit_joint_params(train, opts) if train else CalibrationProfile(name="none")
            cluster = system_cluster(path, table.n_nodes)
            tuning = ProfileTuning([("one-node fit", profile)])
            res = replay(table, profile, cluster=cluster, half="out_of_place", tuning=tuning)
            fitted = "" if profile.collective_params else "no one-node table to fit: uncalibrated"
            n_train = len({t.source for t in train})
            rows.append({"table": table.label, "kind": table.collective, "nodes": table.n_nodes,
                         "train_files": n_train, **_errors(res), "note": fitted})  # fmt: skip
    return pd.DataFrame(rows)


def run_spread(samples: Path) -> tuple[float, int, int]:
    """The run-to-run spread of repeated runs (`simulator.calibration.joint.RUN_SPREAD_LOG`).

    Every two tables of different files with the same collective and GPU count, measured on
    one node or on the same system (`system_topology`), are compared at the sizes both
    measured: log(out-of-place time of one / of the other).

    Returns:
        1.4826 x the median absolute deviation of those log ratios (a standard deviation
        were they normal, not inflated by the few runs that differ 2x), the number of sizes
        compared and the number of pairs of tables.
    """
    found = [(p, t) for p in sorted(samples.glob("*.txt")) for t in read_benchmark(p)]
    ratios: list[np.ndarray] = []
    for i, (pa, a) in enumerate(found):
        for pb, b in found[i + 1 :]:
            same = a.collective == b.collective and a.n_gpus == b.n_gpus and family(pa) == family(pb)
            if (
                pa == pb
                or not same
                or (a.n_nodes > 1 and system_topology(pa.name) != system_topology(pb.name))
            ):
                continue
            both = a.sizes("out_of_place").merge(b.sizes("out_of_place"), on="size_bytes")
            both = both[both["size_bytes"] > 0]
            if len(both):
                ratios.append(np.log(both["time_s_x"].to_numpy() / both["time_s_y"].to_numpy()))
    r = np.concatenate(ratios)
    return float(1.4826 * np.median(np.abs(r - np.median(r)))), len(r), len(ratios)


def in_run_spread(samples: Path) -> tuple[float, int]:
    """The spread of sizes within one run (`simulator.calibration.joint.IN_RUN_SPREAD_LOG`):
    1.4826 x the median absolute deviation of log(in-place / out-of-place time) over every
    size (> 0 B) of every table that printed both halves, and the number of sizes."""
    ratios: list[np.ndarray] = []
    for path in sorted(samples.glob("*.txt")):
        for t in read_benchmark(path):
            try:
                both = t.sizes("out_of_place").merge(t.sizes("in_place"), on="size_bytes")
            except ValueError:  # no in-place half
                continue
            both = both[(both["size_bytes"] > 0) & (both["time_s_x"] > 0) & (both["time_s_y"] > 0)]
            ratios.append(np.log(both["time_s_y"].to_numpy() / both["time_s_x"].to_numpy()))
    r = np.concatenate(ratios)
    return float(1.4826 * np.median(np.abs(r - np.median(r)))), len(r)


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.0f}%"


def markdown(
    df: pd.DataFrame, fit: str, scope: str, cross: pd.DataFrame | None = None, opts: FitOptions | None = None
) -> str:
    """The report: the per-table error table, the targets counted, the cross-scale table."""
    stats = [f"{c}_{k}" for c in ("uncal", "cal") for k in ("med_ge", "max_ge", "med_lt", "max_lt")]
    ranges = ("med ≥1MiB", "max ≥1MiB", "med <1MiB", "max <1MiB")
    titles = [f"{c}. {k}" for c in ("uncal", "cal") for k in ranges]
    lines = ["| table | kind | GPUs | nodes | " + " | ".join(titles) + " | note |", "|" + " --- |" * 13]
    for r in df.to_dict("records"):
        cells = [str(r[c]) for c in ("table", "kind", "gpus", "nodes")] + [_pct(r[c]) for c in stats]
        lines.append("| " + " | ".join([*cells, str(r["note"])]) + " |")
    multi = df[df["nodes"] > 1]
    ok_big = int((multi["cal_med_ge"] <= 0.10).sum())
    ok_small = int((multi["cal_med_lt"].fillna(0) <= 0.20).sum())
    ok_uncal = int((multi["uncal_med_ge"] <= 0.15).sum())
    worse = df[df["cal_med_ge"] > df["uncal_med_ge"]]
    bars = [
        f"- multi-node tables with calibrated median ≤ 10 % at ≥ 1 MiB: {ok_big} of {len(multi)}",
        f"- multi-node tables with calibrated median ≤ 20 % below 1 MiB (or no such sizes): "
        f"{ok_small} of {len(multi)}",
        f"- multi-node tables with uncalibrated median ≤ 15 % at ≥ 1 MiB: {ok_uncal} of {len(multi)}",
        f"- tables where calibration is worse than the uncalibrated model (median ≥ 1 MiB): {len(worse)} "
        f"of {len(df)}" + (f" ({', '.join(worse['table'])})" if len(worse) else ""),
    ]
    return "\n".join([
        "# Collective validation: leave-one-out over the shipped samples",
        "",
        "Generated by `python benchmarks/collective_validation.py` "
        f"(fit `{fit}`, training scope `{scope}`{_opts_text(opts)}); do not edit by hand.",
        "",
        "Each sample file in `topologies/calibration/samples/` is left out in turn; a profile is "
        "fitted on the other files in the training scope (`system`: the same GPU family, "
        "measured on one node or on the left-out file's own system) with the fitting step named "
        "above (`joint`: the collective model's physical parameters fitted jointly, "
        "`simulator.calibration.joint`; `curves`: one curve per table), and every table of the "
        "left-out file is predicted through the simulator "
        "(one collective per measured size on a topology of the file's system, "
        "`benchmarks/collective_validation.py` lists which), calibrated and uncalibrated. "
        "Errors are |simulated / measured - 1| of the out-of-place times; `-` where the table has "
        "no size in that range.",
        "",
        "## Targets: collectives that predict real runs they were not fitted on",
        "",
        *bars,
        "",
        "## Per table",
        "",
        *lines,
        "",
        *_cross_lines(cross),
        *_finding_lines(df),
        *LIMITS,
    ])  # fmt: skip


#: why a multi-node table the uncalibrated model misses by more than 15 % (median at >= 1 MiB)
#: misses it, by the table's name (its file, `#n` for the n-th table of a file; a key names
#: every table whose name starts with it): the system description checked against its
#: sources and the mechanisms checked
UNCALIBRATED_FINDINGS: dict[str, str] = {
    "h100-16gpu-2node-allgather-gcp-a3high-tcpx-dstack": (
        "Topology: 4 x 200 Gb/s GPU NICs per a3-highgpu-8g (`gcp-tcpx`, "
        "`topologies/nics/sources.md`), so a two-node ring all-gather is bound at 100 GB/s of bus "
        "bandwidth per node, which the model reaches at 8 GiB. Both runs were launched with the "
        "TCPX plugin's settings (google/nccl-plugin-gpudirecttcpx `scripts/run-nccl.sh`, which "
        "the dstack run calls; GoogleCloudPlatform/cluster-toolkit "
        "`examples/gke-a3-highgpu/nccl-config.yaml`: ring, Simple, 8 channels, 4 MiB buffers, "
        "`NCCL_P2P_PXN_LEVEL=0`, `NCCL_CROSS_NIC=0`, 4 sockets per connection), which the model "
        "follows: it runs ring / Simple, and neither the channel count nor PXN changes a ring's "
        "network load. Measured: a plateau of 50 GB/s (dstack) and 71 GB/s (GKE) of bus bandwidth "
        "from 128 MiB, 50 % and 71 % of the NIC bound, so the two runs of one system differ by "
        "1.4x and one NIC efficiency cannot meet both; and about 1 ms from 1 to 32 MiB (the "
        "model: 80-385 us). The plugin reports no latency and no rate of its own to NCCL "
        "(`props->latency = 0`, the speed read from the interface; "
        "google/nccl-plugin-gpudirecttcpx `src/net_tcpx.cc`), and it is an unpack device "
        "(`netDeviceType = DEV_UNPACK`): received data lands in the plugin's pages and NCCL's "
        "Simple primitives copy it into place (NVIDIA/nccl `src/device/prims_simple.h`, 2.19 and "
        "later), a per-message cost of the TCPX receive path for which no figure is published. "
        "Cause: the TCPX transport's per-message cost and achieved rate (not modelled, no "
        "figure); not the topology."
    ),
    "h100-16gpu-2node-allgather-gcp-a3high-tcpx-gke": (
        "The same system, settings and finding as the A3 High dstack run above; the two runs "
        "differ by 1.4x in bandwidth from 128 MiB (71 against 50 GB/s of bus bandwidth)."
    ),
    "h100-16gpu-2node-allgather-gcp-a3mega-tcpxo-gke": (
        "The dstack run of the same system is within 15 %. Topology: 8 x 200 Gb/s GPU NICs per "
        "a3-megagpu-8g (`gcp-tcpxo`); measured 189 GB/s of bus bandwidth at 8 GiB, 94 % of the "
        "NIC bound, so the rate is described (the model's time is 5.5 % short there). The misses are "
        "84-98 us below 128 KiB against the model's 70 us (15-28 us more per call, as if the "
        "one network step of a two-node ring all-gather took that much more than NCCL's "
        "InfiniBand constant of 14 us) and 1-64 MiB, where the model's time is 22-44 % short. "
        "The TCPXO plugin reports no latency "
        "(`props.latency = 0`, google/nccl-plugin-gpudirect-tcpxo "
        "`tcpdirect_plugin/fastrak_offload/nccl_shim.cc`) and is a host device (no unpack). "
        "Neither this page nor the all-reduce's shows its settings; the dstack run sources "
        "Google's environment profile, which sets at least 4 channels, 8 MiB buffers and a tuner "
        "plugin (`tcpxo_scripts/nccl-env-profile.sh` of the same repository), whose per-size "
        "table (`a3plus_tuner_config.textproto`) is installed with the plugin and not in its "
        "repository. Cause: the transport's per-message latency (no figure) and the tuner's "
        "per-size channel choice (not public); not the topology."
    ),
    "h100-16gpu-2node-allreduce-gcp-a3mega-tcpxo": (
        "The system and transport of the A3 Mega all-gather runs (`gcp-tcpxo`). The model runs "
        "tree / Simple at every size: 92 us "
        "below 16 KiB against 123 us measured, 1.4-3x too fast from 2 to 128 MiB, 4-8 % too slow "
        "from 512 MiB (339 GB/s of bus bandwidth measured at 8 GiB, above the ring's NIC bound of "
        "200, so a tree runs there, as modelled). From 4 to 16 MiB the measured time grows at 20 "
        "GB/s of algorithm bandwidth, a tenth of the NIC rate, and from 32 MiB at 166 GB/s: the "
        "mark of few channels below 32 MiB and many above, the tuner's choice that is not public. "
        "Cause: the tuner plugin's per-size choice and the transport's latency; not the topology."
    ),
    "h100-16gpu-2node-allreduce-aws-p5-efa-eks-excerpt": (
        "Topology: 32 x 100 Gb/s EFA per p5.48xlarge (`efa-p5`), the same as the first p5 run, "
        "which the model meets within 7.4 %; the two runs differ by 1.4-2.2x from 64 MiB to 1 GiB "
        "and agree at 2 GiB (9.20 against 9.07 ms). This run states its software (NCCL 2.18.5, "
        "aws-ofi-nccl 1.7.3, EFA installer 1.28.0: the README of "
        "aws-samples/awsome-distributed-training; the first run's is not printed), and what those "
        "versions do differently was checked in their sources: NCCL before 2.19 flushes every "
        "network receive on Hopper (`NCCL_NET_FORCE_FLUSH` default 1 in 2.18.5, 0 from 2.19; "
        "NVIDIA/nccl `src/graph/paths.cc`), which aws-ofi-nccl turns off from 1.8.0 and 1.7.3 "
        "does not (`src/platform-aws.c`); 1.7.3 leaves NVLS on for NCCL 2.18.5 (it disables it "
        "only below 2.18.5), so NVLSTree is available as modelled; the NVLSTree chunk of 2.18.5 "
        "starts larger than today's (NVIDIA/nccl `src/enqueue.cc`), which shortens the fill. A "
        "flush per received chunk would cost time in proportion to the size, but the excess over "
        "the first run is 0.4 ms at 64 MiB, 1.0-1.8 ms from 128 MiB to 1 GiB and 0.1 ms at 2 GiB, "
        "not proportional. Cause: not found; the run disagrees with the other run of its system "
        "in a way no version difference found explains."
    ),
    "mi355x-pollara400-1-2-4node-allreduce-alltoall-oci-largesizes-excerpt.txt#6": (
        "Topology: one Pollara 400 per MI355X (8 per node, `pollara-400`); the model's all-to-all "
        "is bound by the NIC (the 3/4 of each GPU's buffer that leaves the node, at 50 GB/s: "
        "128.8 ms at 8 GiB). Measured: 92 % of that bound on 2 nodes (93.0 ms against 85.9) and "
        "78 % on 4 nodes (165.8 ms against 128.8); the all-reduce runs of the same file, "
        "NIC-bound rings, lose only 3 % from 2 to 4 nodes. RCCL sends an all-to-all as "
        "point-to-point rounds ordered by node distance (NCCL's p2p schedule, `src/init.cc`), and "
        "spreads them over its channels by a rule that changes above two nodes (ROCm/rccl, commit "
        "0f9f75e2b2a719cb9411b5c0dd6de28a5f39851e, `src/include/channel.h`, "
        "`ncclP2pChannelBaseForRound`): on two nodes each round (peer) starts on a channel of "
        "its own, above two nodes the 8 rounds of one remote node share one channel base and run "
        "as one batch, 8 operations on each of its 2 channels per network peer (the default, "
        "`src/graph/paths.cc`, whose comment says channels with 8 or more operations lose 'a bit "
        "of bandwidth'); NVIDIA/nccl 2.26 batches them on any node count, later RCCL releases "
        "put the rule behind a p2p-batching switch. That is the one scale-dependent rule found, "
        "and it concentrates each remote node's traffic on fewer channels, but no per-channel "
        "rate of RCCL's point-to-point path is published to price it. "
        "The 2-node time equals the local exchange plus the remote one done after it (7.0 + 85.9 "
        "ms), but the same reading gives 132 ms on 4 nodes, not 166. Cause: not established; "
        "the likeliest is RCCL's channel rule above two nodes (not modelled: no figure), else the "
        "fabric (non-blocking in the model; the OCI cluster's is not stated)."
    ),
}

#: the section's opening paragraph
UNCALIBRATED_INTRO = (
    "Each multi-node table the uncalibrated model misses by more than 15 % (median, sizes >= "
    "1 MiB; `python benchmarks/collective_uncalibrated.py --verbose` prints every size), with "
    "the system description checked against its sources and the mechanisms checked. None of "
    "them is a misdescribed topology; none has a published figure for what is missing, so "
    "none is fixed here (a constant set to meet one file would be a fit, not a catalog "
    "figure)."
)


def _finding_lines(df: pd.DataFrame) -> list[str]:
    """The section on the uncalibrated misses: every multi-node table above 15 % (its median
    from `df`) with its finding, and any finding whose table no longer misses."""
    multi = df[df["nodes"] > 1]
    missed = multi[multi["uncal_med_ge"] > 0.15]
    out = ["## Uncalibrated misses, file by file", "", UNCALIBRATED_INTRO, ""]
    used: set[str] = set()
    for r in missed.to_dict("records"):
        key = next((k for k in UNCALIBRATED_FINDINGS if str(r["table"]).startswith(k)), None)
        text = "no finding recorded." if key is None else UNCALIBRATED_FINDINGS[key]
        used.update([key] if key else [])
        out.append(f"- `{r['table']}` ({r['kind']}, {r['nodes']} nodes; {_pct(r['uncal_med_ge'])}): {text}")
    for key in sorted(set(UNCALIBRATED_FINDINGS) - used):
        out.append(f"- `{key}`: now within 15 % uncalibrated; the finding kept: {UNCALIBRATED_FINDINGS[key]}")
    return [*out, ""]


#: what the joint fit cannot do, whatever the samples (see the per-table notes above)
LIMITS = [
    "## Known limits",
    "",
    "- All-to-all and send/recv are point-to-point: the library's tuning model does not price "
    "them, so the joint fit leaves them out. The all-to-all's one fitted field is the latency "
    "of an all-to-all call (`all_to_all_latency_us`, in place of the fabric's path latency of "
    "2-3 us), fitted on its tables' sizes below 1 MiB: 32 us from the MI355X one-node "
    "all-to-all predicts the two-node one (measured 35-45 us there) at 14 % below 1 MiB, 92 % "
    "uncalibrated. That one-node run was driven by one thread for 8 GPUs (`nGpus 8`), so its "
    "30-37 us hold the harness's floor of 24 us as well (fitted as latency, as the joint fit "
    "does with every such table); the two-node run, one process per GPU, has no such floor, "
    "so how much of the 32 us is the call's own latency is not known. The fitted value is "
    "applied to every all-to-all of the calibrated system, whatever its rank count, and to no "
    "send/recv: the shipped send/recv table starts at 128 MiB, and an all-to-all's latency "
    "(every rank's calls to every other) says nothing of one pipeline send. "
    "Point-to-point bandwidth is not fitted: from 1 MiB they run at the fabric's rate, "
    "calibrated or not (the one-node all-to-all runs: 16 % median error on MI355X, 44 % on "
    "A100). A system with no other all-to-all table below 1 MiB (the A100 all-to-all left "
    "out) keeps the path latency.",
    "- A file whose system has no other sample (the MI325X four-scale excerpt is the only MI325X "
    "file) has nothing to be fitted on when it is left out: calibrated = uncalibrated.",
    "- Runs of the same system that disagree with each other (the two AWS p5 EFA all-reduce "
    "runs differ by 2x at 128 MiB) cannot both be met by one set of physical parameters.",
    "- Tables of one collective predict another only through the shared parameters: the "
    "A3 Mega all-reduce is predicted from all-gather runs and one-node all-reduce.",
    "- Pipeline fill: the model times a tree / Simple, NVLS or NVLSTree all-reduce as NCCL "
    "pipelines it, `(depth - 1)` chunk times more than latency + size / bandwidth, with the "
    "chunk from NCCL's `calcCollChunking` (`simulator.network.selection`). That accounts for "
    "the excess of 50-150 us at 1 MiB growing to 300-800 us at 16-64 MiB on the p5 and p4de "
    "all-reduce and the one-node NVLS runs. The A3 Mega (TCPXO) all-reduce still takes 1.4-3x "
    "the model's time from 2 to 128 MiB, several times the modelled fill (a per-chunk cost of "
    "the transport is not modelled), and the second p5 run (`eks-excerpt`) is 1.4-2.2x "
    "slower than the first from 64 MiB to 1 GiB. AWS's EFA "
    "plugin ships a tuner that overrides NCCL's choice on p5 (tree/LL128 up to 30 MiB, then "
    "NVLSTree at 16 ranks: aws/aws-ofi-nccl `src/tuner/nccl_ofi_regions.cpp`), but releases "
    "skip it at two nodes or fewer, so the two-node samples run NCCL's own choice.",
    "- AWS's EFA plugin reports an internode latency to NCCL (75 us on p4d and p5 in recent "
    "releases, 35 us on p5en, 150 us before; aws/aws-ofi-nccl `src/platform-aws`), which NCCL "
    "adds to its network step latency when it chooses the algorithm. The model chooses on "
    "the library's estimate (`Choice.select_s`) apart from the time it runs, but does not "
    "carry the plugin's figure: on two nodes every algorithm NCCL prices crosses the network "
    "twice in its estimate (ring 2 (nodes - 1), tree and NVLSTree 2 log2(nodes)), so the "
    "figure shifts every estimate alike and changes no choice on the two-node samples.",
    "- Fit variants, each measured with this script (`--no-write` and the flag; the targets "
    "above counted the same way), none better than the default: a soft-L1 loss at the "
    "run-to-run spread of repeated runs of one system (`--robust`; 0.09 in log, which "
    "`--spread` measures on the samples): 11 of 17, 15 of 17, worse than uncalibrated on 5 "
    "(the A3 Mega all-reduce below 1 MiB 20 -> 17 %, the A100 GCM fixture no longer worse, "
    "but the p4de all-reduce 6 -> 7 % and the DGX H100 run 5 -> 6 % now are); each table "
    "weighing the same (`--table-weight table`) or each file (`--table-weight file`): 11 of "
    "17, 14 of 17, worse on 5 (the MI355X AAC14 all-reduce 9 -> 6 % and 4 %, the DGX H100 run "
    "5 -> 6 %). The first p5 EFA run stays at 15-16 % under every variant. A robust loss does "
    "what it should where the runs of a system outvote an odd one (two runs that agree and a "
    "third 2x slower from 64 MiB: 6 % off the two against 25 % by least squares, "
    "`tests/calibration/test_joint.py`), but the samples lack that majority: with the first "
    "p5 run left out, the second (`eks-excerpt`) is its system's only two-node run, so it "
    "alone sets the network fields (the Simple protocol's network overhead 586 us and LL128 "
    "efficiency 0.43, against 0 us and 1 by default) whatever the loss or the weights, and "
    "only the weak prior toward the library's constants opposes it.",
    "- Both spreads are measured over every sample, the file a fold leaves out included, so "
    "the `--robust` and `--shrink` figures of these bullets are not strictly held out (the "
    "default fit uses neither spread).",
    "- Shrinkage by evidence (`--shrink`: each sample file one run whose deviation from the "
    "model has the measured run-to-run spread, 0.09 in log, over a spread of 0.013 between "
    "the sizes of one run, both printed by `--spread`; the prior toward the library's "
    "constants at full weight; `simulator.calibration.joint.run_factors`): 11 of 17, 14 of "
    "17, worse than uncalibrated on 6 (the DGX H100 run 5 -> 15 %, the p5 batch run 4 -> "
    "9 %, the p4de all-reduce now just worse; the first p5 EFA run 16 -> 18 %). The measured "
    "spread is small against the odd runs' deviations (the second p5 run is 38 % off the "
    "model, 4 spreads), so weighed as one run it still outweighs a prior at the catalog's "
    "scales (an efficiency's 0.5 is a 60 % change of time: one run 15 % slow through the "
    "scale-up efficiency moves it 98 % of the way), and each run weighing the same lets it "
    "pull down the scale-up efficiency the one-node runs set (0.82 -> 0.75). Measured too, "
    "and not kept: the network fields (NIC efficiency, network latency, the Simple "
    "protocol's network overhead) fitted on the multi-node tables alone after the one-node "
    "tables set the rest (9 of 17, 15 of 17, worse on 6: the A3 Mega all-gather takes its "
    "protocol efficiencies from its two-node runs, 5 -> 13 %), the same with shrinkage (9, "
    "14, worse on 5), a Cauchy or soft-L1 loss on each run's whole deviation (H100 folds, "
    "the model's own time: the first p5 EFA run 11 -> 5 %, but the p5 batch run 3 -> 15 % "
    "and the DGX run 5 -> 8 % under Cauchy, every H100 fold worse under soft-L1), and the "
    "prior's weight (0.1, 1 or 3) chosen by leaving each training file out in turn inside "
    "the fold (the p5 EFA fold keeps 0.1; the DGX fold picks 3 and is predicted at 11 % "
    "against 5 % uncalibrated; the Azure VF fold picks 3: 22 -> 18 %, 8 % uncalibrated).",
    "- Single-process runs (`nGpus 8` in the run header: the A100 SuperBench fixtures, the "
    "Azure MI300X VF run, the MI355X Vultr one-node runs) are replayed with the floor their "
    "harness puts on back-to-back calls: 8 host enqueues of 3 us each "
    "(`CollectiveParams.launch_floor_s`, the catalog's per-launch cost). The joint fit does "
    "not apply it (see `simulator.calibration.joint`). The VF run's own floor is higher "
    "(46-55 us below 128 KiB, 65-69 us from 128 KiB to 4 MiB, while the bare-metal runs take "
    "13-53 us there), so a profile fitted on the bare-metal runs predicts it worse than the "
    "defaults.",
    "",
]


def _opts_text(opts: FitOptions | None) -> str:
    if opts is None or opts == FitOptions():
        return ""
    loss = "least squares" if opts.robust_scale_log is None else f"soft-L1 loss at {opts.robust_scale_log:g}"
    shrink = "" if opts.run_spread_log is None else f", shrinkage by runs at {opts.run_spread_log:g}"
    return f", {loss}, table weight `{opts.table_weight}`{shrink}"


def _cross_lines(cross: pd.DataFrame | None) -> list[str]:
    if cross is None or cross.empty:
        return []
    out = [
        "## Cross-scale: fitted on one node, predicting several",
        "",
        "The joint fit on every one-node table of the GPU family (each on its own system), "
        "replayed on each multi-node table's system.",
        "",
        "| table | kind | nodes | one-node files | med ≥1MiB | max ≥1MiB | med <1MiB | max <1MiB | note |",
        "|" + " --- |" * 9,
    ]
    for r in cross.to_dict("records"):
        cells = [str(r["table"]), str(r["kind"]), str(r["nodes"]), str(r["train_files"])]
        cells += [_pct(r[k]) for k in ("med_ge", "max_ge", "med_lt", "max_lt")]
        out.append("| " + " | ".join([*cells, str(r["note"])]) + " |")
    return [*out, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    parser.add_argument("--fit", choices=sorted(FITTERS), default="joint")
    parser.add_argument("--scope", choices=("system", "family", "all"), default="system")
    parser.add_argument(
        "--robust",
        action="store_true",
        help=f"joint fit with a soft-L1 loss at the run-to-run spread ({RUN_SPREAD_LOG} in log)",
    )
    parser.add_argument(
        "--table-weight",
        choices=TABLE_WEIGHTS,
        default="sizes",
        help="joint fit: what weighs the same (each size, table or file)",
    )
    parser.add_argument(
        "--shrink",
        action="store_true",
        help=f"joint fit: each file one run of spread {RUN_SPREAD_LOG} (log), the prior at full weight",
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave the doc alone")
    parser.add_argument(
        "--spread", action="store_true", help="print the run-to-run spread of the samples only"
    )
    args = parser.parse_args()
    if args.spread:
        spread, n_sizes, n_pairs = run_spread(args.samples)
        print(f"run-to-run spread: {spread:.3f} (log; {n_sizes} sizes, {n_pairs} pairs of tables)")
        within, n_within = in_run_spread(args.samples)
        print(f"within one run (in-place / out-of-place): {within:.4f} (log; {n_within} sizes)")
        return
    opts = FitOptions(
        RUN_SPREAD_LOG if args.robust else None, args.table_weight, RUN_SPREAD_LOG if args.shrink else None
    )
    df = validate(args.samples, args.fit, args.scope, opts)
    cross = cross_scale(args.samples, opts) if args.fit == "joint" else None
    text = markdown(df, args.fit, args.scope, cross, opts)
    print(text)
    if not args.no_write and opts != FitOptions():
        print("fit variant: the doc is left alone (it records the default fit)")
    elif not args.no_write:
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
