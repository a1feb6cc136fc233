"""How much of the paths, commands and errors of condensed parts a summary keeps.

One metric for every summary text — a log's own, `structured`, a truncation, a model's
— so they can be compared at equal size. The *artifacts* of the condensed parts are
the distinct ``path``, ``command`` and ``error`` values `ctxlab.artifacts` extracts
from their contents (every part given: messages, thinking, tool calls and results).
A summary *keeps* an artifact when:

* ``path``: the summary mentions it as a path (`ctxlab.artifacts` applied to the
  summary) in full, by a trailing part that still names a directory
  (``lib/app/a.ex`` keeps ``/home/u/proj/lib/app/a.ex``; the bare ``a.ex`` does not),
  or as the trailing part of a longer path (``/repo/src/a.py`` keeps ``src/a.py``).
  Parts are split at ``/`` only, so ``app.ex`` never keeps ``myapp.ex``.
* ``command`` and ``error``: the first `KEY_CHARS` characters of the value, its
  whitespace runs collapsed to one space, occur in the summary with its whitespace
  collapsed the same way. Summaries re-flow lines and shorten long ones (a heredoc
  commit message, a 300-character error line); the head of the value is what names
  it. Matching is case-sensitive and verbatim otherwise: ``mix test`` does not keep
  ``cd /repo && mix test``. The summary is also read with JSON string escapes undone
  (``\\"`` → ``"``, ``\\n`` → a newline, as `ctxlab.artifacts` reads tool calls), so
  a summary that quotes a tool call as recorded keeps the command in it.

Two values with the same key are one artifact. ``*_share`` is kept / total, NaN when
the parts hold no artifact of that kind.

`recorded_comparison_df` measures a log's own compaction summaries against other
summarizers run on the same parts with the same token budget.

Example:
    >>> parts = pd.DataFrame({"role": ["assistant", "user"], "kind": ["tool_call",
    ...     "tool_result"], "content": ['Bash({"command": "pytest -q tests/test_a.py"})',
    ...     "FAILED tests/test_a.py::test_x - KeyError: 'id'"]})
    >>> r = summary_retention(parts, "Ran `pytest -q tests/test_a.py`; it failed.")
    >>> r["paths_kept"], r["paths_total"], r["commands_share"], r["errors_share"]
    (1, 1, 1.0, 0.0)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.artifacts import artifacts, unescape
from ctxlab.errors import ConfigError
from ctxlab.layers import assign_layers
from ctxlab.schema import Transcript
from ctxlab.summarizers import Summarizer, summarizer
from ctxlab.summarizers.recorded import CLAUDE_CODE_PREAMBLE, RecordedPoint, recorded_points
from ctxlab.tokens import Estimator
from ctxlab.tokens import estimator as make_estimator
from ctxlab.visibility import part_spans

RETAINED_KINDS: tuple[str, ...] = ("path", "command", "error")
KEY_CHARS = 100
"""Characters of a command or error (whitespace collapsed) a summary must hold verbatim."""
_PLURAL = {"path": "paths", "command": "commands", "error": "errors"}
SCORE_COLUMNS: tuple[str, ...] = tuple(f"{_PLURAL[k]}_{m}" for k in RETAINED_KINDS
                                       for m in ("kept", "total", "share"))
RECORDED = "recorded"
"""The ``summary`` label of a log's own summary in `recorded_comparison_df`."""


def _squash(s: pd.Series) -> pd.Series:
    return s.astype("string").str.replace(r"\s+", " ", regex=True).str.strip()


def condensed_artifacts(parts: pd.DataFrame) -> pd.DataFrame:
    """The distinct artifacts a summary of ``parts`` is scored on.

    Returns:
        ``kind`` (path, command, error) and ``key`` (the value; for commands and errors
        its whitespace collapsed and cut to `KEY_CHARS`), one row per distinct pair.
    """
    cols = ["kind", "key"]
    if parts.empty or "content" not in parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    found = artifacts(parts["content"].reset_index(drop=True))
    found = found[found["kind"].isin(RETAINED_KINDS)]
    short = _squash(found["value"]).str[:KEY_CHARS].str.rstrip()
    key = found["value"].where(found["kind"] == "path", short).astype(object)
    out = pd.DataFrame({"kind": found["kind"].astype(object), "key": key})
    return out.drop_duplicates().reset_index(drop=True)


