"""Capex, energy and cost per token of one run: the summary's cost columns.

What is modelled: the whole cluster's capex by part (`simulator.network.cost`, cluster
scope) and its energy per step (`simulator.metrics.energy`). A job that uses part of the
topology is charged its share, job GPUs over topology GPUs, of the capex and of the host,
network and storage power (the rest of the cluster serves other jobs); GPUs outside the
job are not charged. Capex is spread evenly over `facility.amortization_years` of
wall-clock time; energy is charged at `facility.electricity_usd_per_kwh` after PUE.

    cost per step  = job capex / (years x 365.25 x 86,400 s) x step time
                   + facility energy per step / 3.6e6 J/kWh x USD per kWh
    cost per token = cost per step / tokens per step

What is simplified: no financing, maintenance, staff, software or facility capex; the
cluster is busy all of its life; energy per step is the mean over the simulated steps.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import pandas as pd

from simulator.metrics.energy import PowerInputs, integrate, power_timeline, step_energy
from simulator.metrics.run_power import run_power_frame, run_power_summary
from simulator.network.cost import NETWORK_CATEGORIES, cost_summary, estimate_cost
from simulator.network.hardware import GPUSpec
from simulator.network.prices import DEFAULT_PRICES, PriceSpec, load_prices

SECONDS_PER_YEAR = 365.25 * 86400
J_PER_KWH = 3.6e6


def power_inputs(
    items: pd.DataFrame, gpu: GPUSpec, summary: dict[str, Any], power_cap_fraction: float = 1.0
) -> PowerInputs:
    """Rated figures of the job's share of the cluster, from cluster-scope cost items."""
    n_topo = int(summary.get("gpus_in_topology") or summary.get("gpus_in_job") or 1)
    n_job = int(summary.get("gpus_in_job") or n_topo)
    share = n_job / n_topo
    by_cat = items.groupby("category")["power_w"].sum()
    network_w = float(sum(by_cat.get(c, 0.0) for c in NETWORK_CATEGORIES))
    dtype = str(summary.get("dtype", "bf16"))
    peak = float(
        summary.get("peak_flops_per_s") or gpu.peak(dtype if dtype in gpu.peak_flops_per_s else "bf16")
    )
    return PowerInputs(
        tdp_w=float(gpu.tdp_w or 0.0),
        peak_flops_per_s=peak,
        job_gpus=n_job,
        idle_gpus=0,
        host_w=float(by_cat.get("servers", 0.0)) * share,
        network_w=network_w * share,
        storage_w=float(by_cat.get("storage", 0.0)) * share,
        power_cap_fraction=power_cap_fraction,
    )


