"""Joint fit of the collective model's physical parameters over benchmark tables.

What is fitted: the fields of `simulator.network.collective_params.FITTED_FIELDS` (NIC and
scale-up efficiency, LL and LL128 protocol efficiency, the network step latency floor, a
per-step overhead on every link type and a per-call launch overhead), one value each for
every table given, one-node and multi-node together. They are physical or per-library
constants rather than curves of one scale, so a profile fitted on one node speaks for two
and more.

How: `scipy.optimize.least_squares` (trust-region reflective, within each field's physical
bounds) on the residuals log(predicted / measured) of every measured size of every table,
plus a weak prior toward the library's constants (`PRIOR_WEIGHT`),
where `predicted` is the selection's predicted time of the algorithm and protocol `auto`
picks (`simulator.network.selection.choose(...).predicted_s`). That is the engine's own
truth for a collective alone on its fabric: the engine runs the chosen algorithm's flows at
`efficiency` of their rate and waits the chosen latency, so the fitted profile reproduces
its samples when run (`replay`).

Each table needs its system: the topology it ran on (`resized_cluster` resizes a topology
file to the table's node count where its generator counts servers, and takes a one-server
topology such as nvswitch_node or xgmi_mesh as it is; `check_fits` refuses a table whose
GPUs and servers the topology does not hold); its `GroupFacts` and the library defaults for
its GPU and NIC preset (`default_params`) are read from there.

Residuals are weighted so that each table's sizes below 1 MiB and from 1 MiB weigh the
same in total. Point-to-point tables (all-to-all, send/recv) are left out of that fit: the
library's tuning model does not price them and the engine moves them at the fabric's own
rate. The all-to-all tables' one field, the latency of an all-to-all call
(`all_to_all_latency_us`, in place of the fabric's path latency), is fitted apart on their
sizes below 1 MiB against the engine's own fabric time of each size
(`fit_all_to_all_latency`). Send/recv keeps the path latency: no shipped send/recv table
has a size below 1 MiB, and an all-to-all's latency (every rank's calls to every other)
says nothing of one pipeline send. Simplified: point-to-point bandwidth is
not fitted (no field stands for it). Times are out-of-place
(`BenchmarkTable.sizes("out_of_place")`).
A field that ends at one of its bounds is reported in `JointFit.at_bounds`.

Variants of the objective (`FitOptions`, `benchmarks/collective_validation.py --robust
--table-weight --shrink`): a soft-L1 loss at the measured run-to-run spread
(`RUN_SPREAD_LOG`), each table or each file weighing the same, and shrinkage by evidence
(each file one run of that spread, the prior at full weight: `run_factors`). None is the
default: left out in turn, the shipped samples are not predicted better with them
(docs/collective-validation.md, known limits). Simplified: one run that alone informs a
field (a system's only multi-node run decides its network fields) moves it whatever the
loss or weights; only the prior opposes it, and with the measured run-to-run spread as the
runs' spread the prior loses to a run 20-40 % off the model (a run that far off is 2-4
spreads out, so the fit takes it as the system's rather than the run's own).

Simplified: a table measured by one thread driving several GPUs (`nGpus 8`) is fitted
without the floor its harness puts on back-to-back calls (`CollectiveParams.launch_floor_s`,
which its replay applies): its small sizes are fitted as the collective's latency. Holding
them to the floor was tried: on the MI300X samples the Azure VF run's 128 KiB - 4 MiB times
(66 us, above its own smaller sizes' 46-55 us) then pull the fitted scale-up efficiency from
0.68 to 0.63, and the bare-metal runs, left out in turn, are predicted at 6-14 % (median
from 1 MiB) instead of 4-6 %.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from simulator.calibration.profile import CalibrationProfile, CollectiveParamsFit
from simulator.calibration.replay import replay
from simulator.calibration.table import BenchmarkTable
from simulator.config.loader import read_document
from simulator.errors import InputError
from simulator.network.cluster import Cluster
from simulator.network.collective_params import (
    FITTED_FIELDS,
    CollectiveParams,
    default_params,
    fitted_values,
    with_fitted,
)
from simulator.network.design.registry import GENERATORS
from simulator.network.selection import P2P_KINDS, GroupFacts, choose
from simulator.network.topology import load_topology

#: fitted apart, on the all-to-all tables alone (`fit_all_to_all_latency`)
A2A_FIELD = "all_to_all_latency_us"
NAMES = tuple(k for k in FITTED_FIELDS if k != A2A_FIELD)
MIB = 2**20
_LOW = np.array([FITTED_FIELDS[k][0] for k in NAMES])
_HIGH = np.array([FITTED_FIELDS[k][1] for k in NAMES])
# a weak prior toward the library's and the catalog's own values, so that a field the
# samples do not constrain (a table of large sizes only says nothing about LL's latency)
# stays near its default instead of drifting; in units of `PRIOR_SCALE` per field: the
# network step latency is a catalog figure (tight: 10 us), the Simple protocol's network
# overhead a software unknown (loose: 200 us), other latencies 20 us, factors 0.5
PRIOR_WEIGHT = 0.1
PRIOR_SCALE = {"net_latency_us": 10.0, "simple_net_overhead_us": 200.0, "step_latency_us": 20.0,
               "launch_latency_us": 20.0, A2A_FIELD: 20.0}  # fmt: skip
_PRIOR_SCALE = np.array([PRIOR_SCALE.get(k, 0.5) for k in NAMES])
#: run-to-run spread of repeated runs of one system, log units: 1.4826 x the median absolute
#: deviation of log(time of one run / time of another) over every size two sample files of
#: the same system, collective and GPU count share (234 sizes, 13 pairs of files in
#: `topologies/calibration/samples/`; `benchmarks/collective_validation.py` prints it). The
#: in-place and out-of-place halves of one run spread 7x less (0.013).
RUN_SPREAD_LOG = 0.09
#: spread of sizes within one run, log units: 1.4826 x the median absolute deviation of
#: log(in-place / out-of-place time) over every size of every sample table that printed both
#: halves (0.0132 over 665 sizes; `benchmarks/collective_validation.py --spread` prints it)
IN_RUN_SPREAD_LOG = 0.013
#: the latency an all-to-all table is replayed with to find its fabric time, us
_PROBE_US = 1000.0
#: how `FitOptions.table_weight` may share the total weight between tables
TABLE_WEIGHTS = ("sizes", "table", "file")


@dataclass(frozen=True)
class FitOptions:
    """Variants of the fit's objective (the defaults are the fit profiles are built with).

    Attributes:
        robust_scale_log: None for least squares; else a soft-L1 loss: a residual of |r|
            (log units) well above this scale counts like sqrt(2 scale |r|), not |r|.
        table_weight: how tables share the total weight: `sizes` (each size the same, each
            table's sizes below and from 1 MiB weighing the same), `table` (each table the
            same whatever its number of sizes), `file` (each sample file the same).
        run_spread_log: None for the weak prior (`PRIOR_WEIGHT`); else shrinkage by
            evidence (`run_factors`): each sample file counts as one run whose deviation
            from the model has this spread (log units), and the prior toward the library's
            constants is held at its full weight, so a field few runs inform stays near
            its default and one many runs inform follows them.
    """

    robust_scale_log: float | None = None
    table_weight: str = "sizes"
    run_spread_log: float | None = None


# starting latencies of the solver's runs (the best end wins), us
_START_LATENCIES_US = (0.0, 30.0)
# latencies move in microseconds, efficiencies in fractions: the solver's scale per field
_SCALE = np.array([10.0 if k.endswith("_us") else 0.1 for k in NAMES])


@dataclass(frozen=True)
class Sample:
    """One measured table on its system.

    Attributes:
        table: the measured table.
        facts: the table's GPU group on its topology.
        base: the library defaults for the system's GPU and NIC preset.
        sizes_bytes: measured sizes (> 0), bytes.
        measured_s: out-of-place time per size, s.
        fabric_s: all-to-all tables only: the engine's time per size without the
            call's latency (its flows on the fabric, one GPU per thread), s; else None.
    """

    table: BenchmarkTable
    facts: GroupFacts
    base: CollectiveParams
    sizes_bytes: np.ndarray
    measured_s: np.ndarray
    fabric_s: np.ndarray | None = None


@dataclass
class JointFit:
    """A joint fit: the fitted values and how well they reproduce every table.

    Attributes:
        values: fitted field -> value (names of `FITTED_FIELDS`).
        at_bounds: fields that ended on a physical bound (a clamp), with the bound.
        table_errors: table label -> median |predicted / measured - 1| over its sizes.
        skipped: labels of tables left out of the joint fit (point-to-point kinds, whose
            latency `fit_all_to_all_latency` fits apart).
    """

    values: dict[str, float]
    at_bounds: dict[str, float] = field(default_factory=dict)
    table_errors: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def resized_cluster(topology: Path, n_nodes: int) -> Cluster:
    """The topology file's system with `n_nodes` servers (one leaf group).

    Resized where its generator counts servers (`nodes`: rail_clos, superpod, ...); a
    topology that does not (a one-server generator such as nvswitch_node or xgmi_mesh, one
    sized by other parameters, or a graph file) is used as it is: `check_fits` then says
    whether a table's GPUs and servers are in it.
    """
    doc = read_document(topology)
    data = doc.data
    gen = GENERATORS.get(str(data.get("generator"))) if isinstance(data, dict) else None
    if isinstance(data, dict) and gen is not None and "nodes" in gen.spec.model_fields:
        data = dict(data)
        data["nodes"] = n_nodes
        for key in ("servers_per_leaf", "su_size"):
            if key in data or (data.get("generator") == "rail_clos" and key == "servers_per_leaf"):
                data[key] = n_nodes
    topo = load_topology(doc.path, doc.with_data(data))
    return Cluster(topo.graph, topo.gpu)


def check_fits(table: BenchmarkTable, cluster: Cluster, topology: Path) -> None:
    """Refuse a table whose GPUs are not in `cluster` as they were in the run: its first
    `table.n_gpus` GPUs must exist and span `table.n_nodes` servers.

    Raises:
        InputError: at the topology file's `generator` (or first) line.
    """
    gpus = list(cluster.gpus)
    spans = cluster.topo.facts(gpus[: table.n_gpus]).n_nodes if len(gpus) >= table.n_gpus else None
    if spans == table.n_nodes:
        return
    has = f"{len(gpus)} GPUs" + ("" if spans is None else f", the first {table.n_gpus} on {spans} server(s)")
    doc = read_document(topology)
    keyed = isinstance(doc.data, dict) and "generator" in doc.data
    raise InputError(
        f"{table.label} ran on {table.n_gpus} GPUs / {table.n_nodes} node(s), which this topology does "
        f"not hold ({has}); give the topology of the system the logs ran on",
        file=topology,
        line=doc.line_of(("generator",)) if keyed else 1,
        field="generator" if keyed else None,
    )


def make_sample(table: BenchmarkTable, cluster: Cluster) -> Sample:
    """The table on `cluster` (its first `table.n_gpus` GPUs), out-of-place times."""
    sizes = table.sizes("out_of_place")
    sizes = sizes[sizes["size_bytes"] > 0]
    facts = cluster.topo.facts(list(cluster.gpus[: table.n_gpus]))
    base = default_params(cluster.gpu.name, cluster.topo.nic)
    fabric = _fabric_s(table, cluster) if table.collective == "all_to_all" and len(sizes) else None
    return Sample(
        table, facts, base, sizes["size_bytes"].to_numpy(float), sizes["time_s"].to_numpy(float), fabric
    )


def _fabric_s(table: BenchmarkTable, cluster: Cluster) -> np.ndarray:
    """An all-to-all table's engine time per size less the call's latency: the table
    replayed (one GPU per thread, no harness floor) with a known latency `_PROBE_US`."""
    block = CollectiveParamsFit(topology="(probe)", values={A2A_FIELD: _PROBE_US})
    profile = CalibrationProfile(name="probe", collective_params=block)
    res = replay(replace(table, gpus_per_thread=1), profile, cluster=cluster, half="out_of_place")
    return res["simulated_s"].to_numpy(float) - _PROBE_US * 1e-6


def fit_all_to_all_latency(samples: list[Sample], x0_us: float) -> float | None:
    """The all-to-all call's latency (`CollectiveParams.all_to_all_latency_us`), us, fitted on
    the all-to-all tables' sizes below 1 MiB, where a call's time is mostly latency
    (larger sizes say how fast the fabric moves them, for which no fitted field of a
    point-to-point call stands: a latency fitted there would absorb a bandwidth miss).
    None: no such size.

    Least squares on log(predicted / measured), predicted = latency + fabric time, each
    table's sizes weighted as the joint fit weighs them, with the prior toward `x0_us`.
    """
    parts = []
    for s in samples:
        if s.fabric_s is None:
            continue
        keep = s.sizes_bytes < MIB
        if keep.any():
            parts.append((s.fabric_s[keep], s.measured_s[keep], _weights(s.sizes_bytes)[keep]))
    if not parts:
        return None
    lo, hi = FITTED_FIELDS[A2A_FIELD]

    def residuals(x: np.ndarray) -> np.ndarray:
        prior = PRIOR_WEIGHT * (x - x0_us) / PRIOR_SCALE[A2A_FIELD]
        return np.concatenate([prior, *(np.log((x[0] * 1e-6 + f) / m) * w for f, m, w in parts)])

    fit = least_squares(residuals, [min(max(x0_us, 10.0), hi)], bounds=([lo], [hi]), x_scale=[10.0])
    return float(f"{float(fit.x[0]):.6g}")


def predict_s(sample: Sample, params: CollectiveParams) -> np.ndarray:
    """The model's time per measured size under `params` (the `auto` choice), s."""
    kind = sample.table.collective
    return np.array([choose(kind, sample.facts, params, float(s)).predicted_s for s in sample.sizes_bytes])