def _tails(path: str) -> list[str]:
    """What follows each ``/`` of a path (``/a/b/c.py`` → ``a/b/c.py``, ``b/c.py``, ``c.py``)."""
    return [path[i + 1:] for i, ch in enumerate(path) if ch == "/" and i + 1 < len(path)]


def kept_mask(found: pd.DataFrame, text: str) -> np.ndarray:
    """Which rows of a `condensed_artifacts` frame ``text`` keeps (rules in the module doc).

    Example:
        >>> found = pd.DataFrame({"kind": ["path", "path", "path"],
        ...                       "key": ["/r/lib/a.ex", "/r/b.ex", "c.ex"]})
        >>> kept_mask(found, "Edited lib/a.ex and b.ex, then /x/c.ex.").tolist()
        [True, False, True]
    """
    out = np.zeros(len(found), dtype=bool)
    if not len(found) or not text:
        return out
    kind = found["kind"].to_numpy(dtype=object)
    keys = found["key"].tolist()
    mentioned = set(artifacts(pd.Series([text])).query("kind == 'path'")["value"].tolist())
    longer = mentioned.union(*(_tails(m) for m in mentioned))
    raw = pd.Series([text], dtype="string")
    flat = [_squash(t).iloc[0] for t in (raw, unescape(raw))]
    for i in np.flatnonzero(kind == "path"):
        key = keys[i]
        out[i] = key in longer or any("/" in t and t in mentioned for t in _tails(key))
    for i in np.flatnonzero(kind != "path"):
        # as a whole (`ls` is not kept by "tools", `git diff` not by "git diffs"); a key of
        # `KEY_CHARS` is the head of a longer value, which goes on
        key = keys[i]
        word = re.compile(r"(?<!\w)" + re.escape(key)
                          + (r"(?!\w)" if len(key) < KEY_CHARS else ""))
        out[i] = bool(word.search(flat[0]) or word.search(flat[1]))
    return out


def _scores(found: pd.DataFrame, text: str) -> dict[str, Any]:
    kept = kept_mask(found, text)
    out: dict[str, Any] = {}
    for k in RETAINED_KINDS:
        mine = (found["kind"] == k).to_numpy()
        total, n = int(mine.sum()), int(kept[mine].sum())
        p = _PLURAL[k]
        out[f"{p}_kept"], out[f"{p}_total"] = n, total
        out[f"{p}_share"] = n / total if total else float("nan")
    return out


def summary_retention(parts: pd.DataFrame, text: str) -> dict[str, Any]:
    """How many of the paths, commands and errors of ``parts`` a summary ``text`` keeps.

    Returns:
        ``paths_kept``, ``paths_total``, ``paths_share`` and the same for ``commands``
        and ``errors`` (`SCORE_COLUMNS`); a share is NaN when its total is 0.
    """
    return _scores(condensed_artifacts(parts), text)


def _estimator(spec: str | Estimator) -> Estimator:
    return spec if isinstance(spec, Estimator) else make_estimator(spec)


def compare_summaries_df(parts: pd.DataFrame, texts: Mapping[str, str],
                         estimator: str | Estimator = "chars:4") -> pd.DataFrame:
    """Score several summaries of the same ``parts`` with one metric.

    Args:
        parts: the condensed parts (at least ``content``).
        texts: summary label → summary text, in the order of the rows.
        estimator: counts each summary's ``tokens`` (spec or instance).

    Returns:
        One row per summary: ``summary``, ``tokens``, ``chars`` and `SCORE_COLUMNS`.

    Example:
        >>> parts = pd.DataFrame({"content": ["Edited /repo/src/app.py", "$ make lint"]})
        >>> df = compare_summaries_df(parts, {"a": "src/app.py; ran `$ make lint`", "b": ""})
        >>> df[["summary", "tokens", "paths_share", "commands_share"]].to_dict("list")
        {'summary': ['a', 'b'], 'tokens': [8, 0], 'paths_share': [1.0, 0.0], \
'commands_share': [1.0, 0.0]}
    """
    est = _estimator(estimator)
    found = condensed_artifacts(parts)
    names, bodies = list(texts), [str(v) for v in texts.values()]
    rows = [_scores(found, b) for b in bodies]
    head = pd.DataFrame({"summary": pd.Series(names, dtype="string"),
                         "tokens": est.count(bodies).astype("int64") if bodies
                         else np.zeros(0, dtype=np.int64),
                         "chars": np.array([len(b) for b in bodies], dtype=np.int64)})
    scores = pd.DataFrame(rows, columns=list(SCORE_COLUMNS)).astype(
        {c: ("float64" if c.endswith("share") else "int64") for c in SCORE_COLUMNS})
    return pd.concat([head, scores], axis=1)


