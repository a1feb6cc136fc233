"""Matplotlib figures of core results. No pyplot state, no rcParams changes.

Colours are the Okabe–Ito palette (distinguishable with the common colour-vision
deficiencies), and an estimator keeps its colour from figure to figure
(`ctxlab.viz.style.estimator_colours`); every axis names its unit. This module holds the
estimator figures and re-exports the replay figures (`ctxlab.viz.plots_replay`,
`ctxlab.viz.plots_context`) and the deterministic renderers `figure_svg` / `figure_png`
(`ctxlab.viz.style`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctxlab.tokens.content import CLASSES
from ctxlab.errors import ConfigError
from ctxlab.viz.plots_context import STAGE_STATUS, context_parts_df, plot_context
from ctxlab.viz.plots_replay import plot_layers, plot_retention, plot_stages
from ctxlab.viz.style import (PALETTE, estimator_colours, figure_png, figure_svg,
                              literal_text, plural, session_label, show_nothing,
                              new_figure as _figure)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["PALETTE", "STAGE_STATUS", "context_parts_df", "figure_png", "figure_svg",
           "plot_context", "plot_estimators", "plot_layers", "plot_reported_usage",
           "plot_retention", "plot_stages"]
CLIP_PCT = 200.0
MAX_GROUPS = 30
"""Groups `plot_estimators` draws at most (those with the most parts; the title says how
many were left out): 588 sessions of boxes side by side are one smear of ticks."""


@literal_text
def plot_estimators(compared: pd.DataFrame, *, by: str = "content_class",
                    ax: Axes | None = None) -> Figure:
    """Per-part error distributions of several estimators, side by side per group.

    Args:
        compared: the output of `ctxlab.compare_estimators_df`.
        by: the grouping column (content class by default; ``kind`` also works).
        ax: draw into this axes instead of a new figure.

    Boxes show the quartiles of the signed percentage error per part (whiskers at the
    5th and 95th percentiles, clipped to ±200%); the dot is the error of the summed
    tokens, which is what a budget check feels. With more than `MAX_GROUPS` groups (by
    session, say) the ones with the most parts are drawn and the title says so. An
    estimator has the same colour in every figure (`ctxlab.viz.style.estimator_colours`).
    """
    if by not in compared.columns:
        raise ConfigError(f"by={by!r} is not a column of the comparison; group by one of "
                          f"{', '.join(c for c in compared.columns if c != 'error_pct')}")
    fig, ax = _figure(ax, (10, 4.2))
    df = compared.dropna(subset=["error_pct"])
    if df.empty:
        show_nothing(ax, "No part to compare: the comparison has no row with an error "
                         "(no part has reference tokens).")
        ax.set_title("Estimator error per part — no parts", fontsize=10)
        return fig
    present = set(df[by].astype(str))
    n_groups = len(present)
    if n_groups > MAX_GROUPS:     # the groups with the most parts (ties: the first met)
        sizes = df.drop_duplicates(["session", "part"])[by].astype(str).value_counts(sort=False)
        present = set(sizes.nlargest(MAX_GROUPS, keep="first").index)
        df = df[df[by].astype(str).isin(present)]
    order = (CLASSES if by == "content_class" else tuple(pd.unique(df[by].astype(str)))
             if by == "session" else tuple(sorted(present)))    # sessions in log order
    groups = [g for g in order if g in present]
    ests = list(pd.unique(df["estimator"]))
    colours = estimator_colours(ests)
    width = 0.8 / max(1, len(ests))
    for i, est in enumerate(ests):
        sub = df[df["estimator"] == est]
        data, totals, xs = [], [], []
        for j, g in enumerate(groups):
            part = sub[sub[by].astype(str) == g]
            if part.empty:
                continue
            data.append(part["error_pct"].clip(-CLIP_PCT, CLIP_PCT).to_numpy())
            ref = part["ref_tokens"].sum()
            totals.append(100.0 * (part["est_tokens"].sum() - ref) / ref if ref else np.nan)
            xs.append(j - 0.4 + width * (i + 0.5))
        colour = colours[est]
        bp = ax.boxplot(data, positions=xs, widths=width * 0.85, whis=(5, 95), showfliers=False,
                        patch_artist=True, manage_ticks=False)
        for box in bp["boxes"]:
            box.set(facecolor=colour, alpha=0.55, edgecolor=colour)
        for part in ("whiskers", "caps", "medians"):
            for line in bp[part]:
                line.set(color=colour)
        ax.plot(xs, totals, "o", color=colour, markeredgecolor="black", markersize=5,
                label=est)
    ax.axhline(0, color="grey", linewidth=0.8)
    names = [session_label(g) for g in groups] if by == "session" else groups
    if len(groups) > 8 or max(map(len, names), default=0) > 12:
        ax.set_xticks(range(len(groups)), names, rotation=45, ha="right",
                      rotation_mode="anchor", fontsize=8 if len(groups) > 12 else 9)
    else:
        ax.set_xticks(range(len(groups)), names)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ref_name = str(df["reference"].iloc[0]) if len(df) else "reference"
    ax.set_ylabel(f"error vs {ref_name} (%)")
    ax.set_xlabel(by.replace("_", " "))
    counts = df.drop_duplicates(["session", "part"]).groupby(by, observed=True).size()
    noun = "session" if by == "session" else f"{by.replace('_', ' ')} value"
    some = (f"\n{plural(int(counts.sum()), 'part')} of the {MAX_GROUPS} {noun}s with the most "
            f"parts (of {n_groups:,}; the others are not drawn)" if n_groups > MAX_GROUPS
            else f" — {plural(int(counts.sum()), 'part')}")
    ax.set_title("Estimator error per part (box: quartiles, whiskers: p5–p95; dot: error of "
                 f"the total){some}", fontsize=10)
    # beside the axes: inside, a whisker reaching +100% ran under it
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0,
              title="estimator (dot: total)", title_fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


REPORTED_ESTIMATORS = ("chars:4", "neurolink:anthropic", "tiktoken:o200k_base")
"""What `plot_reported_usage` of a transcript draws: a heuristic, a seed's, a tokenizer."""


