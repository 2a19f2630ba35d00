"""Calibration from real microbenchmarks: ingest, fit, profiles, lookup.

Flow: `read_benchmark` (nccl-tests / rccl-tests logs -> `BenchmarkTable`s with SI
columns) -> `fit_table` (alpha-beta line plus efficiency curve per table) ->
`build_profile` (a `CalibrationProfile`, YAML in `topologies/calibration/`) ->
`load_profile(path).collective(kind, n_ranks, n_nodes, size_bytes)` -> `CollectiveFit`
with `time_s(S)`, `busbw_bytes_per_s(S)`, `alpha_s`, `source`. GEMM and memory-kernel
timings give a `ComputeCalibration`. The engine sees only `CollectiveFit` and
`ComputeCalibration`; it never reads the benchmark files.
"""
