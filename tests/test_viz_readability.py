"""What a reader sees on awkward inputs: empty results say so instead of drawing empty axes,
many sessions keep their tick labels readable, whole calls get whole-number ticks, colours
mean one thing per figure, and crowded labels do not pile up.

Found by rendering every plot on the bundled datasets and on real logs (an aider log of
588 sessions, one-call and two-call sessions, a replay that compacts nothing).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import ctxlab
from ctxlab import datasets
from ctxlab.viz import (plot_estimators, plot_layers, plot_reported_usage, plot_retention,
                        plot_stages, plot_sweep, sweep_front_df)
from ctxlab.viz.plots import MAX_GROUPS
from ctxlab.viz.plots_replay import replay_stage_colours
from ctxlab.viz.report import _Cells
from ctxlab.viz.style import (ESTIMATOR_COLOURS, ESTIMATOR_DEFAULTS, LAYER_COLOURS, MISSING_COLOUR,
                              NEUTRAL, PALETTE, estimator_colours, stage_colours)

from tests.conftest import DATASETS

STAGES = ctxlab.preset("neurolink", always=())


def _gid(artists, gid):
    return [a for a in artists if a.get_gid() == gid]


@pytest.fixture(scope="module")
def quiet():
    """Four OpenAI sessions neurolink never compacts: no event, no stage ran."""
    r = ctxlab.replay(ctxlab.load(DATASETS / "openai_sessions.jsonl"), "neurolink")
    assert r.events.empty
    return r


@pytest.fixture(scope="module")
def coding():
    return ctxlab.replay(ctxlab.load(datasets.path("coding_session")), STAGES)


def _messages(sid: str, calls: int) -> dict:
    msgs = [{"role": "user", "content": "hello " * 50}]
    for i in range(calls):
        msgs.append({"role": "assistant", "content": f"reply {i} " * 40,
                     "usage": {"prompt_tokens": 100 + 90 * i, "completion_tokens": 20,
                               "total_tokens": 120 + 90 * i}})
        msgs.append({"role": "user", "content": f"more {i} " * 30})
    return {"id": sid, "model": "gpt-4o", "messages": msgs}


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    """One session of two calls that needs no earlier fact and compacts nothing."""
    import json

    p = tmp_path_factory.mktemp("short") / "two.jsonl"
    p.write_text(json.dumps(_messages("two-calls", 2)) + "\n", encoding="utf-8")
    t = ctxlab.load(p)
    return t, ctxlab.replay(t, "neurolink")


# --- empty results say why ---------------------------------------------------------------

def test_stages_of_a_replay_that_compacted_nothing_say_so(quiet):
    ax = plot_stages(quiet).axes[0]
    [msg] = _gid(ax.texts, "empty-message")
    assert "No stage ran" in msg.get_text() and "neurolink" in msg.get_text()
    assert not ax.patches and len(ax.get_yticks()) == 0   # no 0.00–0.05 "tokens" axis
    assert "nothing compacted" in ax.get_title()


def test_retention_with_nothing_to_measure_says_so(short):
    _, r = short
    ax = plot_retention(r).axes[0]
    [msg] = _gid(ax.texts, "empty-message")
    assert "nothing to measure" in msg.get_text()
    assert ax.get_legend() is None


def test_estimators_of_no_parts_say_so_and_an_unknown_grouping_names_the_columns(coding):
    compared = ctxlab.compare_estimators_df(coding.base, ["chars:4"], reference="chars:3")
    ax = plot_estimators(compared.iloc[0:0]).axes[0]
    assert _gid(ax.texts, "empty-message")
    with pytest.raises(ctxlab.ConfigError, match="by='role' is not a column.*content_class"):
        plot_estimators(compared, by="role")


# --- ticks a reader can use ----------------------------------------------------------------

def _visible_ticks(ax):
    lo, hi = ax.get_xlim()
    return [t for t in ax.get_xticks() if lo <= t <= hi]


def test_call_axes_have_whole_calls_and_no_call_past_the_last(short):
    t, r = short
    calls = r.calls["call"].tolist()
    assert calls == [0, 1]
    for fig in (plot_layers(r), plot_retention(r)):
        ticks = _visible_ticks(fig.axes[0])
        assert ticks and all(float(x).is_integer() for x in ticks)
        assert max(ticks) <= max(calls)     # the layers plot ran to a phantom call 2
    usage = ctxlab.reported_usage_df(t, "chars:4")
    ax = plot_reported_usage(usage).axes[0]
    assert all(float(x).is_integer() for x in _visible_ticks(ax))
    assert ax.get_ylim()[0] == 0           # tokens from zero, not from 3.5k


def test_a_layers_legend_lists_no_compactions_when_there_were_none(short):
    _, r = short
    ax = plot_layers(r).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert not any("compacted call" in t for t in legend)
    assert len(_gid(ax.lines, "compactions")) == 1       # still there for code that looks


def _many_sessions(n: int) -> pd.DataFrame:
    rows = []
    for k in range(n):
        for part in range(1 + k % 4):
            for est, err in (("chars:4", -25.0), ("neuron", -20.0)):
                rows.append({"session": f"3f1b{k:04d}-aaaa-bbbb-cccc-{k:012d}", "part": part,
                             "kind": "text", "content_class": "prose", "chars": 400,
                             "reference": "chars:3", "ref_tokens": 134, "estimator": est,
                             "est_tokens": 100, "error_tokens": -34, "error_pct": err})
    return pd.DataFrame(rows)


def test_estimators_by_session_of_hundreds_of_sessions_keep_ticks_readable():
    compared = _many_sessions(588)
    ax = plot_estimators(compared, by="session").axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == MAX_GROUPS
    assert all(len(x) <= 20 for x in labels)                # session_label, not 36-char ids
    assert all(t.get_rotation() == 45 for t in ax.get_xticklabels())
    assert "of 588" in ax.get_title() and "not drawn" in ax.get_title()
    # the sessions with the most parts (4 parts: k % 4 == 3), in log order
    assert labels[0] == "3f1b0003" and labels[1] == "3f1b0007"
    few = plot_estimators(_many_sessions(5), by="session").axes[0]
    assert len(few.get_xticklabels()) == 5 and "not drawn" not in few.get_title()


def test_estimator_legend_sits_beside_the_boxes_not_on_them(coding):
    compared = ctxlab.compare_estimators_df(coding.base, ["chars:4", "neuron"],
                                            reference="chars:3")
    fig = plot_estimators(compared)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    legend, frame = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.x0 >= frame.x1                            # outside the axes


# --- colours mean one thing ---------------------------------------------------------------

def test_retention_markers_share_no_colour_with_any_stage(coding):
    """Calls with every fact were drawn in the palette's green, which is also the third
    stage's colour (dedup's, in neurolink): a dedup diamond at 99% vanished among them."""
    ax = plot_retention(coding).axes[0]
    stage = set(stage_colours(f"s{i}" for i in range(15)).values())
    for gid, colour in (("recall-full", NEUTRAL[0]), ("recall-missing", MISSING_COLOUR)):
        [dots] = _gid(ax.collections, gid)
        hexes = {matplotlib_hex(c) for c in dots.get_facecolors()}
        assert hexes <= {colour.lower()} and not hexes & {c.lower() for c in stage}


def matplotlib_hex(rgba) -> str:
    from matplotlib.colors import to_hex
    return to_hex(rgba)


def test_a_stage_has_one_colour_in_every_figure_of_a_replay(coding):
    colours = replay_stage_colours(coding)
    bars = plot_stages(coding).axes[0].patches
    for bar in bars:
        gid = bar.get_gid()
        if gid.startswith("stage-"):
            assert matplotlib_hex(bar.get_facecolor()) == colours[gid[6:]].lower()
    ax = plot_retention(coding).axes[0]
    for dots in ax.collections:
        gid = dots.get_gid() or ""
        if gid.startswith("retention-"):
            assert {matplotlib_hex(c) for c in dots.get_facecolors()} == {
                colours[gid[10:]].lower()}


def test_a_layer_has_one_colour_in_every_figure(coding):
    from ctxlab.viz import plot_context

    ax = plot_layers(coding).axes[0]
    for layer, colour in LAYER_COLOURS.items():
        [band] = _gid(ax.collections, f"layer-{layer}")
        assert matplotlib_hex(band.get_facecolor()[0]) == colour.lower()
    call = int(coding.events["call"].iloc[0])
    parts = plot_context(coding, call).axes[0].patches
    kept = {}
    for p in parts:
        if p.get_gid().endswith("-kept"):
            kept.setdefault(matplotlib_hex(p.get_facecolor()), 0)
    assert set(kept) <= {c.lower() for c in LAYER_COLOURS.values()}
    assert PALETTE[-1] == "#000000" and MISSING_COLOUR not in LAYER_COLOURS.values()


def _estimator_colour(ax, est):
    """The colour of an estimator's dots (`plot_estimators`) or line (`plot_reported_usage`)."""
    [line] = [x for x in ax.lines if x.get_label() == est or x.get_label().startswith(est + " (")]
    return matplotlib_hex(line.get_color())


