"""Chakra ET export and import: round trips, a hand-built trace, and bad input."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.errors import InputError
from simulator.scenario.prepare import prepare, step_simulator
from simulator.workload.interchange import chakra_et_pb2 as pb
from simulator.workload.interchange.chakra_io import attrs_of, make_attr, read_et, write_et
from simulator.workload.interchange.chakra_read import import_chakra
from simulator.workload.interchange.chakra_write import export_chakra
from simulator.workload.interchange.tracebuild import program_from_dict
from simulator.workload.program import StepProgram

ROOT = Path(__file__).resolve().parents[2]


def canonical(program: StepProgram) -> list[tuple]:
    """Every op with all it carries (deps as a set: their order does not change the step)."""
    return sorted(
        (
            o.id,
            o.kind,
            o.ranks,
            o.stream,
            tuple(sorted(o.deps)),
            o.tag,
            o.duration_s,
            o.flops,
            o.bytes_accessed,
            o.dtype,
            o.collective,
            o.group,
            o.mirrors,
            o.size_bytes,
            o.algorithm,
            o.target,
        )
        for o in program.ops
    )


def stream_orders(program: StepProgram) -> dict[tuple[int, str], list[str]]:
    out: dict[tuple[int, str], list[str]] = {}
    for o in program.ops:
        for r in o.ranks:
            out.setdefault((r, o.stream), []).append(o.id)
    return out


def step_time_s(prep, program: StepProgram) -> float:
    sim = step_simulator(dataclasses.replace(prep, program=program), seed=1)
    sim.run(1)
    row = sim.step_rows[0]
    return row.finished_at_s - row.started_at_s


def round_trip(program: StepProgram, gpus: list[str], tmp_path: Path) -> StepProgram:
    export_chakra(program, tmp_path / "et")
    result = import_chakra(tmp_path / "et")
    assert result.warnings == []
    return program_from_dict(result.data, tmp_path / "t.yaml", gpus)


@pytest.mark.parametrize(
    "scenario",
    ["quickstart.yaml", pytest.param("gpt13b-tp8-dp32-rail-clos.yaml", marks=pytest.mark.slow)],
)
def test_trace_round_trip_same_program_and_step_time(scenario, tmp_path):
    prep = prepare(ROOT / "scenarios" / scenario)
    back = round_trip(prep.program, prep.cluster.gpus, tmp_path)
    assert canonical(back) == canonical(prep.program)
    assert stream_orders(back) == stream_orders(prep.program)
    t0, t1 = step_time_s(prep, prep.program), step_time_s(prep, back)
    assert t0 > 0
    assert abs(t1 - t0) <= 1e-9 * t0


def test_flops_priced_compute_carries_its_priced_duration_and_comes_back_as_flops(tmp_path):
    """A compute op priced from FLOPs and bytes is exported with `duration_micros` = its time
    on the scenario's GPU (ASTRA-sim without its roofline reads only that; without it every
    such node ran in no time there), and imported back as FLOPs and bytes: the same program
    and step time, priced on the importing GPU."""
    from simulator.engine.cost import ComputeCost

    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    cost = ComputeCost(prep.topology.gpu, prep.compute_calibration)
    export_chakra(prep.program, tmp_path / "et", duration_of=cost.roofline_s)
    by_name = {op.id: op for op in prep.program.ops}
    _, nodes = read_et(tmp_path / "et" / "trace.0.et")
    priced = [n for n in nodes if n.type == pb.COMP_NODE and "clustersim.flops" in attrs_of(n)]
    assert priced, "quickstart's compute is priced from FLOPs"
    for n in priced:
        op = by_name.get(n.name) or by_name[f"{n.name}@0"]  # rank 0's own op drops "@0"
        assert n.duration_micros == round(cost.roofline_s(op) * 1e6) > 0
    back = program_from_dict(import_chakra(tmp_path / "et").data, tmp_path / "t.yaml", prep.cluster.gpus)
    assert canonical(back) == canonical(prep.program)
    t0, t1 = step_time_s(prep, prep.program), step_time_s(prep, back)
    assert abs(t1 - t0) <= 1e-9 * t0


@pytest.mark.slow
def test_generated_step_round_trip_same_step_time(tmp_path):
    """A model + layout step: compute priced per kernel is exported as its priced duration,
    representatives' collectives with their mirrors; the ops and the step time come back."""
    from simulator.engine.cost import ComputeCost

    prep = prepare(ROOT / "scenarios" / "llama3-8b-tp2-dp8.yaml")
    cost = ComputeCost(prep.topology.gpu, prep.compute_calibration)
    export_chakra(prep.program, tmp_path / "et", duration_of=cost.roofline_s)
    back = program_from_dict(import_chakra(tmp_path / "et").data, tmp_path / "t.yaml", prep.cluster.gpus)
    assert len(back.ops) == len(prep.program.ops)

    # generated ids may hold '@', which trace ids cannot: compare what the ops are
    def comms(p):
        return [
            (o.kind, o.collective, o.group, o.mirrors, o.size_bytes) for o in p.ops if o.kind != "compute"
        ]

    assert comms(back) == comms(prep.program)
    t0, t1 = step_time_s(prep, prep.program), step_time_s(prep, back)
    assert abs(t1 - t0) <= 1e-9 * t0
    # docs/interchange.md: MFU (model FLOPs per step over the step time) and tokens come
    # through; the kernels' FLOPs do not (durations only), which is what lowers the energy
    for key in ("model_flops_per_step", "tokens_per_step"):
        assert back.meta[key] == prep.program.meta[key] > 0

    def flops(p):
        return sum(o.flops or 0.0 for o in p.ops if o.kind == "compute")

    assert flops(back) < 1e-5 * flops(prep.program)  # a few small ops keep theirs