def run_cost(
    frames: dict[str, pd.DataFrame],
    summary: dict[str, Any],
    graph: nx.Graph,
    gpu: GPUSpec,
    prices: PriceSpec,
    power_cap_fraction: float = 1.0,
) -> dict[str, Any]:
    """Capex by part, power, energy and cost per step and per token of one run.

    Args:
        frames: the run's frames (`ops` and `steps` are read).
        summary: the run's summary (gpus_in_job, gpus_in_topology, tokens_per_s, ...).
        graph: the topology graph.
        gpu: the GPU model (its `tdp_w` and peak FLOP/s).
        prices: the price and power table.
        power_cap_fraction: the per-GPU power limit, fraction of TDP (1 = none).

    Returns:
        Summary keys: capex_usd and capex_<part>_usd for the whole cluster,
        network_capex_usd, network_power_w, network_capex_per_gpu_usd, capex_per_gpu_usd,
        rated_it_power_w, job_share, energy_per_step_j, energy_run_j,
        mean_facility_power_w, peak_facility_power_w, usd_per_step, and when the workload
        states its tokens: energy_per_token_j, usd_per_mtoken, capex_usd_per_mtoken,
        energy_usd_per_mtoken, network_usd_per_mtoken; plus the assumptions used
        (amortization_years, electricity_usd_per_kwh, pue). Steps of zero length: no
        time passes, so energies, usd_per_step and facility powers (no segment) are 0.

    Raises:
        InputError: a part of the cluster has no price in the table.
    """
    items = estimate_cost(graph, prices, scope="cluster", gpu=gpu)
    n_topo = int(summary.get("gpus_in_topology") or 1)
    totals = cost_summary(items, n_topo)
    p = power_inputs(items, gpu, summary, power_cap_fraction)
    share = p.job_gpus / n_topo
    ops, steps = frames["ops"], frames["steps"]
    energy = step_energy(ops, steps, p, prices)
    timeline = power_timeline(ops, steps, p, prices)
    fac = prices.facility
    years, usd_kwh = fac.amortization_years.value, fac.electricity_usd_per_kwh.value
    out: dict[str, Any] = {k: v for k, v in totals.items() if k.startswith(("capex_", "network_"))}
    out["capex_usd"] = totals["capex_usd"]
    out["rated_it_power_w"] = totals["power_w"]
    out["network_capex_per_gpu_usd"] = totals["network_capex_usd"] / n_topo
    out["job_share"] = share
    run_j = float(energy["facility_j"].sum())
    run_s = float(energy["step_time_s"].sum())
    out["energy_per_step_j"] = run_j / len(energy)
    out["energy_run_j"] = run_j
    out["mean_facility_power_w"] = run_j / run_s if run_s else 0.0
    out["peak_facility_power_w"] = float(timeline["facility_w"].max()) if len(timeline) else 0.0
    out["timeline_energy_j"] = integrate(timeline)
    # IT power while stepping and while every job GPU idles (run-level power swings)
    pw = prices.power
    out["it_power_computing_w"] = out["mean_facility_power_w"] / fac.pue.value
    out["it_power_idle_w"] = (
        p.job_gpus * p.tdp_w * min(pw.gpu_idle_fraction.value, p.power_cap_fraction)
        + p.host_w
        + p.network_w * pw.network_static_fraction.value
        + p.storage_w * pw.storage_idle_fraction.value
    )
    out["storage_checkpoint_extra_w"] = p.storage_w * (1.0 - pw.storage_idle_fraction.value)
    step_s = run_s / len(energy)
    capex_per_s = totals["capex_usd"] * share / (years * SECONDS_PER_YEAR)
    out["usd_per_step"] = capex_per_s * step_s + out["energy_per_step_j"] / J_PER_KWH * usd_kwh
    tokens_per_s = summary.get("tokens_per_s")
    if tokens_per_s:
        tokens_per_step = float(tokens_per_s) * float(summary.get("step_time_s") or step_s)
        out["energy_per_token_j"] = out["energy_per_step_j"] / tokens_per_step
        out["capex_usd_per_mtoken"] = capex_per_s / float(tokens_per_s) * 1e6
        out["energy_usd_per_mtoken"] = out["energy_per_token_j"] / J_PER_KWH * usd_kwh * 1e6
        out["usd_per_mtoken"] = out["capex_usd_per_mtoken"] + out["energy_usd_per_mtoken"]
        net_per_s = totals["network_capex_usd"] * share / (years * SECONDS_PER_YEAR)
        out["network_usd_per_mtoken"] = net_per_s / float(tokens_per_s) * 1e6
    out.update(amortization_years=years, electricity_usd_per_kwh=usd_kwh, pue=fac.pue.value)
    if power_cap_fraction < 1.0:
        out["power_cap_fraction"] = power_cap_fraction
        out["power_cap_compute_rate"] = prices.power.power_cap_curve(power_cap_fraction)
    return out


def cost_columns(
    frames: dict[str, pd.DataFrame],
    summary: dict[str, Any],
    graph: nx.Graph,
    gpu: GPUSpec,
    prices: PriceSpec | None = None,
    power_cap_fraction: float = 1.0,
) -> dict[str, Any]:
    """`run_cost` with the default price table, or a `cost_note` saying why there is none.

    A run whose GPU model the table does not price (or whose GPU file has no `tdp_w`)
    gets `cost_note` instead of cost columns; a broken price table is still an error.

    Raises:
        InputError: the price table is invalid, or prices some parts and not others.
    """
    if prices is None:
        if not DEFAULT_PRICES.is_file():
            return {"cost_note": f"no price table at {DEFAULT_PRICES}"}
        prices = load_prices()
    if gpu.name not in prices.gpu_usd or gpu.tdp_w is None:
        why = "no tdp_w in its GPU file" if gpu.tdp_w is None else "no price in the price table"
        return {"cost_note": f"GPU {gpu.name!r} has {why}; cost columns left out"}
    if frames["steps"].empty:
        return {}
    return run_cost(frames, summary, graph, gpu, prices, power_cap_fraction)


def run_power_frames(
    frames: dict[str, pd.DataFrame], summary: dict[str, Any], prices: PriceSpec | None = None
) -> dict[str, pd.DataFrame]:
    """The run level's facility power (`power` frame) from its `segments`, by `prices` (default:
    the default table); adds the peak, minimum, mean, energy and largest swing to `summary`
    (`simulator.metrics.run_power`). Nothing when the run has no cost columns or no segments."""
    segments = frames.get("segments")
    if segments is None or "it_power_computing_w" not in summary:
        return {}
    if prices is None:
        if not DEFAULT_PRICES.is_file():
            return {}
        prices = load_prices()
    power = run_power_frame(segments, summary, prices)
    summary.update(run_power_summary(power, prices))
    return {"power": power}
