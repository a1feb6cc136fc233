"""Events: hide and insert, never delete; rewind restores exactly; seed 000's tags."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.engine import call_end_pos, request_parts
from ctxlab.history import apply_edit, effective_history, neurolink_tags
from ctxlab.stages.base import Edit, NewPart
from tests.conftest import DATASETS


@pytest.fixture(scope="module")
def t():
    return ctxlab.load(DATASETS / "coding_session_b.jsonl")


def _last(t):
    s = t.sessions[0]
    k = int(t.calls["call"].max())
    return s, k, call_end_pos(t, s, k)


def test_apply_hides_and_inserts_without_deleting(t):
    s, k, end = _last(t)
    parts = request_parts(t, s, end)
    victims = tuple(int(p) for p in parts["part"].iloc[3:6])
    edit = Edit(stage="truncate", reason="test", hide=victims,
                insert=(NewPart(content="[marker]", kind="marker", role="system",
                                anchor=victims[0], side="before"),))
    t2, ev = apply_edit(t, edit, session=s, end_pos=end, trigger="threshold", pre_tokens=123)
    assert len(t2.frame) == len(t.frame) + 1
    assert set(t2.frame.loc[t2.frame["hidden_by"] == ev, "part"]) == set(victims)
    new = t2.frame[t2.frame["event"] == ev].iloc[0]
    first = t.frame.loc[t.frame["part"] == victims[0], "pos"].item()
    assert new["pos"] < first and new["kind"] == "marker"
    row = t2.events.iloc[-1]
    assert (row["origin"], row["trigger"], row["pre_tokens"]) == ("truncate", "threshold", 123)
    assert json.loads(row["meta"])["hidden"] == 3
    assert t2.validate(strict=False) == []
    # the call sees the marker and not the hidden parts; earlier calls are unchanged
    seen = request_parts(t2, s, end)
    assert not set(victims) & set(seen["part"]) and (seen["event"] == ev).any()
    assert t.frame["hidden_by"].equals(t.frame["hidden_by"])  # input untouched


def test_inserted_parts_keep_the_edit_order(t):
    s, k, end = _last(t)
    anchor = int(request_parts(t, s, end)["part"].iloc[4])
    news = tuple(NewPart(content=f"n{i}", kind="marker", role="system", anchor=anchor,
                         side=side) for i, side in enumerate(["after", "after", "before",
                                                              "before"]))
    t2, ev = apply_edit(t, Edit(stage="x", reason="r", insert=news), session=s, end_pos=end)
    f = t2.frame[t2.frame["session"] == s].sort_values("pos")
    order = f["content"].tolist()
    i = f["part"].tolist().index(anchor)
    assert order[i - 2:i] == ["n2", "n3"] and order[i + 1:i + 3] == ["n0", "n1"]


def test_bad_edits_are_refused(t):
    s, k, end = _last(t)
    with pytest.raises(ConfigError, match="does not have"):
        apply_edit(t, Edit(stage="x", reason="r", hide=(10 ** 6,)), session=s, end_pos=end)
    with pytest.raises(ConfigError, match="anchors"):
        apply_edit(t, Edit(stage="x", reason="r", insert=(NewPart(
            content="c", kind="marker", role="system", anchor=10 ** 6),)), session=s,
            end_pos=end)
    t2, ev = apply_edit(t, Edit(stage="x", reason="r", hide=(1,)), session=s, end_pos=end)
    with pytest.raises(ConfigError, match="already hidden"):
        apply_edit(t2, Edit(stage="y", reason="r", hide=(1,)), session=s, end_pos=end)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 6), st.booleans()),
                min_size=1, max_size=5), st.data())
def test_rewind_restores_every_earlier_state(t, steps, data):
    """Apply random hide/insert events, then rewind to any of them: exactly the state before."""
    s, k, end = _last(t)
    states = [t]
    cur = t
    for start, n, insert in steps:
        visible = request_parts(cur, s, end)
        ids = visible["part"].iloc[start:start + n].astype(int).tolist()
        if not ids:
            continue
        news = (NewPart(content="[cleared]", kind="marker", role="system", anchor=ids[0]),) \
            if insert else ()
        cur, ev = apply_edit(cur, Edit(stage="x", reason="r", hide=tuple(ids), insert=news),
                             session=s, end_pos=end)
        states.append(cur)
    events = cur.events[cur.events["origin"] == "x"]["event"].astype(int).tolist()
    if not events:
        return
    i = data.draw(st.integers(0, len(events) - 1))
    back = cur.rewind(events[i], session=s)
    pd.testing.assert_frame_equal(back.frame, states[i].frame)
    pd.testing.assert_frame_equal(back.events, states[i].events)
    pd.testing.assert_frame_equal(cur.rewind().frame, t.rewind().frame)


def test_rewind_all_also_undoes_recorded_compactions():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    assert (t.events["origin"] == "recorded").any()
    pd.testing.assert_frame_equal(t.rewind().frame, t.rewind_recorded().frame)
    with pytest.raises(ConfigError, match="no event 99"):
        t.rewind(99)


def test_neurolink_tags_and_effective_history(t):
    s, k, end = _last(t)
    parts = request_parts(t, s, end)
    a, b = (int(p) for p in parts["part"].iloc[2:4])
    t2, e1 = apply_edit(t, Edit(stage="summarize", reason="r", hide=(a,), insert=(NewPart(
        content="summary", kind="summary", role="system", anchor=a),)), session=s, end_pos=end)
    t3, e2 = apply_edit(t2, Edit(stage="truncate", reason="r", hide=(b,), insert=(NewPart(
        content="[truncated]", kind="marker", role="system", anchor=b),)), session=s,
        end_pos=end)
    tags = neurolink_tags(t3).set_index("part")
    assert tags.loc[a, "condense_parent"] == f"{s}/{e1}"
    assert tags.loc[b, "truncation_parent"] == f"{s}/{e2}"
    summary = t3.frame.loc[t3.frame["event"] == e1, "part"].item()
    marker = t3.frame.loc[t3.frame["event"] == e2, "part"].item()
    assert tags.loc[summary, "condense_id"] == f"{s}/{e1}"
    assert bool(tags.loc[marker, "is_truncation_marker"]) and tags.loc[marker, "truncation_id"]
    eff = effective_history(t3.frame)
    assert a not in set(eff["part"]) and summary in set(eff["part"])
    assert eff.equals(t3.effective())
