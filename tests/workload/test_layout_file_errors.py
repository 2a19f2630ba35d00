"""A layout or model that cannot run is refused from its files at the key at fault, on
one line (`file:line: field.path: message`), before any simulation starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.scenario.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "topologies" / "h100-rail-clos-2n.yaml"

MODEL = """\
name: small
layers: 8
hidden_size: 2048
ffn_hidden_size: 5632
attention_heads: 16
kv_heads: 4
vocab_size: 32000
seq_len: 2048
"""


def _scenario(tmp_path: Path, layout: str, model: str = MODEL) -> Path:
    """A 16-GPU scenario over this model and layout (the layout's keys from line 3)."""
    (tmp_path / "m.yaml").write_text(model)
    (tmp_path / "w.yaml").write_text("model: {file: m.yaml}\nlayout:\n" + layout)
    s = tmp_path / "s.yaml"
    s.write_text(f"name: s\ntopology: {{file: {TOPO}}}\nworkload: {{file: w.yaml}}\nrun: {{steps: 1}}\n")
    return s


def _refusal(tmp_path: Path, layout: str, model: str = MODEL) -> InputError:
    """The error `prepare` raises for that scenario."""
    with pytest.raises(InputError) as err:
        prepare(_scenario(tmp_path, layout, model))
    return err.value


@pytest.mark.parametrize(
    ("layout", "line", "field", "needle"),
    [
        (
            "  dp: 4\n  pp: 4\n  pp_schedule: interleaved_1f1b\n  global_batch_size: 16\n",
            5,
            "layout.pp_schedule",
            "needs virtual_stages >= 2",
        ),
        (
            "  dp: 4\n  pp: 4\n  virtual_stages: 2\n  global_batch_size: 16\n",
            5,
            "layout.virtual_stages",
            "needs pp_schedule interleaved_1f1b",
        ),
        (  # one stage has no second pipeline rank to interleave with: the run crashed
            "  dp: 8\n  tp: 2\n  pp_schedule: interleaved_1f1b\n  virtual_stages: 2\n"
            "  global_batch_size: 16\n",
            5,
            "layout.pp_schedule",
            "interleaved_1f1b needs pp >= 2",
        ),
        (
            "  dp: 8\n  tp: 2\n  tp_comm_overlap: megatron\n  global_batch_size: 16\n",
            5,
            "layout.tp_comm_overlap",
            "needs sequence_parallel",
        ),
        (
            "  dp: 8\n  tp: 2\n  zero_stage: 2\n  overlap_grad_reduce: false\n"
            "  zero2_reduce_per_micro_batch: true\n  global_batch_size: 16\n",
            7,
            "layout.zero2_reduce_per_micro_batch",
            "needs overlap_grad_reduce: true",
        ),
    ],
)
def test_contradicting_schedule_settings_are_refused_at_their_key(
    tmp_path: Path, layout: str, line: int, field: str, needle: str
) -> None:
    err = _refusal(tmp_path, layout)
    assert (err.file, err.line, err.field) == (str(tmp_path / "w.yaml"), line, field)
    assert needle in err.message


@pytest.mark.parametrize(
    ("extra", "field", "size"),
    [
        ("ffn_hidden_size: 5634\n", "ffn_hidden_size", 5634),
        ("moe: {experts: 8, top_k: 2, expert_ffn_hidden_size: 1410}\n", "moe.expert_ffn_hidden_size", 1410),
        (
            "moe: {experts: 8, top_k: 2, expert_ffn_hidden_size: 1408, shared_experts: 1, "
            "shared_expert_ffn_hidden_size: 2818}\n",
            "moe.shared_experts·shared_expert_ffn_hidden_size",
            2818,
        ),
        (  # the shared experts run as one MLP of their summed width: 2 x 1409
            "moe: {experts: 8, top_k: 2, expert_ffn_hidden_size: 1408, shared_experts: 2, "
            "shared_expert_ffn_hidden_size: 1409}\n",
            "moe.shared_experts·shared_expert_ffn_hidden_size",
            2818,
        ),
    ],
)
def test_mlp_sizes_not_divisible_by_tp_are_refused(tmp_path: Path, extra: str, field: str, size: int) -> None:
    """Megatron-LM's column-parallel MLP GEMM splits its intermediate features over tp
    (`divide()` asserts divisibility); tp 4 of 5634 (or 1410, 2818) features was simulated
    as 1408.5 features a rank."""
    model = MODEL.replace("ffn_hidden_size: 5632\n", "") + (
        extra if extra.startswith("ffn") else "ffn_hidden_size: 5632\n" + extra
    )
    err = _refusal(tmp_path, "  tp: 4\n  dp: 4\n  global_batch_size: 16\n", model)
    assert (err.line, err.field) == (3, "layout.tp")
    assert err.message == f"{field} ({size}) of small must be divisible by tp (4)"


def test_shared_experts_split_over_tp_by_their_summed_width(tmp_path: Path) -> None:
    """2 shared experts of 1410 run as one MLP of 2,820 features (as workload.flops prices
    them), which tp 4 splits into 705 a rank: accepted (1410 alone is not divisible by 4)."""
    model = MODEL + (
        "moe: {experts: 8, top_k: 2, expert_ffn_hidden_size: 1408, shared_experts: 2, "
        "shared_expert_ffn_hidden_size: 1410}\n"
    )
    assert prepare(_scenario(tmp_path, "  tp: 4\n  dp: 4\n  global_batch_size: 16\n", model)).program.ops


def test_an_mlp_the_model_does_not_have_is_not_checked(tmp_path: Path) -> None:
    """Every layer MoE: the dense ffn_hidden_size is never built, so it need not divide."""
    model = MODEL.replace("ffn_hidden_size: 5632", "ffn_hidden_size: 5634") + (
        "moe: {experts: 8, top_k: 2, expert_ffn_hidden_size: 1408}\n"
    )
    assert prepare(_scenario(tmp_path, "  tp: 4\n  dp: 4\n  global_batch_size: 16\n", model)).program.ops


def test_a_gradient_bucket_never_splits_a_layer(tmp_path: Path) -> None:
    """`grad_bucket_bytes` below one layer's gradients gives one bucket per layer (the
    schema and docs/fidelity.md say so): 1 MiB and 40 MiB buckets both make 10 all-reduces
    on a ZeRO-0, pp 1 rank (8 layers of 45 MB of bf16 gradients at tp 2, the embedding and
    the output layer); 1 GiB makes fewer."""

    def buckets(mb: int) -> int:
        layout = f"  tp: 2\n  dp: 8\n  grad_bucket_mb: {mb}\n  global_batch_size: 16\n"
        program = prepare(_scenario(tmp_path, layout)).program
        return sum(1 for o in program.ops if o.tag == "dp" and o.collective == "all_reduce")

    assert buckets(1) == buckets(40) == 10
    assert buckets(1024) < 10
