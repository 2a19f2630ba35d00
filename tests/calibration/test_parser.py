"""Parsing nccl-tests / rccl-tests output: real samples, launcher noise, bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.calibration.build import DEFAULT_OUT, DEFAULT_SAMPLES
from simulator.calibration.collective import busbw_factor, normalize_kind
from simulator.calibration.nccl_log import strip_prefix
from simulator.calibration.parser import parse_text, read_benchmark
from simulator.errors import InputError
from tests.calibration.logs import DATA, SAMPLES, sample_files, synthetic_log

SAMPLE_IDS = [p.name for p in sample_files()] or ["<no samples>"]


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_every_sample_parses_and_busbw_matches_the_file(samples: Path, name: str) -> None:
    """busbw = S / t * factor(n) (nccl-tests doc/PERFORMANCE.md) recomputed from the parsed
    size, time, collective and rank count equals the file's own busbw at the largest size."""
    tables = read_benchmark(samples / name)
    assert tables
    for t in tables:
        rows = t.rows
        assert {"size_bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "in_place"} <= set(rows)
        assert rows["in_place"].any() and (~rows["in_place"]).any()
        big = rows[(rows["size_bytes"] == rows["size_bytes"].max()) & ~rows["in_place"]].iloc[0]
        recomputed = big["size_bytes"] / big["time_s"] * busbw_factor(t.collective, t.n_gpus)
        assert recomputed == pytest.approx(big["busbw_bytes_per_s"], rel=5e-3, abs=0.01e9)
        assert len(t.sha256) == 64 and t.source == name


@pytest.mark.parametrize("name", SAMPLE_IDS)
def test_avg_busbw_equals_mean_of_rows_when_complete(samples: Path, name: str) -> None:
    """nccl-tests' `# Avg bus bandwidth` is the mean busbw of every printed row and half
    (common.cu); where no row was elided our rows reproduce it, so no row was lost."""
    for t in read_benchmark(samples / name):
        if t.avg_busbw_bytes_per_s is None or t.elided:
            continue
        mean = t.rows["busbw_bytes_per_s"].mean()
        assert mean == pytest.approx(t.avg_busbw_bytes_per_s, rel=2e-3, abs=0.01e9)


def test_metadata_of_samples(samples: Path) -> None:
    t = read_benchmark(samples / "h100-16gpu-2node-allreduce-gcp-a3mega-tcpxo.txt")[0]
    assert (t.collective, t.n_gpus, t.n_nodes, t.scope) == ("all_reduce", 16, 2, "inter")
    assert t.gpu_name == "NVIDIA H100 80GB HBM3"
    # gcm fixture: nGpus 1 in the header, but 8 ranks (processes) on one (templated) host
    t = read_benchmark(samples / "a100-80gb-8gpu-1node-allreduce-gcm-fixture.txt")[0]
    assert (t.n_gpus, t.n_nodes) == (8, 1)
    # superbench: no root column; alltoall even has an empty redop column
    t = read_benchmark(samples / "a100-40gb-8gpu-1node-alltoall-superbench-fixture.txt")[0]
    assert t.collective == "all_to_all" and t.rows["root"].isna().all()
    assert t.rows["wrong"].isna().all()  # N/A
    # Open MPI prefixes and '...' elision
    t = read_benchmark(samples / "h100-16gpu-2node-allreduce-aws-p5-efa-eks-excerpt.txt")[0]
    assert t.elided and t.rows["size_bytes"].max() == 2**31


def test_multi_table_files(samples: Path) -> None:
    oci = read_benchmark(
        samples / "mi355x-pollara400-1-2-4node-allreduce-alltoall-oci-largesizes-excerpt.txt"
    )
    got = [(t.collective, t.n_gpus, t.n_nodes) for t in oci]
    assert got == [
        ("all_reduce", 8, 1), ("all_to_all", 8, 1), ("all_reduce", 16, 2),
        ("all_to_all", 16, 2), ("all_reduce", 32, 4), ("all_to_all", 32, 4),
    ]  # fmt: skip
    assert all("Node" in (t.section or "") for t in oci)
    mi325 = read_benchmark(samples / "mi325x-1-2-4-8node-allreduce-rccl-ring-largesizes-excerpt.txt")
    assert [(t.n_gpus, t.n_nodes) for t in mi325] == [(8, 1), (16, 2), (32, 4), (64, 8)]
    assert any("ratio" in n for n in mi325[0].notes)  # said to be inferred


def test_inference_notes_and_explicit_arguments(samples: Path) -> None:
    path = samples / "a100-8gpu-1node-sendrecv-partial.txt"
    text = path.read_text()
    t = parse_text(text, "capture.txt", collective="send_recv", n_gpus=8, n_nodes=1)[0]
    assert (t.collective, t.n_gpus, t.n_nodes) == ("send_recv", 8, 1)
    assert any("argument" in n for n in t.notes)
    with pytest.raises(InputError, match="--collective") as exc:
        parse_text(text, "capture.txt")
    assert "capture.txt:5" in str(exc.value)
    with pytest.raises(InputError, match="--nodes"):
        parse_text(text, "capture.txt", collective="send_recv", n_gpus=8)
    with pytest.raises(InputError, match="--gpus"):
        parse_text(text, "capture.txt", collective="send_recv", n_nodes=1)


def test_ranks_inferred_from_ratio_when_nothing_else_says() -> None:
    log = synthetic_log("all_reduce", 16, 8, 50e-6, 400e9, [2**k for k in range(20, 31)])
    table_only = "\n".join(ln for ln in log.splitlines() if "Rank" not in ln)
    t = parse_text(table_only, "run.log", n_nodes=2)[0]
    assert t.n_gpus == 16
    assert any("ratio" in n and "last resort" in n for n in t.notes)


def test_launcher_prefixes_and_timestamps_are_stripped() -> None:
    assert strip_prefix("[1,0]<stdout>:#  size") == "#  size"
    assert strip_prefix("0:            8             2") == "           8             2"
    assert strip_prefix("2024-05-01T10:00:00.123Z [1,0]<stdout>:   8  2 float") == "   8  2 float"
    sizes = [2**k for k in range(10, 20)]
    plain = parse_text(synthetic_log("all_gather", 16, 8, 30e-6, 200e9, sizes), "a.log")[0]
    for prefix in ("[1,0]<stdout>:", "0: ", "2025-01-02 03:04:05 "):
        t = parse_text(synthetic_log("all_gather", 16, 8, 30e-6, 200e9, sizes, prefix=prefix), "a.log")[0]
        assert (t.collective, t.n_gpus, t.n_nodes) == ("all_gather", 16, 2)
        assert np.allclose(t.rows["time_s"], plain.rows["time_s"])


def test_noise_inside_table_is_ignored() -> None:
    sizes = [2**k for k in range(10, 16)]
    lines = synthetic_log("all_reduce", 8, 8, 20e-6, 400e9, sizes).splitlines()
    lines.insert(20, "host:3442:3442 [0] NCCL INFO Launch mode Parallel")
    lines.insert(22, "[host:01234] mca_base_component_repository_open: unable to open mca_op_avx")
    t = parse_text("\n".join(lines), "noisy.log")[0]
    assert len(t.rows) == 2 * len(sizes)


def test_truncated_row_names_file_and_line() -> None:
    with pytest.raises(InputError) as exc:
        read_benchmark(DATA / "truncated-allreduce.txt")
    msg = str(exc.value)
    assert "truncated-allreduce.txt:18:" in msg and "cut" in msg


def test_truncated_file_mid_number_is_caught() -> None:
    log = synthetic_log("all_reduce", 8, 8, 20e-6, 400e9, [2**k for k in range(10, 16)])
    lines = log.splitlines()
    last = next(i for i, ln in enumerate(lines) if ln.strip().startswith(str(2**15)))
    cut = "\n".join(lines[:last] + [lines[last][:-20]])
    with pytest.raises(InputError, match=rf"cut\.log:{last + 1}:"):
        parse_text(cut, "cut.log")


def test_foreign_files_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"foreign\.csv:1: no nccl-tests result table"):
        read_benchmark(DATA / "foreign.csv")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(InputError, match="blob.bin:1"):
        read_benchmark(binary)
    with pytest.raises(InputError, match="file not found"):
        read_benchmark(tmp_path / "missing.txt")


