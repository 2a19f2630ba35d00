"""The Llama 3 405B failure preset against the paper's numbers."""

import numpy as np
import pytest

from simulator.faults.engine import simulate_run
from simulator.faults.failure import interruption_rate_per_s, sample_failures
from simulator.faults.preset import LLAMA3_TABLE5, llama3_405b, reference_job
from simulator.faults.state import ConstantOracle, JobShape

from .helpers import policy


def test_table5_counts_sum_to_419():
    """Dubey et al. 2024, The Llama 3 Herd of Models, Table 5: 419 unexpected interruptions
    in 54 days (148+72+54+35+32+19+17+7+7+6+6+16)."""
    assert sum(c for _, _, c in LLAMA3_TABLE5) == 419
    assert [c for _, _, c in LLAMA3_TABLE5][:3] == [148, 72, 54]


def test_preset_reproduces_419_expected_interruptions():
    """Per-component MTBF = components × 54 d × 24 h / count, so on the reference job
    (16,384 GPUs) the expected number of interruptions in 54 days is 419."""
    rate = interruption_rate_per_s(llama3_405b(), reference_job())
    assert rate * 54 * 86400 == pytest.approx(419, rel=1e-9)
    faulty_gpu = llama3_405b()[0]
    assert faulty_gpu.mtbf_s / 3600 == pytest.approx(16384 * 54 * 24 / 148)


def test_preset_sampled_counts():
    """Sampled 54-day timelines average ~419 failures (Poisson sd ≈ 20)."""
    n = [len(sample_failures(llama3_405b(), reference_job(), 54 * 86400, s)) for s in range(10)]
    assert np.mean(n) == pytest.approx(419, abs=3 * 20.5 / np.sqrt(10))


def test_preset_scales_with_job_size():
    """Rates are per component: half the GPUs and hosts, half the interruptions."""
    half = JobShape(n_gpus=8192, gpus_per_node=8, gpus_per_replica=128)
    rate = interruption_rate_per_s(llama3_405b(), half)
    assert rate * 54 * 86400 == pytest.approx(419 / 2, rel=1e-9)


def test_preset_planned_interruptions():
    specs = llama3_405b(include_planned=True)
    planned = [
        e for e in sample_failures(specs, reference_job(), 54 * 86400, 0) if e.cause == "planned maintenance"
    ]
    assert len(planned) == 47


def test_preset_run_level_mtti():
    """A 54-day run on the reference job sees ~419 interruptions: job MTTI ≈ 3.1 h."""
    r = simulate_run(
        reference_job(),
        ConstantOracle(step_s=10.0, write_s=60.0),
        llama3_405b(),
        policy(kind="checkpoint_restart", interval="daly"),
        54 * 86400,
        0,
    )
    assert r.summary["interruptions"] == pytest.approx(419, abs=70)
    assert r.summary["job_mtti_s"] / 3600 == pytest.approx(54 * 24 / 419, rel=0.2)
