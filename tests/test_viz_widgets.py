"""Widgets driven through their methods, without a browser, on the committed datasets.

The explorer's table is checked against the replay's own request (`Replay.at`), ledger
and events; re-runs against the replay's events; the built ipywidgets controls by
setting their values and clicking their buttons as a front end would.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

import ctxlab
from ctxlab import datasets
from ctxlab.viz import widgets_base
from ctxlab.viz.widgets import EstimatorLab, ReplayExplorer, parts_html, request_table_df

PRUNE_CALLS = [36, 87, 124]  # neurolink's compactions on coding_session (all by prune)


@pytest.fixture(scope="module")
def coding():
    return ctxlab.load(datasets.path("coding_session"))


# neurolink's triggered stages without its tool-output limit (which acts on every request):
# the compactions these tests are checked against
STAGES = ctxlab.preset("neurolink", always=())


@pytest.fixture(scope="module")
def replayed(coding):
    r = ctxlab.replay(coding, STAGES)
    assert r.events["call"].tolist() == PRUNE_CALLS and set(r.events["stage"]) == {"prune"}
    return r


@pytest.mark.parametrize("modules", ["ctxlab.viz.widgets",
                                     "ctxlab.viz.widgets_tuner, ctxlab.viz.plots_sweep"])
def test_importing_the_widgets_loads_neither_ipywidgets_nor_matplotlib(modules):
    code = (f"import sys, json, {modules}\n"
            "print(json.dumps([m for m in ('ipywidgets', 'matplotlib', 'IPython') "
            "if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []


def test_set_call_shows_that_calls_request(replayed):
    ex = ReplayExplorer(replayed)
    assert (ex.call, ex.side) == (36, "before")  # the first compacted call
    for k in (10, 100):
        ex.set_call(k)
        before, _ = replayed.at(k)
        table = ex.table()
        assert table["part"].tolist() == before["part"].tolist()
        assert table["tokens"].tolist() == before["tokens"].tolist()
        assert (table["status"] == "kept").all()  # nothing compacted at these calls
    assert len(ex.table()) != len(ReplayExplorer(replayed, call=10).table())
    with pytest.raises(ctxlab.ConfigError, match="calls 0–150"):
        ex.set_call(151)


def test_before_and_after_a_compaction(replayed):
    ex = ReplayExplorer(replayed, call=87)
    event = replayed.events[replayed.events["call"] == 87].iloc[0]
    hidden = replayed.ledger[(replayed.ledger["call"] == 87)
                             & (replayed.ledger["action"] == "hidden")]
    before = ex.table()
    struck = before[before["status"] != "kept"]
    assert sorted(struck["part"]) == sorted(hidden["part"]) and len(struck) == event["hidden"]
    assert set(struck["status"]) == {"pruned"} and set(struck["stage"]) == {"prune"}
    assert set(struck["reason"]) == {event["reason"]}
    page = parts_html(before)
    assert page.count("<s>") == len(struck) == page.count('data-status="pruned"')
    assert page.count(f"prune: {event['reason']}") == len(struck)

    ex.set_side("after")
    after = ex.table()
    assert after["part"].tolist() == replayed.at(87)[1]["part"].tolist()
    inserted = after[after["status"] == "inserted"]
    assert len(inserted) == event["inserted"] and not set(inserted["part"]) & set(struck["part"])
    assert after["tokens"].sum() < before["tokens"].sum()
    page = parts_html(after)
    assert "<s>" not in page and page.count("background:#FFF3C4") == len(inserted)
    with pytest.raises(ctxlab.ConfigError, match="'before' or 'after'"):
        ex.set_side("during")


def test_threshold_and_stages_rerun_the_replay(replayed):
    ex = ReplayExplorer(replayed)
    ex.set_threshold(0.6)
    assert ex.replay.pipeline.threshold == 0.6 and ex.replay is not replayed
    lower = ex.replay.events["call"].tolist()
    assert lower != PRUNE_CALLS and lower[0] < PRUNE_CALLS[0] and len(lower) > len(PRUNE_CALLS)
    ex.set_threshold(0.8)
    assert ex.replay is replayed  # back to the replay given: nothing re-run

    assert ex.stages == ("prune", "dedup", "summarize", "truncate", "repair")
    ex.set_stages(["dedup", "summarize", "truncate", "repair"])
    assert "prune" not in {s.name for s in ex.replay.pipeline.stages}
    stages = set(ex.replay.events["stage"])
    assert "prune" not in stages and stages & {"dedup", "summarize"}
    assert set(ex.replay.ledger["stage"]) == stages
    with pytest.raises(ctxlab.ConfigError, match="its stages: .*'prune'"):
        ex.set_stages(["prune", "compress"])
    with pytest.raises(ctxlab.ConfigError, match="threshold"):
        ex.set_threshold(0.0)
    assert ex.threshold == 0.8 and "prune" not in ex.stages  # a refused change changes nothing
    ex.reset()
    assert ex.replay is replayed and ex.stages[0] == "prune"


def test_rewind_then_resume_from_the_call(replayed):
    ex = ReplayExplorer(replayed, call=87)
    ex.rewind()
    r = ex.replay
    assert ex.rewound_at == {replayed.base.sessions[0]: 87}
    assert r.events["call"].tolist() == [36] and (r.ledger["call"] < 87).all()
    assert int(r.calls["call"].max()) == 86
    table = ex.table()  # call 87 as it stands: what it would send before compacting
    assert (table["status"] == "kept").all()
    assert table["part"].tolist() == replayed.at(87)[0]["part"].tolist()
    assert "not replayed" in ex.static_html(full=False)

    ex.set_threshold(0.6)  # resumes from call 87: call 36's compaction is kept as it was
    calls = ex.replay.events["call"].tolist()
    assert calls[0] == 36 and all(k >= 87 for k in calls[1:]) and calls != PRUNE_CALLS
    assert len(ex.replay.calls) == len(replayed.calls)
    pd.testing.assert_frame_equal(ex.replay.calls[ex.replay.calls["call"] < 87],
                                  replayed.calls[replayed.calls["call"] < 87])
    ev = ex.replay.events
    assert 87 in calls  # over 0.8 at call 87, so over 0.6 too: compacted again
    assert (ex.table()["status"] != "kept").sum() == ev.loc[ev["call"] == 87, "hidden"].sum()
    ex.reset()
    assert ex.rewound_at == {} and ex.replay is replayed


def test_content_is_escaped():
    table = pd.DataFrame({"part": [0, 1], "pos": [0.0, 1.0], "role": ["user", "assistant"],
                          "kind": ["text", "text"], "layer": ["prompt", "current"],
                          "tokens": [5, 7], "status": ["pruned", "kept"],
                          "stage": pd.array(["prune", pd.NA], dtype="string"),
                          "reason": pd.array(["<b>why</b> & how", pd.NA], dtype="string"),
                          "preview": ["<script>alert(1)</script>", 'a "quoted" <tag>']})
    page = parts_html(table, caption="<i>call</i>")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "prune: &lt;b&gt;why&lt;/b&gt; &amp; how" in page
    assert "&lt;tag&gt;" in page and "&lt;i&gt;call&lt;/i&gt;" in page


def test_real_content_with_markup_is_escaped(replayed):
    table = request_table_df(replayed, 150)
    shell = table.loc[table["preview"].str.contains("2>&1", regex=False), "preview"]
    assert len(shell) == 1
    page = ReplayExplorer(replayed, call=150).static_html(full=False)
    assert "2>&1" not in page and "2&gt;&amp;1" in page


def test_static_html_has_the_summary_tables_and_figures(replayed):
    page = ReplayExplorer(replayed, call=36).static_html()
    assert page.count("<svg") == 2 and "<?xml" not in page  # context map + layers
    assert 'class="ctxlab-parts"' in page and page.count("<s>") == 22
    assert "compactions" in page and "tokens_sent" in page  # the summary table


def test_display_without_a_kernel_is_the_static_html(replayed, monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw: shown.append(obj))
    ex = ReplayExplorer(replayed)
    assert not widgets_base.widget_frontend()
    monkeypatch.setattr(ReplayExplorer, "static_html", lambda self, full=True: f"static {full}")
    ex._ipython_display_()
    assert shown[-1]["text/html"] == "static True" and ex._box is None
    monkeypatch.setattr(widgets_base, "widget_frontend", lambda: True)
    ex._ipython_display_()
    assert "application/vnd.jupyter.widget-view+json" in shown[-1]
    assert shown[-1]["text/html"] == "static False"
    assert ex._repr_html_() == "static True"


def test_explorer_widget_controls_drive_the_state(replayed, monkeypatch):
    import ipywidgets
    from matplotlib.figure import Figure

    import ctxlab.viz.plots

    ex = ReplayExplorer(replayed)
    box = ex.widget
    W = ex._w
    assert box is ex.widget and not isinstance(box.children[0], ipywidgets.Dropdown)
    assert W["call"].value == 36 and W["context"].value[:4] == b"\x89PNG"
    drawn = []  # from here on, cheap stand-ins for the two figures record what is drawn

    def stub(name):
        def draw(replay, call=None, *, side, session):
            drawn.append((name, call, side))
            fig = Figure(figsize=(1, 1))
            fig.add_subplot().set_title(f"{name} {call} {side} {id(replay)}")
            return fig
        return draw
    monkeypatch.setattr(ctxlab.viz.plots, "plot_context", stub("context"))
    monkeypatch.setattr(ctxlab.viz.plots, "plot_layers", stub("layers"))
    W["call"].value = 87
    assert ex.call == 87 and "call 87," in W["table"].value
    assert drawn == [("context", 87, "before")]  # the layers figure was cached
    W["play"].value = 88
    assert ex.call == 88 == W["call"].value
    W["call"].value = 87
    assert drawn[-1] == ("context", 88, "before") and len(drawn) == 2  # 87 came from the cache
    W["side"].value = "after"
    assert ex.side == "after" and "FFF3C4" in W["table"].value
    W["stages"]["prune"].value = False
    assert "prune" not in ex.stages and "prune" not in set(ex.replay.events["stage"])
    W["rewind"].click()
    assert ex.rewound_at and int(ex.replay.calls["call"].max()) == 86
    assert W["context"].layout.display == "none"  # call 87 is not replayed: no map
    W["resume"].click()
    assert int(ex.replay.calls["call"].max()) == 150
    W["reset"].click()
    assert ex.replay is replayed and W["stages"]["prune"].value and W["threshold"].value == 0.8
    W["threshold"].value = 0.6
    assert ex.threshold == 0.6 and ex.replay.events["call"].iloc[0] < 36
    ex._guard(ex.set_threshold, 20.0)  # what a control's handler does with a refused value
    assert "threshold must be" in W["status"].value and ex.threshold == 0.6


def test_several_sessions(coding):
    t = ctxlab.load(datasets.path("openai_sessions"))
    r = ctxlab.replay(t, "neurolink", window=60_000)
    ex = ReplayExplorer(r)
    sessions = list(r.base.sessions)
    assert ex.session == sessions[0] and ex.call == 21  # its one compaction
    ex.set_session(sessions[1])
    assert ex.calls_of() == list(range(26)) and ex.call == 17
    ex.rewind()
    ev = ex.replay.events
    assert not ((ev["session"] == sessions[1]) & (ev["call"] >= 17)).any()
    assert (ev["session"] != sessions[1]).sum() == (r.events["session"] != sessions[1]).sum()
    assert ex.widget.children[0].options == tuple(sessions)
    with pytest.raises(ctxlab.ConfigError, match="unknown session"):
        ex.set_session("nope")


def test_estimator_lab_errors_follow_the_reference(coding):
    lab = EstimatorLab(coding, estimators=["chars:4", "neuron"])
    assert lab.reference == "tiktoken:o200k_base"
    first = lab.errors()
    expected = ctxlab.estimator_errors_df(ctxlab.compare_estimators_df(
        coding, ["chars:4", "neuron"], reference="tiktoken:o200k_base"))
    pd.testing.assert_frame_equal(first, expected)
    lab.set_reference("llama3")
    second = lab.errors()
    assert second["ref_tokens"].tolist() != first["ref_tokens"].tolist()
    assert second["total_error_pct"].tolist() != first["total_error_pct"].tolist()
    lab.set_estimators(["neuron", "chars:3"])
    assert set(lab.errors()["estimator"]) == {"neuron", "chars:3"} and "chars:3" in lab.options
    pivot = lab.pivot()
    assert pivot["content_class"].iloc[-1] == "all" and list(pivot.columns[2:]) == [
        "neuron", "chars:3"]
    with pytest.raises(ctxlab.ConfigError, match="unknown estimator"):
        lab.set_reference("nosuch:thing")
    lab.set_estimators([])
    assert lab.errors().empty and "at least one" in lab.static_html()


def test_estimator_lab_static_html_and_widget(coding):
    lab = EstimatorLab(coding, estimators=["chars:4", "neuron"], reference="tiktoken:cl100k_base")
    page = lab.static_html()
    assert page.count("<table") == 2 and page.count("<svg") == 1
    assert "tiktoken:cl100k_base" in page
    lab.widget
    lab._w["estimators"].value = ("neuron",)
    assert lab.estimators == ("neuron",) and "chars:4" not in lab._w["tables"].value
    lab._w["reference"].value = "tiktoken:o200k_base"
    assert lab.reference == "tiktoken:o200k_base" and lab._w["figure"].value[:4] == b"\x89PNG"
