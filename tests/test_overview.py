"""ctxlab.overview: what `ctxlab info` counts per session."""

from __future__ import annotations

import ctxlab
from ctxlab import datasets
from ctxlab.overview import sessions_df

from conftest import realdata_path


def test_text_action_agents_count_their_actions():
    """mini-swe-agent writes its bash action in its text and gets one observation per action:
    `tool_calls` counts those observations, not 0 (no tool-call part exists)."""
    t = ctxlab.load(realdata_path("mini_swe_agent/psf__requests-1142.traj.json"))
    f = t.frame
    assert (f["kind"] == "tool_call").sum() == 0
    row = sessions_df(t).iloc[0]
    assert row["tool_calls"] == (f["kind"] == "tool_result").sum() == 69
    # every step but the first (the task) and the last (the submission) ran an action
    assert row["calls"] == 71


def test_tool_calling_agents_are_not_counted_twice():
    """A tool result that answers a tool call (it carries the call's id) is not an action
    of its own: Claude Code's count is its tool-call parts."""
    t = ctxlab.load(datasets.path("coding_session_b"))
    f = t.frame
    assert f.loc[f["kind"] == "tool_result", "tool_call_id"].notna().all()
    got = sessions_df(t).set_index("session")["tool_calls"]
    want = f[f["kind"] == "tool_call"].groupby("session").size()
    assert (got.loc[want.index] == want).all() and want.sum() > 0


def test_swe_agent_before_1_0_counts_observations():
    t = ctxlab.load(realdata_path("swe_agent/pydicom__pydicom-1458.traj"))
    f = t.frame
    assert sessions_df(t).iloc[0]["tool_calls"] == (f["kind"] == "tool_result").sum() > 0
