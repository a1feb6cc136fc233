"""Plain-data summaries of transcripts and corpora (what ``ctxlab info`` prints)."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from ctxlab.loaders.corpus import Corpus
from ctxlab.schema import Transcript

SESSION_COLUMNS = ["session", "format", "parts", "messages", "turns", "tool_calls", "calls",
                   "calls_with_usage", "first_input_total", "max_input_total",
                   "last_input_total", "output_tokens", "compactions", "content_chars"]


def sessions_df(source: Transcript | Corpus | Iterable[Transcript]) -> pd.DataFrame:
    """One row per session: size, calls, reported usage and recorded compactions.

    ``tool_calls`` counts the agent's actions: its tool calls, and for an agent that writes
    its actions in its text (mini-swe-agent, SWE-agent before 1.0: no tool-call part, an
    observation without a call id answers each) the observations its actions got.

    Example:
        >>> import ctxlab, ctxlab.datasets
        >>> t = ctxlab.load(ctxlab.datasets.path("coding_session_b"))
        >>> int(sessions_df(t).loc[0, "calls"]) == len(t.calls)
        True
    """
    transcripts = [source] if isinstance(source, Transcript) else list(source)
    frames = [_one(t) for t in transcripts]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=SESSION_COLUMNS)
    return pd.concat(frames, ignore_index=True)


def _one(t: Transcript) -> pd.DataFrame:
    f, c, e = t.frame, t.calls, t.events
    by = f.groupby("session", sort=False)
    parts = pd.DataFrame({
        "parts": by.size(),
        "messages": by["msg"].nunique(),
        "turns": by["turn"].max(),
        "tool_calls": f[actions(f)].groupby("session").size(),
        "content_chars": f["content"].str.len().groupby(f["session"]).sum(),
    })
    cb = c.groupby("session", sort=False)
    calls = pd.DataFrame({
        "calls": cb.size(),
        "calls_with_usage": cb["input_total"].count(),
        "first_input_total": cb["input_total"].first(),
        "max_input_total": cb["input_total"].max(),
        "last_input_total": cb["input_total"].last(),
        "output_tokens": cb["output_tokens"].sum(min_count=1),
    })
    ev = e[e["origin"] == "recorded"].groupby("session").size().rename("compactions")
    out = parts.join(calls, how="outer").join(ev, how="left")
    out.index.name = "session"
    out = out.reset_index()
    out["format"] = str(t.meta.get("format"))
    for col in ("parts", "messages", "turns", "tool_calls", "calls", "calls_with_usage",
                "compactions", "content_chars"):
        out[col] = out[col].fillna(0).astype("int64")
    for col in ("first_input_total", "max_input_total", "last_input_total", "output_tokens"):
        out[col] = out[col].astype("Int64")
    order = {s: i for i, s in enumerate(t.sessions)}
    out = out.sort_values("session", key=lambda s: s.map(order), kind="stable")
    return out[SESSION_COLUMNS].reset_index(drop=True)


def actions(f: pd.DataFrame) -> pd.Series:
    """Per part: is it one of the agent's actions, a tool call or, where the agent wrote
    the action in its text, the observation it got (a tool result without a call id)?

    Example:
        >>> f = pd.DataFrame({"kind": ["text", "tool_call", "tool_result", "tool_result"],
        ...                   "tool_call_id": [None, "t1", "t1", None]})
        >>> actions(f).tolist()
        [False, True, False, True]
    """
    kind = f["kind"]
    return (kind == "tool_call") | ((kind == "tool_result") & f["tool_call_id"].isna())


def parts_by_role_kind_df(t: Transcript) -> pd.DataFrame:
    """Part counts and characters by role and kind."""
    f = t.frame
    return (f.assign(chars=f["content"].str.len())
            .groupby(["role", "kind"]).agg(parts=("part", "size"), chars=("chars", "sum"))
            .reset_index())


def usage_summary(t: Transcript) -> dict[str, int | None]:
    """Totals of the reported usage over all calls (None where nothing was reported)."""
    c = t.calls

    def total(col: str) -> int | None:
        s = c[col].dropna()
        return int(s.sum()) if len(s) else None
    return {"calls": len(c), "calls_with_usage": int(c["input_total"].notna().sum()),
            "input_total": total("input_total"), "cache_read": total("cache_read"),
            "cache_write": total("cache_write"), "output_tokens": total("output_tokens"),
            "max_input_total": None if c["input_total"].dropna().empty
            else int(c["input_total"].max())}


def recorded_totals(t: Transcript) -> str | None:
    """The usage a log records only for a whole run or session, not per call (SWE-agent's
    ``model_stats``: `Transcript.meta` ``run_usage``; Copilot CLI's shutdown metrics:
    ``session_usage``), as one line; None when it records none.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> recorded_totals(t) is None
        True
    """
    m = t.meta
    run = m.get("run_usage")
    if isinstance(run, dict) and _count(run.get("tokens_sent")) is not None:
        return (f"{_counted(run.get('tokens_sent'))} input, "
                f"{_counted(run.get('tokens_received'))} output over "
                f"{_counted(run.get('api_calls'))} API calls: the run's totals "
                f"(meta['run_usage']; the log records no per-call usage)")
    session = m.get("session_usage")
    metrics = session.get("modelMetrics") if isinstance(session, dict) else None
    if not isinstance(metrics, dict) or not metrics:
        return None
    def total(field: str, key: str) -> str:
        """The sum over the models of ``modelMetrics[model][field][key]``, "-" unless
        every model has it."""
        got = [_count(v.get(field, {}).get(key)) if isinstance(v, dict) and
               isinstance(v.get(field, {}), dict) else None for v in metrics.values()]
        return "-" if None in got else _counted(sum(got))   # type: ignore[arg-type]
    return (f"{total('usage', 'inputTokens')} input (cache read "
            f"{total('usage', 'cacheReadTokens')}, cache write "
            f"{total('usage', 'cacheWriteTokens')}), {total('usage', 'outputTokens')} "
            f"output over {total('requests', 'count')} requests of "
            f"{', '.join(map(str, metrics))}: the last session's totals "
            f"(meta['session_usage']; the log records no per-call input)")


def _count(v: object) -> int | None:
    """A token count as an int; None when it is none (not a number, or a bool)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
        return None
    return int(v)


def _counted(v: object) -> str:
    n = _count(v)
    return "-" if n is None else f"{n:,}"
