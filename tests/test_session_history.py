"""One SessionHistory for many edits gives exactly what applying them one by one gives.

The engine and the replay record every edit of a compaction (and of a whole replay) in a
`ctxlab.history.SessionHistory` and write the transcript back once; `apply_edit` copies
the transcript per edit. Both must agree frame for frame, and the request a stage sees
next (`ctxlab.engine.edit_view`) must equal the one rebuilt from the edited transcript.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, edit_view, request_parts
from ctxlab.errors import ConfigError
from ctxlab.history import SessionHistory, apply_edit
from ctxlab.pipeline import Pipeline
from ctxlab.schema import PART_COLUMNS, TEXT, coerce
from ctxlab.stages.base import Edit, NewPart
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=200_000, limit_tokens=200_000, target_tokens=100_000)


@pytest.fixture(scope="module")
def t():
    return ctxlab.load(DATASETS / "coding_session_b.jsonl").rewind_recorded()


def _edits(t, s, end, steps):
    """Edits built on the request as it stands after the previous ones."""
    cur, out = t, []
    for start, n, insert, side in steps:
        ids = request_parts(cur, s, end)["part"].iloc[start:start + n].astype(int).tolist()
        if not ids:
            continue
        news = (NewPart(content=f"[edit {len(out)}]", kind="marker", role="user",
                        anchor=ids[0], side=side),) if insert else ()
        edit = Edit(stage="x", reason=f"r{len(out)}", hide=tuple(ids), insert=news)
        cur, _ = apply_edit(cur, edit, session=s, end_pos=end)
        out.append(edit)
    return cur, out


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 80), st.integers(1, 8), st.booleans(),
                          st.sampled_from(["before", "after"])), min_size=1, max_size=6),
       st.integers(0, 3))
def test_one_history_equals_edits_applied_one_by_one(t, steps, which_call):
    s = t.sessions[0]
    calls = t.calls["call"].astype(int).tolist()
    end = call_end_pos(t, s, calls[len(calls) // 2 + which_call * (len(calls) // 8)])
    one_by_one, edits = _edits(t, s, end, steps)
    h = SessionHistory(t, s)
    for e in edits:
        h.apply(e, end_pos=end)
    together = h.transcript()
    pd.testing.assert_frame_equal(together.frame, one_by_one.frame)
    pd.testing.assert_frame_equal(together.events, one_by_one.events)
    # and the parts the call sees, from the history's own spans
    pd.testing.assert_frame_equal(h.visible(end), request_parts(together, s, end)
                                  .reset_index(drop=True))


def test_edit_view_equals_the_view_rebuilt_from_the_edited_transcript(t):
    s = t.sessions[0]
    end = call_end_pos(t, s, int(t.calls["call"].max()))
    est = ctxlab.estimator("chars:4")
    view = build_view(t, s, end, est, BUDGET)
    h = SessionHistory(t, s)
    ids = tuple(int(p) for p in view.parts["part"].iloc[5:12])
    edit = Edit(stage="x", reason="r", hide=ids, insert=(
        NewPart(content="[gone]", kind="marker", role="user", anchor=ids[0]),
        NewPart(content="[also]", kind="marker", role="user", anchor=ids[-1], side="after")))
    event, inserted = h.apply(edit, end_pos=end)
    after, removed, added = edit_view(view, edit.hide, inserted)
    rebuilt = build_view(h.transcript(), s, end, est, BUDGET)
    pd.testing.assert_frame_equal(after.parts, rebuilt.parts)
    removed, added = removed.frame(), added.frame()
    assert sorted(removed["part"].astype(int)) == sorted(ids)
    assert added["content"].tolist() == ["[gone]", "[also]"]
    assert (added["event"] == event).all() and added["tokens"].tolist() == [2, 2]
    assert after.total_tokens == rebuilt.total_tokens


def test_history_refuses_what_apply_edit_refuses(t):
    s = t.sessions[0]
    end = call_end_pos(t, s, int(t.calls["call"].max()))
    h = SessionHistory(t, s)
    with pytest.raises(ConfigError, match="does not have"):
        h.apply(Edit(stage="x", reason="r", hide=(10 ** 6,)), end_pos=end)
    h.apply(Edit(stage="x", reason="r", hide=(1,)), end_pos=end)
    with pytest.raises(ConfigError, match="already hidden"):
        h.apply(Edit(stage="y", reason="r", hide=(1,)), end_pos=end)
    with pytest.raises(ConfigError, match="anchors"):
        h.apply(Edit(stage="x", reason="r", insert=(NewPart(
            content="c", kind="marker", role="user", anchor=10 ** 6),)), end_pos=end)
    # a part inserted by one edit can be hidden by the next, and only once
    e, rows = h.apply(Edit(stage="x", reason="r", insert=(NewPart(
        content="c", kind="marker", role="user", anchor=2),)), end_pos=end)
    new = int(rows.frame()["part"].iloc[0])
    h.apply(Edit(stage="x", reason="r", hide=(new,)), end_pos=end)
    with pytest.raises(ConfigError, match="already hidden"):
        h.apply(Edit(stage="x", reason="r", hide=(new,)), end_pos=end)
    f = h.transcript().frame
    assert f.loc[f["part"] == new, "hidden_by"].item() == e + 1
    assert t.validate(strict=False) == [] and h.transcript().validate(strict=False) == []


def test_text_columns_hold_python_strings(t):
    assert all(t.frame[c.name].dtype == TEXT for c in PART_COLUMNS if c.dtype == "string")
    rows = {"session": ["s", "s"], "part": [1, 2], "pos": [0.5, 1.5], "msg": [0, 1],
            "turn": [1, 1], "role": ["user", "user"], "kind": ["text", "text"],
            "content": ["a\ud83d", "b"]}
    fast = coerce(rows, PART_COLUMNS)
    slow = coerce(pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in rows.items()}),
                  PART_COLUMNS)
    pd.testing.assert_frame_equal(fast, slow)
    assert fast["content"].tolist()[1] == "b" and "\ud83d" not in fast["content"].iloc[0]


def test_reported_trigger_checks_reported_usage_plus_what_entered_since():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    p = replace(ctxlab.preset("neurolink"), trigger_on="reported")
    r = ctxlab.replay(t, p, window=200_000, overhead_tokens=0)
    c = r.calls.reset_index(drop=True)
    first_event = int(r.events["call"].min())
    until = float(t.events.loc[t.events["origin"] == "recorded", "pos"].min())
    ends = t.calls.set_index("call")["input_end_pos"]
    checked = 0
    for i in range(1, len(c)):
        k, prev = int(c.loc[i, "call"]), c.loc[i - 1]
        if k > first_event or float(ends[prev["call"]]) >= until or pd.isna(prev["input_total"]):
            continue
        want = (int(prev["input_total"]) + int(c.loc[i, "tokens_before"])
                - int(prev["tokens_before"]))
        assert int(c.loc[i, "checked_tokens"]) == want
        checked += 1
    assert checked > 10
    # with the estimate, the trigger checks the replay's own count
    est = ctxlab.replay(t, "neurolink", window=200_000, overhead_tokens=0).calls
    assert (est["checked_tokens"] == est["tokens_before"]).all()


def test_reported_trigger_needs_the_whole_request():
    with pytest.raises(ConfigError, match="trigger_layers"):
        Pipeline(name="x", trigger_on="reported", trigger_layers=("history",))
    with pytest.raises(ConfigError, match="trigger_on"):
        Pipeline(name="x", trigger_on="billed")  # type: ignore[arg-type]


@pytest.mark.parametrize("side", ["before", "after"])
def test_inserting_next_to_the_same_anchor_never_runs_out_of_positions(t, side):
    """A long session compacts at the same place again and again: each new summary goes
    next to the same anchor and hides the last one, so the gap between the anchor and
    its neighbour halves at every edit (it used to run out after ~50 edits, `ConfigError`
    "no room"). The visible order stays what the edits asked for."""
    s = t.sessions[0]
    end = call_end_pos(t, s, int(t.calls["call"].max()))
    h = SessionHistory(t, s)
    parts = h.visible(end)["part"].astype(int).tolist()
    anchor, hide = parts[3], (parts[4],)
    for i in range(150):
        # "before": a marker before the previous marker (hidden by this edit);
        # "after": a summary right after a visible anchor, hiding the previous summary
        at = hide[0] if side == "before" else anchor
        edit = Edit(stage="x", reason=f"r{i}", hide=hide, insert=(
            NewPart(content=f"[summary {i}]", kind="summary", role="user", anchor=at,
                    side=side),))
        _, inserted = h.apply(edit, end_pos=end)
        hide = (int(inserted.col("part")[0]),)
    seen = h.visible(end)
    assert seen["part"].astype(int).tolist() == [*parts[:4], hide[0], *parts[5:]]
    assert seen["content"].iloc[4] == "[summary 149]"
    pos = h.transcript().frame["pos"].to_numpy()
    assert len(np.unique(pos)) == len(pos)            # every part has its own place


@pytest.mark.parametrize("stage", ["clear_tool_results", "truncate"])
def test_a_view_after_an_edit_keeps_its_grammar_only_when_every_part_was_replaced(t, stage):
    """Placeholders take the place of what they hide (same row, role, kind, message, turn
    and tool-call id), so the grammar and layers of the view before are reused; any other edit
    (truncation hides whole messages) is checked again. Either way the problems are
    those found from scratch."""
    from ctxlab.stages import stage as make_stage
    from ctxlab.stages.grammar import _find_problem_rows, view_grammar
    s = t.sessions[0]
    end = call_end_pos(t, s, int(t.calls["call"].max()))
    view = build_view(t, s, end, ctxlab.estimator("chars:4"), BUDGET)
    view_grammar(view)
    params = {"keep": 1} if stage == "clear_tool_results" else {}
    edit = make_stage(stage, **params).plan(view)
    assert edit is not None and edit.hide
    h = SessionHistory(t, s)
    _, inserted = h.apply(edit, end_pos=end)
    after, _, _ = edit_view(view, edit.hide, inserted)
    reused = "problem_rows" in after._memo
    assert reused == (stage == "clear_tool_results")
    fresh = _find_problem_rows(after.table)
    got = after._memo.get("problem_rows") or fresh
    assert [r.tolist() for r in got[:2]] == [r.tolist() for r in fresh[:2]]
    assert got[2] == fresh[2]
    from ctxlab.layers import assign_layers       # kept or assigned again, the same layers
    assert after.table.col("layer").tolist() == assign_layers(after.table).tolist()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["before", "after"])),
                min_size=3, max_size=12))
def test_many_inserts_are_placed_at_once_where_one_at_a_time_puts_them(t, anchors):
    """An edit of many inserts (prune's placeholders) is placed at once when every insert
    has a gap of its own; with shared gaps (the same anchor twice, or "after" one part and
    "before" the next) one at a time. Either way the positions are those of placing the
    inserts one by one."""
    s = t.sessions[0]
    end = call_end_pos(t, s, int(t.calls["call"].max()))
    parts = SessionHistory(t, s).visible(end)["part"].astype(int).tolist()
    news = tuple(NewPart(content=f"[{i}]", kind="marker", role="user", anchor=parts[k],
                         side=side) for i, (k, side) in enumerate(anchors))
    edit = Edit(stage="x", reason="r", hide=(), insert=news)
    at_once, one_by_one = SessionHistory(t, s), SessionHistory(t, s)
    one_by_one._spread_positions = lambda inserts: None       # type: ignore[method-assign]
    a = at_once.apply(edit, end_pos=end)[1].col("pos").tolist()
    b = one_by_one.apply(edit, end_pos=end)[1].col("pos").tolist()
    assert a == b
    assert at_once.visible(end)["part"].tolist() == one_by_one.visible(end)["part"].tolist()