def _tiny_program() -> StepProgram:
    from simulator.workload.program import Op

    ops = [
        Op("fwd@0", "compute", (0,), duration_s=1e-3, tag="fwd"),
        Op("fwd@1", "compute", (1,), duration_s=1e-3, tag="fwd"),
        Op(
            "ar",
            "collective",
            (0, 1),
            "comm",
            ("fwd@0", "fwd@1"),
            "dp",
            collective="all_reduce",
            group=(0, 1),
            size_bytes=1024.0,
        ),
        Op(
            "s@0",
            "p2p",
            (0, 1),
            "comm",
            ("ar",),
            "pp",
            collective="send_recv",
            group=(0, 1),
            size_bytes=2048.0,
        ),
        Op("opt@1", "compute", (1,), deps=("s@0",), flops=1e12, bytes_accessed=1e9, tag="optimizer"),
    ]
    return StepProgram("tiny", ["g0", "g1"], ops)


def test_writer_matches_hand_built_messages(tmp_path):
    """ASTRA-sim's fields of the exported nodes, against messages built here from the schema."""
    export_chakra(_tiny_program(), tmp_path)
    _, rank0 = read_et(tmp_path / "trace.0.et")
    _, rank1 = read_et(tmp_path / "trace.1.et")
    fwd0, ar0, send = rank0
    fwd1, ar1, recv, opt = rank1
    expected_send = pb.Node(id=send.id, name="s@0", type=pb.COMM_SEND_NODE, data_deps=[ar0.id])
    # value kinds as Chakra's own generators write them and its feeder (et_feeder_node.cpp)
    # reads them: int32 peers and tag, int64 size, and is_cpu_op false (a node without it
    # is a CPU op there)
    expected_send.attr.extend(
        [
            pb.AttributeProto(name="comm_src", int32_val=0),
            pb.AttributeProto(name="comm_dst", int32_val=1),
            pb.AttributeProto(name="comm_tag", int32_val=0),
            pb.AttributeProto(name="comm_size", int64_val=2048),
            pb.AttributeProto(name="is_cpu_op", bool_val=False),
        ]
    )

    def kinds(node: pb.Node) -> dict[str, tuple[str | None, object]]:
        return {
            a.name: (a.WhichOneof("value"), attrs_of(node)[a.name])
            for a in node.attr
            if not a.name.startswith("clustersim.")
        }

    for got, want in ((send, expected_send),):
        assert (got.name, got.type, list(got.ctrl_deps), list(got.data_deps)) == (
            want.name,
            want.type,
            list(want.ctrl_deps),
            list(want.data_deps),
        )
        assert kinds(got) == kinds(want)
    assert kinds(recv)["comm_src"] == ("int32_val", 0) and kinds(recv)["is_cpu_op"] == ("bool_val", False)
    assert kinds(ar0)["is_cpu_op"] == ("bool_val", False)
    assert kinds(opt)["tensor_size"] == ("uint64_val", 10**9) and kinds(opt)["num_ops"] == (
        "int64_val",
        10**12,
    )
    assert (ar0.type, attrs_of(ar0)["comm_type"], attrs_of(ar0)["comm_size"]) == (
        pb.COMM_COLL_NODE,
        pb.ALL_REDUCE,
        1024,
    )
    assert list(ar0.data_deps) == [fwd0.id] and list(ar1.data_deps) == [fwd1.id]
    assert (fwd0.type, fwd0.duration_micros, fwd0.name) == (pb.COMP_NODE, 1000, "fwd")
    assert recv.type == pb.COMM_RECV_NODE and list(opt.data_deps) == [recv.id]
    assert (attrs_of(opt)["num_ops"], attrs_of(opt)["tensor_size"]) == (10**12, 10**9)
    groups = json.loads((tmp_path / "comm_group.json").read_text())
    assert groups[attrs_of(ar0)["pg_name"]] == [0, 1]


