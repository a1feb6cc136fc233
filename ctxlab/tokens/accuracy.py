"""How wrong is each estimator? Per part against a real tokenizer, per call against billed usage.

* `compare_estimators_df`: one row per part × estimator, with the reference
  tokenizer's count, the estimate and the error; `estimator_errors_df` summarises
  it by content class (MAPE, bias, p95 error, error of the total).
* `reported_usage_df`: one row per LLM call with the provider-reported
  ``input_total`` beside the estimate of what the call saw. Logs such as Claude
  Code's do not record the system prompt and tool schemas, so every call carries
  an unrecorded overhead; it is fitted from the data per session *segment* (the
  calls between two recorded compactions: Claude Code re-attaches recently read
  files after compacting, unrecorded, so the overhead changes there) as the median
  of reported − estimated over the segment's calls. Each estimator gets its own
  best constant, so the error left is the estimator's, not a guess at the system
  prompt. It is shown in its own column, never assumed zero. A segment of fewer than
  three calls has no error to show (the fit would absorb it): NaN.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.tokens.base import Estimator, text_lengths, text_series
from ctxlab.tokens.content import classify
from ctxlab.tokens.registry import estimator as get_estimator
from ctxlab.visibility import call_segments, call_sums


def segment_keys(sessions: pd.Series, segment: np.ndarray) -> np.ndarray:
    """``"<session>#<segment>"`` per call: the unit an overhead is fitted on."""
    return (sessions.astype(str) + "#" + pd.Series(segment, index=sessions.index).astype(str)
            ).to_numpy(dtype=object)


class PartsSource(Protocol):
    """A `Transcript` or a `Corpus`: parts, calls and events."""

    @property
    def frame(self) -> pd.DataFrame: ...
    @property
    def calls(self) -> pd.DataFrame: ...
    @property
    def events(self) -> pd.DataFrame: ...


def compare_estimators_df(source: PartsSource | pd.DataFrame,
                          estimators: Sequence[str | Estimator],
                          reference: str | Estimator = "tiktoken:o200k_base") -> pd.DataFrame:
    """Per part and estimator: the reference count, the estimate and the error.

    Args:
        source: a transcript, a corpus, or a part frame (columns ``content`` and ``kind``).
        estimators: specs or instances to compare.
        reference: the exact tokenizer taken as truth.

    Returns:
        One row per non-empty part × estimator: ``session``, ``part``, ``kind``,
        ``content_class``, ``chars``, ``reference``, ``ref_tokens``, ``estimator``,
        ``est_tokens``, ``error_tokens`` (estimate − reference) and ``error_pct``.

    Example:
        >>> parts = pd.DataFrame({"session": "s", "part": [0, 1], "kind": "text",
        ...                       "content": ["hello world", "x" * 40]})
        >>> df = compare_estimators_df(parts, ["chars:4"], reference="chars:2")
        >>> df[["chars", "ref_tokens", "est_tokens", "error_pct"]].values.tolist()
        [[11.0, 6.0, 3.0, -50.0], [40.0, 20.0, 10.0, -50.0]]
    """
    frame = source if isinstance(source, pd.DataFrame) else source.frame
    content = text_series(frame["content"]).fillna("")
    keep = (content.str.len() > 0).to_numpy()
    parts = frame[keep]
    ref = get_estimator(reference)
    ref_tokens = ref.count_parts(parts)
    base = pd.DataFrame({
        "session": parts["session"].to_numpy() if "session" in parts else "",
        "part": parts["part"].to_numpy() if "part" in parts else np.arange(len(parts)),
        "kind": parts["kind"].to_numpy(),
        "content_class": classify(parts["content"], parts["kind"]).to_numpy(),
        "chars": text_lengths(parts["content"]),
        "reference": ref.spec,
        "ref_tokens": ref_tokens,
    })
    rows = []
    for spec in estimators:
        est = get_estimator(spec)
        out = base.copy()
        out["estimator"] = est.spec
        out["est_tokens"] = est.count_parts(parts)
        rows.append(out)
    df = pd.concat(rows, ignore_index=True) if rows else base.assign(estimator="", est_tokens=0)
    df["error_tokens"] = df["est_tokens"] - df["ref_tokens"]
    df["error_pct"] = np.where(df["ref_tokens"] > 0,
                               100.0 * df["error_tokens"] / df["ref_tokens"].clip(lower=1), np.nan)
    df["content_class"] = pd.Categorical(df["content_class"], categories=classify(
        pd.Series([], dtype="string")).cat.categories)
    return df


def estimator_errors_df(compared: pd.DataFrame, by: str = "content_class") -> pd.DataFrame:
    """Summarise `compare_estimators_df` per estimator and group (plus an ``all`` row each).

    Columns: ``parts``, ``ref_tokens``, ``est_tokens``, ``mape_pct`` (mean absolute
    percentage error per part), ``bias_pct`` (mean signed percentage error),
    ``p95_abs_error_pct`` and ``total_error_pct`` (error of the summed tokens, what a
    budget check feels).
    """
    def summarise(g: pd.DataFrame) -> pd.Series:
        pct = g["error_pct"].dropna()
        ref, est = g["ref_tokens"].sum(), g["est_tokens"].sum()
        return pd.Series({
            "parts": len(g), "ref_tokens": int(ref), "est_tokens": int(est),
            "mape_pct": float(pct.abs().mean()) if len(pct) else np.nan,
            "bias_pct": float(pct.mean()) if len(pct) else np.nan,
            "p95_abs_error_pct": float(pct.abs().quantile(0.95)) if len(pct) else np.nan,
            "total_error_pct": float(100.0 * (est - ref) / ref) if ref else np.nan,
        })
    columns = ["estimator", by, "parts", "ref_tokens", "est_tokens", "mape_pct", "bias_pct",
               "p95_abs_error_pct", "total_error_pct"]
    if compared.empty:        # nothing compared: the columns, no rows
        kinds = {"estimator": compared["estimator"].dtype, by: "string", "parts": "int64",
                 "ref_tokens": "int64", "est_tokens": "int64"}
        return pd.DataFrame({c: pd.Series(dtype=kinds.get(c, "float64")) for c in columns})
    groups = compared.groupby(["estimator", by], observed=True, sort=True)
    per_group = groups[["ref_tokens", "est_tokens", "error_pct"]].apply(summarise).reset_index()
    overall = (compared.groupby("estimator", sort=True)[["ref_tokens", "est_tokens", "error_pct"]]
               .apply(summarise).reset_index().assign(**{by: "all"}))
    out = pd.concat([per_group.astype({by: "string"}), overall.astype({by: "string"})],
                    ignore_index=True)
    out = out.astype({"parts": "int64", "ref_tokens": "int64", "est_tokens": "int64"})
    return out[columns]


MIN_FIT_CALLS = 3
"""Calls with reported usage a fitted overhead needs before the calls' errors mean anything
(with one call the fit is that call's error; with two, their mean)."""


def fit_overhead(est_content: np.ndarray, reported: np.ndarray) -> float:
    """The unrecorded per-request overhead of one session, in tokens.

    The median of ``reported − estimate`` over the calls with reported usage, floored
    at 0 (the least-absolute-error constant for this estimator).

    Example:
        >>> fit_overhead(np.array([100., 200., 5000.]), np.array([14100., 14210., 19800.]))
        14010.0
    """
    ok = ~np.isnan(reported)
    if not ok.any():
        return 0.0
    return float(max(0.0, np.median(reported[ok] - est_content[ok])))


def reported_usage_df(source: PartsSource, estimator: str | Estimator,
                      overhead: Literal["fit"] | float | Mapping[str, float] = "fit",
                      ) -> pd.DataFrame:
    """Per call: the estimated input against the provider-reported ``input_total``.

    Args:
        source: a transcript or corpus with calls.
        estimator: spec or instance.
        overhead: ``"fit"`` (per session segment, see `fit_overhead`), a fixed number of
            tokens, or tokens per ``"<session>#<segment>"`` key (e.g.
            `Calibration.overhead_tokens`; missing keys are fitted).

    Returns:
        ``session``, ``call``, ``segment`` (recorded compactions before the call),
        ``model``, ``input_total``, ``est_content_tokens`` (visible parts + the
        estimator's framing), ``overhead_tokens``, ``est_tokens`` (their sum),
        ``error_tokens``, ``error_pct``, ``messages``, ``parts``,
        ``overhead_fitted_on`` (the calls with reported usage the segment's overhead was
        fitted on; 0 when given) and ``estimator``. The error is NaN where the overhead
        was fitted on fewer than `MIN_FIT_CALLS` calls: fitted on the call itself, the
        error would be 0 whatever the estimator.
    """
    if isinstance(overhead, str) and overhead != "fit" or isinstance(overhead, bool) or not \
            isinstance(overhead, (str, numbers.Real, Mapping)):
        raise ConfigError(f"overhead is 'fit', a number of tokens or tokens per "
                          f"'<session>#<segment>', not {overhead!r}")
    est = get_estimator(estimator)
    counts = est.count_parts(source.frame)
    sums = call_sums(source, {"content": counts})
    content = sums["content"].to_numpy() + est.framings(sums["messages"].to_numpy())
    reported = source.calls["input_total"].to_numpy(dtype=np.float64, na_value=np.nan)
    # a reported input of 0 (some logs write it for a call they did not count): unknown,
    # neither fitted on nor compared with (as `ctxlab.calibrate` does)
    reported[reported <= 0] = np.nan
    over = np.zeros(len(content))
    fitted_on = np.zeros(len(content), dtype=np.int64)      # 0: the overhead was given
    segment = call_segments(source)
    keys = segment_keys(sums["session"], segment)
    for key, idx in pd.Series(keys).groupby(keys, sort=False).indices.items():
        if isinstance(overhead, Mapping) and key in overhead:
            over[idx] = float(overhead[key])
        elif isinstance(overhead, numbers.Real):      # NumPy numbers too
            over[idx] = float(overhead)
        else:
            over[idx] = fit_overhead(content[idx], reported[idx])
            fitted_on[idx] = int((~np.isnan(reported[idx])).sum())
    total = content + over
    # an overhead fitted on one or two calls absorbs their error: it measures nothing
    err = np.where((fitted_on > 0) & (fitted_on < MIN_FIT_CALLS), np.nan, total - reported)
    return pd.DataFrame({
        "session": sums["session"], "call": sums["call"], "segment": segment,
        "model": source.calls["model"].to_numpy(),
        "input_total": source.calls["input_total"].to_numpy(),
        "est_content_tokens": np.rint(content).astype(np.int64),
        "overhead_tokens": np.rint(over).astype(np.int64),
        "est_tokens": np.rint(total).astype(np.int64),
        "error_tokens": err,
        "error_pct": 100.0 * err / reported,
        "messages": sums["messages"], "parts": sums["parts"],
        "overhead_fitted_on": fitted_on, "estimator": est.spec,
    })


def usage_errors_df(usage: pd.DataFrame) -> pd.DataFrame:
    """Per estimator (and session): MAPE, bias and p95 of `reported_usage_df`'s per-call error."""
    ok = usage.dropna(subset=["error_pct"])
    g = ok.groupby(["estimator", "session"], sort=False)["error_pct"]
    out = pd.DataFrame({"calls": g.size(), "mape_pct": g.apply(lambda x: x.abs().mean()),
                        "bias_pct": g.mean(), "p95_abs_error_pct": g.apply(
                            lambda x: x.abs().quantile(0.95))})
    return out.reset_index()


def floored_overheads(source: PartsSource, estimator: str | Estimator,
                      ) -> dict[str, tuple[int, int]]:
    """Sessions whose fitted overhead was floored at 0 while their first reporting call
    shows input the log does not hold: ``session -> (reported, estimated)`` at that call.

    An estimator that counts more than the provider does on long requests makes
    ``reported − estimate`` negative at most calls: the median, and so the fit, is then
    0, and the system prompt and tool schemas the log does not record (what the first
    call's gap shows) are missing from every replayed request. A gap counts when it is
    over 1,000 tokens and a quarter of the reported input; the fit needs `MIN_FIT_CALLS`.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> floored_overheads(t, "neurolink:anthropic")
        {'611c338b-8032-4760-b911-90698b47d269': (14585, 157)}
        >>> floored_overheads(t, "tiktoken:o200k_base")
        {}
    """
    out: dict[str, tuple[int, int]] = {}
    for session, first in _first_reporting_calls(source, estimator).iterrows():
        reported, est = int(first["input_total"]), int(first["est_content_tokens"])
        if int(first["overhead_tokens"]) == 0 and reported - est > max(1000, reported / 4):
            out[str(session)] = (reported, est)
    return out


def inflated_overheads(source: PartsSource, estimator: str | Estimator,
                       ) -> dict[str, tuple[int, int, int]]:
    """Sessions whose fitted overhead makes their first reporting call's estimate far more
    than the provider billed for it: ``session -> (reported, estimated content,
    overhead)`` at that call.

    An estimator that counts fewer tokens than the provider does makes ``reported −
    estimate`` grow with the request: the median, and so the fitted overhead, then holds
    part of the content's undercount and can exceed the whole first request, which is
    the system prompt and tool schemas plus the first message. It counts when the first
    call's estimate is over by more than 1,000 tokens and a quarter of the reported
    input (as `floored_overheads`, the other way), the overhead alone being that much:
    an estimate over with no overhead (``max:``'s schemas x 2.09 on the inspect_ai log)
    counts more than the provider, the other way round. The fit needs `MIN_FIT_CALLS`.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> inflated_overheads(t, "tiktoken:o200k_base")
        {'611c338b-8032-4760-b911-90698b47d269': (14585, 91, 21074)}
        >>> inflated_overheads(t, "neurolink:anthropic")
        {}
    """
    out: dict[str, tuple[int, int, int]] = {}
    for session, first in _first_reporting_calls(source, estimator).iterrows():
        reported, est = int(first["input_total"]), int(first["est_content_tokens"])
        over = int(first["overhead_tokens"])
        if min(est + over - reported, over) > max(1000, reported / 4):
            out[str(session)] = (reported, est, over)
    return out


def _first_reporting_calls(source: PartsSource, estimator: str | Estimator) -> pd.DataFrame:
    """Per session (the index), the `reported_usage_df` row of its first call that reports
    its input, before any recorded compaction, where the overhead was fitted on at least
    `MIN_FIT_CALLS` calls."""
    u = reported_usage_df(source, estimator)
    u = u[(u["segment"] == 0) & u["input_total"].notna() & (u["input_total"] > 0)]
    first = u.groupby("session", sort=False).head(1).set_index("session")
    return first[first["overhead_fitted_on"] >= MIN_FIT_CALLS]


def session_overheads(source: PartsSource, estimator: str | Estimator) -> dict[str, int]:
    """Per session, the unrecorded overhead of its first segment (before any compaction).

    That is the system prompt and tool schemas alone, the overhead to add when
    replaying the uncompacted log. Sessions without reported usage get 0.
    """
    u = reported_usage_df(source, estimator)
    first = u[u["segment"] == 0]
    out = first.groupby("session", sort=False)["overhead_tokens"].first()
    return {str(s): int(v) for s, v in out.items()} | {
        str(s): 0 for s in pd.unique(source.calls["session"]) if s not in out.index}
