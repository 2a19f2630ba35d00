# ruff: noqa: E501
"""The valid bases the bad-input corpus mutates, and its hand-written semantic cases.

Every base is small (two 8-GPU servers, a 16-rank trace, a one-layer-per-stage model) so
that the whole corpus runs in seconds, and written in block style, one key per line, so
that a mutation of one line names that line.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: corpus kind -> (base file under corpus/_base, extension of its cases)
BASES: dict[str, tuple[str, str]] = {
    "scenario": ("scenario.yaml", "yaml"),
    "topology": ("topology.yaml", "yaml"),
    "gpu": ("gpu.yaml", "yaml"),
    "trace": ("trace.yaml", "yaml"),
    "workload": ("workload.yaml", "yaml"),
    "profile": ("profile.yaml", "yaml"),
    "study": ("study.yaml", "yaml"),
    "compare": ("compare.yaml", "yaml"),
}

SCENARIO = """\
name: corpus
description: The base scenario of the bad-input corpus.
seed: 7
topology:
  file: ../_base/topology.yaml
workload:
  file: ../_base/trace.yaml
network:
  fidelity: flow
  alpha_us: 0.5
  algorithms:
    all_reduce: ring
compute:
  jitter_cv: 0.0
run:
  steps: 1
"""

TOPOLOGY = """\
name: corpus-2n
description: Two 8-GPU servers on a rail-optimized Clos.
gpu:
  file: ../_base/gpu.yaml
generator: rail_clos
nodes: 2
gpus_per_node: 8
scale_up: nvswitch
scale_up_gbyte_per_s: 450
nic_gbps: 400
nic_medium: ib
servers_per_leaf: 32
oversubscription: 1
link_latency_us: 1.0
"""

GPU = """\
name: H100 SXM5 80GB
peak_tflops:
  fp32: 66.9
  bf16: 989.4
  fp16: 989.4
  fp8: 1978.9
hbm_tbyte_per_s: 3.35
hbm_gbyte: 80
compute_efficiency: 0.7
memory_efficiency: 0.8
tdp_w: 700
"""

TRACE = """\
format: clustersim-step/1
name: corpus-step
ranks: 16
groups:
  world: all
  pair:
    start: 0
    stop: 2
ops:
  - id: fwd
    kind: compute
    ranks: all
    flops: 2.0e13
    bytes: 4.0e10
    tag: fwd
  - id: bwd
    kind: compute
    ranks: all
    duration_ms: 20
    deps: [fwd]
    tag: bwd
  - id: grads
    kind: collective
    collective: all_reduce
    group: world
    size_mib: 64
    algorithm: ring
    deps: [bwd]
    tag: dp
  - id: s0
    kind: send
    ranks: [0]
    peer: 1
    size_mib: 8
    deps: [grads]
  - id: r1
    kind: recv
    ranks: [1]
    peer: 0
"""

TRACE_4 = """\
format: clustersim-step/1
name: corpus-step-4
ranks: 4
groups:
  world: all
ops:
  - {id: fwd, kind: compute, ranks: all, duration_ms: 10}
  - {id: grads, kind: collective, collective: all_reduce, group: world, size_mib: 16, deps: [fwd]}
"""

MODEL = """\
name: tiny
layers: 2
hidden_size: 1024
ffn_hidden_size: 4096
attention_heads: 8
kv_heads: 8
vocab_size: 32000
seq_len: 2048
dtype: bf16
gated_ffn: true
tied_embeddings: false
"""

WORKLOAD = """\
name: tiny-tp2-dp8
description: A tiny model, TP2 / DP8.
model:
  file: ../_base/model.yaml
layout:
  tp: 2
  dp: 8
  zero_stage: 1
  micro_batch_size: 1
  global_batch_size: 8
  recompute: none
fidelity:
  representatives: true
"""

STUDY = """\
name: corpus-study
job:
  n_gpus: 64
  gpus_per_node: 8
  gpus_per_replica: 16
step:
  step_time_s: 2.0
  checkpoint_write_min: 5
  checkpoint_snapshot_s: 10
failures:
  - kind: exponential
    target: gpu
    mtbf_h: 2000
    repair_h: 6
