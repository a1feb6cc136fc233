"""Plots return Figures built from core results, without touching pyplot's global state.

Replay figures are checked against the replay's own frames: stacked bands against the
calls' tokens, waterfall steps against the events' savings, context blocks against the
request and the ledger, and SVG/PNG bytes against a second render in another process.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import replace

import matplotlib
import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab import datasets
from ctxlab.layers import LAYERS
from ctxlab.viz import (STAGE_STATUS, context_parts_df, figure_png, figure_svg, plot_context,
                        plot_estimators, plot_layers, plot_reported_usage, plot_retention,
                        plot_stages)
from tests.conftest import DATASETS


@pytest.fixture(scope="module")
def coding():
    return ctxlab.load(DATASETS / "coding_session_b.jsonl")


def test_plot_estimators_draws_one_series_per_estimator(coding):
    before = dict(matplotlib.rcParams)
    import matplotlib.pyplot as plt
    open_before = plt.get_fignums()
    compared = ctxlab.compare_estimators_df(coding, ["chars:4", "neuron"], reference="chars:3")
    fig = plot_estimators(compared)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chars:4", "neuron"]
    assert "chars:3" in ax.get_ylabel() and "%" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels and set(labels) <= set(compared["content_class"].astype(str))
    assert plt.get_fignums() == open_before and dict(matplotlib.rcParams) == before


def test_plot_into_a_given_axes(coding):
    from matplotlib.figure import Figure
    fig = Figure()
    ax = fig.add_subplot()
    usage = pd.concat([ctxlab.reported_usage_df(coding, e) for e in ("chars:4", "chars:3.6")])
    assert plot_reported_usage(usage, ax=ax) is fig
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts[0] == "reported input_total" and any("chars:3.6 (MAPE" in t for t in texts)
    assert ax.get_ylabel() == "input tokens (thousands)"


# --- figures of a replay -------------------------------------------------------------------

@pytest.fixture(scope="module")
def session_log():
    return ctxlab.load(datasets.path("coding_session"))


# neurolink's triggered stages without its tool-output limit (which acts on every request):
# the compactions these figures are checked against
STAGES = ctxlab.preset("neurolink", always=())


@pytest.fixture(scope="module")
def neurolink(session_log):
    """Three prune compactions, reported usage, one session."""
    return ctxlab.replay(session_log, STAGES)


@pytest.fixture(scope="module")
def tight(session_log):
    """A 25k window: 35 compactions using prune, dedup, summarize, truncate and repair."""
    return ctxlab.replay(session_log, STAGES, window=25_000)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A small generated session (seeded): 7 events of dedup, summarize and truncate."""
    s = datasets.generate_session("coding", seed=3, calls=30, big_outputs=0)
    path = datasets.write_claude_code(s, tmp_path_factory.mktemp("gen") / "s.jsonl")
    return ctxlab.replay(ctxlab.load(path), STAGES, window=60_000)


def _by_gid(artists, gid):
    found = [a for a in artists if a.get_gid() == gid]
    assert len(found) == 1, f"{gid}: {len(found)} artists"
    return found[0]


def _top_of_stack(ax, x):
    """The y of the stack's top at each x (the last band's upper edge), in the axes' units."""
    top = _by_gid(ax.collections, "layer-framing").get_paths()[0].vertices
    upper = {}
    for vx, vy in top:
        upper[vx] = max(upper.get(vx, -np.inf), vy)
    return np.array([upper[float(v)] for v in x])


