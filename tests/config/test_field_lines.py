"""A bad GPU or model value is named at its own line and key, `file:line: key: message`:
human-unit keys whose base is shorter than the SI field's (`hbm_mib` for
`hbm_capacity_bytes`, `hbm_tbyte_per_s` for `hbm_bandwidth_bytes_per_s`, `peak_tflops` for
`peak_flops_per_s`), and the checks that look at several fields at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.config.loader import load
from simulator.errors import InputError
from simulator.network.hardware import GPUSpec
from simulator.workload.model import ModelSpec

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "topologies" / "gpus" / "h100-sxm.yaml"
MODEL = ROOT / "workloads" / "models" / "llama3-8b.yaml"


@pytest.mark.parametrize(
    ("source", "spec", "old", "new", "key", "message"),
    [
        (GPU, GPUSpec, "hbm_mib: 81559", "hbm_mib: -1", "hbm_mib", "greater than 0"),
        (
            GPU,
            GPUSpec,
            "hbm_tbyte_per_s: 3.35",
            "hbm_tbyte_per_s: -3.35",
            "hbm_tbyte_per_s",
            "greater than 0",
        ),
        (GPU, GPUSpec, "gemm_tile: [128, 256]", "gemm_tile: [0, 0]", "gemm_tile", "two positive integers"),
        (
            GPU,
            GPUSpec,
            "peak_tflops: {",
            "peak_tflops: {bf17: 3, ",
            "peak_tflops",
            "unknown dtype(s) ['bf17']",
        ),
        (GPU, GPUSpec, "bf16: 989.4,", "bf16: -989.4,", "peak_tflops.bf16", "must be positive"),
        # the efficiencies of a mapping were said at the file's first line, with no key
        (
            GPU,
            GPUSpec,
            "{fp8: 0.654}",
            "{fp8: 1.654}",
            "gemm_peak_fraction_by_dtype.fp8",
            "an efficiency must lie in (0, 1]; found 1.654",
        ),
        (GPU, GPUSpec, "flash2: 0.29", "flash2: -0.29", "attention_efficiency.flash2", "found -0.29"),
        (MODEL, ModelSpec, "dtype: bf16", "dtype: bf17", "dtype", "unknown dtype 'bf17'"),
        (MODEL, ModelSpec, "attention_heads: 32", "attention_heads: 15", "attention_heads", "not divisible"),
    ],
)
def test_the_line_and_key_of_the_bad_value(
    tmp_path: Path, source: Path, spec: type, old: str, new: str, key: str, message: str
) -> None:
    text = source.read_text()
    assert text.count(old) == 1
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if old in ln)
    bad = tmp_path / source.name
    bad.write_text(text.replace(old, new))
    with pytest.raises(InputError) as caught:
        load(spec, bad)
    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"{bad}:{line}: {key}: ") and message in first, first
