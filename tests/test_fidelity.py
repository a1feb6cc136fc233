"""Fidelity of the claude-code preset against real Claude Code logs, and the fidelity frames.

The real logs (``../shared/realdata/claude_code/spotter``: three Claude Code 2.1.39
sessions on claude-opus-4-6, one auto-compaction each) are replayed uncompacted with
``claude_code(log)`` (the ``claude-code`` preset with the log's own summary where the
log compacted). Tokens are counted with an estimator calibrated on the three logs'
reported usage (`ctxlab.calibrate` on the corpus); each session's unrecorded overhead
is `ctxlab.tokens.accuracy.session_overheads`.

The trigger. Claude Code checks the *reported* usage of its last call plus an estimate
of what came after against 167,000 (window − 20k output reserve − 13k buffer).
`claude_code_checks_df` computes that check from the logs: it fires first at the real
compaction call in all three sessions (checked 167,023 / 170,911 / 167,595 against
preTokens 167,094 / 170,251 / 167,731). A replay that checks its own *estimate*
instead fires 3 and 2 calls late in two sessions (it underestimates by ~1.7% there).
The preset's ``trigger_on="reported"`` (a `Pipeline` field the replay honours) checks
reported usage while its request is still the logged one — until its first compaction
and the log's first recorded one.

Per call, the error is the replay's request against the reported ``input_total``;
"MAPE" is the mean over all of a session's calls of its absolute value, "max" the
worst single call (the first call after compaction in every session). Measured
(deterministic):

=========  ====  ========  =====================  ==============  ===========  ==========
session    real  trigger   predicted (offset)     post rep/est    MAPE all/al  max  (p95)
=========  ====  ========  =====================  ==============  ===========  ==========
258c7280   102   reported  102 (0)                33,960/39,578   2.2% / 2.2%  16.5% (7.9)
4d5611e5   61    reported  61 (0)                 36,081/36,986   3.4% / 3.4%  10.8% (9.5)
8463c716   71    reported  71 (0)                 42,603/39,563   3.0% / 3.0%  12.8% (12.0)
258c7280   102   estimate  105 (3)                33,960/38,914   8.5% / 1.6%  383%  (7.1)
4d5611e5   61    estimate  61 (0)                 36,081/36,986   3.4% / 3.4%  10.8% (9.5)
8463c716   71    estimate  73 (2)                 42,603/37,753   8.0% / 4.1%  291%  (16.6)
=========  ====  ========  =====================  ==============  ===========  ==========

Right after compaction the request holds the session-start context again (in the
overhead), the summary and what `ctxlab.stages.reattach` restores: the 5 most recently
modified files and the plan (8463c716 used plan mode). What is left, +16.5% / +2.5% /
−7.1% at that call, is what the log cannot show: the files as Claude Code re-read them,
the hook output after each edit, and how the overhead fitted before compaction (per
session, a median) differs from the request right after it. With the estimated
trigger two compactions land on calls the log has no summary for, so the structured
summarizer writes those.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.fidelity import (
    FIDELITY_COLUMNS,
    claude_code_checks_df,
    compaction_points_df,
    fidelity_df,
    fidelity_errors_df,
    replay_rows,
    threshold_bounds_df,
)
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.pipeline import Pipeline, compact_all
from ctxlab.presets import claude_code
from ctxlab.tokens.accuracy import session_overheads
from tests.conftest import DATASETS, realdata_path

WINDOW = 200_000
REAL = {"258c7280": 102, "4d5611e5": 61, "8463c716": 71}
PRE_TOKENS = {"258c7280": 167_094, "4d5611e5": 170_251, "8463c716": 167_731}
# the bounds, met with the reported trigger
OFFSET_CALLS = 2  # measured: 0, 0, 0
MAPE_PCT = 5.0  # measured: 2.2%, 3.4%, 3.0%
MAX_ERROR_PCT = 20.0  # measured: 16.5%, 10.8%, 12.8% (the first call after compaction)
POST_INPUT_PCT = 20.0  # measured: +16.5%, +2.5%, -7.1%
# with the estimated trigger (trigger_on='estimated')
ESTIMATED_OFFSETS = {"258c7280": 3, "4d5611e5": 0, "8463c716": 2}
ESTIMATED_MAPE_PCT = 9.0  # measured: 8.5%, 3.4%, 8.0%
ESTIMATED_ALIGNED_MAPE_PCT = 5.0  # measured: 1.6%, 3.4%, 4.1%


# ---- the real logs ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def spotter():
    corpus = ctxlab.load_dir(realdata_path("claude_code/spotter"))
    logs = {t.sessions[0][:8]: t for t in corpus}
    assert sorted(logs) == sorted(REAL)
    return logs, ctxlab.calibrate(corpus)


def _pipeline(t: ctxlab.Transcript, trigger: str, **reattach) -> Pipeline:
    p = claude_code(t)
    if reattach:
        p = replace(p, stages=(replace(p.stages[0], **reattach),))
    return replace(p, trigger_on=trigger)


def _replay(t, est, pipeline):
    return ctxlab.replay(t, pipeline, window=WINDOW, estimator=est,
                         overhead_tokens=session_overheads(t, est))


def _points(replays) -> pd.DataFrame:
    return pd.concat([compaction_points_df(t, r).assign(key=k) for k, (t, r) in replays.items()],
                     ignore_index=True).set_index("key")


def _errors(replays) -> pd.DataFrame:
    return pd.concat([fidelity_errors_df(fidelity_df(t, r)).assign(key=k)
                      for k, (t, r) in replays.items()], ignore_index=True).set_index("key")


@pytest.fixture(scope="module")
def estimated(spotter):
    logs, est = spotter
    return {k: (t, _replay(t, est, _pipeline(t, "estimated"))) for k, t in logs.items()}


@pytest.fixture(scope="module")
def reported(spotter):
    logs, est = spotter
    return {k: (t, _replay(t, est, _pipeline(t, "reported"))) for k, t in logs.items()}


@pytest.mark.realdata
def test_the_logs_are_what_the_model_was_fitted_on(spotter):
    logs, _ = spotter
    for key, t in logs.items():
        rec = t.events[t.events["origin"] == "recorded"]
        assert len(rec) == 1 and rec["trigger"].iloc[0] == "auto"
        assert rec["pre_tokens"].iloc[0] == PRE_TOKENS[key]
        fid = fidelity_df(t, pd.DataFrame(columns=["session", "call", "tokens_after",
                                                   "triggered"]))
        assert fid.loc[fid["real_compaction"], "call"].tolist() == [REAL[key]]
        post = int(fid.loc[fid["real_compaction"], "input_total"].iloc[0])
        assert 32_000 <= post <= 45_000


@pytest.mark.realdata
def test_the_trigger_is_167k_of_200k_not_92_percent(spotter):
    logs, _ = spotter
    b = pd.concat([threshold_bounds_df(t, window=WINDOW) for t in logs.values()])
    lower, upper = int(b["lower_tokens"].max()), int(b["upper_tokens"].min())
    assert (lower, upper) == (165_894, 167_094)
    # Claude Code's window - min(max output, 20k) - 13k lies inside, the preset's
    # autocompact limit ...
    assert lower < WINDOW - 20_000 - 13_000 <= upper
    p = ctxlab.preset("claude-code")
    assert lower < p.threshold * p.limit_for(WINDOW) <= upper
    # ... and the older rule, 92% of the window minus the 20k reserve, does not
    assert 0.92 * (WINDOW - 20_000) < lower
    assert (b["lower_ratio_available"] < 0.9278).all() and (b["upper_ratio_available"]
                                                            >= 0.9278).all()


@pytest.mark.realdata
def test_claude_codes_own_check_fires_first_at_every_real_compaction(spotter):
    logs, est = spotter
    for key, t in logs.items():
        c = claude_code_checks_df(t, est, window=WINDOW)
        assert (c["threshold_tokens"] == 167_000).all()
        first = c[c["fires"]].iloc[0]
        assert first["call"] == REAL[key] and bool(first["real_compaction"])
        assert first["pre_tokens"] == PRE_TOKENS[key]
        # the check is the recorded preTokens to within half a percent
        assert abs(first["checked_tokens"] / PRE_TOKENS[key] - 1) < 0.005
        # and every earlier check stayed under: at most 166,772 of 167,000
        assert c.loc[c["call"] < REAL[key], "checked_tokens"].max() < 167_000


@pytest.mark.realdata
def test_with_the_estimated_trigger_two_compactions_come_late(estimated):
    points, errors = _points(estimated), _errors(estimated)
    assert points["real_call"].to_dict() == REAL
    assert points["offset_calls"].to_dict() == ESTIMATED_OFFSETS
    # it fires as soon as its own estimate passes 167k; in the two late sessions that
    # estimate is up to 1.7% under the reported usage in the calls before
    assert (points["pre_tokens_est"] > 167_000).all()
    late = points.loc[["258c7280", "8463c716"]]
    assert (late["pre_tokens_est"] < 167_100).all()
    assert (late["pre_tokens_est_at_real"] < 167_000).all()
    assert errors["mape_pct"].max() <= ESTIMATED_MAPE_PCT
    assert errors["aligned_mape_pct"].max() <= ESTIMATED_ALIGNED_MAPE_PCT


@pytest.mark.realdata
def test_claude_code_predicts_each_compaction_and_every_call_within_bounds(reported):
    points, errors = _points(reported), _errors(reported)
    assert len(points) == 3 and points["compaction"].eq(0).all()
    assert points["real_call"].to_dict() == REAL
    assert points["offset_calls"].abs().max() <= OFFSET_CALLS
    assert points["offset_calls"].to_dict() == {k: 0 for k in REAL}
    # per call, against the reported input: mean absolute error per session over all
    # its calls, and the worst single call
    assert (errors["calls"] == errors["aligned_calls"]).all()
    assert errors["mape_pct"].max() <= MAPE_PCT
    assert errors["max_abs_error_pct"].max() <= MAX_ERROR_PCT
    assert points["post_error_pct"].abs().max() <= POST_INPUT_PCT
    # at the real call the log's own summary was sent (not a stand-in)
    for t, r in reported.values():
        f = r.transcript.frame
        meta = f.loc[(f["kind"] == "summary") & f["event"].notna(), "meta"]
        assert [json.loads(m)["backend"] for m in meta] == ["recorded"]


@pytest.mark.realdata
@pytest.mark.slow
def test_reattaching_files_and_the_plan_brings_every_session_closer(spotter, reported):
    logs, est = spotter
    bare = {k: (t, _replay(t, est, _pipeline(t, "reported", max_files=0, plans=())))
            for k, t in logs.items()}
    full, without = _errors(reported), _errors(bare)
    assert (full["mape_pct"] < without["mape_pct"]).all()
    assert (_points(bare)["post_input_est"] < _points(reported)["post_input_est"]).all()


@pytest.mark.realdata
def test_fidelity_df_against_reported_usage(estimated):
    for key, (t, r) in estimated.items():
        fid = fidelity_df(t, r)
        assert list(fid.columns) == list(FIDELITY_COLUMNS) and len(fid) == len(t.calls)
        assert fid["input_total"].tolist() == t.calls["input_total"].tolist()
        rows = r.calls.set_index("call")
        assert fid["est_tokens"].tolist() == rows.loc[fid["call"], "tokens_after"].tolist()
        assert fid["est_tokens_before"].tolist() == \
            rows.loc[fid["call"], "tokens_before"].tolist()
        err = fid["est_tokens"].astype(float) - fid["input_total"].astype(float)
        np.testing.assert_allclose(fid["error_tokens"].astype(float), err)
        np.testing.assert_allclose(fid["error_pct"].astype(float),
                                   100 * err / fid["input_total"].astype(float))
        assert fid.loc[fid["real_compaction"], "call"].tolist() == [REAL[key]]
        assert fid.loc[fid["predicted_compaction"], "call"].tolist() == \
            rows.index[rows["triggered"]].tolist()
        assert (fid["segment"] == (fid["call"] >= REAL[key]).astype(int)).all()
        e = fidelity_errors_df(fid).iloc[0]
        assert e["calls"] == len(t.calls)
        assert e["max_abs_error_pct"] == fid["error_pct"].abs().max()
        offset = abs(int(e["calls"]) - int(e["aligned_calls"]))
        assert offset == abs(REAL[key] - int(fid.loc[fid["predicted_compaction"], "call"]
                                             .iloc[0]))


@pytest.mark.realdata
@pytest.mark.slow
def test_compact_all_rows_give_the_same_answer(spotter, estimated):
    logs, est = spotter
    t = logs["4d5611e5"]
    _, rows = compact_all(t.rewind_recorded(), _pipeline(t, "estimated"), window=WINDOW,
                          estimator=est, overhead_tokens=session_overheads(t, est))
    got = compaction_points_df(t, rows).iloc[0]
    want = _points(estimated).loc["4d5611e5"]
    for col in ("real_call", "predicted_call", "pre_tokens_est", "post_input_est"):
        assert got[col] == want[col], col


# ---- the frames on small logs ------------------------------------------------------------
def _log() -> ctxlab.Transcript:
    """Four calls; a recorded compaction between calls 2 and 3 (pre_tokens 300)."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    b.part("text", "Fix the parser.")
    for k, (total, out) in enumerate([(100, 10), (180, 20), (260, 30)]):
        b.call(input_total=total, output_tokens=out)
        b.message("assistant")
        b.part("tool_call", f'Bash({{"command": "make {k}"}})', tool_name="Bash",
               tool_call_id=f"c{k}", call=k)
        b.message("user")
        b.part("tool_result", "ok", tool_name="Bash", tool_call_id=f"c{k}")
    ev = b.event(trigger="auto", pre_tokens=300, reason="test")
    b.hide(range(b.n_parts), ev)
    b.message("user")
    b.part("summary", "Summary: fixing the parser.", event=ev)
    b.call(input_total=50, output_tokens=5)
    b.message("assistant")
    b.part("text", "Done.", call=3)
    return assemble([b], log, {"format": "test"})


