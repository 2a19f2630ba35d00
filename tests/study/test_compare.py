"""Compare files of the catalog, variant overrides, and what the comparisons show."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from simulator.errors import InputError
from simulator.study import compare as C
from simulator.study.merge import deep_merge
from tests.conftest import ROOT, compare_without_the_gpus_price

COMPARES = sorted((ROOT / "scenarios").glob("compare-*.yaml"))


def test_deep_merge_merges_mappings_and_replaces_the_rest() -> None:
    base = {
        "network": {"fidelity": "flow", "algorithms": {"all_reduce": "ring", "all_gather": "ring"}},
        "calibration": [{"file": "a"}],
        "seed": 1,
    }
    over = {"network": {"algorithms": {"all_reduce": "tree"}}, "calibration": [], "seed": 2}
    merged = deep_merge(base, over)
    assert merged == {
        "network": {"fidelity": "flow", "algorithms": {"all_reduce": "tree", "all_gather": "ring"}},
        "calibration": [],
        "seed": 2,
    }
    assert base["network"]["algorithms"]["all_reduce"] == "ring"  # inputs untouched


def test_deep_merge_removes_a_key_set_to_null() -> None:
    """A null in the override removes the key, as a JSON Merge Patch's null does (RFC 7396,
    section 2), so the default applies again; nested nulls likewise."""
    base = {"nic_gbps": 400, "network": {"fidelity": "flow", "record_links": True}}
    over = {"nic": "connectx6-200g-hdr", "nic_gbps": None, "network": {"record_links": None}}
    merged = deep_merge(base, over)
    assert merged == {"nic": "connectx6-200g-hdr", "network": {"fidelity": "flow"}}
    assert base["nic_gbps"] == 400 and base["network"]["record_links"] is True
    # under a key the base lacks: the patch's nulls are dropped all the same (RFC 7396's MergePatch)
    assert deep_merge({"a": 1}, {"b": {"c": None, "d": {"e": None, "f": 1}}}) == {
        "a": 1,
        "b": {"d": {"f": 1}},
    }


def test_a_variant_switches_the_base_topology_to_a_nic_preset(tmp_path: Path) -> None:
    """The base topology gives `nic_gbps`; a variant naming a preset removes it with null
    (the two together are refused), with no new topology file."""
    path = tmp_path / "c.yaml"
    path.write_text(
        f"name: t\nbase: {{file: {ROOT / 'scenarios/quickstart.yaml'}}}\nvariants:\n"
        "  - name: base\n"
        "  - name: hdr\n    topology: {params: {nic: connectx6-200g-hdr, nic_gbps: null}}\n"
    )
    base, hdr = C.load_comparison(path).variants

    def ib_speeds(graph) -> set[float]:  # noqa: ANN001
        return {d["bandwidth_bytes_per_s"] for _, _, d in graph.edges(data=True) if d["medium"] == "ib"}

    speeds = {v.name: ib_speeds(v.prepared.topology.graph) for v in (base, hdr)}
    assert speeds == {"base": {400e9 / 8}, "hdr": {200e9 / 8}}


@pytest.mark.parametrize("path", COMPARES, ids=lambda p: p.name)
def test_catalog_compare_files_load_and_prepare(path: Path) -> None:
    cmp = C.load_comparison(path)
    assert len(cmp.variants) >= 2
    assert len({v.name for v in cmp.variants}) == len(cmp.variants)


def test_variant_overrides_apply(small_compare: Path) -> None:
    cmp = C.load_comparison(small_compare)
    ring, tree, hier = cmp.variants
    assert ring.prepared.scenario.spec.network.algorithms == {"all_reduce": "ring"}
    assert tree.prepared.scenario.spec.network.algorithms == {"all_reduce": "tree"}
    assert hier.prepared.scenario.spec.run.steps == 1 and ring.prepared.scenario.spec.run.steps == 3
    results = C.run_comparison(cmp, "serial")
    algos = [set(r.frames["ops"].query("kind == 'collective'")["algorithm"]) for r in results]
    assert algos == [{"ring"}, {"tree"}, {"hierarchical"}]
    table = C.comparison_table(results)
    assert list(table["variant"]) == ["ring", "tree", "hier-1step"]
    assert list(table["steps"]) == [3, 3, 1]
    assert table["relative_step_time"].iloc[0] == 1.0


def test_topology_params_and_files_resolve_relative_to_the_compare_file(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "two.yaml").write_text(
        (ROOT / "topologies/h100-rail-clos-2n.yaml")
        .read_text()
        .replace("gpus/h100-sxm.yaml", str(ROOT / "topologies/gpus/h100-sxm.yaml"))
    )
    path = sub / "c.yaml"
    path.write_text(
        f"name: t\nbase: {{file: {ROOT / 'scenarios/quickstart.yaml'}}}\nvariants:\n"
        "  - name: copy\n    topology: {file: two.yaml}\n"
        "  - name: slow-nic\n    topology: {params: {nic_gbps: 100}}\n"
    )
    cmp = C.load_comparison(path)
    copy, slow = cmp.variants
    assert copy.prepared.scenario.topology_path.resolve() == (sub / "two.yaml").resolve()
    assert slow.prepared.topology.name == "h100-rail-clos-2n [nic_gbps=100]"
    results = C.run_comparison(cmp, "serial")
    assert results[1].summary["exposed_comm_s"] > results[0].summary["exposed_comm_s"]


def test_oversubscription_never_speeds_the_step_up() -> None:
    """Thinner spine uplinks (same spines, same ECMP paths) cannot make a spine-bound ring faster."""
    cmp = C.load_comparison(ROOT / "scenarios/compare-oversubscription.yaml")
    table = C.comparison_table(C.run_comparison(cmp, "pool"))
    steps = list(table["step_time_s"])
    assert list(table["variant"]) == ["1to1", "2to1", "4to1"]
    assert all(a <= b for a, b in itertools.pairwise(steps)), steps
    assert steps[-1] > 1.5 * steps[0]
    if "network_capex_usd" in table.columns:
        capex = list(table["network_capex_usd"])
        assert all(a >= b for a, b in itertools.pairwise(capex)), capex


def test_rail_only_matches_clos_on_rail_aligned_traffic() -> None:
    """TP inside servers and DP along rails never needs the spine (Wang et al., 2023)."""
    cmp = C.load_comparison(ROOT / "scenarios/compare-rail-only-vs-clos.yaml")
    table = C.comparison_table(C.run_comparison(cmp, "pool"))
    clos, rail_only = table["step_time_s"]
    assert rail_only == pytest.approx(clos, rel=0.01)
    if "network_capex_usd" in table.columns:
        assert table["network_capex_usd"].iloc[1] < table["network_capex_usd"].iloc[0]


def test_cost_columns_are_the_runs_and_amortization_applies_to_all(tmp_path: Path) -> None:
    """The table's network $/Mtoken is the run's (the job's share of the network, as
    docs/cost.md defines the capex term), and a compare file's `cost.amortization_years`
    spreads every capex column over its years, not the network's alone."""
    base = ROOT / "scenarios/quickstart.yaml"
    text = (
        f"name: t\nbase: {{file: {base}}}\n"
        "variants:\n  - name: whole\n  - name: quarter\n    topology: {params: {nodes: 8}}\n"
    )
    four, two = tmp_path / "four.yaml", tmp_path / "two.yaml"
    four.write_text(text)
    two.write_text(text + "cost: {amortization_years: 2}\n")
    results = C.run_comparison(C.load_comparison(four), "serial")
    table = C.comparison_table(results)
    if "network_usd_per_mtoken" not in table.columns:
        pytest.skip("no price table")
    whole, quarter = (r.summary for r in results)
    assert quarter["job_share"] == 0.25 and whole["job_share"] == 1.0
    assert list(table["network_usd_per_mtoken"]) == [
        whole["network_usd_per_mtoken"],
        quarter["network_usd_per_mtoken"],
    ]
    # a quarter of a cluster four times the size: the same network capex charged per token
    # (a rail-optimized Clos of one leaf per rail grows linearly in servers here)
    assert quarter["network_usd_per_mtoken"] == pytest.approx(whole["network_usd_per_mtoken"], rel=1e-9)
    runs2 = C.run_comparison(C.load_comparison(two), "serial")
    halved = C.comparison_table(runs2)
    assert list(halved["amortization_years"]) == [2.0, 2.0] and list(table["amortization_years"]) == [
        4.0,
        4.0,
    ]
    assert list(halved["network_usd_per_mtoken"]) == pytest.approx(
        [2 * v for v in table["network_usd_per_mtoken"]], rel=1e-12
    )
    for r4, r2 in zip(results, runs2, strict=True):
        assert r2.summary["capex_usd_per_mtoken"] == pytest.approx(
            2 * r4.summary["capex_usd_per_mtoken"], rel=1e-12
        )
        assert r2.summary["energy_usd_per_mtoken"] == r4.summary["energy_usd_per_mtoken"]


