"""Pictures of core results: matplotlib figures (`ctxlab.viz.plots`).

Every ``plot_*`` takes a core result and returns a `matplotlib.figure.Figure`; none
touches pyplot's global state or rcParams.
"""

from __future__ import annotations

from ctxlab.viz.plots import plot_estimators, plot_reported_usage

__all__ = ["plot_estimators", "plot_reported_usage"]