@pytest.fixture(scope="module")
def compared(coding):
    return ctxlab.compare_estimators_df(coding.base, ["chars:4", "neuron", "tiktoken:cl100k_base",
                                                      "chars:3.6"], reference="chars:3")


def test_an_estimator_has_its_colour_whatever_is_drawn_before_it(coding, compared):
    """Estimators took the palette in the order a figure drew them: in notebook 02 green was
    neuron in one plot and tiktoken:o200k_base in the next."""
    def only(specs):       # these estimators, drawn in this order
        rows = [compared[compared["estimator"] == e] for e in specs]
        return pd.concat(rows, ignore_index=True)

    orders = (["chars:4", "neuron"], ["neuron", "tiktoken:cl100k_base", "chars:4"],
              ["chars:3.6", "tiktoken:cl100k_base", "neuron", "chars:4"])
    seen: dict[str, set[str]] = {}
    for specs in orders:
        ax = plot_estimators(only(specs)).axes[0]
        for est in specs:
            seen.setdefault(est, set()).add(_estimator_colour(ax, est))
    usage = {e: ctxlab.reported_usage_df(coding.base, e)
             for e in ("chars:4", "neuron", "tiktoken:cl100k_base")}
    for specs in (["chars:4", "neuron"], ["tiktoken:cl100k_base", "neuron", "chars:4"]):
        ax = plot_reported_usage(pd.concat([usage[e] for e in specs])).axes[0]
        for est in specs:
            seen.setdefault(est, set()).add(_estimator_colour(ax, est))
    assert all(len(colours) == 1 for colours in seen.values()), seen
    assert seen["chars:4"] == {ESTIMATOR_COLOURS["chars"].lower()}