def test_kind_spellings() -> None:
    assert normalize_kind("all_reduce_perf") == "all_reduce"
    assert normalize_kind("AllToAll") == "all_to_all"
    assert normalize_kind("all2all") == "all_to_all"
    assert normalize_kind("sendrecv") == "send_recv"
    assert normalize_kind("ReduceScatter") == "reduce_scatter"
    assert normalize_kind("gemm") is None


def test_busbw_factors_golden() -> None:
    """Factors from nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather,
    reduce-scatter, all-to-all (n-1)/n; broadcast, reduce, send/recv 1."""
    assert busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all_reduce", 16) == pytest.approx(1.875)
    assert busbw_factor("all_gather", 8) == pytest.approx(0.875)
    assert busbw_factor("reduce_scatter", 16) == pytest.approx(0.9375)
    assert busbw_factor("all_to_all", 32) == pytest.approx(31 / 32)
    for k in ("broadcast", "reduce", "send_recv"):
        assert busbw_factor(k, 8) == 1.0


def test_samples_folder_location() -> None:
    """The samples ship in the repository beside the profiles, and sources.md names each one."""
    assert SAMPLES == DEFAULT_SAMPLES and SAMPLES.name == "samples" and SAMPLES.parent == DEFAULT_OUT
    listed = (SAMPLES / "sources.md").read_text(encoding="utf-8")
    files = sample_files()
    assert len(files) == 28
    assert all(f"`{p.name}`" in listed for p in files)


