"""Pick configurations from a sweep: totals per configuration, constraints, Pareto front.

`aggregate` sums a `ctxlab.sweep.sweep` result over sessions, one row per
configuration: counts and tokens are summed, ``peak_usage`` is the largest, ``recall``
is pooled (1 − missing / needed over every call of every session), ``retention`` too
(retained / hidden artifacts over every compaction event), and ``recall_per_mtok`` is
that recall per million tokens sent (higher: more of what was needed kept for less
input). `recommend` keeps the configurations that meet the constraints and, of those,
the ones on the cost/recall Pareto front (no other is both cheaper or as cheap and
better or as good at recall, and strictly one of them), best ``recall_per_mtok`` first;
``quality="retention"`` takes the cost/retention front instead (artifacts kept through
the compactions, what a compaction loses whether or not a later call needs it), best
retention per million tokens first.
`config_index`, `meets` and `ranked` expose the same steps for callers that work on one
aggregate (the notebook tuner, `ctxlab.viz.plot_sweep`). Results of several sweeps may be
concatenated: a configuration and session they share counts once.

When nothing was needed in the whole corpus, ``recall`` is NaN; it then counts as
meeting any ``min_recall`` and as 1.0 on the front (nothing was missed). Likewise a NaN
``retention`` (no event hid an artifact) meets any ``min_retention``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError

SUMMED = ("calls", "compactions", "calls_compacted", "events", "failures",
          "summarizer_calls", "summarizer_input_tokens", "summarizer_output_tokens",
          "tokens_sent", "cost",
          "overflows", "forced_final", "needed", "missing", "hidden_artifacts", "retained",
          "seconds")
CONSTRAINTS: dict[str, tuple[str, str]] = {
    "max_overflows": ("overflows", "max"), "max_forced_final": ("forced_final", "max"),
    "max_failures": ("failures", "max"), "max_cost": ("cost", "max"),
    "max_tokens_sent": ("tokens_sent", "max"), "max_peak_usage": ("peak_usage", "max"),
    "min_recall": ("recall", "min"), "min_retention": ("retention", "min")}
RATIOS = ("min_recall", "min_retention")
"""Constraints on a share (0 to 1, as ``recall`` and ``retention`` are; tables show them as
percentages). ``max_peak_usage`` is a ratio too, but to the limit, which a request may
pass (up to the window and beyond): it is not bounded by 1."""
QUALITIES = ("recall", "retention")
"""What `recommend`'s Pareto front weighs against cost (``quality=``)."""
CLOSEST_SHOWN = 3


def config_columns(results: pd.DataFrame) -> list[str]:
    """The columns that name a configuration: those before ``file`` (but ``config``), and
    any ``stage.param`` column after it (results concatenated: a parameter only a later
    sweep varied comes last)."""
    if "file" not in results.columns or "session" not in results.columns:
        raise ConfigError("not a sweep result: it has no 'file' and 'session' columns "
                          "(make one with ctxlab.sweep)")
    at = results.columns.get_loc("file")
    return [c for c in results.columns[:at] if c != "config"] + \
        [c for c in results.columns[at:] if isinstance(c, str) and c.count(".") == 1]


def _grouped(results: pd.DataFrame, *, once: bool = False
             ) -> tuple[list[str], pd.DataFrame, Any]:
    """The rows grouped by configuration; ``once``: each (configuration, session) once."""
    keys = config_columns(results)
    measures = pd.unique(results["measure"].dropna()) if "measure" in results else []
    if len(measures) > 1:
        raise ConfigError(f"these results count tokens_sent and cost with different "
                          f"estimators ({', '.join(map(str, measures))}): their totals do not "
                          f"compare; sweep again with one measure=")
    df = results.copy()
    for k in keys:  # NA keys (a stage param that did not apply) group together; a list
        col = df[k].astype(object)       # value read back from Parquet is an array
        col = col.map(lambda v: tuple(v) if isinstance(v, (list, np.ndarray)) else v)
        df[k] = col.where(df[k].notna(), "-")
    if once:
        df = _once(df, keys)
    return keys, df, df.groupby(keys, sort=False, dropna=False)


