"""The recorded summarizer: a log's own summary where it compacted, a fallback elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

import ctxlab
from ctxlab import summarizers
from ctxlab.errors import ConfigError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.presets import claude_code
from ctxlab.stages.reattach import SUMMARY_PREFIX
from ctxlab.summarizers.recorded import (
    CLAUDE_CODE_PREAMBLE,
    Recorded,
    RecordedPoint,
    recorded_points,
    recorded_summarizer,
)
from ctxlab.tokens import estimator

CHARS = estimator("chars:4")
TEXT = f"{CLAUDE_CODE_PREAMBLE}\n\nSummary:\n1. Primary Request and Intent: fix the parser."


@pytest.fixture(autouse=True)
def _forget_registered(forget_registered_summarizers):
    """Summarizers a test registers are dropped after it (see conftest)."""


def _log(session: str = "s", text: str = TEXT) -> ctxlab.Transcript:
    """Four calls, a recorded compaction with a summary, then a fifth call."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder(session, log)
    b.message("user", real_user=True)
    b.part("text", "Fix the parser.")
    for k in range(4):
        b.call(input_total=100 * (k + 1), output_tokens=10)
        b.message("assistant")
        b.part("tool_call", f'Bash({{"command": "make {k}"}})', tool_name="Bash",
               tool_call_id=f"c{k}", call=k)
        b.message("user")
        b.part("tool_result", f"ok {k} " + "log line\n" * 40, tool_name="Bash",
               tool_call_id=f"c{k}")
    ev = b.event(trigger="auto", pre_tokens=320, reason="test")
    b.hide(range(b.n_parts), ev)
    b.message("user")
    b.part("summary", text, event=ev)
    b.call(input_total=60, output_tokens=5)
    b.message("assistant")
    b.part("text", "Continuing.", call=4)
    return assemble([b], log, {"format": "test"})


def test_recorded_points_place_each_summary_between_two_calls():
    t = _log()
    (p,) = recorded_points(t)
    ends = t.calls.set_index("call")["input_end_pos"]
    assert p.session == "s" and p.text == TEXT
    assert ends[3] <= p.after_pos < p.pos < ends[4]
    assert recorded_points(t.rewind_recorded()) == ()


def test_it_returns_the_recorded_text_exactly_where_the_log_compacted():
    t = _log()
    rec = Recorded(recorded_points(t), name="test-recorded-a")
    base = t.rewind_recorded().frame
    convo = base[base["kind"] != "text"]
    s = rec.summarize(convo, previous=None, budget_tokens=5, estimator=CHARS)
    # the preamble comes off (the stage adds its own prefix); over budget, still whole
    assert s.backend == "recorded" and s.text == TEXT[len(CLAUDE_CODE_PREAMBLE):].lstrip()
    assert s.output_tokens == CHARS.count([s.text])[0] > 5
    assert s.input_tokens == int(np.sum(CHARS.count_parts(convo)))
    kept = Recorded(recorded_points(t), name="test-recorded-b", preamble="")
    assert kept.summarize(convo, previous=None, budget_tokens=5, estimator=CHARS).text == TEXT


def test_elsewhere_it_falls_back():
    t = _log()
    rec = Recorded(recorded_points(t), name="test-recorded-c")
    base = t.rewind_recorded().frame
    ends = t.calls.set_index("call")["input_end_pos"]
    early = base[(base["pos"] < ends[3]) & (base["kind"] != "text")]  # a call too soon
    late = base[base["kind"] != "text"]
    late = late.assign(pos=late["pos"].where(late["pos"] < late["pos"].max(),
                                             float(ends[4]) + 1))  # past the compaction
    for parts in (early, late, base.iloc[0:0], base.assign(session=["s", "t"] * (len(base) // 2)
                                                             + ["s"] * (len(base) % 2))):
        assert rec.point_for(parts) is None
    s = rec.summarize(early, previous=None, budget_tokens=200, estimator=CHARS)
    assert s.backend == "structured" and s.output_tokens <= 200
    other = Recorded(recorded_points(_log(session="u")), name="test-recorded-d")
    assert other.point_for(base[base["kind"] != "text"]) is None  # another session's


def test_the_registered_one_is_found_again_and_names_differ_by_log():
    a = recorded_summarizer(_log())
    assert summarizers.summarizer(a.name) is a and recorded_summarizer(_log()) is a
    b = recorded_summarizer(_log(text=TEXT + " And the lexer."))
    assert b.name != a.name and b.name.startswith("recorded:")
    assert recorded_summarizer(_log(), fallback="structured").name == a.name


def test_bad_arguments():
    with pytest.raises(ConfigError, match="fall back on itself"):
        Recorded((), name="x", fallback="x")
    with pytest.raises(ConfigError, match="needs a name"):
        Recorded((), name=" ")
    assert RecordedPoint(session="s", after_pos=1.0, pos=2.0, text="t").pos == 2.0


def test_a_compaction_at_the_recorded_point_sends_the_recorded_summary():
    t = _log()
    real = int(t.calls["call"].max())
    base = t.rewind_recorded()
    r = ctxlab.compact(base, claude_code(t), window=1_000, call=real, estimator=CHARS,
                       force=True)
    summary = r.view.parts[r.view.parts["kind"] == "summary"]["content"].iloc[0]
    assert summary == f"{SUMMARY_PREFIX}\n" + TEXT[len(CLAUDE_CODE_PREAMBLE):].lstrip()
    # one call earlier the log has no summary to give: the structured one is written
    r = ctxlab.compact(base, claude_code(t), window=1_000, call=real - 1, estimator=CHARS,
                       force=True)
    summary = r.view.parts[r.view.parts["kind"] == "summary"]["content"].iloc[0]
    assert "fix the parser." not in summary and summary.startswith(SUMMARY_PREFIX)
