"""Random streams of failure and degradation sources: repeated sources draw independently,
and the first source with a name keeps the stream it always had."""

from __future__ import annotations

import numpy as np

from simulator.faults.degradation import sample_degradations
from simulator.faults.failure import sample_failures
from simulator.streams import stream, unique_names
from tests.faults.helpers import degradations, failures, job

MTBF_S = 100 * 3600.0
DURATION_S = 1000 * 3600.0
HBM = {"kind": "exponential", "target": "gpu", "mtbf_s": MTBF_S, "cause": "hbm"}


def test_unique_names_keep_first_and_skip_other_sources_names() -> None:
    assert unique_names(["a", "b"]) == ["a", "b"]
    # the repeat of "a" may not take "a/1": a later source is named that
    assert unique_names(["a", "a", "a/1", "a"]) == ["a", "a/2", "a/1", "a/3"]


def test_two_sources_with_one_cause_fail_independently() -> None:
    shape = job(64)
    one = sample_failures(failures(HBM), shape, DURATION_S, 3)
    two = sample_failures(failures(HBM, HBM), shape, DURATION_S, 3)
    first = [(e.time_s, e.component) for e in two if e.source == 0]
    second = [(e.time_s, e.component) for e in two if e.source == 1]
    # the first source is exactly the single-source timeline (its stream is unchanged)
    assert first == [(e.time_s, e.component) for e in one]
    # the repeat is its own process: no common instant, and its own Poisson count,
    # 64 GPUs x 1000 h / 100 h = 640 expected, within 4 standard deviations (sqrt(640) ~ 25)
    assert not {t for t, _ in first} & {t for t, _ in second}
    assert abs(len(second) - 640) < 4 * 640**0.5
    # streams by name: failure/gpu/hbm for the first, failure/gpu/hbm/1 for the repeat
    for source, name in ((0, "failure/gpu/hbm"), (1, "failure/gpu/hbm/1")):
        t0 = stream(3, name).exponential(MTBF_S, 64)
        got = min(e.time_s for e in two if e.source == source)
        assert got == float(t0.min())
        assert np.argmin(t0) == next(e.component for e in two if e.source == source)


def test_two_alike_degradations_are_independent() -> None:
    straggler = {"kind": "straggler", "mtbe_h": 200, "duration_h": 1, "slowdown": 1.5, "cause": "thermal"}
    one = sample_degradations(degradations(straggler), job(64), DURATION_S, 0)
    two = sample_degradations(degradations(straggler, straggler), job(64), DURATION_S, 0)
    starts = [sorted(c.time_s for c in two if c.start and c.source == k) for k in (0, 1)]
    assert starts[0] == sorted(c.time_s for c in one if c.start)
    assert starts[1] and not set(starts[0]) & set(starts[1])
