"""Interleaved 1F1B over uneven stages (Llama 3's layout: the first chunk of the first stage
and the last chunk of the last stage lighter, Dubey et al. 2024, §3.3.2).

First-principles check of the simulated pipeline: with free communication every rank runs
its tasks in schedule order, a forward of micro-batch i on virtual stage k waits for the
forward of i on k-1 and a backward for the backward on k+1; each task lasts (its layers) ×
(one layer's forward or backward time). `reference_makespan` computes the step from those
rules alone (no engine); the simulated step must equal it. The reference reproduces the
golden even-stage formula (v·m+p-1)·(t_f+t_b)·layers per chunk (Narayanan et al. SC'21
§2.2.2) and a hand-derived 2-stage 1F1B case.
"""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from simulator.config.loader import read_document, validate
from simulator.engine.context import SimContext
from simulator.engine.cost import ComputeCost
from simulator.engine.step import StepSimulator
from simulator.errors import InputError
from simulator.network.cluster import Cluster
from simulator.network.design.clos import SwitchSpec, build_switch
from simulator.workload.generate import WorkloadSpec, build_program
from simulator.workload.layout import LayoutSpec, stage_layer_counts, stage_layers, virtual_stage_layer_counts
from simulator.workload.memory import check_memory
from simulator.workload.model import ModelSpec
from simulator.workload.schedule import stage_schedule
from tests.workload.test_schedule import GPU, TINY
from tests.workload.test_schedule_uneven_stages import L405, ROOT, _meta_layout


def reference_makespan(
    p: int, m: int, v: int, schedule: str, fwd_s: list[float], bwd_s: list[float]
) -> float:
    """Step time of a pipeline with free communication, from the schedule's rules alone.

    Args:
        p, m, v: stages, micro-batches, chunks per rank.
        schedule: the schedule name (task order per rank from `stage_schedule`).
        fwd_s, bwd_s: duration of one forward / backward task of each virtual stage.
    """
    orders = {s: stage_schedule(schedule, p, m, v, s) for s in range(p)}
    nxt = dict.fromkeys(range(p), 0)
    free_at = dict.fromkeys(range(p), 0.0)
    done: dict[tuple[str, int, int], float] = {}
    last_vs = p * v - 1
    while any(nxt[s] < len(orders[s]) for s in range(p)):
        progressed = False
        for s in range(p):
            if nxt[s] >= len(orders[s]):
                continue
            phase, mb, c = orders[s][nxt[s]]
            vs = c * p + s
            dep = (phase, mb, vs - 1) if phase == "F" else (phase, mb, vs + 1)
            if (phase == "F" and vs == 0) or (phase == "B" and vs == last_vs):
                ready = free_at[s]
            elif dep in done:
                ready = max(free_at[s], done[dep])
            else:
                continue
            end = ready + (fwd_s[vs] if phase == "F" else bwd_s[vs])
            done[(phase, mb, vs)] = end
            free_at[s] = end
            nxt[s] += 1
            progressed = True
        if not progressed:
            raise RuntimeError("schedule deadlocks")
    return max(free_at.values())


def test_reference_reproduces_the_even_formula_and_a_hand_case() -> None:
    p, m, v, tf, tb = 4, 8, 2, 1.0, 2.0
    got = reference_makespan(p, m, v, "interleaved_1f1b", [tf] * (p * v), [tb] * (p * v))
    assert got == pytest.approx((v * m + p - 1) * (tf + tb))  # Narayanan et al. §2.2.2
    # 1F1B, p 2, m 2; stage 0: F0 F1 B0 B1 (f0 = 1, b0 = 2), stage 1: F0 B0 F1 B1 (f1 = 3,
    # b1 = 4). Stage 1: F0 [1, 4], B0 [4, 8], F1 [8, 11] (F1 of stage 0 ended at 2),
    # B1 [11, 15]; stage 0: B0 [8, 10], B1 [15, 17].
    assert reference_makespan(2, 2, 1, "1f1b", [1.0, 3.0], [2.0, 4.0]) == pytest.approx(17.0)


_TASK = re.compile(r"^([FB])(\d+)v(\d+)\.(L\d+|R\d+)\.")


