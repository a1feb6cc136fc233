"""plot_sweep and ThresholdTuner: checked against `ctxlab.recommend` on a hand-built sweep
result (known front, known recommendation) and on one small real sweep."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from ctxlab.errors import ConfigError
from ctxlab.recommend import aggregate, config_index, recommend
from ctxlab.viz import ThresholdTuner, figure_svg, plot_sweep, sweep_front_df
from ctxlab.viz.widgets_base import widget_frontend

from conftest import DATASETS

METRICS = ["calls", "compactions", "calls_compacted", "events", "failures", "summarizer_calls",
           "summarizer_input_tokens", "summarizer_output_tokens", "tokens_sent", "cost",
           "peak_usage", "overflows", "forced_final", "needed", "missing", "recall",
           "hidden_artifacts", "retained", "retention", "seconds"]
# (preset, threshold, per session: cost in USD (tokens: a million per dollar), overflows,
#  missing of 10 needed, retained of 50 hidden).  With max_overflows=0: neuron 0.5
#  overflows; neuron 0.8 is dominated by neurolink 0.5; the front is copilot 0.5 (cheapest,
#  best recall per token), neurolink 0.5, neurolink 0.8 (every needed item kept).
CONFIGS = [("neurolink", 0.5, [(1.0, 0, 1, 10), (1.0, 0, 1, 20)]),
           ("neurolink", 0.8, [(2.0, 0, 0, 40), (2.0, 0, 0, 40)]),
           ("neuron", 0.5, [(0.8, 0, 0, 30), (0.8, 1, 1, 30)]),
           ("neuron", 0.8, [(1.5, 0, 2, 25), (1.5, 0, 2, 25)]),
           ("copilot-fixed", 0.5, [(0.5, 0, 5, None), (0.5, 0, 5, None)])]
NL5, NL8, NE5, NE8, CO5 = range(5)


def _frame(configs=CONFIGS) -> pd.DataFrame:
    rows = []
    for i, (preset, threshold, sessions) in enumerate(configs):
        for k, (cost, over, missing, retained) in enumerate(sessions):
            hidden = 0 if retained is None else 50
            rows.append({"config": i, "preset": preset, "threshold": threshold,
                         "target": threshold, "window": None, "estimator": f"{preset}:est",
                         "note": None, "file": "logs/a.jsonl", "session": f"s{k}",
                         "calls": 40, "compactions": 2, "calls_compacted": 2,
                         "events": 2, "failures": 0,
                         "summarizer_calls": 0, "summarizer_input_tokens": 0,
                         "summarizer_output_tokens": 0, "tokens_sent": int(cost * 1e6),
                         "cost": cost, "peak_usage": 0.7 + over, "overflows": over,
                         "forced_final": 0, "needed": 10, "missing": missing,
                         "recall": 1 - missing / 10, "hidden_artifacts": hidden,
                         "retained": retained or 0,
                         "retention": retained / hidden if hidden else np.nan, "seconds": 0.1})
    df = pd.DataFrame(rows)
    df["window"] = df["window"].astype("Int64")
    return df


FAKE = _frame()


def _gid(artists, gid):
    found = [a for a in artists if a.get_gid() == gid]
    assert len(found) == 1, f"{gid}: {len(found)} artists"
    return found[0]


def _points(ax, gid):
    return [tuple(p) for p in _gid(ax.collections, gid).get_offsets().tolist()]


# -- the front -----------------------------------------------------------------------------


def test_front_flags_match_recommend_and_the_objective_picks_among_its_rows():
    s = sweep_front_df(FAKE)
    assert s["config"].tolist() == list(range(5))
    assert s["label"].tolist() == ["neurolink, threshold=0.5", "neurolink, threshold=0.8",
                                   "neuron, threshold=0.5", "neuron, threshold=0.8",
                                   "copilot-fixed, threshold=0.5"]  # target follows threshold
    assert s.loc[~s["feasible"], "config"].tolist() == [NE5]
    front = set(s.loc[s["front"], "config"])
    assert front == {CO5, NL5, NL8}
    assert set(recommend(FAKE, max_overflows=0)["preset"] + recommend(
        FAKE, max_overflows=0)["threshold"].astype(str)) == {
        "copilot-fixed0.5", "neurolink0.5", "neurolink0.8"}
    assert s.loc[s["recommended"], "config"].tolist() == [CO5]  # 0.5 recall per Mtok
    pick = {o: sweep_front_df(FAKE, objective=o).query("recommended")["config"].tolist()
            for o in ("cost", "recall", "retention", "recall_per_mtok")}
    assert pick == {"cost": [CO5], "recall": [NL8], "retention": [NL8],
                    "recall_per_mtok": [CO5]}
    free = sweep_front_df(FAKE, constraints={})  # neuron 0.5 then dominates neurolink 0.5
    assert set(free.loc[free["front"], "config"]) == {CO5, NE5, NL8}
    assert free.loc[free["recommended"], "config"].tolist() == [NE5]


def test_front_on_retention_and_tokens_leaves_out_configurations_with_no_retention():
    s = sweep_front_df(FAKE, x="tokens_sent", y="retention", constraints={})
    # copilot hid nothing (NaN retention): never on the front; neurolink 0.5 (0.3 at 2M) and
    # neuron 0.8 (0.5 at 3M) lose to neuron 0.5 (0.6 at 1.6M)
    assert set(s.loc[s["front"], "config"]) == {NE5, NL8}
    fig = plot_sweep(FAKE, "tokens_sent", "retention", constraints={})
    ax = fig.axes[0]
    assert "1 with no retention (nothing hidden) not drawn" in ax.get_title()
    assert len(_points(ax, "feasible")) == 4
    assert _points(ax, "front") == [(1.6, 0.6), (4.0, 0.8)]  # millions of tokens


def test_pareto_plot_draws_the_front_the_misses_and_the_recommendation():
    ax = plot_sweep(FAKE).axes[0]
    agg = aggregate(FAKE)
    assert _points(ax, "infeasible") == [(1.6, 0.95)]
    assert sorted(_points(ax, "feasible")) == sorted(
        zip(agg["cost"].drop(NE5), agg["recall"].drop(NE5)))
    assert _points(ax, "front") == [(1.0, 0.5), (2.0, 0.9), (4.0, 1.0)]  # cheapest first
    line = _gid(ax.lines, "front-line")
    assert line.get_drawstyle() == "steps-post" and line.get_xdata().tolist() == [1.0, 2.0, 4.0]
    assert _points(ax, "recommended") == [(1.0, 0.5)]
    texts = [t.get_text() for t in ax.texts]
    assert "recommended: copilot-fixed, threshold=0.5" in texts
    assert "neurolink, threshold=0.8" in texts  # the other front points are named
    assert "constraints: max_overflows=0" in ax.get_title()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["neurolink", "neuron", "copilot-fixed"]
    assert "misses max_overflows=0" in legend


def test_when_nothing_meets_the_constraints_the_plot_says_so_and_stars_nothing():
    limits = {"max_overflows": 0, "min_recall": 0.99, "max_cost": 3.0}
    ax = plot_sweep(FAKE, constraints=limits).axes[0]
    assert "no configuration meets the constraints" in ax.get_title()
    assert not [a for a in ax.collections if a.get_gid() == "recommended"]
    assert _points(ax, "front") == [] and len(_points(ax, "infeasible")) == 5


def test_presets_filter_keeps_config_numbers():
    s = sweep_front_df(FAKE, presets=["neuron"])
    assert s["config"].tolist() == [NE5, NE8]
    assert s.loc[s["recommended"], "config"].tolist() == [NE8]  # neuron 0.5 overflows


# -- the heatmap ---------------------------------------------------------------------------


def test_heatmap_cells_are_the_aggregated_metric_and_name_missing_values():
    results = FAKE[FAKE["config"] != NE8]  # neuron at 0.8 not run
    ax = plot_sweep(results, kind="heatmap", metric="retention").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["neurolink", "neuron",
                                                           "copilot-fixed"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.5", "0.8"]  # bottom to top
    values = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    agg = aggregate(results).set_index(["threshold", "preset"])["retention"]
    for (i, t), (j, p) in [((i, t), (j, p)) for i, t in enumerate([0.5, 0.8])
                           for j, p in enumerate(["neurolink", "neuron", "copilot-fixed"])]:
        expected = agg.get((t, p), np.nan)
        assert values[i, j] == pytest.approx(expected, nan_ok=True)
        text = _gid(ax.texts, f"cell-{i}-{j}").get_text()
        if (t, p) not in agg.index:
            assert text == "not run"
        elif np.isnan(expected):
            assert text == "NaN"
        else:
            assert text == f"{expected:.3f}"
    assert agg[(0.5, "neurolink")] == pytest.approx(30 / 100)  # pooled: (10 + 20) / 100
    assert len([p for p in ax.patches if p.get_gid() == "nan-cell"]) == 3
    assert "(hatched: no value)" in ax.get_title()


def test_heatmap_of_any_two_grid_columns_and_reduce_for_shared_cells():
    df = pd.concat([FAKE, FAKE.assign(estimator="chars:4", config=FAKE["config"] + 5)],
                   ignore_index=True)
    df.loc[df["estimator"] == "chars:4", "cost"] *= 2
    with pytest.raises(ConfigError, match="2 configurations share a cell of threshold × preset "
                                          r"\(they differ in estimator\).*reduce='min'"):
        plot_sweep(df, kind="heatmap", metric="cost")
    ax = plot_sweep(df, kind="heatmap", metric="cost", reduce="max").axes[0]
    assert _gid(ax.texts, "cell-0-0").get_text() == "4"  # 2 sessions x 1.0 x 2
    ax = plot_sweep(df, kind="heatmap", metric="tokens_sent", reduce="min", index="estimator",
                    columns="threshold").axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "0.8"]
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "neurolink:est", "neuron:est", "copilot-fixed:est", "chars:4"]
    assert _gid(ax.texts, "cell-0-0").get_text() == "2.0M"  # neurolink 0.5
    assert _gid(ax.texts, "cell-3-0").get_text() == "1.0M"  # chars:4 at 0.5: copilot's
    # the colour bar says tokens the same way, with no "1e6" offset above it
    bar = ax.figure.axes[1]
    ax.figure.draw_without_rendering()
    assert bar.yaxis.get_offset_text().get_text() == ""
    assert all(t.get_text().endswith(("M", "k")) for t in bar.get_yticklabels() if t.get_text())
    assert _gid(ax.texts, "cell-2-1").get_text() == "not run"


@pytest.mark.parametrize("kwargs, words", [
    ({"kind": "bars"}, "kind must be 'pareto' or 'heatmap'"),
    ({"x": "seconds"}, "x must be one of cost, tokens_sent"),
    ({"y": "overflows"}, "y one of recall, retention"),
    ({"objective": "speed"}, "unknown objective 'speed'; objectives: recall_per_mtok"),
    ({"constraints": {"max_overflow": 0}}, "unknown constraint.*max_overflow;"),
    ({"constraints": {"max_cost": "1"}}, "max_cost must be a number"),
    ({"presets": ["probe"]}, r"\['probe'\] are not presets of the sweep"),
    ({"presets": "neuron"}, "a list of presets"),
    ({"presets": []}, "choose at least one preset"),
    ({"kind": "heatmap", "metric": "speed"}, "metric 'speed' is not a metric.*recall"),
    ({"kind": "heatmap", "index": "file"}, "index='file' is not a grid column.*threshold"),
    ({"kind": "heatmap", "index": "preset"}, "both 'preset'"),
    ({"kind": "heatmap", "reduce": "sum"}, "reduce must be one of min, max, mean")])
def test_bad_arguments_name_the_choices(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        plot_sweep(FAKE, **kwargs)


def test_bad_results_say_what_is_wrong():
    with pytest.raises(ConfigError, match="no rows: nothing for plot_sweep"):
        plot_sweep(FAKE.iloc[0:0])
    with pytest.raises(ConfigError, match="no rows"):
        plot_sweep(FAKE.iloc[0:0], kind="heatmap")
    with pytest.raises(ConfigError, match="needs column.*'cost'.*ctxlab.sweep result"):
        plot_sweep(FAKE.drop(columns="cost"))
    with pytest.raises(ConfigError, match="'hidden_artifacts', 'retained'"):
        plot_sweep(FAKE.drop(columns=["hidden_artifacts", "retained"]), y="retention")
    with pytest.raises(ConfigError, match="'threshold'"):
        plot_sweep(FAKE.drop(columns="threshold"), kind="heatmap")
    with pytest.raises(ConfigError, match="a DataFrame"):
        plot_sweep(FAKE.to_dict())
    with pytest.raises(ConfigError, match="unknown constraint"):
        ThresholdTuner(FAKE, constraints={"min_recal": 0.9})


_RENDER = """
import hashlib, sys
import pandas as pd
from ctxlab.viz import figure_png, figure_svg, plot_sweep
df = pd.read_pickle(sys.argv[1])
for kw in ({}, {"kind": "heatmap", "metric": "retention"}):
    fig = plot_sweep(df, **kw)
    print(hashlib.sha256(figure_svg(fig).encode()).hexdigest(),
          hashlib.sha256(figure_png(fig)).hexdigest())
