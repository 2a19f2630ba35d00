"""Uneven pipeline stages: `first_stage_layers` / `last_stage_layers` (Megatron-LM's
`decoder_first_pipeline_num_layers` / `decoder_last_pipeline_num_layers`).

Golden case: Llama 3 405B on pp 16 holds 126 = 7 + 14×8 + 7 layers ("The Llama 3 Herd of
Models", Dubey et al. 2024, §3.3.2: one layer fewer on the first and the last stage).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from simulator.config.loader import read_document, validate
from simulator.errors import InputError
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.workload.generate import WorkloadSpec, layout_label
from simulator.workload.layout import (
    LayoutSpec,
    end_rank_params,
    layer_rank_params,
    stage_layer_counts,
    stage_layers,
    stage_rank_params,
    virtual_stage_layers,
)
from simulator.workload.layout_rules import check_layout
from simulator.workload.memory import check_memory, memory_per_stage, model_state_bytes
from simulator.workload.model import ModelSpec, load_model
from simulator.workload.step_flops import stage_flops, step_flops
from tests.workload.flops_reference import dp_comms

ROOT = Path(__file__).resolve().parents[2]
L405 = load_model(ROOT / "workloads/models/llama3-405b.yaml")
TOPO_2N = ROOT / "topologies/h100-rail-clos-2n.yaml"
# Llama-3-8B-shaped, shrunk (as in test_generate.py); `layers` set per test
TINY = {
    "name": "tiny-llama",
    "layers": 10,
    "hidden_size": 1024,
    "ffn_hidden_size": 3584,
    "attention_heads": 8,
    "kv_heads": 2,
    "vocab_size": 8192,
    "seq_len": 1024,
}


def _meta_layout(**kw: object) -> LayoutSpec:
    """Meta's 405B layout: TP8 (SP) / PP16 1F1B / DP128, 16 micro-batches, 7 + 14×8 + 7."""
    base: dict[str, object] = {
        "tp": 8,
        "sequence_parallel": True,
        "pp": 16,
        "dp": 128,
        "zero_stage": 1,
        "global_batch_size": 2048,
        "recompute": "selective",
        "first_stage_layers": 7,
        "last_stage_layers": 7,
    }
    base.update(kw)
    return LayoutSpec(**base)


# ---- the split ----------------------------------------------------------------------------


def test_llama3_405b_on_pp16_is_7_14x8_7() -> None:
    L = _meta_layout()
    assert stage_layer_counts(L405, L) == [7] + [8] * 14 + [7]
    assert stage_layers(L405, L, 0) == list(range(7))
    assert stage_layers(L405, L, 1) == list(range(7, 15))
    assert stage_layers(L405, L, 14) == list(range(111, 119))
    assert stage_layers(L405, L, 15) == list(range(119, 126))
    # every layer on exactly one stage, in order
    assert [i for s in range(16) for i in stage_layers(L405, L, s)] == list(range(126))
    assert check_layout(L405, L, 16384, 8) == []
    assert "layers=7+14x8+7" in layout_label(L, L405)


def test_only_first_or_only_last_given() -> None:
    """The stages not given split the rest evenly (Megatron-LM's rule)."""
    first_only = _meta_layout(first_stage_layers=6, last_stage_layers=None)
    last_only = _meta_layout(first_stage_layers=None, last_stage_layers=6)
    assert stage_layer_counts(L405, first_only) == [6] + [8] * 15
    assert stage_layer_counts(L405, last_only) == [8] * 15 + [6]


def test_even_split_is_unchanged() -> None:
    L = _meta_layout(first_stage_layers=None, last_stage_layers=None, pp=14, dp=128)
    assert stage_layer_counts(L405, L) == [9] * 14
    assert list(virtual_stage_layers(L405, L, 3)) == list(range(27, 36))
    inter = LayoutSpec(pp=4, virtual_stages=2, pp_schedule="interleaved_1f1b", global_batch_size=8)
    m = ModelSpec(**{**TINY, "layers": 16})
    assert stage_layers(m, inter, 1) == [2, 3, 10, 11]  # chunks 1 and 5 (Megatron)