@pytest.mark.parametrize("side", ["after", "before"])
def test_plot_layers_stack_totals_and_compaction_markers(tight, side):
    fig = plot_layers(tight, side=side)
    ax = fig.axes[0]
    c = tight.calls
    assert np.allclose(_top_of_stack(ax, c["call"]) * 1000, c[f"tokens_{side}"], atol=1e-6)
    bands = [f"layer-{k}" for k in (*LAYERS, "framing")]
    assert [p.get_gid() for p in ax.collections[:len(bands)]] == bands
    marks = _by_gid(ax.lines, "compactions")
    assert marks.get_xdata().tolist() == c.loc[c["compacted"], "call"].tolist()
    assert len(marks.get_xdata()) == int(c["compacted"].sum()) == 35
    drops = np.array(_by_gid(ax.collections, "compaction-drops").get_segments()) * 1000
    done = c[c["compacted"]]
    assert np.allclose(drops[:, 0, 1], done["tokens_after"])  # from after ...
    assert np.allclose(drops[:, 1, 1], done["tokens_before"])  # ... up to before
    assert ax.get_ylabel() == "tokens (thousands)" and ax.get_xlabel() == "LLM call"


def _at_calls(line):
    """A stepped line's y at each call (the middle of the three points it has per call)."""
    x, y = line.get_xdata(), line.get_ydata()
    assert np.array_equal(x[1::3], np.round(x[1::3]))
    return y[1::3]


def test_plot_layers_limit_lines_and_reported_overlay(neurolink):
    ax = plot_layers(neurolink).axes[0]
    c = neurolink.calls
    assert np.allclose(_at_calls(_by_gid(ax.lines, "window")) * 1000, c["window_tokens"])
    assert np.allclose(_at_calls(_by_gid(ax.lines, "limit")) * 1000, c["limit_tokens"])
    assert np.allclose(_at_calls(_by_gid(ax.lines, "threshold")) * 1000,
                       neurolink.pipeline.threshold * c["limit_tokens"])
    assert "target" not in {line.get_gid() for line in ax.lines}  # target == threshold here
    # reported usage is drawn while the replayed request is the logged one: before the first
    # compaction at call 36 (after it, the stack shows the compacted request), and up to
    # call 36 itself beside the requests before compaction
    y = _at_calls(_by_gid(ax.lines, "reported"))
    shown = np.isfinite(y)
    assert c.loc[shown, "call"].max() == 35 and shown.sum() == 36
    assert np.allclose(y[shown] * 1000, c.loc[shown, "input_total"])
    before = np.isfinite(_at_calls(_by_gid(plot_layers(neurolink, side="before").axes[0].lines,
                                           "reported")))
    assert c.loc[before, "call"].max() == 36 and before.sum() == 37
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "L4 history" in legend and "trigger at 80% of limit" in legend


def test_plot_layers_without_reported_usage_draws_no_overlay(neurolink):
    calls = neurolink.calls.assign(input_total=pd.array([pd.NA] * len(neurolink.calls),
                                                        dtype="Int64"))
    ax = plot_layers(replace(neurolink, calls=calls)).axes[0]
    assert "reported" not in {line.get_gid() for line in ax.lines}


def test_plot_stages_waterfall_of_one_call_sums_to_its_savings(tight):
    ev = tight.events[tight.events["call"] == 31]
    assert ev["stage"].tolist() == ["summarize", "truncate", "repair"]
    ax = plot_stages(tight, call=31).axes[0]
    gids = [p.get_gid() for p in ax.patches]
    assert gids == ["before", "stage-summarize", "stage-truncate", "stage-repair", "after"]
    bars = {p.get_gid(): p for p in ax.patches}
    saved = [bars[f"stage-{s}"].get_height() * 1000 for s in ev["stage"]]
    assert np.allclose(saved, ev["tokens_saved"].abs())
    call = tight.calls.set_index("call").loc[31]
    assert np.isclose(bars["before"].get_height() * 1000, call["tokens_before"])
    assert np.isclose(bars["after"].get_height() * 1000, call["tokens_after"])
    # each step starts where the previous ended; repair added tokens, so it rises
    assert np.isclose(bars["stage-truncate"].get_y() * 1000, call["tokens_before"]
                      - ev["tokens_saved"].iloc[:2].sum())
    assert bars["stage-repair"].get_hatch() == "//" and ev["tokens_saved"].iloc[2] < 0
    assert ax.get_ylabel() == "tokens (thousands)"


