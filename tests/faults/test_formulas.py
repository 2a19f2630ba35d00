"""Golden checks of the closed-form checkpoint models."""

import math

import pytest

from simulator.faults.formulas import (
    daly_efficiency,
    daly_expected_time_s,
    daly_interval_s,
    young_interval_s,
)


def test_young_interval():
    """Young 1974, CACM 17(9): τ = √(2δM); δ = 300 s, M = 10 h gives √(2·300·36000) = 4647.58 s."""
    assert young_interval_s(300, 36000) == pytest.approx(4647.580015, rel=1e-9)


def test_daly_interval():
    """Daly 2006, FGCS 22(3): τ = √(2δM)[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ for δ < 2M.

    δ = 300 s, M = 36000 s: x = δ/2M = 1/240, √(2δM) = 4647.58, τ = 4647.58·(1 + 0.021517
    + 0.000463) − 300 = 4449.73 s.
    """
    x = 300 / 72000
    expected = math.sqrt(2 * 300 * 36000) * (1 + math.sqrt(x) / 3 + x / 9) - 300
    assert daly_interval_s(300, 36000) == pytest.approx(expected, rel=1e-12)
    assert daly_interval_s(300, 36000) == pytest.approx(4449.7317, rel=1e-6)


def test_daly_interval_large_cost_is_mtbf():
    """Daly 2006: for δ >= 2M the optimum interval is M."""
    assert daly_interval_s(100, 40) == 40


def test_daly_expected_time_and_efficiency():
    """Daly 2006, FGCS 22(3): T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ; efficiency is T_s/T_w."""
    m, d, r, tau = 36000.0, 300.0, 600.0, 4000.0
    tw = daly_expected_time_s(1000.0, tau, d, m, r)
    assert tw == pytest.approx(m * math.exp(r / m) * (math.exp((tau + d) / m) - 1) * 1000.0 / tau)
    assert daly_efficiency(tau, d, m, r) == pytest.approx(1000.0 / tw)
    # no failures in the limit: efficiency tends to τ/(τ+δ)
    assert daly_efficiency(tau, d, 1e12, r) == pytest.approx(tau / (tau + d), rel=1e-6)


def test_daly_interval_maximizes_expected_model():
    """Daly's τ is within 1% of the numerical optimum of his T_w model (δ << M)."""
    m, d, r = 36000.0, 300.0, 600.0
    grid = [d * k / 100 for k in range(100, 10000)]
    best = max(grid, key=lambda t: daly_efficiency(t, d, m, r))
    assert daly_interval_s(d, m) == pytest.approx(best, rel=0.01)
