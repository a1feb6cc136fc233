"""`ctxlab.stages.table`: the columnar request, its derived arrays and growing buffers.

Generated tables (hypothesis) of every column kind the part frame has: Arrow text with NA,
nullable integers with and without NA, floats and timestamps. Every way of building a table
(`take`, `concat`, `append`, `interleave`, `replaced`, `concat_all`) must give the rows the same
operation gives on the DataFrame, and a table once built never changes, whatever is
built from it afterwards.
"""

from __future__ import annotations

import numpy as np
import pytest
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxlab.stages.table import Table, append, concat, concat_all, interleave, replaced


def frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    text = [None if rng.random() < 0.3 else f"t{rng.integers(5)}" for _ in range(n)]
    ints = [None if rng.random() < 0.3 else int(rng.integers(100)) for _ in range(n)]
    return pd.DataFrame({
        "kind": pd.array(text, dtype="string"),
        "part": pd.array(rng.integers(0, 1000, n), dtype="Int64"),
        "hidden_by": pd.array(ints, dtype="Int64"),
        "pos": rng.random(n),
        "ts": pd.to_datetime(rng.integers(0, 10**12, n), unit="ms", utc=True)})


def same(t: Table, df: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(t.frame(), df.reset_index(drop=True))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 10**6)), min_size=1, max_size=8),
       st.data())
def test_every_way_of_building_rows_equals_the_dataframe(pieces, data):
    frames = [frame(n, seed) for n, seed in pieces]
    tables = [Table.from_frame(f) for f in frames]
    acc, acc_df = tables[0], frames[0]
    history = [(acc, acc_df)]
    for t, f in zip(tables[1:], frames[1:]):
        # grow from the newest table or, sometimes, from an older one (a branch)
        base, base_df = history[data.draw(st.integers(0, len(history) - 1))]
        acc, acc_df = append(base, t), pd.concat([base_df, f], ignore_index=True)
        history.append((acc, acc_df))
    for t, df in history:              # none changed when later ones were built from them
        same(t, df)
    same(concat(tables[0], tables[-1]), pd.concat([frames[0], frames[-1]], ignore_index=True))
    same(concat_all(tables), pd.concat(frames, ignore_index=True))
    a, a_df = history[-1]
    rows = np.array(data.draw(st.lists(st.integers(0, max(len(a) - 1, 0)), max_size=6)
                              if len(a) else st.just([])), dtype=np.int64)
    same(a.take(rows), a_df.iloc[rows])
    b, b_df = tables[-1], frames[-1]
    b_rows = np.arange(len(b))
    from_b = np.array(data.draw(st.permutations([True] * len(b_rows) + [False] * len(rows))),
                      dtype=bool)
    want = pd.concat([a_df.iloc[rows], b_df], ignore_index=True)
    order = np.empty(len(from_b), dtype=np.int64)
    order[~from_b], order[from_b] = np.arange(len(rows)), len(rows) + np.arange(len(b_rows))
    merged = interleave(a, rows, b, b_rows, from_b)
    same(merged, want.iloc[order])
    grown = append(merged, b)                   # in the room interleave left
    same(grown, pd.concat([want.iloc[order], b_df], ignore_index=True))
    same(append(merged, a), pd.concat([want.iloc[order], a_df], ignore_index=True))
    same(merged, want.iloc[order])              # and the merged rows did not change
    same(grown, pd.concat([want.iloc[order], b_df], ignore_index=True))
    # rows replaced in place: the interleave of the other rows with the new ones there
    slots = np.array(sorted(data.draw(st.sets(st.integers(0, max(len(a) - 1, 0)),
                                              max_size=min(len(a), len(b))))), dtype=np.int64)
    if len(slots):
        put = b.take(np.arange(len(slots)))
        swapped = replaced(a, slots, put)
        at = np.zeros(len(a), dtype=bool)
        at[slots] = True
        same(swapped, interleave(a, np.flatnonzero(~at), put, np.arange(len(slots)),
                                 at).frame())
        same(append(swapped, b), pd.concat([swapped.frame(), b_df], ignore_index=True))
        same(a, a_df)                           # the table replaced in did not change
        # the same values put back: columns (and buffers) shared, appends still apart
        back = replaced(a, slots, a.take(slots))
        grown_back, grown_a = append(back, b), append(a, put)
        same(grown_back, pd.concat([a_df, b_df], ignore_index=True))
        same(grown_a, pd.concat([a_df, put.frame()], ignore_index=True))
        same(back, a_df)


