"""Tool-pair repair (seed 000's post-step): synthetic results for unanswered calls,
synthetic calls for orphan results, in the session's tool-result role."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import apply_edit, rewind
from ctxlab.stages import stage
from ctxlab.stages.base import Edit
from ctxlab.stages.grammar import check_grammar, grammar_counts
from ctxlab.stages.repair import SYNTHETIC_RESULT, Repair, synthetic_call_text
from ctxlab.stages.truncate import Truncate
from tests.conftest import DATASETS
from tests.stage_helpers import build_transcript

BUDGET = Budget(window_tokens=200_000, limit_tokens=20_000, target_tokens=10_000)


_build = build_transcript


def _call(cid, name="Read"):
    return ("tool_call", f'{name}({{"file_path": "{cid}.py"}})',
            {"tool_name": name, "tool_call_id": cid})


def _result(cid, name="Read"):
    return ("tool_result", f"contents of {cid}.py", {"tool_name": name, "tool_call_id": cid})


def _session(result_role: str, pairs: int = 3, parallel: bool = True):
    """User prompt, then assistant steps with one or two calls each and their results."""
    msgs = [("user", [("text", "please fix it")])]
    for i in range(pairs):
        ids = [f"t{i}a", f"t{i}b"] if parallel and i % 2 == 0 else [f"t{i}a"]
        msgs.append(("assistant", [_call(c) for c in ids]))
        if result_role == "user":
            msgs.append(("user", [_result(c) for c in ids]))
        else:
            msgs.extend(("tool", [_result(c)]) for c in ids)
    msgs.append(("assistant", [("text", "done")]))
    return _build(msgs)


def _view(t):
    s = t.sessions[0]
    k = int(t.calls["call"].max())
    return build_view(t, s, call_end_pos(t, s, k), ctxlab.estimator("chars:4"), BUDGET, k)


def _hide(t, part_ids):
    """Hide some parts through an event (as a compaction would)."""
    s = t.sessions[0]
    end = call_end_pos(t, s, int(t.calls["call"].max()))
    t2, _ = apply_edit(t, Edit(stage="test", reason="hide", hide=tuple(part_ids)), session=s,
                       end_pos=end)
    return t2


def _repair(t):
    view = _view(t)
    end = call_end_pos(t, view.session, int(view.call))
    r = run_stages(t, view, [Repair()], end_pos=end, trigger="post", until_target=False)
    assert r.transcript.validate(strict=False) == []
    if r.stages_used:
        back = rewind(r.transcript, int(r.runs[0].event), session=view.session)
        pd.testing.assert_frame_equal(back.frame, t.frame)
        pd.testing.assert_frame_equal(back.events, t.events)
    return view, r


def _part(t, content):
    return int(t.frame.loc[t.frame["content"] == content, "part"].iloc[0])


def test_texts_are_the_seeds():
    assert SYNTHETIC_RESULT == "[Tool result unavailable - conversation was compacted]"
    assert synthetic_call_text("Read") == "[Tool call for Read - conversation was compacted]"
    assert isinstance(stage("repair"), Repair)


def test_a_whole_request_needs_no_repair():
    assert Repair().plan(_view(_session("tool"))) is None


def test_an_empty_view_is_left_alone():
    t = _session("tool")
    assert Repair().plan(build_view(t, "s", -1.0, ctxlab.estimator("chars:4"), BUDGET)) is None


def test_unanswered_call_gets_a_tool_role_result_after_its_message():
    t0 = _session("tool")
    t = _hide(t0, [_part(t0, "contents of t1a.py")])
    view, r = _repair(t)
    new = r.view.parts[r.view.parts["event"] == r.runs[0].event]
    assert len(new) == 1
    row = new.iloc[0]
    assert (row["kind"], row["role"], row["tool_call_id"], row["tool_name"], row["content"]) == (
        "tool_result", "tool", "t1a", "Read", SYNTHETIC_RESULT)
    assert json.loads(row["meta"]) == {"truncated": True}
    # right after the call's message, as a message of its own
    order = r.view.parts.reset_index(drop=True)
    i = order.index[order["part"] == row["part"]][0]
    assert order.loc[i - 1, "tool_call_id"] == "t1a" and order.loc[i - 1, "kind"] == "tool_call"
    assert row["msg"] not in set(view.parts["msg"])
    details = json.loads(r.transcript.events.iloc[-1]["meta"])["stage_details"]
    assert (details["orphaned_calls_fixed"], details["orphaned_results_fixed"]) == (1, 0)


def test_anthropic_style_result_joins_the_following_results_message():
    t0 = _session("user")
    t = _hide(t0, [_part(t0, "contents of t0b.py")])  # t0a's result stays in that message
    view, r = _repair(t)
    row = r.view.parts[r.view.parts["event"] == r.runs[0].event].iloc[0]
    assert (row["role"], row["kind"], row["tool_call_id"]) == ("user", "tool_result", "t0b")
    sibling = view.parts.loc[view.parts["content"] == "contents of t0a.py", "msg"].iloc[0]
    assert row["msg"] == sibling


def test_anthropic_style_result_without_a_results_message_gets_its_own():
    t0 = _session("user")
    t = _hide(t0, [_part(t0, "contents of t1a.py")])
    view, r = _repair(t)
    row = r.view.parts[r.view.parts["event"] == r.runs[0].event].iloc[0]
    assert row["role"] == "user" and row["msg"] not in set(view.parts["msg"])


def test_orphan_result_gets_a_synthetic_call_before_it():
    t0 = _session("tool", parallel=False)
    t = _hide(t0, [int(t0.frame.loc[t0.frame["tool_call_id"].eq("t1a")
                                     & t0.frame["kind"].eq("tool_call"), "part"].iloc[0])])
    assert grammar_counts(_view(t).parts)["orphan_result"] == 1
    _, r = _repair(t)
    row = r.view.parts[r.view.parts["event"] == r.runs[0].event].iloc[0]
    assert (row["role"], row["kind"], row["tool_call_id"], row["content"]) == (
        "assistant", "tool_call", "t1a", "[Tool call for Read - conversation was compacted]")
    assert json.loads(row["meta"]) == {"truncated": True}
    order = r.view.parts.reset_index(drop=True)
    i = order.index[order["part"] == row["part"]][0]
    assert order.loc[i + 1, "tool_call_id"] == "t1a" and order.loc[i + 1, "kind"] == "tool_result"
    details = json.loads(r.transcript.events.iloc[-1]["meta"])["stage_details"]
    assert (details["orphaned_calls_fixed"], details["orphaned_results_fixed"]) == (0, 1)


def test_orphan_result_joins_the_assistant_message_just_before_it():
    t0 = _session("user")
    # hide call t0b only: its result sits in the message after the assistant's t0a call
    t = _hide(t0, [int(t0.frame.loc[t0.frame["tool_call_id"].eq("t0b")
                                     & t0.frame["kind"].eq("tool_call"), "part"].iloc[0])])
    view, r = _repair(t)
    row = r.view.parts[r.view.parts["event"] == r.runs[0].event].iloc[0]
    call_msg = view.parts.loc[view.parts["tool_call_id"].eq("t0a")
                              & view.parts["kind"].eq("tool_call"), "msg"].iloc[0]
    assert row["msg"] == call_msg and row["tool_name"] == "Read"


def test_unknown_tool_name_is_said_so():
    t = _build([("user", [("text", "go")]),
                ("tool", [("tool_result", "out", {"tool_call_id": "x"})])])
    _, r = _repair(t)
    new = r.view.parts[r.view.parts["event"] == r.runs[0].event]
    assert new["content"].tolist() == ["[Tool call for unknown tool - conversation was compacted]"]


def test_explicit_results_role_and_bad_one():
    t0 = _session("user")
    t = _hide(t0, [_part(t0, "contents of t1a.py")])
    edit = Repair(results_role="tool").plan(_view(t))
    assert [p.role for p in edit.insert] == ["tool"]
    with pytest.raises(ConfigError, match="results_role"):
        Repair(results_role="robot")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(style=st.sampled_from(["tool", "user"]), pairs=st.integers(1, 5),
       parallel=st.booleans(), data=st.data())
def test_random_hides_of_tool_parts_leave_no_orphans_after_repair(style, pairs, parallel, data):
    t = _session(style, pairs, parallel)
    tool_parts = t.frame.loc[t.frame["kind"].isin(["tool_call", "tool_result"]), "part"]
    hide = data.draw(st.sets(st.sampled_from(sorted(int(p) for p in tool_parts)), min_size=1))
    t = _hide(t, hide)
    before = grammar_counts(_view(t).parts)
    _, r = _repair(t)
    after = [p.problem for p in check_grammar(r.view.parts)]
    assert "orphan_result" not in after and "unanswered_call" not in after
    if r.stages_used:
        details = json.loads(r.transcript.events.iloc[-1]["meta"])["stage_details"]
        assert details["orphaned_calls_fixed"] == before["unanswered_call"]
        assert details["orphaned_results_fixed"] == before["orphan_result"]


@pytest.fixture(scope="module")
def coding():
    return ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_hides_on_the_real_session_are_repaired(coding, data):
    t = coding
    view = _view(t)
    tool_parts = sorted(int(p) for p in view.parts.loc[
        view.parts["kind"].isin(["tool_call", "tool_result"]), "part"])
    hide = data.draw(st.sets(st.sampled_from(tool_parts), min_size=1, max_size=40))
    _, r = _repair(_hide(t, hide))
    g = grammar_counts(r.view.parts)
    assert g["orphan_result"] == 0 and g["unanswered_call"] == 0


def test_real_session_after_seed_truncation(coding):
    t = coding
    view = _view(t)
    end = call_end_pos(t, view.session, int(view.call))
    cut = run_stages(t, view, [Truncate()], end_pos=end, trigger="test", until_target=False)
    broken = grammar_counts(cut.view.parts)
    assert broken["orphan_result"] + broken["unanswered_call"] > 0
    r = run_stages(cut.transcript, cut.view, [Repair()], end_pos=end, trigger="post",
                   until_target=False)
    assert r.transcript.validate(strict=False) == []
    g = grammar_counts(r.view.parts)
    assert g["orphan_result"] == 0 and g["unanswered_call"] == 0
    details = json.loads(r.transcript.events.iloc[-1]["meta"])["stage_details"]
    assert details["orphaned_calls_fixed"] == broken["unanswered_call"]
    assert details["orphaned_results_fixed"] == broken["orphan_result"]
    assert details["results_role"] == "user"  # Claude Code sends tool results as user
    # repair only adds: what truncation kept is all still visible
    assert set(cut.view.parts["part"]) <= set(r.view.parts["part"])
    back = rewind(r.transcript, int(r.runs[0].event), session=view.session)
    pd.testing.assert_frame_equal(back.frame, cut.transcript.frame)