def _simulate(model: ModelSpec, layout: LayoutSpec) -> tuple[float, float, float]:
    """Simulated step with free communication and free embedding/output ops; returns
    (step time, one layer's forward time, one layer's backward time)."""
    p = layout.pp
    cluster = Cluster(
        build_switch(SwitchSpec(generator="switch", gpus=p, link_gbyte_per_s=10, latency_us=0), GPU), GPU
    )
    program = build_program(model, layout, cluster.gpus, cluster.graph)
    for op in program.ops:
        if op.kind != "compute":
            op.size_bytes = 0.0
        elif any(k in op.id for k in (".emb.", ".out.", ".outb.")):
            op.flops = op.bytes_accessed = 0.0
    ctx = SimContext(0)
    sim = StepSimulator(ctx, cluster, program, ComputeCost(GPU, None, 0.0, ctx.rng("compute")))
    sim.run(1)
    rows = [r for r in sim.op_rows if r.kind == "compute" and r.tag in ("fwd", "bwd", "recompute")]
    per_task: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        got = _TASK.match(r.op_id)
        if got and got[2] == "0":
            per_task[(got[1], got[4])] += r.finished_at_s - r.started_at_s
    tf = {t for (ph, _), t in per_task.items() if ph == "F"}
    tb = {t for (ph, _), t in per_task.items() if ph == "B"}
    assert max(tf) == pytest.approx(min(tf), rel=1e-9) and max(tb) == pytest.approx(min(tb), rel=1e-9)
    t0, t1 = min(r.started_at_s for r in rows), max(r.finished_at_s for r in rows)
    return t1 - t0, min(tf), min(tb)


@pytest.mark.parametrize(
    ("layers", "pp", "v", "first", "last"),
    [
        (14, 4, 4, 3, 3),  # Llama 3's rule: chunk 0 and the last chunk hold no layer
        (14, 4, 2, 3, 3),  # 2 layers per middle chunk, the light chunks hold 1
        (15, 4, 2, 3, None),  # only the first stage lighter
    ],
)
def test_simulated_step_equals_the_first_principles_reference(
    layers: int, pp: int, v: int, first: int, last: int | None
) -> None:
    model = TINY.model_copy(update={"layers": layers})
    m = 8
    layout = LayoutSpec(
        pp=pp,
        global_batch_size=m,
        pp_schedule="interleaved_1f1b",
        virtual_stages=v,
        first_stage_layers=first,
        last_stage_layers=last,
    )
    counts = virtual_stage_layer_counts(model, layout)
    assert sum(counts) == layers
    step_s, tf, tb = _simulate(model, layout)
    want = reference_makespan(
        pp, m, v, "interleaved_1f1b", [n * tf for n in counts], [n * tb for n in counts]
    )
    assert step_s == pytest.approx(want, rel=1e-9)
    # lighter ends shorten the step against the even pipeline of the same chunk size
    even = TINY.model_copy(update={"layers": pp * v * max(counts)})
    even_s, _, _ = _simulate(
        even, LayoutSpec(pp=pp, global_batch_size=m, pp_schedule="interleaved_1f1b", virtual_stages=v)
    )
    assert step_s < even_s


def test_llama3_405b_meta_split_is_one_layer_per_chunk() -> None:
    """PP16 with 8 chunks per rank: 128 virtual stages of one layer, the first holding only
    the embedding and the last only the output layer (Dubey et al. 2024, §3.3.2)."""
    L = _meta_layout(pp_schedule="interleaved_1f1b", virtual_stages=8)
    counts = virtual_stage_layer_counts(L405, L)
    assert counts == [0] + [1] * 126 + [0]
    assert stage_layer_counts(L405, L) == [7] + [8] * 14 + [7]
    # virtual stage k > 0 holds layer k - 1: rank 0 runs virtual stages 16, 32, ..., 112
    assert stage_layers(L405, L, 0) == [16 * c - 1 for c in range(1, 8)]
    assert stage_layers(L405, L, 1) == [16 * c for c in range(8)]
    assert stage_layers(L405, L, 15) == [16 * c + 14 for c in range(7)]
    assert sorted(i for s in range(16) for i in stage_layers(L405, L, s)) == list(range(126))
    # ZeRO-1 does not fit (17.6 micro-batches of stage 1 in flight, not 15); Meta's FSDP
    # shards gradients and optimizer states (ZeRO-2), which does
    with pytest.raises(InputError, match="pipeline stage 1"):
        check_memory(L405, L, 80e9)
    check_memory(L405, _meta_layout(pp_schedule="interleaved_1f1b", virtual_stages=8, zero_stage=2), 80e9)


def test_shipped_llama3_405b_workload_runs_metas_interleaved_layout() -> None:
    """TP8 / CP1 / PP16 / DP128 (Dubey et al. 2024, Table 4, 16,384 GPUs), interleaved with
    one layer per chunk, FSDP sharding gradients and optimizer states (ZeRO-2)."""
    spec = validate(WorkloadSpec, read_document(ROOT / "workloads/llama3-405b-tp8-pp16-dp128.yaml"))
    L = spec.layout
    assert (L.tp, L.cp, L.pp, L.dp, L.pp_schedule, L.virtual_stages) == (8, 1, 16, 128, "interleaved_1f1b", 8)
    assert L.zero_stage == 2 and L.micro_batches == 16
    assert virtual_stage_layer_counts(L405, L) == [0] + [1] * 126 + [0]
    check_memory(L405, L, 80e9)
