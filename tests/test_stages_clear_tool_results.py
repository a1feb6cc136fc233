"""Tests of the `clear_tool_results` stage (seed 004, ToolResultClearingStrategy)."""

from __future__ import annotations

import pandas as pd
import pytest

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import rewind
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.schema import Transcript
from ctxlab.stages import stage
from ctxlab.stages.base import View
from ctxlab.stages.clear_tool_results import PLACEHOLDER, ClearToolResults
from ctxlab.stages.grammar import grammar_counts
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=200_000, limit_tokens=100_000, target_tokens=1)


def _tool_session(results: list[str]) -> Transcript:
    """One turn, one tool call per result, each answered in a message of its own."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "You are an agent.")
    b.message("user", real_user=True)
    b.part("text", "Investigate the repository.")
    for i, text in enumerate(results):
        c = b.call()
        b.message("assistant")
        b.part("tool_call", f'Read({{"file_path": "f{i}.py"}})', tool_name="Read",
               tool_call_id=f"call_{i}", file_path=f"f{i}.py", call=c)
        b.message("user")
        b.part("tool_result", text, tool_name="Read", tool_call_id=f"call_{i}",
               file_path=f"f{i}.py")
    c = b.call()
    b.message("assistant")
    b.part("text", "Done.", call=c)
    return assemble([b], log, {"format": "test"})


def _end(t: Transcript) -> float:
    return float(t.frame["pos"].max()) + 1.0


def _view(t: Transcript) -> View:
    return build_view(t, "s", _end(t), ctxlab.estimator("chars:4"), BUDGET)


def _check(t: Transcript, res) -> None:
    run = res.runs[0]
    res.transcript.validate()
    assert run.tokens_after <= run.tokens_before
    assert run.grammar_after <= run.grammar_before
    back = rewind(res.transcript, run.event, session="s")
    pd.testing.assert_frame_equal(back.frame, t.frame)


def test_seed_004_keeps_the_two_most_recent_results():
    t = _tool_session([f"file body {i} " * 50 for i in range(4)])
    res = run_stages(t, _view(t), [stage("clear_tool_results")], end_pos=_end(t), trigger="test")
    results = res.view.parts[res.view.parts["kind"] == "tool_result"]
    assert results["content"].tolist()[:2] == [PLACEHOLDER, PLACEHOLDER]
    assert results["content"].tolist()[2:] == ["file body 2 " * 50, "file body 3 " * 50]
    # The placeholder keeps the linkage and sits in the result's own message.
    assert results["tool_call_id"].tolist() == ["call_0", "call_1", "call_2", "call_3"]
    assert results["tool_name"].tolist() == ["Read"] * 4
    original_msgs = t.frame.loc[t.frame["kind"] == "tool_result", "msg"].tolist()
    assert results["msg"].tolist() == original_msgs
    assert grammar_counts(res.view.parts) == {"orphan_result": 0, "unanswered_call": 0,
                                              "role_order": 0}
    _check(t, res)


def test_cleared_placeholders_are_not_cleared_again():
    t = _tool_session([f"file body {i} " * 50 for i in range(4)])
    first = run_stages(t, _view(t), [ClearToolResults()], end_pos=_end(t), trigger="test")
    again = ClearToolResults().plan(first.view)
    assert again is not None and again.empty and "already cleared" in again.reason
    # A result an earlier event inserted (e.g. prune's placeholder) is left alone too.
    pruned = run_stages(t, _view(t), [stage("prune", protect_tokens=0, minimum_savings=0)],
                        end_pos=_end(t), trigger="test")
    edit = ClearToolResults(keep=0).plan(pruned.view)
    assert edit is not None and edit.empty


def test_results_no_bigger_than_the_placeholder_are_left_alone():
    t = _tool_session(["ok", "file body " * 50, "ok", "x", "y"])
    edit = ClearToolResults().plan(_view(t))
    hidden = t.frame[t.frame["part"].isin(edit.hide)]
    assert hidden["tool_call_id"].tolist() == ["call_1"]
    assert edit.details["tokens_saved"] > 0


def test_keep_zero_clears_every_result():
    t = _tool_session([f"file body {i} " * 50 for i in range(3)])
    res = run_stages(t, _view(t), [ClearToolResults(keep=0)], end_pos=_end(t), trigger="test")
    results = res.view.parts[res.view.parts["kind"] == "tool_result"]
    assert (results["content"] == PLACEHOLDER).all() and len(results) == 3
    _check(t, res)


def test_custom_placeholder():
    t = _tool_session([f"file body {i} " * 50 for i in range(3)])
    edit = ClearToolResults(keep=1, placeholder="[observation masked]").plan(_view(t))
    assert [n.content for n in edit.insert] == ["[observation masked]"] * 2
    assert all(n.join_message and n.kind == "tool_result" for n in edit.insert)


def test_nothing_to_do():
    t = _tool_session(["a " * 100, "b " * 100])
    assert ClearToolResults().plan(_view(t)) is None
    view = _view(t)
    empty = View(parts=view.parts.iloc[:0], estimator=view.estimator, window_tokens=1,
                 limit_tokens=1, target_tokens=1)
    assert ClearToolResults().plan(empty) is None


@pytest.mark.parametrize("params", [{"keep": -1}, {"keep": "2"}, {"placeholder": ""},
                                    {"placeholder": "  "}])
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError, match="clear_tool_results"):
        ClearToolResults(**params)


def test_registered_with_seed_defaults():
    st = stage("clear_tool_results")
    assert isinstance(st, ClearToolResults)
    assert st.params() == {"keep": 2, "placeholder": "[tool result cleared]"}


def test_coding_session_applies_and_rewinds_exactly():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    s = str(t.frame["session"].iloc[0])
    end = call_end_pos(t, s, 120)
    view = build_view(t, s, end, ctxlab.estimator("chars:4"), BUDGET, call=120)
    res = run_stages(t, view, [stage("clear_tool_results")], end_pos=end, trigger="test")
    run = res.runs[0]
    assert run.event is not None and run.inserted == run.hidden > 100
    res.transcript.validate()
    assert run.tokens_after < run.tokens_before / 2
    assert run.grammar_after == run.grammar_before == 0
    intact = res.view.parts[(res.view.parts["kind"] == "tool_result")
                            & res.view.parts["event"].isna()]
    assert len(intact) >= 2
    back = rewind(res.transcript, run.event, session=s)
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)
