"""Per-call inputs from position intervals, checked against a brute-force definition."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.visibility import call_input, call_sums, interval_sums, part_spans
from tests.conftest import DATASETS, realdata_path


def _brute(t, values):
    """Sum of values over every part visible to each call, by the definition."""
    ev_pos = dict(zip(t.events["event"], t.events["pos"]))
    out = []
    for _, c in t.calls.iterrows():
        f = t.frame[t.frame["session"] == c["session"]]
        total = 0.0
        for i, p in f.iterrows():
            ins = ev_pos[p["event"]] if pd.notna(p["event"]) else -np.inf
            hid = ev_pos[p["hidden_by"]] if pd.notna(p["hidden_by"]) else np.inf
            if max(p["pos"], ins) < c["input_end_pos"] <= hid:
                total += values[t.frame.index.get_loc(i)]
        out.append(total)
    return np.array(out)


def test_call_sums_equal_the_definition_on_a_compacted_session():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    assert (t.events["origin"] == "recorded").any()
    chars = t.frame["content"].str.len().to_numpy(dtype=float)
    got = call_sums(t, {"chars": chars})
    np.testing.assert_allclose(got["chars"], _brute(t, chars))
    # after the recorded compaction the input shrinks: the summary replaces history
    after = t.calls["input_end_pos"] > t.events["pos"].iloc[0]
    assert got["chars"][after.to_numpy()].iloc[0] < got["chars"][~after.to_numpy()].iloc[-1] / 2


def test_call_input_matches_call_sums():
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    sums = call_sums(t, {"one": np.ones(len(t.frame))})
    for k in (0, 5, len(t.calls) - 1):
        parts = call_input(t, k)
        assert len(parts) == sums["parts"].iloc[k] == sums["one"].iloc[k]
        assert parts["msg"].nunique() == sums["messages"].iloc[k]
        assert parts["pos"].is_monotonic_increasing


def test_real_claude_code_compaction_drops_the_input():
    t = ctxlab.load(realdata_path(
        "claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"))
    sums = call_sums(t, {"chars": t.frame["content"].str.len().to_numpy(dtype=float)})
    after = (t.calls["input_end_pos"] > t.events["pos"].iloc[0]).to_numpy()
    before_max = sums["chars"][~after].max()
    assert sums["chars"][after].iloc[0] < 0.3 * before_max
    # the reported usage drops the same way
    assert t.calls["input_total"][after].iloc[0] < 0.4 * t.calls["input_total"][~after].max()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(-5, 5), st.integers(0, 9)), max_size=20),
       st.lists(st.floats(-6, 6), min_size=1, max_size=10))
def test_interval_sums_match_brute_force(intervals, ends):
    lo = np.array([a for a, _, _ in intervals], dtype=float)
    hi = np.array([b for _, b, _ in intervals], dtype=float)
    v = np.array([c for _, _, c in intervals], dtype=float)
    e = np.array(ends)
    want = [sum(v[i] for i in range(len(v)) if lo[i] < x <= hi[i]) for x in e]
    np.testing.assert_allclose(interval_sums(lo, hi, v, e), want)


def test_unknown_event_reference_is_an_error():
    f = pd.DataFrame({"pos": [0.0], "event": pd.array([7], dtype="Int64"),
                      "hidden_by": pd.array([None], dtype="Int64")})
    ev = pd.DataFrame({"event": pd.array([], dtype="Int64"), "pos": pd.Series([], dtype=float)})
    try:
        part_spans(f, ev)
    except ValueError as e:
        assert "7" in str(e)
    else:
        raise AssertionError("a part inserted by a missing event must be refused")


def test_a_message_hidden_then_given_a_part_again_is_counted_only_while_in_the_request():
    """All of one message hidden at call 10; at call 20 a part is put back into it: calls
    in between do not see the message, and call_sums must not count it (its span was
    taken from its first part's start to its last part's end)."""
    from ctxlab.engine import call_end_pos
    from ctxlab.history import SessionHistory
    from ctxlab.stages.base import Edit, NewPart

    t = ctxlab.load(DATASETS / "coding_session_b.jsonl").rewind_recorded()
    s = t.sessions[0]
    calls = t.calls["call"].astype(int).tolist()
    h = SessionHistory(t, s)
    e1, e2 = call_end_pos(t, s, calls[10]), call_end_pos(t, s, calls[20])
    vis = h.visible(e1)
    m = int(vis["msg"].iloc[5])
    ids = tuple(int(p) for p in vis.loc[vis["msg"] == m, "part"])
    h.apply(Edit(stage="x", reason="hide the message", hide=ids), end_pos=e1)
    role = str(vis.loc[vis["msg"] == m, "role"].iloc[0])
    h.apply(Edit(stage="y", reason="a part back", insert=(NewPart(
        content="[restored]", kind="text", role=role, anchor=ids[0], side="after",
        join_message=True),)), end_pos=e2)
    t2 = h.transcript()
    sums = call_sums(t2, {}).set_index("call")
    for c in calls:
        assert sums.loc[c, "messages"] == call_input(t2, c, s)["msg"].nunique(), c


def test_interval_sums_refuse_a_value_that_is_not_finite():
    import pytest

    with pytest.raises(ValueError, match="value 0 is nan"):
        interval_sums(np.array([0.0, 0.0]), np.array([1.0, np.inf]),
                      np.array([np.nan, 1.0]), np.array([1.0, 2.0, 3.0]))
