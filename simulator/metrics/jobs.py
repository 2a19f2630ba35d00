"""Results of several jobs on one fabric: who loaded which link, and how much each job slowed.

Glossary (frames `jobs` and `job_links`):
    step_time_alone_s: mean step time of the job simulated alone on the cluster (same
        placement, same seed, nobody else's flows).
    step_time_s: mean step time with every job of the scenario running together.
    slowdown: step_time_s / step_time_alone_s (1 = no interference).
    shared_links: directed links that carried bytes of this job and of another job.
    shared_with: the other jobs whose bytes crossed one of this job's links.
    bytes: bytes a job's flows put on a link (size x how often the flow crosses it).

What is simplified: "shared" means both jobs moved bytes over the link during the run,
not necessarily at the same instant; the link-rate intervals (`links` frame) are the sum
over jobs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def with_job(df: pd.DataFrame, job: str) -> pd.DataFrame:
    """`df` with a leading `job` column."""
    out = df.copy()
    out.insert(0, "job", job)
    return out


def job_links_frame(names: list[str], per_job_bytes: np.ndarray, links: Any) -> pd.DataFrame:
    """The `job_links` frame: one row per (job, directed link) the job loaded.

    Args:
        names: job names, in job order.
        per_job_bytes: bytes per (job, directed link).
        links: the cluster's `LinkTable` (names, ends, tiers, capacities).
    """
    used = per_job_bytes > 0
    users = used.sum(axis=0)
    rows = []
    for j, name in enumerate(names):
        for i in np.flatnonzero(used[j]):
            others = [names[k] for k in np.flatnonzero(used[:, i]) if k != j]
            rows.append(
                {
                    "job": name,
                    "link_id": int(i),
                    "link": links.name(int(i)),
                    "src": links.src[i],
                    "dst": links.dst[i],
                    "tier": int(links.tier[i]),
                    "bytes": float(per_job_bytes[j, i]),
                    "jobs_on_link": int(users[i]),
                    "shared_with": ",".join(others),
                }
            )
    cols = ["job", "link_id", "link", "src", "dst", "tier", "bytes", "jobs_on_link", "shared_with"]
    return pd.DataFrame.from_records(rows, columns=cols)


def mean_step_s(steps: pd.DataFrame) -> float:
    """Mean step time over the steps of one job's `steps` frame, s."""
    return float(steps.groupby("step")["step_time_s"].first().mean()) if not steps.empty else float("nan")


def jobs_frame(rows: list[dict[str, Any]], job_links: pd.DataFrame) -> pd.DataFrame:
    """The `jobs` frame: the rows given (name, gpus, step times, ...) with slowdown and sharing."""
    df = pd.DataFrame.from_records(rows)
    df["slowdown"] = df["step_time_s"] / df["step_time_alone_s"]
    shared = job_links[job_links["jobs_on_link"] > 1]
    df["shared_links"] = [int((shared["job"] == n).sum()) for n in df["job"]]
    df["shared_bytes"] = [float(shared.loc[shared["job"] == n, "bytes"].sum()) for n in df["job"]]
    df["shared_with"] = [
        ",".join(
            sorted({o for s in shared.loc[shared["job"] == n, "shared_with"] for o in s.split(",") if o})
        )
        for n in df["job"]
    ]
    df["link_bytes"] = [float(job_links.loc[job_links["job"] == n, "bytes"].sum()) for n in df["job"]]
    return df
