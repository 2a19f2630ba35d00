"""PyTorch profiler (Kineto) import, on traces of the synthetic generator."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simulator.commands.app import app
from simulator.errors import InputError
from simulator.scenario.prepare import prepare, step_simulator
from simulator.workload.interchange.kineto import import_kineto
from simulator.workload.interchange.kineto_synth import SyntheticDDP, synthetic_kineto
from simulator.workload.interchange.tracebuild import program_from_dict

ROOT = Path(__file__).resolve().parents[2]
P = SyntheticDDP()
GPUS = [f"g{i}" for i in range(P.world)]


def _write(tmp_path: Path, edit=None, params: SyntheticDDP = P) -> list[Path]:
    paths = []
    for r in range(params.world):
        data = synthetic_kineto(r, params)
        if edit is not None:
            edit(data)
        path = tmp_path / f"rank{r}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths


def test_kernels_become_measured_compute_and_nccl_kernels_collectives(tmp_path):
    result = import_kineto(_write(tmp_path), step=2)
    assert result.warnings == [] and result.step == 2
    prog = program_from_dict(result.data, tmp_path / "t.yaml", GPUS)
    ops = {o.id: o for o in prog.ops}
    fwd = [o for o in prog.ops if o.kind == "compute" and "fwd" in o.id]
    assert len(fwd) == P.layers * P.world and all(o.duration_s == P.fwd_us / 1e6 for o in fwd)
    colls = [o for o in prog.ops if o.kind == "collective"]
    # In msg nelems x 2 bytes (BFloat16) per all-reduce, one per layer, over the 4 ranks
    assert [(o.collective, o.group, o.size_bytes) for o in colls] == [
        ("all_reduce", (0, 1, 2, 3), P.grad_elems * 2.0)
    ] * P.layers
    # the NCCL stream waits for each layer's backward GEMM (Stream Wait Event); the optimizer
    # waits for the last all-reduce
    first = colls[0]
    assert set(first.deps) == {
        f"sm90_xmma_gemm_bf16bf16_bf16f32_bwd_layer{P.layers - 1}@{r}" for r in range(4)
    }
    assert ops["multi_tensor_apply_kernel_adam@0"].deps == (colls[-1].id,)
    # recorded: the GPU span of the step across ranks, laid out by the generator
    assert result.recorded_step_s > (P.layers * (P.fwd_us + P.bwd_us) + P.optim_us) / 1e6


def test_imported_step_simulates_with_measured_compute(tmp_path):
    """Compute on the critical path is measured; what the collectives add is simulated."""
    result = import_kineto(_write(tmp_path), step=1)
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    prog = program_from_dict(result.data, tmp_path / "t.yaml", prep.cluster.gpus)
    sim = step_simulator(dataclasses.replace(prep, program=prog), seed=1)
    sim.run(1)
    step_s = sim.step_rows[0].finished_at_s - sim.step_rows[0].started_at_s
    compute_s = (P.layers * (P.fwd_us + P.bwd_us) + P.optim_us) / 1e6
    assert step_s > compute_s  # the last all-reduce is exposed before the optimizer


def test_group_from_pg_config_and_fallback_warnings(tmp_path):
    def strip(data):
        for ev in data["traceEvents"]:
            args = ev.get("args", {})
            args.pop("Process Group Ranks", None)
            if ev.get("cat") == "cuda_sync":
                ev["cat"] = "dropped"

    result = import_kineto(_write(tmp_path, strip), step=1)
    colls = [o for o in result.data["ops"] if o["kind"] == "collective"]
    assert all(o["group"] == [0, 1, 2, 3] for o in colls)  # from distributedInfo.pg_config
    assert any("no cuda_sync events" in w for w in result.warnings)


def _comm_args(**changes):
    """An edit of every NCCL kernel's args: `changes` set, a value None dropping the arg."""

    def edit(data):
        for ev in data["traceEvents"]:
            args = ev.get("args", {})
            if "Collective name" in args:
                args.update(changes)
                for key in [k for k, v in changes.items() if v is None]:
                    args.pop(key)

    return edit


