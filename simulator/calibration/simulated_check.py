"""`clustersim calibrate --check PROFILE LOGS --topology FILE`: a profile checked through the
simulator, as a run would apply it.

What is modelled: each measured table is replayed (`simulator.calibration.replay`: one
collective per measured size, one after another) on the topology file's system resized to
the table's node count (`simulator.calibration.joint.resized_cluster`), with the profile
applied through the engine's calibration hook: its curve entries where they were measured,
its fitted physical parameters (`collective_params`) everywhere else. So a profile fitted
on one node is scored on two, which the curve-only check cannot do (it has no entry for
that scope).

What is simplified: a table whose GPUs and servers the topology cannot hold is refused
(`check_fits`); the replay's clock is the simulator's, so the predicted times are those a
scenario on that system would see for one collective alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from simulator.calibration.apply import ProfileTuning
from simulator.calibration.fit import error_frame
from simulator.calibration.joint import check_fits, resized_cluster
from simulator.calibration.profile import CalibrationProfile
from simulator.calibration.replay import replay
from simulator.calibration.table import BenchmarkTable


def simulated_source(profile: CalibrationProfile, table: BenchmarkTable, size_bytes: float) -> str | None:
    """What prices `table`'s collective in a run (the `using ...` line of the check), or None
    when the profile has nothing for it (no curve entry of its scope, no fitted parameters)."""
    fit = profile.collective(table.collective, table.n_gpus, table.n_nodes, size_bytes)
    if fit is not None and not fit.predicted:
        return fit.source
    if profile.collective_params is not None:
        on = profile.collective_params.topology
        return f"fitted collective parameters (collective_params, fitted on {on})"
    return fit.source if fit is not None else None


def simulated_errors(
    profile: CalibrationProfile, table: BenchmarkTable, topology: Path, half: str
) -> tuple[pd.DataFrame, list[str]]:
    """(the table's error frame as `error_frame` makes it, with the simulator's times as the
    model's; the calibration warnings of the replay, e.g. a profile of another GPU).

    Raises:
        InputError: the topology cannot hold the table's GPUs and servers.
    """
    cluster = resized_cluster(topology, table.n_nodes)
    check_fits(table, cluster, topology)
    tuning = ProfileTuning([(profile.name, profile)])
    res = replay(table, profile, cluster=cluster, half=half, tuning=tuning)
    simulated = dict(zip(res["size_bytes"].tolist(), res["simulated_s"].tolist(), strict=True))
    frame = error_frame(table, lambda sizes: np.array([simulated[float(s)] for s in sizes]), half=half)
    return frame, tuning.warnings
