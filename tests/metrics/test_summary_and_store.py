"""Headline figures as pure functions of frames, and the run folder's frame store."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from simulator.errors import InputError
from simulator.metrics.store import _json_default, dumps_indented, read_frames, read_table, write_frame
from simulator.metrics.summary import busiest_links, step_summary

# two simulated ranks over two steps; rank 1 stands for three ranks (weight 3)
STEPS = pd.DataFrame(
    {
        "step": [0, 0, 1, 1],
        "rank": [0, 1, 0, 1],
        "weight": [1, 3, 1, 3],
        "step_time_s": [10.0, 10.0, 12.0, 12.0],
        "compute_s": [6.0, 8.0, 6.0, 8.0],
        "comm_s": [5.0, 3.0, 7.0, 5.0],
        "exposed_comm_s": [3.0, 1.0, 5.0, 3.0],
        "idle_s": [1.0, 1.0, 1.0, 1.0],
        "exposed_tp_s": [2.0, 1.0, 2.0, 1.0],
        "exposed_dp_s": [1.0, 0.0, 3.0, 2.0],
    }
)


def test_step_summary_is_the_weighted_mean_over_ranks_and_steps() -> None:
    s = step_summary(STEPS)
    assert s["steps"] == 2
    assert (s["step_time_s"], s["step_time_min_s"], s["step_time_max_s"]) == (11.0, 10.0, 12.0)
    # weights 1 and 3 on each step: (6 + 3*8) / 4 = 7.5
    assert s["compute_s"] == pytest.approx(7.5, rel=1e-15)
    assert s["exposed_comm_s"] == pytest.approx((3 + 3 * 1 + 5 + 3 * 3) / 8, rel=1e-15)
    assert s["exposed_comm_by_tag_s"] == pytest.approx({"dp": (1 + 0 + 3 + 6) / 8, "tp": (2 + 3 + 2 + 3) / 8})
    # the breakdown adds up to the step time, rank by rank and so on average
    assert s["compute_s"] + s["exposed_comm_s"] + s["idle_s"] == pytest.approx(s["step_time_s"], rel=1e-15)


def test_busiest_links_rank_by_mean_utilization() -> None:
    links = pd.DataFrame(
        {
            "link": ["a", "a", "b", "c"],
            "medium": ["ib"] * 4,
            "tier": [1, 1, 1, 2],
            "bytes": [40.0, 20.0, 50.0, 10.0],
            "capacity_bytes_per_s": [10.0, 10.0, 10.0, 5.0],
            "utilization": [1.0, 0.5, 0.9, 1.0],
        }
    )
    top = busiest_links(links, run_time_s=10.0, top=2)
    # a: 60 / (10 * 10) = 0.6; b: 0.5; c: 10 / (5 * 10) = 0.2
    assert top["link"].tolist() == ["a", "b"]
    assert top["mean_utilization"].tolist() == pytest.approx([0.6, 0.5])
    assert top["peak_utilization"].tolist() == [1.0, 0.9]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_frames_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    from simulator.metrics import store

    monkeypatch.setattr(store, "_has_pyarrow", lambda: fmt == "parquet")
    ops = pd.DataFrame({"op_id": ["x", ""], "tag": ["", "dp"], "size_bytes": [1.0, 2.5]})
    written = write_frame(tmp_path, "ops", ops)
    assert written.suffix == f".{fmt}"
    back = read_table(tmp_path, "ops")
    pd.testing.assert_frame_equal(back, ops)
    assert set(read_frames(tmp_path)) == {"ops"}
    assert read_table(tmp_path, "steps") is None


def test_an_empty_or_corrupt_folder_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no result frames"):
        read_frames(tmp_path)
    (tmp_path / "ops.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="cannot read saved frame"):
        read_table(tmp_path, "ops")


def test_indented_json_is_that_of_the_standard_library() -> None:
    """`dumps_indented` writes what `json.dumps(indent=2, default=...)` writes, character for
    character: flat mappings and lists (the nodes and links of a topology), nesting, empty
    containers, numpy numbers, non-text keys, text that looks like the joints it splices."""
    g = nx.path_graph(5)
    nx.set_node_attributes(g, {0: "gpu", 1: "nic"}, "kind")
    nx.set_edge_attributes(g, 1.5e11, "bandwidth_bytes_per_s")
    cases = [
        nx.node_link_data(g, edges="links"),
        {"a": [1, 2.5, float("nan"), {"b": np.float64(0.1), "c": np.int64(3), 2: "x"}], "e": [], "f": {}},
        {"g": (1, [2]), "h": np.arange(3), "s": 'é\n"', "t": None, "u": True},
        [{"a": 1}, {"b": "},\n    {"}, {"c": 2, "d": [1]}],
        [{"a": "}, {"}, {"b": -0.0}],
        [{"a": {}}],
        [{"a": 1}, {}],
        {"l": [{"a": 1, "b": "x"}, {"a": 2}], "m": [{"z": None}], "n": [[1], [[]], {"x": {"y": [None]}}]},
        [],
        {},
        3,
    ]
    for data in cases:
        assert dumps_indented(data) == json.dumps(data, indent=2, default=_json_default)


def _strict(text: str) -> object:
    """JSON as RFC 8259 has it: NaN, Infinity and -Infinity are not numbers of it."""

    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_summary_json_writes_non_finite_numbers_as_null(tmp_path) -> None:
    """A one-seed failure study has no confidence interval ([NaN, NaN]); the file stays JSON
    any reader accepts, with null there, and the run's in-memory summary keeps its NaN."""
    import math

    import yaml

    from simulator import api
    from tests.conftest import ROOT

    sc = yaml.safe_load((ROOT / "scenarios/quickstart-failures.yaml").read_text())
    sc["reliability"]["seeds"] = 1
    r = api.run(sc, base_dir=ROOT / "scenarios", output=tmp_path / "out")
    assert all(math.isnan(x) for x in r.summary["goodput_95ci"])
    data = _strict((tmp_path / "out" / "summary.json").read_text())
    assert isinstance(data, dict) and data["goodput_95ci"] == [None, None]
    assert data["goodput"] == r.summary["goodput"]