policy:
  kind: checkpoint_restart
  interval_min: 30
  restart:
    detection_min: 2
    queue_min: 5
duration_days: 2
seeds: 1
axes:
  - param: policy.interval_min
    name: interval_min
    values: [10, 30]
"""

COMPARE = """\
name: corpus-compare
description: Two algorithms on the base scenario.
base:
  file: ../_base/scenario.yaml
variants:
  - name: ring
    description: Ring all-reduce.
    network:
      algorithms:
        all_reduce: ring
  - name: tree
    description: Tree all-reduce.
    seed: 3
    network:
      algorithms:
        all_reduce: tree
"""

GRAPH_JSON = """\
{"directed": false, "multigraph": false, "graph": {},
 "nodes": [
  {"id": "g0", "kind": "gpu", "node": "s0", "local_rank": 0},
  {"id": "g1", "kind": "gpu", "node": "s0", "local_rank": 1},
  {"id": "g2", "kind": "gpu", "node": "s1", "local_rank": 0},
  {"id": "g3", "kind": "gpu", "node": "s1", "local_rank": 1},
  {"id": "sw", "kind": "switch", "tier": 1}],
 "links": [
  {"source": "g0", "target": "sw", "bandwidth_gbps": 400, "latency_us": 1.0, "medium": "ib"},
  {"source": "g1", "target": "sw", "bandwidth_gbps": 400, "latency_us": 1.0, "medium": "ib"},
  {"source": "g2", "target": "sw", "bandwidth_gbps": 400, "latency_us": 1.0, "medium": "ib"},
  {"source": "g3", "target": "sw", "bandwidth_gbps": 400, "latency_us": 1.0, "medium": "ib"}]}
