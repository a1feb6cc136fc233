"""`ctxlab.placement.SortedFloats`: the inserted parts' positions a session history keeps."""

from __future__ import annotations

import bisect

import numpy as np
from hypothesis import given, settings, strategies as st

from ctxlab.placement import SortedFloats

FLOATS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(batches=st.lists(st.lists(FLOATS, max_size=12), max_size=30),
       probes=st.lists(FLOATS, min_size=1, max_size=8), merge_at=st.integers(1, 8))
def test_lookups_equal_a_sorted_list(batches, probes, merge_at):
    """Whatever the merges, each lookup equals the same lookup in one sorted list."""
    s = SortedFloats(merge_at)      # (merged often: the array and the list both in play)
    ref: list[float] = []
    for batch in batches:
        s.add(batch)
        ref = sorted(ref + batch)
        assert len(s) == len(ref)
        for x in probes:
            i, j = bisect.bisect_left(ref, x), bisect.bisect_right(ref, x)
            assert s.below(x) == (ref[i - 1] if i else -np.inf)
            assert s.above(x) == (ref[j] if j < len(ref) else np.inf)
        xs = np.array(probes)
        assert s.nearest(xs, above=True).tolist() == [s.above(x) for x in probes]
        assert s.nearest(xs, above=False).tolist() == [s.below(x) for x in probes]


def test_merging_keeps_the_list_short_and_the_values_sorted():
    s = SortedFloats()
    s.add([float(x) for x in range(1000, 0, -1)])     # one edit inserting many parts
    assert len(s._small) < SortedFloats.MERGE_AT and len(s) == 1000
    assert (np.diff(s._big) > 0).all()
    s.add([0.5, 1000.5])
    assert (s.below(1.0), s.above(1000.0)) == (0.5, 1000.5)
