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
