"""Workloads: model descriptions, parallel layouts, step programs and traces."""
