"""The run's frames are built column by column from the engine's records (text from its
distinct values, ties of the ops' order ranked in compiled code); every column must be the
one pandas makes of the same values, and the order the one of pandas's stable sort."""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.records import OpRecord, OpTable
from simulator.metrics import frames as fr


def _objects(values: list[object]) -> np.ndarray:
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


CASES = {
    "repeated text": ["fwd", "bwd", "dp", ""] * 50,
    "distinct text": [f"op-{i}" for i in range(300)],
    "text beyond ASCII": ["é", "z", "😀", "a", "é"] * 20,
    "text and a missing value": ["a", None, "b"] * 20,
    "text and NaN": ["a", float("nan"), "b"] * 20,
    "numbers as objects": [1, 2, 2, 3] * 10,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_column_is_the_one_pandas_makes(case) -> None:
    values = _objects(CASES[case])
    rows = np.random.default_rng(0).permutation(len(values))[: len(values) - 3]
    want = pd.DataFrame({"c": values[rows]})
    got = pd.DataFrame({"c": fr._column(values, rows)}, copy=False)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got["c"].dtype == want["c"].dtype


#: pandas' text settings: its default (Arrow strings), and text stored as Python strings
TEXT_SETTINGS = {
    "default": {},
    "python string storage": {"mode.string_storage": "python"},
}


@pytest.mark.parametrize("setting", sorted(TEXT_SETTINGS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_text_moved_out_of_python_objects_gives_the_same_column(case, setting) -> None:
    """`text_array` (a released run's op ids): the column taken from it is the one pandas
    makes of the objects, under each of pandas' text settings; values pandas keeps as
    objects are left as they were."""
    options = [x for kv in TEXT_SETTINGS[setting].items() for x in kv]
    with pd.option_context(*options) if options else nullcontext():
        values = _objects(CASES[case])
        rows = np.random.default_rng(2).permutation(len(values))[: len(values) - 3]
        moved = fr.text_array(values)
        want = pd.DataFrame({"c": values[rows]})
        got = pd.DataFrame({"c": fr._column(moved, rows)}, copy=False)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        if not isinstance(want["c"].array, pd.arrays.ArrowStringArray):
            assert moved is values
        elif not pd.isna(values).any():  # strings only: no Python object per row is kept
            assert isinstance(moved, pd.arrays.ArrowStringArray)


def test_the_ops_order_is_pandas_stable_sort_with_many_ties() -> None:
    """Ties in (step, rank, started) are broken by op id in Python's string order (non-ASCII
    ids included), rows equal in all four keys keep their order."""
    rng = np.random.default_rng(1)
    n = 2000
    ids = _objects(rng.choice(["b", "a", "ä", "Z", "aa", "😀", "a-1", "a-10", "a-2"], n).tolist())
    df = pd.DataFrame(
        {
            "step": rng.integers(0, 2, n),
            "rank": rng.integers(0, 3, n),
            "started_at_s": rng.integers(0, 4, n).astype(float),
            "op_id": ids,
        }
    )
    want = df.sort_values(["step", "rank", "started_at_s", "op_id"], kind="stable").index.to_numpy()
    keys = df["step"].to_numpy(), df["rank"].to_numpy(), df["started_at_s"].to_numpy()
    np.testing.assert_array_equal(fr._ops_order(*keys, ids), want)
    np.testing.assert_array_equal(fr._ops_order(*keys, fr.text_array(ids)), want)  # ids moved to Arrow


@pytest.mark.parametrize("values", [["compute", "comm", None, "compute"], ["x", float("nan"), "host"]])
def test_comparisons_on_distinct_values_are_those_on_objects(values) -> None:
    col = pd.Series(_objects(values))
    for probe in ("compute", "host", "x"):
        np.testing.assert_array_equal(fr._equals(col, probe), col.to_numpy(dtype=object) == probe)
    got, want = fr._objects_of(col), col.to_numpy(dtype=object)
    assert got.dtype == object
    assert [type(v) for v in got] == [type(v) for v in want]
    assert [v if v == v else "nan" for v in got] == [v if v == v else "nan" for v in want]


def test_no_op_records_give_an_empty_ops_frame_with_every_column():
    """A program without ops simulates no op: its ops frame has no row and the ops columns
    (the record's fields, then duration, wait, GPU and role), not an error."""
    df = fr.ops_frame(OpTable().columns(), ["gpu0"], {})
    assert len(df) == 0
    assert list(df.columns) == [*OpRecord._fields, "duration_s", "wait_s", "gpu", "role"]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.integers(0, 4), st.integers(0, 100_000)),  # past 16 bits: the wide key
            st.sampled_from([0.0, 0.5, 1.0, 2.5]),
            st.sampled_from(["b", "a", "ä", "Z", "aa", "😀", "a-1", "a-10"]),
        ),
        max_size=80,
    )
)
def test_the_ops_order_is_pandas_stable_sort_on_random_rows(rows) -> None:
    df = pd.DataFrame(rows, columns=["step", "rank", "started_at_s", "op_id"])
    want = df.sort_values(["step", "rank", "started_at_s", "op_id"], kind="stable").index.to_numpy()
    keys = [df[k].to_numpy() for k in ("step", "rank", "started_at_s")]
    np.testing.assert_array_equal(fr._ops_order(*keys, _objects(df["op_id"].tolist())), want)