"""

GRAPHML = """\
<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
<key id="kind" for="node" attr.name="kind" attr.type="string"/>
<key id="node" for="node" attr.name="node" attr.type="string"/>
<key id="local_rank" for="node" attr.name="local_rank" attr.type="int"/>
<key id="bw" for="edge" attr.name="bandwidth_gbps" attr.type="double"/>
<key id="lat" for="edge" attr.name="latency_us" attr.type="double"/>
<key id="medium" for="edge" attr.name="medium" attr.type="string"/>
<graph id="G" edgedefault="undirected">
<node id="g0"><data key="kind">gpu</data><data key="node">s0</data><data key="local_rank">0</data></node>
<node id="g1"><data key="kind">gpu</data><data key="node">s0</data><data key="local_rank">1</data></node>
<node id="g2"><data key="kind">gpu</data><data key="node">s1</data><data key="local_rank">0</data></node>
<node id="g3"><data key="kind">gpu</data><data key="node">s1</data><data key="local_rank">1</data></node>
<node id="sw"><data key="kind">switch</data></node>
<edge source="g0" target="sw"><data key="bw">400</data><data key="lat">1.0</data><data key="medium">ib</data></edge>
<edge source="g1" target="sw"><data key="bw">400</data><data key="lat">1.0</data><data key="medium">ib</data></edge>
<edge source="g2" target="sw"><data key="bw">400</data><data key="lat">1.0</data><data key="medium">ib</data></edge>
<edge source="g3" target="sw"><data key="bw">400</data><data key="lat">1.0</data><data key="medium">ib</data></edge>
</graph>
</graphml>
"""

LOG_SAMPLE = ROOT / "topologies/calibration/samples/a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt"
LOG_ALLGATHER = ROOT / "topologies/calibration/samples/a100-40gb-8gpu-1node-allgather-superbench-fixture.txt"
PROFILE_SOURCE = ROOT / "topologies/calibration/h100-nvswitch-efa.yaml"


def write_bases(base: Path) -> None:
    """Write the valid bases (and a one-step results folder of the base scenario)."""
    import yaml

    from simulator.calibration.profile import CalibrationProfile
    from simulator.scenario.execute import execute
    from simulator.scenario.prepare import prepare

    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    texts = {
        "scenario.yaml": SCENARIO,
        "topology.yaml": TOPOLOGY,
        "gpu.yaml": GPU,
        "trace.yaml": TRACE,
        "trace-4.yaml": TRACE_4,
        "model.yaml": MODEL,
        "workload.yaml": WORKLOAD,
        "study.yaml": STUDY,
        "compare.yaml": COMPARE,
        "graph.json": GRAPH_JSON,
        "graph.graphml": GRAPHML,
    }
    for name, text in texts.items():
        (base / name).write_text(text)
    # one fitted entry of a real profile, in block style
    prof = CalibrationProfile.from_yaml(PROFILE_SOURCE.read_text(), PROFILE_SOURCE)
    entry = prof.collectives[0].model_dump(mode="json")
    entry["efficiency"] = entry["efficiency"][:3]
    entry["errors"] = entry["errors"][:3]
    data = {"name": "corpus-profile", "description": "One entry.", "collectives": [entry]}
    (base / "profile.yaml").write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    (base / "allreduce.txt").write_text(LOG_SAMPLE.read_text())
    execute(prepare(base / "scenario.yaml")).write(base / "results", dashboard=False)
    resolved = base / "results/scenario.resolved.yaml"  # paths relative to the repository
    resolved.write_text(resolved.read_text().replace(str(ROOT) + "/", ""))


def SEMANTIC() -> Iterator[tuple[str, str, str, str]]:  # noqa: N802
    """Hand-written mistakes: (kind, case name, text, words the first error line must hold)."""
    sc, tr, st, cmp = SCENARIO, TRACE, STUDY, COMPARE
    yield "scenario", "name-dotdot", sc.replace("name: corpus", "name: ../../../x"), "name"
    yield "scenario", "name-absolute", sc.replace("name: corpus", "name: /tmp/x"), "name"
    yield "scenario", "name-slash", sc.replace("name: corpus", "name: a/b"), "name"
    yield "scenario", "name-dot", sc.replace("name: corpus", "name: ."), "name"
    yield "scenario", "name-empty", sc.replace("name: corpus", 'name: ""'), "name"
    yield "scenario", "name-hidden", sc.replace("name: corpus", "name: .hidden"), "name"
    yield (
        "scenario",
        "output-a-file",
        sc.replace("  steps: 1", "  steps: 1\n  output: ../_base/scenario.yaml"),
        "output",
    )
    yield (
        "scenario",
        "output-under-a-file",
        sc.replace("  steps: 1", "  steps: 1\n  output: ../_base/scenario.yaml/x"),
        "output",
    )
    yield (
        "scenario",
        "output-dev-null",
        sc.replace("  steps: 1", "  steps: 1\n  output: /dev/null/x"),
        "output",
    )
    yield (
        "scenario",
        "missing-topology-file",
        sc.replace("file: ../_base/topology.yaml", "file: nowhere.yaml"),
        "not found",
    )
    yield (
        "scenario",
        "missing-workload-file",
        sc.replace("file: ../_base/trace.yaml", "file: nowhere.yaml"),
        "not found",
    )
    one_job = "jobs:\n  - {name: a, workload: {file: ../_base/trace.yaml}, gpus: 16}\n"
    jobs = sc.replace("workload:\n  file: ../_base/trace.yaml\n", one_job)
    yield "scenario", "jobs-and-workload", sc.replace("network:", one_job + "network:"), "jobs"
    yield (
        "scenario",
        "jobs-do-not-fit",
        jobs.replace("gpus: 16}\n", "gpus: 16}\n" + one_job[6:].replace("a,", "b,")),
        "GPUs",
    )
    yield "scenario", "jobs-gpus-not-the-ranks", jobs.replace("gpus: 16", "gpus: 8"), "ranks"
    yield (
        "scenario",
        "jobs-explicit-overlap",
        jobs.replace(
            "gpus: 16}",
            "gpus: 1, placement: [n0.gpu0]}\n  - {name: b, workload: {file: ../_base/trace.yaml}, gpus: 1, placement: [n0.gpu0]}",
        ),
        "holds",
    )
    yield "scenario", "topology-is-folder", sc.replace("file: ../_base/topology.yaml", "file: ."), "folder"
    yield (
        "scenario",
        "unknown-algorithm",
        sc.replace("all_reduce: ring", "all_reduce: telepathy"),
        "telepathy",
    )
    yield "scenario", "unknown-collective", sc.replace("all_reduce: ring", "all_scream: ring"), "all_scream"
    yield "scenario", "down-link-unknown", sc + "state:\n  down_links: [[a, b]]\n", "no link"
    yield (
        "scenario",
        "gpu-cut-off",
        sc + "state:\n  down_links: [[n1.gpu3, n1.nvsw], [n1.gpu3, n1.nic3]]\n",
        "cut off",
    )
    yield (
        "scenario",
        "straggler-not-gpu",
        sc + "state:\n  stragglers: [{gpu: leaf0.0, slowdown: 2}]\n",
        "not a GPU",
    )
    yield (
        "scenario",
        "straggler-speedup",
        sc + "state:\n  stragglers: [{gpu: n0.gpu0, slowdown: 0.5}]\n",
        "slowdown",
    )
    yield (
        "scenario",
        "degraded-factor-zero",
        sc + "state:\n  degraded_links: [{link: [n0.gpu0, n0.nvsw], factor: 0}]\n",
        "factor",
    )
    yield (
        "scenario",
        "straggler-twice",
        sc
        + "state:\n  stragglers:\n    - {gpu: n1.gpu2, slowdown: 1.3}\n    - {gpu: n1.gpu2, slowdown: 2}\n",
        "state.stragglers.1: GPU 'n1.gpu2' is listed twice (first as entry 0)",
    )
    yield (
        "scenario",
        "degraded-link-twice-reversed",
        sc
        + "state:\n  degraded_links:\n    - {link: [n0.nic3, leaf3.0], factor: 0.5}\n"
        + "    - {link: [leaf3.0, n0.nic3], factor: 0.9}\n",
        "state.degraded_links.1: the link 'leaf3.0'-'n0.nic3' is listed twice",
    )
    yield (
        "scenario",
        "down-link-twice",
        sc + "state:\n  down_links:\n    - [n0.nic3, leaf3.0]\n    - [n0.nic3, leaf3.0]\n",
        "state.down_links.1: the link",
    )
    run_level = "policy: {kind: checkpoint_restart, interval_min: 30}\nreliability:\n  duration_days: 1\n"
    yield (
        "scenario",
        "run-level-no-checkpoint-size",
        sc + run_level + "  storage_gbyte_per_s: 10\n",
        "reliability.checkpoint_gbyte: the run level needs the checkpoint size",
    )
    yield (
        "scenario",
        "run-level-no-storage",
        sc + run_level + "  checkpoint_gbyte: 10\n",
        "reliability.storage_gbyte_per_s: the topology has no storage nodes",
    )
    yield "scenario", "is-a-compare-file", cmp, "compare"
    yield "scenario", "is-a-study-file", st, "study"
    yield "scenario", "duration-centuries", sc + "reliability:\n  duration_days: 1.0e6\n", "duration"
    yield "scenario", "both-spellings", sc + "reliability:\n  duration_days: 1\n  duration_h: 24\n", "spell"
    yield "scenario", "steps-zero", sc.replace("steps: 1", "steps: 0"), "steps"
    yield "scenario", "steps-float", sc.replace("steps: 1", "steps: 1.5"), "steps"
    yield (
        "trace",
        "halving-doubling-12",
        tr.replace("group: world", "group: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]").replace(
            "algorithm: ring", "algorithm: halving_doubling"
        ),
        "power-of-two",
    )
    # traces
    yield "trace", "deadlock-send-recv", _deadlock_trace(), "deadlock"
    yield (
        "trace",
        "recv-without-send",
        tr.replace(
            "  - id: s0\n    kind: send\n    ranks: [0]\n    peer: 1\n    size_mib: 8\n    deps: [grads]\n",
            "",
        ),
        "no matching send",
    )
    yield (
        "trace",
        "send-without-recv",
        tr.replace("  - id: r1\n    kind: recv\n    ranks: [1]\n    peer: 0\n", ""),
        "recv",
    )
    yield "trace", "duration-inf", tr.replace("duration_ms: 20", "duration_ms: .inf"), "finite"
    yield "trace", "flops-1e400", tr.replace("flops: 2.0e13", "flops: 1e400"), "finite"
    yield "trace", "flops-absurd", tr.replace("flops: 2.0e13", "flops: 1.0e30"), "at most"
    yield (
        "trace",
        "duration-and-flops",
        tr.replace("    duration_ms: 20\n", "    duration_ms: 20\n    flops: 1.0e12\n"),
        "not both",
    )
    yield (
        "trace",
        "collective-on-compute",
        tr.replace("    tag: fwd\n", "    tag: fwd\n    collective: all_reduce\n"),
        "collective",
    )
    yield "trace", "peer-on-compute", tr.replace("    tag: fwd\n", "    tag: fwd\n    peer: 3\n"), "peer"
    yield (
        "trace",
        "algorithm-unknown",
        tr.replace("algorithm: ring", "algorithm: smoke_signals"),
        "smoke_signals",
    )
    yield (
        "trace",
        "algorithm-wrong-kind",
        tr.replace("collective: all_reduce", "collective: all_to_all"),
        "ring",
    )
    yield "trace", "dtype-unknown", tr.replace("    tag: fwd\n", "    tag: fwd\n    dtype: bf17\n"), "bf17"
    yield "trace", "dtype-gpu-lacks", tr.replace("    tag: fwd\n", "    tag: fwd\n    dtype: fp64\n"), "fp64"
    yield "trace", "too-many-ranks", tr.replace("ranks: 16", "ranks: 64"), "do not fit"
    yield "trace", "dep-unknown", tr.replace("deps: [fwd]", "deps: [fwdd]"), "fwdd"
    yield "trace", "dep-cycle", tr.replace("    tag: fwd\n", "    tag: fwd\n    deps: [bwd]\n"), "cycle"
    yield "trace", "id-twice", tr.replace("id: bwd", "id: fwd").replace("deps: [fwd]", "deps: []"), "twice"
    yield "trace", "id-with-at", tr.replace("id: bwd", "id: b@d").replace("deps: [bwd]", "deps: [fwd]"), "@"
    yield "trace", "group-unknown", tr.replace("group: world", "group: galaxy"), "galaxy"
    yield "trace", "rank-out-of-range", tr.replace("ranks: [0]", "ranks: [99]"), "99"
    yield "trace", "rank-listed-twice", tr.replace("ranks: [0]", "ranks: [0, 0]"), "twice"
    # a range is checked before it is listed: these stops would fill memory
    yield "trace", "group-range-huge", tr.replace("    stop: 2\n", "    stop: 1000000000000\n"), "rank 16"
    yield (
        "trace",
        "ranks-range-huge",
        tr.replace("ranks: [0]", "ranks: {start: 0, stop: 10000000000000}"),
        "ops.3.ranks: rank 16 does not exist",
    )
    yield (
        "trace",
        "peer-self",
        tr.replace("    peer: 1\n    size_mib: 8", "    peer: 0\n    size_mib: 8"),
        "peer",
    )
    yield "trace", "tag-comm", tr.replace("tag: dp", "tag: comm"), "reserved"
    yield "trace", "format-wrong", tr.replace("clustersim-step/1", "clustersim-step/2"), "format"
    yield (
        "trace",
        "placement-unknown-gpu",
        tr.replace("ranks: 16\n", "ranks: 2\nplacement: [n0.gpu0, n9.gpu9]\n")
        .replace("ranks: all", "ranks: [0, 1]")
        .replace("group: world", "group: [0, 1]"),
        "n9.gpu9",
    )
    yield (
        "trace",
        "placement-same-gpu",
        tr.replace("ranks: 16\n", "ranks: 2\nplacement: [n0.gpu0, n0.gpu0]\n")
        .replace("ranks: all", "ranks: [0, 1]")
        .replace("group: world", "group: [0, 1]"),
        "same GPU",
    )
    yield (
        "trace",
        "checkpoint-no-storage",
        tr + "  - id: ck\n    kind: checkpoint\n    ranks: [0]\n    size_gib: 1\n",
        "storage",
    )
    yield (
        "trace",
        "mirror-size-differs",
        tr.replace("    algorithm: ring\n", "    algorithm: ring\n    mirrors: [[0, 1]]\n"),
        "mirror",
    )
    # studies
    yield (
        "study",
        "axes-same-name",
        st.replace(
            "    values: [10, 30]\n",
            "    values: [10, 30]\n  - param: policy.restart.queue_min\n    name: interval_min\n    values: [1, 2]\n",
        ),
        "twice",
    )
    yield (
        "study",
        "from-scenario-missing",
        st.replace(
            "  step_time_s: 2.0\n  checkpoint_write_min: 5\n  checkpoint_snapshot_s: 10\n",
            "  from_scenario: nowhere.yaml\n",
        ),
        "not found",
    )
    yield (
        "study",
        "from-scenario-bad",
        st.replace(
            "  step_time_s: 2.0\n  checkpoint_write_min: 5\n  checkpoint_snapshot_s: 10\n",
            "  from_scenario: ../scenario/steps-zero.yaml\n",
        ),
        "steps",
    )
    yield (
        "study",
        "from-scenario-no-checkpoint-size",
        st.replace(
            "  step_time_s: 2.0\n  checkpoint_write_min: 5\n  checkpoint_snapshot_s: 10\n",
            "  from_scenario: ../scenario/run-level-no-checkpoint-size.yaml\n",
        ),
        "checkpoint_gbyte",
    )
    yield "study", "axis-bad-value", st.replace("values: [10, 30]", "values: [10, -30]"), "axes.0.values.1"
    yield (
        "study",
        "axis-unknown-param",
        st.replace("param: policy.interval_min", "param: policy.nope"),
        "nope",
    )
    yield (
        "study",
        "three-axes",
        st + "  - param: seeds\n    values: [1]\n  - param: seed\n    values: [1]\n",
        "axes",
    )
    yield "study", "no-step-source", st.replace("  step_time_s: 2.0\n", ""), "from_scenario"
    yield "study", "duration-forever", st.replace("duration_days: 2", "duration_days: 1.0e7"), "duration"
    yield "study", "is-a-scenario", sc, "scenario file"
    # compare files
    yield "compare", "variant-name-twice", cmp.replace("name: tree", "name: ring"), "twice"
    yield "compare", "variant-name-path", cmp.replace("name: tree", "name: ../tree"), "name"
    yield (
        "compare",
        "base-missing",
        cmp.replace("file: ../_base/scenario.yaml", "file: nowhere.yaml"),
        "not found",
    )
    yield (
        "compare",
        "variant-bad-algorithm",
        cmp.replace("all_reduce: tree", "all_reduce: semaphore"),
        "semaphore",
    )
    yield (
        "compare",
        "variant-bad-steps",
        cmp.replace("    seed: 3\n", "    seed: 3\n    run:\n      steps: -1\n"),
        "steps",
    )
    yield (
        "compare",
        "variant-bad-topology-param",
        cmp.replace("    seed: 3\n", "    seed: 3\n    topology:\n      params:\n        nic_gbps: .inf\n"),
        "nic_gbps",
    )
    yield (
        "compare",
        "variant-unknown-key",
        cmp.replace("    seed: 3\n", "    seed: 3\n    colour: red\n"),
        "colour",
    )
    yield (
        "compare",
        "base-run-level-no-storage",
        cmp.replace("file: ../_base/scenario.yaml", "file: ../scenario/run-level-no-storage.yaml"),
        "storage_gbyte_per_s",
    )
    yield "compare", "no-variants", cmp.split("variants:")[0] + "variants: []\n", "variants"
    # topology parameters a generator cannot build: placed at the key to change
    yield from _design_cases()
    # calibration profiles
    yield from _profile_cases()
    # calibration logs
    yield from _log_cases()


def _design_cases() -> Iterator[tuple[str, str, str, str]]:
    head = "name: t\ngpu:\n  file: ../_base/gpu.yaml\n"
    yield "topology", "fat-tree-odd-k", head + "generator: fat_tree\nk: 7\n", "k: k must be even"
    yield "topology", "torus-dimension-one", head + "generator: torus\ndims: [1, 4]\n", "dims: every torus"
    yield (
        "topology",
        "unknown-generator",
        TOPOLOGY.replace("rail_clos", "rail_clso"),
        "generator: unknown generator",
    )
    leaf = "generator: superpod\nnodes: 64\nsu_size: 64\nswitch_radix: 64\n"
    yield "topology", "leaf-ports-over-radix", head + leaf, "switch_radix: a leaf needs"
    nic = "generator: superpod\nnodes: 8\nnic: connectx9\n"
    yield "topology", "unknown-nic-preset", head + nic, "nic: unknown NIC preset"


def _deadlock_trace() -> str:
    return """\
