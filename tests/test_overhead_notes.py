"""A fitted overhead floored at 0 is said, not silent (`ctxlab.fidelity.overhead_notes`).

The bundled demo (`make demo`: neurolink on `datasets/coding_session.jsonl`) counts with
neurolink's heuristic, which counts more than the provider on long requests: the median
gap is negative, the fit is 0, and the ~14k tokens of system prompt and tool schemas the
first call shows were missing from every replayed request without a word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxlab
from ctxlab.fidelity import overhead_notes
from ctxlab.tokens.accuracy import floored_overheads, reported_usage_df
from ctxlab.viz.report import report_html

DEMO = Path(__file__).resolve().parents[1] / "datasets" / "coding_session.jsonl"


def test_a_floored_overhead_is_named_with_what_the_first_call_shows():
    t = ctxlab.load(DEMO)
    u = reported_usage_df(t, "neurolink:anthropic")
    first = u[u["input_total"].notna()].iloc[0]
    assert int(first["overhead_tokens"]) == 0          # the fit, floored
    (session, (reported, est)), = floored_overheads(t, "neurolink:anthropic").items()
    assert (reported, est) == (int(first["input_total"]), int(first["est_content_tokens"]))
    notes = overhead_notes(ctxlab.replay(t, "neurolink"))
    assert len(notes) == 1 and session in notes[0] and f"{reported - est:,}" in notes[0]
    # an exact tokenizer fits a real overhead: nothing to say; nor when it was given
    assert floored_overheads(t, "tiktoken:o200k_base") == {}
    assert overhead_notes(ctxlab.replay(t, "claude-code")) == []
    assert overhead_notes(ctxlab.replay(t, "neurolink", overhead_tokens=14_000)) == []


def test_the_report_says_it():
    t = ctxlab.load(DEMO)
    page = report_html(ctxlab.replay(t, "neurolink"), transcript=t)
    assert "overhead left out" in page and "14,428 tokens of system prompt" in page
    assert "overhead left out" not in report_html(ctxlab.replay(t, "claude-code"), transcript=t)


def test_the_cli_replay_warns_of_it(capsys):
    from ctxlab.cli import main

    assert main(["replay", str(DEMO)]) == 0
    err = capsys.readouterr().err
    assert "ctxlab: warning: neurolink:anthropic counts more than the provider" in err
    assert main(["replay", str(DEMO), "--preset", "claude-code"]) == 0
    assert "counts more than the provider" not in capsys.readouterr().err


def test_an_overhead_fitted_above_the_whole_first_request_is_said(capsys):
    """The other way: o200k counts fewer tokens than Claude's tokenizer on long requests,
    so the median fit took in part of the content's undercount. On spotter 4d5611e5 the
    report said "unrecorded overhead 40,091 tokens" (system prompt and tool schemas) for
    a session whose whole first request was billed 26,450 tokens; on the demo 21,074
    against 14,585, with no word."""
    from ctxlab.cli import main
    from ctxlab.fidelity import inflated_overhead_notes

    t = ctxlab.load(DEMO)
    u = reported_usage_df(t, "tiktoken:o200k_base")
    first = u[u["input_total"].notna()].iloc[0]
    reported, overhead = int(first["input_total"]), int(first["overhead_tokens"])
    assert overhead > reported                  # more than the whole first request
    estimated = overhead + int(first["est_content_tokens"])
    notes = inflated_overhead_notes(ctxlab.replay(t, "claude-code"))
    assert len(notes) == 1 and notes[0].startswith("tiktoken:o200k_base counts fewer tokens")
    assert (f"({overhead:,} tokens" in notes[0] and f"reported {reported:,} input tokens" in
            notes[0] and f"against {estimated:,} estimated ({estimated - reported:,} over)"
            in notes[0])
    # floored (the other note), or given: nothing to say here
    assert inflated_overhead_notes(ctxlab.replay(t, "neurolink")) == []
    assert inflated_overhead_notes(ctxlab.replay(t, "claude-code", overhead_tokens=14_000)) == []
    page = report_html(ctxlab.replay(t, "claude-code"), transcript=t)
    assert "overhead overstated" in page and f"against {estimated:,} estimated" in page
    assert main(["replay", str(DEMO), "--preset", "claude-code"]) == 0
    assert "ctxlab: warning: tiktoken:o200k_base counts fewer tokens" in capsys.readouterr().err


def test_an_estimate_over_with_no_overhead_is_not_called_an_inflated_overhead():
    """ai-agent's ``max:`` estimator scales tool schemas by 2.09: on the inspect_ai log its
    first call is estimated at 3,120 tokens against 1,124 billed with an overhead fitted at
    0, and the replay warned that it "counts fewer tokens than the provider" so that "the
    unrecorded overhead fitted for it (0 tokens ...) is more than the system prompt"."""
    from conftest import realdata_path

    from ctxlab.fidelity import inflated_overhead_notes
    from ctxlab.tokens.accuracy import inflated_overheads

    t = ctxlab.load(realdata_path("inspect_ai/2025-05-12T20-27-36-04-00_browser.json"))
    spec = "max:tiktoken:cl100k_base,chars:4"
    first = reported_usage_df(t, spec).iloc[0]
    assert (int(first["input_total"]), int(first["est_content_tokens"]),
            int(first["overhead_tokens"])) == (1124, 3120, 0)
    assert inflated_overheads(t, spec) == {}
    assert inflated_overhead_notes(ctxlab.replay(t, "ai-agent")) == []


@pytest.mark.realdata
def test_an_inflated_overhead_of_several_sessions_is_said_to_be_one_sessions():
    """aider's history has 471 replayed sessions, each with its own fitted overhead
    (0–35,295 tokens, as the report's settings say); the note gave session 12's 12,524
    tokens as "in every replayed request's system layer"."""
    from conftest import realdata_path

    from ctxlab.fidelity import inflated_overhead_notes

    t = ctxlab.load(realdata_path("aider/chat-history.md"))
    r = ctxlab.replay(t, "observation-masking")
    assert r.calls["session"].nunique() > 1
    (note,) = inflated_overhead_notes(r)
    assert "in every replayed request's system layer" not in note
    assert "tokens, in the system layer of every replayed request of session chat-history:" \
        in note and "each session has its own fit" in note