def test_no_process_group_is_named_0(tmp_path):
    """ASTRA-sim (Workload::extract_comm_group) runs a collective whose pg_name is "0" or
    empty over every rank, whatever comm_group.json says; the exporter numbers groups from 1,
    so a first collective over a subgroup keeps its group there."""
    from simulator.workload.program import Op

    def ar(op_id: str, group: tuple[int, ...], deps: tuple[str, ...] = ()) -> Op:
        return Op(
            op_id,
            "collective",
            group,
            "comm",
            deps,
            "",
            collective="all_reduce",
            group=group,
            size_bytes=64.0,
        )

    ops = [ar("tp", (0, 1)), ar("tp23", (2, 3)), ar("dp", (0, 1, 2, 3), ("tp", "tp23"))]
    export_chakra(StepProgram("pg", ["g0", "g1", "g2", "g3"], ops), tmp_path)
    groups = json.loads((tmp_path / "comm_group.json").read_text())
    named = {}
    for rank in range(4):
        for node in read_et(tmp_path / f"trace.{rank}.et")[1]:
            named.setdefault(node.name, set()).add(attrs_of(node)["pg_name"])
    assert "0" not in groups and all(pg not in ("", "0") for pgs in named.values() for pg in pgs)
    assert {n: [groups[pg] for pg in pgs] for n, pgs in named.items()} == {
        "tp": [[0, 1]],
        "tp23": [[2, 3]],
        "dp": [[0, 1, 2, 3]],
    }


def _astra_style_trace(folder: Path) -> None:
    """A 2-rank trace as ASTRA-sim's generators write it: no clustersim attributes."""
    folder.mkdir()
    (folder / "comm_group.json").write_text('{"7": [0, 1]}')
    for rank in (0, 1):
        comp = pb.Node(id=10, name="gemm", type=pb.COMP_NODE, duration_micros=250)
        coll = pb.Node(id=11, name="grad_ar", type=pb.COMM_COLL_NODE, data_deps=[10])
        coll.attr.extend(
            [make_attr("comm_type", pb.ALL_REDUCE), make_attr("comm_size", 4096), make_attr("pg_name", "7")]
        )
        p2p = pb.Node(
            id=12, name="xfer", type=pb.COMM_SEND_NODE if rank == 0 else pb.COMM_RECV_NODE, data_deps=[11]
        )
        p2p.attr.extend(
            [
                make_attr("comm_src", 0),
                make_attr("comm_dst", 1),
                make_attr("comm_tag", 5),
                make_attr("comm_size", 512),
            ]
        )
        write_et(folder / f"et.{rank}.et", pb.GlobalMetadata(version="0.0.4"), [comp, coll, p2p])