def _rows(after, triggered, before=None) -> pd.DataFrame:
    return pd.DataFrame({"session": "s", "call": range(len(after)), "tokens_after": after,
                         "tokens_before": before if before is not None else after,
                         "triggered": triggered, "stages_used": ["x" if t else ""
                                                                 for t in triggered]})


def test_fidelity_df_on_a_small_log():
    t = _log()
    fid = fidelity_df(t, _rows([110, 170, 250, 60], [False, False, True, False],
                               before=[110, 170, 320, 60]))
    assert fid["real_compaction"].tolist() == [False, False, False, True]
    assert fid["predicted_compaction"].tolist() == [False, False, True, False]
    assert fid["segment"].tolist() == [0, 0, 0, 1]
    assert fid["error_tokens"].tolist() == [10.0, -10.0, -10.0, 10.0]
    assert fid["error_pct"].round(6).tolist() == [10.0, -5.555556, -3.846154, 20.0]
    cp = compaction_points_df(t, _rows([110, 170, 250, 60], [False, False, True, False],
                                       before=[110, 170, 320, 60])).iloc[0]
    assert (cp["real_call"], cp["predicted_call"], cp["offset_calls"]) == (3, 2, -1)
    assert (cp["pre_tokens_recorded"], cp["pre_tokens_est"], cp["pre_tokens_est_at_real"],
            cp["post_input_reported"], cp["post_input_est"]) == (300, 320, 60, 50, 250)
    e = fidelity_errors_df(fid).iloc[0]
    assert (e["calls"], e["aligned_calls"]) == (4, 3)
    assert e["mape_pct"] == pytest.approx((10 + 5.555556 + 3.846154 + 20) / 4)
    assert e["max_abs_error_pct"] == pytest.approx(20.0)
    assert e["aligned_mape_pct"] == pytest.approx((10 + 5.555556 + 20) / 3)