def test_plot_stages_summed_over_the_replay(tight):
    ev = tight.events
    ax = plot_stages(tight).axes[0]
    bars = {p.get_gid(): p for p in ax.patches}
    order = [p.get_gid() for p in ax.patches][1:-1]
    assert order == [f"stage-{s}" for s in ("prune", "dedup", "summarize", "truncate",
                                            "repair")]  # the pipeline's order
    for stage, total in ev.groupby("stage")["tokens_saved"].sum().items():
        assert np.isclose(bars[f"stage-{stage}"].get_height() * 1000, abs(total))
    compacted = tight.calls[tight.calls["compacted"]]
    assert np.isclose(bars["before"].get_height() * 1000, compacted["tokens_before"].sum())
    assert np.isclose(bars["after"].get_height() * 1000, compacted["tokens_after"].sum())
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks[3] == "summarize\n×22" and ticks[0] == "before\n(35 calls)"


def test_plot_stages_names_the_calls_that_ran_stages(neurolink):
    with pytest.raises(ctxlab.ConfigError, match=r"no stage ran at call 5; .*\[36, 87, 124\]"):
        plot_stages(neurolink, call=5)


@pytest.mark.parametrize("call", [31, 141])
def test_plot_context_blocks_match_the_request_and_the_ledger(tight, call):
    before, after = tight.at(call)
    led = tight.ledger[tight.ledger["call"] == call]
    hidden = dict(zip(led.loc[led["action"] == "hidden", "part"],
                      led.loc[led["action"] == "hidden", "stage"].astype(str)))
    inserted = set(led.loc[led["action"] == "inserted", "part"]) - set(hidden)
    for side, parts in (("before", before), ("after", after)):
        ax = plot_context(tight, call, side=side).axes[0]
        blocks = {int(g.split("-")[1]): (g.split("-")[2], p) for p in ax.patches
                  if (g := p.get_gid())}
        assert len(ax.patches) == len(blocks) == len(parts)
        assert set(blocks) == set(parts["part"])
        for part, (status, patch) in blocks.items():
            if side == "before":
                want = STAGE_STATUS[hidden[part]] if part in hidden else "kept"
            else:
                want = "inserted" if part in inserted else "kept"
            assert status == want
            assert (patch.get_hatch() is None) == (status in ("kept", "inserted"))
            if status == "inserted":
                assert patch.get_edgecolor()[:3] == (0.0, 0.0, 0.0)
        width = sum(p.get_width() for p in ax.patches) * 1000
        assert np.isclose(width, parts["tokens"].sum())
        assert "tokens (thousands)" in ax.get_xlabel()
    statuses = {STAGE_STATUS[s] for s in hidden.values()}
    assert statuses == {"summarised", "dropped"}


