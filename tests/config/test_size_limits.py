"""Upper bounds on sizes: a typo such as `nodes: 1000000000`, `global_batch_size: 400000000`
or `seeds: 100000000` is one line `file:line: field.path: message` and exit 2 at once,
not a process that grows by gigabytes and never ends; a value at the limit is accepted."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from simulator.errors import InputError
from simulator.network.design.limits import MAX_STORAGE_NICS, MAX_TOPOLOGY_GPUS, MAX_TOPOLOGY_LINKS
from simulator.network.design.registry import GENERATORS
from simulator.network.topology import load_topology
from simulator.study.sweep import MAX_STUDY_RUNS, load_study
from simulator.workload.framework import MAX_GLOBAL_BATCH, MAX_MICRO_BATCHES
from simulator.workload.layout import LayoutSpec

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "topologies" / "gpus" / "h100-sxm.yaml"
MODEL = ROOT / "workloads" / "models" / "llama3-8b.yaml"
#: a check that still runs after this long hangs (generous for a loaded machine)
HANG_GUARD_S = 60
#: how long refusing an oversized value may take in process, and through the CLI (whose
#: start-up alone takes a second or so)
FAST_S = 2.0
CLI_S = 15.0


def _line_of(text: str, key: str) -> int:
    """1-based line of the first line that starts with `key:` (after indentation)."""
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.lstrip(" -").startswith(f"{key}:"))


def _cli(args: list[str], cwd: Path) -> tuple[int, list[str], float]:
    """Run the CLI in a real process: exit code, non-blank stderr lines, seconds taken."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "simulator.commands.app", *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=cwd,
        env=env,
    )
    return r.returncode, [ln for ln in r.stderr.splitlines() if ln.strip()], time.monotonic() - start


def _topology(tmp: Path, body: str, name: str = "topo.yaml") -> tuple[Path, str]:
    text = f"name: big\ngpu: {{file: {GPU}}}\n{body}"
    path = tmp / name
    path.write_text(text)
    return path, text


def _scenario(tmp: Path, topology: Path, workload: Path) -> Path:
    path = tmp / "scenario.yaml"
    path.write_text(
        f"name: s\ntopology: {{file: {topology}}}\nworkload: {{file: {workload}}}\nrun: {{steps: 1}}\n"
    )
    return path


def _workload(tmp: Path, global_batch: int, micro_batch: int = 1) -> tuple[Path, str]:
    text = (
        f"name: w\nmodel: {{file: {MODEL}}}\nlayout:\n  tp: 2\n  sequence_parallel: true\n  dp: 8\n"
        f"  zero_stage: 1\n  micro_batch_size: {micro_batch}\n  global_batch_size: {global_batch}\n"
        "fidelity: {representatives: true}\n"
    )
    path = tmp / "workload.yaml"
    path.write_text(text)
    return path, text


STUDY = """\
name: s
job: {{n_gpus: 64, gpus_per_node: 8, gpus_per_replica: 16}}
step: {{step_time_s: 2.0, checkpoint_write_min: 5}}
failures:
  - {{kind: exponential, target: gpu, mtbf_h: 2000, repair_h: 6}}
policy: {{kind: checkpoint_restart, interval_min: 30, restart: {{detection_min: 2, queue_min: 5}}}}
duration_days: 2
seeds: {seeds}
axes:
  - {{param: policy.interval_min, name: interval_min, values: {values}}}
"""


def _study(tmp: Path, seeds: int, values: list[Any] | None = None) -> tuple[Path, str]:
    text = STUDY.format(seeds=seeds, values=values or [10, 30])
    path = tmp / "study.yaml"
    path.write_text(text)
    return path, text


# ---- the three reported cases, through the CLI in a real process --------------------------


def test_a_topology_of_a_billion_nodes_is_one_line_for_validate_run_and_topo(tmp_path: Path) -> None:
    topo, text = _topology(tmp_path, "generator: rail_clos\nnodes: 1000000000\n")
    workload = ROOT / "workloads" / "llama3-8b-tp2-dp8.yaml"
    scenario = _scenario(tmp_path, topo, workload)
    expected = (
        f"error: {topo}:{_line_of(text, 'nodes')}: nodes: asks for 8,000,000,000 GPUs (nodes "
        f"1,000,000,000, gpus_per_node 8); a generated topology has at most {MAX_TOPOLOGY_GPUS:,} GPUs"
    )
    for args in (
        ["validate", str(scenario)],
        ["run", str(scenario), "-o", str(tmp_path / "out"), "--no-dashboard"],
        ["topo", str(topo), "-o", str(tmp_path / "out")],
    ):
        code, lines, seconds = _cli(args, tmp_path)
        assert code == 2 and len(lines) == 1 and seconds < CLI_S, (args, lines, seconds)
        assert lines[0].startswith(expected), (args, lines)
    assert not (tmp_path / "out").exists()


