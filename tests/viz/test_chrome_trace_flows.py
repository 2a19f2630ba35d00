"""Chrome trace flow arrows: send -> recv and cross-rank dependencies, bound to op slices."""

from __future__ import annotations

import dataclasses
from pathlib import Path

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
    ]
    return StepProgram("flows", gpus[:3], ops)


def test_flows_join_sender_to_receiver_and_dependencies_across_ranks():
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    program = _program(prep.cluster.gpus)
    result = execute(dataclasses.replace(prep, program=program))
    edges = flow_edges(program)
    # the transfer, and d@2's dependency on b@1 (x's deps and c@1's are on their own ranks)
    assert edges == [("p2p", "x", 0, "x", 1), ("dependency", "b@1", 1, "d@2", 2)]
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
