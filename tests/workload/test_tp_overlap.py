"""Tensor-parallel communication overlap (`layout.tp_comm_overlap`): T3-style fine-grained
overlap and Megatron-LM's, with their contention penalty (`tp_contention` ops).

First principles, one TP8 rank alone (pp 1, dp 1, so its compute stream is the critical
path): with T3 each reduce-scatter i runs alongside the GEMM g_i that produces it and the
GEMM is followed by a contention op of share c × g_i, so pair i takes max(g_i·(1+c), m_i)
instead of g_i + m_i; the step shortens by exactly the sum of the differences. The shares
c are the T3 paper's (Pati et al., ASPLOS'24: 1.35/1.30 - 1 for T3 with memory-controller
arbitration, §6.1; 0.21 for concurrent kernels, Fig. 6).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.workload.layout import LayoutSpec
from tests.workload.test_generate import _scenario

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "topologies" / "h100-dgx-node.yaml"
# TP-heavy: wide layers, long sequence, so GEMMs and their reduce-scatters are both large
WIDE = {
    "name": "wide",
    "layers": 2,
    "hidden_size": 8192,
    "ffn_hidden_size": 28672,
    "attention_heads": 64,
    "kv_heads": 8,
    "vocab_size": 8192,
    "seq_len": 4096,
}
LAYOUT = {"tp": 8, "sequence_parallel": True, "global_batch_size": 1}


def _run(tmp: Path, mode: str, **extra: object):  # noqa: ANN202 - (program, ops rows, summary)
    d = tmp / f"{mode}{len(list(tmp.iterdir()))}"
    d.mkdir()
    prep = prepare(_scenario(d, {**LAYOUT, "tp_comm_overlap": mode, **extra}, model=WIDE, topology=NODE))
    res = execute(prep)
    return prep.program, res.frames["ops"], res.summary


def _pairs(program, ops):  # noqa: ANN001, ANN202
    """(GEMM duration, collective duration, contention duration, what follows: its start) of
    every overlapped TP collective of rank 0, from a run with overlap on: each `tp_contention`
    op, the GEMM right before it and the TP collective issued right before that GEMM."""
    rows = ops[ops["rank"] == 0].set_index("op_id")

    def span(oid: str) -> tuple[float, float]:
        return float(rows.loc[oid, "started_at_s"]), float(rows.loc[oid, "finished_at_s"])

    mine = [op for op in program.ops if 0 in op.ranks]
    out = []
    for k, op in enumerate(mine):
        if op.tag != "tp_contention":
            continue
        gemm = mine[k - 1]
        coll = next(p for p in reversed(mine[: k - 1]) if p.tag == "tp")
        if "_ag_wgrad" in coll.id:  # sequence parallelism's backward regather (its own test)
            continue
        after = next(p for p in mine[k + 1 :] if p.kind == "compute")
        (g0, g1), (m0, m1), (c0, c1), (a0, _) = span(gemm.id), span(coll.id), span(op.id), span(after.id)
        out.append((g1 - g0, m1 - m0, c1 - c0, g0, m0, c1, m1, a0))
    return out


def test_t3_overlaps_each_reduce_scatter_with_its_gemm_and_pays_the_contention(tmp_path: Path) -> None:
    """Per pair: the collective starts with its GEMM, the contention op lasts c × the GEMM
    and follows it, and the next compute starts at max(GEMM + contention, collective end)."""
    program, ops, t3 = _run(tmp_path, "t3")
    c = LayoutSpec(global_batch_size=1, tp_comm_overlap="t3").tp_contention_share
    assert c == pytest.approx(1.35 / 1.30 - 1)
    pairs = _pairs(program, ops)
    # 2 layers x (attention, MLP) x (forward, backward), and the output layer's input gradient
    assert len(pairs) == 2 * 2 * 2 + 1
    for g, _m, cont, g0, m0, c1, m1, a0 in pairs:
        assert m0 == pytest.approx(g0, abs=1e-12)
        assert cont == pytest.approx(c * g, rel=1e-9)
        assert a0 == pytest.approx(max(c1, m1), abs=1e-12)
    # the TP-heavy layer's reduce-scatters are hidden by the share the model implies:
    # 1 - (time they still add) / (their time)
    hidden = 1 - sum(max(g * (1 + c), m) - g for g, m, *_ in pairs) / sum(m for _, m, *_ in pairs)
    assert 0.5 < hidden < 1
    _, _, base = _run(tmp_path, "none")
    assert t3["step_time_s"] < base["step_time_s"]
    assert t3["exposed_comm_by_tag_s"]["tp"] < base["exposed_comm_by_tag_s"]["tp"]


def test_the_backward_regather_runs_under_the_gemms_that_read_it(tmp_path: Path) -> None:
    """Sequence parallelism's backward all-gather of a region's input (Korthikanti et al.
    2022 §4.2.2; Megatron-LM issues it asynchronously): with no overlap mode it starts with
    its GEMM's dgrad, and the op after that GEMM's wgrad starts when both have ended."""
    program, ops, summary = _run(tmp_path, "none")
    rows = ops[ops["rank"] == 0].set_index("op_id")
    mine = [op for op in program.ops if 0 in op.ranks]
    found = 0
    for k, op in enumerate(mine):
        if "_ag_wgrad" not in op.id:
            continue
        found += 1
        seg = next(p for p in mine[k + 1 :] if p.kind == "compute")  # the dgrad and wgrad
        after = next(p for p in mine[mine.index(seg) + 1 :])
        start, end = (float(rows.loc[op.id, c]) for c in ("started_at_s", "finished_at_s"))
        seg_start, seg_end = (float(rows.loc[seg.id, c]) for c in ("started_at_s", "finished_at_s"))
        assert start == pytest.approx(seg_start, abs=1e-12)
        assert float(rows.loc[after.id, "started_at_s"]) == pytest.approx(max(end, seg_end), abs=1e-12)
    assert found == 2 * 2 + 1  # 2 layers x (attention, MLP), and the logits
    assert not (ops["tag"] == "tp_contention").any()
    # a contention share given with no overlap mode has nothing to apply to (it did apply)
    _, shared_ops, shared = _run(tmp_path, "none", tp_overlap_contention=0.5)
    assert not (shared_ops["tag"] == "tp_contention").any()
    assert shared["step_time_s"] == summary["step_time_s"]


def test_megatron_also_hides_all_gathers_and_pays_more_contention(tmp_path: Path) -> None:
    _, _, base = _run(tmp_path, "none")
    _, _, t3 = _run(tmp_path, "t3")
    _, meg_ops, meg = _run(tmp_path, "megatron")
    assert (
        meg["exposed_comm_by_tag_s"]["tp"]
        < t3["exposed_comm_by_tag_s"]["tp"]
        < base["exposed_comm_by_tag_s"]["tp"]
    )
    cont = meg_ops[meg_ops["tag"] == "tp_contention"]
    assert len(cont) > 0
    assert meg["step_time_s"] < base["step_time_s"]


def test_explicit_zero_contention_is_ideal_overlap(tmp_path: Path) -> None:
    """tp_overlap_contention 0: no contention op; a larger share lengthens the step."""
    ideal_program, _, ideal = _run(tmp_path, "t3", tp_overlap_contention=0.0)
    assert not any(op.tag == "tp_contention" for op in ideal_program.ops)
    _, _, t3 = _run(tmp_path, "t3")
    assert ideal["step_time_s"] < t3["step_time_s"]


@pytest.mark.parametrize("share", [1.5, 1e30, 1e308])
def test_a_contention_share_above_one_is_refused(share: float) -> None:
    """The share is a fraction of the GEMM's time: 1e308 made every contention op's FLOPs
    infinite and the run never ended; 1e30 simulated a step of 2e30 s without a word."""
    with pytest.raises(ValidationError, match="tp_overlap_contention"):
        LayoutSpec(
            tp=8,
            sequence_parallel=True,
            global_batch_size=1,
            tp_comm_overlap="megatron",
            tp_overlap_contention=share,
        )
    LayoutSpec(tp=8, sequence_parallel=True, global_batch_size=1, tp_overlap_contention=1.0)


def test_megatron_overlap_needs_sequence_parallel() -> None:
    with pytest.raises(ValidationError, match="needs sequence_parallel"):
        LayoutSpec(tp=8, global_batch_size=1, tp_comm_overlap="megatron")