@pytest.mark.parametrize(
    ("kw", "field", "match"),
    [
        (
            {"first_stage_layers": 8},
            "layout.first_stage_layers",
            (
                r"llama3-405b has 126 layers; first_stage_layers \(8\) \+ last_stage_layers \(7\) "
                r"leave 111 for the other 14 stages, which must split them evenly"
            ),
        ),
        (
            {"first_stage_layers": None, "last_stage_layers": 7},
            "layout.last_stage_layers",
            r"last_stage_layers \(7\) leave 119 for the other 15 stages",
        ),
        (
            {"first_stage_layers": 100, "last_stage_layers": 20},
            "layout.first_stage_layers",
            r"leave 6 for the other 14 stages, which must split them evenly with at least one",
        ),
        (
            {"pp": 2, "dp": 1024},
            "layout.first_stage_layers",
            (
                r"with pp = 2, first_stage_layers \(7\) \+ last_stage_layers \(7\) must equal the "
                r"126 layers"
            ),
        ),
        ({"pp": 1, "dp": 2048}, "layout.first_stage_layers", r"needs pp >= 2"),
        (  # middle stages of 8 layers do not split into 3 equal chunks
            {"pp_schedule": "interleaved_1f1b", "virtual_stages": 3},
            "layout.virtual_stages",
            r"the 8 layers of each middle stage must split into 3 equal chunks",
        ),
        (  # v 4 with 2 layers per chunk: the first stage holds 6..8
            {
                "pp_schedule": "interleaved_1f1b",
                "virtual_stages": 4,
                "first_stage_layers": 4,
                "last_stage_layers": 10,
            },
            "layout.first_stage_layers",
            r"first_stage_layers \(4\) with virtual_stages = 4 and 2 layers per middle chunk "
            r"must lie in 6..8",
        ),
        (
            {"pp_schedule": "interleaved_1f1b", "virtual_stages": 2, "pp": 2, "dp": 1024},
            "layout.first_stage_layers",
            r"interleaved_1f1b with first_stage_layers \(7\) \+ last_stage_layers \(7\) needs pp >= 3",
        ),
    ],
)
def test_bad_uneven_specs_say_what_and_where(kw: dict, field: str, match: str) -> None:
    L = _meta_layout(**kw)
    with pytest.raises(InputError, match=match) as err:
        check_layout(L405, L, L.world_size, 8)
    assert err.value.field == field
    with pytest.raises(InputError, match=match):  # direct users of the split see it too
        stage_layers(L405, L, 0)


def test_counts_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="first_stage_layers"):
        _meta_layout(first_stage_layers=0)


def test_bad_split_in_a_workload_file_names_file_line_and_field(tmp_path: Path) -> None:
    path = _scenario(tmp_path, 10, first=3, last=2)  # 10 - 5 = 5 over 2 middle stages
    with pytest.raises(InputError) as err:
        prepare(path)
    text = str(err.value)
    assert re.search(r"workload\.yaml:\d+: layout\.first_stage_layers: ", text), text
    assert "leave 5 for the other 2 stages" in text


# ---- totals over stages equal per-layer sums ----------------------------------------------


def test_params_and_state_totals_equal_the_even_split() -> None:
    """Moving layers between stages moves their parameters, nothing else: the sum over
    stages equals the per-layer sum plus the ends, and equals an even split's (pp 14)."""
    uneven = _meta_layout()
    even = _meta_layout(first_stage_layers=None, last_stage_layers=None, pp=14)
    per_layer = sum(layer_rank_params(L405, uneven, i).total for i in range(126))
    ends = sum(end_rank_params(L405, uneven, s).total for s in (0, 15))
    got = sum(stage_rank_params(L405, uneven, s).total for s in range(16))
    assert got == pytest.approx(per_layer + ends, rel=1e-12)
    assert got == pytest.approx(sum(stage_rank_params(L405, even, s).total for s in range(14)), rel=1e-12)
    for part in ("weights_bytes", "gradients_bytes", "optimizer_bytes"):
        a = sum(getattr(model_state_bytes(L405, uneven, s), part) for s in range(16))
        b = sum(getattr(model_state_bytes(L405, even, s), part) for s in range(14))
        assert a == pytest.approx(b, rel=1e-12)


def test_flops_totals_equal_the_even_split() -> None:
    """Per-stage FLOPs follow the layer counts; their sum (hence `step_flops`) does not
    depend on how layers are split."""
    uneven = _meta_layout()
    even = _meta_layout(first_stage_layers=None, last_stage_layers=None, pp=14)
    per_stage = [stage_flops(L405, uneven, s) for s in range(16)]
    # a middle stage has 8 layers, the first 7 (no output layer on either)
    assert per_stage[1] == pytest.approx(per_stage[0] * 8 / 7, rel=1e-12)
    assert sum(per_stage) == pytest.approx(sum(stage_flops(L405, even, s) for s in range(14)), rel=1e-12)
    assert step_flops(L405, uneven) == pytest.approx(step_flops(L405, even), rel=1e-12)


def test_memory_follows_layers_and_names_the_stage_that_does_not_fit() -> None:
    """Meta's layout fits 80 GB with selective recompute; the peak is stage 1 (8 layers ×
    15 micro-batches in flight), not stage 0 (7 × 16 plus the embedding)."""
    L = _meta_layout()
    rows = check_memory(L405, L, 80e9)
    peak = max(rows, key=lambda r: r.total_bytes)
    assert peak.stage == 1 and peak.total_bytes < 80e9
    assert rows[0].total_bytes < rows[1].total_bytes
    # 8 layers on stage 0 (the 128-layer stand-in) would not have fit
    m128 = L405.model_copy(update={"layers": 128})
    even = _meta_layout(first_stage_layers=None, last_stage_layers=None)
    assert memory_per_stage(m128, even)[0].total_bytes > 80e9
    cap = (rows[0].total_bytes + rows[1].total_bytes) / 2
    with pytest.raises(InputError, match=r"pipeline stage 1 \(ranks .*\) needs .* for its 8 layers"):
        check_memory(L405, L, cap)


