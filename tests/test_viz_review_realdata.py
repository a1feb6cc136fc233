"""The visual layer on real logs (``../shared/realdata``), as a demanding user drives it:
what each figure and message says is checked against the replay it shows."""

from __future__ import annotations

import numpy as np
import pytest

import ctxlab
from ctxlab.viz import plot_retention

from tests.conftest import realdata_path

SPOTTER = "claude_code/spotter/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"


def _markers_under_legend(fig) -> int:
    fig.draw_without_rendering()
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent()
    under = 0
    for dots in ax.collections:
        offsets = np.asarray(dots.get_offsets(), dtype=float)
        if not len(offsets) or not str(dots.get_gid()).startswith(("recall", "retention")):
            continue
        x, y = ax.transData.transform(offsets).T
        under += int(((x >= box.x0) & (x <= box.x1) & (y >= box.y0) & (y <= box.y1)).sum())
    return under


def test_retention_legend_hides_no_call_or_event():
    """Observation masking on a real Claude Code session: the legend sat in the lower left
    of the axes, over 5 of 220 dots and diamonds (calls 3-17, recall and retention 0-35%)."""
    t = ctxlab.load(realdata_path(SPOTTER))
    fig = plot_retention(ctxlab.replay(t, "observation-masking"))
    assert _markers_under_legend(fig) == 0
    assert fig.axes[0].get_legend().get_window_extent().x0 >= \
        fig.axes[0].get_window_extent().x1                   # beside the axes


@pytest.fixture(scope="module")
def aider():
    """588 sessions of a real aider history; copilot-fixed compacts calls 1-23 of some."""
    t = ctxlab.load(realdata_path("aider/chat-history.md"))
    return ctxlab.replay(t, "copilot-fixed")


def test_stages_of_a_call_no_stage_ran_at_lists_that_sessions_calls(aider):
    """plot_stages(call=3) looks in the first session, where no stage ran, but listed the
    calls of every session: 'no stage ran at call 3; calls with stage runs: [1, 2, 3, ...]'."""
    from ctxlab.viz import plot_stages

    with pytest.raises(ctxlab.ConfigError,
                       match=r"call 3 of session 'chat-history:2'; calls with stage runs: \[\]$"):
        plot_stages(aider, call=3)
    ev = aider.events.dropna(subset=["event"])
    s, call = ev["session"].iloc[0], int(ev["call"].iloc[0])
    assert plot_stages(aider, call=call, session=s).axes[0].get_title().startswith(
        f"Call {call}:")


def test_pareto_on_retention_of_a_sweep_that_hid_nothing_says_so():
    """A real Codex session that no configuration compacts: every retention is NaN. The
    plot drew empty axes with -0.04..0.04 ticks on both axes and a legend promising a
    recommended star and preset dots that were not drawn."""
    from ctxlab.viz import plot_sweep

    path = realdata_path("codex_cli/vibecodingtracker/codex.jsonl")
    res = ctxlab.sweep(str(path), {"preset": ["probe", "neuron"], "threshold": [0.5, 0.9]},
                       workers=1, progress=False)
    assert res["retention"].isna().all()
    ax = plot_sweep(res, y="retention").axes[0]
    assert [t.get_text() for t in ax.texts if t.get_gid() == "empty-message"] == [
        "No configuration has a retention: none hid an artifact, so there is no point to draw."]
    assert ax.get_legend() is None and len(ax.get_yticks()) == 0
    assert "4 with no retention (nothing hidden) not drawn" in ax.get_title()
    assert "recommended: probe, threshold=0.5 (no retention)" in ax.get_title()


def test_pareto_lists_no_star_for_a_recommendation_it_cannot_place():
    """The cheapest configuration hid nothing (NaN retention): its star was drawn at NaN
    (nowhere) while the legend listed 'recommended'."""
    from ctxlab.viz import plot_sweep
    from tests.test_viz_sweep import FAKE

    ax = plot_sweep(FAKE, "tokens_sent", "retention", constraints={},
                    objective="cost").axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any(t.startswith("recommended") for t in legend)
    assert not [c for c in ax.collections if c.get_gid() == "recommended"]
    assert "recommended: copilot-fixed, threshold=0.5 (no retention)" in ax.get_title()


def test_explorer_checkbox_of_a_stage_in_two_groups_names_both():
    """copilot-fixed runs carry_forward on every request and again enforced after; its one
    checkbox (unticking it drops both) was labelled 'carry_forward (enforce)'."""
    from ctxlab.viz import ReplayExplorer

    t = ctxlab.load(realdata_path("gemini_cli/vibecodingtracker/gemini.jsonl"))
    ex = ReplayExplorer(ctxlab.replay(t, "copilot-fixed"))
    pytest.importorskip("ipywidgets")
    ex.widget                               # builds the controls
    boxes = ex._w["stages"]
    assert boxes["carry_forward"].description == "carry_forward (always, enforce)"
    assert boxes["summarize"].description == "summarize"
    assert boxes["repair"].description == "repair (post)"
    boxes["carry_forward"].value = False
    p = ex.pipeline
    assert "carry_forward" not in {s.name for s in (*p.always, *p.enforce)}


def test_stages_of_an_unknown_session_is_an_error_not_an_empty_waterfall(aider):
    """A mistyped session drew 'No stage ran in session chat-history:9999: copilot-fixed
    compacted no request' as if that session existed; plot_layers and plot_retention raise."""
    from ctxlab.viz import plot_stages

    with pytest.raises(ctxlab.ConfigError, match="session 'chat-history:9999' has no replayed"):
        plot_stages(aider, session="chat-history:9999")
    quiet = next(s for s in aider.base.sessions if s not in set(aider.events["session"]))
    ax = plot_stages(aider, session=quiet).axes[0]        # a real session: says so
    assert any(t.get_gid() == "empty-message" for t in ax.texts)


def test_widgets_say_one_thing_in_the_singular():
    """ctxlab.wording's rule ('no message says "1 events" or "1 parts"') was not kept by the
    widgets: on a real Codex session they said '× 1 sessions', '1 configurations of 1
    presets', '1 estimators' and '1 calls replayed' (and on aider '1 parts, 1 tokens')."""
    import re

    from ctxlab.viz import EstimatorLab, ReplayExplorer, ThresholdTuner

    t = ctxlab.load(realdata_path("codex_cli/vibecodingtracker/codex.jsonl"))
    tuner = ThresholdTuner(ctxlab.sweep(t, {"preset": ["probe", "neuron"]}, workers=1,
                                        progress=False))
    tuner.set_presets(["probe"])
    ex = ReplayExplorer(ctxlab.replay(t, "neurolink"), call=1)
    ex.rewind()                                 # one call (call 0) replayed
    texts = {"tuner": tuner.static_html(full=False),
             "lab": EstimatorLab(t, estimators=["chars:4"]).static_html(full=False),
             "explorer": ex.static_html(full=False)}
    assert "1 call replayed" in texts["explorer"]
    assert "× 1 session<" in texts["tuner"] and "1 configuration of 1 preset;" in texts["tuner"]
    assert "Estimator lab: 1 estimator against" in texts["lab"]
    for name, text in texts.items():
        assert not re.search(r"(?<![\d,.])1 (calls|parts|tokens|events|sessions|configurations"
                             r"|presets|estimators)\b", text), name
