"""Always-on stages skipped between calls (`ctxlab.stages.base.Stage.candidates`).

Two things must hold. The stages that answer keep the promise: a request on which they
made no edit, grown by rows none of which is a candidate, gets no edit and the same
reason (hypothesis, on real requests with and without earlier placeholders). And a replay
that skips them is the replay that runs them at every call (their answer withdrawn),
frame for frame, on generated sessions and the real logs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab import datasets
from ctxlab.engine import Budget, build_view, call_end_pos, run_stages, with_layers
from ctxlab.pipeline import Pipeline, resolve_pipeline, stages_from
from ctxlab.stages import stage
from ctxlab.stages.base import Stage, View
from ctxlab.stages.table import concat
from tests.conftest import DATASETS

REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata"
ANSWERING = {"truncate_tool_output": [{"max_bytes": 600, "max_lines": 12},
                                      {"max_bytes": 3_000, "handle": True}],
             "clear_tool_results": [{"keep": 0}, {"keep": 2}, {"keep": 7}]}


@pytest.fixture(scope="module")
def request_case():
    t = ctxlab.load(DATASETS / "coding_session.jsonl").rewind_recorded()
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max())
    end = call_end_pos(t, s, k)
    budget = Budget(window_tokens=200_000, limit_tokens=20_000, target_tokens=10_000)
    return t, build_view(t, s, end, ctxlab.estimator("chars:4"), budget, k), end


def test_the_stages_that_answer_are_the_expected_ones():
    from ctxlab.stages import names
    answering = sorted(n for n in names()
                       if stage(n).candidates(build_view(*_tiny()).table) is not None)
    assert answering == sorted(ANSWERING)


def _tiny():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    s = t.sessions[0]
    return (t, s, call_end_pos(t, s, 3), ctxlab.estimator("chars:4"),
            Budget(window_tokens=1_000, limit_tokens=500, target_tokens=400))


def _outcome(st_: Stage, view: View) -> tuple[bool, str, str | None, int]:
    edit = st_.plan(view)
    if edit is None:
        return (False, "nothing to do", None, 0)
    return (not edit.empty, edit.reason, edit.failure, len(edit.summarizer_calls))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(ANSWERING)), which=st.integers(0, 2),
       keep_share=st.floats(0.0, 1.0), seed=st.integers(0, 2**32 - 1),
       settle=st.booleans())
def test_no_candidate_leaves_a_quiet_stage_quiet(request_case, name, which, keep_share,
                                                 seed, settle):
    t, full, end = request_case
    params = ANSWERING[name][which % len(ANSWERING[name])]
    st_ = stage(name, **params)
    wake = np.asarray(st_.candidates(full.table), dtype=bool)
    rng = np.random.default_rng(seed)
    # the earlier request: every candidate and a share of the other rows; the rest arrive
    earlier_rows = np.flatnonzero(wake | (rng.random(full.table.n) < keep_share))
    added = np.setdiff1d(np.arange(full.table.n), earlier_rows)
    earlier = full.with_table(with_layers(full.table.take(earlier_rows)))
    if settle:      # the stage acted once: its placeholders and cuts are in the request
        earlier = run_stages(t, earlier, [st_], end_pos=end, trigger="test").view
    did, *said = _outcome(st_, earlier)
    event("earlier request: " + ("edited" if did else "quiet"))
    if did:
        return      # it acts on the earlier request: the promise says nothing
    grown = concat(earlier.table, full.table.take(added))
    order = np.argsort(np.asarray(grown.col("pos"), dtype=np.float64), kind="stable")
    later = earlier.with_table(with_layers(grown.take(order)))
    assert not st_.candidates(full.table.take(added)).any()
    assert _outcome(st_, later) == (False, *said)


def test_a_candidate_can_wake_the_stage(request_case):
    """The promise is not empty: a quiet request that receives a candidate can need an
    edit (the tool results beyond ``keep`` get cleared)."""
    t, full, end = request_case
    st_ = stage("clear_tool_results", keep=2)
    settled = run_stages(t, full, [st_], end_pos=end, trigger="test").view
    assert _outcome(st_, settled)[0] is False
    results = np.flatnonzero(np.asarray(st_.candidates(full.table)))
    late = results[-1]
    earlier = full.with_table(with_layers(full.table.take(np.delete(np.arange(full.table.n),
                                                                   results[-3:]))))
    earlier = run_stages(t, earlier, [st_], end_pos=end, trigger="test").view
    assert _outcome(st_, earlier)[0] is False
    grown = concat(earlier.table, full.table.take([late]))
    order = np.argsort(np.asarray(grown.col("pos"), dtype=np.float64), kind="stable")
    assert _outcome(st_, earlier.with_table(with_layers(grown.take(order))))[0] is True


def _replays(t: ctxlab.Transcript, p, monkeypatch, **kw) -> tuple[ctxlab.Replay,
                                                                  ctxlab.Replay]:
    skipped = ctxlab.replay(t, p, **kw)
    with monkeypatch.context() as m:
        for cls in {type(s) for s in resolve_pipeline(p).always}:
            m.setattr(cls, "candidates", Stage.candidates)
        every = ctxlab.replay(t, p, **kw)
    return skipped, every


def _assert_same(a: ctxlab.Replay, b: ctxlab.Replay) -> None:
    pd.testing.assert_frame_equal(a.calls, b.calls)
    timing = ["ms", "summarizer_ms"]     # the stages' own time: the one difference
    pd.testing.assert_frame_equal(a.events.drop(columns=timing, errors="ignore"),
                                  b.events.drop(columns=timing, errors="ignore"))
    pd.testing.assert_frame_equal(a.ledger, b.ledger)
    pd.testing.assert_frame_equal(a.transcript.frame, b.transcript.frame)
    pd.testing.assert_frame_equal(a.transcript.events, b.transcript.events)


def _mixed(threshold: float) -> Pipeline:
    """Both answering stages always on, stages that run when triggered, and post-steps."""
    return Pipeline(name="mixed",
                    always=stages_from([("truncate_tool_output", {"max_bytes": 2_000}),
                                        ("clear_tool_results", {"keep": 6})]),
                    stages=stages_from([("keep_last", {"keep": 30})]),
                    post=stages_from(["repair"]), threshold=threshold, limit="window",
                    estimator="chars:4")


def _prompt_only(limit: int) -> Pipeline:
    """A trigger on the prompt layer alone, with a tiny fixed limit: skipped calls take
    it from the walk's sums, run ones from the request's layers, which must agree where
    a compaction hid the turn's first user text."""
    return Pipeline(name="prompt-only",
                    always=stages_from([("truncate_tool_output", {"max_bytes": 2_000})]),
                    stages=stages_from([("keep_last", {"keep": 8})]), threshold=1.0,
                    limit="fixed", limit_tokens=limit, trigger_layers=("prompt",),
                    estimator="chars:4")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quiet")
    s = datasets.generate_session("coding", 3, calls=250, compact_at=None)
    return ctxlab.load(datasets.write_claude_code(s, folder / "s.jsonl"))


@pytest.mark.parametrize("pipeline", ["ai-agent", "observation-masking", "mixed-0.3",
                                      "mixed-0.9", "ai-agent-0.5"])
def test_skipping_quiet_stages_changes_no_replay(generated, pipeline, monkeypatch):
    from ctxlab.presets import preset
    p = _mixed(float(pipeline.split("-")[1])) if pipeline.startswith("mixed") else \
        preset("ai-agent", threshold=0.5) if pipeline == "ai-agent-0.5" else pipeline
    triggered = 0
    for t, window in ((generated, None), (generated, 40_000),
                      (ctxlab.load(DATASETS / "coding_session_b.jsonl"), 30_000)):
        skipped, every = _replays(t, p, monkeypatch, window=window)
        _assert_same(skipped, every)
        triggered += int(skipped.calls["triggered"].sum())
    assert triggered    # calls over the threshold were skipped or run too


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_skipping_quiet_stages_changes_no_replay_of_the_real_logs(monkeypatch):
    paths = sorted(REALDATA.glob("claude_code/**/*.jsonl"))[:6] + \
        sorted(REALDATA.glob("mini_swe_agent/*.json")) + sorted(REALDATA.glob("openhands/*.json"))
    assert paths
    for path in paths:
        t = ctxlab.load(path)
        if not len(t.calls):
            continue
        for p in ("ai-agent", "observation-masking", _mixed(0.5), _prompt_only(2),
                  _prompt_only(4)):
            _assert_same(*_replays(t, p, monkeypatch, window=32_000))
