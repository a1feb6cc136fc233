"""Sliding-window truncation (seed 000, stage 4): the 4-message minimum, the first pair,
the even-number rule, the marker, tool pairs split (faithful) or kept whole (option)."""

from __future__ import annotations

import pandas as pd
import pytest

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import rewind
from ctxlab.stages import stage
from ctxlab.stages.grammar import grammar_counts
from ctxlab.stages.repair import Repair
from ctxlab.stages.truncate import MARKER, Truncate, removal_count
from tests.conftest import DATASETS
from tests.stage_helpers import build_transcript

BUDGET = Budget(window_tokens=200_000, limit_tokens=20_000, target_tokens=10_000)


_build = build_transcript


def _chat(n: int, *, system: str | None = None, size: int = 400):
    """``n`` alternating user/assistant text messages of ``size`` characters each."""
    msgs = [("user" if i % 2 == 0 else "assistant", [("text", f"m{i} " + "x" * size)])
            for i in range(n)]
    return _build(msgs, system=system)


def _view(t):
    s = t.sessions[0]
    k = int(t.calls["call"].max())
    return build_view(t, s, call_end_pos(t, s, k), ctxlab.estimator("chars:4"), BUDGET, k)


def _run(t, view, st, *, grammar_may_grow=False):
    """Apply one stage through the engine and check what every stage must keep."""
    end = call_end_pos(t, view.session, int(view.call))
    r = run_stages(t, view, [st], end_pos=end, trigger="test", until_target=False)
    assert r.transcript.validate(strict=False) == []
    assert r.view.total_tokens <= view.total_tokens
    if not grammar_may_grow:
        assert sum(grammar_counts(r.view.parts).values()) <= sum(
            grammar_counts(view.parts).values())
    if r.stages_used:
        back = rewind(r.transcript, int(r.runs[0].event), session=view.session)
        pd.testing.assert_frame_equal(back.frame, t.frame)
        pd.testing.assert_frame_equal(back.events, t.events)
    return r


def _texts(view):
    return [c.split(" ")[0] for c in view.parts["content"]]


def test_defaults_are_the_seeds():
    st = stage("truncate")
    assert isinstance(st, Truncate)
    assert (st.fraction, st.keep_first, st.keep_tool_pairs) == (0.5, 2, False)
    assert st.marker == ("[Earlier conversation history was truncated to fit within context "
                         "limits]") == MARKER


@pytest.mark.parametrize("n, fraction, expected", [
    (3, 0.5, 0), (4, 0.5, 0), (5, 0.5, 0), (6, 0.5, 2), (7, 0.5, 2), (8, 0.5, 2),
    (10, 0.5, 4), (12, 0.5, 4), (13, 0.5, 4), (14, 0.5, 6), (10, 1.0, 8), (11, 1.0, 8),
    (20, 0.3, 4)])
def test_an_even_number_of_the_messages_after_the_first_pair_goes(n, fraction, expected):
    assert removal_count(n, fraction) == expected


def test_four_messages_or_fewer_are_never_truncated():
    t = _chat(4)
    edit = Truncate().plan(_view(t))
    assert edit is not None and edit.empty and "4" in edit.reason
    r = _run(t, _view(t), Truncate())
    assert r.stages_used == []


def test_worked_example_ten_messages():
    # 10 messages; the last user message (m8) is the current prompt, m9 its answer. The
    # list the seed truncates is m0..m7 (the prompt is kept apart): (8 - 2) x 0.5 = 3 -> 2
    t = _chat(10, system="You are helpful.")
    view = _view(t)
    r = _run(t, view, Truncate())
    assert _texts(r.view) == ["You", "m0", "m1", MARKER.split(" ")[0], "m4", "m5", "m6", "m7",
                              "m8", "m9"]
    marker = r.view.parts[r.view.parts["kind"] == "marker"].iloc[0]
    assert (marker["role"], marker["content"]) == ("system", MARKER)
    # the marker is a message of its own, where the removed messages were
    assert marker["msg"] not in set(view.parts["msg"])
    run = r.runs[0]
    assert run.hidden == 2 and run.inserted == 1
    details = r.transcript.events.iloc[-1]["meta"]
    assert '"messages_removed": 2' in details and '"messages": 10' in details
    assert '"messages_before_prompt": 8' in details


