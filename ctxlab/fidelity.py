"""How faithfully a replay reproduces a real log: per-call usage and compaction points.

A log with reported usage and recorded compactions (Claude Code's) is the ground truth;
a replay of a pipeline over the same log, uncompacted (`ctxlab.replay`, or
`ctxlab.pipeline.compact_all` on ``t.rewind_recorded()``), is the model. These
functions put the two side by side:

* `fidelity_df`: per call, the reported input against the replay's estimated request,
  and whether the real agent and the replay compacted right before that call;
* `fidelity_errors_df`: per session, the error of those estimates (MAPE, bias), over all
  calls and over the calls where both are in the same segment (same number of
  compactions behind them), which separates estimation error from timing;
* `compaction_points_df`: per compaction, the real and the predicted call, the tokens
  before (recorded ``pre_tokens`` against the estimate) and right after;
* `threshold_bounds_df`: what the log alone says about the agent's trigger: the
  request sizes that went out without compaction and the ``pre_tokens`` that did not;
* `claude_code_checks_df`: Claude Code's own check before every call, from the log's
  reported usage, which places every recorded compaction of the real logs exactly.

Example:
    >>> import ctxlab
    >>> t = ctxlab.load("datasets/coding_session.jsonl")
    >>> r = ctxlab.replay(t, "claude-code", window=200_000)
    >>> fid = fidelity_df(t, r)
    >>> int(fid["real_compaction"].sum())
    1
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.schema import Transcript, one_log
from ctxlab.tokens import Estimator
from ctxlab.tokens import estimator as get_estimator
from ctxlab.tokens.accuracy import MIN_FIT_CALLS
from ctxlab.visibility import call_segments, call_sums

REPLAY_COLUMNS = ("session", "call", "tokens_after", "triggered")
FIDELITY_COLUMNS = ("session", "call", "segment", "input_total", "est_tokens_before",
                    "est_tokens", "error_tokens", "error_pct", "real_compaction",
                    "predicted_compaction")


def replay_rows(replayed: Any) -> pd.DataFrame:
    """The per-call rows of a replay: a DataFrame, or the ``.calls`` of a result.

    Accepts `ctxlab.replay`'s `Replay`, the rows `ctxlab.pipeline.compact_all` returns,
    or any object with a ``calls`` DataFrame holding ``session``, ``call``,
    ``tokens_after`` and ``triggered``.

    Raises:
        ConfigError: no such frame, or a column is missing.
    """
    rows = replayed if isinstance(replayed, pd.DataFrame) else getattr(replayed, "calls", None)
    if not isinstance(rows, pd.DataFrame):
        raise ConfigError(f"expected a replay (with a .calls DataFrame) or its rows, got "
                          f"{type(replayed).__name__}; with compact_all, pass the rows (the "
                          f"second item it returns)")
    missing = [c for c in REPLAY_COLUMNS if c not in rows.columns]
    if missing:
        raise ConfigError(f"the replay rows lack {missing}; they need {list(REPLAY_COLUMNS)} "
                          f"(a transcript's calls are not replay rows: pass ctxlab.replay's "
                          f"result or compact_all's rows)")
    return rows


def fidelity_df(transcript: Transcript, replayed: Any) -> pd.DataFrame:
    """Per call of the real log: reported input against the replay's estimated request.

    Args:
        transcript: the real log, with reported usage and its recorded compactions.
        replayed: the replay of a pipeline over it (see `replay_rows`).

    Returns:
        One row per call of the log, in its order: ``session``, ``call``, ``segment``
        (recorded compactions before the call), ``input_total`` (reported),
        ``est_tokens_before`` (the replay's request before compacting at this call),
        ``est_tokens`` (after: what the replay sends), ``error_tokens``
        (``est_tokens − input_total``), ``error_pct``, ``real_compaction`` (a recorded
        compaction happened between the previous call and this one),
        ``predicted_compaction`` (the replay compacted at this call: triggered, and a
        stage acted when the rows say which). Calls the replay lacks have NA estimates.
        When ``replayed`` is a `ctxlab.replay` that fitted its overheads from the log (its
        default), the error of a session's first segment is NA where fewer than
        `MIN_FIT_CALLS` of its calls report usage: the overhead was fitted on those calls,
        so their error measures nothing (0 on a one-call session whatever the estimate),
        as in `ctxlab.reported_usage_df`.
    """
    transcript = one_log(transcript, "fidelity_df")
    rows = replay_rows(replayed)
    calls = transcript.calls
    seg = call_segments(transcript)
    base = pd.DataFrame({"session": calls["session"].astype("string").to_numpy(),
                         "call": calls["call"].astype("int64").to_numpy(), "segment": seg,
                         "input_total": calls["input_total"].astype("Int64").to_numpy(),
                         "_end": calls["input_end_pos"].to_numpy(dtype=np.float64)})
    base = base.sort_values(["session", "_end"], kind="stable")
    prev = base.groupby("session", sort=False)["segment"].shift(1, fill_value=0)
    base["real_compaction"] = (base["segment"] > prev).to_numpy()
    base = base.sort_index()
    acted = rows["triggered"].astype(bool).to_numpy(copy=True)
    if "stages_used" in rows.columns:
        acted &= rows["stages_used"].fillna("").astype(str).str.len().to_numpy() > 0
    before = rows["tokens_before"] if "tokens_before" in rows.columns else rows["tokens_after"]
    est = pd.DataFrame({"session": rows["session"].astype("string").to_numpy(),
                        "call": rows["call"].astype("int64").to_numpy(),
                        "est_tokens_before": before.astype("Int64").to_numpy(),
                        "est_tokens": rows["tokens_after"].astype("Int64").to_numpy(),
                        "predicted_compaction": acted})
    est = est.drop_duplicates(["session", "call"], keep="last")
    out = base.merge(est, on=["session", "call"], how="left", validate="one_to_one")
    out["predicted_compaction"] = out["predicted_compaction"].fillna(False).astype(bool)
    err = out["est_tokens"].astype("Float64") - out["input_total"].astype("Float64")
    if getattr(getattr(replayed, "settings", None), "log", None) is not None:
        # the replay's overheads were fitted on each session's first segment
        first = (out["segment"] == 0) & out["input_total"].notna()
        fitted_on = first.groupby(out["session"], sort=False).transform("sum")
        err = err.mask(first & (fitted_on < MIN_FIT_CALLS))
    out["error_tokens"] = err
    reported = out["input_total"].astype("Float64")
    out["error_pct"] = (100.0 * err / reported.where(reported > 0)).astype("Float64")
    return out[list(FIDELITY_COLUMNS)].reset_index(drop=True)


def fidelity_errors_df(fidelity: pd.DataFrame) -> pd.DataFrame:
    """Per session, how far the replay's requests are from the reported ones.

    Args:
        fidelity: `fidelity_df`'s result.

    Returns:
        ``session``, ``calls`` (with both numbers), ``mape_pct`` (the mean over those
        calls of ``|error_pct|``), ``bias_pct``, ``p95_abs_error_pct``,
        ``max_abs_error_pct`` (the worst single call), and ``aligned_calls`` /
        ``aligned_mape_pct``: the same over
        the calls where the real log and the replay have compacted equally often, so a
        compaction predicted a few calls late does not count as estimation error.
    """
    # compactions counted over every call (one at a call without usage counts too), then
    # the calls with both numbers kept
    f = fidelity.copy()
    real_seg = f.groupby("session", sort=False)["real_compaction"].cumsum()
    pred_seg = f.groupby("session", sort=False)["predicted_compaction"].cumsum()
    f["aligned"] = (real_seg == pred_seg).to_numpy()
    f = f.dropna(subset=["error_pct"])
    f["abs_pct"] = f["error_pct"].astype("float64").abs()
    rows = []
    for session, g in f.groupby("session", sort=False):
        a = g[g["aligned"]]
        rows.append({"session": session, "calls": len(g), "mape_pct": g["abs_pct"].mean(),
                     "bias_pct": g["error_pct"].astype("float64").mean(),
                     "p95_abs_error_pct": g["abs_pct"].quantile(0.95),
                     "max_abs_error_pct": g["abs_pct"].max(),
                     "aligned_calls": len(a),
                     "aligned_mape_pct": a["abs_pct"].mean() if len(a) else np.nan})
    cols = ["session", "calls", "mape_pct", "bias_pct", "p95_abs_error_pct",
            "max_abs_error_pct", "aligned_calls", "aligned_mape_pct"]
    return pd.DataFrame(rows, columns=cols).astype({"calls": "int64", "aligned_calls": "int64"})


def compaction_points_df(transcript: Transcript, replayed: Any) -> pd.DataFrame:
    """Per compaction, where the real agent compacted against where the replay did.

    The k-th recorded compaction of a session is paired with the k-th compaction of the
    replay; one without a partner has NA on the other side.

    Returns:
        ``session``, ``compaction`` (0, 1, ... within the session), ``real_call`` (the
        first call after the recorded compaction), ``predicted_call``, ``offset_calls``
        (predicted − real), ``pre_tokens_recorded`` (the agent's own count when it
        compacted), ``pre_tokens_est`` (the replay's request at the predicted call, before
        compacting), ``pre_tokens_est_at_real`` (the replay's request at the real call),
        ``post_input_reported`` (reported input of the real call),
        ``post_input_est`` (the replay's request right after compacting),
        ``post_error_pct``.
    """
    fid = fidelity_df(transcript, replayed)
    ev = transcript.events
    rec = ev[ev["origin"] == "recorded"].sort_values(["session", "pos"], kind="stable")

    def ranked(rows: pd.DataFrame, **columns: str) -> pd.DataFrame:
        """Some rows of a session numbered 0, 1, ... (``compaction``), columns renamed."""
        out = rows[["session", *columns]].rename(columns=columns)
        return out.assign(compaction=rows.groupby("session", sort=False).cumcount())

    real = ranked(fid[fid["real_compaction"]], call="real_call",
                  est_tokens_before="pre_tokens_est_at_real", input_total="post_input_reported")
    pred = ranked(fid[fid["predicted_compaction"]], call="predicted_call",
                  est_tokens_before="pre_tokens_est", est_tokens="post_input_est")
    pre = ranked(rec, pre_tokens="pre_tokens_recorded")
    # the k-th of each side paired, as many as the longer side has; sessions in fid's order
    out = real.merge(pred, on=["session", "compaction"], how="outer")
    out = out.merge(pre, on=["session", "compaction"], how="left")
    order = {s: i for i, s in enumerate(pd.unique(fid["session"]))}
    out = out.iloc[np.lexsort((out["compaction"].to_numpy(),
                               out["session"].map(order).to_numpy()))]
    cols = ["session", "compaction", "real_call", "predicted_call", "pre_tokens_recorded",
            "pre_tokens_est", "pre_tokens_est_at_real", "post_input_reported",
            "post_input_est"]
    out = out[cols].reset_index(drop=True)
    out = out.astype({"session": "string", "compaction": "int64",
                      **{c: "Int64" for c in cols[2:]}})
    out.insert(4, "offset_calls", out["predicted_call"] - out["real_call"])
    rep = out["post_input_reported"].astype("Float64")
    out["post_error_pct"] = (100.0 * (out["post_input_est"].astype("Float64") - rep)
                             / rep.where(rep > 0)).astype("Float64")
    return out


def threshold_bounds_df(transcript: Transcript, *, window: int = 200_000,
                        reserve_tokens: int = 20_000) -> pd.DataFrame:
    """What a log says about its agent's compaction trigger, one row per recorded compaction.

    Before every call the agent checks the size of its context: the last call's reported
    input plus its output, plus an estimate of what came after. The checks before the
    calls that went out uncompacted stayed under the threshold; the one that fired
    reported ``pre_tokens``. So the threshold lies in ``(lower_tokens, upper_tokens]``:
    ``lower_tokens`` is the largest known part (input + output of a call) of a check that
    did not fire — the new messages' estimate comes on top, so the true bound is a little
    higher — and ``upper_tokens`` is ``pre_tokens``. Claude Code 2.x logs record
    ``output_tokens`` as streaming snapshots (often 1), so this bound is loose there;
    `claude_code_checks_df` estimates the answers and gives a tighter one.

    Args:
        transcript: a log with reported usage and recorded compactions.
        window: the model's context window.
        reserve_tokens: the output reserve of a "window minus reserve" definition (Claude
            Code holds back ``min(max output, 20,000)``).

    Returns:
        ``session``, ``real_call``, ``lower_tokens``, ``upper_tokens``, and both as shares
        of the window (``lower_ratio_window``...) and of the window minus the reserve
        (``lower_ratio_available``...).

    Example:
        >>> import ctxlab
        >>> b = threshold_bounds_df(ctxlab.load("datasets/coding_session.jsonl"))
        >>> bool((b["lower_tokens"] < b["upper_tokens"]).all())
        True
    """
    fid = fidelity_df(transcript, pd.DataFrame(columns=list(REPLAY_COLUMNS)))
    out_tokens = transcript.calls.set_index(["session", "call"])["output_tokens"]
    ev = transcript.events
    rec = ev[ev["origin"] == "recorded"].sort_values(["session", "pos"], kind="stable")
    rows = []
    for session in pd.unique(fid["session"]):
        f = fid[fid["session"] == session].reset_index(drop=True)
        pre = rec.loc[rec["session"] == session, "pre_tokens"].tolist()
        starts = [0] + [int(i) for i in np.flatnonzero(f["real_compaction"].to_numpy())]
        for k, at in enumerate(starts[1:]):
            # checks before calls starts[k] + 1 .. at - 1 did not fire: usage of the calls
            # starts[k] .. at - 2
            seg = f.iloc[starts[k]:max(starts[k], at - 1)]
            outs = [out_tokens.get((session, int(c)), 0) for c in seg["call"]]
            used = seg["input_total"].astype("Float64").fillna(0).to_numpy(dtype=float) + \
                np.nan_to_num(np.asarray(outs, dtype=float))
            rows.append({"session": session, "real_call": int(f["call"].iloc[at]),
                         "lower_tokens": int(used.max()) if len(used) else 0,
                         "upper_tokens": pre[k] if k < len(pre) else pd.NA})
    out = pd.DataFrame(rows, columns=["session", "real_call", "lower_tokens", "upper_tokens"])
    out = out.astype({"session": "string", "real_call": "int64", "lower_tokens": "int64",
                      "upper_tokens": "Int64"})
    for side in ("lower", "upper"):
        tokens = out[f"{side}_tokens"].astype("Float64")
        out[f"{side}_ratio_window"] = tokens / window
        out[f"{side}_ratio_available"] = tokens / (window - reserve_tokens)
    return out


def claude_code_checks_df(transcript: Transcript, estimator: str | Estimator, *,
                          window: int = 200_000, reserve_tokens: int = 20_000,
                          buffer_tokens: int = 13_000) -> pd.DataFrame:
    """Claude Code's compaction check before every call, computed from the log alone.

    Before each request Claude Code measures its context as the usage the API reported
    for its last response (input and output) plus an estimate of the messages added
    since, and compacts when that reaches ``window − reserve − buffer`` (2.x: the
    reserve is ``min(max output, 20,000)``, the buffer 13,000; 167,000 of 200,000).
    The logs' ``output_tokens`` are streaming snapshots (1 for an 8,000-character
    ``Write``), so the answer is estimated with the rest::

        checked(k) = input_total(k − 1) + est(request k) − est(request k − 1)

    where ``est`` is the estimated uncompacted request (parts and framing). A logged
    request is the uncompacted one only up to the session's first recorded compaction,
    so the checks run up to the first call after it.

    Args:
        transcript: a log with reported usage (recorded compactions are rewound).
        estimator: spec or instance for the new parts.
        window, reserve_tokens, buffer_tokens: the threshold's terms.

    Returns:
        One row per checked call: ``session``, ``call``, ``input_total`` (reported),
        ``checked_tokens``, ``threshold_tokens``, ``fires`` (``checked_tokens >=
        threshold_tokens``), ``real_compaction`` (a recorded compaction came right
        before the call) and ``pre_tokens`` (its recorded count; NA elsewhere).

    Example:
        >>> import ctxlab
        >>> c = claude_code_checks_df(ctxlab.load("datasets/coding_session.jsonl"),
        ...                           "chars:4")
        >>> list(c.columns[:4])
        ['session', 'call', 'input_total', 'checked_tokens']
    """
    est = get_estimator(estimator)
    base = transcript.rewind_recorded()
    sums = call_sums(base, {"content": est.count_parts(base.frame)})
    framing = np.array([est.framing(int(m)) for m in sums["messages"]], dtype=np.float64)
    calls = transcript.calls
    df = pd.DataFrame({"session": calls["session"].astype("string").to_numpy(),
                       "call": calls["call"].astype("int64").to_numpy(),
                       "input_total": calls["input_total"].astype("Int64").to_numpy(),
                       "_est": sums["content"].to_numpy(dtype=np.float64) + framing,
                       "_end": calls["input_end_pos"].to_numpy(dtype=np.float64),
                       "_seg": call_segments(transcript)})
    df = df.sort_values(["session", "_end"], kind="stable").reset_index(drop=True)
    g = df.groupby("session", sort=False)
    prev_seg = g["_seg"].shift(1)
    delta = df["_est"] - g["_est"].shift(1)
    checked = df["input_total"].astype("Float64").groupby(df["session"]).shift(1) + delta
    keep = (prev_seg == 0).to_numpy() & checked.notna().to_numpy()
    threshold = window - reserve_tokens - buffer_tokens
    rec = transcript.events[transcript.events["origin"] == "recorded"]
    first_pre = rec.sort_values("pos", kind="stable").groupby("session")["pre_tokens"].first()
    real = (df["_seg"] > prev_seg.fillna(0)).to_numpy()
    out = pd.DataFrame({"session": df["session"], "call": df["call"],
                        "input_total": df["input_total"],
                        "checked_tokens": checked.round().astype("Int64"),
                        "threshold_tokens": threshold, "real_compaction": real})[keep]
    out["fires"] = (out["checked_tokens"] >= threshold).astype(bool)
    pre = out["session"].map(first_pre.to_dict()).astype("Int64")
    out["pre_tokens"] = pre.where(out["real_compaction"], pd.NA)
    cols = ["session", "call", "input_total", "checked_tokens", "threshold_tokens", "fires",
            "real_compaction", "pre_tokens"]
    return out[cols].astype({"threshold_tokens": "int64"}).reset_index(drop=True)


def overhead_notes(replayed: Any) -> list[str]:
    """What a replay's fitted unrecorded overheads leave out: one line per estimator whose
    fit was floored at 0 though the first call shows input the log does not hold
    (`ctxlab.tokens.accuracy.floored_overheads`), for the CLI and the report to say.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> print(overhead_notes(ctxlab.replay(t, "neurolink"))[0][:72])
        neurolink:anthropic counts more than the provider on this log's long req
        >>> overhead_notes(ctxlab.replay(t, "claude-code"))
        []
    """
    from ctxlab.tokens.accuracy import floored_overheads

    notes = []
    for spec, s, (reported, estimated), more in _first_sessions(replayed, floored_overheads):
        notes.append(
            f"{spec} counts more than the provider on this log's long requests, so the "
            f"unrecorded overhead fitted for it is 0: session {s}{more} reported "
            f"{reported:,} input tokens at its first call against {estimated:,} estimated, "
            f"so about {reported - estimated:,} tokens of system prompt and tool schemas "
            f"are missing from every replayed request; an exact tokenizer (estimator "
            f"tiktoken:o200k_base) or a calibration (ctxlab estimators --calibrate) fits "
            f"this log better")
    return notes


def inflated_overhead_notes(replayed: Any) -> list[str]:
    """What a replay's fitted unrecorded overheads overstate: one line per estimator whose
    fit makes the first call's estimate far more than the provider billed for it
    (`ctxlab.tokens.accuracy.inflated_overheads`), for the CLI and the report to say: the
    overhead then holds part of the content's undercount, not only the system prompt.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> print(inflated_overhead_notes(ctxlab.replay(t, "claude-code"))[0][:80])
        tiktoken:o200k_base counts fewer tokens than the provider on this log's long req
        >>> inflated_overhead_notes(ctxlab.replay(t, "neurolink"))
        []
    """
    from ctxlab.tokens.accuracy import inflated_overheads

    notes = []
    for spec, s, (reported, content, overhead), more in _first_sessions(replayed,
                                                                          inflated_overheads):
        # each session has its own fit: with several, the amount is the one session's
        where = ("in every replayed request's system layer"
                 if replayed.calls["session"].nunique() == 1 else
                 f"in the system layer of every replayed request of session {s}; each "
                 "session has its own fit")
        notes.append(
            f"{spec} counts fewer tokens than the provider on this log's long requests, so "
            f"the unrecorded overhead fitted for it ({overhead:,} tokens, {where}) is more "
            f"than the system prompt and tool schemas: "
            f"session {s}{more} reported {reported:,} input tokens at its first call, "
            f"the whole request, against {content + overhead:,} estimated "
            f"({content + overhead - reported:,} over); a calibration (ctxlab estimators "
            f"--calibrate) fits this log better")
    return notes


def _first_sessions(replayed: Any, find: Callable[[Any, Estimator], Mapping[str, Any]]
                    ) -> Iterator[tuple[str, str, Any, str]]:
    """Per estimator a replay counted with: the first of its sessions that ``find(log,
    estimator)`` names (a mapping session -> value, e.g. `floored_overheads`) as ``(spec,
    session, value, words for the others)``; nothing for an estimator it names none of."""
    log = replayed.settings.log
    for spec, (est, sessions) in _estimators_of(replayed).items():
        got = {s: v for s, v in find(log, est).items() if s in sessions}
        if got:
            s, value = next(iter(got.items()))
            more = f" (and {len(got) - 1} more session{'s' if len(got) > 2 else ''})" \
                if len(got) > 1 else ""
            yield spec, s, value, more


def _estimators_of(replayed: Any) -> dict[str, tuple[Estimator, list[str]]]:
    """The estimators a replay counted its sessions with, by spec, with their sessions;
    none when its overheads were given, not fitted (``settings.log`` is None)."""
    by_spec: dict[str, tuple[Estimator, list[str]]] = {}
    if replayed.settings.log is None or not len(replayed.calls):
        return by_spec
    for s in pd.unique(replayed.calls["session"].astype(str)):
        est = replayed.estimator(s)
        by_spec.setdefault(est.spec, (est, []))[1].append(s)
    return by_spec


__all__ = ["claude_code_checks_df", "compaction_points_df", "fidelity_df", "fidelity_errors_df",
           "inflated_overhead_notes", "overhead_notes", "replay_rows", "threshold_bounds_df"]
