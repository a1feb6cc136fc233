"""The grammar of a request that grew: `ctxlab.stages.grammar.grown_scan`.

A replay's request at each call is the last one plus the parts that arrived since; its
grammar problems are extended from the last request's by reading the new rows only.
Generated requests (hypothesis: calls and results with shared, missing and repeated ids,
system parts, messages of several parts) cut at every row must give what a scan of the
whole request gives; and on the real logs, every request a replay seeded that way must
equal a full scan.
"""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.stages.grammar import _scan, grown_scan
from ctxlab.stages.table import Table
from tests.conftest import DATASETS

_ROW = st.tuples(st.sampled_from(["user", "assistant", "system"]),
                 st.sampled_from(["text", "tool_call", "tool_result"]),
                 st.sampled_from([None, "a", "b", "c", "d"]), st.booleans())


def request(rows: list) -> Table:
    msg, m = [], 0
    for i, r in enumerate(rows):
        m += bool(i) and r[3]             # a new message, or a part of the last one
        msg.append(m)
    return Table.from_frame(pd.DataFrame({
        "role": pd.array([r[0] for r in rows], dtype="string"),
        "kind": pd.array([r[1] for r in rows], dtype="string"),
        "tool_call_id": pd.array([r[2] for r in rows], dtype="string"),
        "msg": msg, "part": list(range(len(rows)))}))


def same(a, b) -> None:
    fa, fb = a.found, b.found
    assert np.array_equal(fa[0], fb[0]) and np.array_equal(fa[1], fb[1]) and fa[2] == fb[2]
    assert np.array_equal(a.called, b.called) and a.opening == b.opening
    assert sorted(a.unanswered_ids.tolist()) == sorted(b.unanswered_ids.tolist())


@settings(max_examples=200, deadline=None)
@given(st.lists(_ROW, min_size=1, max_size=30), st.data())
def test_a_grown_request_has_the_problems_of_a_whole_scan(rows, data):
    whole = request(rows)
    cut = data.draw(st.integers(0, len(rows)))
    before = _scan(request(rows[:cut])) if cut else None
    grown = grown_scan(before, whole, cut) if before is not None else None
    if grown is None:      # no opening message yet, or the new rows join it
        return
    same(grown, _scan(whole))


def test_a_grown_request_is_extended_not_rescanned():
    rows = [("user", "text", None, True), ("assistant", "tool_call", "a", True),
            ("user", "tool_result", "a", True), ("assistant", "tool_call", "b", True)]
    before = _scan(request(rows[:2]))
    assert before.found[1].tolist() == [1]                 # call a unanswered
    grown = grown_scan(before, request(rows), 2)
    assert grown is not None
    assert grown.found[0].tolist() == [] and grown.found[1].tolist() == [3]
    joined = rows[:1] + [("user", "text", None, False)]    # joins the opening message
    assert grown_scan(_scan(request(rows[:1])), request(joined), 1) is None


@pytest.mark.parametrize("preset", ["observation-masking", "ai-agent", "copilot-fixed"])
def test_every_seeded_request_of_a_replay_equals_a_full_scan(preset, monkeypatch):
    replay_mod = importlib.import_module("ctxlab.replay")
    seeded = []
    original = replay_mod.RequestRows.seed

    def seed(self, view):
        original(self, view)
        if "grammar_scan" in view._memo:
            seeded.append(1)
            same(view._memo["grammar_scan"], _scan(view.table))

    monkeypatch.setattr(replay_mod.RequestRows, "seed", seed)
    ctxlab.replay(ctxlab.load(DATASETS / "coding_session_b.jsonl"), preset)
    assert seeded
