"""Validation: published training throughputs against one simulated step of the same job.

Every row of `benchmarks/data/published_training.csv` (sources: `benchmarks/data/sources.md`)
is a training run someone published: the model, the GPUs, the layout the authors state and
the throughput they measured (MFU, TFLOP/s per GPU or tokens/s per GPU, as published). For
each row this script builds the scenario through the project's own files and APIs (a
workload file with the row's layout over the row's model, a scenario over the row's
topology, `simulator.scenario.prepare` / `execute`), simulates one step and prints the
published figure, the simulated one and the relative error. Rows that name a `scenario`
run that catalog scenario instead (its layout must equal the row's; the fast test checks).
Two columns carry framework behaviour into the layout: `attention` (the kernel of the
run's time: `unfused`, `flash2` or the GPU's best) and `main_grads` (gradients in the
weights' dtype, fp32 main gradients with fused accumulation, or fp32 accumulated by a
separate kernel; `docs/fidelity.md`). A third, `param_gather`, says whether the ZeRO-1/2
all-gather of the updated weights ends the step (`after_optimizer`) or is prefetched under
the next step's forward (`prefetched`: `overlap_param_gather`, only where the source says
so, e.g. MegaScale §3.2). A fourth, `grad_reduce`, says whether the data-parallel gradient
buckets are reduced as their layers' last backward ends (`overlapped`) or after the whole
backward (`after_backward`: `overlap_grad_reduce` false; DeepSpeed's pipeline engine, whose
schedule issues ReduceGrads after the last micro-batch; `deepspeed_bf16_pipeline`: the same
with DeepSpeed's BF16_Optimizer, which all-reduces the whole gradient under ZeRO-1,
`zero1_grad_collective: all_reduce`, after the tied embedding's all-reduce,
`tied_embedding_sync: before_dp`) or, under ZeRO-2, after every
micro-batch's backward (`per_micro_batch`: `zero2_reduce_per_micro_batch`; sharded
gradients, as Llama 3's FSDP). A fifth, `cp_comm`, says how
context parallelism exchanges K/V: `ring` (under the attention core) or `all_gather`
(before it, exposed: Llama 3's all-gather based CP). A sixth, `tp_overlap`, is the layout's
`tp_comm_overlap` (`megatron` where the source's configuration turns on Megatron's TP
communication overlap, e.g. NeMo's `ub_tp_comm_overlap`).

Fit and held-out rows are kept apart: rows marked `fit` may be used to fit global
constants (one per GPU and compute dtype, never one per row); `held_out` rows are only checked;
`extra` rows are shown for context and counted in neither. Median and max |error| are
reported for each split separately.

What the metrics mean (the publishers' definitions):
    mfu                   model FLOPs / (step time x GPUs x dense peak of the model dtype)
    model_tflops_per_gpu  model FLOPs / (step time x GPUs), TFLOP/s
    hw_tflops_per_gpu     FLOPs the simulator executes, recomputation included (the
                          Megatron-DeepSpeed counter counts them too), TFLOP/s per GPU
    tokens_per_s_per_gpu  tokens per step / (step time x GPUs)
Model FLOPs are the simulator's (PaLM App. B: 6 x matmul parameters + attention), which
equal Megatron's 72·B·s·l·h²·(1 + s/6h + V/12lh) for GPT shapes.

`--fit` fits the kernel model's one global compute constant on the fit rows: a multiplier
`m` in [0.3, 1] of the GPU file's achievable GEMM fraction (`gemm_peak_fraction`, or its
`gemm_peak_fraction_by_dtype` entry), one per family (GPU and compute dtype), by a bounded
scalar search of the median |log error|, then runs every row with the fitted values. `m` is
bounded by 1 because the GPU file's fraction is already the measured best a large GEMM
reaches (sustained at the power limit where that was measured: the GH100 and B200 files);
below 1 it stands for what the kernel model misses in a real run (clocks throttled under
power beyond the file's figure, kernels contending, a library picking worse tiles). A
family with one fit row is identified by that row alone: the fit reproduces it and checks
nothing, and the script says so.
Nothing is written to the GPU files: the fitted values are printed for whoever keeps them.

Rows marked `heavy` (today: DeepSeek-V3, whose 64 expert-parallel positions are all
simulated ranks) need many GB of memory and a long run; they are skipped unless `--all` is
given or they are named with `--rows`.

Usage:
    python benchmarks/step_validation.py [--rows ID,ID] [--split fit|held_out|extra]
        [--all] [--fit] [--markdown PATH] [--csv PATH]
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "published_training.csv"
SPLITS = ("fit", "held_out", "extra")
METRICS = ("mfu", "model_tflops_per_gpu", "hw_tflops_per_gpu", "tokens_per_s_per_gpu")
#: `main_grads` column -> the layout's (main_grads, grad_accumulation_fusion).
MAIN_GRADS = {"model": ("model", True), "fp32": ("fp32", True), "fp32_unfused": ("fp32", False)}
#: `param_gather` column -> the layout's overlap_param_gather.
PARAM_GATHER = {"after_optimizer": False, "prefetched": True}
#: `grad_reduce` column -> the layout's (overlap_grad_reduce, zero2_reduce_per_micro_batch,
#: zero1_grad_collective, tied_embedding_sync).
GRAD_REDUCE = {
    "overlapped": (True, False, "reduce_scatter", "after_dp"),
    "after_backward": (False, False, "reduce_scatter", "after_dp"),
    "deepspeed_bf16_pipeline": (False, False, "all_reduce", "before_dp"),
    "per_micro_batch": (True, True, "reduce_scatter", "after_dp"),
}
#: `cp_comm` column values (the layout's cp_comm; ignored at CP 1).
CP_COMM = ("ring", "all_gather")
#: `tp_overlap` column values (the layout's tp_comm_overlap).
TP_OVERLAP = ("none", "megatron", "t3")
LAYOUT_INT = ("tp", "pp", "dp", "cp", "ep", "mbs", "gbs", "zero")
REQUIRED = (
    *("id", "split", "source", "reference", "model", "dtype", "seq_len", "gpu", "gpus", "topology"),
    *("tp", "pp", "vp", "dp", "cp", "ep", "sp", "mbs", "gbs", "schedule"),
    *("first_stage_layers", "last_stage_layers", "recompute", "zero", "attention", "main_grads"),
    *("param_gather", "grad_reduce", "cp_comm", "tp_overlap"),
    "metric",
    *("published", "layout_basis", "scenario", "needs", "heavy", "notes"),
)
#: What `--fit` fits (one value per GPU and compute dtype): a multiplier of the GEMM fraction.
FIT_CONSTANT = "gemm_peak_fraction multiplier"
#: Bounds of the multiplier: 1 is the measured large-GEMM fraction itself (the physical best).
FIT_BOUNDS = (0.3, 1.0)


class RowError(ValueError):
    """A row of the validation table that is malformed."""


@dataclass
class Outcome:
    """What one row gave: the simulated figure, or why there is none."""

    row: dict[str, str]
    simulated: float | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    failure: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def published(self) -> float:
        return float(self.row["published"])

    @property
    def error(self) -> float | None:
        """(simulated - published) / published."""
        if self.simulated is None:
            return None
        return (self.simulated - self.published) / self.published


# ---- the table ------------------------------------------------------------------------------


def load_rows(path: Path = DATA) -> list[dict[str, str]]:
    """The rows of the validation table, checked column by column.

    Raises:
        RowError: naming the line and the column of the first bad value.
    """
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise RowError(f"{path}: missing columns {missing}")
        rows = list(reader)
    seen: set[str] = set()
    for i, row in enumerate(rows, start=2):
        where = f"{path}:{i}"
        if row["id"] in seen:
            raise RowError(f"{where}: id: duplicate {row['id']!r}")
        seen.add(row["id"])
        if row["split"] not in SPLITS:
            raise RowError(f"{where}: split: {row['split']!r} is not one of {SPLITS}")
        if row["metric"] not in METRICS:
            raise RowError(f"{where}: metric: {row['metric']!r} is not one of {METRICS}")
        for col in (*LAYOUT_INT, "gpus", "vp", "published"):
            try:
                value = float(row[col])
            except ValueError:
                raise RowError(f"{where}: {col}: {row[col]!r} is not a number") from None
            if value <= 0 and col != "zero":
                raise RowError(f"{where}: {col}: must be positive")
        if row["main_grads"] not in MAIN_GRADS:
            raise RowError(f"{where}: main_grads: {row['main_grads']!r} is not one of {tuple(MAIN_GRADS)}")
        if row["param_gather"] not in PARAM_GATHER:
            choices = tuple(PARAM_GATHER)
            raise RowError(f"{where}: param_gather: {row['param_gather']!r} is not one of {choices}")
        if row["grad_reduce"] not in GRAD_REDUCE:
            choices = tuple(GRAD_REDUCE)
            raise RowError(f"{where}: grad_reduce: {row['grad_reduce']!r} is not one of {choices}")
        if row["cp_comm"] not in CP_COMM:
            raise RowError(f"{where}: cp_comm: {row['cp_comm']!r} is not one of {CP_COMM}")
        if row["tp_overlap"] not in TP_OVERLAP:
            raise RowError(f"{where}: tp_overlap: {row['tp_overlap']!r} is not one of {TP_OVERLAP}")
        for col in ("sp", "heavy"):
            if row[col] not in ("true", "false"):
                raise RowError(f"{where}: {col}: {row[col]!r} is not true or false")
        world = int(row["dp"]) * int(row["tp"]) * int(row["pp"]) * int(row["cp"])
        if world != int(row["gpus"]):
            raise RowError(f"{where}: gpus: dp·tp·pp·cp = {world} but gpus = {row['gpus']}")
    return rows


def layout_of(row: dict[str, str]) -> dict[str, Any]:
    """The row's layout in the workload file's vocabulary (`LayoutSpec`)."""
    layout: dict[str, Any] = {
        "tp": int(row["tp"]),
        "sequence_parallel": row["sp"] == "true",
        "pp": int(row["pp"]),
        "pp_schedule": row["schedule"],
        "dp": int(row["dp"]),
        "cp": int(row["cp"]),
        "ep": int(row["ep"]),
        "zero_stage": int(row["zero"]),
        "micro_batch_size": int(row["mbs"]),
        "global_batch_size": int(row["gbs"]),
        "recompute": row["recompute"],
        "attention": attention_of(row),
        "main_grads": MAIN_GRADS[row["main_grads"]][0],
        "grad_accumulation_fusion": MAIN_GRADS[row["main_grads"]][1],
        "overlap_param_gather": PARAM_GATHER[row["param_gather"]],
        "overlap_grad_reduce": GRAD_REDUCE[row["grad_reduce"]][0],
        "zero2_reduce_per_micro_batch": GRAD_REDUCE[row["grad_reduce"]][1],
        "zero1_grad_collective": GRAD_REDUCE[row["grad_reduce"]][2],
        "tied_embedding_sync": GRAD_REDUCE[row["grad_reduce"]][3],
        "cp_comm": row["cp_comm"],
        "tp_comm_overlap": row["tp_overlap"],
    }
    if int(row["vp"]) > 1:
        layout["virtual_stages"] = int(row["vp"])
    for key in ("first_stage_layers", "last_stage_layers"):
        if row[key]:
            layout[key] = int(row[key])
    return layout


def attention_of(row: dict[str, str]) -> str:
    """The layout's attention kernel from the row's `attention` column: the kernels that
    write the s×s scores to HBM (Megatron-LM before FlashAttention: "scores in HBM") are
    `unfused`; a row naming FlashAttention-2 (the fused kernel of its time) is `flash2`;
    any other FlashAttention is `auto` (the GPU's best fused kernel)."""
    if "scores in HBM" in row["attention"]:
        return "unfused"
    return "flash2" if "FlashAttention-2" in row["attention"] else "auto"


def model_path(row: dict[str, str]) -> Path:
    return ROOT / "workloads" / "models" / f"{row['model']}.yaml"


def write_row_scenario(row: dict[str, str], folder: Path) -> Path:
    """Write the row's model (with its dtype / seq_len overrides), workload and scenario
    files into `folder`; return the scenario's path. A row naming a catalog scenario
    returns that file instead."""
    if row["scenario"]:
        return ROOT / row["scenario"]
    model = yaml.safe_load(model_path(row).read_text())
    if row["dtype"]:
        model["dtype"] = row["dtype"]
    if row["seq_len"]:
        model["seq_len"] = int(row["seq_len"])
    (folder / "model.yaml").write_text(yaml.safe_dump(model, sort_keys=False))
    workload = {
        "name": row["id"],
        "description": f"{row['source']}: {row['reference']}",
        "model": {"file": "model.yaml"},
        "layout": layout_of(row),
        "fidelity": {"representatives": True, "mirrors": "auto", "intra_node": "analytic"},
    }
    (folder / "workload.yaml").write_text(yaml.safe_dump(workload, sort_keys=False))
    scenario = {
        "name": f"validation-{row['id']}",
        "seed": 7,
        "topology": {"file": str(ROOT / "topologies" / f"{row['topology']}.yaml")},
        "workload": {"file": "workload.yaml"},
        "network": {"fidelity": "flow", "record_links": False},
        "run": {"steps": 1},
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    return path


# ---- simulating ----------------------------------------------------------------------------


def simulated_metric(summary: dict[str, Any], metric: str) -> float:
    """The row's metric from a run summary (see the module docstring)."""
    step_s = float(summary["step_time_s"])
    gpus = float(summary["gpus_in_job"])
    if metric == "mfu":
        return float(summary["mfu"])
    if metric == "model_tflops_per_gpu":
        return float(summary["tflops_per_gpu"])
    if metric == "hw_tflops_per_gpu":
        return float(summary["hardware_flops_per_step"]) / (step_s * gpus) / 1e12
    if metric == "tokens_per_s_per_gpu":
        return float(summary["tokens_per_s"]) / gpus
    raise RowError(f"unknown metric {metric!r}")


def prepare_row(row: dict[str, str], folder: Path) -> Any:
    """The prepared run of a row (loads and validates everything; simulates nothing)."""
    from simulator.scenario.prepare import prepare

    return prepare(write_row_scenario(row, folder))


def family(prep: Any) -> str:
    """The fit family of a prepared run: its GPU and the model's compute dtype."""
    return f"{prep.topology.gpu.name} {compute_dtype(prep)}"


def compute_dtype(prep: Any) -> str:
    """The model's compute dtype (what its GEMMs run in)."""
    return str(prep.program.meta.get("dtype", "bf16"))


def scaled_gpu(gpu: Any, dtype: str, multiplier: float) -> Any:
    """`gpu` with its achievable GEMM fraction for `dtype` multiplied by `multiplier`.

    Only `dtype`'s entry changes (written to `gemm_peak_fraction_by_dtype`), so ops the model
    keeps in another precision (attention and norms under FP8) keep their own fraction.
    """
    base = gpu.gemm_fraction(dtype)
    if base is None:
        raise RowError(f"GPU {gpu.name} has no gemm_peak_fraction for {dtype}; nothing to fit")
    by_dtype = {**gpu.gemm_peak_fraction_by_dtype, dtype: min(1.0, base * multiplier)}
    return gpu.model_copy(update={"gemm_peak_fraction_by_dtype": by_dtype})


def run_prepared(row: dict[str, str], prep: Any, constants: dict[str, float]) -> Outcome:
    """Simulate one step of a prepared row, with `constants` (family -> fitted value)."""
    from simulator.scenario.execute import execute

    gpu = prep.topology.gpu
    if family(prep) in constants:
        prep.topology.gpu = scaled_gpu(gpu, compute_dtype(prep), constants[family(prep)])
    t0 = time.perf_counter()
    try:
        res = execute(prep)
    finally:
        prep.topology.gpu = gpu
    s = res.summary
    out = Outcome(row, simulated_metric(s, row["metric"]), time.perf_counter() - t0)
    out.extra = {
        "step_time_s": s["step_time_s"],
        "mfu": s.get("mfu"),
        "exposed_comm_s": s.get("exposed_comm_s"),
        "idle_s": s.get("idle_s"),
    }
    return out


def run_rows(rows: list[dict[str, str]], constants: dict[str, float]) -> list[Outcome]:
    """Prepare and simulate every row; a row that cannot be built reports why."""
    from simulator.errors import InputError

    outcomes = []
    for row in rows:
        with tempfile.TemporaryDirectory(prefix="clustersim-validation-") as tmp:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                prep = prepare_row(row, Path(tmp))
                out = run_prepared(row, prep, constants)
            except InputError as exc:
                out = Outcome(row, failure=str(exc).splitlines()[0])
            out.wall_s, out.cpu_s = time.perf_counter() - t0, time.process_time() - c0
        print(_line(out), flush=True)
        outcomes.append(out)
    return outcomes


# ---- fitting -------------------------------------------------------------------------------


def _family_loss(value: float, name: str, members: list[tuple[dict[str, str], Any]]) -> float:
    """Median |log(simulated / published)| of a family's fit rows with its constant at `value`."""
    errs = []
    for row, prep in members:
        simulated = run_prepared(row, prep, {name: value}).simulated or math.nan
        errs.append(abs(math.log(simulated / float(row["published"]))))
    return statistics.median(errs)


def fit_constants(rows: list[dict[str, str]]) -> dict[str, float]:
    """One GEMM-fraction multiplier per family (GPU and compute dtype), fitted on its `fit` rows.

    Minimizes the median |log(simulated / published)| over the family's fit rows by a
    bounded scalar search in `FIT_BOUNDS`. Families without fit rows keep their GPU file's
    fraction (multiplier 1). The dtype is part of the family because the GPU files measure
    FP8 and BF16 GEMMs apart.
    """
    from scipy.optimize import minimize_scalar

    from simulator.errors import InputError

    fit_rows = [r for r in rows if r["split"] == "fit"]
    families: dict[str, list[tuple[dict[str, str], Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="clustersim-fit-") as tmp:
        for i, row in enumerate(fit_rows):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            try:
                prep = prepare_row(row, folder)
            except InputError as exc:
                print(f"fit row {row['id']} cannot be built: {exc}", file=sys.stderr)
                continue
            if prep.topology.gpu.gemm_fraction(compute_dtype(prep)) is None:
                print(f"fit row {row['id']}: its GPU has no gemm_peak_fraction; not fitted", file=sys.stderr)
                continue
            families.setdefault(family(prep), []).append((row, prep))
        fitted: dict[str, float] = {}
        for name, members in sorted(families.items()):
            loss = functools.partial(_family_loss, name=name, members=members)
            res = minimize_scalar(loss, bounds=FIT_BOUNDS, method="bounded", options={"xatol": 2e-3})
            fitted[name] = round(float(res.x), 4)
            ids = ", ".join(r["id"] for r, _ in members)
            base = members[0][1].topology.gpu.gemm_fraction(name.rsplit(" ", 1)[1])
            print(
                f"fitted {FIT_CONSTANT} = {fitted[name]:.4f} for {name} on {ids} "
                f"(GEMM fraction {base:.3f} -> {base * fitted[name]:.3f}; loss {res.fun:.4f})"
            )
            if len(members) == 1:
                print(
                    f"  {name} has one fit row: the multiplier is identified by that row alone "
                    "(it reproduces it and checks nothing about the shape of the model)"
                )
    return fitted


# ---- reporting ------------------------------------------------------------------------------


def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "-"
    if metric == "mfu":
        return f"{value * 100:.1f}%"
    return f"{value:.0f}"


def _line(o: Outcome) -> str:
    r = o.row
    err = "-" if o.error is None else f"{o.error * 100:+.1f}%"
    tail = f"  [{o.failure}]" if o.failure else ""
    return (
        f"{r['id']:<24} {r['split']:<8} {r['metric']:<21} pub {_fmt(r['metric'], o.published):>7}"
        f"  sim {_fmt(r['metric'], o.simulated):>7}  err {err:>7}  (wall {o.wall_s:.1f} s, "
        f"CPU {o.cpu_s:.1f} s){tail}"
    )


def split_stats(outcomes: list[Outcome]) -> dict[str, dict[str, float]]:
    """Median and max |error| per split, over the rows that simulated."""
    stats = {}
    for split in ("fit", "held_out"):
        errs = [abs(o.error) for o in outcomes if o.row["split"] == split and o.error is not None]
        failed = sum(1 for o in outcomes if o.row["split"] == split and o.error is None)
        if errs or failed:
            stats[split] = {
                "rows": float(len(errs)),
                "failed": float(failed),
                "median_abs_error": statistics.median(errs) if errs else math.nan,
                "max_abs_error": max(errs) if errs else math.nan,
            }
    return stats


def markdown_table(outcomes: list[Outcome]) -> str:
    """The results as a Markdown table (the one docs/validation.md shows)."""
    head = (
        "| row | split | source | GPUs | layout | metric | published | simulated | error |\n"
        "|---|---|---|---:|---|---|---:|---:|---:|\n"
    )
    lines = []
    for o in outcomes:
        r = o.row
        layout = f"TP{r['tp']} PP{r['pp']}" + (f" v{r['vp']}" if int(r["vp"]) > 1 else "")
        layout += f" DP{r['dp']}" + (f" CP{r['cp']}" if int(r["cp"]) > 1 else "")
        layout += (f" EP{r['ep']}" if int(r["ep"]) > 1 else "") + f" mbs{r['mbs']} gbs{r['gbs']}"
        if r["first_stage_layers"] or r["last_stage_layers"]:
            layout += f" stages {r['first_stage_layers'] or '='}+..+{r['last_stage_layers'] or '='}"
        layout += f" {r['recompute']} ZeRO-{r['zero']}"
        err = "not simulatable: " + o.failure if o.error is None else f"{o.error * 100:+.1f}%"
        lines.append(
            f"| {r['id']} | {r['split']} | {r['source']} | {int(r['gpus']):,} {r['gpu']} | {layout} | "
            f"{r['metric']} | {_fmt(r['metric'], o.published)} | {_fmt(r['metric'], o.simulated)} | {err} |"
        )
    return head + "\n".join(lines) + "\n"


def write_results_csv(path: Path, outcomes: list[Outcome]) -> None:
    """One line per row: published, simulated, error and the time it took."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(("id", "split", "metric", "published", "simulated", "error", "wall_s", "cpu_s", "failure"))
        for o in outcomes:
            r = o.row
            w.writerow(
                (r["id"], r["split"], r["metric"], o.published, o.simulated, o.error)
                + (round(o.wall_s, 2), round(o.cpu_s, 2), o.failure)
            )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", help="comma-separated row ids (default: all)")
    ap.add_argument("--split", choices=SPLITS, help="only rows of this split")
    ap.add_argument(
        "--all", action="store_true", help="include rows marked heavy (many GB of memory, long runs)"
    )
    ap.add_argument("--fit", action="store_true", help="refit the global constants on the fit rows first")
    ap.add_argument("--markdown", type=Path, help="write the results table here (Markdown)")
    ap.add_argument("--csv", type=Path, help="write the results here (CSV)")
    args = ap.parse_args(argv)
    rows = load_rows()
    constants = fit_constants(rows) if args.fit else {}
    if args.rows:
        wanted = set(args.rows.split(","))
        unknown = wanted - {r["id"] for r in rows}
        if unknown:
            ap.error(f"unknown rows {sorted(unknown)}")
        rows = [r for r in rows if r["id"] in wanted]
    if args.split:
        rows = [r for r in rows if r["split"] == args.split]
    if not (args.all or args.rows):
        skipped = [r["id"] for r in rows if r["heavy"] == "true"]
        rows = [r for r in rows if r["heavy"] == "false"]
        if skipped:
            print(f"skipping heavy rows {skipped} (run them with --all or --rows)")
    outcomes = run_rows(rows, constants)
    for split, st in split_stats(outcomes).items():
        print(
            f"{split}: {int(st['rows'])} rows simulated, {int(st['failed'])} not simulatable; "
            f"median |error| {st['median_abs_error'] * 100:.1f}%, max {st['max_abs_error'] * 100:.1f}%"
        )
    if args.markdown:
        args.markdown.write_text(markdown_table(outcomes))
    if args.csv:
        write_results_csv(args.csv, outcomes)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
