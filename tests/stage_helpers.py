"""Shared helpers for stage tests: the last call's view, and a checked stage application."""

from __future__ import annotations

import pandas as pd

import ctxlab
from ctxlab.engine import Budget, StagesResult, build_view, call_end_pos, run_stages
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.stages.base import Stage, View
from ctxlab.stages.grammar import grammar_counts


def last_view(t: ctxlab.Transcript, budget: Budget, estimator: str = "chars:4") -> View:
    """The view of the last call of the first session."""
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max())
    return build_view(t, s, call_end_pos(t, s, k), ctxlab.estimator(estimator), budget, k)


def apply_checked(t: ctxlab.Transcript, view: View, st: Stage) -> StagesResult:
    """Run one stage; assert the result validates, does not grow, keeps the grammar, rewinds."""
    end = call_end_pos(t, view.session, int(view.call))
    r = run_stages(t, view, [st], end_pos=end, trigger="test", until_target=False)
    assert r.transcript.validate(strict=False) == []
    assert r.view.total_tokens <= view.total_tokens
    assert grammar_counts(r.view.parts) == grammar_counts(view.parts)
    if r.stages_used:
        back = r.transcript.rewind(int(r.runs[0].event), session=view.session)
        pd.testing.assert_frame_equal(back.frame, t.frame)
        pd.testing.assert_frame_equal(back.events, t.events)
    return r


def build_transcript(messages: list, *, system: str | None = None) -> ctxlab.Transcript:
    """A one-session transcript with one call at its end.

    ``messages``: ``(role, [(kind, content, {extra part fields})...])``; a user message
    that opens with text starts a turn.
    """
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    if system is not None:
        b.message("system")
        b.part("text", system)
    for role, parts in messages:
        b.message(role, real_user=role == "user" and parts[0][0] == "text")
        for kind, content, *extra in parts:
            b.part(kind, content, **(extra[0] if extra else {}))
    b.call(call_id="c")
    return assemble([b], log, {"format": "test"})
