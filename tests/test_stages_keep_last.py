"""Tests of the `keep_last` stage (seed 004, neuron-context SlidingWindowStrategy)."""

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
from ctxlab.stages.keep_last import KeepLast
from tests.conftest import DATASETS

BUDGET = Budget(window_tokens=1_000, limit_tokens=500, target_tokens=1)

SEED_004 = [
    ("system", "You are a helpful assistant."),
    ("user", "What is Rust?"),
    ("assistant", "Rust is a systems programming language focused on safety and speed."),
    ("user", "How about memory safety?"),
    ("assistant", "Rust uses ownership and borrowing, checked at compile time."),
    ("user", "What about async?"),
    ("assistant", "Rust supports async/await via futures and executors such as tokio."),
]


def _conversation(messages: list[tuple[str, str]]) -> Transcript:
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    for role, text in messages:
        b.message(role, real_user=role == "user")
        b.part("text", text)
    return assemble([b], log, {"format": "test"})


def _view(t: Transcript, end: float | None = None) -> View:
    s = str(t.frame["session"].iloc[0])
    end = float(t.frame["pos"].max()) + 1.0 if end is None else end
    return build_view(t, s, end, ctxlab.estimator("chars:4"), BUDGET)


def _visible_messages(parts: pd.DataFrame) -> list[tuple[str, str]]:
    return [(str(f["role"].iloc[0]), str(f["content"].iloc[0]))
            for _, f in parts.groupby("msg", sort=False)]


def test_seed_004_sliding_window_of_two_message_for_message():
    t = _conversation(SEED_004)
    view = _view(t)
    end = float(t.frame["pos"].max()) + 1.0
    res = run_stages(t, view, [KeepLast(keep=2)], end_pos=end, trigger="test")
    assert _visible_messages(res.view.parts) == [SEED_004[0], SEED_004[5], SEED_004[6]]
    run = res.runs[0]
    assert run.hidden == 4 and run.tokens_after < run.tokens_before
    assert run.grammar_after == run.grammar_before == 0
    res.transcript.validate()
    back = rewind(res.transcript, run.event, session="s")
    pd.testing.assert_frame_equal(back.frame, t.frame)


def test_window_as_large_as_the_conversation_does_nothing():
    view = _view(_conversation(SEED_004))
    assert KeepLast(keep=6).plan(view) is None
    assert KeepLast(keep=10).plan(view) is None
    assert KeepLast(keep=5).plan(view).details["messages_dropped"] == 1
    empty = View(parts=view.parts.iloc[:0], estimator=view.estimator, window_tokens=1,
                 limit_tokens=1, target_tokens=1)
    assert KeepLast().plan(empty) is None


def test_keep_zero_keeps_only_system_parts():
    view = _view(_conversation(SEED_004))
    edit = KeepLast(keep=0).plan(view)
    assert sorted(edit.hide) == list(range(1, 7))


def _agent_session() -> Transcript:
    """System + tool schema, three finished turns with a tool pair each, a current turn."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("a", log)
    b.message("system")
    b.part("text", "You are an agent.")
    b.part("tool_schema", '{"name": "Read"}', tool_name="Read")
    for i in range(4):
        b.message("user", real_user=True)
        b.part("text", f"task {i}")
        b.message("assistant")
        b.part("tool_call", f'Read({{"file_path": "f{i}.py"}})', tool_name="Read",
               tool_call_id=f"r{i}")
        b.message("user")
        b.part("tool_result", f"contents of f{i}.py " * 20, tool_name="Read",
               tool_call_id=f"r{i}")
        b.message("assistant")
        b.part("text", f"answer {i}")
    return assemble([b], log, {"format": "test"})


def test_scope_history_windows_only_the_history_layer():
    t = _agent_session()
    view = _view(t)
    assert set(view.parts["layer"]) == {"system", "tools", "history", "prompt", "current"}
    edit = KeepLast(keep=4, scope="history").plan(view)
    hidden = view.parts[view.parts["part"].isin(edit.hide)]
    assert set(hidden["layer"]) == {"history"}
    assert sorted(set(hidden["turn"])) == [1, 2]
    kept_history = view.parts[(view.parts["layer"] == "history")
                              & ~view.parts["part"].isin(edit.hide)]
    assert kept_history["msg"].nunique() == 4 and set(kept_history["turn"]) == {3}
    assert edit.details["orphaned_results"] == 0


def test_system_and_tool_schema_always_kept():
    view = _view(_agent_session())
    edit = KeepLast(keep=1).plan(view)
    kept = view.parts[~view.parts["part"].isin(edit.hide)]
    assert kept["kind"].tolist() == ["text", "tool_schema", "text"]
    assert kept["role"].tolist() == ["system", "system", "assistant"]


def test_window_edge_inside_a_tool_pair_orphans_the_result():
    t = _agent_session()
    end = float(t.frame["pos"].max()) + 1.0
    res = run_stages(t, _view(t), [KeepLast(keep=2)], end_pos=end, trigger="test")
    # neuron-context cuts without looking at pairs: the kept window opens with a tool
    # result whose call was dropped (faithful; the pipeline's repair step fixes it).
    run = res.runs[0]
    assert run.grammar_after > run.grammar_before
    assert '"orphaned_results": 1' in res.transcript.events["meta"].iloc[-1]


@pytest.mark.parametrize("params", [{"keep": -1}, {"keep": 2.5}, {"keep": True},
                                    {"scope": "current"}])
def test_bad_parameters_raise_config_error(params):
    with pytest.raises(ConfigError, match="keep_last"):
        KeepLast(**params)


def test_registered_with_defaults():
    st = stage("keep_last")
    assert isinstance(st, KeepLast)
    assert st.params() == {"keep": 10, "scope": "all"}
    assert stage("keep_last", keep=30, scope="history").scope == "history"


@pytest.mark.parametrize("params", [{"keep": 30, "scope": "history"}, {"keep": 10}])
def test_coding_session_applies_and_rewinds_exactly(params):
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    s = str(t.frame["session"].iloc[0])
    end = call_end_pos(t, s, 120)
    budget = Budget(window_tokens=200_000, limit_tokens=160_000, target_tokens=1)
    view = build_view(t, s, end, ctxlab.estimator("chars:4"), budget, call=120)
    res = run_stages(t, view, [stage("keep_last", **params)], end_pos=end, trigger="test")
    run = res.runs[0]
    assert run.event is not None
    res.transcript.validate()
    assert run.tokens_after < run.tokens_before
    kept = res.view.parts
    assert kept.loc[kept["layer"] != "system", "msg"].nunique() <= params["keep"] + 1
    if params.get("scope") == "history":
        assert run.grammar_after <= run.grammar_before
    # scope="all" may cut a tool pair in two (seed behaviour): not asserted.
    back = rewind(res.transcript, run.event, session=s)
    pd.testing.assert_frame_equal(back.frame, t.frame)
    pd.testing.assert_frame_equal(back.events, t.events)
