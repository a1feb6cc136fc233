"""Pictures of core results: matplotlib figures (`ctxlab.viz.plots`).

Every ``plot_*`` takes a core result and returns a `matplotlib.figure.Figure`; none
touches pyplot's global state or rcParams, and matplotlib loads on the first plot.
`figure_svg` and `figure_png` render a figure to the same bytes for the same drawing.
`ReplayExplorer` and `EstimatorLab` (`ctxlab.viz.widgets`) put controls around them, and
`ThresholdTuner` around `plot_sweep` (`ctxlab.viz.plots_sweep`, a sweep's Pareto front and
heatmaps); the HTML report is `ctxlab.viz.report`.
"""

from __future__ import annotations

from ctxlab.viz.plots import (STAGE_STATUS, context_parts_df, figure_png, figure_svg,
                              plot_context, plot_estimators, plot_layers, plot_reported_usage,
                              plot_retention, plot_stages)
from ctxlab.viz.plots_sweep import plot_sweep, sweep_front_df
from ctxlab.viz.widgets import EstimatorLab, ReplayExplorer
from ctxlab.viz.widgets_tuner import ThresholdTuner

__all__ = ["STAGE_STATUS", "EstimatorLab", "ReplayExplorer", "ThresholdTuner", "context_parts_df",
           "figure_png", "figure_svg", "plot_context", "plot_estimators", "plot_layers",
           "plot_reported_usage", "plot_retention", "plot_stages", "plot_sweep",
           "sweep_front_df"]