"""


def test_figures_are_the_same_bytes_in_another_process(tmp_path):
    from ctxlab.viz import figure_png
    figs = [plot_sweep(FAKE), plot_sweep(FAKE, kind="heatmap", metric="retention")]
    mine = [f"{hashlib.sha256(figure_svg(f).encode()).hexdigest()} "
            f"{hashlib.sha256(figure_png(f)).hexdigest()}" for f in figs]
    again = [plot_sweep(FAKE), plot_sweep(FAKE, kind="heatmap", metric="retention")]
    assert [f"{hashlib.sha256(figure_svg(f).encode()).hexdigest()} "
            f"{hashlib.sha256(figure_png(f)).hexdigest()}" for f in again] == mine
    FAKE.to_pickle(tmp_path / "r.pkl")
    env = {**os.environ, "PYTHONHASHSEED": "4321"}
    out = subprocess.run([sys.executable, "-c", _RENDER, str(tmp_path / "r.pkl")], env=env,
                         check=True, capture_output=True, text=True, cwd=str(DATASETS.parent))
    assert out.stdout.split("\n")[:2] == mine


# -- the tuner -----------------------------------------------------------------------------


def test_tuner_methods_change_the_recommendation():
    tuner = ThresholdTuner(FAKE)
    assert tuner.constraints == {"max_overflows": 0} and tuner.recommended == CO5
    assert tuner.recommendation()["config"].tolist() == [CO5, NL5, NL8]
    tuner.set_min_recall(0.85)
    assert tuner.recommended == NL5 and tuner.recommendation()["config"].tolist() == [NL5, NL8]
    tuner.set_objective("recall")
    assert tuner.recommended == NL8
    tuner.set_min_recall(None)
    tuner.set_max_overflows(None)
    tuner.set_objective("recall_per_mtok")
    assert tuner.constraints == {} and tuner.recommended == NE5
    tuner.set_max_overflows(1)
    assert tuner.recommended == NE5  # one overflow in all is allowed now
    tuner.set_presets(["neurolink", "copilot-fixed"])
    assert tuner.summary()["config"].tolist() == [NL5, NL8, CO5] and tuner.recommended == CO5
    tuner.set_constraint("max_cost", 0.5)
    assert tuner.recommended is None and tuner.sessions().empty
    with pytest.raises(ConfigError, match="no configuration meets max_overflows=1, max_cost=0.5"):
        tuner.recommendation()
    assert "no configuration meets" in tuner.static_html(full=False)
    tuner.set_presets(None)
    tuner.set_constraint("max_cost", None)
    assert tuner.presets == ("neurolink", "neuron", "copilot-fixed")
    tuner.set_axes(y="retention")
    assert tuner.axes == ("cost", "retention") and tuner.recommended == NE5
    with pytest.raises(ConfigError, match="choose at least one preset"):
        tuner.set_presets([])
    with pytest.raises(ConfigError, match="objectives"):
        tuner.set_objective("speed")
    with pytest.raises(ConfigError, match="between 0 and 1"):
        tuner.set_min_recall(95)
    assert tuner.presets == ("neurolink", "neuron", "copilot-fixed")  # refusals change nothing


def test_tuner_sessions_are_the_rows_of_the_chosen_configuration():
    tuner = ThresholdTuner(FAKE)
    assert tuner.sessions().equals(FAKE[FAKE["config"] == CO5].reset_index(drop=True))
    tuner.choose(NE8)
    assert tuner.chosen == NE8 and tuner.sessions()["cost"].tolist() == [1.5, 1.5]
    page = tuner.static_html(full=False)
    assert "Sessions of the chosen configuration</b>: neuron, threshold=0.8" in page
    tuner.choose(None)
    assert tuner.chosen == CO5
    with pytest.raises(ConfigError, match=r"configuration 9 is not one.*\[0, 1, 2, 3, 4\]"):
        tuner.choose(9)
    tuner.choose(NE8)
    tuner.set_objective("cost")  # any other change goes back to the recommended one
    assert tuner.chosen == CO5


def test_tuner_static_html_has_the_plot_and_tables():
    tuner = ThresholdTuner(FAKE)
    page = tuner.static_html()
    assert tuner._repr_html_() == page and not widget_frontend()
    assert page.count("<svg") == 1 and "Threshold tuner: 5 configurations × 2 sessions" in page
    assert "<b>Recommended: copilot-fixed, threshold=0.5</b>" in page
    assert "4 meet the constraints (max_overflows=0), 3 on the recall/cost front" in page
    assert "★" in page and "<td>0.900</td>" in page  # neurolink 0.5's recall, to 3 places
    assert "<svg" not in tuner.static_html(full=False)
    assert "recommended=4" in repr(tuner)


def test_tuner_widget_controls_drive_the_state(monkeypatch):
    pytest.importorskip("ipywidgets")
    from matplotlib.figure import Figure

    drawn = []

    def figure(self):
        drawn.append((self.objective, self.constraints))
        return Figure(figsize=(1, 1))
    monkeypatch.setattr(ThresholdTuner, "figure", figure)
    tuner = ThresholdTuner(FAKE)
    tuner.widget
    W = tuner._w
    assert W["overflows"].value == 0 and W["config"].value == -1 and W["recall"].value == 0
    W["overflows"].value = -1
    assert tuner.constraints == {} and tuner.recommended == NE5
    W["recall"].value = 0.99
    assert tuner.constraints == {"min_recall": 0.99} and tuner.recommended == NL8
    W["objective"].value = "cost"
    assert tuner.objective == "cost" and drawn[-1] == ("cost", {"min_recall": 0.99})
    W["config"].value = NE5
    assert tuner.chosen == NE5 and "neuron, threshold=0.5" in W["tables"].value
    W["presets"].value = ()
    assert "choose at least one preset" in W["status"].value
    assert W["presets"].value == tuner.presets == ("neurolink", "neuron", "copilot-fixed")
    W["y"].value = "retention"
    assert tuner.axes == ("cost", "retention") and "#B00020" not in W["status"].value
    tuner.set_max_overflows(3)
    assert W["overflows"].value == 3 and W["config"].value == -1


# -- a real sweep --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real():
    return ThresholdTuner.from_sweep(DATASETS / "coding_session_b.jsonl",
                                     {"preset": ["neurolink", "neuron"], "threshold": [0.5, 0.8]},
                                     workers=1, progress=False)


def test_real_sweep_front_heatmap_and_tuner_agree_with_recommend(real):
    results = real.results
    assert len(results) == 4 and results["session"].nunique() == 1
    rec = recommend(results, max_overflows=0)
    s = real.summary()
    front = s[s["front"]]
    assert sorted(zip(front["preset"], front["threshold"])) == sorted(
        zip(rec["preset"], rec["threshold"]))
    best = s[s["recommended"]].iloc[0]
    assert (best["preset"], best["threshold"]) == (rec["preset"][0], rec["threshold"][0])
    assert real.sessions().drop(columns="seconds").equals(
        results[config_index(results) == best["config"]].drop(columns="seconds")
        .reset_index(drop=True))
    ax = plot_sweep(results, kind="heatmap").axes[0]
    agg = aggregate(results).set_index(["threshold", "preset"])["recall"]
    for (i, t), (j, p) in [((i, t), (j, p)) for i, t in enumerate([0.5, 0.8])
                           for j, p in enumerate(["neurolink", "neuron"])]:
        assert _gid(ax.texts, f"cell-{i}-{j}").get_text() == f"{agg[(t, p)]:.3f}"
    most = agg.idxmax()
    real.set_objective("recall")
    assert s.loc[real.recommended, ["threshold", "preset"]].tolist() == list(most)
    assert real.recommended != best["config"]  # on this log the best recall costs more
    assert agg[most] > agg[(best["threshold"], best["preset"])]
    page = real.static_html()
    assert page.count("<svg") == 1 and "Sessions of the recommended configuration" in page