def _short_log(n: int) -> ctxlab.Transcript:
    """A session of ``n`` calls with reported usage, no compaction."""
    log = RecordLog("mem.jsonl")
    b = SessionBuilder("s", log)
    b.message("user", real_user=True)
    b.part("text", "Fix the parser in src/parse.py, it fails on empty input.")
    for k in range(n):
        b.call(input_total=900 + 40 * k, output_tokens=10)
        b.message("assistant")
        b.part("text", f"Looking at step {k} of the parser.", call=k)
        b.message("user", real_user=True)
        b.part("text", f"Go on with step {k + 1}.")
    return assemble([b], log, {"format": "test"})


@pytest.mark.parametrize("n", [1, 2, 3])
def test_an_overhead_fitted_on_fewer_than_three_calls_measures_no_error(n):
    """The replay fits each session's overhead on its first segment's reported calls: on
    one or two calls that fit absorbs their error (0% on one call, whatever the
    estimate), so the error there is NA, as in reported_usage_df; from three calls on,
    and with an overhead given, it is measured."""
    t = _short_log(n)
    fitted = fidelity_df(t, ctxlab.replay(t, "neurolink", window=200_000))
    given = fidelity_df(t, ctxlab.replay(t, "neurolink", window=200_000, overhead_tokens=0))
    assert given["error_pct"].notna().all()
    assert fitted["error_pct"].notna().all() == (n >= 3)
    assert fitted["error_tokens"].isna().all() == (n < 3)
    assert fidelity_errors_df(fitted)["calls"].sum() == (n if n >= 3 else 0)


