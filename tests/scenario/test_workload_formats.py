"""A Chakra or PyTorch profiler trace as a scenario's workload (`workload: {format: ..., path: ...}`)
and `tokens_per_step` on any trace workload."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.errors import InputError
from simulator.scenario.prepare import prepare
from simulator.workload.interchange.chakra_read import import_chakra
from simulator.workload.interchange.kineto import import_kineto
from simulator.workload.interchange.tracebuild import program_from_dict

ROOT = Path(__file__).resolve().parents[2]
TOPO = ROOT / "topologies" / "h100-rail-clos-2n.yaml"
KINETO = ROOT / "workloads" / "traces" / "kineto" / "ddp4-synthetic"
CHAKRA = ROOT / "workloads" / "traces" / "chakra" / "dp16-gpt1p3b"


def _scenario(tmp_path: Path, workload: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: s\ntopology: {{file: {TOPO}}}\nworkload: {workload}\n")
    return p


def _ops(program) -> list[tuple]:
    return [(o.id, o.kind, o.ranks, o.group, o.deps, o.duration_s, o.size_bytes) for o in program.ops]


def test_kineto_folder_in_a_scenario_is_the_cli_import(tmp_path):
    prep = prepare(
        _scenario(tmp_path, f"{{format: kineto, path: {KINETO}, step: 2, tokens_per_step: 32768}}")
    )
    result = import_kineto(sorted(KINETO.glob("*.json")), step=2)
    expected = program_from_dict(result.data, tmp_path / "t.yaml", prep.cluster.gpus)
    assert _ops(prep.program) == _ops(expected)
    assert prep.program.meta["tokens_per_step"] == 32768
    assert prep.program.meta["recorded_step_s"] == result.recorded_step_s


def test_chakra_folder_in_a_scenario_is_the_cli_import(tmp_path):
    prep = prepare(_scenario(tmp_path, f"{{format: chakra, path: {CHAKRA}}}"))
    expected = program_from_dict(import_chakra(CHAKRA).data, tmp_path / "t.yaml", prep.cluster.gpus)
    assert _ops(prep.program) == _ops(expected)
    assert "tokens_per_step" in prep.program.meta  # the exporter keeps the source trace's meta


@pytest.mark.parametrize(
    ("workload", "needle"),
    [
        ("{format: chakra, file: x.yaml}", "workload: give either 'file' or 'format'"),
        ("{format: kineto}", "workload: format 'kineto' needs 'path'"),
        ("{format: chakra, path: ., step: 2}", "'step', 'dp_replicas' and 'host_launches' apply"),
        ("{format: kineto, path: nothere}", "workload.path: PyTorch profiler trace"),
        ("{format: chakra, path: nothere}", "workload.path: folder"),
        ("{format: pbtxt, path: .}", "workload.format"),
        (f"{{file: {ROOT}/workloads/llama3-8b-tp2-dp8.yaml, tokens_per_step: 5}}", "states its own tokens"),
        ("{format: kineto, path: ., tokens_per_step: 0}", "workload.tokens_per_step"),
    ],
)
def test_bad_workload_reference_is_one_line_exit_2(tmp_path, workload, needle):
    path = _scenario(tmp_path, workload)
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"{path}:3:" in lines[0] and needle in lines[0], result.output


def test_folder_without_profiler_traces_is_an_input_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no PyTorch profiler trace"):
        prepare(_scenario(tmp_path, f"{{format: kineto, path: {tmp_path / 'empty'}}}"))


def test_compare_variant_names_an_import_relative_to_the_compare_file(tmp_path):
    """A variant's `{format, path}` replaces the base's `{file}` and its path is rebased."""
    from simulator.study.compare import load_comparison

    (tmp_path / "traces").symlink_to(KINETO.parent)
    cmp_path = tmp_path / "c.yaml"
    cmp_path.write_text(
        f"name: c\nbase: {{file: {ROOT / 'scenarios' / 'kineto-ddp4-synthetic.yaml'}}}\nvariants:\n"
        "  - name: file\n"
        "  - name: import\n"
        "    workload: {format: kineto, path: traces/ddp4-synthetic, step: 2, tokens_per_step: 4096}\n"
    )
    cmp = load_comparison(cmp_path)
    from_file, imported = (v.prepared.program for v in cmp.variants)
    assert _ops(from_file) == _ops(imported)
    assert imported.meta["tokens_per_step"] == 4096 and "tokens_per_step" not in from_file.meta
