"""`ThresholdTuner`: choose constraints and an objective over a sweep, see what to deploy.

The tuner holds a `ctxlab.sweep` result and a choice — `recommend` constraints, the
objective that picks among `recommend`'s rows (`ctxlab.viz.plots_sweep.OBJECTIVES`),
the presets kept and the plotted axes — and shows `plot_sweep`'s Pareto picture,
`recommend`'s table (the recommended row marked) and the per-session rows of the chosen
configuration: the recommended one, or any other picked with `choose`. Every control
is a method, so tests and scripts drive it without a browser; without a widget front end
it renders `static_html`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.recommend import CONSTRAINTS, aggregate, config_index, ranked
from ctxlab.viz.plots_sweep import (DEFAULT_CONSTRAINTS, OBJECTIVES, X_AXES, Y_AXES,
                                    config_labels, sweep_front_df)
from ctxlab.viz.widgets_base import WidgetView, error_html, frame_html
from ctxlab.wording import counted

if TYPE_CHECKING:
    import ipywidgets

    from ctxlab.sweep_grid import Grid

SHOWN = ("sessions", "tokens_sent", "cost", "overflows", "forced_final", "peak_usage", "recall",
         "retention", "recall_per_mtok")
SESSION_SHOWN = ("file", "session", "calls", "compactions", "calls_compacted", "tokens_sent",
                 "cost", "peak_usage", "overflows", "forced_final", "recall", "retention")
OVERFLOW_CHOICES = (("any", -1), ("0", 0), ("≤ 1", 1), ("≤ 5", 5), ("≤ 20", 20))
"""The overflow limits offered by the menu (-1: no limit); `set_max_overflows` takes any."""


class ThresholdTuner(WidgetView):
    """A sweep's Pareto front under constraints, its recommendation and sessions.

    Args:
        results: a `ctxlab.sweep` result (`from_sweep` runs one).
        constraints: `ctxlab.recommend` constraints (None: no overflow; ``{}``: none).
        objective: which of `recommend`'s rows is recommended (`OBJECTIVES`).
        presets: the presets kept (None: all).
        x, y: the plot's cost and quality axes.

    Example:
        >>> import pandas as pd
        >>> rows = [("a", "s1", 1_000_000, 1.0, 0, 10, 1), ("b", "s1", 3_000_000, 3.0, 0, 10, 0),
        ...         ("c", "s1", 900_000, 0.9, 2, 10, 0)]
        >>> df = pd.DataFrame(rows, columns=["preset", "session", "tokens_sent", "cost",
        ...                                  "overflows", "needed", "missing"]).assign(file="f")
        >>> df = df[["preset", "file", "session", "tokens_sent", "cost", "overflows", "needed",
        ...          "missing"]]
        >>> tuner = ThresholdTuner(df)
        >>> tuner.recommendation()["preset"].tolist(), tuner.recommended
        (['a', 'b'], 0)
        >>> tuner.set_objective("recall"); tuner.recommended
        1
        >>> tuner.set_max_overflows(None); tuner.recommendation()["preset"].tolist()
        ['c']
    """

    def __init__(self, results: pd.DataFrame, *, constraints: Mapping[str, float] | None = None,
                 objective: str = "recall_per_mtok", presets: Sequence[str] | None = None,
                 x: str = "cost", y: str = "recall") -> None:
        front = sweep_front_df(results, x=x, y=y, constraints=constraints,
                               objective=objective, presets=presets)  # checks every argument
        self._results = results
        self._agg = aggregate(results)
        self._ids = config_index(results)
        self._labels = config_labels(self._agg)
        self._all_presets = tuple(dict.fromkeys(self._agg["preset"].astype(str)))
        self._constraints = dict(DEFAULT_CONSTRAINTS if constraints is None else constraints)
        self._objective = objective
        self._presets = self._all_presets if presets is None else tuple(presets)
        self._x, self._y = x, y
        self._front = front
        self._chosen: int | None = None
        self._error: str | None = None
        self._w: dict[str, Any] = {}
        self._syncing = False

    @classmethod
    def from_sweep(cls, corpus: Any, grid: Grid | Sequence[Grid], *, workers: int | None = None,
                   prices: Mapping[str, tuple[float, float]] | None = None,
                   progress: bool | None = None, **options: Any) -> ThresholdTuner:
        """Run `ctxlab.sweep` of ``grid`` over ``corpus`` and tune its result.

        ``options`` are the tuner's (constraints, objective, presets, x, y).
        """
        from ctxlab.sweep import sweep

        if isinstance(corpus, Path):
            corpus = str(corpus)
        return cls(sweep(corpus, grid, workers=workers, prices=prices, progress=progress),
                   **options)

    # -- state -----------------------------------------------------------------------------

    @property
    def results(self) -> pd.DataFrame:
        return self._results

    @property
    def constraints(self) -> dict[str, float]:
        return dict(self._constraints)

    @property
    def objective(self) -> str:
        return self._objective

    @property
    def presets(self) -> tuple[str, ...]:
        """The presets kept (all of the sweep's at first)."""
        return self._presets

    @property
    def axes(self) -> tuple[str, str]:
        return self._x, self._y

    @property
    def recommended(self) -> int | None:
        """The recommended configuration (its ``config`` in `summary`), None when no
        configuration of the presets kept meets the constraints."""
        best = self._front.loc[self._front["recommended"], "config"]
        return int(best.iloc[0]) if len(best) else None

    @property
    def chosen(self) -> int | None:
        """The configuration whose sessions are shown: `choose`'s, else the recommended."""
        return self._chosen if self._chosen is not None else self.recommended

    def summary(self) -> pd.DataFrame:
        """`ctxlab.viz.sweep_front_df` of the current choice: a row per configuration kept."""
        return self._front

    def recommendation(self) -> pd.DataFrame:
        """`ctxlab.recommend` of the presets kept, with ``config`` and ``label`` first.

        Raises:
            ConfigError: no configuration meets the constraints (the closest are listed).
        """
        agg = self._agg[self._agg["preset"].isin(self._presets)]
        rows = ranked(agg, **self._constraints)
        return rows.assign(config=rows.index, label=self._labels.loc[rows.index].to_numpy())[
            ["config", "label", *agg.columns]].reset_index(drop=True)

    def sessions(self) -> pd.DataFrame:
        """The results rows (one per session) of the chosen configuration (empty: none)."""
        chosen = self.chosen
        rows = self._results[self._ids == (-1 if chosen is None else chosen)]
        return rows.reset_index(drop=True)

    # -- actions ---------------------------------------------------------------------------

    def set_constraint(self, name: str, value: float | None) -> None:
        """Set a `ctxlab.recommend` constraint (``max_cost``, ``min_retention``...); None
        drops it."""
        limits = dict(self._constraints)
        if value is None:
            if name not in CONSTRAINTS:
                raise ConfigError(f"unknown constraint {name}; constraints: "
                                  f"{', '.join(CONSTRAINTS)}")
            limits.pop(name, None)
        else:
            limits[name] = value
        self._update(constraints=limits)

    def set_max_overflows(self, n: int | None) -> None:
        """Keep configurations with at most ``n`` overflowing requests in all (None: any)."""
        self.set_constraint("max_overflows", None if n is None or n < 0 else int(n))

    def set_min_recall(self, recall: float | None) -> None:
        """Keep configurations whose pooled recall is at least ``recall`` (None or 0: any)."""
        if recall is not None and not 0 <= recall <= 1:
            raise ConfigError(f"min recall must be between 0 and 1, not {recall}")
        self.set_constraint("min_recall", None if not recall else float(recall))

    def set_objective(self, objective: str) -> None:
        """Pick the recommended row of `recommend` by another objective (`OBJECTIVES`)."""
        self._update(objective=objective)

    def set_presets(self, presets: Sequence[str] | None) -> None:
        """Keep only these presets (None: all of the sweep's)."""
        self._update(presets=self._all_presets if presets is None else tuple(presets))

    def set_axes(self, x: str | None = None, y: str | None = None) -> None:
        """Plot against another cost (``cost``, ``tokens_sent``) or quality axis (``recall``,
        ``retention``); None keeps the axis. The recommendation does not change."""
        self._update(x=x or self._x, y=y or self._y)

    def choose(self, config: int | None) -> None:
        """Show the sessions of configuration ``config`` (a ``config`` of `summary`); None:
        back to the recommended one. Other changes go back to it too."""
        if config is not None and int(config) not in set(self._front["config"]):
            raise ConfigError(f"configuration {config} is not one of the presets kept; "
                              f"configurations: {sorted(self._front['config'].tolist())}")
        self._chosen = None if config is None else int(config)
        self._refresh()

    def _update(self, **changes: Any) -> None:
        state = {"constraints": self._constraints, "objective": self._objective,
                 "presets": self._presets, "x": self._x, "y": self._y, **changes}
        self._front = sweep_front_df(self._results, **state)  # raises before anything changes
        self._constraints, self._objective = dict(state["constraints"]), state["objective"]
        self._presets, self._x, self._y = tuple(state["presets"]), state["x"], state["y"]
        self._chosen = None
        self._refresh()

    # -- rendering -------------------------------------------------------------------------

    def figure(self) -> Any:
        """`ctxlab.viz.plot_sweep` (Pareto) of the current choice."""
        from ctxlab.viz.plots_sweep import plot_sweep
        return plot_sweep(self._results, self._x, self._y, constraints=self._constraints,
                          objective=self._objective, presets=list(self._presets))

    def _status_html(self) -> str:
        rule = ", ".join(f"{k}={v:g}" for k, v in self._constraints.items()) or "none"
        f = self._front
        text = (f"{counted(len(f), 'configuration')} of {counted(len(self._presets), 'preset')}; "
                f"{int(f['feasible'].sum())} meet the constraints ({html.escape(rule)}), "
                f"{int(f['front'].sum())} on the {self._y}/{self._x} front; objective: best "
                f"{html.escape(self._objective)}")
        best = self.recommended
        if best is not None:
            text += f"<br><b>Recommended: {html.escape(str(self._labels[best]))}</b>"
        return text + (f"<br>{error_html(self._error)}" if self._error else "")

    def _tables_html(self) -> str:
        try:
            rec = self.recommendation()
        except ConfigError as e:
            out = [f"<p>{error_html(str(e))}</p>"]
        else:
            rec.insert(0, "pick", ["★" if c == self.recommended else "" for c in rec["config"]])
            cols = ["pick", "config", "label", *[c for c in SHOWN if c in rec]]
            out = ["<p><b>recommend's configurations</b> (the Pareto front of cost and recall "
                   "among those that meet the constraints)</p>", frame_html(rec[cols], digits=3)]
        chosen = self.chosen
        if chosen is not None:
            rows = self.sessions()
            rows = rows.assign(file=rows["file"].map(lambda p: Path(str(p)).name))
            which = "recommended" if self._chosen is None else "chosen"
            out += [f"<p><b>Sessions of the {which} configuration</b>: "
                    f"{html.escape(str(self._labels[chosen]))}</p>",
                    frame_html(rows[[c for c in SESSION_SHOWN if c in rows]], digits=3)]
        return "\n".join(out)

    def static_html(self, *, full: bool = True) -> str:
        """The tuner as plain HTML: status, tables and (``full``) the Pareto plot as SVG."""
        out = [f"<div><h4>Threshold tuner: {counted(len(self._agg), 'configuration')} × "
               f"{counted(int(self._agg['sessions'].max()), 'session')}</h4>",
               f"<p>{self._status_html()}</p>"]
        if full:
            from ctxlab.viz.style import figure_svg
            svg = figure_svg(self.figure())
            out.append(svg[svg.index("<svg"):])
        out.append(self._tables_html())
        return "\n".join(out) + "</div>"

    def _build(self) -> ipywidgets.Widget:
        import ipywidgets as w

        self._w = {
            "overflows": w.Dropdown(options=OVERFLOW_CHOICES, description="overflows"),
            "recall": w.FloatSlider(min=0.0, max=1.0, step=0.01, description="min recall",
                                    readout_format=".2f", continuous_update=False),
            "objective": w.Dropdown(options=OBJECTIVES, description="optimise"),
            "presets": w.SelectMultiple(options=self._all_presets, description="presets",
                                        rows=min(6, max(2, len(self._all_presets)))),
            "x": w.ToggleButtons(options=tuple(X_AXES)),
            "y": w.ToggleButtons(options=tuple(Y_AXES)),
            "config": w.Dropdown(description="sessions of", layout=w.Layout(width="460px")),
            "status": w.HTML(), "tables": w.HTML(),
            "figure": w.Image(format="png", layout=w.Layout(width="100%"))}
        W = self._w
        actions = {"overflows": self.set_max_overflows, "recall": self.set_min_recall,
                   "objective": self.set_objective,
                   "presets": lambda v: self.set_presets(list(v)),
                   "x": lambda v: self.set_axes(x=v), "y": lambda v: self.set_axes(y=v),
                   "config": lambda v: self.choose(None if v < 0 else v)}
        for key, method in actions.items():
            W[key].observe(lambda c, m=method: None if self._syncing else self._guard(m, c["new"]),
                           names="value")
        return w.VBox([w.HBox([W["overflows"], W["recall"], W["objective"]]),
                       w.HBox([W["presets"], w.VBox([W["x"], W["y"]])]), W["status"],
                       W["figure"], W["config"], W["tables"]])

    def _refresh(self) -> None:
        if not self._w:
            return
        W = self._w
        limit = self._constraints.get("max_overflows")
        choices = list(OVERFLOW_CHOICES)
        if limit is not None and all(v != limit for _, v in choices):
            choices.append((f"≤ {limit:g}", int(limit)))
        configs = [("recommended", -1)] + [(f"{c}: {lab}", int(c)) for c, lab in
                                           zip(self._front["config"], self._front["label"])]
        self._syncing = True
        try:
            W["overflows"].options = choices
            W["overflows"].value = -1 if limit is None else int(limit)
            W["recall"].value = float(self._constraints.get("min_recall", 0.0))
            W["objective"].value = self._objective
            W["presets"].value = self._presets
            W["x"].value, W["y"].value = self._x, self._y
            W["config"].options = configs
            W["config"].value = -1 if self._chosen is None else self._chosen
        finally:
            self._syncing = False
        W["status"].value = self._status_html()
        self._error = None
        W["tables"].value = self._tables_html()
        from ctxlab.viz.style import figure_png
        W["figure"].value = figure_png(self.figure())

    def __repr__(self) -> str:
        return (f"ThresholdTuner({len(self._agg)} configurations, constraints="
                f"{self._constraints}, objective={self._objective!r}, "
                f"recommended={self.recommended})")


__all__ = ["ThresholdTuner"]
