"""Calibration from real microbenchmarks: ingest, fit, profiles, lookup.

Flow: `read_benchmark` (nccl-tests / rccl-tests logs -> `BenchmarkTable`s with SI
columns) -> `fit_table` (alpha-beta line plus efficiency curve per table) ->
`build_profile` (a `CalibrationProfile`, YAML in `topologies/calibration/`) ->
`load_profile(path).collective(kind, n_ranks, n_nodes, size_bytes)` -> `CollectiveFit`
with `time_s(S)`, `busbw_bytes_per_s(S)`, `alpha_s`, `source`. GEMM and memory-kernel
timings give a `ComputeCalibration`. The engine sees only `CollectiveFit` and
`ComputeCalibration`; it never reads the benchmark files.
"""

from simulator.calibration.collective import KINDS, busbw_factor, normalize_kind
from simulator.calibration.compute import ComputeCalibration, RateFit
from simulator.calibration.figure import calibration_figure, fit_frame
from simulator.calibration.fit import EfficiencyCurve, TableFit, fit_line, fit_table
from simulator.calibration.parser import BenchmarkTable, parse_text, read_benchmark, read_benchmarks
from simulator.calibration.profile import (
    CalibrationProfile,
    CollectiveEntry,
    CollectiveFit,
    SourceFile,
    build_profile,
    load_profile,
)

__all__ = [
    "KINDS",
    "BenchmarkTable",
    "CalibrationProfile",
    "CollectiveEntry",
    "CollectiveFit",
    "ComputeCalibration",
    "EfficiencyCurve",
    "RateFit",
    "SourceFile",
    "TableFit",
    "build_profile",
    "busbw_factor",
    "calibration_figure",
    "fit_frame",
    "fit_line",
    "fit_table",
    "load_profile",
    "normalize_kind",
    "parse_text",
    "read_benchmark",
    "read_benchmarks",
]
