"""Replay: incremental per-layer sums equal a full rebuild; at, rewind, resume; the ledger."""

from __future__ import annotations

import dataclasses
import sys
import warnings

import pandas as pd
import pytest

import ctxlab
from ctxlab.engine import Budget, build_view, call_end_pos, request_parts
from ctxlab.layers import LAYERS
from ctxlab.replay import replay
from tests.conftest import DATASETS

replay_module = sys.modules["ctxlab.replay"]  # `ctxlab.replay` is the function

CASES = [("coding_session.jsonl", "neurolink", 200_000),
         ("coding_session.jsonl", "neuron", 200_000),
         ("coding_session_b.jsonl", "probe", 60_000),
         ("openai_sessions.jsonl", "neurolink", 30_000)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def replayed(request):
    name, preset, window = request.param
    return replay(ctxlab.load(DATASETS / name), preset, window=window)


def test_incremental_layer_sums_equal_a_full_rebuild_at_every_call(replayed):
    _assert_layers_rebuilt(replayed)


REALDATA = DATASETS.parent.parent / "shared" / "realdata"


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
def test_layer_sums_follow_a_hidden_prompt_on_a_real_log():
    """A sliding window that hides the current turn's first user text: the prompt is then
    the turn's next user text still visible, as in the request itself (the walk once kept
    counting the hidden one, leaving the next one in ``current``)."""
    from ctxlab.pipeline import Pipeline, stages_from
    t = ctxlab.load(REALDATA / "claude_code" / "spotter"
                    / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    p = Pipeline(name="window", stages=stages_from([("keep_last", {"keep": 8})]),
                 threshold=1.0, limit="fixed", limit_tokens=4, estimator="chars:4")
    r = replay(t, p, window=200_000)
    moved = _assert_layers_rebuilt(r)
    assert moved, "no call had its first user text hidden while another stayed"


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
@pytest.mark.parametrize("preset", ["copilot-legacy", "copilot-fixed"])
def test_a_stage_may_hide_what_the_user_clears_later(preset):
    """aider's /clear is the user's edit and stays in a replay; before it, the request
    still holds what it will drop, and copilot's monologue stage hides some of that first
    (it stopped with "edit hides parts that are already hidden"). The stage's event takes
    the part over and remembers the /clear, so every request adds up, a rewind gives the
    part back to the /clear, and recall does not count the /clear as the stage's loss."""
    from ctxlab.history import taken_over

    log = ctxlab.load(REALDATA / "aider" / "chat-history.md")
    sessions = ["chat-history:12", "chat-history:13", "chat-history:14"]
    r = replay(log.sessions_of(sessions), preset)
    took = taken_over(r.transcript.events)
    assert took and all(r.base.frame.set_index(["session", "part"]).loc[list(took),
                                                                        "hidden_by"].notna())
    _assert_layers_rebuilt(r)
    pd.testing.assert_frame_equal(r.transcript.rewind().frame, r.base.frame)
    s = next(iter(took))[0]
    k = int(r.events.loc[r.events["session"] == s, "call"].iloc[0])
    again = r.rewind(k, session=s).resume()
    pd.testing.assert_frame_equal(again.calls, r.calls)
    pd.testing.assert_frame_equal(again.transcript.frame, r.transcript.frame)
    # a rewound part is the /clear's again
    back = r.rewind(k, session=s).transcript.frame.set_index(["session", "part"])
    assert all(back.loc[key, "hidden_by"] == hider for key, hider in took.items()
               if key[0] == s)
    # what the log without compaction shows (recall's reference): the /clear hides them
    from ctxlab.metrics import _base_spans
    f = r.transcript.frame
    ev = r.transcript.events
    mine = (f["session"] == s).to_numpy()
    _, hi = _base_spans(f[mine], ev[ev["session"] == s])
    clears = ev[(ev["session"] == s) & (ev["origin"] == "clear")].set_index("event")["pos"]
    parts = f.loc[mine, "part"].tolist()
    assert all(hi[parts.index(p)] == clears[h] for (ss, p), h in took.items() if ss == s)


def _assert_layers_rebuilt(r) -> int:
    """Every call's sizes and layers equal those of its request rebuilt from the
    transcript; returns how many calls had a prompt that is not the turn's first user
    text."""
    moved = 0
    for row in r.calls.itertuples():
        s, k = row.session, row.call
        est = r.estimator(s)
        over = r.settings.overhead_tokens.get(s, 0)
        budget = Budget(window_tokens=row.window_tokens, limit_tokens=row.limit_tokens,
                        target_tokens=row.target_tokens, overhead_tokens=over)
        end = call_end_pos(r.base, s, k)
        after = build_view(r.transcript, s, end, est, budget, k)
        assert after.total_tokens == row.tokens_after, (s, k)
        layers = ctxlab.layers_df(after.parts, overhead_tokens=over).set_index("layer")["tokens"]
        assert [layers[x] for x in LAYERS] == [getattr(row, f"{x}_after") for x in LAYERS]
        before, _ = r.at(k, session=s)
        assert int(before["tokens"].sum()) + est.framing(before["msg"].nunique()) + over \
            == row.tokens_before
        p = after.parts
        users = p[(p["role"] == "user") & (p["kind"] == "text")
                  & (p["turn"] == p["turn"].max())]["msg"]
        first = r.base.frame[(r.base.frame["role"] == "user") & (r.base.frame["kind"] == "text")
                             & (r.base.frame["turn"] == p["turn"].max())]["msg"]
        moved += int(len(users) > 0 and len(first) > 0 and users.min() != first.min())
    return moved


def test_compaction_only_runs_when_triggered(monkeypatch):
    seen = []
    real = replay_module.compact_view

    def spy(history, view, *args, **kwargs):
        seen.append(view.call)
        return real(history, view, *args, **kwargs)

    monkeypatch.setattr(replay_module, "compact_view", spy)
    log = ctxlab.load(DATASETS / "coding_session.jsonl")
    r = replay(log, ctxlab.preset("neurolink", always=()), window=200_000)
    assert seen == r.calls.loc[r.calls["triggered"], "call"].tolist()
    assert 0 < len(seen) < len(r.calls) / 10
    # a stage that runs on every request runs where a new part could wake it (a tool
    # result: NeuroLink's output limit), and after it acted: not at every call
    seen.clear()
    r = replay(log, "neurolink", window=200_000)
    assert set(r.calls.loc[r.calls["triggered"], "call"]) <= set(seen)
    assert len(seen) < len(r.calls) / 10


def test_events_and_ledger_agree_with_the_transcript(replayed):
    r = replayed
    ours = r.transcript.events[r.transcript.events["origin"] != "recorded"]
    assert len(ours) == len(r.events)
    f = r.transcript.frame
    assert (r.ledger["action"] == "hidden").sum() == f["hidden_by"].notna().sum() - \
        r.base.frame["hidden_by"].notna().sum()
    assert (r.ledger["action"] == "inserted").sum() == f["event"].notna().sum()
    if len(r.events):
        assert set(r.ledger["stage"]) <= set(r.events["stage"])
        assert (r.events["tokens_saved"] == r.events["tokens_before"] -
                r.events["tokens_after"]).all()
    assert r.transcript.validate(strict=False) == []
    pd.testing.assert_frame_equal(r.transcript.rewind().frame, r.base.rewind().frame)


def test_rewind_then_resume_reproduces_the_replay():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    r = replay(t, "neurolink", window=150_000)
    k = int(r.events["call"].iloc[1])
    back = r.rewind(k)
    assert back.calls["call"].max() == k - 1
    assert (back.events["call"] < k).all()
    again = back.resume()
    pd.testing.assert_frame_equal(again.calls, r.calls)
    pd.testing.assert_frame_equal(again.transcript.frame, r.transcript.frame)
    pd.testing.assert_frame_equal(again.events.drop(columns="ms"), r.events.drop(columns="ms"))


def test_rewind_and_resume_refuse_what_is_not_there():
    """A call the session does not have, and a field no pipeline has, are errors that say
    what there is (rewind(-1) used to give an empty replay, rewind(999) the whole one,
    resume(bogus=1) a TypeError from the dataclass)."""
    from ctxlab.errors import ConfigError
    from ctxlab.replay import NotReplayed

    r = replay(ctxlab.load(DATASETS / "coding_session_b.jsonl"), "neurolink", window=100_000)
    last = int(r.calls["call"].max())
    for k in (-1, last + 1):
        with pytest.raises(NotReplayed, match=rf"no call {k} \(its calls are 0\.\.{last}\)"):
            r.rewind(k)
    assert len(r.rewind(last).calls) == last
    with pytest.raises(ConfigError, match="no field 'bogus'; fields: name, stages"):
        r.rewind(30).resume(bogus=1)
    assert r.rewind(30).resume(threshold=0.6).settings.pipeline.threshold == 0.6
    # a bool or a float equal to a call number was taken as that call (True as call 1)
    for bad, method in ((True, r.rewind), (1.0, r.rewind), (False, r.at), (3.0, r.at)):
        with pytest.raises(ConfigError, match=rf"takes a call number \(an integer, as in "
                                              rf"replay.calls\['call'\]\), not {bad!r}"):
            method(bad)
    import numpy as np
    assert len(r.rewind(np.int64(30)).calls) == 30        # NumPy's integers are numbers


def test_sessions_named_by_numbers_and_frames_edited_in_place_replay_as_given():
    """What a replay remembers of a frame it forgets when it ends: a frame edited in place
    between two replays (a notebook's ``t.calls["model"] = ...``) is read again, and
    session ids that are numbers are found (a first version kept them as text and
    replayed no call, without a word)."""
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    assert set(replay(t, "neurolink").calls["window_tokens"]) == {200_000}
    t.calls["model"] = "gpt-4"
    assert set(replay(t, "neurolink").calls["window_tokens"]) == {8_192}
    numbered = dataclasses.replace(t, **{k: getattr(t, k).assign(session=7)
                                         for k in ("frame", "calls", "events")})
    with warnings.catch_warnings():     # (ids that are not text: pandas warns on the way)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        assert len(replay(numbered, "neurolink").calls) == len(t.calls) == 63


def _without_model(t, k: int):
    """``t`` with call ``k``'s model unknown (some agents log none for a sub-step)."""
    import dataclasses

    calls = t.calls.copy()
    calls.loc[calls["call"] == k, "model"] = pd.NA
    return dataclasses.replace(t, calls=calls)


@pytest.mark.parametrize("source", ["generated", "real"])
def test_a_call_without_a_model_is_counted_like_its_session(source):
    """One estimator per session: a call that names no model is counted with the
    session's provider by the walk, by `Replay.at` and by a replay resumed at that call
    (which once picked the estimator of the call it started from)."""
    if source == "real":
        if not REALDATA.is_dir():
            pytest.skip("../shared/realdata is absent")
        t = ctxlab.load(REALDATA / "openhands" / "basic_gui_mode.json")  # call 4: no model
        k, window = 4, 32_000
    else:
        t0 = ctxlab.load(DATASETS / "coding_session.jsonl")
        k, window = int(t0.calls["call"].iloc[len(t0.calls) // 2]), 150_000
        t = _without_model(t0, k)
    assert t.calls.loc[t.calls["call"] == k, "model"].isna().all()
    assert t.calls["model"].notna().any()
    r = replay(t, "neurolink", window=window)        # estimator "neurolink:{provider}"
    s = r.base.sessions[0]
    assert r.estimator(s).spec == "neurolink:anthropic"
    row = r.calls[r.calls["call"] == k].iloc[0]
    before, _ = r.at(k)
    over = r.settings.overhead_tokens.get(s, 0)
    assert int(before["tokens"].sum()) + r.estimator(s).framing(before["msg"].nunique()) \
        + over == row["tokens_before"]
    again = r.rewind(k).resume()
    pd.testing.assert_frame_equal(again.calls, r.calls)        # dtypes too
    pd.testing.assert_frame_equal(again.events.drop(columns="ms", errors="ignore"),
                                  r.events.drop(columns="ms", errors="ignore"))
    pd.testing.assert_frame_equal(again.ledger, r.ledger)


@pytest.mark.parametrize("source", ["generated", "real"])
def test_a_call_without_a_model_has_the_window_of_the_model_before_it(source):
    """With the windows left to the registry, a call that names no model gets the
    window of the session's model (once, the 128k global default: a spurious trigger
    at that call on a 200k model)."""
    from ctxlab.pipeline import call_models, window_for

    if source == "real":
        if not REALDATA.is_dir():
            pytest.skip("../shared/realdata is absent")
        t, k = ctxlab.load(REALDATA / "openhands" / "basic_gui_mode.json"), 4
    else:
        t0 = ctxlab.load(DATASETS / "coding_session.jsonl")
        k = int(t0.calls["call"].iloc[len(t0.calls) // 2])
        t = _without_model(t0, k)
    s = t.sessions[0]
    named = t.calls.loc[t.calls["call"] == k - 1, "model"].iloc[0]
    assert call_models(t, s)[k] == named
    r = replay(t, "probe")
    w = r.calls.set_index("call")["window_tokens"]
    assert w[k] == w[k - 1] == window_for(t, s, k) > 128_000
    assert pd.isna(r.calls.set_index("call")["model"][k])       # the log's own value


def test_each_session_fits_its_overhead_with_its_own_estimator():
    """Sessions of different providers in one log: each session's unrecorded overhead is
    fitted with the estimator its calls are counted with (once, the first session's
    provider served every session)."""
    import dataclasses

    from ctxlab.tokens.accuracy import session_overheads

    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    s0 = t.sessions[0]
    calls = t.calls.copy()
    calls.loc[calls["session"] == s0, "model"] = "claude-opus-4-6"
    t = dataclasses.replace(t, calls=calls)
    r = replay(t, "neurolink", window=100_000)
    specs = {s: r.estimator(s).spec for s in t.sessions}
    assert specs[s0] == "neurolink:anthropic"
    assert {specs[s] for s in t.sessions[1:]} == {"neurolink:openai"}
    for s in t.sessions:
        assert r.settings.overhead_tokens[s] == session_overheads(t.session(s), specs[s])[s]
    assert len(set(r.settings.overhead_tokens.values())) > 1


def test_overheads_are_fitted_once_per_log_and_spec(monkeypatch):
    """A sweep replays a session once per configuration: the fit is remembered per log
    (the same frames) and estimator spec, not per replay; another log, spec or an
    estimator instance is fitted again."""
    import dataclasses

    import ctxlab.tokens.accuracy as accuracy
    from ctxlab.tokens import estimator

    fits = []
    real = accuracy.session_overheads
    monkeypatch.setattr(accuracy, "session_overheads",
                        lambda t, e: fits.append(getattr(e, "spec", e)) or real(t, e))
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    first = replay(t, "neurolink", window=150_000)
    again = replay(t, "neuron", window=150_000, estimator=first.settings.pipeline.estimator
                   .replace("{provider}", "anthropic"))
    assert len(fits) == 1       # the named spec is neurolink's filled in: one fit
    assert replay(t, "neurolink", window=100_000).settings.overhead_tokens \
        == first.settings.overhead_tokens and len(fits) == 1
    replay(t, "neuron", window=150_000, estimator="chars:3")
    other = dataclasses.replace(t, calls=t.calls.copy())   # another log with equal values
    replay(other, "neurolink", window=150_000)
    replay(t, "neurolink", window=150_000, estimator=estimator("chars:4"))
    assert len(fits) == 4 and fits[1] == "chars:3"
    # the same parts and calls with other events (recorded compactions count): fitted again
    replay(dataclasses.replace(t, events=t.events.copy()), "neurolink", window=150_000)
    assert len(fits) == 5
    assert again.settings.overhead_tokens == {s: real(t, "neurolink:anthropic")[s]
                                              for s in t.sessions}


def test_a_rewound_replay_measures_recall_on_the_calls_it_holds():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    r = replay(t, "neurolink", window=150_000)
    k = int(r.events["call"].iloc[1])
    back = r.rewind(k)
    rec, full = back.recall(), r.recall()
    assert rec["call"].tolist() == back.calls["call"].tolist() == list(range(k))
    pd.testing.assert_frame_equal(rec, full[full["call"] < k].reset_index(drop=True))
    assert back.summary()["recall"] != r.summary()["recall"] or full["missing"].sum() == 0
    assert back.resume().recall().equals(full)


def test_what_if_changes_only_the_future():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    r = replay(t, "neurolink", window=150_000)
    k = int(r.events["call"].iloc[0]) + 1
    other = r.rewind(k).resume(threshold=0.5)
    cols = ["call", "tokens_before", "tokens_after", "triggered"]
    pd.testing.assert_frame_equal(other.calls[other.calls["call"] < k][cols],
                                  r.calls[r.calls["call"] < k][cols])
    assert other.calls["triggered"].sum() > r.calls["triggered"].sum()
    assert other.pipeline.threshold == 0.5


def test_at_shows_the_compaction_of_a_call():
    r = replay(ctxlab.load(DATASETS / "coding_session.jsonl"), "neurolink", window=200_000)
    k = int(r.events["call"].iloc[0])
    before, after = r.at(k)
    assert len(before) > 0 and set(after.columns) >= {"tokens", "layer"}
    assert after["tokens"].sum() < before["tokens"].sum()
    assert (after["event"].notna()).any()
    with pytest.raises(KeyError):
        r.at(10_000)


@pytest.mark.parametrize("name", ["coding_session.jsonl", "openai_sessions.jsonl"])
def test_a_replay_that_never_triggers_reproduces_the_logs_own_requests(name):
    log = ctxlab.load(DATASETS / name)
    r = replay(log, ctxlab.preset("neurolink", always=()), window=50_000_000)  # no stage
    assert r.pipeline.always == ()             # that runs without a trigger
    assert not r.calls["triggered"].any() and not r.calls["compacted"].any()
    assert r.events.empty and r.ledger.empty
    base = log.rewind_recorded()
    for row in r.calls.itertuples():
        _, after = r.at(row.call, session=row.session)
        want = request_parts(base, row.session, call_end_pos(base, row.session, row.call))
        pd.testing.assert_frame_equal(after.drop(columns=["tokens", "layer"]), want)


def test_character_counts_of_a_request_equal_counts_of_its_texts():
    """`count_values` (what a replay calls on every request) takes character lengths
    afresh and caches UTF-8 ones; both equal `count`, NA counting as the empty text."""
    import numpy as np
    texts = np.array(["abcd", None, "é😀" * 7, "", "x" * 101], dtype=object)
    for spec in ("chars:4", "chars:3.5", "neurolink:anthropic"):
        est = ctxlab.estimator(spec)
        want = est.count(["" if x is None else x for x in texts]).tolist()
        assert est.count_values(texts).tolist() == want
        assert est.count_values(texts[[0, 2, 4]]).tolist() == [want[0], want[2], want[4]]


# -- rewind and resume: found by a review that fuzzed them --------------------------------


@pytest.fixture()
def missing_summarizer():
    """A summarizer whose every call fails (an LLM backend in replay mode with no recorded
    answer): the stage makes no event, only a failure row."""
    from ctxlab.summarizers import Summarizer, SummarizerError, register, unregister

    class AlwaysMissing(Summarizer):
        name = "test-always-missing"
        model = "none"

        def summarize(self, parts, previous=None, **kw):
            raise SummarizerError("no recorded response", kind="missing")

    register(AlwaysMissing())
    yield AlwaysMissing.name
    unregister(AlwaysMissing.name)


def _frames_equal(a, b):
    pd.testing.assert_frame_equal(a.calls, b.calls)
    drop = ["ms", "summarizer_ms"]
    pd.testing.assert_frame_equal(a.events.drop(columns=drop, errors="ignore"),
                                  b.events.drop(columns=drop, errors="ignore"))
    pd.testing.assert_frame_equal(a.ledger, b.ledger)


def test_a_failed_attempt_before_the_rewind_leaves_the_reported_trigger_as_it_was(
        missing_summarizer):
    """Claude Code's trigger measures the last reported input while the request is still
    the logged one: a failed summary made no event, so it still is after a rewind (the
    resumed walk once measured its own estimate instead, and fired where the first did not)."""
    import dataclasses

    from ctxlab.stages.reattach import claude_code_summarize

    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    cc = ctxlab.preset("claude-code")
    p = dataclasses.replace(cc, stages=(claude_code_summarize(summarizer=missing_summarizer),))
    window = 83_100     # its autocompact limit 50,100 (window − 20k − 13k)
    r = replay(t, p, window=window)
    failed = r.events.loc[r.events["failure"].notna(), "call"]
    assert len(failed) > 3 and r.events["event"].isna().all()
    k = int(failed.min()) + 1
    again = r.rewind(k).resume()
    _frames_equal(again, r)
    # at a threshold between the two measures, the resumed walk once fired at call k + 1
    row = r.calls[r.calls["call"] == k + 1].iloc[0]
    limit = int(row["limit_tokens"])
    t_between = (int(row["checked_tokens"]) + 1) / limit
    assert int(row["tokens_before"]) > int(row["checked_tokens"])
    r2 = replay(t, dataclasses.replace(p, threshold=t_between), window=window)
    assert not r2.calls.loc[r2.calls["call"] == k + 1, "triggered"].iloc[0]
    _frames_equal(r2.rewind(k).resume(), r2)


def test_the_claude_code_stage_reports_its_summarizers_failures(missing_summarizer):
    import dataclasses

    from ctxlab.stages.reattach import Reattach, claude_code_summarize

    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    stage = Reattach(summarize=claude_code_summarize(summarizer=missing_summarizer))
    r = replay(t, dataclasses.replace(ctxlab.preset("claude-code"), stages=(stage,)),
               window=60_000)
    failed = r.events[r.events["failure"].notna()]
    assert len(failed) == int(r.calls["triggered"].sum()) > 0
    assert (failed["failure"] == "missing").all() and (failed["stage"] == "reattach").all()
    assert r.summary()["failures"] == len(failed)


def test_resuming_with_another_estimator_counts_as_a_replay_with_it():
    """Overheads are fitted again for the new estimator, and the reported trigger's
    starting point is counted with it (it mixed the two estimators' counts)."""
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    a, b = replay(t, "probe", window=120_000), replay(t, "claude-code", window=120_000)
    fired = pd.concat([x.calls.loc[x.calls["triggered"], "call"] for x in (a, b)])
    k = int(fired.min()) - 1                # nothing fired before k in either replay
    assert k > 2
    r = a.rewind(k).resume("claude-code")
    assert r.settings.overhead_tokens == b.settings.overhead_tokens != a.settings.overhead_tokens
    cols = ["call", "tokens_before", "checked_tokens", "triggered", "compacted", "tokens_after"]
    pd.testing.assert_frame_equal(r.calls.loc[r.calls["call"] >= k, cols].reset_index(drop=True),
                                  b.calls.loc[b.calls["call"] >= k, cols].reset_index(drop=True))
    # overheads the caller gave stay as given
    mine = replay(t, "probe", window=120_000, overhead_tokens=1234)
    assert set(mine.rewind(k).resume("claude-code").settings.overhead_tokens.values()) == {1234}


def test_a_rewound_replay_cannot_be_rewound_past_its_end():
    r = replay(ctxlab.load(DATASETS / "coding_session_b.jsonl"), "neurolink", window=100_000)
    back = r.rewind(20)
    with pytest.raises(replay_module.NotReplayed, match="rewound to call 20 .* cannot be "
                                                        "rewound to call 40"):
        back.rewind(40)
    _frames_equal(back.rewind(10).resume(), r)       # earlier is fine


def test_resuming_one_session_of_several_keeps_the_rows_in_log_order():
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = replay(t, "neurolink", window=30_000)
    for s in t.sessions[:2]:
        _frames_equal(r.rewind(5, session=s).resume(), r)


def test_the_summary_tells_calls_compacted_from_compactions():
    """Observation masking edits a request at most calls without its trigger ever firing:
    the summary says both (its plots count the calls compacted)."""
    r = replay(ctxlab.load(DATASETS / "coding_session.jsonl"), "observation-masking")
    s = r.summary()
    assert s["compactions"] == int(r.calls["triggered"].sum()) == 0
    assert s["calls_compacted"] == r.events.loc[r.events["event"].notna(), "call"].nunique() > 100


def test_resuming_a_replay_that_was_not_rewound_is_an_error():
    """It once gave the replay back unchanged under the new settings: ``resume(threshold=
    0.3)`` claimed threshold 0.3 with the 3 compactions of 0.8 (a replay at 0.3 has 16)."""
    r = replay(ctxlab.load(DATASETS / "coding_session_b.jsonl"), "neurolink", window=100_000)
    with pytest.raises(replay_module.NotReplayed, match=r"not rewound.*rewind\(call\) first"):
        r.resume(threshold=0.3)
    with pytest.raises(replay_module.NotReplayed, match="not rewound"):
        r.rewind(10).resume().resume()


def test_resume_changes_the_window_and_an_estimator_the_replay_was_given():
    """``resume(estimator=...)`` once changed only the pipeline's field, which an estimator
    given to the replay overrides: the resumed calls were still counted with the old one;
    ``resume(window=...)`` was a ConfigError. From the rewind point on, the resumed calls
    are those of a replay with the new settings (nothing compacted before it in either)."""
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    a = replay(t, "neurolink", window=120_000, estimator="chars:4")
    b = replay(t, "neurolink", window=120_000, estimator="chars:2")
    c = replay(t, "neurolink", window=60_000, estimator="chars:2")
    k = min(int(x.events["call"].min()) for x in (a, b, c))
    assert k > 5

    def tail(x):
        return x.calls[x.calls["call"] >= k].reset_index(drop=True)

    counted = a.rewind(k).resume(estimator="chars:2")
    assert counted.settings.overhead_tokens == b.settings.overhead_tokens
    pd.testing.assert_frame_equal(tail(counted), tail(b))
    smaller = a.rewind(k).resume(window=60_000, estimator="chars:2")
    pd.testing.assert_frame_equal(tail(smaller), tail(c))
    assert smaller.settings.window == 60_000
    assert set(smaller.calls.loc[smaller.calls["call"] < k, "window_tokens"]) == {120_000}


def test_at_and_rewind_name_the_calls_of_the_session_asked_about():
    """``at`` once gave the range of every session's calls (0..32 for a session whose calls
    are 0..25), and a session the log does not have was a call 'not replayed'."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = replay(t, "neurolink", window=30_000)
    s = t.sessions[1]
    assert r.calls.loc[r.calls["session"] == s, "call"].max() == 25
    with pytest.raises(replay_module.NotReplayed, match=r"its calls 0\.\.25 were"):
        r.at(99, session=s)
    with pytest.raises(replay_module.NotReplayed, match=r"none of its calls was"):
        r.rewind(0, session=s).at(0, session=s)
    for method in (r.at, r.rewind):
        with pytest.raises(replay_module.NotReplayed, match=rf"no session 'nope'; its "
                                                            rf"sessions: '{t.sessions[0]}'"):
            method(0, session="nope")


def test_at_shows_a_call_as_the_replay_rewound_after_it_does():
    """The parts of a call's request once carried the ``hidden_by`` of events made at later
    calls (a part sent at call 3 showed hidden by event 7): ``at(k)`` differed from
    ``rewind(k + 1).at(k)``, and a filter on ``hidden_by`` lost parts of the request."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = replay(t, "neurolink", window=30_000)
    s = t.sessions[3]
    calls = r.calls.loc[r.calls["session"] == s, "call"].tolist()
    for k in calls[:-1]:
        back = r.rewind(k + 1, session=s)
        for x, y in zip(r.at(k, session=s), back.at(k, session=s)):
            pd.testing.assert_frame_equal(x.reset_index(drop=True), y.reset_index(drop=True))
            assert x["hidden_by"].isna().all()       # every part shown was sent


def test_rewinding_several_sessions_and_resuming_gives_the_transcript_again():
    """The resumed sessions' events once went to the end of ``transcript.events`` (the
    log's first session after the others), unlike the frames, which kept log order."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    r = replay(t, "probe", window=30_000)
    again = r.rewind(12, session=t.sessions[0]).rewind(1, session=t.sessions[1]).resume()
    _frames_equal(again, r)
    pd.testing.assert_frame_equal(again.transcript.frame, r.transcript.frame)
    pd.testing.assert_frame_equal(again.transcript.events, r.transcript.events)


def test_a_resumed_session_keeps_the_logs_own_events_first():
    """aider's history edits (/clear) are events of the log: a walk gives them first, then
    the replay's by session; a resumed session's events once went last, then were sorted
    in among the log's own."""
    from tests.conftest import realdata_path

    t = ctxlab.load(realdata_path("aider/chat-history.md"))
    t = t.sessions_of(t.sessions[:12])
    r = replay(t, "copilot-legacy", window=32_000)
    e = r.transcript.events
    assert e["origin"].tolist()[:5] == ["clear"] * 5 and e["session"].nunique() == 2
    s = str(e["session"].iloc[0])
    again = r.rewind(0, session=s).resume()
    _frames_equal(again, r)
    pd.testing.assert_frame_equal(again.transcript.events, r.transcript.events)
