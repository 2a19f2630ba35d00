"""Per-link totals grouped by `link_id` must be those of grouping by the links' names.

`busiest_links` (summary.json), the dashboard's busiest links and its topology colours
used to group the links frame by text columns; they now group by the integer link id
when it names the links one to one. The references below are the former groupings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simulator.metrics.summary import busiest_links
from simulator.viz.links import busiest, link_mean_utilization, mean_utilization_by_link


def _links(seed: int, n_links: int = 60, rows: int = 900) -> pd.DataFrame:
    """A links frame as `links_frame` builds it: name, ends, medium and tier from the link id;
    rows in time order; equal utilizations (ties) and both directions of some links."""
    rng = np.random.default_rng(seed)
    nodes = [f"n{i}" for i in range(12)]
    pairs = [(a, b) for a in nodes for b in nodes if a != b]
    ends = [pairs[i] for i in rng.choice(len(pairs), n_links, replace=False)]
    link = rng.integers(0, n_links, rows)
    start = np.sort(rng.uniform(0.0, 1.0, rows))
    cap = np.array([rng.choice([1e9, 2e9]) for _ in range(n_links)])[link]
    rate = rng.choice([0.0, 0.5e9, 1e9], rows)
    df = pd.DataFrame(
        {
            "link_id": link,
            "link": [f"{ends[i][0]}->{ends[i][1]}" for i in link],
            "src": [ends[i][0] for i in link],
            "dst": [ends[i][1] for i in link],
            "medium": ["ib" if i % 3 else "nvlink" for i in link],
            "tier": link % 3,
            "started_at_s": start,
            "finished_at_s": start + rng.choice([0.01, 0.02], rows),
            "rate_bytes_per_s": rate,
            "capacity_bytes_per_s": cap,
        }
    )
    df["utilization"] = df["rate_bytes_per_s"] / df["capacity_bytes_per_s"]
    df["bytes"] = df["rate_bytes_per_s"] * (df["finished_at_s"] - df["started_at_s"])
    return df


def _busiest_links_by_name(links: pd.DataFrame, run_time_s: float, top: int) -> pd.DataFrame:
    agg = links.groupby(["link", "medium", "tier"], as_index=False).agg(
        bytes=("bytes", "sum"),
        capacity=("capacity_bytes_per_s", "first"),
        peak_utilization=("utilization", "max"),
    )
    agg["mean_utilization"] = agg["bytes"] / (agg["capacity"] * run_time_s)
    agg = agg.sort_values(["mean_utilization", "link"], ascending=[False, True], kind="stable")
    cols = ["link", "medium", "tier", "bytes", "mean_utilization", "peak_utilization"]
    return agg[cols].head(top).reset_index(drop=True)


def _busiest_by_name(links: pd.DataFrame, top: int) -> list[str]:
    agg = links.groupby("link").agg(bytes=("bytes", "sum"), cap=("capacity_bytes_per_s", "first"))
    agg["score"] = agg["bytes"] / agg["cap"]
    agg = agg.reset_index().sort_values(["score", "link"], ascending=[False, True], kind="stable")
    return list(agg["link"][:top])


def _mean_utilization_loop(links: pd.DataFrame, run_s: float) -> dict[tuple[str, str], float]:
    agg = links.groupby(["src", "dst"]).agg(bytes=("bytes", "sum"), cap=("capacity_bytes_per_s", "first"))
    util = agg["bytes"] / (agg["cap"] * run_s)
    out: dict[tuple[str, str], float] = {}
    for (s, d), v in util.items():
        key = (s, d) if (d, s) not in out else (d, s)
        out[key] = max(out.get(key, 0.0), float(v))
    return out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("top", [0, 1, 5, 10, 1000])
def test_busiest_links_equal_the_grouping_by_name(seed, top):
    links = _links(seed)
    want = _busiest_links_by_name(links, 1.5, top)
    pd.testing.assert_frame_equal(busiest_links(links, 1.5, top), want, check_exact=True)
    assert busiest(links, top) == _busiest_by_name(links, top)


def test_two_ids_with_one_name_are_grouped_by_name():
    links = _links(7)
    links.loc[links["link_id"] == links["link_id"].iloc[0], "link_id"] = 10_000  # same name, two ids
    first = links["link_id"].iloc[0]
    twin = links[links["link"] == links["link"].iloc[0]].index[-1]
    links.loc[twin, "link_id"] = first + 1
    pd.testing.assert_frame_equal(
        busiest_links(links, 1.0, 1000), _busiest_links_by_name(links, 1.0, 1000), check_exact=True
    )


@pytest.mark.parametrize("seed", range(4))
def test_mean_utilization_equals_the_loop_over_directed_links(seed):
    links = _links(seed)
    got = mean_utilization_by_link(links, 0.7)
    want = _mean_utilization_loop(links, 0.7)
    assert list(got.items()) == list(want.items())  # same keys, orientation, order and values
    assert link_mean_utilization(links, 0.7).equals(pd.Series(want, dtype=float))


def test_a_degraded_link_reads_its_degraded_capacity() -> None:
    """`state.degraded_links` at factor 0.1 on one NIC uplink: the links frame gives that
    link the capacity the fabric shared (nominal x 0.1), so the ring all-reduce that
    saturates it reads utilization 1 there, and the summary's busiest link is that one."""
    import yaml

    from simulator import api
    from tests.conftest import ROOT

    sc = yaml.safe_load((ROOT / "scenarios/quickstart.yaml").read_text())
    sc["state"] = {"degraded_links": [{"link": ["n0.nic0", "leaf0.0"], "factor": 0.1}]}
    sc["run"] = {"steps": 1}
    r = api.run(sc, base_dir=ROOT / "scenarios")
    links = r["links"]
    up = links[links["link"] == "n0.nic0->leaf0.0"]
    other = links[links["link"] == "n0.nic1->leaf1.0"]
    assert (up["capacity_bytes_per_s"] == 0.1 * other["capacity_bytes_per_s"].iloc[0]).all()
    assert up["utilization"].max() == pytest.approx(1.0, rel=1e-9)
    assert r.summary["busiest_links"][0]["link"] in ("n0.nic0->leaf0.0", "leaf0.0->n0.nic0")