def test_the_system_prompt_is_neither_counted_nor_removed():
    # a system prompt, then 7 messages whose prompt is m6: 6 before it, (6-2)*0.5 = 2
    t = _chat(5, system="You are helpful.")
    assert Truncate().plan(_view(t)).empty
    t = _chat(7, system="You are helpful.")
    r = _run(t, _view(t), Truncate())
    assert _texts(r.view)[:3] == ["You", "m0", "m1"]
    assert r.runs[0].hidden == 2


def test_a_summary_message_counts_as_a_message():
    summary = ("user", [("summary", "Summary of the earlier work " + "s" * 400)])
    roles = ["user", "assistant", "user", "assistant", "assistant", "user"]
    rest = [(role, [("text", f"m{i} " + "x" * 400)]) for i, role in enumerate(roles)]
    # 5 messages before the prompt m5 alone: (5-2)*0.5 = 1 -> 0; with the summary, 6: two
    # go (the summary is the first of the first pair, as NeuroLink's [summary, ...recent]
    # list has it)
    assert Truncate().plan(_view(_build(rest))).empty
    t = _build([summary] + rest)
    r = _run(t, _view(t), Truncate())
    assert r.runs[0].hidden == 2
    assert r.view.parts["kind"].iloc[0] == "summary"


def test_the_current_prompt_is_never_removed():
    t = _chat(10)
    r = _run(t, _view(t), Truncate(fraction=1.0))
    # 8 would go, but m8 is the current prompt: the range stops before it (6 removed)
    assert _texts(r.view) == ["m0", "m1", MARKER.split(" ")[0], "m8", "m9"]


def test_no_edit_when_the_marker_costs_more_than_what_it_replaces():
    t = _chat(7, size=1)
    edit = Truncate().plan(_view(t))
    assert edit is not None and edit.empty and "no tokens" in edit.reason


def _tool_chat():
    """Tool pairs across messages: assistant calls, user results (Claude Code style)."""
    msgs = [("user", [("text", "u0 fix the bug")]),
            ("assistant", [("tool_call", 'Read({"file_path": "a.py"})',
                            {"tool_name": "Read", "tool_call_id": "t0", "file_path": "a.py"})])]
    for i in range(1, 6):
        msgs.append(("user", [("tool_result", f"r{i - 1} " + "x" * 400,
                               {"tool_name": "Read", "tool_call_id": f"t{i - 1}"})]))
        msgs.append(("assistant", [("tool_call", f'Read({{"file_path": "f{i}.py"}})',
                                    {"tool_name": "Read", "tool_call_id": f"t{i}"})]))
    msgs.append(("user", [("tool_result", "r5 " + "x" * 400,
                           {"tool_name": "Read", "tool_call_id": "t5"})]))
    msgs.append(("assistant", [("text", "a done")]))
    return _build(msgs)


def test_the_seed_splits_tool_pairs_and_repair_mends_them():
    t = _tool_chat()  # 14 messages: remove 6 after the first pair
    view = _view(t)
    assert sum(grammar_counts(view.parts).values()) == 0
    # faithful: messages 2-7 go, so the first pair's call t0 loses its result r0 and the
    # kept result r3 loses its call t3 -- the seed creates orphans, grammar problems grow
    r = _run(t, view, Truncate(), grammar_may_grow=True)
    g = grammar_counts(r.view.parts)
    assert g["unanswered_call"] == 1 and g["orphan_result"] == 1
    assert r.runs[0].hidden == 6
    assert '"tool_pairs_split": 2' in r.transcript.events.iloc[-1]["meta"]
    end = call_end_pos(t, view.session, int(view.call))
    fixed = run_stages(r.transcript, r.view, [Repair()], end_pos=end, trigger="post",
                       until_target=False)
    g = grammar_counts(fixed.view.parts)
    assert g["unanswered_call"] == 0 and g["orphan_result"] == 0


