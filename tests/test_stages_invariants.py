"""Invariants every registered stage keeps, on generated and real requests.

Schema stays valid, tokens never grow, the output is deterministic, no orphan tool pair
remains after repair, and rewinding restores the input frame exactly.
"""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages
from ctxlab.stages import names, stage
from ctxlab.stages.grammar import grammar_counts
from tests.conftest import DATASETS

# parameters that make each stage act on the small test requests (defaults are sized for
# 200k-token windows); stages not listed run with their defaults
ACTIVE = {
    "prune": {"protect_tokens": 2_000, "minimum_savings": 0},
    "dedup": {"threshold": 0.0},
    "keep_last": {"keep": 6},
    "trim_history": {"budget_tokens": 4_000},
    "carry_forward": {"min_chars": 200},
    "truncate_tool_output": {"max_bytes": 1_500, "max_lines": 30},
    "summarize": {"keep_recent": 6},
}
STAGES = names()


def _case(name: str, call: int | None):
    t = ctxlab.load(DATASETS / name).rewind_recorded()
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max()) if call is None else call
    end = call_end_pos(t, s, k)
    budget = Budget(window_tokens=200_000, limit_tokens=20_000, target_tokens=10_000)
    return t, build_view(t, s, end, ctxlab.estimator("chars:4"), budget, k), end


CASES = {"coding-last": ("coding_session.jsonl", None), "coding-60": ("coding_session.jsonl", 60),
         "openai": ("openai_sessions.jsonl", None)}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    return _case(*CASES[request.param])


def _apply(t, view, end, names_):
    return run_stages(t, view, [stage(n, **ACTIVE.get(n, {})) for n in names_], end_pos=end,
                      trigger="test", until_target=False)


def test_the_registry_has_every_seed_stage():
    assert {"prune", "dedup", "summarize", "truncate", "keep_last", "clear_tool_results",
            "monologue", "trim_history", "carry_forward", "truncate_tool_output",
            "file_budget", "repair"} <= set(STAGES)


@pytest.mark.parametrize("name", STAGES)
def test_stage_invariants(name, case):
    t, view, end = case
    r = _apply(t, view, end, [name])
    assert r.transcript.validate(strict=False) == []
    if name != "repair":  # repair adds placeholders for orphans: it may grow
        assert r.view.total_tokens <= view.total_tokens
    again = _apply(t, view, end, [name])
    pd.testing.assert_frame_equal(again.transcript.frame, r.transcript.frame)
    pd.testing.assert_frame_equal(again.transcript.events, r.transcript.events)
    repaired = _apply(t, view, end, [name, "repair"])
    g = grammar_counts(repaired.view.parts)
    assert g["orphan_result"] == 0 and g["unanswered_call"] == 0
    events = r.transcript.events[r.transcript.events["origin"] != "recorded"]
    if len(events):
        back = r.transcript.rewind(int(events["event"].min()), session=view.session)
        pd.testing.assert_frame_equal(back.frame, t.frame)
        pd.testing.assert_frame_equal(back.events, t.events)


@pytest.mark.parametrize("name", STAGES)
def test_stage_never_touches_a_request_it_does_not_see(name):
    """Parts after the compacted call's input are never hidden."""
    t, view, end = _case("coding_session.jsonl", 60)
    r = _apply(t, view, end, [name])
    later = r.transcript.frame["pos"] >= end
    assert r.transcript.frame.loc[later & r.transcript.frame["event"].isna(),
                                  "hidden_by"].isna().all()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STAGES), min_size=1, max_size=3), st.data())
def test_rewinding_any_event_of_a_sequence_restores_the_state_before_it(seq, data):
    t, view, end = _case("coding_session_b.jsonl", None)
    states, cur = [], t
    budget = Budget(window_tokens=view.window_tokens, limit_tokens=view.limit_tokens,
                    target_tokens=view.target_tokens)
    for n in seq:
        v = build_view(cur, view.session, end, view.estimator, budget, view.call)
        r = _apply(cur, v, end, [n])
        if r.stages_used:
            states.append((cur, int(r.runs[0].event)))
        cur = r.transcript
    if not states:
        return
    before, event = states[data.draw(st.integers(0, len(states) - 1))]
    back = cur.rewind(event, session=view.session)
    pd.testing.assert_frame_equal(back.frame, before.frame)
    pd.testing.assert_frame_equal(back.events, before.events)
