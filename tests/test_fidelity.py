"""Fidelity of the claude-code preset against real Claude Code logs, and the fidelity frames.

The real logs (``../shared/realdata/claude_code/spotter``: three Claude Code 2.1.39
sessions on claude-opus-4-6, one auto-compaction each) are replayed uncompacted with the
``claude-code`` preset. Tokens are counted with an estimator calibrated on the three
logs' reported usage (`ctxlab.calibrate` on the corpus), and each session's unrecorded
overhead is `ctxlab.tokens.accuracy.session_overheads`. Measured (deterministic):

=========  =========  ========  =================  =======================  ==============
session    real call  replayed  pre_tokens rec/est  post input rep/est       MAPE all/align
=========  =========  ========  =================  =======================  ==============
258c7280   102        105       167,094 / 167,004  33,960 / 38,002 (+11.9%)  8.9% / 2.0%
4d5611e5   61         61        170,251 / 170,678  36,081 / 31,456 (-12.8%)  7.8% / 7.8%
8463c716   71         73        167,731 / 167,032  42,603 / 35,958 (-15.6%)  9.0% / 5.2%
=========  =========  ========  =================  =======================  ==============

8463c716 used plan mode and a skill, which Claude Code also restores after compacting and
the model does not; that is most of its shortfall.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.fidelity import (
    FIDELITY_COLUMNS,
    compaction_points_df,
    fidelity_df,
    fidelity_errors_df,
    replay_rows,
    threshold_bounds_df,
)
from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.records import RecordLog
from ctxlab.pipeline import compact_all
from ctxlab.stages import stage
from ctxlab.tokens.accuracy import session_overheads
from tests.conftest import DATASETS, realdata_path

WINDOW = 200_000
REAL = {"258c7280": 102, "4d5611e5": 61, "8463c716": 71}
OFFSET_CALLS = 3  # measured: 3, 0, 2
PRE_TOKENS_PCT = 1.0  # measured: -0.05%, +0.25%, -0.42%
POST_INPUT_PCT = 20.0  # measured: +11.9%, -12.8%, -15.6%
MAPE_PCT = 12.0  # measured: 8.9%, 7.8%, 9.0%
ALIGNED_MAPE_PCT = 10.0  # measured: 2.0%, 7.8%, 5.2%


# ---- the real logs ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def spotter():
    corpus = ctxlab.load_dir(realdata_path("claude_code/spotter"))
    logs = {t.sessions[0][:8]: t for t in corpus}
    assert sorted(logs) == sorted(REAL)
    return logs, ctxlab.calibrate(corpus)


def _replay(t, est, pipeline="claude-code"):
    return ctxlab.replay(t, pipeline, window=WINDOW, estimator=est,
                         overhead_tokens=session_overheads(t, est))


@pytest.fixture(scope="module")
def replays(spotter):
    logs, est = spotter
    return {k: (t, _replay(t, est)) for k, t in logs.items()}


@pytest.fixture(scope="module")
def points(replays):
    return pd.concat([compaction_points_df(t, r).assign(key=k) for k, (t, r) in replays.items()],
                     ignore_index=True).set_index("key")


@pytest.mark.realdata
def test_the_logs_are_what_the_model_was_fitted_on(spotter):
    logs, _ = spotter
    for key, t in logs.items():
        rec = t.events[t.events["origin"] == "recorded"]
        assert len(rec) == 1 and rec["trigger"].iloc[0] == "auto"
        assert 167_000 <= rec["pre_tokens"].iloc[0] <= 171_000
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
    # Claude Code's window - min(max output, 20k) - 13k buffer lies inside; so does the
    # preset's 0.835 of the window (the same number for a 200k window) ...
    assert lower < WINDOW - 20_000 - 13_000 <= upper
    p = ctxlab.preset("claude-code")
    assert lower < p.threshold * p.limit_for(WINDOW) <= upper
    # ... and the older rule, 92% of the window minus the 20k reserve, does not
    assert 0.92 * (WINDOW - 20_000) < lower
    assert (b["lower_ratio_available"] < 0.9278).all() and (b["upper_ratio_available"]
                                                            >= 0.9278).all()


@pytest.mark.realdata
def test_claude_code_predicts_each_compaction_within_a_few_calls(points):
    assert len(points) == 3 and points["compaction"].eq(0).all()
    assert points["real_call"].to_dict() == REAL
    assert points["offset_calls"].abs().max() <= OFFSET_CALLS
    assert points["offset_calls"].to_dict() == {"258c7280": 3, "4d5611e5": 0, "8463c716": 2}
    pre = 100 * (points["pre_tokens_est"] / points["pre_tokens_recorded"] - 1)
    assert pre.abs().max() <= PRE_TOKENS_PCT
    # the replay fires exactly when its request first passes 167k
    assert (points["pre_tokens_est"] > 167_000).all()


@pytest.mark.realdata
def test_the_post_compaction_input_is_close_to_the_reported_one(points):
    assert points["post_error_pct"].abs().max() <= POST_INPUT_PCT
    est = points["post_input_est"].astype(int)
    assert ((est > 30_000) & (est < 45_000)).all()


@pytest.mark.realdata
@pytest.mark.slow
def test_reattaching_files_brings_the_post_compaction_input_closer(spotter, points):
    logs, est = spotter
    bare = replace(ctxlab.preset("claude-code"), stages=(stage("reattach", max_files=0),))
    errs = []
    for key, t in logs.items():
        cp = compaction_points_df(t, _replay(t, est, bare)).iloc[0]
        assert cp["predicted_call"] == points.loc[key, "predicted_call"]
        assert cp["post_input_est"] < points.loc[key, "post_input_est"]
        errs.append(abs(cp["post_error_pct"]))
    assert points["post_error_pct"].abs().mean() < np.mean(errs)


@pytest.mark.realdata
def test_fidelity_df_against_reported_usage(replays):
    for key, (t, r) in replays.items():
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
        assert e["calls"] == len(t.calls) and e["mape_pct"] <= MAPE_PCT
        assert e["aligned_mape_pct"] <= ALIGNED_MAPE_PCT
        offset = abs(int(e["calls"]) - int(e["aligned_calls"]))
        assert offset == abs(REAL[key] - int(fid.loc[fid["predicted_compaction"], "call"]
                                             .iloc[0]))


@pytest.mark.realdata
@pytest.mark.slow
def test_compact_all_rows_give_the_same_answer(spotter, points):
    logs, est = spotter
    t = logs["4d5611e5"]
    _, rows = compact_all(t.rewind_recorded(), "claude-code", window=WINDOW, estimator=est,
                          overhead_tokens=session_overheads(t, est))
    got = compaction_points_df(t, rows).iloc[0]
    want = points.loc["4d5611e5"]
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
    assert e["aligned_mape_pct"] == pytest.approx((10 + 5.555556 + 20) / 3)


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
