"""Comparison and sweep dashboards rebuilt from real `compare` / `sweep` output folders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.faults.metrics import aggregate
from simulator.viz.compare import comparison_html, step_time_figure, variant_stats
from simulator.viz.faults import sweep_figure


@pytest.fixture
def compare_dir(compare_run: Path) -> Path:
    return compare_run  # simulated once per session (conftest.py)


@pytest.fixture
def sweep_dir(sweep_run: Path) -> Path:
    return sweep_run


def test_comparison_rebuild_equals_the_page_compare_wrote(compare_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "again.html"
    res = CliRunner().invoke(app, ["dashboard", str(compare_dir), "-o", str(target)])
    assert res.exit_code == 0 and "comparison dashboard" in res.output, res.output
    text = target.read_text(encoding="utf-8")
    assert text == (compare_dir / "comparison.html").read_text(encoding="utf-8")
    assert "<meta name='clustersim-figures' content='8'>" in text
    assert "one seed: bars are single runs, without intervals" in text


def test_a_comparison_folder_holds_plotly_js_once(compare_dir: Path) -> None:
    """Variant pages load the comparison folder's copy (`../plotly.min.js`), so plotly.js is
    not repeated per page (it was about 4.8 MB in each of 4 pages)."""
    copies = sorted(p.relative_to(compare_dir).as_posix() for p in compare_dir.rglob("plotly.min.js"))
    assert copies == ["plotly.min.js"]
    assert "src='plotly.min.js'" in (compare_dir / "comparison.html").read_text(encoding="utf-8")
    for page in compare_dir.glob("*/dashboard.html"):
        text = page.read_text(encoding="utf-8")
        assert "src='../plotly.min.js'" in text and len(text) < 1_000_000


def test_comparison_bars_get_intervals_with_several_seeds(compare_dir: Path) -> None:
    table = pd.read_csv(compare_dir / "comparison.csv")
    one = step_time_figure(table)
    assert [t.error_y.array for t in one.data] == [None] * 3 and "no interval" in one.layout.title.text
    two = pd.concat(
        [table.assign(seed=0), table.assign(seed=1, step_time_s=table["step_time_s"] * 1.1)],
        ignore_index=True,
    )
    st = variant_stats(two, "step_time_s")
    assert list(st["variant"]) == ["1to1", "2to1", "4to1"] and (st["n"] == 2).all()
    # t-interval of two values a, 1.1a: mean 1.05a, half-width t(0.975, 1) * sd / sqrt(2)
    a = table["step_time_s"].to_numpy()
    half = 12.706204736 * np.std(np.stack([a, 1.1 * a]), axis=0, ddof=1) / np.sqrt(2)
    assert np.allclose(st["mean"], 1.05 * a) and np.allclose(st["hi"] - st["mean"], half)
    fig = step_time_figure(two)
    assert np.allclose([t.y[0] for t in fig.data], 1.05 * a * 1e3)
    assert np.allclose([t.error_y.array[0] for t in fig.data], half * 1e3)
    assert "95% t-interval" in fig.layout.title.text
    html = comparison_html("two seeds", two, {})
    assert "mean over up to 2 seeds" in html and "2 seeds</span>" in html


def test_sweep_writes_the_page_the_dashboard_command_rebuilds(sweep_dir: Path, tmp_path: Path) -> None:
    """One study page whatever writes it: titled, one tile per variant, no mean over variants."""
    wrote = (sweep_dir / "sweep.html").read_text(encoding="utf-8")
    target = tmp_path / "again.html"
    res = CliRunner().invoke(app, ["dashboard", str(sweep_dir), "-o", str(target)])
    assert res.exit_code == 0, res.output
    assert target.read_text(encoding="utf-8") == wrote
    assert "<h1>clustersim study: " in wrote
    assert wrote.count("<div class='k'>goodput, interval_min=") == 6  # 6 variants, 6 tiles
    assert "mean goodput" not in wrote and "mean ETTR" not in wrote
    assert (sweep_dir / "plotly.min.js").is_file() and "src='plotly.min.js'" in wrote


def test_sweep_rebuild_shows_goodput_against_the_swept_parameter(sweep_dir: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["dashboard", str(sweep_dir)])
    assert res.exit_code == 0 and "study dashboard" in res.output, res.output
    text = (sweep_dir / "sweep.html").read_text(encoding="utf-8")
    # goodput, ETTR, and each variant's wall time by part
    assert "<meta name='clustersim-figures' content='3'>" in text and "6 variants x 2 seeds" in text
    runs = (
        pd.read_parquet(sweep_dir / "runs.parquet")
        if (sweep_dir / "runs.parquet").is_file()
        else pd.read_csv(sweep_dir / "runs.csv")
    )
    # the same page from CSV, where no attrs survive: axes come from study.resolved.yaml
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    runs.to_csv(csv_dir / "runs.csv", index=False)
    (csv_dir / "study.resolved.yaml").write_bytes((sweep_dir / "study.resolved.yaml").read_bytes())
    res = CliRunner().invoke(app, ["dashboard", str(csv_dir)])
    assert res.exit_code == 0, res.output
    assert (csv_dir / "sweep.html").read_text(encoding="utf-8") == text

    runs.attrs["axes"] = ["interval_min", "policy"]
    fig = sweep_figure(runs)
    assert fig.layout.xaxis.title.text == "interval_min" and "95% t-interval" in fig.layout.title.text
    agg = aggregate(runs, by=["policy", "interval_min"], metrics=["goodput"])
    for policy in runs["policy"].unique():
        line = next(t for t in fig.data if t.name == f"policy={policy}" and t.mode == "lines+markers")
        band = next(t for t in fig.data if t.name == f"policy={policy} 95% CI")
        g = agg[agg["policy"] == policy].sort_values("interval_min")
        assert list(line.x) == [10, 30, 90] and np.allclose(line.y, g["goodput_mean"])
        assert band.mode == "lines" and band.fill == "toself"  # no markers on the band's corners
        assert np.allclose(band.y[:3], g["goodput_hi"].clip(upper=1.0))
        assert np.allclose(band.y[3:], g["goodput_lo"].clip(lower=0.0)[::-1])


def test_sweep_figure_with_one_seed_has_no_band() -> None:
    runs = pd.DataFrame({"interval_min": [10, 30], "seed": [0, 0], "goodput": [0.8, 0.9]})
    runs.attrs["axes"] = ["interval_min"]
    fig = sweep_figure(runs)
    assert not [t for t in fig.data if t.fill == "toself"] and "no interval" in fig.layout.title.text


def test_study_page_never_pools_variants_that_share_an_axis_label():
    """Results whose axis column names two variants alike (one policy `kind`) are tiled
    and plotted per variant; distinct labels keep the axis."""
    from simulator.viz.rebuild import _study_cards, study_page

    runs = pd.DataFrame(
        {
            "variant": [0, 0, 1, 1],
            "policy": ["checkpoint_restart"] * 4,
            "seed": [0, 1, 0, 1],
            "goodput": [0.9, 0.8, 0.5, 0.4],
            "ettr": [0.9, 0.8, 0.5, 0.4],
        }
    )
    runs.attrs["axes"] = ["policy"]
    html = study_page("s", runs, {})
    assert "goodput, variant=0" in html and "goodput, variant=1" in html
    assert "85.0%" in html and "45.0%" in html and "65.0%" not in html
    labelled = runs.assign(policy=["a", "a", "b", "b"])
    labelled.attrs["axes"] = ["policy"]
    cards = _study_cards(labelled, ["policy"], 2, 2)
    assert [c[0] for c in cards[1:]] == ["goodput, policy=a", "goodput, policy=b"]
    assert cards[1][1].startswith("85.0%") and cards[2][1].startswith("45.0%")


def test_a_variant_rebuilt_in_place_loads_the_comparisons_plotly_js(
    compare_dir: Path, tmp_path: Path
) -> None:
    """`dashboard cmp/VARIANT` rebuilt the page with its own `plotly.min.js` (a second 4.8 MB
    copy in the variant's folder, and a page unlike the one compare wrote); in place it now
    loads `../plotly.min.js` as before, and written elsewhere (-o) the copy beside it."""
    import shutil

    cmp = tmp_path / "cmp"
    shutil.copytree(compare_dir, cmp)
    variant = next(p.parent for p in sorted(cmp.glob("*/dashboard.html")))
    written = (variant / "dashboard.html").read_bytes()
    res = CliRunner().invoke(app, ["dashboard", str(variant)])
    assert res.exit_code == 0, res.output
    assert (variant / "dashboard.html").read_bytes() == written
    assert not (variant / "plotly.min.js").exists()
    res = CliRunner().invoke(
        app, ["dashboard", str(variant), "-o", str(tmp_path / "elsewhere" / "page.html")]
    )
    assert res.exit_code == 0, res.output
    assert "src='plotly.min.js'" in (tmp_path / "elsewhere" / "page.html").read_text(encoding="utf-8")
    assert (tmp_path / "elsewhere" / "plotly.min.js").is_file()
