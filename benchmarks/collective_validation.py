"""Leave-one-out validation of the collective model over every shipped sample.

For each nccl-tests / rccl-tests file in `topologies/calibration/samples/`:

1. fit a profile on all the *other* files of the same GPU family (`a100`, `h100`, `mi300x`,
   `mi325x`, `mi355x`: what a user calibrating one machine has; a profile holding another
   GPU's entries would speak for the wrong hardware); `--scope all` fits on every other file;
2. predict every table of the left-out file through the simulator (`replay`: one collective
   per measured size, one after another, on a topology of the file's system with the
   table's node count) with that profile, and with no profile (the uncalibrated model:
   default algorithm, catalog GPU and NIC specs);
3. score the out-of-place times: median and max |simulated / measured - 1| for sizes
   >= 1 MiB and < 1 MiB.

The fitting step is `FITTERS[name]`, a function (tables of the training files) -> profile;
today's is `fit_curves` (the per-table curves of `clustersim calibrate`). A joint fit of
physical parameters plugs in as another entry, chosen with `--fit NAME`.

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
from simulator.calibration.parser import read_benchmark
from simulator.calibration.profile import CalibrationProfile, build_profile
from simulator.calibration.replay import replay
from simulator.calibration.table import BenchmarkTable
from simulator.config.loader import read_document
from simulator.network.cluster import Cluster
from simulator.network.topology import load_topology

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


FITTERS: dict[str, Callable[[list[BenchmarkTable]], CalibrationProfile]] = {"curves": fit_curves}


def system_cluster(path: Path, n_nodes: int) -> Cluster:
    """The topology of the sample's system, resized to `n_nodes` servers."""
    name = next(topo for pat, topo in SYSTEM_TOPOLOGY if re.search(pat, path.name))
    doc = read_document(ROOT / "topologies" / name)
    data = dict(doc.data)
    data["nodes"] = n_nodes
    for key in ("servers_per_leaf", "su_size"):
        if key in data or data["generator"] == "rail_clos" and key == "servers_per_leaf":
            data[key] = n_nodes
    topo = load_topology(doc.path, doc.with_data(data))
    return Cluster(topo.graph, topo.gpu)


def _errors(res: pd.DataFrame) -> dict[str, float]:
    err = res["rel_error"].abs()
    big, small = err[res["size_bytes"] >= MIB], err[res["size_bytes"] < MIB]

    def stat(s: pd.Series, f: Callable[[np.ndarray], float]) -> float:
        return float(f(s.to_numpy())) if len(s) else float("nan")

    return {"med_ge": stat(big, np.median), "max_ge": stat(big, np.max),
            "med_lt": stat(small, np.median), "max_lt": stat(small, np.max)}  # fmt: skip


def validate(samples: Path, fit: str, scope: str) -> pd.DataFrame:
    """One row per table of every sample: uncalibrated and leave-one-out calibrated errors."""
    files = sorted(samples.glob("*.txt"))
    tables = {p: read_benchmark(p) for p in files}
    rows = []
    for path in files:
        train = [t for p in files if p != path and (scope == "all" or family(p) == family(path))
                 for t in tables[p]]  # fmt: skip
        profile = FITTERS[fit](train) if train else CalibrationProfile(name="none")
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


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.0f}%"


def markdown(df: pd.DataFrame, fit: str, scope: str) -> str:
    """The report: the per-table error table and the issue's bars, counted."""
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
        f"(fit `{fit}`, training scope `{scope}`); do not edit by hand.",
        "",
        "Each sample file in `topologies/calibration/samples/` is left out in turn; a profile is "
        "fitted on the other files of the same GPU family with `clustersim calibrate`'s fitting "
        "code, and every table of the left-out file is predicted through the simulator "
        "(one collective per measured size on a topology of the file's system, "
        "`benchmarks/collective_validation.py` lists which), calibrated and uncalibrated. "
        "Errors are |simulated / measured - 1| of the out-of-place times; `-` where the table has "
        "no size in that range.",
        "",
        "## Bars (issue: collectives that predict real runs they were not fitted on)",
        "",
        *bars,
        "",
        "## Per table",
        "",
        *lines,
        "",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    parser.add_argument("--fit", choices=sorted(FITTERS), default="curves")
    parser.add_argument("--scope", choices=("family", "all"), default="family")
    parser.add_argument("--no-write", action="store_true", help="print only; leave the doc alone")
    args = parser.parse_args()
    df = validate(args.samples, args.fit, args.scope)
    text = markdown(df, args.fit, args.scope)
    print(text)
    if not args.no_write:
        DOC.write_text(text)
        print(f"wrote {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
