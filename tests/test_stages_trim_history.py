"""Tests of the `trim_history` stage (seed 003, Obsidian Copilot fix plan 1.2 and 2.1)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.errors import ConfigError
from ctxlab.history import rewind
from ctxlab.layers import layers_df
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.schema import Transcript
from ctxlab.stages import stage
from ctxlab.stages.base import View
from ctxlab.stages.trim_history import TrimHistory, history_turn_tokens, truncation_notice
from tests.conftest import DATASETS

CHARS4 = ctxlab.estimator("chars:4")


def _chat(answers: list[int]) -> Transcript:
    """A Copilot-like chat: system prompt, one turn per answer length, then a prompt."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "You are Obsidian Copilot. " * 40)
    for i, n in enumerate(answers):
        b.message("user", real_user=True)
        b.part("text", f"Question {i}? " + "q" * 380)
        c = b.call()
        b.message("assistant")
        b.part("text", f"Answer {i}: " + "a" * n, call=c)
    b.message("user", real_user=True)
    b.part("text", "And now?")
    return assemble([b], log, {"format": "test"})


def _view(t: Transcript, limit: int = 1_000_000) -> View:
    budget = Budget(window_tokens=2_000_000, limit_tokens=limit, target_tokens=1)
    return build_view(t, "s", float(t.frame["pos"].max()) + 1.0, CHARS4, budget)


def _run(t: Transcript, view: View, st: TrimHistory):
    res = run_stages(t, view, [st], end_pos=float(t.frame["pos"].max()) + 1.0, trigger="test")
    return res, res.runs[0]


def _check(t: Transcript, res, run) -> None:
    res.transcript.validate()
    assert run.tokens_after <= run.tokens_before
    assert run.grammar_after <= run.grammar_before
    back = rewind(res.transcript, run.event, session=str(t.frame["session"].iloc[0]))
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)


def test_turn_tokens_count_parts_and_framing():
    view = _view(_chat([400, 400]))
    per_turn = history_turn_tokens(view)
    assert per_turn.index.tolist() == [1, 2]
    # chars:4 has no framing; each turn = question (~98 tokens) + answer (~103 tokens).
    hist = view.parts[view.parts["layer"] == "history"]
    assert int(per_turn.sum()) == int(hist["tokens"].sum())
    framed = View(parts=view.parts, estimator=ctxlab.estimator("neuron"), window_tokens=1,
                  limit_tokens=1, target_tokens=1)
    assert int(history_turn_tokens(framed).sum()) == int(hist["tokens"].sum()) + 4 * 4


def test_budget_is_the_limit_minus_the_other_layers_and_the_reserve():
    view = _view(_chat([400] * 4), limit=5_000)
    layers = layers_df(view.parts).set_index("layer")["tokens"]
    others = int(layers.drop("history").sum())
    assert TrimHistory().budget(view) == 5_000 - others - 4_096
    assert TrimHistory(output_reserve=0).budget(view) == 5_000 - others
    assert TrimHistory(budget_tokens=123).budget(view) == 123


def test_fits_the_budget_nothing_to_do():
    view = _view(_chat([400] * 3))
    assert TrimHistory().plan(view) is None
    empty = View(parts=view.parts.iloc[:0], estimator=CHARS4, window_tokens=1, limit_tokens=1,
                 target_tokens=1)
    assert TrimHistory(budget_tokens=0).plan(empty) is None


def test_phase_1_drops_oldest_complete_turns_until_the_rest_fits():
    t = _chat([400] * 5)
    view = _view(t)
    per_turn = history_turn_tokens(view)
    budget = int(per_turn.iloc[-2:].sum()) + 10  # room for the two newest turns
    res, run = _run(t, view, TrimHistory(budget_tokens=budget))
    hist = res.view.parts[res.view.parts["layer"] == "history"]
    assert sorted(set(hist["turn"])) == [4, 5]
    # Complete turns: every question goes with its answer.
    assert hist["role"].tolist() == ["user", "assistant"] * 2
    assert res.view.parts["role"].iloc[0] == "system"
    details = res.transcript.events["meta"].iloc[-1]
    assert '"turns_dropped": 3' in details and "warning" not in details
    _check(t, res, run)


def test_seed_003_order_drop_keep_latest_truncate_then_warn():
    t = _chat([400, 400, 9_000])
    view = _view(t)
    res, run = _run(t, view, TrimHistory(budget_tokens=0))
    vis = res.view.parts
    hist = vis[vis["layer"] == "history"]
    # 1. the two oldest turns dropped, 4. the latest history turn always kept,
    assert sorted(set(hist["turn"])) == [3]
    # 2. its long answer truncated to the first 2,000 chars plus a notice, in its message,
    answer = hist[hist["role"] == "assistant"]
    assert len(answer) == 1 and answer["event"].notna().all()
    text = str(answer["content"].iloc[0])
    assert text == "Answer 2: " + "a" * 1_990 + truncation_notice(2_000, 9_010)
    original = t.frame[(t.frame["turn"] == 3) & (t.frame["role"] == "assistant")]
    assert answer["msg"].tolist() == original["msg"].tolist()
    # 3. and a warning since even that is over the budget.
    details = json.loads(res.transcript.events["meta"].iloc[-1])["stage_details"]
    assert details["turns_dropped"] == 2 and details["answers_truncated"] == 1
    assert details["over_budget_tokens"] == details["history_tokens_after"] > 0
    assert "over its budget of 0" in details["warning"]
    _check(t, res, run)