def test_empty_group_ranks_or_a_group_size_below_1_name_no_group(tmp_path):
    """ "Process Group Ranks": "[]" names no group (a rank is always in its own): the group
    comes from distributedInfo.pg_config, else a Group size below 1 is unknown: all ranks."""
    result = import_kineto(_write(tmp_path, _comm_args(**{"Process Group Ranks": "[]"})), step=1)
    assert [o["group"] for o in result.data["ops"] if o["kind"] == "collective"] == [[0, 1, 2, 3]] * P.layers
    assert result.warnings == []
    edit = _comm_args(**{"Process Group Ranks": None, "Process Group Name": "none", "Group size": -2})
    result = import_kineto(_write(tmp_path, edit), step=1)
    assert [o["group"] for o in result.data["ops"] if o["kind"] == "collective"] == [[0, 1, 2, 3]] * P.layers
    assert any("no group ranks; taken as ranks 0..3" in w for w in result.warnings)


def _pg_config_ranks(ranks):
    def edit(data):
        _comm_args(**{"Process Group Ranks": None})(data)
        data["distributedInfo"]["pg_config"][0]["ranks"] = ranks

    return edit


@pytest.mark.parametrize(
    "edit, field, found",
    [
        (
            _comm_args(**{"Process Group Ranks": "[0, 'a']"}),
            "traceEvents[{i}].args.Process Group Ranks",
            "[0, 'a']",
        ),
        (
            _comm_args(**{"Process Group Ranks": [None, 1]}),
            "traceEvents[{i}].args.Process Group Ranks",
            "[None, 1]",
        ),
        (
            _comm_args(**{"Process Group Ranks": "[[0, 1]]"}),
            "traceEvents[{i}].args.Process Group Ranks",
            "[[0, 1]]",
        ),
        (_pg_config_ranks(["x"]), "distributedInfo.pg_config[0].ranks", "['x']"),
    ],
)
def test_a_group_rank_that_is_not_a_whole_number_is_one_line(tmp_path, edit, field, found):
    path = _write(tmp_path, edit)[0]
    events = json.loads(path.read_text())["traceEvents"]
    index = next(i for i, e in enumerate(events) if "Collective name" in e.get("args", {}))
    out = tmp_path / "t.yaml"
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(out), "--step", "1"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    where = field.format(i=index)
    assert lines == [f"error: {path}: {where}: expected a list of whole-number ranks, found {found}"]
    assert not out.exists()


def test_collective_without_size_is_kept_measured_with_a_warning(tmp_path):
    def strip(data):
        for ev in data["traceEvents"]:
            ev.get("args", {}).pop("In msg nelems", None)

    result = import_kineto(_write(tmp_path, strip), step=1)
    assert not [o for o in result.data["ops"] if o["kind"] == "collective"]
    warned = [w for w in result.warnings if "no message size" in w]
    assert len(warned) == P.layers * P.world and "ncclDevKernel_AllReduce" in warned[0]
    measured = [o for o in result.data["ops"] if o.get("tag") == "comm_measured"]
    assert measured and all(o["duration_s"] == P.allreduce_us / 1e6 for o in measured)


def _no_gpu(data):
    data["traceEvents"] = [e for e in data["traceEvents"] if e.get("cat") != "kernel"]


@pytest.mark.parametrize(
    "content, needle",
    [
        (None, "no GPU events"),
        ('{"traceEvents": 3}', "not a PyTorch profiler trace"),
        ("[1, 2]", "not a PyTorch profiler trace"),
        ("{not json", "not JSON"),
        ('{"traceEvents": [1]}', "traceEvents[0]"),
    ],
)
def test_bad_kineto_input_is_one_line_exit_2(tmp_path, content, needle):
    if content is None:
        path = _write(tmp_path, _no_gpu)[0]
    else:
        path = tmp_path / "bad.json"
        path.write_text(content)
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and needle in lines[0], res.output


def _first_kernel(data) -> int:
    return next(i for i, e in enumerate(data["traceEvents"]) if e.get("cat") == "kernel")