# ---- generated programs and simulation ----------------------------------------------------


def _scenario(tmp: Path, layers: int, *, first: int | None = None, last: int | None = None) -> Path:
    """TP2 (SP) / PP4 1F1B / DP2 on 16 GPUs, 8 micro-batches."""
    (tmp / "model.yaml").write_text(yaml.safe_dump({**TINY, "layers": layers}))
    layout: dict = {
        "tp": 2,
        "sequence_parallel": True,
        "pp": 4,
        "dp": 2,
        "zero_stage": 1,
        "global_batch_size": 16,
    }
    if first is not None:
        layout["first_stage_layers"] = first
    if last is not None:
        layout["last_stage_layers"] = last
    wl = {"model": {"file": "model.yaml"}, "layout": layout}
    (tmp / "workload.yaml").write_text(yaml.safe_dump(wl, sort_keys=False))
    sc = {
        "name": "t",
        "topology": {"file": str(TOPO_2N)},
        "workload": {"file": "workload.yaml"},
        "network": {"record_links": False},
        "run": {"steps": 1},
    }
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(sc, sort_keys=False))
    return path


_LAYER_OP = re.compile(r"^([FB])(\d+)v(\d+)\.L(\d+)\.")


def test_generator_emits_each_stage_its_own_layers(tmp_path: Path) -> None:
    """10 layers on pp 4 as 2 + 3 + 3 + 2: every micro-batch runs exactly its stage's layers
    forward and backward, and the same ops per layer as any other stage."""
    prep = prepare(_scenario(tmp_path, 10, first=2, last=2))
    program = prep.program
    assert "layers=2+2x3+2" in program.meta["layout"]
    want = {0: range(2), 1: range(2, 5), 2: range(5, 8), 3: range(8, 10)}
    m = 8
    seen: dict[int, set] = {s: set() for s in want}
    ops_per_layer: dict[int, int] = {}
    for op in program.ops:
        got = _LAYER_OP.match(op.id)
        if not got or op.kind != "compute":
            continue
        phase, mb, vs, layer = got[1], int(got[2]), int(got[3]), int(got[4])
        assert layer in want[vs], (op.id, want[vs])
        seen[vs].add((phase, mb, layer))
        ops_per_layer[layer] = ops_per_layer.get(layer, 0) + 1
    for s, layers in want.items():
        assert seen[s] == {(ph, mb, i) for ph in "FB" for mb in range(m) for i in layers}
    assert len(set(ops_per_layer.values())) == 1  # every layer emits the same ops
    # each stage's DP reduce-scatters carry its own layers' gradients (`dp_comms`)
    model = load_model(tmp_path / "model.yaml")
    layout = validate(WorkloadSpec, read_document(tmp_path / "workload.yaml")).layout
    for rank, role in program.role.items():
        stage = int(role.removeprefix("pp"))
        want_bytes = sum(c.bytes for c in dp_comms(model, layout, stage) if c.collective == "reduce_scatter")
        got_bytes = sum(
            op.size_bytes
            for op in program.ops
            if op.tag == "dp" and op.collective == "reduce_scatter" and rank in op.ranks
        )
        assert got_bytes == pytest.approx(want_bytes)
    rs = {s: sum(c.bytes for c in dp_comms(model, layout, s)) for s in range(4)}
    assert rs[1] == rs[2] > rs[0]  # 3 layers vs 2 (+ the embedding on stage 0)


def test_uneven_step_time_lies_between_the_even_bounds(tmp_path: Path) -> None:
    """2 + 3 + 3 + 2 layers do at least the work of 2 per stage and at most that of 3 per
    stage on every stage (same ends, same schedule, same traffic per layer), so the step time
    is bounded by the even 8- and 12-layer models; strictly, since stages 1-2 have more
    layers than the 8-layer model and stages 0, 3 fewer than the 12-layer one."""
    times = {}
    for name, layers, first, last in (
        ("even8", 8, None, None),
        ("uneven10", 10, 2, 2),
        ("even12", 12, None, None),
    ):
        d = tmp_path / name
        d.mkdir()
        s = execute(prepare(_scenario(d, layers, first=first, last=last))).summary
        assert s["compute_s"] + s["exposed_comm_s"] + s["idle_s"] == pytest.approx(s["step_time_s"], rel=1e-9)
        times[name] = s["step_time_s"]
    assert times["even8"] < times["uneven10"] < times["even12"], times


def test_catalog_workload_is_meta_layout() -> None:
    spec = validate(WorkloadSpec, read_document(ROOT / "workloads/llama3-405b-tp8-pp16-dp128.yaml"))
    L = spec.layout
    assert (L.tp, L.pp, L.dp, L.micro_batch_size, L.global_batch_size) == (8, 16, 128, 1, 2048)
    assert L.global_batch_size * L405.seq_len == 16 * 1024 * 1024  # 16M tokens
    assert stage_layer_counts(L405, L) == [7] + [8] * 14 + [7]
    check_memory(L405, L, 80e9)