def test_a_global_batch_of_400_million_is_one_line(tmp_path: Path) -> None:
    workload, text = _workload(tmp_path, 400_000_000)
    scenario = _scenario(tmp_path, ROOT / "topologies" / "h100-rail-clos-2n.yaml", workload)
    expected = (
        f"error: {workload}:{_line_of(text, 'global_batch_size')}: layout.global_batch_size: "
        f"400,000,000 sequences per step; at most {MAX_GLOBAL_BATCH:,}"
    )
    for args in (["validate", str(scenario)], ["run", str(scenario), "-o", str(tmp_path / "out")]):
        code, lines, seconds = _cli(args, tmp_path)
        assert code == 2 and len(lines) == 1 and seconds < CLI_S, (args, lines, seconds)
        assert lines[0].startswith(expected), (args, lines)
    assert not (tmp_path / "out").exists()


def test_a_study_of_100_million_seeds_is_one_line_before_any_run(tmp_path: Path) -> None:
    study, text = _study(tmp_path, 100_000_000)
    expected = (
        f"error: {study}:{_line_of(text, 'seeds')}: seeds: 2 variant(s) × 100,000,000 seed(s) = "
        f"200,000,000 runs; a study runs at most {MAX_STUDY_RUNS:,}"
    )
    for args in (["validate", str(study)], ["sweep", str(study), "-o", str(tmp_path / "out")]):
        code, lines, seconds = _cli(args, tmp_path)
        assert code == 2 and len(lines) == 1 and seconds < CLI_S, (args, lines, seconds)
        assert lines[0].startswith(expected), (args, lines)
    assert not (tmp_path / "out").exists()


def test_seeds_from_the_command_line_are_bounded_too(tmp_path: Path) -> None:
    study, _ = _study(tmp_path, 1)
    code, lines, _ = _cli(
        ["sweep", str(study), "--seeds", "100000000", "-o", str(tmp_path / "out")], tmp_path
    )
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: seeds: 2 variant(s) × 100,000,000 seed(s) = 200,000,000 runs"), lines
    assert not (tmp_path / "out").exists()


# ---- every generator parameter that multiplies into the graph, through the loader ----------


def _refused(path: Path) -> tuple[str, float]:
    start = time.monotonic()
    with pytest.raises(InputError) as info:
        load_topology(path)
    return str(info.value), time.monotonic() - start


@pytest.mark.parametrize(
    "body, field, what",
    [
        ("generator: switch\ngpus: 10000000\nlink_gbyte_per_s: 450\n", "gpus", "10,000,000 GPUs"),
        ("generator: nvswitch_node\ngpus: 10000000\n", "gpus", "10,000,000 GPUs"),
        ("generator: xgmi_mesh\ngpus: 5000\n", "gpus", "12,497,500 links"),
        ("generator: rail_clos\nnodes: 2\nspines: 10000000\n", "spines", "80,000,048 links"),
        (
            "generator: rail_clos\nnodes: 2\ngpus_per_node: 4096\nscale_up: xgmi_mesh\n",
            "gpus_per_node",
            "16,805,888 links",
        ),
        ("generator: superpod\nnodes: 200000\n", "nodes", "1,600,000 GPUs"),
        ("generator: mi300x_cluster\nnodes: 4\ngpus_per_node: 3000\n", "gpus_per_node", "18,030,000 links"),
        ("generator: rail_only\nnodes: 1000000000\n", "nodes", "8,000,000,000 GPUs"),
        ("generator: rail_optimized_clos\nnodes: 1000000000\n", "nodes", "8,000,000,000 GPUs"),
        ("generator: multiplane_fattree\ngpus_per_node: 10000000\n", "gpus_per_node", "640,000,000 GPUs"),
        ("generator: fat_tree\nk: 1000\n", "k", "250,000,000 GPUs"),
        ("generator: torus\ndims: [1024, 1024, 1024]\n", "dims", "1,073,741,824 GPUs"),
        ("generator: dragonfly\nh: 100000\n", "h", "25,600,032 GPUs"),
        ("generator: pcie_node\ngpus_per_switch: 10000000\n", "gpus_per_switch", "400,000,000 GPUs"),
        (
            "generator: superpod\nnodes: 2\n"
            "storage: {nodes: 100000, write_gbyte_per_s: 1, read_gbyte_per_s: 1}\n",
            "storage.nodes",
            "100,000 storage NICs",
        ),
    ],
)
def test_each_generator_refuses_an_oversized_parameter_at_once(
    tmp_path: Path, body: str, field: str, what: str
) -> None:
    path, text = _topology(tmp_path, body)
    message, seconds = _refused(path)
    line = _line_of(text, field.split(".")[0])
    assert message.startswith(f"{path}:{line}: {field}: asks for {what}"), message
    assert "at most" in message and seconds < FAST_S, (message, seconds)


def test_every_generator_is_bounded() -> None:
    """A new generator needs a row in the table above (and a size check on its spec)."""
    assert set(GENERATORS) == {
        "switch",
        "nvswitch_node",
        "xgmi_mesh",
        "rail_clos",
        "superpod",
        "mi300x_cluster",
        "rail_only",
        "rail_optimized_clos",
        "multiplane_fattree",
        "fat_tree",
        "torus",
        "dragonfly",
        "pcie_node",
    }


def _spec(generator: str, **params: Any) -> Any:
    return GENERATORS[generator].spec.model_validate({"generator": generator, **params})


