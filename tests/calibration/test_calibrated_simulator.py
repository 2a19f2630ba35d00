"""End to end: calibrate from a sample, then the *simulator* (engine, flows, fabric) reproduces
the sample's measured times.

For every table of every sample in topologies/calibration/samples/, a profile is fitted on
that file (what `clustersim calibrate FILE` does) and replayed through the engine
(`simulator.calibration.replay`). Target: median absolute error at most
10% for sizes >= 1 MiB and at most 25% at any size.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulator.calibration.fit import fit_table
from simulator.calibration.parser import read_benchmark
from simulator.calibration.profile import build_profile
from simulator.calibration.replay import replay
from tests.calibration.logs import SAMPLES, sample_files

FILES = sample_files()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_calibrated_simulator_reproduces_each_sample(path):
    for table in read_benchmark(path):
        res = replay(table, build_profile("p", [fit_table(table)]))
        err = res["rel_error"].abs()
        big = err[res["size_bytes"] >= 2**20]
        med = float(np.median(big)) if len(big) else 0.0
        assert med <= 0.10, (
            f"{table.collective} {table.n_nodes} nodes: median error {med:.1%} for sizes >= 1 MiB"
        )
        assert err.max() <= 0.25, f"{table.collective} {table.n_nodes} nodes: max error {err.max():.1%}"


def test_replay_matches_the_fitted_curve_alone_on_the_fabric():
    """Alone on the fabric, a calibrated collective takes exactly the profile's fitted time."""
    table = read_benchmark(SAMPLES / "h100-16gpu-2node-allreduce-aws-p5-efa.txt")[0]
    profile = build_profile("p", [fit_table(table)])
    res = replay(table, profile)
    fit = profile.collective("all_reduce", 16, 2, 2**30)
    expected = fit.times_s(res["size_bytes"].to_numpy())
    assert res["simulated_s"].to_numpy() == pytest.approx(expected, rel=1e-9)