def test_estimators_of_one_family_differ_and_none_looks_like_the_reported_line(coding):
    """chars:4 and chars:3.6 (or the two tiktoken references) in one figure: two colours, and
    neither is the black of the reported usage or the grey of the zero line."""
    specs = ["chars:4", "chars:3.6", "tiktoken:o200k_base", "tiktoken:cl100k_base", "neuron",
             "neurolink:anthropic", "langchain", "probe"]         # the 8th was black
    usage = pd.concat([ctxlab.reported_usage_df(coding.base, e) for e in specs])
    ax = plot_reported_usage(usage).axes[0]
    colours = [_estimator_colour(ax, e) for e in specs]
    reported = _estimator_colour(ax, "reported input_total")
    assert len(set(colours)) == len(specs) and reported == "#000000"
    assert not {reported, *(c.lower() for c in NEUTRAL)} & set(colours)


def test_every_estimator_family_has_its_colour():
    """A family has its colour in every figure, its default spec whatever else is drawn; a
    sibling has it when drawn alone, and another when drawn with the default."""
    from ctxlab import tokens

    families = set(ESTIMATOR_COLOURS) - {"reported"} - {k for k in ESTIMATOR_COLOURS if ":" in k}
    assert families == set(tokens.names())          # a new family needs its colour
    own = [c for k, c in ESTIMATOR_COLOURS.items() if k != "reported"]
    assert len(set(own)) == len(own) and not set(own) & {MISSING_COLOUR, *NEUTRAL}
    everyone = [ESTIMATOR_DEFAULTS.get(f, f) for f in sorted(families)]
    for family in families:
        default = ESTIMATOR_DEFAULTS.get(family, family)
        sibling = f"{family}:other"
        assert estimator_colours([sibling])[sibling] == ESTIMATOR_COLOURS[family]
        for specs in ([default], [sibling, default],
                      ["mine:1", sibling, *everyone[::-1], "tiktoken:cl100k_base"]):
            got = estimator_colours(specs)
            assert got[default] == ESTIMATOR_COLOURS[family]
            assert len(set(got.values())) == len(specs)
    calibrated = estimator_colours(["calibrated(reported, *)", "calibrated(reported, *) upper"])
    assert list(calibrated.values()) == [ESTIMATOR_COLOURS["calibrated"],
                                         ESTIMATOR_COLOURS["calibrated-upper"]]


# --- steps, not slopes -----------------------------------------------------------------------

def _segments(path_or_line):
    v = (np.column_stack([path_or_line.get_xdata(), path_or_line.get_ydata()])
         if hasattr(path_or_line, "get_xdata") else path_or_line.vertices)
    v = v[np.isfinite(v).all(axis=1)]
    return list(zip(v[:-1], v[1:]))