def test_a_topology_at_the_limits_is_accepted_by_its_spec() -> None:
    """Validated only: building a million GPUs takes a minute and gigabytes."""
    assert MAX_TOPOLOGY_GPUS == 2**20 and MAX_TOPOLOGY_LINKS == 2**23
    assert _spec("rail_clos", nodes=MAX_TOPOLOGY_GPUS // 8).nodes == 131_072
    assert _spec("superpod", nodes=MAX_TOPOLOGY_GPUS // 8).nodes == 131_072
    assert _spec("switch", gpus=MAX_TOPOLOGY_GPUS, link_gbyte_per_s=1).gpus == MAX_TOPOLOGY_GPUS
    assert _spec("fat_tree", k=160).k == 160  # 1,024,000 hosts
    assert _spec("torus", dims=[128, 128, 64]).dims == [128, 128, 64]  # 2**20 GPUs
    assert _spec("xgmi_mesh", gpus=4096).gpus == 4096  # 8,386,560 links
    storage = {"nodes": MAX_STORAGE_NICS, "write_gbyte_per_s": 1, "read_gbyte_per_s": 1}
    assert _spec("superpod", nodes=2, storage=storage).storage.nodes == MAX_STORAGE_NICS
    for generator, params in (
        ("rail_clos", {"nodes": MAX_TOPOLOGY_GPUS // 8 + 1}),
        ("fat_tree", {"k": 162}),
        ("xgmi_mesh", {"gpus": 4097}),
    ):
        with pytest.raises(ValueError, match="a generated topology has at most"):
            _spec(generator, **params)


# ---- workloads and studies at and past their limits --------------------------------------


def test_too_many_micro_batches_name_the_global_batch(tmp_path: Path) -> None:
    workload, text = _workload(tmp_path, MAX_GLOBAL_BATCH)
    scenario = _scenario(tmp_path, ROOT / "topologies" / "h100-rail-clos-2n.yaml", workload)
    code, lines, _ = _cli(["validate", str(scenario)], tmp_path)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(
        f"error: {workload}:{_line_of(text, 'global_batch_size')}: layout.global_batch_size: "
        "global_batch_size / (micro_batch_size·dp) = 16,777,216 / (1·8) = 2,097,152 micro-batches "
        f"per pipeline; at most {MAX_MICRO_BATCHES:,}"
    ), lines


def test_a_batch_at_the_limits_is_accepted_by_the_layout() -> None:
    assert MAX_GLOBAL_BATCH == 2**24 and MAX_MICRO_BATCHES == 4096
    big = LayoutSpec(global_batch_size=MAX_GLOBAL_BATCH, micro_batch_size=MAX_GLOBAL_BATCH // 4096)
    assert big.micro_batches == MAX_MICRO_BATCHES
    assert LayoutSpec(global_batch_size=MAX_MICRO_BATCHES * 8, dp=8).micro_batches == MAX_MICRO_BATCHES
    with pytest.raises(ValueError, match="micro-batches per pipeline; at most 4,096"):
        LayoutSpec(global_batch_size=(MAX_MICRO_BATCHES + 1) * 8, dp=8)
    with pytest.raises(ValueError, match="sequences per step; at most 16,777,216"):
        LayoutSpec(global_batch_size=MAX_GLOBAL_BATCH + 1, micro_batch_size=MAX_GLOBAL_BATCH + 1)


def test_too_many_variants_point_at_the_longest_axis(tmp_path: Path) -> None:
    study, text = _study(tmp_path, 1, list(range(1, 10_002)))
    start = time.monotonic()
    with pytest.raises(InputError) as info:
        load_study(study)
    assert time.monotonic() - start < FAST_S
    assert str(info.value).startswith(
        f"{study}:{_line_of(text, 'axes') + 1}: axes.0.values: 10,001 variant(s) × 1 seed(s) = 10,001 runs"
    ), str(info.value)


def test_a_study_at_the_limit_is_accepted(tmp_path: Path) -> None:
    study, _ = _study(tmp_path, MAX_STUDY_RUNS // 2)
    loaded = load_study(study)
    assert len(loaded.variants) * loaded.spec.seeds == MAX_STUDY_RUNS
    with pytest.raises(InputError, match="10,002 runs; a study runs at most 10,000"):
        load_study(_study(tmp_path, MAX_STUDY_RUNS // 2 + 1)[0])


@pytest.mark.parametrize("key", ["zero3_gather_bucket_mb", "zero3_reduce_bucket_mb"])
def test_a_near_zero_zero3_bucket_is_refused_and_one_mib_is_taken(key: str) -> None:
    """Each layer is gathered and reduced in ceil(bytes / bucket) calls: a typo such as
    0.0001 MiB would make millions of ops; 1 MiB (the smallest the tests use) is taken."""
    from simulator.workload.layout import LayoutSpec

    with pytest.raises(ValueError, match="greater than or equal to 1048576"):
        LayoutSpec(global_batch_size=1, zero_stage=3, **{key: 0.0001})
    assert LayoutSpec(global_batch_size=1, zero_stage=3, **{key: 1})
