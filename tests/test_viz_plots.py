"""Plots return Figures built from core results, without touching pyplot's global state."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest

import ctxlab
from ctxlab.viz import plot_estimators, plot_reported_usage
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