def test_imports_a_hand_built_astra_sim_trace(tmp_path):
    _astra_style_trace(tmp_path / "et")
    prog = program_from_dict(import_chakra(tmp_path / "et").data, tmp_path / "t.yaml", ["a", "b"])
    ops = {o.id: o for o in prog.ops}
    assert ops["gemm@0"].duration_s == pytest.approx(250e-6, rel=1e-12)
    ar = ops["grad_ar"]
    assert (ar.collective, ar.group, ar.size_bytes) == ("all_reduce", (0, 1), 4096.0)
    assert set(ar.deps) == {"gemm@0", "gemm@1"}
    xfer = ops["xfer@0"]
    assert (xfer.kind, xfer.ranks, xfer.size_bytes, set(xfer.deps)) == ("p2p", (0, 1), 512.0, {"grad_ar"})


def test_communication_without_comm_size_is_counted_in_the_warnings(tmp_path):
    """A collective or send without comm_size moves 0 bytes (ASTRA-sim skips such a node,
    Workload::node_sanity_check): the import says how many it took so."""
    _astra_style_trace(tmp_path / "et")
    for rank in (0, 1):
        path = tmp_path / "et" / f"et.{rank}.et"
        meta, nodes = read_et(path)
        for node in nodes:
            kept = [a for a in node.attr if a.name != "comm_size"]
            del node.attr[:]
            node.attr.extend(kept)
        write_et(path, meta, nodes)
    result = import_chakra(tmp_path / "et")
    assert sorted(result.warnings) == [
        "1 COMM_SEND_NODEs without comm_size (taken as 0 bytes)",
        "2 COMM_COLL_NODEs without comm_size (taken as 0 bytes)",
    ]
    assert {op["size_bytes"] for op in result.data["ops"] if op["kind"] in ("collective", "send")} == {0.0}


def _write_bad(tmp_path: Path, case: str) -> tuple[Path, str]:
    folder = tmp_path / "et"
    _astra_style_trace(folder)
    meta = pb.GlobalMetadata(version="0.0.4")
    path = folder / "et.1.et"
    comp = pb.Node(id=10, name="gemm", type=pb.COMP_NODE, duration_micros=250)
    if case == "truncated":
        path.write_bytes(path.read_bytes()[:-3])
        return path, "truncated protobuf"
    if case == "json":  # '{' read as a varint length was "truncated protobuf"
        path.write_text('{"traceEvents": []}\n')
        return (
            path,
            "not a Chakra ET file: it is JSON (a PyTorch profiler trace goes to `clustersim import kineto`)",
        )
    if case == "png":
        path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))
        return path, "not a Chakra ET file: it is a PNG image"
    if case == "rank-twice":  # the last file read was taken as rank 1, the other dropped
        (folder / "et.01.et").write_bytes(path.read_bytes())
        return path, "rank 1 is also the rank of et.01.et; expected one file per rank"
    if case == "missing":
        write_et(path, meta, [pb.Node(id=10, name="g", type=pb.COMP_NODE, data_deps=[99])])
        return path, "node 10: depends on node 99"
    if case == "cycle":
        a = pb.Node(id=1, name="a", type=pb.COMP_NODE, data_deps=[2])
        b = pb.Node(id=2, name="b", type=pb.COMP_NODE, data_deps=[1])
        write_et(path, meta, [a, b])
        return path, "dependency cycle"
    if case == "group":
        coll = pb.Node(id=11, name="ar", type=pb.COMM_COLL_NODE)
        coll.attr.extend(
            [make_attr("comm_type", 0), make_attr("comm_size", 8), make_attr("clustersim.group", [1, 5])]
        )
        write_et(path, meta, [comp, coll])
        return path, "node 11: collective group names rank 5; expected ranks 0..1"
    if case == "twice":  # was reported as members disagreeing on the collective count
        coll = pb.Node(id=11, name="ar", type=pb.COMM_COLL_NODE)
        coll.attr.extend(
            [make_attr("comm_type", 0), make_attr("comm_size", 8), make_attr("clustersim.group", [1, 1])]
        )
        write_et(path, meta, [comp, coll])
        return path, "node 11: collective group [1, 1] names rank 1 twice"
    write_et(path, meta, [comp, pb.Node(id=3, name="ld", type=pb.MEM_LOAD_NODE)])
    return path, "node 3: node type MEM_LOAD_NODE has no clustersim model"


