"""Pictures of a sweep (`ctxlab.sweep`): the cost/quality Pareto front and grid heatmaps.

Both work on `ctxlab.recommend.aggregate` of the results: one point or cell per
configuration, totals over its sessions, recall and retention pooled. `sweep_front_df`
is that aggregate with what the Pareto picture shows: which configurations meet the
constraints (`ctxlab.recommend.meets`), which of those are on the front of the plotted
axes (lower cost, higher quality), and which one is recommended — one of `recommend`'s
rows, the first (best recall per million tokens) or the best of them for another
objective. A NaN recall (nothing was needed) counts as 1.0, as in `recommend`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.recommend import CONSTRAINTS, aggregate, config_columns, meets, pareto_front, ranked
from ctxlab.viz.style import (FRAMING_COLOUR, NEUTRAL, literal_text, new_figure, preset_colours,
                              show_nothing, token_text)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

X_AXES = {"cost": "cost (USD, summed over sessions)",
          "tokens_sent": "tokens sent (millions, summed over sessions)"}
Y_AXES = {"recall": "recall (pooled: 1 − missing / needed)",
          "retention": "retention (pooled: retained / hidden artifacts)"}
OBJECTIVES = ("recall_per_mtok", "cost", "tokens_sent", "recall", "retention")
"""What picks the recommended configuration among `recommend`'s rows: its first (best
recall per million tokens sent), the cheapest, the fewest tokens sent, or the best recall
or retention."""
DEFAULT_CONSTRAINTS: dict[str, float] = {"max_overflows": 0}
"""A configuration whose requests overflow the window is not one to deploy."""
REDUCERS = ("min", "max", "mean")
SOURCES = {"recall": ("needed", "missing"), "retention": ("hidden_artifacts", "retained"),
           "recall_per_mtok": ("needed", "missing", "tokens_sent")}
BASE = ("file", "session", "preset", "needed", "missing", "tokens_sent")
LABELLED_FRONT = 12
"""Front points labelled with their configuration, at most (the recommended one always)."""


def _require(results: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(results, pd.DataFrame):
        raise ConfigError(f"{what} takes a ctxlab.sweep result (a DataFrame), not "
                          f"{type(results).__name__}")
    missing = [c for c in dict.fromkeys(columns) if c not in results.columns]
    if missing:
        raise ConfigError(f"{what} needs column(s) {', '.join(map(repr, missing))}, which the "
                          f"results lack; pass a ctxlab.sweep result (or rows of one)")
    if results.empty:
        raise ConfigError(f"the sweep result has no rows: nothing for {what} to show")


def _sources(metrics: Sequence[str]) -> list[str]:
    return [c for m in metrics for c in SOURCES.get(m, (m,))]


def _constraints(constraints: Mapping[str, float] | None) -> dict[str, float]:
    limits = dict(DEFAULT_CONSTRAINTS if constraints is None else constraints)
    meets(pd.DataFrame(columns=[CONSTRAINTS[k][0] for k in limits if k in CONSTRAINTS]),
          **{k: 0 for k in limits})  # an unknown name fails here, naming the known ones
    for k, v in limits.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or v != v:
            raise ConfigError(f"constraint {k} must be a number, not {v!r}")
    return limits


def _value_text(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return f"{float(v):g}"
    return str(v)


def config_labels(agg: pd.DataFrame) -> pd.Series:
    """A short name per configuration: its preset, then ``name=value`` of the other grid
    columns that tell configurations apart (e.g. ``neuron, threshold=0.8``; not ``target``
    when it follows the threshold).

    Example:
        >>> agg = pd.DataFrame({"preset": ["a", "a"], "threshold": [0.5, 0.8],
        ...                     "target": [0.5, 0.5], "sessions": [1, 1]})
        >>> config_labels(agg).tolist()
        ['a, threshold=0.5', 'a, threshold=0.8']
    """
    keys = [k for k in agg.columns[:agg.columns.get_loc("sessions")] if k != "note"]
    text = pd.DataFrame({k: agg[k].map(lambda v: "-" if _norm(v) is None else _value_text(v))
                         for k in keys})
    shown = ["preset"] if "preset" in keys else []
    for k in keys:  # a column not set by those already shown (target by threshold, ...)
        if k not in shown and (text.groupby(shown)[k].nunique().max() if shown
                               else text[k].nunique()) > 1:
            shown.append(k)
    varying = [k for k in shown if k != "preset"]

    def one(row: pd.Series) -> str:
        parts = [str(row["preset"])] if "preset" in row else []
        parts += [f"{k}={_value_text(row[k])}" for k in varying
                  if row[k] is not None and not pd.isna(row[k])]
        return ", ".join(parts)
    return agg.apply(one, axis=1).astype(object) if len(agg) else pd.Series([], dtype=object)


def _pick(front: pd.DataFrame, objective: str) -> Any:
    """The index of the best of `ranked` rows for the objective (ties: their order)."""
    if objective == "recall_per_mtok":
        return front.index[0]
    v = front[objective].astype("float64")
    if objective == "recall":
        v = v.fillna(1.0)
    if objective in ("recall", "retention"):
        v = -v
    return front.index[int(np.argsort(v.fillna(np.inf).to_numpy(), kind="stable")[0])]


def sweep_front_df(results: pd.DataFrame, *, x: str = "cost", y: str = "recall",
                   constraints: Mapping[str, float] | None = None,
                   objective: str = "recall_per_mtok",
                   presets: Sequence[str] | None = None) -> pd.DataFrame:
    """`aggregate` rows with what `plot_sweep`'s Pareto picture shows.

    Args:
        results: a `ctxlab.sweep` result.
        x, y: the cost axis (`X_AXES`) and the quality axis (`Y_AXES`) of the front.
        constraints: `recommend` constraints (None: `DEFAULT_CONSTRAINTS`; ``{}``: none).
        objective: which of `recommend`'s rows is recommended (`OBJECTIVES`).
        presets: keep only these presets (None: all).

    Returns:
        One row per configuration: ``config`` (its position in `aggregate`), ``label``
        (`config_labels`), the aggregate's columns, ``feasible`` (meets the constraints),
        ``front`` (feasible and on the x/y Pareto front; a NaN retention is never on it)
        and ``recommended`` (at most one row; none when nothing meets the constraints).

    Example:
        >>> df = pd.DataFrame({"preset": ["a", "b", "c"], "file": "f", "session": "1",
        ...                    "tokens_sent": [1e6, 3e6, 5e5], "cost": [1.0, 3.0, 0.5],
        ...                    "overflows": [0, 0, 2], "needed": 10, "missing": [1, 0, 0]})
        >>> sweep_front_df(df)[["preset", "feasible", "front", "recommended"]].values.tolist()
        [['a', True, True, True], ['b', True, True, False], ['c', False, False, False]]
    """
    if x not in X_AXES or y not in Y_AXES:
        raise ConfigError(f"x must be one of {', '.join(X_AXES)} and y one of "
                          f"{', '.join(Y_AXES)}, not x={x!r}, y={y!r}")
    if objective not in OBJECTIVES:
        raise ConfigError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
    limits = _constraints(constraints)
    _require(results, [*BASE, "cost", *_sources([x, y, objective]),
                       *_sources([CONSTRAINTS[k][0] for k in limits])], "plot_sweep")
    agg = aggregate(results)
    agg.insert(0, "config", np.arange(len(agg)))
    agg.insert(1, "label", config_labels(agg.drop(columns="config")))
    if presets is not None:
        agg = agg[agg["preset"].isin(_presets(agg, presets))]
    agg["feasible"] = meets(agg, **limits)
    quality = agg[y].fillna(1.0) if y == "recall" else agg[y]
    ok = agg["feasible"] & quality.notna()
    agg["front"] = False
    if ok.any():
        agg.loc[ok, "front"] = pareto_front(agg.loc[ok, x].to_numpy(),
                                            quality[ok].to_numpy())
    agg["recommended"] = False
    if agg["feasible"].any():
        agg.loc[_pick(ranked(agg, **limits), objective), "recommended"] = True
    return agg.reset_index(drop=True)


def _presets(agg: pd.DataFrame, presets: Sequence[str]) -> list[str]:
    if isinstance(presets, str):
        raise ConfigError(f"give a list of presets, not the single {presets!r}")
    known = list(dict.fromkeys(agg["preset"].astype(str)))
    unknown = [p for p in presets if p not in known]
    if unknown:
        raise ConfigError(f"{unknown} are not presets of the sweep; its presets: {known}")
    if not presets:
        raise ConfigError(f"choose at least one preset of {known}")
    return list(presets)


@literal_text
def plot_sweep(results: pd.DataFrame, x: str = "cost", y: str = "recall",
               kind: Literal["pareto", "heatmap"] = "pareto", *,
               constraints: Mapping[str, float] | None = None,
               objective: str = "recall_per_mtok", presets: Sequence[str] | None = None,
               metric: str = "recall", index: str = "threshold", columns: str = "preset",
               reduce: str | None = None, ax: Axes | None = None) -> Figure:
    """A sweep's configurations: the cost/quality Pareto front, or a grid heatmap.

    Args:
        results: a `ctxlab.sweep` result.
        x, y: (pareto) the cost axis, ``cost`` or ``tokens_sent``, and the quality axis,
            ``recall`` or ``retention``.
        kind: ``pareto``: a point per configuration, coloured by preset; those that miss
            the constraints as crosses; the front of the feasible ones ringed and joined;
            the recommended one starred. ``heatmap``: ``metric`` per ``index`` ×
            ``columns`` cell (two grid columns), values written in the cells.
        constraints, objective, presets: as `sweep_front_df` (presets: both kinds).
        metric: (heatmap) a column of `ctxlab.recommend.aggregate`.
        index, columns: (heatmap) the grid columns of the rows and of the columns.
        reduce: (heatmap) ``min``, ``max`` or ``mean`` when configurations that differ in
            another grid column share a cell (None: that is an error).
        ax: draw into this axes instead of a new figure.

    Raises:
        ConfigError: columns missing, no rows, an unknown axis, objective, constraint,
            preset, metric or grid column.
    """
    if kind == "pareto":
        front = sweep_front_df(results, x=x, y=y, constraints=constraints,
                               objective=objective, presets=presets)
        return _pareto(front, x, y, _constraints(constraints), objective, ax)
    if kind == "heatmap":
        return _heatmap(results, metric, index, columns, reduce, presets, ax)
    raise ConfigError(f"kind must be 'pareto' or 'heatmap', not {kind!r}")


def _pareto(s: pd.DataFrame, x: str, y: str, limits: dict[str, float], objective: str,
            ax: Axes | None) -> Figure:
    from matplotlib.lines import Line2D

    fig, ax = new_figure(ax, (8.5, 5.0))
    scale = 1e6 if x == "tokens_sent" else 1.0
    qual = s[y].fillna(1.0) if y == "recall" else s[y]
    s = s.assign(_x=s[x] / scale, _y=qual)
    drawn = s[s["_y"].notna()]
    colours = preset_colours(s["preset"].astype(str))
    for gid, rows, marker, size in (("feasible", drawn[drawn["feasible"]], "o", 36),
                                    ("infeasible", drawn[~drawn["feasible"]], "x", 40)):
        ax.scatter(rows["_x"], rows["_y"], marker=marker, s=size, zorder=3, gid=gid,
                   c=[colours[p] for p in rows["preset"].astype(str)])
    front = drawn[drawn["front"]].sort_values(["_x", "_y"], kind="stable")
    ax.plot(front["_x"], front["_y"], drawstyle="steps-post", color=NEUTRAL[1], lw=1, ls="--",
            zorder=2, gid="front-line")
    ax.scatter(front["_x"], front["_y"], s=110, facecolors="none", edgecolors="black",
               linewidths=1.1, zorder=4, gid="front")
    mid = (drawn["_x"].min() + drawn["_x"].max()) / 2 if len(drawn) else 0.0
    recommended = s[s["recommended"]]
    best = recommended[recommended["_y"].notna()]   # no star, no legend entry at a NaN
    ax.margins(0.08)
    if len(best):
        r = best.iloc[0]
        ax.scatter([r["_x"]], [r["_y"]], marker="*", s=260, c=[colours[str(r["preset"])]],
                   edgecolors="black", linewidths=0.8, zorder=5, gid="recommended")
        left = r["_x"] <= mid
        text = f"recommended: {r['label']}"
        ax.annotate(text, (r["_x"], r["_y"]), xytext=(10 if left else -10, 10),
                    textcoords="offset points", fontsize=8, fontweight="bold",
                    ha="left" if left else "right", va="center")
    rule = ", ".join(f"{k}={v:g}" for k, v in limits.items()) or "no constraints"
    handles = [Line2D([], [], marker="o", ls="", color=c, label=p) for p, c in colours.items()]
    if not drawn["feasible"].all():
        handles.append(Line2D([], [], marker="x", ls="", color=NEUTRAL[1],
                              label=f"misses {rule}"))
    if len(front):
        handles.append(Line2D([], [], marker="o", ls="--", color=NEUTRAL[1], mfc="none",
                              mec="black", markersize=9, label="Pareto front (constraints met)"))
    if len(best):
        handles.append(Line2D([], [], marker="*", ls="", color=NEUTRAL[1], mec="black",
                              markersize=12, label=f"recommended (best {objective})"))
    ax.set_xlabel(X_AXES[x])
    ax.set_ylabel(Y_AXES[y])
    ax.grid(alpha=0.3)
    sessions = int(s["sessions"].max()) if len(s) else 0
    title = (f"{y} against {x.replace('_', ' ')}: {_count(len(s), 'configuration')} × "
             f"{_count(sessions, 'session')} — constraints: {rule}")
    notes = []
    if not s["feasible"].any():
        notes.append("no configuration meets the constraints")
    if len(drawn) < len(s):
        notes.append(f"{len(s) - len(drawn)} with no {y} (nothing hidden) not drawn")
    if len(recommended) and not len(best):
        notes.append(f"recommended: {recommended['label'].iloc[0]} (no {y})")
    if drawn.empty:
        show_nothing(ax, f"No configuration has a {y}: none hid an artifact, so there is "
                         "no point to draw.")
    ax.set_title(title + ("\n" + "; ".join(notes) if notes else ""), fontsize=10)
    # one label per point drawn: configurations that score alike (a threshold that never
    # fires) sit on one spot, and five labels there were five labels on top of each other
    spots = front.groupby(["_x", "_y"], sort=False)
    labels = front.assign(same=spots["label"].transform("size")).drop_duplicates(["_x", "_y"])
    labels = labels[~spots["recommended"].transform("any").loc[labels.index]]
    if len(labels) + len(best) > LABELLED_FRONT:
        labels = labels.iloc[0:0]
    # labels go where the laid-out axes put their points (constrained layout shrinks
    # the axes for the title and labels: lay the figure out first)
    fig.draw_without_rendering()
    marks = {(px, py): _label_box(ax, px, py, 0, 0, "", 0)   # the points: 11 pt rings
             for px, py in drawn[["_x", "_y"]].drop_duplicates().itertuples(index=False)}
    placed = []
    if len(best):
        r = best.iloc[0]
        left = r["_x"] <= mid
        placed.append(_label_box(ax, r["_x"], r["_y"], 10 if left else -10, 10,
                                 f"recommended: {r['label']}", 8.5))
    crowded = 0
    for _, r in labels.iterrows():
        text = r["label"] + (f" (+{r['same'] - 1} alike)" if r["same"] > 1 else "")
        side = 1 if r["_x"] <= mid else -1
        # below right of the point (left of it on the right half), else above, else the
        # other side: the first place no other label holds
        for dx, dy in ((7 * side, -11), (7 * side, 11), (-7 * side, -11), (-7 * side, 11)):
            box = _label_box(ax, r["_x"], r["_y"], dx, dy, text, 7)
            others = [m for k, m in marks.items() if k != (r["_x"], r["_y"])]
            if not any(_overlap(box, other) for other in placed + others):
                break
        else:
            crowded += 1
            continue
        placed.append(box)
        ax.annotate(text, (r["_x"], r["_y"]), xytext=(dx, dy), textcoords="offset points",
                    fontsize=7, color=NEUTRAL[1], ha="left" if dx > 0 else "right",
                    va="center", gid="front-label")
    if crowded:
        handles.append(Line2D([], [], ls="", label=f"{_count(crowded, 'crowded front point')} "
                              "not labelled (sweep_front_df lists all)"))
    if len(drawn):
        ax.legend(handles=handles, fontsize=8, loc="best")
    return fig


def _label_box(ax: Axes, x: float, y: float, dx: float, dy: float, text: str,
               size: float) -> tuple[float, float, float, float]:
    """Where a label of ``text`` at ``size`` points, ``dx``/``dy`` points off the data
    point (left-aligned when ``dx`` > 0, else right-aligned; centred vertically), lies, in
    points: (left, bottom, right, top); with no text, the point's marker. The width is an
    estimate (0.6 em a character)."""
    ax.get_xlim(), ax.get_ylim()     # autoscale the view first: transData uses its limits
    px, py = ax.transData.transform((x, y)) * 72 / ax.figure.dpi
    if not text:        # the point's own marker
        return px - 5.5, py - 5.5, px + 5.5, py + 5.5
    w, h, pad = 0.6 * size * len(text), 1.3 * size, 2.0
    left = px + dx if dx > 0 else px + dx - w
    return left - pad, py + dy - h / 2 - pad, left + w + pad, py + dy + h / 2 + pad


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _levels(values: pd.Series) -> list[Any]:
    """A grid column's distinct values in display order: numbers sorted, else as they come;
    missing (the parameter did not apply) last."""
    present = [v for v in dict.fromkeys(values.tolist()) if v is not None and not pd.isna(v)]
    if present and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                       for v in present):
        present = sorted(present)
    return present + ([None] if any(_norm(v) is None for v in values) else [])


def _norm(v: Any) -> Any:
    return None if v is None or pd.isna(v) else v


def _cell_text(metric: str, v: float) -> str:
    if metric in ("recall", "retention", "peak_usage", "recall_per_mtok"):
        return f"{v:.3f}"
    if float(v).is_integer():
        return token_text(v) if "tokens" in metric else f"{v:,.0f}"
    return f"{v:.3g}"


def _heatmap(results: pd.DataFrame, metric: str, index: str, columns: str,
             reduce: str | None, presets: Sequence[str] | None, ax: Axes | None) -> Figure:
    import matplotlib
    from matplotlib.patches import Rectangle

    _require(results, [*BASE, index, columns], "plot_sweep")
    keys = [k for k in config_columns(results) if k != "note"]
    for name, col in (("index", index), ("columns", columns)):
        if col not in keys:
            raise ConfigError(f"{name}={col!r} is not a grid column of the sweep; its grid "
                              f"columns: {', '.join(keys)}")
    if index == columns:
        raise ConfigError(f"index and columns are both {index!r}; choose two grid columns")
    if reduce is not None and reduce not in REDUCERS:
        raise ConfigError(f"reduce must be one of {', '.join(REDUCERS)} or None, not {reduce!r}")
    agg = aggregate(results)
    numeric = [c for c in agg.columns[agg.columns.get_loc("sessions"):]
               if pd.api.types.is_numeric_dtype(agg[c])]
    if metric not in numeric:
        raise ConfigError(f"metric {metric!r} is not a metric of the sweep; metrics: "
                          f"{', '.join(numeric)}")
    if presets is not None:
        agg = agg[agg["preset"].isin(_presets(agg, presets))]
    rows, cols = _levels(agg[index]), _levels(agg[columns])
    ri = agg[index].map(lambda v: rows.index(_norm(v))).to_numpy()
    ci = agg[columns].map(lambda v: cols.index(_norm(v))).to_numpy()
    count = np.zeros((len(rows), len(cols)), dtype=int)
    np.add.at(count, (ri, ci), 1)
    if reduce is None and (count > 1).any():
        text = agg[keys].map(lambda v: "-" if _norm(v) is None else _value_text(v))
        spread = text.groupby([ri, ci]).nunique().max()
        others = [k for k in keys if k not in (index, columns) and spread[k] > 1]
        raise ConfigError(f"{int(count.max())} configurations share a cell of {index} × "
                          f"{columns} (they differ in {', '.join(others)}); keep one value of "
                          f"each (filter the results) or pass reduce='min', 'max' or 'mean'")
    cell = pd.DataFrame({"r": ri, "c": ci, "v": agg[metric].astype("float64").to_numpy()})
    values = np.full(count.shape, np.nan)
    got = cell.groupby(["r", "c"])["v"].agg(reduce or "first")
    values[got.index.get_level_values(0), got.index.get_level_values(1)] = got.to_numpy()
    fig, ax = new_figure(ax, (max(4.5, 1.3 * len(cols) + 2.5), max(3.0, 0.45 * len(rows) + 1.8)))
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#F2F2F2")
    im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=lo, vmax=hi, origin="lower",
                   aspect="auto", interpolation="nearest")
    for i in range(len(rows)):
        for j in range(len(cols)):
            v = values[i, j]
            if np.isfinite(v):
                text, colour = _cell_text(metric, v), "white" if im.norm(v) < 0.6 else "black"
            else:
                text, colour = ("NaN" if count[i, j] else "not run"), NEUTRAL[1]
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=0,
                                       hatch="///", edgecolor=FRAMING_COLOUR, gid="nan-cell"))
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour,
                    gid=f"cell-{i}-{j}")
    ax.set_xticks(range(len(cols)), [_level_text(v) for v in cols], fontsize=8)
    ax.set_yticks(range(len(rows)), [_level_text(v) for v in rows], fontsize=8)
    ax.set_xlabel(columns)
    ax.set_ylabel(index)
    bar = fig.colorbar(im, ax=ax, label=metric + (f" ({reduce} per cell)" if reduce else ""))
    if "tokens" in metric:      # 16.9M, not 1.69 under a "1e7" offset
        from matplotlib.ticker import FuncFormatter

        bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: token_text(v)))
    sessions = int(agg["sessions"].max()) if len(agg) else 0
    ax.set_title(f"{metric} by {index} × {columns}: {_count(len(agg), 'configuration')} × "
                 f"{_count(sessions, 'session')}" + ("" if np.isfinite(values).all() else
                                                     " (hatched: no value)"), fontsize=10)
    return fig


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _level_text(v: Any) -> str:
    return "not set" if v is None else _value_text(v)


__all__ = ["DEFAULT_CONSTRAINTS", "OBJECTIVES", "X_AXES", "Y_AXES", "config_labels",
           "plot_sweep", "sweep_front_df"]
