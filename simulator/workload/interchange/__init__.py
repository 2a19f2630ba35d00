"""Workload interchange: Chakra execution traces and PyTorch profiler (Kineto) traces in and out."""