def _values(x: np.ndarray) -> dict[str, float]:
    return {k: float(v) for k, v in zip(NAMES, x, strict=True)}


def _residuals(
    x: np.ndarray, samples: list[Sample], x0: np.ndarray, shares: list[float], opts: FitOptions
) -> np.ndarray:
    values = _values(x)
    prior_weight = PRIOR_WEIGHT if opts.run_spread_log is None else 1.0
    out = [prior_weight * (x - x0) / _PRIOR_SCALE]
    for s, share in zip(samples, shares, strict=True):
        pred = predict_s(s, with_fitted(s.base, values))
        r = _robust(np.log(np.maximum(pred, 1e-12) / s.measured_s), opts.robust_scale_log)
        out.append(r * _weights(s.sizes_bytes) * share)
    return np.concatenate(out)


def _robust(r: np.ndarray, scale: float | None) -> np.ndarray:
    """`r` (scale None) or the soft-L1 residual of the same sign: its square is the soft-L1
    loss `2 scale^2 (sqrt(1 + (r / scale)^2) - 1)`, scipy's `loss="soft_l1"` applied before
    the per-size weights, so the scale stays in log units whatever the weight."""
    if scale is None:
        return r
    return np.sign(r) * scale * np.sqrt(2.0 * (np.sqrt(1.0 + (r / scale) ** 2) - 1.0))


