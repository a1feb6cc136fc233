"""calibrate(reported) takes its shape from the parts the calls were sent, not every part."""

from __future__ import annotations

import pytest

import ctxlab
from ctxlab.tokens.accuracy import reported_usage_df, usage_errors_df
from ctxlab.visibility import sent_parts
from tests.conftest import DATASETS, realdata_path


def test_sent_parts_leaves_out_what_no_call_saw() -> None:
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    sent = sent_parts(t)
    last = t.calls["input_end_pos"].max()
    assert sent.any()
    assert not sent[(t.frame["pos"] >= last).to_numpy()].any()


@pytest.mark.realdata
def test_unsent_submission_diff_does_not_set_the_shape() -> None:
    # the trajectory's last user message, the 868k-character submission diff, was never
    # sent; it made the "logs" rate 0.506 tokens/char (sent tool output: 0.293), the
    # scale 1.03 and the per-call MAPE 5.7%
    t = ctxlab.load(realdata_path("mini_swe_agent/psf__requests-1142.traj.json"))
    est = ctxlab.calibrate(t)
    shape = est.rates.tokens_per_char["logs"] / est.rates.scale
    assert shape == pytest.approx(0.293, abs=0.005)
    assert est.rates.scale == pytest.approx(1.158, abs=0.01)
    mape = usage_errors_df(reported_usage_df(t, est))["mape_pct"].iloc[0]
    assert mape < 4.0


@pytest.mark.realdata
def test_a_reported_input_of_zero_is_unknown() -> None:
    # aider writes "Tokens: 0 sent" for calls it did not count (session 670: three of
    # them, $0.0083 to $0.01 each): they were fitted on (overhead_fitted_on 3) and showed
    # the whole estimate as error_tokens
    t = ctxlab.load(realdata_path("aider/chat-history.md"))
    u = reported_usage_df(t, "chars:4")
    zero = u[u["input_total"] == 0]
    assert len(zero) == 10
    assert zero["error_tokens"].isna().all() and zero["error_pct"].isna().all()
    assert (u.loc[u["session"] == "chat-history:670", "overhead_fitted_on"] == 0).all()
