"""Headline figures of a run, as pure functions of its frames.

Glossary:
    step_time_s: mean wall time of a step (all ranks finish).
    compute_s, exposed_comm_s, idle_s: per-rank means over steps, weighted by how many
        ranks each simulated rank stands for; they add up to step_time_s.
    exposed_comm_by_tag_s: exposed communication split by op tag (tp, dp, pp, ep, cp, ...).
    bytes_forwarded_via_scale_up: bytes whose route passes through another GPU of the
        sender's server (NCCL's PXN; on a rail-only network, all cross-rail traffic).
    bytes_by_tier: bytes carried per switch tier of the link (tier2 = spine); -1 is links
        between GPUs and NICs.
    busiest_links: directed links with the highest mean utilization over the run
        (bytes carried / (capacity x run time)).
    mfu: model FLOPs utilization = model FLOPs per step / (step time x GPUs x peak FLOP/s),
        when the workload states its model FLOPs (`meta.model_flops_per_step`).
    tokens_per_s: tokens per step / step time, when the workload states tokens per step.
    pipeline_bubble_measured: idle_s / step_time_s (time a rank neither computes nor
        communicates, e.g. waiting for a pipeline neighbour), weighted mean over ranks and
        steps (a step of zero length counts as 0); compare with the schedule's analytic
        `pipeline_bubble_fraction`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def busiest_links(links: pd.DataFrame, run_time_s: float, top: int = 10) -> pd.DataFrame:
    """Mean utilization of each directed link over the run, highest first."""
    if links.empty or run_time_s <= 0:
        return pd.DataFrame(
            columns=["link", "medium", "tier", "bytes", "mean_utilization", "peak_utilization"]
        )
    agg = link_totals(links)
    agg["mean_utilization"] = agg["bytes"] / (agg["capacity"] * run_time_s)
    agg = top_by(agg, "mean_utilization", top)
    return (
        agg[["link", "medium", "tier", "bytes", "mean_utilization", "peak_utilization"]]
        .head(top)
        .reset_index(drop=True)
    )


def top_by(links: pd.DataFrame, score: str, top: int) -> pd.DataFrame:
    """The rows of highest `score` first, ties by `link` name (a stable sort), of which the
    first `top` are exact: only rows at or above the top-th largest score are sorted (all
    of them without NaN scores), so the first `top` rows are those of sorting every row."""
    value = links[score].to_numpy(dtype=float)
    if len(links) > top > 0 and not np.isnan(value).any():
        links = links[value >= np.partition(value, len(value) - top)[len(value) - top]]
    return links.sort_values([score, "link"], ascending=[False, True], kind="stable")


def link_totals(links: pd.DataFrame) -> pd.DataFrame:
    """Bytes, capacity and peak utilization per (link, medium, tier), one row per link.

    A run's links frame (`simulator.metrics.frames.links_frame`) takes a link's name, medium
    and tier from the link table by its `link_id`, so it is grouped by that integer (faster
    than by three columns of text) whenever no two ids carry the same name: the groups, the
    rows in each and their order, and so every sum, are those of grouping by (link, medium,
    tier). Rows come in `link_id` order instead of name order; `busiest_links` sorts them by
    mean utilization and name, which a unique name leaves without ties.
    """
    stats = {
        "bytes": ("bytes", "sum"),
        "capacity": ("capacity_bytes_per_s", "first"),
        "peak_utilization": ("utilization", "max"),
    }
    if "link_id" in links.columns:
        by_id = links.groupby("link_id", sort=True)
        agg = by_id.agg(link=("link", "first"), medium=("medium", "first"), tier=("tier", "first"), **stats)
        if agg["link"].is_unique:
            return agg.reset_index(drop=True)
    return links.groupby(["link", "medium", "tier"], as_index=False).agg(**stats)


def step_summary(steps: pd.DataFrame) -> dict[str, Any]:
    """Weighted per-rank means of the step breakdown."""
    if steps.empty:
        return {}
    w = steps["weight"].to_numpy(dtype=float)
    per_step = steps.groupby("step")["step_time_s"].first()
    out: dict[str, Any] = {
        "steps": int(per_step.size),
        "step_time_s": float(per_step.mean()),
        "step_time_min_s": float(per_step.min()),
        "step_time_max_s": float(per_step.max()),
    }
    for col in ("compute_s", "comm_s", "exposed_comm_s", "idle_s"):
        out[col] = float(np.average(steps[col].to_numpy(), weights=w))
    tags = [c for c in steps.columns if c.startswith("exposed_") and c not in ("exposed_comm_s",)]
    out["exposed_comm_by_tag_s"] = {
        c[len("exposed_") : -2]: float(np.average(steps[c].to_numpy(), weights=w)) for c in sorted(tags)
    }
    return out


def summarize(frames: dict[str, pd.DataFrame], meta: dict[str, Any]) -> dict[str, Any]:
    """Summary dict written to summary.json."""
    steps = frames["steps"]
    out: dict[str, Any] = {**{k: v for k, v in meta.items() if not isinstance(v, dict)}}
    out.update(step_summary(steps))
    run_time = float(steps["finished_at_s"].max() - steps["started_at_s"].min()) if not steps.empty else 0.0
    out["simulated_time_s"] = run_time
    links = frames["links"]
    if not links.empty:
        out["bytes_by_tier"] = {
            f"tier{int(t)}": float(b) for t, b in links.groupby("tier")["bytes"].sum().items()
        }
    bl = busiest_links(links, run_time)
    out["busiest_links"] = bl.to_dict(orient="records")
    st = out.get("step_time_s")
    n_gpus = meta.get("gpus_in_job")
    peak = meta.get("peak_flops_per_s")
    mflops = meta.get("model_flops_per_step")
    if st and mflops and n_gpus and peak:
        out["mfu"] = float(mflops) / (st * n_gpus * peak)
        out["tflops_per_gpu"] = float(mflops) / (st * n_gpus) / 1e12
    if "pipeline_bubble_fraction" in meta and not steps.empty:
        idle, step_time = steps["idle_s"].to_numpy(dtype=float), steps["step_time_s"].to_numpy(dtype=float)
        # a step of zero length has no idle time: no bubble (not 0 / 0)
        share = np.divide(idle, step_time, out=np.zeros_like(idle), where=step_time > 0)
        out["pipeline_bubble_measured"] = float(np.average(share, weights=steps["weight"].to_numpy()))
    tokens = meta.get("tokens_per_step")
    if st and tokens:
        out["tokens_per_s"] = float(tokens) / st
    for k, v in meta.items():
        if isinstance(v, dict):
            out[k] = v
    return out
