"""Fast paths of collective planning and preparation, each against the plain computation it replaces."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.network.collective import distinct_links


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 63), max_size=300), st.integers(0, 40))
def test_distinct_links_is_np_unique(links: list[int], extra: int) -> None:
    arr = np.array(links, dtype=np.int64)
    used, at = distinct_links(arr, 64 + extra)
    want_used, want_at = np.unique(arr, return_inverse=True)
    assert used.dtype == want_used.dtype and at.dtype == want_at.dtype
    assert used.tolist() == want_used.tolist()
    assert at.tolist() == want_at.tolist()