def condensed_parts(log: Transcript, point: RecordedPoint) -> pd.DataFrame:
    """What a recorded compaction summary covers: the conversation visible just before it.

    Args:
        log: the uncompacted log (`Transcript.rewind_recorded`), so that the parts an
            earlier compaction hid count too.
        point: the compaction (`ctxlab.summarizers.recorded.recorded_points`).

    Returns:
        The rows of ``log.frame`` of the point's session positioned before it and
        not hidden there, without the system layer (system prompt, injected context)
        and tool schemas, which a compaction leaves in place.
    """
    f = log.frame[log.frame["session"] == point.session]
    ev = log.events[log.events["session"] == point.session]
    lo, hi = part_spans(f, ev)
    seen = f[(lo < point.pos) & (point.pos <= hi)]
    if seen.empty:
        return seen
    return seen[~np.isin(assign_layers(seen), ("system", "tools"))]


def recorded_comparison_df(log: Transcript, *,
                           summarizers: Sequence[str | Summarizer] = ("structured",
                                                                      "truncation"),
                           estimator: str | Estimator = "chars:4") -> pd.DataFrame:
    """A log's own compaction summaries against other summarizers of the same size.

    For each recorded compaction with a summary (`recorded_points`), the condensed parts
    are `condensed_parts` of the uncompacted log; the real summary is the recorded text
    without Claude Code's preamble; each summarizer is run on those parts (no previous
    summary) with ``budget_tokens`` = the real summary's tokens under ``estimator``.

    Args:
        log: a transcript with recorded compactions (compacted as recorded).
        summarizers: names or instances; their ``name`` labels the rows.
        estimator: counts tokens and sets the budget (spec or instance).

    Returns:
        One row per (compaction, summary): ``session``, ``compaction`` (0, 1... within
        the session), ``pos``, ``parts`` (condensed parts), ``budget_tokens``, then the
        columns of `compare_summaries_df`; ``summary`` is ``"recorded"`` for the log's own.
        Empty when the log recorded no compaction summary.

    Raises:
        ConfigError: two summarizers share a name, or one is named ``"recorded"``.
    """
    est = _estimator(estimator)
    chosen = [summarizer(s) for s in summarizers]
    labels = [RECORDED, *(s.name for s in chosen)]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"summaries are labelled by name and these repeat: {labels}; give "
                          f"each summarizer its own name ('{RECORDED}' is the log's own)")
    base = log.rewind_recorded()
    frames, seen = [], {}
    for point in recorded_points(log):
        parts = condensed_parts(base, point)
        real = point.text
        if real.startswith(CLAUDE_CODE_PREAMBLE):
            real = real[len(CLAUDE_CODE_PREAMBLE):].lstrip("\n")
        budget = int(est.count([real])[0])
        texts = {RECORDED: real}
        for s in chosen:
            texts[s.name] = s.summarize(parts, previous=None, budget_tokens=budget,
                                        estimator=est).text
        n = seen[point.session] = seen.get(point.session, -1) + 1
        frames.append(compare_summaries_df(parts, texts, est).assign(
            session=point.session, compaction=n, pos=point.pos, parts=len(parts),
            budget_tokens=budget))
    lead = ["session", "compaction", "pos", "parts", "budget_tokens"]
    if not frames:
        empty = compare_summaries_df(pd.DataFrame({"content": []}), {}, est)
        frames = [empty.assign(session="", compaction=0, pos=0.0, parts=0, budget_tokens=0)]
    out = pd.concat(frames, ignore_index=True)
    out = out[lead + [c for c in out.columns if c not in lead]]
    return out.astype({"session": "string", "compaction": "int64", "pos": "float64",
                       "parts": "int64", "budget_tokens": "int64"})


__all__ = ["KEY_CHARS", "RECORDED", "RETAINED_KINDS", "SCORE_COLUMNS", "compare_summaries_df",
           "condensed_artifacts", "condensed_parts", "kept_mask", "recorded_comparison_df",
           "summary_retention"]