@pytest.mark.parametrize("side", ["after", "before"])
def test_a_compaction_drops_vertically_at_its_call_in_the_layers_plot(coding, side):
    """The stack was interpolated from call to call: a compaction at call 62 was a slope from
    call 61 to 62, and no reader could tell at which call the tokens dropped."""
    ax = plot_layers(coding, side=side).axes[0]
    c = coding.calls.set_index("call")
    total = c[f"tokens_{side}"] / 1000
    [top] = _gid(ax.collections, "layer-framing")
    segments = _segments(top.get_paths()[0])
    for (x0, y0), (x1, y1) in segments:           # every edge flat or vertical
        assert x0 == x1 or np.isclose(y0, y1), ((x0, y0), (x1, y1))
    for k in c.index[c["compacted"]]:
        drop = {(round(y0, 6), round(y1, 6)) for (x0, y0), (x1, y1) in segments
                if x0 == x1 == k - 0.5}
        edge = (round(total[k - 1], 6), round(total[k], 6))
        assert edge in drop or edge[::-1] in drop, (k, drop)
        assert total[k] < total[k - 1] or side == "before"
    for gid in ("window", "threshold", "reported"):       # the lines step with the stack
        [line] = _gid(ax.lines, gid)
        assert all(x0 == x1 or np.isclose(y0, y1) for (x0, y0), (x1, y1) in _segments(line))


# --- labels that do not pile up -------------------------------------------------------------

def _crowded_sweep() -> pd.DataFrame:
    """Twelve configurations on a near-straight front, close together, and five that score
    alike (a threshold that never fires)."""
    rows = []
    configs = [("neurolink", t, 1.0 + 0.05 * i, 0.90 + 0.008 * i)
               for i, t in enumerate(np.linspace(0.5, 0.95, 10))]
    configs += [("ai-agent", t, 2.0, 1.0) for t in (0.5, 0.6, 0.7, 0.8, 0.9)]
    configs += [("copilot-fixed", 0.5, 0.4, 0.5)]
    for i, (preset, threshold, cost, recall) in enumerate(configs):
        missing = round((1 - recall) * 1000)
        rows.append({"config": i, "preset": preset, "threshold": round(float(threshold), 2),
                     "file": "a.jsonl", "session": "s0", "tokens_sent": int(cost * 1e6),
                     "cost": cost, "overflows": 0, "needed": 1000, "missing": missing,
                     "recall": recall})
    return pd.DataFrame(rows)


def test_pareto_labels_do_not_overlap_and_alike_points_get_one_label():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plot_sweep(_crowded_sweep(), constraints={})
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    texts = [t for t in ax.texts if t.get_text()]
    boxes = [t.get_window_extent() for t in texts]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b)
    names = [t.get_text() for t in texts]
    assert sum("ai-agent" in n for n in names) == 1
    assert any("(+4 alike)" in n for n in names)
    assert any(n.startswith("recommended: ") for n in names)
    front = sweep_front_df(_crowded_sweep(), constraints={})
    front = front[front["front"] & ~front["recommended"]]
    spots = len(front.drop_duplicates(["cost", "recall"]))
    labelled = len(_gid(ax.texts, "front-label"))
    legend = " ".join(t.get_text() for t in ax.get_legend().get_texts())
    assert spots == 11 and labelled >= 3
    if labelled < spots:   # the others are counted, not silently dropped
        assert f"{spots - labelled} crowded front point" in legend


# --- the report's numbers ------------------------------------------------------------------

def test_report_cells_show_no_negative_zero():
    cells = _Cells(redact=False)
    assert cells.cell(-0.04, "error_pct") == ("num", "0.0")
    assert cells.cell(-0.0004, "peak_usage") == ("num", "0.0%")
    assert cells.cell(-1.5, "error_pct") == ("num", "-1.5")
    assert cells.cell(12_345.0, "tokens") == ("num", "12,345")


def test_report_tables_wrap_long_texts_and_never_short_ones():
    """Beside 100-character previews and file paths, a narrow page squeezed 'inserted' and
    'tool_result' into 'inserte|d' and 'tool_resul|t'."""
    import re

    from ctxlab.viz.report import STYLE, _table

    df = pd.DataFrame({"action": ["inserted", "hidden"], "kind": ["tool_result", "text"],
                       "preview": ["x " * 60, "short"], "tokens": [9, 561]})
    html = _table(df, _Cells(redact=False), frame="Replay.ledger")
    classes = re.findall(r'<td class="([^"]+)">([^<]*)</td>', html)
    by_text = {text.strip(): cls for cls, text in classes}
    assert by_text["inserted"] == "text" and by_text["tool_result"] == "text"
    assert by_text["short"] == "text long"          # its column holds a long value
    assert by_text["9"] == "num"
    assert "td.text{white-space:nowrap}" in STYLE and "td.long{white-space:normal" in STYLE