@pytest.mark.parametrize(
    "case", ["truncated", "json", "png", "rank-twice", "missing", "cycle", "group", "twice", "unknown"]
)
def test_bad_chakra_input_is_one_line_exit_2(tmp_path, case):
    path, needle = _write_bad(tmp_path, case)
    res = CliRunner().invoke(app, ["import", "chakra", str(path.parent), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and needle in lines[0], res.output
    assert not (tmp_path / "t.yaml").exists()


def test_cli_import_writes_a_trace_the_scenario_loader_reads(tmp_path):
    _astra_style_trace(tmp_path / "et")
    out = tmp_path / "t.yaml"
    res = CliRunner().invoke(app, ["import", "chakra", str(tmp_path / "et"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    from simulator.workload.trace import load_trace

    prog = load_trace(out, ["a", "b"])
    assert {o.id for o in prog.ops} == {"gemm@0", "gemm@1", "grad_ar", "xfer@0"}


def _fail_on_write(monkeypatch, nth: int) -> None:
    """The `nth` file opened for writing through a temporary sibling fails: a full disk."""
    import simulator.io

    calls = {"n": 0}
    real = simulator.io.os.fdopen

    def fdopen(fd, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == nth:
            os.close(fd)
            raise OSError(28, "No space left on device")
        return real(fd, *args, **kwargs)

    monkeypatch.setattr(simulator.io.os, "fdopen", fdopen)


def test_an_import_that_cannot_be_written_keeps_the_trace_already_there(tmp_path, monkeypatch):
    _astra_style_trace(tmp_path / "et")
    out = tmp_path / "t.yaml"
    out.write_text("previous\n")
    _fail_on_write(monkeypatch, 1)
    res = CliRunner().invoke(app, ["import", "chakra", str(tmp_path / "et"), "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [f"error: {out}: cannot write a file here: No space left on device"]
    assert out.read_text() == "previous\n" and sorted(p.name for p in tmp_path.iterdir()) == ["et", "t.yaml"]


def test_an_import_is_written_into_a_new_folder_and_not_under_a_file(tmp_path):
    _astra_style_trace(tmp_path / "et")
    out = tmp_path / "new" / "t.yaml"
    res = CliRunner().invoke(app, ["import", "chakra", str(tmp_path / "et"), "-o", str(out)])
    assert res.exit_code == 0 and out.is_file(), res.output
    (tmp_path / "file").write_text("")
    res = CliRunner().invoke(
        app, ["import", "chakra", str(tmp_path / "et"), "-o", str(tmp_path / "file" / "t.yaml")]
    )
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output


def test_an_export_that_cannot_be_written_keeps_the_trace_already_there(tmp_path, monkeypatch):
    """A full disk at the third file leaves the folder as the export before it wrote it,
    not rank 0 and 1 of one export beside rank 1.. of the other."""
    export_chakra(_tiny_program(), tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    other = _tiny_program()
    other.ops[0] = dataclasses.replace(other.ops[0], duration_s=5e-3)
    _fail_on_write(monkeypatch, 2)
    with pytest.raises(InputError, match="No space left on device"):
        export_chakra(other, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_example_chakra_trace_is_the_exporters_output_and_imports_to_its_source(tmp_path):
    folder = ROOT / "workloads" / "traces" / "chakra" / "dp16-gpt1p3b"
    gpus = [f"n{i // 8}.gpu{i % 8}" for i in range(16)]
    from simulator.workload.trace import load_trace

    source = load_trace(ROOT / "workloads" / "traces" / "dp16-gpt1p3b-step.yaml", gpus)
    export_chakra(source, tmp_path, prefix="dp16-gpt1p3b")
    for p in sorted(folder.iterdir()):
        assert (tmp_path / p.name).read_bytes() == p.read_bytes(), p.name
    back = program_from_dict(import_chakra(folder).data, tmp_path / "t.yaml", gpus)
    assert canonical(back) == canonical(source)


def test_unknown_node_types_mapped_as_compute_are_counted(tmp_path):
    folder = tmp_path / "et"
    _astra_style_trace(folder)
    meta = pb.GlobalMetadata(version="0.0.4")
    _, nodes = read_et(folder / "et.1.et")
    extra = [pb.Node(id=20 + i, name=f"ld{i}", type=pb.MEM_LOAD_NODE, duration_micros=3) for i in range(2)]
    write_et(folder / "et.1.et", meta, [*nodes, *extra])
    result = import_chakra(folder, unknown="compute")
    assert result.warnings == ["2 MEM_LOAD_NODE nodes (run as compute)"]
    ops = {o["id"]: o for o in result.data["ops"]}
    assert ops["ld0"]["stream"] == "other" and ops["ld0"]["duration_s"] == 3e-6


def test_members_disagreeing_on_a_collective_name_the_node(tmp_path):
    folder = tmp_path / "et"
    _astra_style_trace(folder)
    _, nodes = read_et(folder / "et.1.et")
    for a in nodes[1].attr:
        if a.name == "comm_size":
            a.int64_val = 8192
    write_et(folder / "et.1.et", pb.GlobalMetadata(version="0.0.4"), nodes)
    res = CliRunner().invoke(app, ["import", "chakra", str(folder), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2
    assert (
        "et.1.et: node 11: collective #0 of group [0, 1] (process group 7) is all_reduce of 8192 bytes here"
        in res.output
    )


def test_a_rank_not_simulated_exports_an_empty_file_and_joins_its_collectives(tmp_path):
    from simulator.workload.program import Op

    ops = [
        Op("f@0", "compute", (0,), duration_s=1e-3),
        Op(
            "ar",
            "collective",
            (0,),
            "comm",
            ("f@0",),
            "dp",
            collective="all_reduce",
            group=(0, 1),
            size_bytes=64.0,
        ),
    ]
    export_chakra(StepProgram("rep", ["g0", "g1"], ops, weight={0: 2}), tmp_path / "et")
    assert read_et(tmp_path / "et" / "trace.1.et")[1] == []
    back = program_from_dict(import_chakra(tmp_path / "et").data, tmp_path / "t.yaml", ["g0", "g1"])
    ar = next(o for o in back.ops if o.kind == "collective")
    assert (ar.group, ar.deps, ar.size_bytes) == ((0, 1), ("f@0",), 64.0)


def _with_attr(tmp_path: Path, node_type: int, key: str, value) -> Path:
    """The 2-rank trace with node 11 of rank 1 replaced by one of `node_type` carrying `key: value`."""
    folder = tmp_path / "et"
    _astra_style_trace(folder)
    path = folder / "et.1.et"
    comp = pb.Node(id=10, name="gemm", type=pb.COMP_NODE, duration_micros=250)
    node = pb.Node(id=11, name="x", type=node_type)
    base = {"comm_type": pb.ALL_REDUCE, "comm_size": 8} if node_type == pb.COMM_COLL_NODE else {}
    if node_type == pb.COMM_SEND_NODE:
        base = {"comm_dst": 0, "comm_size": 8}
    node.attr.extend(make_attr(k, v) for k, v in {**base, key: value}.items())
    write_et(path, pb.GlobalMetadata(version="0.0.4"), [comp, node])
    return path


@pytest.mark.parametrize(
    "node_type, key, value, expected",
    [
        (pb.COMM_COLL_NODE, "comm_size", "big", "comm_size: expected a number of at least 0, found 'big'"),
        (pb.COMM_COLL_NODE, "comm_size", -8, "comm_size: expected a number of at least 0, found -8"),
        (pb.COMM_COLL_NODE, "comm_type", "ALL_REDUCE", "comm_type: expected a whole number of at least 0"),
        (pb.COMM_COLL_NODE, "clustersim.group", ["x", "y"], "clustersim.group: expected a whole number"),
        (
            pb.COMM_SEND_NODE,
            "comm_dst",
            "one",
            "comm_dst: expected a whole number of at least 0, found 'one'",
        ),
        (pb.COMP_NODE, "clustersim.duration_s", "fast", "clustersim.duration_s: expected a number"),
    ],
)
def test_an_attribute_of_the_wrong_type_is_one_line_naming_the_node(
    tmp_path, node_type, key, value, expected
):
    """Attributes that are not numbers where numbers belong: one line naming the ET file, the
    node and the attribute (they used to end in a ValueError traceback)."""
    path = _with_attr(tmp_path, node_type, key, value)
    res = CliRunner().invoke(app, ["import", "chakra", str(path.parent), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: node 11: {expected}"), res.output


def test_a_rank_in_comm_group_json_that_is_not_whole_is_refused(tmp_path):
    _astra_style_trace(tmp_path / "et")
    (tmp_path / "et" / "comm_group.json").write_text('{"7": [0, 1.7]}')
    res = CliRunner().invoke(app, ["import", "chakra", str(tmp_path / "et"), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2
    assert "comm_group.json: group '7': rank 1.7 is not a whole number" in res.output


def test_export_refuses_a_folder_holding_ranks_of_another_trace(tmp_path):
    """Rank files it would not replace would be read as ranks of the new trace on import."""
    prog = _tiny_program()
    folder = tmp_path / "et"
    first = export_chakra(prog, folder)
    assert export_chakra(prog, folder) == first  # the same trace again: replaced in place
    (folder / "trace.7.et").write_bytes(b"")
    with pytest.raises(InputError, match=r"holds ET files this export would not replace \(trace\.7\.et\)"):
        export_chakra(prog, folder)


def test_an_error_in_the_translated_trace_names_the_imported_folder_and_op(tmp_path):
    """A send with no recv is found once the nodes are translated: the error names the ET
    folder and the op, not the output file (which is not written)."""
    folder = tmp_path / "et"
    _astra_style_trace(folder)
    meta, nodes = read_et(folder / "et.1.et")
    write_et(folder / "et.1.et", meta, [n for n in nodes if n.type != pb.COMM_RECV_NODE])
    out = tmp_path / "t.yaml"
    res = CliRunner().invoke(app, ["import", "chakra", str(folder), "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {folder}: ops.") and ": op xfer" in lines[0], (
        res.output
    )
    assert str(out) not in lines[0] and not out.exists()


def _two_communicators(folder: Path) -> None:
    """Ranks 0 and 1 over two process groups of the same ranks: rank 0 calls A (pg a, 100 B)
    then B (pg b, 200 MB), rank 1 the other way round."""
    folder.mkdir()
    (folder / "comm_group.json").write_text('{"a": [0, 1], "b": [0, 1]}')
    for rank in (0, 1):
        calls = [("A", "a", 100), ("B", "b", 200_000_000)]
        nodes = []
        for i, (name, pg, size) in enumerate(calls if rank == 0 else calls[::-1]):
            node = pb.Node(id=i + 1, name=name, type=pb.COMM_COLL_NODE)
            node.attr.extend(
                [
                    make_attr("comm_type", pb.ALL_REDUCE),
                    make_attr("comm_size", size),
                    make_attr("pg_name", pg),
                ]
            )
            nodes.append(node)
        write_et(folder / f"et.{rank}.et", pb.GlobalMetadata(version="0.0.4"), nodes)


def test_collectives_match_per_process_group_not_per_rank_set(tmp_path):
    """Separate communicators keep separate orders: A and B issued in crossed order on two
    process groups over the same ranks is a legal trace (it was refused as a size mismatch)."""
    _two_communicators(tmp_path / "et")
    prog = program_from_dict(import_chakra(tmp_path / "et").data, tmp_path / "t.yaml", ["a", "b"])
    sizes = sorted(o.size_bytes for o in prog.ops if o.kind == "collective")
    assert sizes == [100.0, 200_000_000.0]


def test_no_output_replaces_a_trace_or_file_the_command_reads(tmp_path):
    """import chakra -o DIR/trace.0.et, export chrome -o WORKLOAD (or the GPU file its
    topology names) and export chakra into the scenario's own trace folder with its prefix
    each replaced an input."""
    _astra_style_trace(tmp_path / "et")
    before = {p.name: p.read_bytes() for p in (tmp_path / "et").iterdir()}
    for name in ("et.1.et", "comm_group.json"):
        res = CliRunner().invoke(
            app, ["import", "chakra", str(tmp_path / "et"), "-o", str(tmp_path / "et" / name)]
        )
        assert res.exit_code == 2 and "would overwrite the input" in res.output, res.output
    assert {p.name: p.read_bytes() for p in (tmp_path / "et").iterdir()} == before
    topo = ROOT / "topologies" / "h100-rail-clos-2n.yaml"
    sc = tmp_path / "sc.yaml"
    sc.write_text(f"name: sc\nseed: 1\ntopology: {{file: {topo}}}\nworkload: {{format: chakra, path: et}}\n")
    gpu = tmp_path / "gpu.yaml"  # a file the topology reads, not the scenario
    gpu.write_text((ROOT / "topologies" / "gpus" / "h100-sxm.yaml").read_text())
    (tmp_path / "topo.yaml").write_text(topo.read_text().replace("gpus/h100-sxm.yaml", str(gpu)))
    sc.write_text(sc.read_text().replace(str(topo), str(tmp_path / "topo.yaml")))
    gpu_before = gpu.read_bytes()
    for args, needle in (
        (["chrome", str(sc), "-o", str(tmp_path / "et" / "et.0.et")], "would overwrite the input"),
        (["chrome", str(sc), "-o", str(gpu)], "would overwrite the input"),
        # the files' own prefix: the export replaced every input file (exit 0)
        (["chakra", str(sc), "-o", str(tmp_path / "et"), "--prefix", "et"], "would overwrite the input"),
    ):
        res = CliRunner().invoke(app, ["export", *args])
        assert res.exit_code == 2 and needle in res.output, res.output
    assert gpu.read_bytes() == gpu_before
    assert {p.name: p.read_bytes() for p in (tmp_path / "et").iterdir()} == before


def test_an_exported_file_cut_at_a_record_boundary_is_refused(tmp_path):
    """An ET file cut exactly after a node still parses (records are length-prefixed and
    Chakra has no node count), so it imported with the last ops of that rank missing. Our
    export writes each file's node count; the import checks it (other tools' files have none)."""
    paths = export_chakra(_tiny_program(), tmp_path / "et")
    meta, nodes = read_et(paths[1])
    assert attrs_of(meta)["clustersim.nodes"] == len(nodes)
    write_et(paths[1], meta, nodes[:-1])
    res = CliRunner().invoke(app, ["import", "chakra", str(tmp_path / "et"), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [
        f"error: {paths[1]}: {len(nodes) - 1} nodes, but its metadata says clustersim.nodes {len(nodes)}; "
        "the file was cut short (at a record boundary) or edited"
    ]
    assert not (tmp_path / "t.yaml").exists()
