"""Chrome trace flow arrows: send -> recv and cross-rank dependencies, bound to op slices."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.viz.chrome_trace import chrome_trace, flow_edges
from simulator.workload.program import Op, StepProgram

ROOT = Path(__file__).resolve().parents[2]


def _program(gpus: list[str]) -> StepProgram:
    ops = [
        Op("a@0", "compute", (0,), duration_s=1e-3),
        Op("b@1", "compute", (1,), duration_s=2e-3),
        Op("x", "p2p", (0, 1), "comm", ("a@0",), "pp", collective="send_recv", group=(0, 1), size_bytes=1e6),
        Op("c@1", "compute", (1,), deps=("x",), duration_s=1e-3),
        Op("d@2", "compute", (2,), deps=("b@1",), duration_s=1e-3),
        Op("e@2", "compute", (2,), deps=("x",), duration_s=1e-3),
    ]
    return StepProgram("flows", gpus[:3], ops)


def test_flows_join_sender_to_receiver_and_dependencies_across_ranks():
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    program = _program(prep.cluster.gpus)
    result = execute(dataclasses.replace(prep, program=program))
    edges = flow_edges(program)
    # the transfer, d@2's dependency on b@1 and e@2's on the transfer, from its receiver
    # (x's deps and c@1's are on their own ranks)
    assert edges == [
        ("p2p", "x", 0, "x", 1),
        ("dependency", "b@1", 1, "d@2", 2),
        ("dependency", "x", 1, "e@2", 2),
    ]
    trace = chrome_trace(result.frames, edges=edges)
    ev = trace["traceEvents"]
    flows = [e for e in ev if e["ph"] in ("s", "f")]
    steps = result.frames["ops"]["step"].nunique()
    assert len(flows) == 2 * len(edges) * steps and trace["otherData"]["flows"] == len(edges) * steps
    slices = [e for e in ev if e["ph"] == "X" and e["cat"] != "wait"]
    by_id: dict[int, dict[str, dict]] = {}
    for f in flows:
        by_id.setdefault(f["id"], {})[f["ph"]] = f
    for pair in by_id.values():
        start, finish = pair["s"], pair["f"]
        assert finish["bp"] == "e" and start["cat"] == finish["cat"]
        # each end lies on a slice of its lane: the op named in the flow's name
        src_name, dst_name = start["name"].split(" -> ")
        for end, name in ((start, src_name), (finish, dst_name)):
            hosts = [
                s for s in slices
                if (s["pid"], s["tid"], s["name"]) == (end["pid"], end["tid"], name)
                and s["ts"] <= end["ts"] <= s["ts"] + s["dur"]
            ]  # fmt: skip
            assert len(hosts) == 1
    p2p = next(p for p in by_id.values() if p["s"]["cat"] == "p2p")
    assert p2p["s"]["tid"] != p2p["f"]["tid"]  # sender's lane to receiver's lane


def test_no_edges_no_flows():
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    result = execute(dataclasses.replace(prep, program=_program(prep.cluster.gpus)))
    trace = chrome_trace(result.frames)
    assert not [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")] and trace["otherData"]["flows"] == 0


P2P = """\
format: clustersim-step/1
name: p2p
ranks: 2
ops:
  - {id: s, kind: send, ranks: [0], peer: 1, size_bytes: 1.0e8}
  - {id: r, kind: recv, ranks: [1], peer: 0}
"""


def test_jobs_get_their_own_lanes_and_arrows(tmp_path: Path) -> None:
    """Two jobs each number their ranks from 0: each (job, rank) gets its own threads, named
    after the job and the GPU it ran on, and each job's send -> recv arrow joins its own ops
    (the two jobs' rank 0 were one thread, labelled with the first job's GPU, with one arrow)."""
    import json

    from typer.testing import CliRunner

    from simulator.commands.app import app

    (tmp_path / "p2p.yaml").write_text(P2P)
    jobs = "".join(
        f"  - {{name: {n}, workload: {{file: p2p.yaml}}, gpus: 2, placement: spread}}\n" for n in ("a", "b")
    )
    topo = ROOT / "topologies" / "h100-rail-clos-2n.yaml"
    (tmp_path / "two.yaml").write_text(
        f"name: two\ntopology: {{file: {topo}}}\njobs:\n{jobs}run: {{steps: 1}}\n"
    )
    out = tmp_path / "t.json"
    res = CliRunner().invoke(app, ["export", "chrome", str(tmp_path / "two.yaml"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    ev = json.loads(out.read_text())["traceEvents"]
    thread = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"
    }
    gpu_of = {
        (r.job, r.rank): r.gpu for r in execute(prepare(tmp_path / "two.yaml")).frames["ops"].itertuples()
    }
    assert len(set(gpu_of.values())) == 4
    slices = [e for e in ev if e["ph"] == "X"]
    assert {e["args"]["job"] for e in slices} == {"a", "b"}
    for e in slices:
        job, rank = e["args"]["job"], e["args"]["rank"]
        assert thread[(e["pid"], e["tid"])].startswith(f"{job} r{rank} ")
        assert thread[(e["pid"], e["tid"])].endswith(f"({gpu_of[(job, rank)]})")
    arrows = sorted(
        (thread[(e["pid"], e["tid"])].split(" (")[0], e["ph"]) for e in ev if e["ph"] in ("s", "f")
    )
    assert arrows == [("a r0 comm", "s"), ("a r1 comm", "f"), ("b r0 comm", "s"), ("b r1 comm", "f")]
    # one list of arrows for a run of two jobs matches no job: refused, not silently dropped
    frames = execute(prepare(tmp_path / "two.yaml")).frames
    with pytest.raises(ValueError, match="a run of 2 jobs takes its arrows per job"):
        chrome_trace(frames, edges=[("s", "r", 0, "r", 1)])
