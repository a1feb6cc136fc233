"""Seed 002's context guard: counters, limits, ok/skip/final, schema case, tool budget."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from test_budget import BUDGET, layered_transcript, view_at

import ctxlab
from ctxlab.engine import build_view, call_end_pos
from ctxlab.errors import ConfigError
from ctxlab.guard import (
    AI_AGENT_REGISTRY,
    FINAL_TOOLS,
    SCHEMA_SCALE,
    GuardCounters,
    Target,
    ToolBudget,
    evaluate,
    guard_counters_from_view,
)
from ctxlab.stages.base import View
from ctxlab.tokens.windows import DEFAULT_REGISTRY

SEED_TARGET = Target(provider="openai", context_window=128_000, buffer_tokens=8_192,
                     max_output_tokens=16_384)


# --- limits ---------------------------------------------------------------------------------

def test_seed_worked_example_limit() -> None:
    assert SEED_TARGET.limit == 103_424
    assert SEED_TARGET.window_tokens == 128_000 and SEED_TARGET.name == "openai"


def test_defaults_buffer_and_quarter_window_output() -> None:
    t = Target(provider="x", model="m", context_window=128_000)
    assert t.buffer_tokens == 8_192 and t.max_output_tokens is None
    assert t.limit == 128_000 - 8_192 - 32_000 and t.name == "x/m"


@pytest.mark.parametrize(("kwargs", "window"), [
    ({"provider": "openai", "model": "gpt-4o"}, 128_000),
    ({"provider": "anthropic", "model": "claude-sonnet-4-20250514"}, 200_000),
    ({"provider": "acme"}, 131_072),  # seed 002's fallback
    ({"provider": "acme", "registry": DEFAULT_REGISTRY}, 128_000),  # seed 000's fallback
    ({"provider": "openai", "model": "gpt-4o", "context_window": 64_000}, 64_000),  # override
])
def test_window_resolution(kwargs: dict, window: int) -> None:
    t = Target(**kwargs)
    assert t.window_tokens == window
    assert t.limit == window - 8_192 - window // 4
    assert AI_AGENT_REGISTRY.default_window == 131_072


@pytest.mark.parametrize("kwargs", [
    {"provider": ""}, {"provider": "x", "context_window": 0},
    {"provider": "x", "buffer_tokens": -1}, {"provider": "x", "max_output_tokens": -5},
    {"provider": "x", "context_window": 1.5e5},
])
def test_bad_target_is_rejected(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        Target(**kwargs)


def test_a_target_without_room_is_skipped_not_refused() -> None:
    """gpt-4's 8,192 tokens cannot hold seed 002's 8,192 buffer and a 2,048 reply: no
    projection fits it, so the next target is tried (seed 002: skip), or the turn is
    forced final when it is the only one."""
    small = Target(provider="openai", model="gpt-4")
    assert small.limit == 8_192 - 8_192 - 2_048
    d = evaluate(GuardCounters(current=5_000), [small, Target(provider="anthropic")])
    assert [c.status for c in d.targets] == ["skip", "ok"] and d.selected == 1
    alone = evaluate(GuardCounters(current=5_000), [small])
    assert alone.status == "final"
    assert ToolBudget.open(GuardCounters(current=5_000), small).limit_tokens == 0


# --- counters -------------------------------------------------------------------------------

def test_counters_lifecycle_returns_copies() -> None:
    c0 = GuardCounters(current=10_000)
    c1 = c0.begin_turn(2_000)
    c2 = c1.add_new(500).add_new(300)
    assert (c0.pending, c1.pending, c2.new) == (0, 2_000, 800)
    assert c2.projected == 12_800
    c3 = c2.commit()
    assert (c3.current, c3.pending, c3.new, c3.projected) == (12_800, 0, 0, 12_800)
    c4 = c3.begin_turn(100).add_new(7)
    assert c4.enforce() == GuardCounters(current=12_900)  # pending kept, new reset
    assert c2.begin_turn(50).new == 0  # a new turn starts with nothing new


def test_schema_scale_and_projection() -> None:
    assert SCHEMA_SCALE == 2.09
    c = GuardCounters(current=45_000, pending=2_000).set_schema(1_000)
    assert c.schema == 2_090
    assert GuardCounters().set_schema(3).schema == 7  # ceil(6.27)
    assert GuardCounters().set_schema(100, scale=1.0).schema == 100
    # seed 002's debug example: 45,000 + 2,000 + 0 (+ 3,000 schema) = 50,000
    d = GuardCounters(current=45_000, pending=2_000, schema=3_000)
    assert (d.projected, d.projected_with_schema) == (47_000, 50_000)
    assert d.with_extra(1_000).projected == 48_000


@pytest.mark.parametrize("call", [
    lambda: GuardCounters(current=-1), lambda: GuardCounters().add_new(-5),
    lambda: GuardCounters().begin_turn(1.5), lambda: GuardCounters().set_schema(10, scale=0),
    lambda: GuardCounters().with_extra(True), lambda: GuardCounters().set_schema(-1),
])
def test_bad_counts_are_rejected(call: object) -> None:
    with pytest.raises(ConfigError):
        call()  # type: ignore[operator]


# --- evaluation -----------------------------------------------------------------------------

@pytest.mark.parametrize(("projected", "status"), [
    (0, "ok"), (103_423, "ok"), (103_424, "ok"), (103_425, "final")])
def test_single_target_boundary(projected: int, status: str) -> None:
    d = evaluate(GuardCounters(current=projected), [SEED_TARGET])
    assert d.status == status
    assert d.forced_final == (status == "final")
    assert d.allowed_tools == (FINAL_TOOLS if status == "final" else None)
    assert d.reason == ("context" if status == "final" else None)
    assert d.selected == (0 if status == "ok" else None)
    assert d.targets[0].limit == 103_424 and d.targets[0].projected == projected


def test_skip_to_a_later_provider_then_final() -> None:
    small = Target(provider="small", context_window=32_000, max_output_tokens=4_000)  # 19,808
    mid = Target(provider="mid", context_window=64_000, max_output_tokens=8_000)  # 47,808
    big = SEED_TARGET  # 103,424
    d = evaluate(GuardCounters(current=40_000), [small, mid, big])
    assert (d.status, d.selected) == ("skip", 1)
    assert [c.status for c in d.targets] == ["skip", "ok", "ok"]
    assert d.allowed_tools is None and not d.forced_final
    d2 = evaluate(GuardCounters(current=40_000).add_new(60_000), [small, mid, big])
    assert (d2.status, d2.selected) == ("skip", 2)
    assert [c.status for c in d2.targets] == ["skip", "skip", "ok"]
    d3 = evaluate(GuardCounters(current=200_000), [small, mid, big])
    assert (d3.status, d3.selected, d3.allowed_tools) == ("final", None, ("final_report",))
    assert [c.status for c in d3.targets] == ["final"] * 3
    d4 = evaluate(GuardCounters(current=10_000), [big, small])
    assert d4.status == "ok" and [c.fits for c in d4.targets] == [True, True]


def test_schema_only_overflow_goes_ahead() -> None:
    c = GuardCounters(current=100_000).set_schema(2_000)  # 100,000 + 4,180 > 103,424
    d = evaluate(c, [SEED_TARGET])
    assert d.status == "ok" and d.targets[0].schema_only
    assert not evaluate(GuardCounters(current=100_000), [SEED_TARGET]).targets[0].schema_only
    # over without the schema: no special case
    over = evaluate(c.add_new(5_000), [SEED_TARGET])
    assert over.status == "final" and not over.targets[0].schema_only


def test_first_turn_schema_option_fixes_the_underestimate() -> None:
    first = GuardCounters().begin_turn(100_000).set_schema(2_000)
    assert evaluate(first, [SEED_TARGET]).status == "ok"  # seed: schema not counted
    fixed = evaluate(first, [SEED_TARGET], first_turn_schema=True)
    assert fixed.status == "final" and fixed.targets[0].projected == 104_180
    later = first.commit()  # schema now inside current (seed's note): option changes nothing
    assert evaluate(later, [SEED_TARGET], first_turn_schema=True).status == "ok"


@pytest.mark.parametrize("targets", [[], ["openai"], [SEED_TARGET, 3]])
def test_evaluate_needs_targets(targets: list) -> None:
    with pytest.raises(ConfigError, match="Target"):
        evaluate(GuardCounters(), targets)


# --- tool budget ----------------------------------------------------------------------------

def test_tool_budget_sets_exceeded_once_and_for_all() -> None:
    b = ToolBudget.open(GuardCounters(current=100_000), SEED_TARGET)
    assert (b.limit_tokens, b.used_tokens, b.remaining_tokens) == (103_424, 100_000, 3_424)
    assert b.preview(3_424) and not b.preview(3_425)
    b = b.reserve(3_000)
    assert (b.reserved_tokens, b.exceeded, b.can_execute()) == (3_000, False, True)
    b = b.reserve(424)  # exactly up to the limit fits
    assert (b.remaining_tokens, b.can_execute()) == (0, True)
    refused = b.reserve(1)
    assert refused.exceeded and not refused.can_execute() and refused.reserved_tokens == 3_424
    assert not refused.preview(0)
    after = refused.reserve(0)
    assert after.exceeded and after.reserved_tokens == 3_424
    assert b.can_execute()  # the earlier budget is unchanged


def test_tool_budget_already_over() -> None:
    b = ToolBudget(limit_tokens=1_000, used_tokens=1_500)
    assert b.remaining_tokens == -500 and not b.preview(0)
    assert b.reserve(0).exceeded
    with pytest.raises(ConfigError):
        ToolBudget(limit_tokens=-1)
    with pytest.raises(ConfigError):
        b.preview(-3)


# --- counters from a replayed view ----------------------------------------------------------

def test_counters_from_view_split_the_current_turn() -> None:
    view = view_at(layered_transcript(), 1)
    p = view.parts
    c = guard_counters_from_view(view)
    assert c.pending == int(p.loc[p["layer"] == "prompt", "tokens"].sum()) == 30
    assert c.new == int(p.loc[p["layer"] == "current", "tokens"].sum())
    assert c.new > 0 and c.schema == 0 and c.extra == 0
    assert c.projected == view.total_tokens
    assert c.current == view.total_tokens - c.pending - c.new
    s = guard_counters_from_view(view, schema_tokens=100)
    assert s.schema == 209 and s.projected == c.projected


def test_counters_from_view_with_overhead_and_empty_view() -> None:
    t = layered_transcript()
    budget = dataclasses.replace(BUDGET, overhead_tokens=3_000)
    view = view_at(t, 1, budget)
    assert guard_counters_from_view(view).current == guard_counters_from_view(
        view_at(t, 1)).current + 3_000
    empty = build_view(t, "s", -1.0, ctxlab.estimator("chars:4"), budget)
    assert guard_counters_from_view(empty) == GuardCounters(current=3_000)
    bare = View(parts=pd.DataFrame(), estimator=ctxlab.estimator("chars:4"),
                window_tokens=1_000, limit_tokens=800, target_tokens=600)
    assert guard_counters_from_view(bare) == GuardCounters()


def test_guard_over_a_real_session() -> None:
    """Replaying the uncompacted coding session against a 128k window: the guard lets
    the first calls through and, once the projection passes 103,424, forces the end."""
    t = ctxlab.load("datasets/coding_session.jsonl").rewind_recorded()
    est = ctxlab.estimator("chars:4")
    s = str(t.calls["session"].iloc[0])
    statuses, projected = [], []
    for call in t.calls["call"]:
        view = build_view(t, s, call_end_pos(t, s, int(call)), est, BUDGET, int(call))
        c = guard_counters_from_view(view)
        d = evaluate(c, [SEED_TARGET])
        assert (d.status == "ok") == (c.projected <= 103_424)
        statuses.append(d.status)
        projected.append(c.projected)
    assert statuses[0] == "ok" and set(statuses) == {"ok", "final"}
    first_over = next(i for i, n in enumerate(projected) if n > 103_424)
    assert statuses.index("final") == first_over > 0
