"""`preflight` judges a program on the distinct values of the fields it checks, and walks
the ops one by one only when one might fail: same verdict and same message (the first op at
fault) as the walk alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError, SimulationError
from simulator.scenario.prepare import _passes_at_a_glance, preflight, prepare
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[2]
PREP = prepare(ROOT / "scenarios" / "quickstart.yaml")


def _program(*ops: Op) -> StepProgram:
    return StepProgram("p", list(PREP.program.rank_gpus), list(ops))


def test_the_distinct_values_decide_as_the_walk_does():
    ok = _program(
        Op("a", "compute", (0,), flops=1.0, dtype="bf16"),
        Op("b", "collective", (0, 1), collective="all_reduce", group=(0, 1, 2, 3)),
    )
    assert _passes_at_a_glance(PREP, ok, {})
    preflight(PREP, ok)
    # this GPU has no fp4 peak, but an op without FLOPs is not priced by it: the glance
    # cannot tell, the walk lets it pass
    idle = _program(Op("a", "compute", (0,), flops=0.0, dtype="fp4"), *ok.ops[1:])
    assert not _passes_at_a_glance(PREP, idle, {})
    preflight(PREP, idle)
    busy = _program(*ok.ops, Op("c", "compute", (1,), flops=1.0, dtype="fp4"))
    with pytest.raises(InputError, match=r"computes in fp4 \(op 'c'\)"):
        preflight(PREP, busy)
    hd = {"collective": "all_reduce", "algorithm": "halving_doubling"}
    odd = _program(*ok.ops, Op("d", "collective", (0,), group=(0, 1, 2), **hd))
    assert not _passes_at_a_glance(PREP, odd, {})
    with pytest.raises(SimulationError, match="power-of-two group; this group has 3 ranks"):
        preflight(PREP, odd)


def test_used_gpus_are_those_every_op_names():
    shared = (0, 1)
    program = _program(
        Op("a", "compute", (2,)),
        Op("b", "collective", shared, group=(0, 1, 3)),
        Op("c", "collective", shared, group=(0, 1, 3)),
    )
    want = sorted({program.rank_gpus[r] for op in program.ops for r in (*op.ranks, *op.group)})
    assert program.used_gpus() == want


def test_a_gpu_with_no_peak_at_all_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU file may give no peak FLOP/s (`peak_tflops: {}` loads): the message names the
    dtypes the GPU has as "none", not an empty list ("it has )"), and the one way out."""
    gpu = PREP.topology.gpu.model_copy(update={"peak_flops_per_s": {}})
    monkeypatch.setattr(PREP.topology, "gpu", gpu)
    busy = _program(Op("c", "compute", (1,), flops=1.0, dtype="bf16"))
    want = r"for bf16 \(it has none\); give bf16 in the GPU's peak_tflops$"
    with pytest.raises(InputError, match=want) as err:
        preflight(PREP, busy)
    assert "it has )" not in str(err.value)