def test_plot_context_opens_l1_with_the_unrecorded_overhead_and_totals_the_request():
    """The fitted overhead is in the replay's L1 sums: the map draws it (before the
    system parts), and its title adds it and the message framing to the parts' tokens
    to give the request's total, as `Replay.calls` has it."""
    r = ctxlab.replay(ctxlab.load(DATASETS / "coding_session.jsonl"), STAGES,
                      overhead_tokens=5_000)
    row = r.calls.set_index("call").loc[36]
    for side, col in (("before", "tokens_before"), ("after", "tokens_after")):
        parts = context_parts_df(r, 36, side=side)
        ax = plot_context(r, 36, side=side).axes[0]
        over = [p for p in ax.patches if p.get_gid() == "overhead"]
        assert len(over) == 1 and np.isclose(over[0].get_width() * 1000, 5_000)
        assert over[0].get_x() == 0
        assert not [p for p in ax.patches if p.get_gid().startswith("part-")
                    and np.isclose(p.get_y(), over[0].get_y())]   # this log records no L1
        framing = int(row[col]) - int(parts["tokens"].sum()) - 5_000
        assert framing > 0
        assert ax.get_title().endswith(f"{int(row[col]):,} tokens — {len(parts):,} parts "
                                       f"{int(parts['tokens'].sum()):,} + 5,000 unrecorded + "
                                       f"{framing:,} message framing")
    r0 = ctxlab.replay(ctxlab.load(DATASETS / "coding_session.jsonl"), STAGES,
                       overhead_tokens=0)
    assert not [p for p in plot_context(r0, 36).axes[0].patches if p.get_gid() == "overhead"]
    # a log that records its system prompt: the overhead comes first, its parts after it
    r = ctxlab.replay(ctxlab.load(DATASETS / "projects_mode.jsonl"), STAGES,
                      overhead_tokens=5_000)
    ax = plot_context(r, 3).axes[0]
    over = next(p for p in ax.patches if p.get_gid() == "overhead")
    system = [p for p in ax.patches if p.get_gid().startswith("part-")
              and np.isclose(p.get_y(), over.get_y())]
    assert len(system) == 1 and np.isclose(system[0].get_x() * 1000, 5_000)


def test_context_parts_df_offsets_lay_parts_end_to_end_per_layer(neurolink):
    parts = context_parts_df(neurolink, 36)
    hid = neurolink.ledger[(neurolink.ledger["call"] == 36)
                           & (neurolink.ledger["action"] == "hidden")]
    assert parts.loc[parts["status"] == "pruned", "tokens"].sum() == hid["tokens"].sum()
    for _, g in parts.groupby("layer"):
        assert (g["offset_tokens"].iloc[1:].to_numpy()
                == (g["offset_tokens"] + g["tokens"]).iloc[:-1].to_numpy()).all()
    with pytest.raises(ctxlab.ConfigError, match="side must be"):
        context_parts_df(neurolink, 36, side="during")


def test_plot_retention_shows_recall_per_call_and_retention_per_event(neurolink):
    ax = plot_retention(neurolink).axes[0]
    rec = neurolink.recall()
    need = rec[rec["needed"] > 0]
    full = _by_gid(ax.collections, "recall-full").get_offsets()
    lost = _by_gid(ax.collections, "recall-missing").get_offsets()
    assert len(full) + len(lost) == len(need) and len(lost) == (need["missing"] > 0).sum() == 3
    assert np.allclose(np.asarray(lost)[:, 1], need.loc[need["missing"] > 0, "recall"] * 100)
    pooled = _by_gid(ax.lines, "recall-cumulative").get_ydata()
    assert np.isclose(pooled[-1], 100 * (1 - need["missing"].sum() / need["needed"].sum()))
    ret = neurolink.retention()
    ret = ret[ret["kind"] == "all"]
    diamonds = np.asarray(_by_gid(ax.collections, "retention-prune").get_offsets())
    assert diamonds[:, 0].tolist() == [36, 87, 124]
    assert np.allclose(diamonds[:, 1], ret["retention"] * 100)
    assert "%" in ax.get_ylabel() and ax.get_xlabel() == "LLM call"


def test_replay_plots_draw_into_a_given_axes_without_global_state(generated):
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    before, open_before = dict(matplotlib.rcParams), plt.get_fignums()
    fig = Figure()
    axes = fig.subplots(2, 2)
    call = int(generated.events["call"].iloc[0])
    assert plot_layers(generated, ax=axes[0, 0]) is fig
    assert plot_stages(generated, ax=axes[0, 1]) is fig
    assert plot_context(generated, call, ax=axes[1, 0]) is fig
    assert plot_retention(generated, ax=axes[1, 1]) is fig
    assert all(ax.has_data() for ax in axes.flat)
    assert plt.get_fignums() == open_before and dict(matplotlib.rcParams) == before


def test_unknown_session_lists_the_sessions(neurolink):
    with pytest.raises(ctxlab.ConfigError, match="611c338b"):
        plot_layers(neurolink, session="nope")
    with pytest.raises(ctxlab.ConfigError, match="side must be"):
        plot_layers(neurolink, side="middle")


