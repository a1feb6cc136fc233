"""Every real log replays under every preset, and what a replay adds can be taken back.

A preset never met a log's own history edits (aider's 68 /clear) until they stayed in the
replay; two presets then stopped on aider's history. This runs the whole matrix (18 logs x
8 presets, about 10 s) so such a pair is found by the suite, not by a user.
"""

from __future__ import annotations

import pandas as pd
import pytest

import ctxlab
from ctxlab.presets import preset_names
from tests.conftest import REALDATA

LOGS = [] if not REALDATA.is_dir() else [
    path for path, status in zip(*[ctxlab.load_dir(REALDATA).files[c]
                                   for c in ("path", "status")]) if status == "log"]


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is absent")
@pytest.mark.parametrize("path", LOGS, ids=lambda p: str(p).split("realdata/")[-1])
def test_every_preset_replays_the_log_and_a_rewind_undoes_it(path):
    t = ctxlab.load(path)
    if t.calls.empty:
        pytest.skip("the log records no LLM call")
    for name in preset_names():
        r = ctxlab.replay(t, name)
        assert len(r.calls) == len(r.base.calls[r.base.calls["session"].isin(
            r.base.frame["session"])]), name
        pd.testing.assert_frame_equal(r.transcript.rewind().frame, r.base.rewind().frame,
                                      obj=name)
