"""Fitting alpha-beta lines and efficiency curves: golden round trips and the samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.calibration.collective import busbw_factor
from simulator.calibration.fit import fit_line, fit_table
from simulator.calibration.parser import parse_text, read_benchmark
from tests.calibration.logs import sample_files, synthetic_log

SIZES = [2**k for k in range(3, 35)]  # 8 B .. 16 GiB, as all_reduce_perf -b 8 -e 16G -f 2


@pytest.mark.parametrize(
    ("kind", "n_gpus", "per_node", "alpha_s", "busbw"),
    [
        ("all_reduce", 8, 8, 15e-6, 480e9),
        ("all_reduce", 16, 8, 70e-6, 450e9),
        ("all_gather", 16, 8, 90e-6, 190e9),
        ("reduce_scatter", 8, 8, 35e-6, 230e9),
        ("all_to_all", 32, 8, 40e-6, 50e9),
        ("broadcast", 8, 8, 35e-6, 230e9),
        ("send_recv", 2, 1, 10e-6, 25e9),
    ],
)
def test_round_trip_known_alpha_beta(
    kind: str, n_gpus: int, per_node: int, alpha_s: float, busbw: float
) -> None:
    """Calibration round trip (STYLE.md golden case): rows built from
    t = alpha + S * factor(n) / busbw, with factor from nccl-tests doc/PERFORMANCE.md,
    written in nccl-tests' text format (its rounding included), fit back within 1 %."""
    log = synthetic_log(kind, n_gpus, per_node, alpha_s, busbw, SIZES)
    table = parse_text(log, f"synthetic-{kind}.log")[0]
    assert (table.collective, table.n_gpus, table.n_nodes) == (kind, n_gpus, n_gpus // per_node)
    fit = fit_table(table)
    assert fit.alpha_s == pytest.approx(alpha_s, rel=0.01)
    assert fit.busbw_bytes_per_s == pytest.approx(busbw, rel=0.01)
    assert fit.errors["rel_error"].abs().max() < 0.01
    assert np.allclose(fit.curve.efficiency, 1.0, atol=0.01)


@settings(max_examples=40, deadline=None)
@given(
    alpha=st.floats(1e-6, 1e-3),
    beta=st.floats(1e9, 1e12),
    lo=st.integers(0, 20),
    span=st.integers(3, 14),
)
def test_fit_line_recovers_exact_lines(alpha: float, beta: float, lo: int, span: int) -> None:
    """Law: on exact data t = alpha + S/beta the relative-error fit returns (alpha, beta)."""
    s = np.array([2.0 ** (lo + i) for i in range(span)])
    t = alpha + s / beta
    a, b = fit_line(s, t)
    model = a + s / b
    assert np.max(np.abs(model / t - 1)) < 1e-4


def _errors_table() -> pd.DataFrame:
    rows = []
    for path in sample_files():
        for t in read_benchmark(path):
            rows.append(fit_table(t).summary())
    return pd.DataFrame(rows)


def test_samples_reproduced_within_bounds(samples: Path) -> None:
    """Per table: median |model/measured - 1| <= 10 % over sizes >= 1 MiB, and <= 25 % at
    every size. Prints the error table (pytest -s) for the report."""
    df = _errors_table()
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(df[["label", "n_sizes", "alpha_us", "busbw_gbps", "median_abs_error_ge_1mib",
                  "max_abs_error", "line_max_abs_error"]].round(3).to_string())  # fmt: skip
    med = df["median_abs_error_ge_1mib"].dropna()
    assert (med <= 0.10).all(), df.loc[med[med > 0.10].index, "label"].tolist()
    assert (df["max_abs_error"] <= 0.25).all(), df.loc[df["max_abs_error"] > 0.25, "label"].tolist()


def test_line_is_asymptotic_on_a_real_curve(samples: Path) -> None:
    """The fitted busbw is the large-message plateau and alpha the small-message latency:
    DGX H100 all_reduce 8 GPUs, 480 GB/s at 16 GiB and ~13-17 us at 8 B-64 KiB."""
    t = read_benchmark(samples / "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt")[0]
    fit = fit_table(t)
    assert fit.busbw_bytes_per_s == pytest.approx(478e9, rel=0.03)
    assert 12e-6 < fit.alpha_s < 18e-6
    # the efficiency curve dips where NCCL switches protocol (around 1-16 MiB)
    assert min(fit.curve.efficiency) < 0.8
    assert fit.time_s(16 * 2**30)[0] == pytest.approx(62648e-6, rel=0.02)


def test_fit_uses_the_faster_half_and_skips_zero_bytes() -> None:
    """A 5x outlier in one half (DGX sample, 32 B out-of-place) does not move the fit."""
    log = synthetic_log("all_reduce", 8, 8, 15e-6, 480e9, SIZES)
    lines = log.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split()[:1] == ["32"])
    parts = lines[i].split()
    parts[5] = "68.14"
    parts[6] = f"{32 / 68.14 / 1e3:.2f}"
    parts[7] = f"{32 / 68.14 / 1e3 * busbw_factor('all_reduce', 8):.2f}"
    lines[i] = "  ".join(parts)
    fit = fit_table(parse_text("\n".join(lines), "outlier.log")[0])
    assert fit.alpha_s == pytest.approx(15e-6, rel=0.01)