def table_shares(samples: list[Sample], table_weight: str) -> list[float]:
    """Per-table factor on the residuals (`FitOptions.table_weight`); the total weight (the
    number of sizes fitted) is kept, only its sharing changes.

    Raises:
        ValueError: an unknown `table_weight`.
    """
    if table_weight not in TABLE_WEIGHTS:
        raise ValueError(f"unknown table weight {table_weight!r}; expected one of {TABLE_WEIGHTS}")
    n = np.array([len(s.sizes_bytes) for s in samples], float)
    if table_weight == "sizes":
        return [1.0] * len(samples)
    if table_weight == "table":
        target = np.full(len(n), n.sum() / len(n))
    else:
        files = [s.table.source for s in samples]
        per_file = {f: float(n[np.array([g == f for g in files])].sum()) for f in dict.fromkeys(files)}
        target = np.array([n.sum() / len(per_file) * k / per_file[f] for k, f in zip(n, files, strict=True)])
    return [float(v) for v in np.sqrt(target / n)]


def run_factors(samples: list[Sample], run_spread_log: float | None) -> list[float]:
    """Per-table factor of shrinkage by evidence (`FitOptions.run_spread_log`; 1 when None).

    Each sample file is one run: its sizes share the run's own deviation (spread
    `run_spread_log`) on top of a size-to-size spread (`IN_RUN_SPREAD_LOG`). The mean of a
    run's `n` residuals then has the variance `IN_RUN_SPREAD_LOG^2 / n + run_spread_log^2`,
    so the run's residuals are scaled to carry that much evidence in total: the factor is
    `1 / sqrt(IN_RUN_SPREAD_LOG^2 + n run_spread_log^2)`, `n` the sizes of every table of
    the file fitted. Against the prior (each field's `PRIOR_SCALE` its standard deviation),
    a field `k` runs inform moves from its default by `k t^2 / (k t^2 + run_spread_log^2)`
    of what those runs alone would set, `t` the prior scale in the runs' log units.
    Simplified: every deviation of a run from the model counts as the run's own, the shape
    across sizes too (as the second AWS p5 run's 2x from 64 MiB is); the files are taken
    as independent runs.
    """
    if run_spread_log is None:
        return [1.0] * len(samples)
    sizes: dict[str, int] = {}
    for s in samples:
        sizes[s.table.source] = sizes.get(s.table.source, 0) + len(s.sizes_bytes)
    var = {f: IN_RUN_SPREAD_LOG**2 + n * run_spread_log**2 for f, n in sizes.items()}
    return [float(1.0 / np.sqrt(var[s.table.source])) for s in samples]