def _usage_of(source: Any, estimators: Sequence[str] | None) -> pd.DataFrame:
    """`reported_usage_df` of a transcript or corpus for several estimators."""
    from ctxlab.tokens.accuracy import reported_usage_df

    if not (hasattr(source, "frame") and hasattr(source, "calls")):
        raise ConfigError(f"plot_reported_usage takes ctxlab.reported_usage_df results or a "
                          f"transcript, not {type(source).__name__}")
    return pd.concat([reported_usage_df(source, e)
                      for e in (estimators or REPORTED_ESTIMATORS)], ignore_index=True)


@literal_text
def plot_reported_usage(usage: Any, *, estimators: Sequence[str] | None = None,
                        session: str | None = None, ax: Axes | None = None) -> Figure:
    """Reported ``input_total`` per call against each estimator's estimate.

    Args:
        usage: `ctxlab.reported_usage_df` results (several estimators concatenated), or
            a transcript (or corpus) to compute them for ``estimators``.
        estimators: with a transcript, the estimator specs (None: `REPORTED_ESTIMATORS`).
        session: which session to draw (default: the one with the most calls).
        ax: draw into this axes instead of a new figure.

    The reported usage is black; an estimator has the same colour in every figure
    (`ctxlab.viz.style.estimator_colours`).
    """
    if not isinstance(usage, pd.DataFrame):
        usage = _usage_of(usage, estimators)
    reported = usage[usage["input_total"].notna()]
    if reported.empty:
        raise ConfigError("the calls report no input usage (input_total): there is nothing "
                          "to compare the estimates with")
    if session is None:     # the session with the most calls that report usage
        session = str(reported.groupby("session")["call"].size().idxmax())
    u = usage[usage["session"] == session]
    if not u["input_total"].notna().any():
        raise ConfigError(f"session {session!r} reports no input usage (input_total)")
    fig, ax = _figure(ax, (10, 3.8))
    first = u[u["estimator"] == u["estimator"].iloc[0]]
    few = len(first) <= 20      # a line through two calls reads as calls in between: dots
    colours = estimator_colours(["reported", *pd.unique(u["estimator"])])
    ax.plot(first["call"], first["input_total"] / 1000, color=colours["reported"],
            linewidth=2.2, marker="o" if few else None, markersize=4,
            label="reported input_total")
    for est, g in u.groupby("estimator", sort=False):
        mape = g["error_pct"].abs().mean()
        said = f"MAPE {mape:.1f}%" if pd.notna(mape) else "no error: overhead fitted on <3 calls"
        ax.plot(g["call"], g["est_tokens"] / 1000, color=colours[est],
                linewidth=1.2, marker="." if few else None, label=f"{est} ({said})")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_ylim(bottom=0)   # from zero: a 3.5k-4.6k axis made a 3% miss look like 30%
    ax.set_xlabel("LLM call")
    ax.set_ylabel("input tokens (thousands)")
    ax.set_title(f"Estimated vs reported input per call — session {session_label(session)}, "
                 "overhead fitted per estimator", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig
