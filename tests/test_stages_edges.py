"""Stage edge cases found by review: monologue never takes back what repair puts back,
details' token savings include message framing, parameters are checked alike."""

from __future__ import annotations

import json

import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.pipeline import Pipeline
from ctxlab.stages import stage
from conftest import DATASETS, REALDATA

SPOTTER = REALDATA / "claude_code" / "spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


@pytest.mark.skipif(not SPOTTER.is_file(), reason="../shared/realdata is absent")
def test_monologue_leaves_the_calls_repair_put_back():
    """Monologue orphans a final answer's result; repair puts a call back for it. Hiding
    that call at the next request had repair insert it again: an event pair at every
    call, saving nothing."""
    p = Pipeline(name="m", stages=(stage("monologue"),), post=(stage("repair"),),
                 threshold=0.5, limit="window")
    r = ctxlab.replay(ctxlab.load(SPOTTER), p, window=30_000)
    led = r.ledger
    put_back = set(led.loc[(led["stage"] == "repair") & (led["action"] == "inserted"), "part"])
    taken = set(led.loc[(led["stage"] == "monologue") & (led["action"] == "hidden"), "part"])
    assert put_back and not put_back & taken
    assert (r.events["stage"] == "monologue").sum() < 20     # 107 before


@pytest.mark.parametrize("st", [stage("keep_last", keep=3), stage("monologue", keep_segments=0)])
def test_the_saving_a_stage_reports_is_the_requests(st):
    """With an estimator that frames each message, an edit's details["tokens_saved"] is
    what the request lost: its parts and the framing of the messages that went."""
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    s = t.sessions[0]
    k = int(t.calls.loc[t.calls["session"] == s, "call"].max())
    res = ctxlab.compact(t, Pipeline(name="x", stages=(st,), threshold=0.1, limit="window"),
                         window=1_000_000, call=k, estimator="neuron", force=True)
    run = res.runs[0]
    assert run.event is not None
    meta = json.loads(res.transcript.events["meta"].iloc[-1])
    assert meta["stage_details"]["tokens_saved"] == run.tokens_before - run.tokens_after


@pytest.mark.parametrize("name, params", [
    ("summarize", {"keep_recent": True}), ("summarize", {"min_recent": True}),
    ("summarize", {"budget_tokens": True}), ("summarize", {"block_chars": True}),
    ("summarize", {"keep_recent_ratio": True}), ("summarize", {"keep_recent_ratio": "0.3"}),
    ("truncate_tool_output", {"handle": "no"}), ("prune", {"placeholder": ""})])
def test_parameters_of_the_wrong_type_are_config_errors(name, params):
    with pytest.raises(ConfigError, match=next(iter(params))):
        stage(name, **params)