def test_derived_arrays_follow_the_rows():
    calls = []

    def size(t: Table) -> np.ndarray:
        calls.append(len(t))
        return np.array([len(x or "") for x in t.col("kind")])

    t = Table.from_frame(frame(5, 1))
    whole = t.derived("size", ("kind",), size)
    grown = append(t, Table.from_frame(frame(2, 2)))
    assert grown.derived("size", ("kind",), size).tolist()[:5] == whole.tolist()
    assert calls == [5, 2]                     # only the new rows were measured
    taken = grown.take([6, 0])
    assert taken.derived("size", ("kind",), size).tolist() == [
        grown.derived("size", ("kind",), size)[6], whole[0]] and calls == [5, 2]
    changed = taken.with_columns(kind=(np.array(["abc", "a"], dtype=object),
                                       taken.dtypes["kind"]))
    assert changed.derived("size", ("kind",), size).tolist() == [3, 1] and calls[-1] == 2
    put = Table.from_frame(frame(1, 3))
    swapped = replaced(grown, np.array([2]), put)
    assert swapped.derived("size", ("kind",), size).tolist() == [
        *whole[:2], len(put.col("kind")[0] or ""), *grown.derived("size", ("kind",), size)[3:]]
    # a replacement that keeps a derived array's columns keeps the array: no new call
    n_calls = len(calls)
    same_kind = put.with_columns(kind=(grown.col("kind")[[2]], put.dtypes["kind"]))
    kept = replaced(grown, np.array([2]), same_kind)
    assert kept.derived("size", ("kind",), size).tolist() == \
        grown.derived("size", ("kind",), size).tolist()
    assert len(calls) == n_calls and kept.col("part")[2] == put.col("part")[0]


def test_take_of_some_columns_keeps_their_derived_arrays_only():
    t = Table.from_frame(frame(6, 4))
    t.derived("size", ("kind",), lambda tb: np.array([len(x or "") for x in tb.col("kind")]))
    t.derived("both", ("kind", "pos"), lambda tb: np.arange(tb.n))
    some = t.take([4, 1], ("pos", "kind", "no such column"))
    assert some.columns == ["pos", "kind"] and len(some) == 2
    same(some, frame(6, 4)[["pos", "kind"]].iloc[[4, 1]])
    assert set(some._derived) == {"size", "both"}
    assert set(t.take([0], ("kind",))._derived) == {"size"}


_VALUES = {"int64": [0, 1, -7], "float64": [0.0, 1.5, float("nan"), float("inf")],
           "bool": [True, False], "datetime64[ns]": [np.datetime64("NaT"),
                                                      np.datetime64(0, "ns"),
                                                      np.datetime64(5, "ns")],
           "object": [None, "a", "b", "", float("nan"), 3, pd.NA]}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(_VALUES)), st.data())
def test_one_replaced_value_compares_as_a_slice_of_it_does(dtype, data):
    """`replaced`'s test for one row (``_same_value``) agrees with its test for many, on
    every dtype a column or derived array has (NaN equals NaN, NaT equals NaT)."""
    from ctxlab.stages.table import _same_value, _same_values

    pool = _VALUES[dtype]
    column = np.array(data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4)),
                      dtype=dtype)
    w = np.array([data.draw(st.sampled_from(pool))], dtype=dtype)
    row = data.draw(st.integers(0, len(column) - 1))
    try:
        want = _same_values(column[row:row + 1], w)
    except TypeError:               # pd.NA's truth value: both raise
        with pytest.raises(TypeError):
            _same_value(column, row, w)
        return
    assert _same_value(column, row, w) == want