def test_a_comparisons_own_price_table_prices_every_cost_column(tmp_path: Path) -> None:
    """The run's cost columns come from the comparison's table: one that has no price for the
    job's GPU leaves them out (with the run's note), instead of keeping the default table's
    (priced over its 4 years while the comparison asked for 8); the network columns, which
    need no GPU price, are the comparison table's."""
    path = compare_without_the_gpus_price(tmp_path, ", amortization_years: 8")
    (run,) = C.run_comparison(C.load_comparison(path), "serial")
    s = run.summary
    assert "no price in the price table" in s["cost_note"]
    for key in ("usd_per_mtoken", "network_usd_per_mtoken", "capex_usd", "amortization_years"):
        assert key not in s, key
    assert s["network_capex_usd"] > 0
    assert "network_usd_per_mtoken" not in C.comparison_table([run]).columns


@pytest.mark.parametrize("name", C.FOLDER_FILES)
def test_a_variant_named_like_a_file_of_the_comparison_folder_is_refused(
    small_compare: Path, name: str
) -> None:
    """Its run folder would take the file's place (plotly.min.js: no page could load plotly),
    found only after simulating; now refused where the name is written."""
    small_compare.write_text(small_compare.read_text().replace("- name: tree", f"- name: {name}"))
    with pytest.raises(InputError) as exc:
        C.load_comparison(small_compare)
    assert str(exc.value) == (
        f"{small_compare}:6: variants.1.name: {name!r} is a file of the comparison folder; "
        "name the variant otherwise"
    )