# --- deterministic rendering ---------------------------------------------------------------

_RENDER = """
import hashlib, sys
import ctxlab
from ctxlab import datasets
from ctxlab.viz import figure_png, figure_svg, plot_context, plot_layers, plot_stages
s = datasets.generate_session("coding", seed=3, calls=30, big_outputs=0)
r = ctxlab.replay(ctxlab.load(datasets.write_claude_code(s, sys.argv[1])),
                  ctxlab.preset("neurolink", always=()), window=60_000)
call = int(r.events["call"].iloc[0])
for fig in (plot_layers(r), plot_stages(r), plot_context(r, call)):
    print(hashlib.sha256(figure_svg(fig).encode()).hexdigest(),
          hashlib.sha256(figure_png(fig)).hexdigest())
"""


def test_figure_svg_and_png_are_the_same_bytes_for_the_same_input(generated, tmp_path):
    call = int(generated.events["call"].iloc[0])
    figs = [plot_layers(generated), plot_stages(generated), plot_context(generated, call)]
    svgs = [figure_svg(f) for f in figs]
    pngs = [figure_png(f) for f in figs]
    again = [plot_layers(generated), plot_stages(generated), plot_context(generated, call)]
    assert [figure_svg(f) for f in again] == svgs and [figure_png(f) for f in again] == pngs
    assert all("<dc:date>" not in s and "clipPath" in s for s in svgs)
    assert all(b"Software" not in p for p in pngs)
    assert matplotlib.rcParams["svg.hashsalt"] is None  # only set while rendering
    mine = [f"{hashlib.sha256(s.encode()).hexdigest()} {hashlib.sha256(p).hexdigest()}"
            for s, p in zip(svgs, pngs)]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # another set and dict-key order
    out = subprocess.run([sys.executable, "-c", _RENDER, str(tmp_path / "s.jsonl")],
                         check=True, capture_output=True, text=True, env=env,
                         cwd=str(DATASETS.parent))
    assert out.stdout.split("\n")[:3] == mine


def test_import_viz_loads_no_matplotlib():
    code = "import sys, ctxlab.viz; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def two_sessions(tmp_path_factory):
    """Two generated sessions in one OpenAI-format log: dedup and summarize in each."""
    sessions = [datasets.generate_session("coding", seed=k, calls=20, big_outputs=0)
                for k in (3, 4)]
    path = datasets.write_openai(sessions, tmp_path_factory.mktemp("two") / "o.jsonl")
    return ctxlab.replay(ctxlab.load(path), STAGES, window=60_000)


def test_plots_of_one_session_of_several(two_sessions):
    r = two_sessions
    s = r.base.sessions[1]
    mine = r.events[r.events["session"] == s]
    assert len(mine) and len(r.events) > len(mine)
    ax = plot_layers(r, session=s).axes[0]
    assert f"session {s[:8]}" in ax.get_title()
    calls = r.calls[r.calls["session"] == s]
    marks = _by_gid(ax.lines, "compactions").get_xdata().tolist()
    assert marks == calls.loc[calls["compacted"], "call"].tolist()
    ret = r.retention()
    ret = ret[(ret["session"] == s) & (ret["kind"] == "all") & (ret["hidden_artifacts"] > 0)]
    ax = plot_retention(r, session=s).axes[0]
    xs = sorted(x for c in ax.collections if (c.get_gid() or "").startswith("retention-")
                for x in np.asarray(c.get_offsets())[:, 0])
    call_of = dict(zip(mine["event"].astype(int), mine["call"]))
    assert len(ret) and xs == sorted(call_of[e] for e in ret["event"])
    k = int(mine["call"].iloc[-1])
    ax = plot_stages(r, call=k, session=s).axes[0]
    saved = mine.loc[mine["call"] == k, "tokens_saved"]
    assert np.isclose(sum(p.get_height() for p in ax.patches[1:-1]) * 1000, saved.abs().sum())
    ax = plot_stages(r).axes[0]  # every session summed
    assert np.isclose(sum(p.get_height() for p in ax.patches[1:-1]) * 1000,
                      r.events["tokens_saved"].abs().sum())