def test_gpus_per_thread_is_read_from_the_run_header(samples: Path) -> None:
    # `# nThread 1 nGpus 8 ...`: one thread drove the 8 GPUs (nccl-tests -g 8)
    assert (
        read_benchmark(samples / "mi300x-vf-8gpu-1node-allreduce-rccl-azure-singleproc.txt")[
            0
        ].gpus_per_thread
        == 8
    )
    # one rank per GPU (`nGpus 1`), and a table with no run header at all
    assert read_benchmark(samples / "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt")[0].gpus_per_thread == 1
    assert read_benchmark(samples / "h100-16gpu-2node-allreduce-aws-p5-efa.txt")[0].gpus_per_thread is None


#: every table of every shipped sample: (line of its first row, rows read, both halves)
SAMPLE_TABLES = {
    "a100-40gb-8gpu-1node-allgather-superbench-fixture.txt": [(17, 68)],
    "a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt": [(17, 68)],
    "a100-40gb-8gpu-1node-alltoall-superbench-fixture.txt": [(16, 68)],
    "a100-40gb-8gpu-1node-broadcast-superbench-fixture.txt": [(17, 68)],
    "a100-40gb-8gpu-1node-reduce-superbench-fixture.txt": [(17, 68)],
    "a100-40gb-8gpu-1node-reducescatter-superbench-fixture.txt": [(17, 68)],
    "a100-80gb-16gpu-2node-allreduce-aws-p4de-efa.txt": [(3, 58)],
    "a100-80gb-8gpu-1node-allreduce-gcm-fixture.txt": [(17, 12)],
    "a100-8gpu-1node-sendrecv-partial.txt": [(5, 8)],
    "h100-16gpu-2node-allgather-gcp-a3high-tcpx-dstack.txt": [(6, 22)],
    "h100-16gpu-2node-allgather-gcp-a3high-tcpx-gke-partial.txt": [(5, 20)],
    "h100-16gpu-2node-allgather-gcp-a3mega-tcpxo-dstack.txt": [(6, 22)],
    "h100-16gpu-2node-allgather-gcp-a3mega-tcpxo-gke.txt": [(4, 62)],
    "h100-16gpu-2node-allreduce-aws-p5-efa-eks-excerpt.txt": [(4, 14)],
    "h100-16gpu-2node-allreduce-aws-p5-efa.txt": [(3, 64)],
    "h100-16gpu-2node-allreduce-gcp-a3mega-tcpxo.txt": [(24, 62)],
    "h100-8gpu-1node-allreduce-aws-p5-batch.txt": [(4, 64)],
    "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt": [(16, 64)],
    "mi300x-8gpu-1node-allreduce-rccl-amdblog-graphmode.txt": [(22, 64)],
    "mi300x-8gpu-1node-allreduce-rccl-amdblog.txt": [(22, 64)],
    "mi300x-8gpu-1node-allreduce-rccl.txt": [(17, 62)],
    "mi300x-vf-8gpu-1node-allreduce-rccl-azure-singleproc.txt": [(17, 50)],
    "mi325x-1-2-4-8node-allreduce-rccl-ring-largesizes-excerpt.txt": [(2, 6), (6, 6), (10, 6), (14, 6)],
    "mi355x-16gpu-2node-allreduce-rccl-pollara400-aac14.txt": [(29, 62)],
    "mi355x-16gpu-2node-alltoall-rccl-pollara400-vultr.txt": [(31, 62)],
    "mi355x-8gpu-1node-allreduce-rccl-vultr.txt": [(18, 58)],
    "mi355x-8gpu-1node-alltoall-rccl-vultr.txt": [(18, 50)],
    "mi355x-pollara400-1-2-4node-allreduce-alltoall-oci-largesizes-excerpt.txt": [
        (8, 4),
        (21, 4),
        (31, 4),
        (44, 4),
        (57, 4),
        (70, 4),
    ],  # fmt: skip
}


def test_every_sample_splits_into_the_same_tables(samples: Path) -> None:
    """Tables start at headers only: each sample gives the tables (first row, rows) it always did."""
    got = {p.name: [(t.first_line, len(t.rows)) for t in read_benchmark(p)] for p in sample_files()}
    assert got == SAMPLE_TABLES


def test_a_smaller_size_inside_a_table_is_out_of_order(samples: Path, tmp_path: Path) -> None:
    """One swapped row is refused at the row, not read as a second, shorter table."""
    lines = (samples / "a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt").read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.split()[:1] == ["1048576"])
    lines[i], lines[i + 1] = lines[i + 1], lines[i]  # 2 MiB above 1 MiB
    with pytest.raises(InputError) as exc:
        parse_text("\n".join(lines), tmp_path / "swapped-allreduce.txt")
    assert str(exc.value) == (
        f"{tmp_path / 'swapped-allreduce.txt'}:{i + 2}: size: sizes out of order: 1048576 after "
        f"2097152 on line {i + 1}; expected increasing sizes, one row each (a new table starts at "
        "its column header)"
    )


def test_each_data_type_of_a_sweep_is_a_table_of_its_own(samples: Path, tmp_path: Path) -> None:
    """`-d all` (or `-o all`): nccl-tests prints the column header once and then every size
    again for each type (or op), so a smaller size whose type or op changes starts a table."""
    lines = (samples / "a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt").read_text().splitlines()
    rows = [n for n, ln in enumerate(lines) if ln.split()[:1] and ln.split()[0].isdigit()]
    block = [lines[n] for n in rows]
    half = [ln.replace(" float ", " half  ", 1) for ln in block]
    assert all(" half " in ln for ln in half)
    text = "\n".join(lines[: rows[-1] + 1] + half + lines[rows[-1] + 1 :])
    tables = parse_text(text, tmp_path / "dall.txt", collective="all_reduce")
    assert [len(t.rows) for t in tables] == [2 * len(block)] * 2
    assert set(tables[0].rows["dtype"]) == {"float"} and set(tables[1].rows["dtype"]) == {"half"}
    # the same type again is a row out of order, not a sweep
    same = "\n".join(lines[: rows[-1] + 1] + block + lines[rows[-1] + 1 :])
    with pytest.raises(InputError, match="sizes out of order"):
        parse_text(same, tmp_path / "twice.txt", collective="all_reduce")


def test_a_new_table_starts_at_a_header() -> None:
    """Two runs in one file: the second starts at its column header, `# nThread` line or
    `# nccl-tests` line, never at the size drop alone."""
    sizes = [2**k for k in range(10, 16)]
    one = synthetic_log("all_reduce", 8, 8, 20e-6, 400e9, sizes)
    two = synthetic_log("all_reduce", 8, 8, 20e-6, 200e9, sizes)
    both = parse_text(one + two, "two.log")
    assert [len(t.rows) for t in both] == [12, 12]
    assert both[1].rows["time_s"].min() > both[0].rows["time_s"].min()
    trailer = ("Out of bounds", "Avg bus", "concluded")
    rows_one = "\n".join(ln for ln in one.splitlines() if not any(w in ln for w in trailer))
    rows_two = "\n".join(ln for ln in two.splitlines() if not ln.startswith("#"))
    for separator in ("# nThread 1 nGpus 1 minBytes 8 maxBytes 32768 step: 2(factor)", "# nccl-tests 2.13.9"):
        split = parse_text(f"{rows_one}\n{separator}\n{rows_two}", "two.log", collective="all_reduce")
        assert [len(t.rows) for t in split] == [12, 12]
    with pytest.raises(InputError, match=r"two\.log:\d+: size: sizes out of order: 1024 after 32768"):
        parse_text(f"{rows_one}\n{rows_two}", "two.log", collective="all_reduce")
