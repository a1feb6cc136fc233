"""`ctxlab.measure`: a replay's requests counted by one estimator, and the sweeps that
compare configurations with it.

With the pipeline's own estimator it must give the replay's own request sizes, call by
call (on every preset, the bundled datasets and a real Claude Code log that compacted
itself: the overhead is fitted on the log as recorded, as the replay fits it). A sweep
then ranks configurations on what they send, not on how they count it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ctxlab
from ctxlab.errors import ConfigError
from ctxlab.measure import request_tokens
from ctxlab.pipeline import resolve_pipeline
from ctxlab.presets import preset_names
from ctxlab.recommend import aggregate
from ctxlab.sweep import MEASURE, sweep

DATASETS = Path(__file__).resolve().parents[1] / "datasets"
REAL = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "claude_code" / "spotter" \
    / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


def _own_spec(r: ctxlab.Replay) -> str:
    """The estimator the replay counted its (first) session with."""
    return r.estimator(str(r.calls["session"].iloc[0])).spec


def _logs() -> list[Path]:
    logs = [DATASETS / "coding_session.jsonl", DATASETS / "openai_sessions.jsonl"]
    return logs + [REAL] if REAL.exists() else logs


@pytest.mark.parametrize("log", _logs(), ids=lambda p: p.name[:24])
def test_the_pipelines_own_estimator_gives_the_replays_own_request_sizes(log):
    t = ctxlab.load(log)
    for name in preset_names():
        r = ctxlab.replay(t, name)
        got = request_tokens(r, _own_spec(r))
        np.testing.assert_array_equal(got, r.calls["tokens_after"].to_numpy(dtype=float),
                                      err_msg=name)
    # overheads given rather than fitted: the replay's own, whatever the estimator
    r = ctxlab.replay(t, "copilot-fixed", overhead_tokens=1234)
    np.testing.assert_array_equal(request_tokens(r, "chars:4"),
                                  r.calls["tokens_after"].to_numpy(dtype=float))


def test_the_real_log_is_skipped_with_a_reason_when_absent():
    if not REAL.exists():
        pytest.skip(f"{REAL} is absent (../shared/realdata not beside the repository)")
    assert REAL in _logs()


def test_configurations_that_send_the_same_requests_cost_the_same():
    """A window no request comes near: no preset compacts, each sends the log's requests.
    Counted each its own way they differed by a quarter; counted by the measure, not."""
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    grid = {"preset": ["claude-code", "probe"], "window": [10_000_000]}
    df = sweep(t, grid, workers=1)
    assert (df["events"] == 0).all()
    assert df["tokens_sent"].nunique() == 1 and df["cost"].nunique() == 1
    assert set(df["measure"]) == {MEASURE}
    # each counted by its own estimator, as before the measure: three totals
    own = {p: int(ctxlab.replay(t, resolve_pipeline(p), window=10_000_000)
                  .calls["tokens_after"].sum()) for p in grid["preset"]}
    assert len(set(own.values())) == 2


def test_results_counted_by_two_measures_do_not_aggregate():
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    a = sweep(t, {"preset": ["neurolink"]}, workers=1)
    b = sweep(t, {"preset": ["copilot-fixed"]}, workers=1, measure="chars:4")
    assert b["measure"].iloc[0] == "chars:4"
    with pytest.raises(ConfigError, match="different estimators"):
        aggregate(__import__("pandas").concat([a, b], ignore_index=True))


def test_a_measure_that_is_no_estimator_fails_before_any_replay():
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    with pytest.raises(ConfigError):
        sweep(t, {"preset": ["neurolink"]}, workers=1, measure="nope:1")
    with pytest.raises(ConfigError, match="estimator spec"):
        sweep(t, {"preset": ["neurolink"]}, workers=1, measure=3)


def test_the_cli_sweep_counts_with_the_measure_it_is_given(tmp_path, capsys):
    from ctxlab.cli import main

    out = tmp_path / "r.csv"
    assert main(["sweep", str(DATASETS / "coding_session_b.jsonl"), "--preset",
                 "neurolink,claude-code", "-o", str(out), "--measure", "chars:4"]) == 0
    text = capsys.readouterr().out
    assert "tokens sent and cost counted by chars:4" in text
    import pandas as pd
    assert set(pd.read_csv(out)["measure"]) == {"chars:4"}
    assert main(["sweep", str(DATASETS / "coding_session_b.jsonl"), "--preset", "neurolink",
                 "-o", str(out), "--measure", "nope:1"]) == 2