def _once(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Each configuration's session once: results concatenated from sweeps that share a
    configuration hold it twice (summing both would double its totals). Two rows of one
    configuration and session that differ are two pipelines the columns cannot tell
    apart: an error, not a sum."""
    # one log named two ways (a relative and an absolute path) is one log
    files = pd.unique(df["file"])       # each path resolved once
    real = {f: os.path.realpath(f) if isinstance(f, str) and os.path.exists(f) else f
            for f in files}
    look = df.assign(file=df["file"].map(real))
    ident = [*keys, "file", "session"]
    dup = look.duplicated(ident, keep="first")
    if not dup.any():
        return df
    measured = [c for c in df.columns if c not in ident and c not in ("config", "seconds")]
    kept = look.drop_duplicates([*ident, *measured])
    differ = kept.duplicated(ident, keep=False)
    if differ.any():
        pair = kept[differ & kept.duplicated(ident, keep="first")].iloc[0]
        first = kept[(kept[ident] == pair[ident]).all(axis=1)].iloc[0]
        cols = [c for c in measured if not (first[c] == pair[c] or (pd.isna(first[c])
                                                                   and pd.isna(pair[c])))]
        raise ConfigError(
            "two rows of these results have the same configuration columns "
            f"({', '.join(f'{k}={pair[k]!r}' for k in keys[:3])}, ...) and session "
            f"{pair['session']!r} but differ in {', '.join(cols[:4])}: two pipelines with "
            f"one name, or sweeps with different prices? Give pipelines names of their own "
            f"(Pipeline(name=...)) or aggregate the sweeps apart")
    return df[~dup]


def config_index(results: pd.DataFrame) -> pd.Series:
    """Each row's configuration: the position of its row in `aggregate` of ``results``.

    Example:
        >>> df = pd.DataFrame({"preset": ["b", "a", "b"], "file": "f", "session": ["1", "1", "2"],
        ...                    "tokens_sent": 1, "needed": 0, "missing": 0})
        >>> config_index(df).tolist(), aggregate(df)["preset"].tolist()
        ([0, 1, 0], ['b', 'a'])
    """
    return _grouped(results)[2].ngroup()


def aggregate(results: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration of a sweep, totals over its sessions (module doc).

    Example:
        >>> df = pd.DataFrame({"preset": ["a", "a"], "file": ["f", "f"], "session": ["1", "2"],
        ...                    "tokens_sent": [1_000_000, 1_000_000], "needed": [8, 2],
        ...                    "missing": [1, 0], "peak_usage": [0.5, 0.7]})
        >>> aggregate(df)[["recall", "recall_per_mtok", "peak_usage"]].values.tolist()
        [[0.9, 0.45, 0.7]]
    """
    keys, df, g = _grouped(results, once=True)
    out = g.size().rename("sessions").to_frame()
    for c in SUMMED:
        if c in df:
            out[c] = g[c].sum()
    if "peak_usage" in df:
        out["peak_usage"] = g["peak_usage"].max()
    out = out.reset_index()
    for k in keys:
        out[k] = out[k].where(out[k] != "-", None)
    needed = out["needed"].where(out["needed"] > 0)
    out["recall"] = (1.0 - out["missing"] / needed).astype("float64")
    if "hidden_artifacts" in out:
        hidden = out["hidden_artifacts"].where(out["hidden_artifacts"] > 0)
        out["retention"] = (out["retained"] / hidden).astype("float64")
    sent = out["tokens_sent"].where(out["tokens_sent"] > 0)
    out["recall_per_mtok"] = (out["recall"].fillna(1.0) / (sent / 1e6)).astype("float64")
    return out


def _violation(agg: pd.DataFrame, constraints: dict[str, float]) -> pd.Series:
    """How far each configuration is from the constraints (0: meets all), in relative units."""
    total = pd.Series(0.0, index=agg.index)
    for name, limit in constraints.items():
        col, kind = CONSTRAINTS[name]
        v = agg[col].astype("float64")
        if col in ("recall", "retention"):    # nothing needed / nothing hidden: none lost
            v = v.fillna(1.0)
        gap = (v - limit) if kind == "max" else (limit - v)
        total += gap.clip(lower=0).fillna(np.inf) / max(abs(float(limit)), 1.0)
    return total


def pareto_front(cost: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Which points no other beats: lower or equal cost and higher or equal quality, one
    strictly.

    Example:
        >>> pareto_front(np.array([1.0, 2.0, 2.0, 3.0]), np.array([0.5, 0.9, 0.8, 0.9])).tolist()
        [True, True, False, False]
    """
    c, q = np.asarray(cost, dtype=float), np.asarray(quality, dtype=float)
    le, ge = c[None, :] <= c[:, None], q[None, :] >= q[:, None]
    strict = (c[None, :] < c[:, None]) | (q[None, :] > q[:, None])
    return ~(le & ge & strict).any(axis=1)


def check_constraints(constraints: dict[str, Any]) -> dict[str, float]:
    """The constraints as numbers, each a known one (`CONSTRAINTS`) and each `RATIOS`
    one between 0 and 1.

    Example:
        >>> check_constraints({"min_recall": 0.99, "max_overflows": 0})
        {'min_recall': 0.99, 'max_overflows': 0.0}
        >>> check_constraints({"min_recall": 99})
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: min_recall must be between 0 and 1 (a ratio: did you mean 0.99?)
    """
    bad = sorted(set(constraints) - set(CONSTRAINTS))
    if bad:
        raise ConfigError(f"unknown constraint(s) {', '.join(bad)}; constraints: "
                          f"{', '.join(CONSTRAINTS)}")
    out = {k: float(v) for k, v in constraints.items()}
    for k in RATIOS:
        v = out.get(k)
        if v is not None and not 0 <= v <= 1:
            hint = f"did you mean {v / 100:g}?" if 1 < v <= 100 else "e.g. 0.98"
            raise ConfigError(f"{k} must be between 0 and 1 (a ratio: {hint})")
    return out


def meets(agg: pd.DataFrame, **constraints: float) -> pd.Series:
    """Whether each configuration of an `aggregate` result meets the constraints
    (`recommend`'s rules: NaN recall meets any ``min_recall``, NaN retention any
    ``min_retention``).

    Example:
        >>> agg = pd.DataFrame({"overflows": [0, 2], "recall": [0.9, float("nan")],
        ...                     "retention": [float("nan"), 0.5]})
        >>> meets(agg, max_overflows=0).tolist(), meets(agg, min_recall=0.95).tolist()
        ([True, False], [False, True])
        >>> meets(agg, min_retention=0.8).tolist()
        [True, False]
    """
    return _violation(agg, check_constraints(constraints)) == 0


def recommend(results: pd.DataFrame, *, quality: str = "recall",
              **constraints: float) -> pd.DataFrame:
    """The configurations that meet the constraints and are on the cost/quality front.

    Args:
        results: a `ctxlab.sweep.sweep` result (or several, concatenated).
        quality: what the front weighs against cost (`QUALITIES`): ``"recall"`` (needed
            facts still in the request where a later call needs them; the default) or
            ``"retention"`` (artifacts the compactions kept, needed later or not).
        **constraints: any of ``max_overflows``, ``max_forced_final``, ``max_failures``,
            ``max_cost``, ``max_tokens_sent``, ``max_peak_usage``, ``min_recall``,
            ``min_retention`` (totals over the sessions, `aggregate`; ``min_recall`` and
            ``min_retention`` as ratios, 0 to 1).

    Returns:
        `aggregate` rows of the Pareto-optimal configurations, best quality per million
        tokens sent first (``recall_per_mtok``; ties: cheaper first).

    Raises:
        ConfigError: an unknown constraint or quality, a ratio outside 0 to 1, or no
            configuration meets them (the message lists the closest ones and their values).
    """
    check_constraints(constraints)
    return ranked(aggregate(results), quality=quality, **constraints).reset_index(drop=True)


def ranked(agg: pd.DataFrame, *, quality: str = "recall", **constraints: float) -> pd.DataFrame:
    """`recommend` of an `aggregate` result (or some of its rows): the same rows in the
    same order, keeping ``agg``'s index (which configurations they are).

    Raises:
        ConfigError: as `recommend`.
    """
    limits = check_constraints(constraints)
    if quality not in QUALITIES:
        raise ConfigError(f"quality must be one of {', '.join(QUALITIES)}, not {quality!r}")
    if agg.empty:
        raise ConfigError("the sweep result has no rows")
    if quality not in agg:
        raise ConfigError(f"the sweep result has no {quality!r} column (an aggregate of a "
                          f"ctxlab.sweep result has one)")
    gap = _violation(agg, limits)
    ok = agg[gap == 0]
    if ok.empty:
        keys = list(agg.columns[:agg.columns.get_loc("sessions")])
        raise ConfigError(_none_message(agg, gap, constraints, keys))
    # NaN: nothing was needed (recall) or hidden (retention), so nothing was lost
    good = ok[quality].fillna(1.0).to_numpy(dtype=np.float64)
    front = ok[pareto_front(ok["cost"].to_numpy(), good)]
    if quality == "recall":
        per_mtok = front["recall_per_mtok"].to_numpy(dtype=np.float64)
    else:
        sent = front["tokens_sent"].where(front["tokens_sent"] > 0).to_numpy(dtype=np.float64)
        per_mtok = front[quality].fillna(1.0).to_numpy(dtype=np.float64) / (sent / 1e6)
    order = np.lexsort((front["cost"].to_numpy(), -np.nan_to_num(per_mtok, nan=-np.inf)))
    return front.iloc[order]


def _none_message(agg: pd.DataFrame, gap: pd.Series, constraints: dict[str, Any],
                  keys: list[str]) -> str:
    keys = [k for k in keys if k != "note"]
    cols = list(dict.fromkeys(CONSTRAINTS[n][0] for n in constraints))
    lines = [f"no configuration meets {', '.join(f'{k}={v}' for k, v in constraints.items())}"
             f"; the closest:"]
    for i in gap.sort_values(kind="stable").index[:CLOSEST_SHOWN]:
        r = agg.loc[i]
        name = ", ".join(f"{k}={r[k]}" for k in keys if r[k] is not None and pd.notna(r[k]))
        vals = ", ".join(f"{c}={r[c]:.4g}" for c in cols)
        lines.append(f"  {name}: {vals}")
    return "\n".join(lines)


__all__ = ["CONSTRAINTS", "QUALITIES", "RATIOS", "aggregate", "check_constraints", "config_columns",
           "config_index", "meets", "pareto_front", "ranked", "recommend"]