def _set(key, value):
    """An edit of the first kernel event: `key` (`ts`, `dur` or `args.correlation`) set to `value`."""

    def edit(data):
        ev = data["traceEvents"][_first_kernel(data)]
        if key.startswith("args."):
            ev["args"][key[5:]] = value
        else:
            ev[key] = value

    return edit


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("ts", "n/a", "expected a number, found 'n/a'"),
        ("ts", True, "expected a number, found True"),
        ("dur", -5, "expected a number of at least 0, found -5"),
        ("dur", float("nan"), "expected a number of at least 0, found nan"),
        ("args.correlation", "abc", "expected a whole number, found 'abc'"),
        ("args.correlation", 101.5, "expected a whole number, found 101.5"),
        (
            "args.correlation",
            10**400,
            "expected a whole number, found 1000000000000000000000000000000000000...",
        ),
        ("ts", 10**400, "expected a number, found 1000000000000000000000000000000000000..."),
    ],
)
def test_a_bad_number_names_the_input_trace_and_event(tmp_path, key, value, expected):
    """Bad times name the trace and event they are in, never the output (which is not written)."""
    path = _write(tmp_path, _set(key, value))[0]
    index = _first_kernel(json.loads(path.read_text()))
    assert _refused(path, tmp_path) == [f"error: {path}: traceEvents[{index}].{key}: {expected}"]


def _refused(path, tmp_path):
    """The lines `import kineto` prints refusing `path` (exit 2, nothing written)."""
    out = tmp_path / "t.yaml"
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert not out.exists()
    return [ln for ln in res.output.splitlines() if ln.strip()]


def _stream_as_tid(label):
    """Every GPU event without its `stream` arg, the stream in its `tid` as `label` formats it."""

    def edit(data):
        for ev in data["traceEvents"]:
            if ev.get("cat") == "kernel":
                ev["tid"] = label.format(ev["args"].pop("stream"))

    return edit


@pytest.mark.parametrize("label", ["{}", "stream {}"])
def test_a_kernel_without_a_stream_arg_runs_on_the_stream_of_its_tid(tmp_path, label):
    result = import_kineto(_write(tmp_path, _stream_as_tid(label)), step=1)
    streams = {o["stream"] for o in result.data["ops"]}
    assert streams == {"s7", "s20"}  # kineto_synth: COMPUTE_STREAM, NCCL_STREAM


def test_a_kernel_whose_tid_is_no_stream_is_one_line(tmp_path):
    path = _write(tmp_path, _stream_as_tid("gpu lane {}"))[0]
    index = _first_kernel(json.loads(path.read_text()))
    want = f"error: {path}: traceEvents[{index}].tid: expected a whole number, found 'gpu lane 7'"
    assert _refused(path, tmp_path) == [want]


def test_a_gzip_cut_short_is_one_line(tmp_path):
    import gzip

    path = tmp_path / "rank0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(synthetic_kineto(0, P)).encode())[:100])
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [
        f"error: {path}: not a complete gzip file (Compressed file ended before the end-of-stream marker "
        "was reached)"
    ]


def test_missing_profiler_step_is_an_error_naming_the_steps(tmp_path):
    res = CliRunner().invoke(
        app, ["import", "kineto", str(_write(tmp_path)[0]), "-o", str(tmp_path / "t.yaml"), "--step", "9"]
    )
    assert res.exit_code == 2 and "no ProfilerStep#9; the trace has steps [1, 2]" in res.output


def test_data_parallel_what_if_replicates_measured_compute(tmp_path):
    """Two copies of the 4 recorded ranks: 8 ranks, the same measured kernels on each, and
    the all-reduces (over the whole recorded job) now over all 8 ranks."""
    result = import_kineto(_write(tmp_path), step=1, dp_replicas=2)
    prog = program_from_dict(result.data, tmp_path / "t.yaml", [f"g{i}" for i in range(8)])
    colls = [o for o in prog.ops if o.kind == "collective"]
    assert len(colls) == P.layers and all(o.group == tuple(range(8)) for o in colls)
    assert all(o.size_bytes == P.grad_elems * 2.0 for o in colls)
    per_rank = {
        r: sum(o.duration_s for o in prog.ops if o.kind == "compute" and o.ranks == (r,)) for r in range(8)
    }
    assert per_rank[0] == pytest.approx((P.layers * (P.fwd_us + P.bwd_us) + P.optim_us) / 1e6, rel=1e-12)
    assert len(set(per_rank.values())) == 1
    assert result.data["meta"]["simulated"].startswith("collectives")


