"""Tests of the `monologue` stage (seed 001, ProbeAgent segment compaction)."""

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
from ctxlab.stages.grammar import grammar_counts
from ctxlab.stages.monologue import Monologue, final_answer
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=200_000, limit_tokens=100_000, target_tokens=1)
TOOLS = ["search", "extract", "implement", "bash", "search"]


def _probe_session(turns: int = 5) -> Transcript:
    """Seed 001's example: [System], then per turn User → Assistant(thinking) →
    Assistant(tool) → Tool result; the last turn is active and stops at its tool call."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "You are ProbeAgent.")
    for i in range(turns):
        tool = TOOLS[i % len(TOOLS)]
        b.message("user", real_user=True)
        b.part("text", f"Question {i + 1}: where is feature {i + 1} implemented?")
        c = b.call(call_id=f"t{i}a")
        b.message("assistant")
        b.part("thinking", f"I should use {tool} to find feature {i + 1}. " * 20, call=c)
        c = b.call(call_id=f"t{i}b")
        b.message("assistant")
        b.part("tool_call", f'{tool}({{"query": "feature {i + 1}"}})', tool_name=tool,
               tool_call_id=f"call{i}", call=c)
        if i < turns - 1:
            b.message("user")
            b.part("tool_result", f"feature {i + 1} lives in src/f{i + 1}.py " * 30,
                   tool_name=tool, tool_call_id=f"call{i}")
    return assemble([b], log, {"format": "test"})


def _view(t: Transcript, *, estimator: str = "chars:4") -> View:
    """The request that follows the last part (the retried request of the seed)."""
    s = str(t.frame["session"].iloc[0])
    return build_view(t, s, float(t.frame["pos"].max()) + 1.0, ctxlab.estimator(estimator),
                      BUDGET)


def _shape(parts: pd.DataFrame) -> list[tuple[int, str, str]]:
    """(turn, role, kinds) per message, in order."""
    g = parts.groupby("msg", sort=False)
    return [(int(f["turn"].iloc[0]), str(f["role"].iloc[0]), "+".join(f["kind"]))
            for _, f in g]


def _apply(t: Transcript, view: View, st: Monologue):
    end = float(t.frame["pos"].max()) + 1.0
    res = run_stages(t, view, [st], end_pos=end, trigger="test")
    return res, res.runs[0]


def test_seed_example_before_after_shape():
    t = _probe_session()
    view = _view(t)
    assert view.messages == 20
    res, run = _apply(t, view, stage("monologue"))
    after = _shape(res.view.parts)
    expected = [(0, "system", "text")]
    for turn in range(1, 5):
        expected += [(turn, "user", "text"), (turn, "user", "tool_result")]
    expected += [(5, "user", "text"), (5, "assistant", "thinking"), (5, "assistant", "tool_call")]
    assert after == expected
    assert res.view.messages == 12
    assert run.tokens_after < run.tokens_before
    # The seed's own "after" (User → Tool result) keeps results whose calls are gone:
    # four orphans, left to the pipeline's repair post-step.
    assert grammar_counts(res.view.parts)["orphan_result"] == 4
    assert run.grammar_after == run.grammar_before + 4
    ev = res.transcript.events
    details = ev["meta"].iloc[-1]
    assert '"orphaned_results": 4' in details and '"compacted_segments": 4' in details


def test_prose_default_of_two_segments_keeps_turn_four_whole():
    t = _probe_session()
    edit = Monologue(keep_segments=2).plan(_view(t))
    hidden = t.frame[t.frame["part"].isin(edit.hide)]
    assert sorted(set(hidden["turn"])) == [1, 2, 3]
    assert edit.details["compacted_segments"] == 3


def test_keep_last_segment_false_compacts_the_active_segment_too():
    t = _probe_session()
    view = _view(t)
    edit = Monologue(keep_segments=0, keep_last_segment=False).plan(view)
    assert edit.details["compacted_segments"] == 5
    visible = view.parts[~view.parts["part"].isin(edit.hide)]
    active = visible[visible["turn"] == 5]
    # The active segment ends on a call without a result: no final answer is kept.
    assert active["kind"].tolist() == ["text"] and active["role"].tolist() == ["user"]
    # keep_segments=0 with keep_last_segment=True still protects the active segment.
    assert Monologue(keep_segments=0).plan(view).details["compacted_segments"] == 4


def test_system_parts_are_never_hidden():
    t = _probe_session()
    view = _view(t)
    edit = Monologue(keep_segments=0, keep_last_segment=False).plan(view)
    system = set(view.parts.loc[view.parts["role"] == "system", "part"])
    assert system and not system & set(edit.hide)


def _claude_like() -> Transcript:
    """Segments that end with an assistant answer, one with parallel tool messages."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("c", log)
    b.message("system")
    b.part("tool_schema", '{"name": "Read"}', tool_name="Read")
    for i in range(3):
        b.message("user", real_user=True)
        b.part("text", f"task {i}")
        c = b.call()
        b.message("assistant")
        b.part("thinking", "thinking " * 30, call=c)
        b.part("text", "Let me read the file.", call=c)
        b.part("tool_call", f'Read({{"file_path": "a{i}.py"}})', tool_name="Read",
               tool_call_id=f"r{i}", call=c)
        b.part("tool_call", f'Read({{"file_path": "b{i}.py"}})', tool_name="Read",
               tool_call_id=f"q{i}", call=c)
        for cid in (f"r{i}", f"q{i}"):
            b.message("tool")
            b.part("tool_result", "x = 1\n" * 100, tool_name="Read", tool_call_id=cid)
        if i < 2:
            c = b.call()
            b.message("assistant")
            b.part("thinking", "done " * 10, call=c)
            b.part("text", f"Answer {i}: fixed.", call=c)
    return assemble([b], log, {"format": "test"})