def _weights(sizes_bytes: np.ndarray) -> np.ndarray:
    """Per-size residual weights: each table's sizes below and from 1 MiB weigh the same in
    total (a table of 20 small sizes and 8 large ones does not fit mostly the latency)."""
    big = sizes_bytes >= MIB
    n_big, n_small = int(big.sum()), int((~big).sum())
    w = np.where(big, 1.0 / np.sqrt(max(n_big, 1)), 1.0 / np.sqrt(max(n_small, 1)))
    return w * np.sqrt(len(sizes_bytes) / (int(n_big > 0) + int(n_small > 0)))


def fit_joint(samples: list[Sample], opts: FitOptions | None = None) -> JointFit:
    """Fit `FITTED_FIELDS` jointly over every (non point-to-point) sample (module docstring).

    Args:
        samples: the tables, each on its system.
        opts: variants of the objective (None: `FitOptions()`, what profiles are built with).

    Raises:
        ValueError: no sample the model prices, or an unknown `opts.table_weight`.
    """
    opts = opts or FitOptions()
    used = [s for s in samples if s.table.collective not in P2P_KINDS and len(s.sizes_bytes)]
    skipped = [s.table.label for s in samples if all(s is not u for u in used)]  # by identity: arrays
    if not used:
        raise ValueError("no collective table the model prices (all-to-all and send/recv are not fitted)")
    start = fitted_values(used[0].base)
    x0 = np.clip([start[k] for k in NAMES], _LOW + 1e-9, _HIGH - 1e-9)
    runs_of = run_factors(used, opts.run_spread_log)
    shares = [a * b for a, b in zip(table_shares(used, opts.table_weight), runs_of, strict=True)]
    is_latency = np.array([k.endswith("_us") for k in NAMES])
    starts = [np.where(is_latency, np.maximum(x0, lat), x0) for lat in _START_LATENCIES_US]
    # the Simple protocol's network overhead decides where the choice leaves Simple (NVLSTree,
    # ring) for LL / LL128 across nodes; no gradient crosses that switch, so one run starts
    # from a large overhead (half its prior scale)
    simple = x0.copy()
    simple[NAMES.index("simple_net_overhead_us")] = max(x0[NAMES.index("simple_net_overhead_us")], 100.0)
    runs = [  # a few starts: the cost is piecewise (an argmin over algorithm and protocol)
        least_squares(_residuals, x_start, bounds=(_LOW, _HIGH),
                      x_scale=_SCALE, diff_step=1e-3, args=(used, x0, shares, opts), max_nfev=200)
        for x_start in [*starts, simple]
    ]  # fmt: skip
    x = np.array(min(runs, key=lambda r: float(r.cost)).x)
    on_bound = {}
    for i, k in enumerate(NAMES):
        for b in (_LOW[i], _HIGH[i]):
            if abs(x[i] - b) <= 1e-6 * max(1.0, abs(b)):
                x[i] = b  # snap: the solver stops within its tolerance of an active bound
                on_bound[k] = float(b)
    values = {k: float(f"{v:.6g}") for k, v in _values(x).items()}
    a2a = fit_all_to_all_latency(samples, start[A2A_FIELD])
    if a2a is not None:
        for b in FITTED_FIELDS[A2A_FIELD]:
            if abs(a2a - b) <= 1e-6 * max(1.0, abs(b)):
                a2a = b  # snap, as above
                on_bound[A2A_FIELD] = b
        values[A2A_FIELD] = a2a
    return JointFit(values, on_bound, prediction_errors(samples, values), skipped)


def prediction_errors(samples: list[Sample], values: dict[str, float]) -> dict[str, float]:
    """Median |predicted / measured - 1| per table under fitted `values` (e.g. held-out tables);
    an all-to-all table only where `values` holds its latency (fitted below 1 MiB, scored
    on every size); a send/recv table never (its latency is not fitted)."""
    out = {}
    for s in samples:
        if not len(s.sizes_bytes):
            continue
        if s.table.collective in P2P_KINDS:
            if s.fabric_s is None or A2A_FIELD not in values:  # send/recv: fabric_s is None
                continue  # the engine's own path latency: not a fitted prediction
            pred = values[A2A_FIELD] * 1e-6 + s.fabric_s
        else:
            pred = predict_s(s, with_fitted(s.base, values))
        err = np.median(np.abs(pred / s.measured_s - 1))
        out[s.table.label] = float(f"{err:.4g}")
    return out
