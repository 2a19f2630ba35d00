"""Model workloads generated into step programs: checks, representatives, meta, catalog."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.errors import InputError
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.workload.layout import LayoutSpec
from simulator.workload.model import load_model
from tests.workload.flops_reference import dp_comms

ROOT = Path(__file__).resolve().parents[2]
TOPO_2N = ROOT / "topologies" / "h100-rail-clos-2n.yaml"
# Llama-3-8B-shaped, shrunk: 4 layers, short sequences, small vocabulary
TINY_LLAMA = {
    "name": "tiny-llama",
    "layers": 4,
    "hidden_size": 1024,
    "ffn_hidden_size": 3584,
    "attention_heads": 8,
    "kv_heads": 2,
    "vocab_size": 8192,
    "seq_len": 1024,
}


def _scenario(
    tmp: Path,
    layout: dict,
    *,
    model: dict | None = None,
    fidelity: dict | None = None,
    topology: Path = TOPO_2N,
    extra: dict | None = None,
) -> Path:
    (tmp / "model.yaml").write_text(yaml.safe_dump(model or TINY_LLAMA))
    wl = {"model": {"file": "model.yaml"}, "layout": layout}
    if fidelity is not None:
        wl["fidelity"] = fidelity
    wl.update(extra or {})
    (tmp / "workload.yaml").write_text(yaml.safe_dump(wl, sort_keys=False))
    sc = {
        "name": "t",
        "topology": {"file": str(topology)},
        "workload": {"file": "workload.yaml"},
        "network": {"record_links": False},
        "run": {"steps": 1},
    }
    path = tmp / "scenario.yaml"
    path.write_text(yaml.safe_dump(sc, sort_keys=False))
    return path


SMALL = {
    "tp": 2,
    "pp": 2,
    "dp": 4,
    "global_batch_size": 16,
    "sequence_parallel": True,
    "zero_stage": 1,
}


def test_representatives_match_full_simulation(tmp_path: Path) -> None:
    """On a symmetric cluster, simulating one rank per stage with mirrors gives the step time
    of simulating all 16 ranks."""
    times = {}
    for rep in (True, False):
        d = tmp_path / str(rep)
        d.mkdir()
        prep = prepare(_scenario(d, SMALL, fidelity={"representatives": rep}))
        n_sim = len(prep.program.simulated_ranks)
        assert n_sim == (2 if rep else 16)
        assert sum(prep.program.weight.values()) == 16
        times[rep] = execute(prep).summary["step_time_s"]
    assert times[True] == pytest.approx(times[False], rel=1e-9)


def test_meta_and_summary(tmp_path: Path) -> None:
    prep = prepare(_scenario(tmp_path, SMALL))
    meta = prep.program.meta
    assert meta["layout"].startswith("tp2 pp2 dp4")
    assert meta["tokens_per_step"] == 16 * 1024
    assert meta["pipeline_bubble_fraction"] == pytest.approx(1 / (4 + 1))  # m = 16/4 = 4, p = 2
    assert meta["peak_memory_bytes"] > 0 and set(meta["memory_bytes_by_stage"]) == {"pp0", "pp1"}
    assert prep.program.role == {0: "pp0", 2: "pp1"}
    summary = execute(prep).summary
    assert 0 < summary["mfu"] < 1 and summary["tokens_per_s"] > 0
    assert {"tp", "pp", "dp"} <= set(summary["exposed_comm_by_tag_s"])
    assert summary["gpus_in_job"] == 16


def test_dp_buckets_carry_every_gradient(tmp_path: Path) -> None:
    """The bucketed reduce-scatters of a stage move the bytes `dp_comms` says."""
    prep = prepare(_scenario(tmp_path, SMALL))
    model = load_model(tmp_path / "model.yaml")
    layout = LayoutSpec(**SMALL)
    for stage, rank in ((0, 0), (1, 2)):
        want = sum(c.bytes for c in dp_comms(model, layout, stage) if c.collective == "reduce_scatter")
        got = sum(
            op.size_bytes
            for op in prep.program.ops
            if op.tag == "dp" and op.collective == "reduce_scatter" and rank in op.ranks
        )
        assert got == pytest.approx(want)
        # the mirrors are the DP groups of the other tensor rank, which share the NICs
        ops = [op for op in prep.program.ops if op.tag == "dp" and rank in op.ranks]
        assert all(len(op.mirrors) == 1 for op in ops)


@pytest.mark.parametrize(
    "layout,model,field,words",
    [
        ({"tp": 3, "dp": 1, "global_batch_size": 4}, None, "layout.tp", "attention_heads"),
        ({"pp": 3, "dp": 1, "global_batch_size": 4}, None, "layout.pp", "divisible"),
        ({"tp": 8, "dp": 4, "global_batch_size": 8}, None, "layout.dp", "has 16"),
        (
            {"tp": 8, "dp": 1, "global_batch_size": 4},
            yaml.safe_load((ROOT / "workloads/models/llama3-70b.yaml").read_text()),
            "layout",
            "does not fit",
        ),
    ],
)
def test_bad_layouts_name_file_and_field(
    tmp_path: Path, layout: dict, model: dict | None, field: str, words: str
) -> None:
    with pytest.raises(InputError) as err:
        prepare(_scenario(tmp_path, layout, model=model))
    text = str(err.value)
    assert "workload.yaml:" in text and f" {field}: " in text and words in text


def test_unknown_key_is_an_error_with_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        prepare(_scenario(tmp_path, {"tp": 2, "dp": 1, "global_batch_size": 4}, extra={"fidelty": {}}))
    assert "workload.yaml:" in str(err.value) and "fidelty" in str(err.value)


def test_cli_reports_bad_layout(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from simulator.commands.app import app

    path = _scenario(tmp_path, {"tp": 3, "dp": 1, "global_batch_size": 4})
    res = CliRunner().invoke(app, ["run", str(path), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert "layout.tp" in res.output and "workload.yaml" in res.output


def test_moe_ep_and_cp_programs_validate(tmp_path: Path) -> None:
    """EP all-to-all and CP ring ops appear, with the right simulated ranks."""
    moe = {
        **TINY_LLAMA,
        "name": "tiny-moe",
        "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden_size": 1024},
    }
    lay = {"tp": 2, "dp": 4, "ep": 4, "cp": 2, "global_batch_size": 8, "sequence_parallel": True}
    prep = prepare(_scenario(tmp_path, lay, model=moe))
    prog = prep.program
    assert len(prog.simulated_ranks) == 4 * 2  # ep positions x cp positions
    tags = {op.tag for op in prog.ops}
    assert {"ep", "cp", "tp", "dp"} <= tags
    assert sum(prog.weight.values()) == 16
    execute(prep)


def test_zero3_program_runs(tmp_path: Path) -> None:
    lay = {"tp": 2, "dp": 8, "global_batch_size": 16, "zero_stage": 3, "recompute": "full"}
    prep = prepare(_scenario(tmp_path, lay))
    names = [op.id for op in prep.program.ops]
    assert any("zero3_gather" in n for n in names) and any("zero3_grad_rs" in n for n in names)
    assert any(op.tag == "recompute" for op in prep.program.ops)
    assert execute(prep).summary["step_time_s"] > 0


CATALOG = sorted(
    p for pat in ("llama3-*.yaml", "gpt3-*.yaml", "mixtral-*.yaml") for p in (ROOT / "scenarios").glob(pat)
)


@pytest.mark.parametrize("path", CATALOG, ids=lambda p: p.stem)
def test_catalog_scenarios_prepare(path: Path) -> None:
    prep = prepare(path)
    prep.program.validate()
    assert prep.program.meta["model_flops_per_step"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("path", CATALOG, ids=lambda p: p.stem)
def test_catalog_scenarios_run(path: Path) -> None:
    summary = execute(prepare(path)).summary
    assert 0 < summary["mfu"] < 1 and summary["tokens_per_s"] > 0


def test_smallest_catalog_scenario_runs() -> None:
    summary = execute(prepare(ROOT / "scenarios" / "llama3-8b-tp2-dp8.yaml")).summary
    assert 0 < summary["mfu"] < 1 and summary["tokens_per_s"] > 0


def test_a_model_dtype_the_gpu_has_no_peak_for_is_refused_at_the_models_dtype(tmp_path: Path) -> None:
    """An fp8 model on an A100 (no fp8 peak): the error named the workload file, with no line
    and no field, and an op id of the generated program; it is the model file's `dtype`."""
    model = tmp_path / "m.yaml"
    model.write_text(
        "name: m8\nlayers: 4\nhidden_size: 1024\nffn_hidden_size: 4096\nattention_heads: 16\n"
        "vocab_size: 32000\nseq_len: 2048\ndtype: fp8\n"
    )
    (tmp_path / "w.yaml").write_text(
        "name: w\nmodel: {file: m.yaml}\nlayout: {tp: 2, dp: 4, global_batch_size: 8}\n"
    )
    sc = tmp_path / "s.yaml"
    topo = ROOT / "topologies/a100-hgx-node.yaml"
    sc.write_text(f"name: s\ntopology: {{file: {topo}}}\nworkload: {{file: w.yaml}}\n")
    with pytest.raises(InputError) as err:
        prepare(sc)
    assert str(err.value) == (
        f"{model}:8: dtype: the model computes in fp8 (dtype fp8), and the GPU 'A100 SXM4 40GB' has no "
        "peak FLOP/s for it (it has bf16, fp16, fp32, fp64, int8, tf32); compute in one of those or give "
        "fp8 in the GPU's peak_tflops"
    )
