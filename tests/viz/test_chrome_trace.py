"""Chrome/Perfetto trace export: valid Trace Event Format whose events are the ops."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.metrics.store import read_frames
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from simulator.viz.chrome_trace import chrome_trace

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qs-trace")
    execute(prepare(ROOT / "scenarios" / "quickstart.yaml")).write(out, dashboard=False)
    return out


def test_trace_command_writes_valid_json_whose_events_are_the_ops(run_dir: Path) -> None:
    res = CliRunner().invoke(app, ["trace", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("trace: ")
    trace = json.loads((run_dir / "trace.json").read_text())
    ev = trace["traceEvents"]
    assert trace["displayTimeUnit"] == "ms"
    ops = read_frames(run_dir)["ops"]
    xs = [e for e in ev if e["ph"] == "X" and e["cat"] != "wait"]
    assert len(xs) == len(ops)
    got = sorted((e["name"], e["args"]["rank"], e["args"]["step"], e["ts"], e["dur"]) for e in xs)
    want = sorted(
        zip(
            ops["op_id"],
            ops["rank"],
            ops["step"],
            ops["started_at_s"] * 1e6,
            ops["duration_s"] * 1e6,
            strict=False,
        )
    )
    assert [g[:3] for g in got] == [w[:3] for w in want]
    np.testing.assert_allclose([g[4] for g in got], [w[4] for w in want], rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose([g[3] for g in got], [w[3] for w in want], rtol=1e-12, atol=1e-9)
    assert all(e["dur"] >= 0 and isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in xs)
    # every (pid, tid) used by an event has a thread name, every pid a process name
    named_threads = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    named_procs = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert {(e["pid"], e["tid"]) for e in xs} <= named_threads
    assert {e["pid"] for e in ev} <= named_procs
    # ranks grouped by server: n0 and n1, one lane per (rank, stream)
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert {"n0", "n1"} <= procs
    assert len(named_threads) == ops[["rank", "stream"]].drop_duplicates().shape[0]


def test_counter_tracks_of_the_busiest_links(run_dir: Path) -> None:
    frames = read_frames(run_dir)
    trace = chrome_trace(frames, top_links=3)
    cs = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert len({e["name"] for e in cs}) == 3 == trace["otherData"]["link_counters"]
    assert all(0 <= e["args"]["utilization_pct"] <= 100 + 1e-9 for e in cs)
    links = frames["links"]
    name = cs[0]["name"]
    mine = sorted((e["ts"], e["args"]["utilization_pct"]) for e in cs if e["name"] == name)
    area = sum((b[0] - a[0]) * a[1] / 100 for a, b in itertools.pairwise(mine)) / 1e6  # busy seconds
    sel = links[links["link"] == name]
    assert area == pytest.approx((sel["bytes"] / sel["capacity_bytes_per_s"]).sum(), rel=1e-6)


def test_waits_and_step_filter(run_dir: Path) -> None:
    frames = read_frames(run_dir)
    trace = chrome_trace(frames, steps=[1], top_links=0)
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["step"] for e in xs} == {1}
    ops = frames["ops"]
    waiting = ops[(ops["step"] == 1) & (ops["wait_s"] > 0)]
    waits = [e for e in xs if e["cat"] == "wait"]
    assert len(waits) == len(waiting)
    assert sum(e["dur"] for e in waits) == pytest.approx(waiting["wait_s"].sum() * 1e6, rel=1e-9, abs=1e-9)


def test_trace_of_a_folder_without_ops_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "incidents.csv").write_text("time_s,kind\n0,failure\n")
    res = CliRunner().invoke(app, ["trace", str(tmp_path)])
    assert res.exit_code == 2 and "no ops frame" in res.output