def test_a_compaction_at_a_call_without_usage_still_counts_for_alignment():
    """Calls are aligned when both sides compacted equally often: a predicted compaction
    at a call with no reported usage counts, though that call has no error to measure."""
    fid = pd.DataFrame({"session": "s", "call": [0, 1, 2, 3], "segment": [0, 0, 1, 1],
                        "input_total": pd.array([100, None, 300, 50], dtype="Int64"),
                        "est_tokens_before": pd.array([100, 200, 300, 60], dtype="Int64"),
                        "est_tokens": pd.array([100, 200, 300, 60], dtype="Int64"),
                        "error_tokens": pd.array([0.0, None, 0.0, 10.0], dtype="Float64"),
                        "error_pct": pd.array([0.0, None, 0.0, 20.0], dtype="Float64"),
                        "real_compaction": [False, False, True, False],
                        "predicted_compaction": [False, True, True, False]})
    e = fidelity_errors_df(fid).iloc[0]
    # replay: 1 compaction by call 1, 2 by call 2; the log: 1 by call 2 -> only call 0
    assert (e["calls"], e["aligned_calls"], e["aligned_mape_pct"]) == (3, 1, 0.0)


def test_a_triggered_call_where_no_stage_acted_is_not_a_prediction():
    rows = _rows([110, 170, 250, 60], [False, True, False, False])
    rows["stages_used"] = ""
    assert not fidelity_df(_log(), rows)["predicted_compaction"].any()