def test_a_variant_of_several_jobs_is_not_priced_per_job_as_its_run_is_not(tmp_path: Path) -> None:
    """compare priced a `jobs:` variant with per-rank energy whose ranks of the two jobs
    collided (energy 14.5 kJ against 6.6 kJ from the timeline, mean power twice the peak),
    while `run` leaves such runs unpriced (docs/cost.md): the variant has the network's
    capex and no energy or cost per token, as its run."""
    from simulator import api

    base = ROOT / "scenarios" / "jobs" / "two-dp-jobs-spread.yaml"
    cmp = tmp_path / "cmp.yaml"
    cmp.write_text(f"name: jobscmp\nbase: {{file: {base}}}\nvariants:\n  - name: a\n")
    (variant,) = api.compare(cmp, steps=1).results.values()
    alone = api.run(base, steps=1).summary
    priced = ("energy_run_j", "timeline_energy_j", "mean_facility_power_w", "usd_per_step")
    assert [k for k in priced if k in variant.summary] == [k for k in priced if k in alone] == []
    assert variant.summary["network_capex_usd"] > 0


def test_a_power_cap_follows_the_comparisons_own_price_table(tmp_path: Path) -> None:
    """A compare's `cost.prices` table set the reported compute rate of a capped variant, but
    its step ran at the default table's rate (0.94 at 70% of TDP, not the table's 0.5), and
    its lowest cap (0.1) was refused against the default's (0.3)."""
    from simulator import api

    table = yaml.safe_load((ROOT / "topologies" / "prices.yaml").read_text())
    table["power"]["power_cap_curve"]["points"] = [[0.1, 0.2], [0.7, 0.5], [1.0, 1.0]]
    (tmp_path / "prices.yaml").write_text(yaml.safe_dump(table, sort_keys=False))
    base = ROOT / "scenarios" / "quickstart.yaml"  # its compute ops are priced by their FLOPs
    cmp = tmp_path / "cmp.yaml"
    cmp.write_text(
        f"name: capcmp\nbase: {{file: {base}}}\ncost: {{prices: {{file: prices.yaml}}}}\nvariants:\n"
        "  - name: full\n  - name: cap07\n    compute: {power_cap_fraction: 0.7}\n"
    )
    res = api.compare(cmp, steps=1).results
    full, cap07 = res["full"].summary, res["cap07"].summary
    assert cap07["power_cap_compute_rate"] == 0.5
    # compute-bound work runs at half speed: its compute time about doubles (HBM-bound ops do not)
    assert 1.6 < cap07["compute_s"] / full["compute_s"] <= 2.0
    cmp.write_text(cmp.read_text().replace("0.7}", "0.2}"))
    assert C.load_comparison(cmp).variants[1].prepared.prices is not None  # 0.2 is on this curve
