"""The simulated checkpoint/restart efficiency against Daly's closed-form model."""

import numpy as np
import pytest

from simulator.faults.engine import simulate_run
from simulator.faults.formulas import daly_efficiency, daly_interval_s
from simulator.faults.state import ConstantOracle

from .helpers import failures, job, policy

M_S, DELTA_S, LOAD_S = 36000.0, 300.0, 40.0
R_S = 60 + 300 + 200 + LOAD_S  # detection + queue + init + load (helpers.RESTART)
FACTORS = (0.4, 0.6, 0.8, 1.0, 1.25, 1.6, 2.2)
SEEDS, HOURS = 12, 1200.0


@pytest.fixture(scope="module")
def sweep():
    shape = job()
    fl = failures({"kind": "exponential", "target": "gpu", "mtbf_s": shape.n_gpus * M_S})
    oracle = ConstantOracle(step_s=1.0, write_s=DELTA_S, load_storage_s=LOAD_S)
    tau_d = daly_interval_s(DELTA_S, M_S)
    rows = []
    for f in FACTORS:
        tau = round(tau_d * f)
        pol = policy(kind="checkpoint_restart", interval_s=tau)
        g = [simulate_run(shape, oracle, fl, pol, HOURS * 3600, s).summary["goodput"] for s in range(SEEDS)]
        rows.append((f, tau, float(np.mean(g)), daly_efficiency(tau, DELTA_S, M_S, R_S)))
    return tau_d, rows


def test_efficiency_matches_daly_expected_time(sweep):
    """Daly 2006 (FGCS 22(3)): efficiency T_s/T_w with T_w = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ;
    the simulated goodput (exponential failures, fixed δ and R) is within 1 point at every τ."""
    _, rows = sweep
    for f, tau, sim, model in rows:
        assert abs(sim - model) < 0.01, (f, tau, sim, model)


def test_best_interval_near_daly(sweep):
    """Daly 2006: τ_opt ≈ √(2δM)[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ. The vertex of a quadratic fit
    of simulated goodput over log τ lies within 10% of it (seeds are common random numbers)."""
    tau_d, rows = sweep
    x = np.log([t for _, t, _, _ in rows])
    y = [s for _, _, s, _ in rows]
    a, b, _ = np.polyfit(x, y, 2)
    assert a < 0
    best = float(np.exp(-b / (2 * a)))
    assert best == pytest.approx(tau_d, rel=0.10)
    # and the best grid point is the Daly point or a neighbour
    assert abs(np.argmax(y) - FACTORS.index(1.0)) <= 1
