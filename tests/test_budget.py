"""Seed 000's budget check: breakdown by layer, available input, levels, threshold."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab.budget import DEFAULT_THRESHOLD, INFO_RATIO, BudgetCheck, check_budget
from ctxlab.engine import Budget, build_view, call_end_pos
from ctxlab.errors import ConfigError
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.schema import Transcript
from ctxlab.stages.base import View

EST = "chars:4"
BUDGET = Budget(window_tokens=200_000, limit_tokens=136_000, target_tokens=100_000,
                overhead_tokens=0)


def layered_transcript() -> Transcript:
    """One session touching every layer: system, tools, history with an attachment,
    a current prompt with an attachment, agent work, then call 1's output."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("system")
    b.part("text", "S" * 400)  # L1
    b.part("tool_schema", '{"name": "Read", "parameters": {}}' + " " * 165)  # tools
    b.message("user", real_user=True)
    b.part("text", "first question " * 10)  # L4
    b.part("attachment", "A" * 800)  # L2 (carried)
    b.call(call_id="c0")
    b.message("assistant")
    b.part("text", "first answer " * 20, call=0)  # L4
    b.message("user", real_user=True)
    b.part("text", "P" * 120)  # L5
    b.part("attachment", "B" * 1_000)  # L3 attachment
    b.message("assistant")
    b.part("tool_call", 'Read({"file_path": "x.py"})', tool_name="Read", tool_call_id="t1",
           file_path="x.py", call=1)
    b.message("user")
    b.part("tool_result", "R" * 2_000, tool_name="Read", tool_call_id="t1", file_path="x.py")
    b.call(call_id="c1")
    b.message("assistant")
    b.part("text", "done", call=2)
    for i in range(5):
        log.used("line", line=i + 1, parts=2)
    return assemble([b], log, {"format": "test"})


def view_at(t: Transcript, call: int, budget: Budget = BUDGET) -> View:
    return build_view(t, "s", call_end_pos(t, "s", call), ctxlab.estimator(EST), budget, call)


def overhead_view(tokens: int) -> View:
    """An empty request whose whole cost is ``tokens`` of overhead (exact ratios)."""
    return View(parts=pd.DataFrame(), estimator=ctxlab.estimator(EST), window_tokens=200_000,
                limit_tokens=136_000, target_tokens=100_000, overhead_tokens=tokens)


# --- breakdown ------------------------------------------------------------------------------

def test_breakdown_maps_layers_to_seed_categories() -> None:
    view = view_at(layered_transcript(), 1)
    p = view.parts
    assert set(p["layer"]) == {"system", "tools", "carried", "history", "prompt", "current"}

    def tokens(mask: pd.Series) -> int:
        return int(p.loc[mask, "tokens"].sum())

    att = p["kind"] == "attachment"
    framing = view.estimator.framing(view.messages)
    b = check_budget(view).breakdown
    assert b.system_prompt == tokens(p["layer"] == "system") == 100
    assert b.tool_definitions == tokens(p["layer"] == "tools") == 50
    assert b.current_prompt == tokens(p["layer"] == "prompt") == 30
    assert b.file_attachments == tokens(att) == 200 + 250
    assert b.conversation_history == (tokens(p["layer"].isin(["history", "current"]) & ~att)
                                      + framing)
    assert b.total == view.total_tokens
    assert list(b.as_dict()) == ["system_prompt", "conversation_history", "current_prompt",
                                 "tool_definitions", "file_attachments"]


def test_overhead_counts_as_system_prompt() -> None:
    t = layered_transcript()
    plain = check_budget(view_at(t, 1))
    more = check_budget(view_at(t, 1, dataclasses.replace(BUDGET, overhead_tokens=5_000)))
    assert more.breakdown.system_prompt == plain.breakdown.system_prompt + 5_000
    assert more.estimated_input_tokens == plain.estimated_input_tokens + 5_000
    assert dataclasses.replace(more.breakdown, system_prompt=plain.breakdown.system_prompt) \
        == plain.breakdown


def test_first_call_and_empty_view() -> None:
    t = layered_transcript()
    first = check_budget(view_at(t, 0))
    assert first.breakdown.current_prompt > 0 and first.breakdown.file_attachments == 200
    assert first.estimated_input_tokens == view_at(t, 0).total_tokens
    empty = build_view(t, "s", -1.0, ctxlab.estimator(EST), BUDGET)
    assert empty.parts.empty
    c = check_budget(empty)
    assert c.estimated_input_tokens == 0 and c.usage_ratio == 0.0 and c.level == "ok"
    assert c.within_budget and not c.should_compact and c.message == ""


def test_check_does_not_change_the_view() -> None:
    view = view_at(layered_transcript(), 1)
    before = view.parts.copy()
    check_budget(view, provider="openai", max_tokens=4_096)
    pd.testing.assert_frame_equal(view.parts, before)


