"""Pictures of core results: matplotlib figures (`ctxlab.viz.plots`).

Every ``plot_*`` takes a core result and returns a `matplotlib.figure.Figure`; none
touches pyplot's global state or rcParams, and matplotlib loads on the first plot.
`figure_svg` and `figure_png` render a figure to the same bytes for the same drawing.
`ReplayExplorer` and `EstimatorLab` (`ctxlab.viz.widgets`) put controls around them; the
HTML report is `ctxlab.viz.report`.
"""

from __future__ import annotations

from ctxlab.viz.plots import (STAGE_STATUS, context_parts_df, figure_png, figure_svg,
                              plot_context, plot_estimators, plot_layers, plot_reported_usage,
                              plot_retention, plot_stages)
from ctxlab.viz.widgets import EstimatorLab, ReplayExplorer

__all__ = ["STAGE_STATUS", "EstimatorLab", "ReplayExplorer", "context_parts_df", "figure_png",
           "figure_svg", "plot_context", "plot_estimators", "plot_layers", "plot_reported_usage",
           "plot_retention", "plot_stages"]