def test_context_map_legend_sits_beside_the_rows():
    from ctxlab.viz import plot_context

    r = ctxlab.replay(ctxlab.load(datasets.path("coding_session")), STAGES, window=25_000)
    call = int(r.events.groupby("call")["stage"].nunique().idxmax())   # the most statuses
    fig = plot_context(r, call)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    assert len(ax.get_legend().get_texts()) >= 3
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    # each row's totals are written inside the axes, however long (four statuses)
    for call in sorted(set(r.events["call"]))[:12]:
        fig = plot_context(r, int(call))
        fig.draw_without_rendering()
        ax = fig.axes[0]
        right = ax.get_window_extent().x1
        assert all(t.get_window_extent().x1 <= right for t in ax.texts)


def test_a_stage_or_preset_has_its_colour_whatever_else_is_drawn():
    """Colours used to follow the order of drawing: in notebook 02 green was one thing in a
    plot and another in the next. Built-in stages and presets now each have their own."""
    from ctxlab import stages
    from ctxlab.presets import preset_names
    from ctxlab.viz.style import STAGE_NAMES, PRESET_NAMES, preset_colours

    assert set(stages.names()) == set(STAGE_NAMES)       # a new stage needs its colour
    assert set(preset_names()) == set(PRESET_NAMES)
    for names, colours in ((STAGE_NAMES, stage_colours), (PRESET_NAMES, preset_colours)):
        own = colours(names)
        assert len(set(own.values())) == len(names)
        assert MISSING_COLOUR not in own.values()
        for name in names:         # alone, last, or among names ctxlab does not know
            assert colours([name])[name] == own[name]
            mixed = colours(["mine", *names[::-1], "other"])
            assert mixed[name] == own[name]
            assert len(set(mixed.values())) == len(names) + 2


def test_replays_of_two_pipelines_colour_a_shared_stage_alike(coding):
    from ctxlab.pipeline import Pipeline, stages_from

    # the stages in another order, with one neurolink lacks first
    p = Pipeline(name="mine", stages=stages_from(["clear_tool_results", "truncate", "prune"]),
                 threshold=0.5)
    other = ctxlab.replay(coding.base, p, window=40_000)
    a, b = replay_stage_colours(coding), replay_stage_colours(other)
    assert {"prune", "truncate"} <= set(a) & set(b)
    assert all(a[s] == b[s] for s in set(a) & set(b))


def test_reported_usage_takes_a_transcript_too():
    """The README lists it beside plots that take a replay: a transcript raised a raw
    TypeError ('Transcript' object is not subscriptable)."""
    import ctxlab
    from ctxlab.errors import ConfigError
    from ctxlab.viz.plots import REPORTED_ESTIMATORS, plot_reported_usage

    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    fig = plot_reported_usage(t)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels[0] == "reported input_total"
    assert [lab.split(" (")[0] for lab in labels[1:]] == list(REPORTED_ESTIMATORS)
    fig = plot_reported_usage(t, estimators=["chars:4"])
    assert len(fig.axes[0].get_lines()) == 2
    with pytest.raises(ConfigError, match="reported_usage_df results or a transcript"):
        plot_reported_usage([1, 2])


def test_session_labels_tell_swe_bench_tasks_apart():
    """Titles showed every SWE-bench task of a repository as its first 8 characters
    ('astropy__astropy-12907' and '-13033' both 'astropy_')."""
    from ctxlab.viz.style import LABEL_CHARS, session_label

    ids = ["astropy__astropy-12907", "astropy__astropy-13033",
           "scikit-learn__scikit-learn-25747", "scikit-learn__scikit-learn-25931",
           "matplotlib__matplotlib-23314-run2", "matplotlib__matplotlib-23314-run3"]
    labels = [session_label(s) for s in ids]
    assert len(set(labels)) == len(ids) and max(map(len, labels)) <= LABEL_CHARS
    assert session_label("611c338b-8032-4760-b911-90698b47d269") == "611c338b"
    # Codex's time-ordered UUIDs (version 7) of sessions started within a minute
    codex = ["01996135-afde-7911-a1b2-3c4d5e6f7081", "01996135-b001-7000-9f8e-7d6c5b4a3920"]
    assert len({session_label(s) for s in codex}) == 2