def test_missing_calls_and_unpaired_compactions_are_na():
    t = _log()
    rows = _rows([110, 170], [True, False])
    fid = fidelity_df(t, rows)
    assert fid["est_tokens"].isna().tolist() == [False, False, True, True]
    assert fid["error_pct"].isna().tolist() == [False, False, True, True]
    cp = compaction_points_df(t, _rows([110, 170, 250, 60], [False] * 4))
    assert len(cp) == 1 and pd.isna(cp["predicted_call"].iloc[0])
    assert pd.isna(cp["offset_calls"].iloc[0]) and pd.isna(cp["post_error_pct"].iloc[0])
    cp = compaction_points_df(t, _rows([110, 170, 250, 60], [True, False, True, False]))
    assert cp["compaction"].tolist() == [0, 1] and pd.isna(cp["real_call"].iloc[1])


def test_threshold_bounds_on_a_small_log():
    b = threshold_bounds_df(_log(), window=1_000, reserve_tokens=100).iloc[0]
    # checks before calls 1 and 2 did not fire: usage of calls 0 and 1 (input + output)
    assert (b["real_call"], b["lower_tokens"], b["upper_tokens"]) == (3, 200, 300)
    assert (b["lower_ratio_window"], b["upper_ratio_available"]) == (0.2, pytest.approx(1 / 3))


def test_claude_code_checks_on_a_small_log():
    t = _log()
    est = ctxlab.tokens.estimator("chars:4")
    c = claude_code_checks_df(t, est, window=400, reserve_tokens=35, buffer_tokens=100)
    # calls 1..3: the previous call's reported input, plus the parts that came in since
    # (its tool call and result); call 3 is the first after the recorded compaction
    f = t.frame
    new = [int(est.count_parts(f[f["pos"].isin([a, a + 1])]).sum()) for a in (1, 3, 5)]
    assert c["call"].tolist() == [1, 2, 3]
    assert c["checked_tokens"].tolist() == [100 + new[0], 180 + new[1], 260 + new[2]]
    assert (c["threshold_tokens"] == 265).all()
    assert c["fires"].tolist() == [False, False, True]
    assert c["real_compaction"].tolist() == [False, False, True]
    assert c["pre_tokens"].isna().tolist() == [True, True, False]
    assert c["pre_tokens"].iloc[2] == 300


def test_replay_rows_accepts_a_replay_or_rows_and_nothing_else():
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    r = ctxlab.replay(t, "claude-code", window=WINDOW)
    assert replay_rows(r) is r.calls
    assert replay_rows(r.calls) is r.calls
    with pytest.raises(ConfigError, match="lack"):
        fidelity_df(t, t)  # a transcript's calls are not replay rows
    with pytest.raises(ConfigError, match="second item"):
        fidelity_df(t, (t, r.calls))
    fid = fidelity_df(t, r)
    assert fid["real_compaction"].sum() == 1 and fid["predicted_compaction"].sum() >= 1
