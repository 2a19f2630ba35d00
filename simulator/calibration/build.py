"""Regenerate the committed profiles in `topologies/calibration/` from the shared samples.

    .venv/bin/python -m simulator.calibration.build                # defaults below
    .venv/bin/python -m simulator.calibration.build --samples ../shared/calibration/nccl-tests \
        --out topologies/calibration

Each profile is the same as running, from the repository root,
`clustersim calibrate SAMPLES/<file> ... -o topologies/calibration/<name>.yaml --name <name>`
with the files listed in `PROFILES` (no `--collective/--gpus/--nodes` is needed: every
sample says them in its header, section headings or file name). Profiles record file
names and sha256 checksums, never paths, so the output does not depend on where the
samples sit.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.calibration.fit import fit_table
from simulator.calibration.parser import read_benchmarks
from simulator.calibration.profile import CalibrationProfile, build_profile

REPO = Path(__file__).resolve().parents[2]
DEFAULT_SAMPLES = REPO.parent / "shared" / "calibration" / "nccl-tests"
DEFAULT_OUT = REPO / "topologies" / "calibration"

PROFILES: dict[str, tuple[str, list[str]]] = {
    "h100-nvswitch-efa": (
        "H100 SXM 80GB, one node over NVSwitch (DGX H100, AWS p5.48xlarge), two nodes of "
        "AWS p5.48xlarge over EFA (32 x 100G EFAv2 = 400 Gbps per GPU).",
        [
            "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt",
            "h100-8gpu-1node-allreduce-aws-p5-batch.txt",
            "h100-16gpu-2node-allreduce-aws-p5-efa.txt",
            "h100-16gpu-2node-allreduce-aws-p5-efa-eks-excerpt.txt",
        ],
    ),
    "h100-gcp-a3mega-tcpxo": (
        "H100 SXM 80GB on GCP A3 Mega: two nodes over GPUDirect-TCPXO (8 x 200G Ethernet); "
        "one-node entries from DGX H100 (same HGX H100 NVSwitch baseboard).",
        [
            "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt",
            "h100-16gpu-2node-allreduce-gcp-a3mega-tcpxo.txt",
            "h100-16gpu-2node-allgather-gcp-a3mega-tcpxo-gke.txt",
            "h100-16gpu-2node-allgather-gcp-a3mega-tcpxo-dstack.txt",
        ],
    ),
    "h100-gcp-a3high-tcpx": (
        "H100 SXM 80GB on GCP A3 High: two nodes over GPUDirect-TCPX (about 1 Tbps per node).",
        [
            "h100-16gpu-2node-allgather-gcp-a3high-tcpx-dstack.txt",
            "h100-16gpu-2node-allgather-gcp-a3high-tcpx-gke-partial.txt",
        ],
    ),
    "a100-nvswitch-efa": (
        "A100 SXM4, one node over NVSwitch (DGX/HGX A100 40GB: six collectives; 80GB "
        "all_reduce; send_recv), two nodes of AWS p4de.24xlarge over EFA (400 Gbps per node).",
        [
            "a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt",
            "a100-40gb-8gpu-1node-allgather-superbench-fixture.txt",
            "a100-40gb-8gpu-1node-reducescatter-superbench-fixture.txt",
            "a100-40gb-8gpu-1node-alltoall-superbench-fixture.txt",
            "a100-40gb-8gpu-1node-broadcast-superbench-fixture.txt",
            "a100-40gb-8gpu-1node-reduce-superbench-fixture.txt",
            "a100-80gb-8gpu-1node-allreduce-gcm-fixture.txt",
            "a100-8gpu-1node-sendrecv-partial.txt",
            "a100-80gb-16gpu-2node-allreduce-aws-p4de-efa.txt",
        ],
    ),
    "mi300x-xgmi": (
        "AMD Instinct MI300X, one node over the xGMI full mesh (RCCL; bare metal, one process "
        "per GPU; the HIP-graph run and an Azure ND MI300X v5 VM kept as extra entries).",
        [
            "mi300x-8gpu-1node-allreduce-rccl-amdblog.txt",
            "mi300x-8gpu-1node-allreduce-rccl.txt",
            "mi300x-8gpu-1node-allreduce-rccl-amdblog-graphmode.txt",
            "mi300x-vf-8gpu-1node-allreduce-rccl-azure-singleproc.txt",
        ],
    ),
    "mi325x-thor2-ring": (
        "AMD Instinct MI325X, 8 x Broadcom Thor2 RoCE NICs per node, NCCL_ALGO=Ring, "
        "all_reduce at 4-16 GiB on 1, 2, 4 and 8 nodes.",
        ["mi325x-1-2-4-8node-allreduce-rccl-ring-largesizes-excerpt.txt"],
    ),
    "mi355x-pollara400": (
        "AMD Instinct MI355X, one node over xGMI, several nodes over 8 x AMD Pensando "
        "Pollara 400 AI NICs per node (Vultr, AAC14 and OCI runs).",
        [
            "mi355x-8gpu-1node-allreduce-rccl-vultr.txt",
            "mi355x-8gpu-1node-alltoall-rccl-vultr.txt",
            "mi355x-16gpu-2node-allreduce-rccl-pollara400-aac14.txt",
            "mi355x-16gpu-2node-alltoall-rccl-pollara400-vultr.txt",
            "mi355x-pollara400-1-2-4node-allreduce-alltoall-oci-largesizes-excerpt.txt",
        ],
    ),
}


def build(name: str, samples: Path = DEFAULT_SAMPLES) -> CalibrationProfile:
    """Fit the profile `name` of `PROFILES` from the sample folder."""
    description, files = PROFILES[name]
    tables = read_benchmarks([samples / f for f in files])
    return build_profile(name, [fit_table(t) for t in tables], description=description)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("names", nargs="*", default=sorted(PROFILES))
    args = parser.parse_args(argv)
    from simulator.io import write_atomic

    for name in args.names:
        profile = build(name, args.samples)
        header = (
            f"# Generated by `python -m simulator.calibration.build {name}` from the samples in\n"
            "# ../shared/calibration/nccl-tests (see sources.md there). Do not edit by hand.\n"
        )
        write_atomic(args.out / f"{name}.yaml", header + profile.to_yaml())
        print(f"wrote {args.out / (name + '.yaml')}")


if __name__ == "__main__":
    main()