def _conversation(sid: str, calls: int) -> dict:
    msgs = [{"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "Please fix the bug in src/app.py and run pytest."}]
    for i in range(calls):
        msgs.append({"role": "assistant", "content": f"step {i}: " + "reading code " * 400,
                     "usage": {"prompt_tokens": 300 + 1300 * i, "completion_tokens": 50,
                               "total_tokens": 350 + 1300 * i}})
        msgs.append({"role": "user", "content": f"go on {i}"})
    return {"id": sid, "model": "gpt-4o", "messages": msgs}


def test_text_from_the_log_is_drawn_as_written(tmp_path):
    """Two $ in a session id made matplotlib read the text between as TeX: '\\x' failed
    the whole figure (and `ctxlab report`); '$5-$10' was drawn garbled."""
    import json

    p = tmp_path / "dollar.jsonl"
    p.write_text("\n".join(json.dumps(_conversation(sid, 12)) for sid in
                           (r"$\x$-run", "$5-$10 b")), encoding="utf-8")
    r = ctxlab.replay(ctxlab.load(p), "observation-masking", window=8_000)
    for s in (r"$\x$-run", "$5-$10 b"):
        fig = plot_layers(r, session=s)
        title = fig.axes[0].get_title()
        assert s in title and not fig.axes[0].title.get_parse_math()
        figure_svg(fig)                      # drawn without a TeX error
    import matplotlib
    assert matplotlib.rcParams["text.parse_math"]     # nothing global changed


def test_one_call_is_drawn_as_a_bar_and_the_default_session_has_calls(tmp_path):
    import json

    p = tmp_path / "one.jsonl"
    p.write_text("\n".join([json.dumps({"id": "empty", "model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"}]}), json.dumps(_conversation("one", 1))]),
        encoding="utf-8")
    r = ctxlab.replay(ctxlab.load(p), "neurolink")
    assert r.calls["session"].tolist() == ["one"]
    ax = plot_layers(r).axes[0]                # the first session has no call
    xs = _by_gid(ax.collections, "layer-framing").get_paths()[0].vertices[:, 0]
    assert xs.min() < 0 < xs.max()             # a width around call 0
    window = _by_gid(ax.lines, "window").get_xdata()
    assert window.tolist() == [-0.5, 0, 0.5]   # the call's width, as its stack
    with pytest.raises(ctxlab.ConfigError, match="sessions with calls: 'one'$"):
        plot_layers(r, session="empty")


def test_reported_usage_needs_reported_usage(coding):
    u = ctxlab.reported_usage_df(coding, "chars:4").assign(input_total=pd.NA)
    with pytest.raises(ctxlab.ConfigError, match="report no input usage"):
        plot_reported_usage(u)


def test_plot_layers_scales_to_requests_far_under_the_trigger(coding):
    """A session whose requests stay far under the trigger was a flat sliver under the
    window's line (an aider session of 1,657 tokens in a 200k window); the axis now
    scales to the requests and says the lines lie above."""
    big = ctxlab.replay(coding, "neurolink", window=20_000_000)
    ax = plot_layers(big).axes[0]
    peak = big.calls["tokens_before"].max() / 1000
    assert peak < ax.get_ylim()[1] <= 1.25 * peak
    note = [t.get_text() for t in ax.texts if t.get_gid() == "lines-above"]
    assert len(note) == 1 and "window (20,000,000 tokens)" in note[0]
    ax = plot_layers(ctxlab.replay(coding, "neurolink", window=200_000)).axes[0]
    assert ax.get_ylim()[1] > 200 and not ax.texts     # the window's line in view