format: clustersim-step/1
ranks: 2
ops:
  - id: r0
    kind: recv
    ranks: [0]
    peer: 1
  - id: s0
    kind: send
    ranks: [0]
    peer: 1
    size_mib: 1
  - id: r1
    kind: recv
    ranks: [1]
    peer: 0
  - id: s1
    kind: send
    ranks: [1]
    peer: 0
    size_mib: 1
"""


def _profile_cases() -> Iterator[tuple[str, str, str, str]]:
    text = (Path(__file__).resolve().parent / "corpus/_base/profile.yaml").read_text()
    import re

    def sub(pattern: str, new: str) -> str:
        out, n = re.subn(pattern, new, text, count=1, flags=re.M)
        if not n:
            raise KeyError(pattern)
        return out

    yield (
        "profile",
        "min-above-max",
        sub(r"^  min_size_bytes: .*$", "  min_size_bytes: 1.0e15"),
        "min_size_bytes",
    )
    yield (
        "profile",
        "efficiency-negative",
        sub(r"^  efficiency:\n  - - (\S+)\n    - \S+$", r"  efficiency:\n  - - \1\n    - -0.5"),
        "efficiency",
    )
    yield (
        "profile",
        "efficiency-nan",
        sub(r"^  efficiency:\n  - - (\S+)\n    - \S+$", r"  efficiency:\n  - - \1\n    - .nan"),
        "efficiency",
    )
    yield (
        "profile",
        "efficiency-sizes-down",
        sub(r"^  efficiency:\n  - - (\S+)$", r"  efficiency:\n  - - 1.0e12"),
        "efficiency",
    )
    yield "profile", "nodes-above-gpus", sub(r"^  n_nodes: .*$", "  n_nodes: 99"), "n_nodes"
    yield "profile", "unknown-collective", sub(r"^- collective: .*$", "- collective: all_shout"), "all_shout"
    yield "profile", "busbw-zero", sub(r"^  busbw_bytes_per_s: .*$", "  busbw_bytes_per_s: 0"), "busbw"
    yield "profile", "inter-one-node", sub(r"^  scope: .*$", "  scope: inter"), "scope"
    yield "profile", "one-gpu", sub(r"^  n_gpus: .*$", "  n_gpus: 1"), "n_gpus"


def _log_cases() -> Iterator[tuple[str, str, str, str]]:
    text = LOG_SAMPLE.read_text()
    lines = text.splitlines(keepends=True)
    yield "log", "empty", "", ""
    yield "log", "header-only", "".join(lines[:16]), ""
    yield "log", "not-a-log", "hello world\n" * 20, ""
    yield "log", "binary", "\x00\x01\x02" * 100, ""
    yield "log", "csv-garbage", "a,b,c\n1,2,3\n", ""
    # one mistake in a real log (the file name says all_reduce; 8 '# Rank' lines)
    i = next(n for n, ln in enumerate(lines) if ln.split()[:1] == ["1048576"])
    swapped = [*lines[:i], lines[i + 1], lines[i], *lines[i + 2 :]]
    yield "log", "allreduce-swapped-row", "".join(swapped), "sizes out of order"
    one_gpu = [ln for ln in lines if "Rank" not in ln or "Rank  0" in ln]
    yield "log", "allreduce-one-gpu", "".join(one_gpu), "n_gpus"
    yield "log", "allreduce-mislabelled", LOG_ALLGATHER.read_text(), "fits all_gather"
    failed = text.replace("Out of bounds values : 0 OK", "Out of bounds values : 3 FAILED")
    yield "log", "allreduce-out-of-bounds", failed, "out of bounds"
