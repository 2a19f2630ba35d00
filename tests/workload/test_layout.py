"""Parallel layouts: validation rules, rank placement and groups."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from simulator.errors import InputError
from simulator.workload.layout import (
    LayoutSpec,
    RankGrid,
    stage_layers,
)
from simulator.workload.layout_rules import check_layout
from simulator.workload.model import ModelSpec, load_model
from simulator.workload.schedule import in_flight_micro_batches

MODELS = Path(__file__).resolve().parents[2] / "workloads" / "models"
LLAMA70 = load_model(MODELS / "llama3-70b.yaml")
MIXTRAL = load_model(MODELS / "mixtral-8x7b.yaml")


def _layout(**kw: object) -> LayoutSpec:
    base: dict[str, object] = {"dp": 4, "tp": 8, "pp": 4, "global_batch_size": 64}
    base.update(kw)
    return LayoutSpec(**base)


def test_good_layout_passes() -> None:
    assert check_layout(LLAMA70, _layout(sequence_parallel=True), 128, 8) == []
    assert _layout().micro_batches == 16


def test_yaml_human_units_and_fsdp_alias() -> None:
    L = LayoutSpec.model_validate({"global_batch_size": 8, "grad_bucket_mb": 25, "zero_stage": "fsdp"})
    assert L.grad_bucket_bytes == 25 * 1024 * 1024
    assert L.zero_stage == 3


@pytest.mark.parametrize(
    ("kw", "n", "gpn", "model", "match"),
    [
        ({}, 64, 8, LLAMA70, r"dp·tp·pp·cp = 4·8·4·1 = 128 must equal the GPU count 64"),
        ({"tp": 3, "dp": 8, "pp": 1}, 24, 8, LLAMA70, r"attention_heads \(64\).*tp \(3\)"),
        (
            {"pp": 3, "dp": 4},
            96,
            8,
            LLAMA70,
            r"layers \(80\).*pp·virtual_stages = 3·1 = 3, or give first_stage_layers",
        ),
        ({"tp": 16, "dp": 2}, 128, 8, LLAMA70, r"kv_heads \(8\)|exceeds GPUs per node"),
        ({"ep": 2}, 128, 8, LLAMA70, r"ep = 2 but llama3-70b has no MoE"),
        (
            {"ep": 3, "dp": 6, "tp": 1, "pp": 1, "global_batch_size": 60},
            6,
            8,
            MIXTRAL,
            r"experts \(8\) must be divisible by ep \(3\)",
        ),
        ({"ep": 8, "tp": 1, "pp": 1}, 4, 8, MIXTRAL, r"dp \(4\) must be divisible by ep \(8\)"),
        ({"global_batch_size": 66}, 128, 8, LLAMA70, r"global_batch_size \(66\).*1·4 = 4"),
        (
            {"pp_schedule": "interleaved_1f1b", "virtual_stages": 2, "global_batch_size": 24},
            128,
            8,
            LLAMA70,
            r"micro-batches \(6\) divisible by pp \(4\)",
        ),
        (
            {"cp": 3, "dp": 1, "pp": 4, "tp": 8, "global_batch_size": 4},
            96,
            8,
            LLAMA70,
            r"seq_len \(8192\) must be divisible by 2·cp = 6",
        ),
        ({"tp": 8}, 128, 4, LLAMA70, r"tp \(8\) exceeds GPUs per node \(4\)"),
    ],
)
def test_bad_layouts_name_the_constraint(kw: dict, n: int, gpn: int, model: ModelSpec, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        check_layout(model, _layout(**kw), n, gpn)
    assert str(err.value).startswith("layout.")


def test_kv_heads_replication_rule() -> None:
    """kv_heads < tp is allowed when tp % kv_heads == 0 (KV heads replicated)."""
    m = ModelSpec(
        name="g",
        layers=4,
        hidden_size=1024,
        ffn_hidden_size=4096,
        attention_heads=16,
        kv_heads=2,
        vocab_size=1000,
        seq_len=128,
    )
    check_layout(m, LayoutSpec(tp=8, global_batch_size=1), 8, 8)
    m3 = m.model_copy(update={"kv_heads": 4})
    check_layout(m3, LayoutSpec(tp=8, global_batch_size=1), 8, 8)
    m_bad = ModelSpec(
        name="g",
        layers=4,
        hidden_size=1536,
        ffn_hidden_size=4096,
        attention_heads=12,
        kv_heads=3,
        vocab_size=1000,
        seq_len=128,
    )
    with pytest.raises(InputError, match=r"tp \(4\) must be a multiple of kv_heads \(3\)"):
        check_layout(m_bad, LayoutSpec(tp=4, global_batch_size=1), 4, 8)


def test_schema_rejects_inconsistent_fields() -> None:
    with pytest.raises(ValidationError, match="virtual_stages >= 2"):
        LayoutSpec(pp=2, pp_schedule="interleaved_1f1b", global_batch_size=4)
    with pytest.raises(ValidationError, match="permutation"):
        LayoutSpec(placement="tp,dp,pp", global_batch_size=4)
    with pytest.raises(ValidationError):
        LayoutSpec(zero_stage=4, global_batch_size=4)


def test_warns_when_placement_spreads_tp_over_nodes() -> None:
    L = _layout(placement="dp,tp,cp,ep,pp")
    warnings = check_layout(LLAMA70, L, 128, 8)
    assert any("tensor-parallel groups over servers" in w for w in warnings)


def test_rank_round_trip_and_default_order() -> None:
    L = LayoutSpec(dp=4, tp=2, pp=2, cp=2, ep=2, global_batch_size=8)
    g = RankGrid(L)
    assert g.world_size == 32
    seen = set()
    for r in range(32):
        c = g.coords(r)
        assert g.rank(dp=c.dp, pp=c.pp, tp=c.tp, cp=c.cp) == r
        assert c.ep == c.dp % 2 and c.edp == c.dp // 2
        seen.add((c.dp, c.pp, c.tp, c.cp))
    assert len(seen) == 32
    # innermost first: tp, then cp, then ep, then pp, then the outer dp factor
    assert g.coords(1).tp == 1
    assert g.coords(2).cp == 1
    assert g.coords(4).ep == 1 and g.coords(4).dp == 1
    assert g.coords(8).pp == 1
    assert g.coords(16).dp == 2


def test_groups_partition_the_ranks() -> None:
    L = LayoutSpec(dp=4, tp=2, pp=2, cp=2, ep=2, global_batch_size=8)
    g = RankGrid(L)
    sizes = {"tp": 2, "cp": 2, "pp": 2, "dp": 4, "ep": 2, "edp": 4, "dp_cp": 8}
    for kind, size in sizes.items():
        groups = g.groups(kind)
        assert all(len(x) == size for x in groups), kind
        assert sorted(r for x in groups for r in x) == list(range(32)), kind
    assert g.group_of("tp", 0) == [0, 1]
    assert g.group_of("pp", 0) == [0, 8]
    assert g.group_of("ep", 0) == [0, 4]
    assert g.group_of("dp", 0) == [0, 4, 16, 20]


def test_stage_layers_interleaved() -> None:
    """Megatron interleaving: chunk v of rank p holds block (v·pp + p)."""
    L = LayoutSpec(pp=4, pp_schedule="interleaved_1f1b", virtual_stages=2, global_batch_size=8)
    assert stage_layers(LLAMA70, L, 1) == [*range(10, 20), *range(50, 60)]
    L1 = LayoutSpec(pp=4, global_batch_size=8)
    assert stage_layers(LLAMA70, L1, 3) == list(range(60, 80))


def test_in_flight_micro_batches() -> None:
    """1F1B: stage i holds pp - i; GPipe: all m; interleaved stage 0: pp·(1 + (pp-1)/(pp·v))
    (Korthikanti et al. 2022 §4.2.3)."""
    L = LayoutSpec(pp=4, global_batch_size=16)
    assert [in_flight_micro_batches(L, s) for s in range(4)] == [4, 3, 2, 1]
    G = LayoutSpec(pp=4, pp_schedule="gpipe", global_batch_size=16)
    assert in_flight_micro_batches(G, 3) == 16
    interleaved = LayoutSpec(pp=4, pp_schedule="interleaved_1f1b", virtual_stages=2, global_batch_size=16)
    assert in_flight_micro_batches(interleaved, 0) == pytest.approx(4 * (1 + 3 / 8))