def test_unprofiled_ranks_are_reported(tmp_path):
    result = import_kineto(_write(tmp_path)[:1], step=1)
    assert any("3 of 4 ranks not profiled" in w for w in result.warnings)
    assert result.data["ranks"] == 4


def test_example_kineto_traces_import():
    folder = ROOT / "workloads" / "traces" / "kineto" / "ddp4-synthetic"
    result = import_kineto(sorted(folder.glob("*.json")), step=2)
    assert result.warnings == []
    assert sum(o["kind"] == "collective" for o in result.data["ops"]) == P.layers


def test_host_launches_subtract_synchronize_and_wait_for_the_gpu_instead(tmp_path):
    """Launches at 0 and 1,000 us, a 500 us cudaStreamSynchronize between them; the host
    timeline starts at the first kernel's start (10 us): the second kernel's host delay is
    1,000 - 10 - 500 = 490 us, and it waits for the first kernel instead."""

    def ev(name, cat, ts, dur, corr, **args):
        return {
            "ph": "X",
            "name": name,
            "cat": cat,
            "ts": ts,
            "dur": dur,
            "args": {"correlation": corr, **args},
        }

    events = [
        {"ph": "X", "name": "ProfilerStep#1", "cat": "user_annotation", "ts": 0, "dur": 2000, "args": {}},
        ev("cudaLaunchKernel", "cuda_runtime", 0, 5, 1),
        ev("gemm_a", "kernel", 10, 100, 1, stream=7),
        ev("cudaStreamSynchronize", "cuda_runtime", 200, 500, 3),
        ev("cudaLaunchKernel", "cuda_runtime", 1000, 5, 2),
        ev("gemm_b", "kernel", 1010, 100, 2, stream=7),
    ]
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps({"traceEvents": events}))
    ops = {op["id"]: op for op in import_kineto([path], host_launches=True).data["ops"]}
    delays = sorted((op for op in ops.values() if op.get("tag") == "host"), key=lambda op: op["id"])
    # first delay: launch at 0 us is before the first kernel start (10 us): none
    assert [op["duration_s"] for op in delays] == pytest.approx([0.0, 490e-6], abs=1e-12)
    assert delays[1]["deps"] == ["gemm_a"]
    assert delays[1]["id"] in ops["gemm_b"]["deps"]


def _info(key, value):
    def edit(data):
        if key is None:
            data["distributedInfo"] = value
        else:
            data["distributedInfo"][key] = value

    return edit


def _no_dur(data):
    del data["traceEvents"][_first_kernel(data)]["dur"]


def _null_dur(data):
    data["traceEvents"][_first_kernel(data)]["dur"] = None


@pytest.mark.parametrize(
    "edit, expected",
    [
        (_info("world_size", 10**9), "distributedInfo.world_size: at most 1,048,576 ranks are imported"),
        (_info("rank", 2**20), "distributedInfo.rank: at most 1,048,576 ranks are imported"),
        (_info(None, "x"), "distributedInfo: expected a mapping, found str"),
        (_no_dur, "].dur: expected a number of at least 0, found no such key (missing)"),
        (_null_dur, "].dur: expected a number of at least 0, found null"),
        (_info("rank", None), "distributedInfo.rank: expected a whole number of at least 0, found null"),
    ],
)
def test_a_world_too_large_a_bad_info_or_a_kernel_without_duration_is_refused(tmp_path, edit, expected):
    """A mistyped world size is refused at once (it used to build every rank: 11 GB and a
    hang at 1e9); a GPU event without `dur` is refused rather than imported as 0 s."""
    path = _write(tmp_path, edit)[0]
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: ") and expected in lines[0], res.output