def test_truncation_happens_only_when_dropping_is_not_enough():
    t = _chat([9_000, 400])
    view = _view(t)
    per_turn = history_turn_tokens(view)
    edit = TrimHistory(budget_tokens=int(per_turn.iloc[-1])).plan(view)
    assert edit.details["turns_dropped"] == 1 and not edit.insert


def test_min_turns():
    view = _view(_chat([400] * 4))
    assert TrimHistory(budget_tokens=0, min_turns=2).plan(view).details["turns_kept"] == 2
    edit = TrimHistory(budget_tokens=0, min_turns=0).plan(view)
    assert edit.details["turns_kept"] == 0 and "warning" not in edit.details
    hist = view.parts[view.parts["layer"] == "history"]
    assert sorted(edit.hide) == sorted(int(i) for i in hist["part"])


def test_warn_only_when_nothing_can_be_cut():
    view = _view(_chat([400]))
    edit = TrimHistory(budget_tokens=0).plan(view)
    assert edit.empty and edit.details["over_budget_tokens"] > 0
    assert "still" in edit.reason


def test_projects_mode_l1_leaves_no_budget_latest_turn_and_a_warning():
    t = ctxlab.load(DATASETS / "projects_mode.jsonl")
    s = str(t.frame["session"].iloc[0])
    last = int(t.calls["call"].max())
    end = call_end_pos(t, s, last)
    # Copilot's autoCompactThreshold default (128k) as the limit, chars/4 as the seed.
    budget = Budget(window_tokens=1_000_000, limit_tokens=128_000, target_tokens=128_000)
    view = build_view(t, s, end, CHARS4, budget, call=last)
    layers = layers_df(view.parts).set_index("layer")["tokens"]
    assert layers["system"] > 400_000  # the <project_context> block is L1
    res = run_stages(t, view, [stage("trim_history")], end_pos=end, trigger="test")
    run = res.runs[0]
    vis = res.view.parts
    hist = vis[vis["layer"] == "history"]
    latest = int(view.parts.loc[view.parts["layer"] == "history", "turn"].max())
    assert set(hist["turn"]) == {latest}
    assert len(hist) == (view.parts["turn"] == latest).sum()
    assert "<project_context>" in str(vis["content"].iloc[0])
    details = json.loads(res.transcript.events["meta"].iloc[-1])["stage_details"]
    assert details["over_budget_tokens"] == run.tokens_after + 4_096 - 128_000
    assert "limit of 128,000" in details["warning"]
    _check(t, res, run)


@pytest.mark.parametrize("params", [{"output_reserve": -1}, {"truncate_chars": 0},
                                    {"min_turns": -1}, {"budget_tokens": -5},
                                    {"budget_tokens": 1.5}, {"min_turns": True}])
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError, match="trim_history"):
        TrimHistory(**params)


def test_registered_with_seed_defaults():
    st = stage("trim_history")
    assert isinstance(st, TrimHistory)
    assert st.params() == {"budget_tokens": None, "output_reserve": 4_096,
                           "truncate_chars": 2_000, "min_turns": 1}


def test_coding_session_applies_and_rewinds_exactly():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    s = str(t.frame["session"].iloc[0])
    end = call_end_pos(t, s, 120)
    budget = Budget(window_tokens=200_000, limit_tokens=128_000, target_tokens=1)
    view = build_view(t, s, end, CHARS4, budget, call=120)
    res = run_stages(t, view, [stage("trim_history")], end_pos=end, trigger="test")
    run = res.runs[0]
    assert run.event is not None and run.hidden > 0
    assert run.tokens_after + 4_096 <= 128_000 < run.tokens_before
    _check(t, res, run)


def test_truncated_answers_are_not_truncated_again():
    t = _chat([400, 9_000])
    res, _ = _run(t, _view(t), TrimHistory(budget_tokens=0))
    again = TrimHistory(budget_tokens=0).plan(res.view)
    assert again is not None and again.empty and again.details["answers_truncated"] == 0


def test_truncation_stops_once_the_history_fits():
    t = _chat([9_000, 9_000, 400])
    view = _view(t)
    per_turn = history_turn_tokens(view)
    # Budget: all three turns minus what truncating the first long answer saves.
    budget = int(per_turn.sum()) - 1_500
    edit = TrimHistory(budget_tokens=budget, min_turns=3).plan(view)
    assert edit.details["answers_truncated"] == 1 and "warning" not in edit.details
    assert edit.hide == (int(view.parts.loc[view.parts["content"].str.startswith("Answer 0"),
                                            "part"].iloc[0]),)