def test_every_call_of_the_coding_session_adds_up() -> None:
    t = ctxlab.load("datasets/coding_session.jsonl").rewind_recorded()
    est = ctxlab.estimator("neurolink:anthropic")
    s = str(t.calls["session"].iloc[0])
    for call in t.calls["call"]:
        view = build_view(t, s, call_end_pos(t, s, int(call)), est, BUDGET, int(call))
        c = check_budget(view, provider="anthropic")
        assert c.breakdown.total == c.estimated_input_tokens == view.total_tokens
        assert c.usage_ratio == pytest.approx(c.estimated_input_tokens / 136_000)
        assert c.should_compact == (c.usage_ratio >= 0.8)


# --- available input (seed 000: window - output reserve) -------------------------------------

@pytest.mark.parametrize(("kwargs", "window", "available"), [
    ({"provider": "anthropic"}, 200_000, 136_000),  # reserve min(64,000, 70,000)
    ({"provider": "openai", "model": "gpt-4o"}, 128_000, 83_200),  # reserve 44,800
    ({"provider": "openai", "model": "gpt-4"}, 8_192, 5_324),
    ({"provider": "google-ai"}, 1_048_576, 984_576),  # reserve capped at 64,000
    ({"provider": "anthropic", "max_tokens": 8_192}, 200_000, 191_808),
    ({"window_tokens": 50_000}, 50_000, 32_500),
    ({"window_tokens": 50_000, "provider": "anthropic"}, 50_000, 32_500),  # argument wins
    ({"model": "claude-sonnet-4-20250514"}, 200_000, 136_000),
    ({"provider": "acme"}, 128_000, 83_200),  # unknown provider: seed 000's default
    ({}, 200_000, 136_000),  # the view's window
])
def test_available_input_is_window_minus_reserve(kwargs: dict, window: int,
                                                 available: int) -> None:
    c = check_budget(overhead_view(1_000), **kwargs)
    assert (c.window_tokens, c.available_input_tokens) == (window, available)
    assert c.output_reserve_tokens == window - available
    assert c.window_source


def test_max_tokens_leaving_no_room_gives_ratio_one() -> None:
    c = check_budget(overhead_view(10), window_tokens=8_000, max_tokens=8_000)
    assert c.available_input_tokens == 0 and c.usage_ratio == 1.0  # seed 000's fallback
    assert c.should_compact and not c.within_budget and c.level == "warning"


# --- levels and threshold -------------------------------------------------------------------

@pytest.mark.parametrize(("used", "level", "compact"), [
    (0, "ok", False),
    (81_600, "ok", False),  # exactly 60%: the CLI shows information only above it
    (81_601, "info", False),
    (108_799, "info", False),
    (108_800, "warning", True),  # exactly 80%: threshold reached
    (136_000, "warning", True),
    (136_001, "warning", True),
])
def test_levels_follow_the_cli(used: int, level: str, compact: bool) -> None:
    c = check_budget(overhead_view(used), provider="anthropic")
    assert c.available_input_tokens == 136_000
    assert (c.level, c.should_compact) == (level, compact)
    assert c.within_budget == (used <= 136_000)
    assert DEFAULT_THRESHOLD == 0.8 and INFO_RATIO == 0.6


def test_custom_threshold_moves_the_warning() -> None:
    c = check_budget(overhead_view(96_000), provider="anthropic", threshold=0.7)
    assert c.usage_ratio == pytest.approx(0.70588, abs=1e-4)
    assert c.level == "warning" and c.should_compact and c.threshold == 0.7
    assert check_budget(overhead_view(96_000), provider="anthropic").level == "info"


def test_messages() -> None:
    warn = check_budget(overhead_view(166_000), window_tokens=264_000, max_tokens=64_000)
    assert warn.message == ("Context usage: 83% of available input (166,000 / 200,000 tokens); "
                            "compaction due.")
    info = check_budget(overhead_view(130_000), window_tokens=264_000, max_tokens=64_000)
    assert info.message == "Context usage: 65% of available input (130,000 / 200,000 tokens)"
    # rounded down, so the number never shows a level the ratio has not reached
    almost = check_budget(overhead_view(159_999), window_tokens=264_000, max_tokens=64_000)
    assert almost.level == "info" and "79%" in almost.message


@pytest.mark.parametrize("threshold", [0, -0.1, 1.5, True, "0.8", np.nan])
def test_bad_threshold_is_rejected(threshold: object) -> None:
    with pytest.raises(ConfigError, match="threshold"):
        check_budget(overhead_view(1), threshold=threshold)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"window_tokens": 0}, {"window_tokens": 1.5},
                                    {"max_tokens": -1}])
def test_bad_window_or_max_tokens_is_rejected(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        check_budget(overhead_view(1), **kwargs)


def test_result_is_frozen() -> None:
    c = check_budget(overhead_view(1))
    assert isinstance(c, BudgetCheck)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.level = "warning"  # type: ignore[misc]


def test_a_reserve_that_takes_the_whole_window_says_so() -> None:
    """max_tokens as large as the window leaves no input: not "100% of available input
    (3,000 / 0 tokens)" but what to change."""
    c = check_budget(overhead_view(3_000), window_tokens=8_192, max_tokens=8_192)
    assert c.available_input_tokens == 0 and not c.within_budget and c.should_compact
    assert c.message == ("No room for input: the output reserve takes the whole window "
                         "(3,000 input tokens); compaction cannot help, lower max_tokens.")