def test_final_answer_is_the_last_assistant_text_and_pairs_stay_intact():
    t = _claude_like()
    view = _view(t)
    res, run = _apply(t, view, stage("monologue"))
    vis = res.view.parts
    older = vis[(vis["turn"] >= 1) & (vis["turn"] < 3)]
    assert older["kind"].tolist() == ["text", "text", "text", "text"]
    assert older["content"].tolist() == ["task 0", "Answer 0: fixed.", "task 1",
                                         "Answer 1: fixed."]
    assert "tool_schema" in set(vis["kind"])
    assert run.grammar_after == run.grammar_before == 0


def test_final_answer_takes_the_trailing_run_of_tool_messages():
    t = _claude_like()
    seg = _view(t).parts
    seg = seg[seg["turn"] == 3]
    final = final_answer(seg)
    assert seg.loc[seg["part"].isin(final), "tool_call_id"].tolist() == ["r2", "q2"]


def test_nothing_to_do():
    assert Monologue().plan(_view(_probe_session(turns=1))) is None
    empty = _view(_probe_session())
    empty = View(parts=empty.parts.iloc[:0], estimator=empty.estimator, window_tokens=1,
                 limit_tokens=1, target_tokens=1)
    assert Monologue().plan(empty) is None
    # Older segments that hold only a user message: a reason, nothing hidden.
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("u", log)
    for i in range(3):
        b.message("user", real_user=True)
        b.part("text", f"note {i}")
    edit = Monologue().plan(_view(assemble([b], log, {"format": "test"})))
    assert edit is not None and edit.empty and "no monologue" in edit.reason


@pytest.mark.parametrize("params", [{"keep_segments": -1}, {"keep_segments": "2"},
                                    {"keep_segments": True}, {"keep_last_segment": "yes"}])
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError, match="monologue"):
        Monologue(**params)


def test_registered_with_seed_defaults():
    st = stage("monologue")
    assert isinstance(st, Monologue)
    assert st.params() == {"keep_segments": 1, "keep_last_segment": True}
    assert "001" in st.source


def test_coding_session_applies_and_rewinds_exactly():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    s = str(t.frame["session"].iloc[0])
    end = call_end_pos(t, s, 120)
    view = build_view(t, s, end, ctxlab.estimator("chars:4"), BUDGET, call=120)
    res = run_stages(t, view, [stage("monologue")], end_pos=end, trigger="test")
    run = res.runs[0]
    assert run.event is not None and run.hidden > 0
    res.transcript.validate()
    assert run.tokens_after < run.tokens_before
    assert run.grammar_after <= run.grammar_before
    assert set(res.view.parts["role"]) >= {"user", "assistant"}
    back = rewind(res.transcript, run.event, session=s)
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)
