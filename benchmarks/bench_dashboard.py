"""Dashboard size and speed on a 1,024-GPU step (target: a few MB, a few seconds).

Builds a synthetic TP8 x PP4 x DP32 step trace of 1,024 ranks on
`topologies/h100-rail-clos-128n.yaml` (forward through a 4-stage pipeline by send/recv,
tensor-parallel all-reduces inside each server, backward, data-parallel all-reduce per
(stage, TP rank), optimizer), runs it, writes the run folder, then measures: dashboard
build time, HTML size (total and without plotly.js), trace export, and, when a Chromium
binary is found, the time the page takes to render every figure in headless Chromium.

    .venv/bin/python benchmarks/bench_dashboard.py [-o /tmp/bench-dash] [--fidelity analytic|flow]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TP, PP, DP = 8, 4, 32


def rank(tp: int, pp: int, dp: int) -> int:
    return tp + TP * (pp + PP * dp)


def trace_1024() -> dict:
    """A 1,024-rank step trace (clustersim-step/1); the benchmark labels ranks pp0..pp3.

    Stage 0 computes its forward at once; stage p > 0 waits for its activations (recv from
    stage p-1), so later stages start late and the first ones idle at the end: pipeline
    bubbles and collective waits show on the timeline.
    """
    n = TP * PP * DP
    stage_ranks = {p: [rank(t, p, d) for d in range(DP) for t in range(TP)] for p in range(PP)}
    groups = {f"stage{p}": rs for p, rs in stage_ranks.items()}
    ops: list[dict] = []
    for p in range(PP):
        tp_groups = [[rank(t, p, d) for t in range(TP)] for d in range(DP)]
        if p == 0:
            ops.append({"id": "fwd0", "kind": "compute", "ranks": "stage0", "duration_ms": 6.0, "tag": "fwd"})
            ops.append(
                {
                    "id": "tpf0",
                    "kind": "collective",
                    "collective": "all_reduce",
                    "group": tp_groups[0],
                    "mirrors": tp_groups[1:],
                    "size_mib": 32,
                    "tag": "tp",
                    "deps": ["fwd0"],
                }
            )
            tp_ids = {d: "tpf0" for d in range(DP)}
        else:
            tp_ids = {}
            for d, grp in enumerate(tp_groups):
                for r in grp:
                    ops.append(
                        {
                            "id": f"fwd{p}_{r}",
                            "kind": "compute",
                            "ranks": [r],
                            "duration_ms": 6.0,
                            "tag": "fwd",
                            "deps": [f"rf{p}_{r}"],
                        }
                    )
                ops.append(
                    {
                        "id": f"tpf{p}_{d}",
                        "kind": "collective",
                        "collective": "all_reduce",
                        "group": grp,
                        "size_mib": 32,
                        "tag": "tp",
                        "deps": [f"fwd{p}_{r}" for r in grp],
                    }
                )
                tp_ids[d] = f"tpf{p}_{d}"
        if p + 1 < PP:
            for d in range(DP):
                for t in range(TP):
                    a, b = rank(t, p, d), rank(t, p + 1, d)
                    ops.append(
                        {
                            "id": f"sf{p + 1}_{b}",
                            "kind": "send",
                            "ranks": [a],
                            "peer": b,
                            "size_mib": 16,
                            "tag": "pp",
                            "deps": [tp_ids[d]],
                        }
                    )
                    ops.append({"id": f"rf{p + 1}_{b}", "kind": "recv", "ranks": [b], "peer": a, "tag": "pp"})
    for p in range(PP):
        ops.append(
            {"id": f"bwd{p}", "kind": "compute", "ranks": f"stage{p}", "duration_ms": 12.0, "tag": "bwd"}
        )
        tp_groups = [[rank(t, p, d) for t in range(TP)] for d in range(DP)]
        ops.append(
            {
                "id": f"tpb{p}",
                "kind": "collective",
                "collective": "all_reduce",
                "group": tp_groups[0],
                "mirrors": tp_groups[1:],
                "size_mib": 32,
                "tag": "tp",
                "deps": [f"bwd{p}"],
            }
        )
        dp_groups = [[rank(t, p, d) for d in range(DP)] for t in range(TP)]
        ops.append(
            {
                "id": f"dp{p}",
                "kind": "collective",
                "collective": "all_reduce",
                "group": dp_groups[0],
                "mirrors": dp_groups[1:],
                "size_mib": 256,
                "tag": "dp",
                "deps": [f"tpb{p}"],
            }
        )
        ops.append(
            {
                "id": f"opt{p}",
                "kind": "compute",
                "ranks": f"stage{p}",
                "duration_ms": 2.0,
                "tag": "optimizer",
                "deps": [f"dp{p}"],
            }
        )
    return {
        "format": "clustersim-step/1",
        "name": "bench-tp8-pp4-dp32",
        "ranks": n,
        "groups": groups,
        "ops": ops,
    }


def build_run(out: Path, fidelity: str) -> tuple[Path, float]:
    from simulator.scenario.execute import execute
    from simulator.scenario.prepare import prepare

    work = out / "inputs"
    work.mkdir(parents=True, exist_ok=True)
    (work / "trace.yaml").write_text(yaml.safe_dump(trace_1024(), sort_keys=False))
    scenario = {
        "name": "bench-1024",
        "seed": 1,
        "topology": {"file": str(ROOT / "topologies" / "h100-rail-clos-128n.yaml")},
        "workload": {"file": "trace.yaml"},
        "network": {"fidelity": fidelity, "algorithms": {"all_reduce": "ring"}},
        "run": {"steps": 2},
    }
    (work / "scenario.yaml").write_text(yaml.safe_dump(scenario, sort_keys=False))
    t = time.perf_counter()
    prep = prepare(work / "scenario.yaml")
    prep.program.role.update({r: f"pp{(r // TP) % PP}" for r in range(TP * PP * DP)})
    result = execute(prep)
    run_dir = out / "run"
    result.write(run_dir, dashboard=False)
    return run_dir, time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/bench-dashboard"))
    ap.add_argument("--fidelity", default="flow", choices=["flow", "analytic"])
    ap.add_argument("--reuse", action="store_true", help="Reuse the run folder of an earlier call.")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from simulator.metrics.store import read_frames, read_summary
    from simulator.viz.chrome_trace import chrome_trace
    from simulator.viz.dashboard import load_graph, run_dashboard_html

    run_dir = args.output / "run"
    if not (args.reuse and (run_dir / "summary.json").is_file()):
        run_dir, sim_s = build_run(args.output, args.fidelity)
        print(f"simulated 1,024 ranks x 2 steps in {sim_s:.1f} s -> {run_dir}")
    frames, summary = read_frames(run_dir), read_summary(run_dir)
    print("frames:", {k: len(v) for k, v in frames.items()})
    t = time.perf_counter()
    html = run_dashboard_html(frames, summary, load_graph(run_dir))
    build_s = time.perf_counter() - t
    path = run_dir / "dashboard.html"
    path.write_text(html, encoding="utf-8")
    from plotly.offline import get_plotlyjs

    js = len(get_plotlyjs())
    t = time.perf_counter()
    trace = chrome_trace(frames)
    trace_s = time.perf_counter() - t
    (run_dir / "trace.json").write_text(json.dumps(trace))
    res = {
        "dashboard_build_s": round(build_s, 2),
        "html_bytes": len(html.encode()),
        "html_data_bytes_without_plotlyjs": len(html.encode()) - js,
        "trace_build_s": round(trace_s, 2),
        "trace_events": len(trace["traceEvents"]),
        "trace_bytes": (run_dir / "trace.json").stat().st_size,
    }
    sys.path.insert(0, str(ROOT / "tests" / "viz"))
    try:
        from browser import find_chromium, render_page
    except ImportError:
        find_chromium = None
    if find_chromium is not None and find_chromium():
        r = render_page(path, args.output / "browser")
        res.update(
            render_ms=r.render_ms,
            figures_rendered=r.figures_rendered,
            figures_expected=r.figures_expected,
            js_errors=r.errors,
            chromium_wall_s=round(r.wall_s, 2),
        )
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
