"""Shared helpers of the compare tests: a small compare file on the quickstart scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"

SMALL = f"""\
name: small
description: quickstart with three all-reduce algorithms
base: {{file: {QUICKSTART}}}
variants:
  - name: ring
  - name: tree
    network: {{algorithms: {{all_reduce: tree}}}}
  - name: hier-1step
    network: {{algorithms: {{all_reduce: hierarchical}}}}
    run: {{steps: 1}}
"""


@pytest.fixture
def small_compare(tmp_path: Path) -> Path:
    path = tmp_path / "compare-small.yaml"
    path.write_text(SMALL)
    return path