def test_keep_tool_pairs_moves_the_range_to_whole_pairs():
    t = _tool_chat()
    view = _view(t)
    r = _run(t, view, Truncate(keep_tool_pairs=True))  # grammar must not grow
    assert grammar_counts(r.view.parts) == grammar_counts(view.parts)
    meta = r.transcript.events.iloc[-1]["meta"]
    assert '"tool_pairs_split": 0' in meta and '"first_removed": 3' in meta
    # the result of the first pair's call stays; an even number of messages goes
    kept = set(r.view.parts["content"].str.split(" ").str[0])
    assert "r0" in kept and r.runs[0].hidden % 2 == 0


def test_keep_tool_pairs_gives_up_when_no_clean_range_exists():
    # every message after the first pair is part of one pair spanning to the end
    msgs = [("user", [("text", "u0")]),
            ("assistant", [("tool_call", "Bash({})", {"tool_name": "Bash", "tool_call_id": "a"})])]
    msgs += [("assistant", [("text", f"a{i} " + "x" * 400)]) for i in range(6)]
    msgs += [("user", [("tool_result", "ok", {"tool_name": "Bash", "tool_call_id": "a"})])]
    t = _build(msgs)
    edit = Truncate(keep_tool_pairs=True).plan(_view(t))
    assert edit is not None and edit.empty and "tool pair" in edit.reason


@pytest.mark.parametrize("params, message", [
    ({"fraction": 0.0}, "fraction"), ({"fraction": 1.5}, "fraction"),
    ({"keep_first": -1}, "keep_first"), ({"marker": ""}, "marker"),
    ({"keep_tool_pairs": "yes"}, "keep_tool_pairs")])
def test_bad_parameters_are_refused(params, message):
    with pytest.raises(ConfigError, match=message):
        Truncate(**params)


def test_an_empty_view_is_left_alone():
    t = _chat(2)
    view = _view(t)
    empty = build_view(t, "s", -1.0, view.estimator, BUDGET, None)
    assert Truncate().plan(empty) is None


@pytest.fixture(scope="module")
def coding():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    return t, _view(t)


def test_real_session_is_halved_keeping_the_first_pair(coding):
    t, view = coding
    conv = view.parts[~view.parts["layer"].isin(["system", "tools"])]
    msgs = conv.drop_duplicates("msg")
    prompt = msgs.index[msgs["layer"] == "prompt"]
    n = msgs.index.get_loc(prompt[0]) if len(prompt) else len(msgs)  # before the prompt
    r = _run(t, view, Truncate(), grammar_may_grow=True)  # the seed orphans tool pairs
    run = r.runs[0]
    removed_msgs = view.parts.loc[view.parts["part"].isin(
        r.transcript.frame.loc[r.transcript.frame["hidden_by"] == run.event, "part"]), "msg"]
    assert removed_msgs.nunique() == removal_count(n) and removed_msgs.nunique() % 2 == 0
    first_two = conv.drop_duplicates("msg")["msg"].iloc[:2].tolist()
    assert set(first_two) <= set(r.view.parts["msg"])
    assert (r.view.parts["kind"] == "marker").sum() == 1
    assert r.view.total_tokens < view.total_tokens
    repaired = run_stages(r.transcript, r.view, [Repair()], end_pos=call_end_pos(
        t, view.session, int(view.call)), trigger="post", until_target=False)
    g = grammar_counts(repaired.view.parts)
    assert g["orphan_result"] == 0 and g["unanswered_call"] == 0


def test_real_session_keep_tool_pairs_creates_no_orphans(coding):
    t, view = coding
    r = _run(t, view, Truncate(keep_tool_pairs=True))
    assert grammar_counts(r.view.parts) == grammar_counts(view.parts)
    assert r.runs[0].tokens_saved > 0