def test_rank_files_of_two_world_sizes_are_refused(tmp_path):
    """Files that disagree on the job's size are files of two jobs; the largest size was
    imported, with the ranks no file gave as idle participants (exit 0)."""
    paths = _write(tmp_path)
    data = json.loads(paths[1].read_text())
    data["distributedInfo"]["world_size"] = 2 * P.world
    paths[1].write_text(json.dumps(data))
    out = tmp_path / "t.yaml"
    res = CliRunner().invoke(app, ["import", "kineto", *map(str, paths), "-o", str(out)])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [
        f"error: {paths[1]}: distributedInfo.world_size: world_size {2 * P.world} (rank 1), but {P.world} "
        "in rank0.json (rank 0); expected the files of one job"
    ]
    assert not out.exists()


def test_too_many_data_parallel_replicas_are_refused(tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "import",
            "kineto",
            *map(str, _write(tmp_path)),
            "-o",
            str(tmp_path / "t.yaml"),
            "--dp-replicas",
            "300000",
        ],
    )
    assert res.exit_code == 2, res.output
    assert "4 ranks times 300,000 replicas is over 1,048,576 ranks" in res.output
    assert not (tmp_path / "t.yaml").exists()


def test_a_trace_nested_too_deeply_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2
    assert (
        res.output.strip() == f"error: {path}: nested too deeply to read; expected a PyTorch profiler trace"
    )


def test_a_collective_one_profiled_member_never_runs_is_refused(tmp_path):
    """Rank 0 runs one all-reduce more than the other profiled ranks (theirs was dropped):
    the others would never join it. It used to be imported with every member made to run it."""

    def drop_first_nccl(data):
        if data["distributedInfo"]["rank"] != 0:
            events = data["traceEvents"]
            first = next(
                i for i, e in enumerate(events) if e.get("cat") == "kernel" and "nccl" in e["name"].lower()
            )
            del events[first]

    with pytest.raises(InputError, match=r"runs \d+ collectives of group \[0, 1, 2, 3\], another member \d+"):
        import_kineto(_write(tmp_path, drop_first_nccl), step=1)


def test_ranks_whose_first_steps_differ_need_a_step(tmp_path):
    """Rank 0's first step is #1, the others' #2 (their #1 was not profiled): without
    --step, step 1 of one rank used to be paired with step 2 of the others."""

    def drop_step_1(data):
        if data["distributedInfo"]["rank"] != 0:
            data["traceEvents"] = [e for e in data["traceEvents"] if e.get("name") != "ProfilerStep#1"]

    paths = _write(tmp_path, drop_step_1)
    with pytest.raises(
        InputError, match=r"its first profiled step is ProfilerStep#2, that of rank0.json ProfilerStep#1"
    ):
        import_kineto(paths)
    assert import_kineto(paths, step=2).step == 2


def test_a_group_size_past_the_world_names_its_first_rank_past_it(tmp_path):
    """Without group ranks, a Group size past the world is refused at the world's end, and a
    Group size of 1e12 is not listed first (it was a MemoryError)."""
    for size in (8, 10**12):
        edit = _comm_args(**{"Process Group Ranks": None, "Process Group Name": "none", "Group size": size})
        with pytest.raises(InputError) as exc:
            import_kineto(_write(tmp_path, edit), step=1)
        assert str(exc.value).endswith(
            "rank0.json: traceEvents[25]: group names rank 4; expected ranks 0..3 "
            "(distributedInfo.world_size)"
        )


def test_a_step_asked_of_a_trace_without_profiler_steps_is_an_error(tmp_path):
    """--step on a trace with no ProfilerStep# took the whole trace (both steps) silently."""

    def no_steps(data):
        data["traceEvents"] = [e for e in data["traceEvents"] if "ProfilerStep#" not in str(e.get("name"))]

    path = _write(tmp_path, no_steps)[0]
    res = CliRunner().invoke(
        app, ["import", "kineto", str(path), "-o", str(tmp_path / "t.yaml"), "--step", "7"]
    )
    assert res.exit_code == 2, res.output
    assert "no ProfilerStep#7; the trace has no ProfilerStep# annotation" in res.output
    assert not (tmp_path / "t.yaml").exists()
    res = CliRunner().invoke(app, ["import", "kineto", str(path), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 0 and "the whole trace (no ProfilerStep#)" in res.output, res.output
