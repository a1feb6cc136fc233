"""The log's own summaries: where a log compacted, the summary it recorded.

A replay that compacts exactly where the real agent did — the same session, after the
same call — can use the agent's own summary instead of a stand-in: the recorded text
is what the model saw next, so the request after compaction is the real one as far as
the log knows it. This separates the compaction model (when, and what else is sent
again) from the summarizer's quality, which other summarizers are measured on.

Everywhere else — a compaction the log does not have, or one a call early or late —
`Recorded` hands the parts to another summarizer (``structured`` by default): the
recorded summary covers what the agent had seen up to its compaction, so using it
elsewhere would leak later content or lose some.

A recorded compaction matches when the parts to summarize end between the input of the
last call before it and the compaction itself: they hold the answer to that call (and
what came after it), but nothing the log has after the compaction.

The recorded text is returned whole, even over ``budget_tokens`` (the budget applies
to the fallback): it is what the agent sent. Its preamble (Claude Code's "This session
is being continued ..." by default) is taken off, for the summarize stage adds its own
``prefix`` (`ctxlab.stages.reattach.claude_code_summarize` uses the same words).

Example:
    >>> import ctxlab
    >>> t = ctxlab.load("datasets/coding_session.jsonl")
    >>> rec = Recorded(recorded_points(t))
    >>> f = t.rewind_recorded().frame
    >>> before = f[(f["pos"] < rec.points[0].pos) & (f["kind"] != "text")]
    >>> rec.point_for(before) is rec.points[0]
    True

`recorded_summarizer` registers one for a log (a summarize stage names its summarizer).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ctxlab import summarizers
from ctxlab.errors import ConfigError
from ctxlab.summarizers.base import (DEFAULT_BUDGET_TOKENS, Summarizer, Summary,
                                     resolve_estimator)
from ctxlab.tokens.base import Estimator

CLAUDE_CODE_PREAMBLE = ("This session is being continued from a previous conversation that "
                        "ran out of context. The summary below covers the earlier portion of "
                        "the conversation.")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedPoint:
    """One recorded compaction with a summary.

    Attributes:
        session: the session it belongs to.
        after_pos: the input end of the last call before it (-inf: no call before it).
        pos: where the compaction is in the log.
        text: the summary message as recorded.
    """

    session: str
    after_pos: float
    pos: float
    text: str


class Recorded(Summarizer):
    """The summaries a log recorded, at the points it recorded them; a fallback elsewhere.

    Args:
        points: the recorded compactions (`recorded_points`).
        name: the registry name (`recorded_summarizer` derives one from the log).
        fallback: the summarizer used where no recorded compaction matches.
        preamble: text taken off the front of a recorded summary ("" keeps it whole).
    """

    model = "recorded"

    def __init__(self, points: tuple[RecordedPoint, ...], *, name: str = "recorded",
                 fallback: str = "structured", preamble: str = CLAUDE_CODE_PREAMBLE) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a recorded summarizer needs a name, not {name!r}")
        if fallback == name:
            raise ConfigError(f"summarizer {name!r} cannot fall back on itself")
        self.name = name
        self.points = tuple(points)
        self.fallback = fallback
        self.preamble = preamble
        self._by_session: dict[str, list[RecordedPoint]] = {}
        for p in self.points:
            self._by_session.setdefault(p.session, []).append(p)

    def point_for(self, parts: pd.DataFrame) -> RecordedPoint | None:
        """The recorded compaction these parts are the summarized side of, if any."""
        if parts.empty or "session" not in parts or "pos" not in parts:
            return None
        sessions = pd.unique(parts["session"].astype(str))
        if len(sessions) != 1:
            return None
        last = float(parts["pos"].max())
        for p in self._by_session.get(str(sessions[0]), ()):
            if p.after_pos <= last < p.pos:
                return p
        return None

    def summarize(self, parts: pd.DataFrame, previous: str | None = None, *,
                  budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                  estimator: Estimator | str | None = None) -> Summary:
        estimator = resolve_estimator(estimator)
        point = self.point_for(parts)
        if point is None:
            return summarizers.summarizer(self.fallback).summarize(
                parts, previous=previous, budget_tokens=budget_tokens, estimator=estimator)
        text = point.text
        if self.preamble and text.startswith(self.preamble):
            text = text[len(self.preamble):].lstrip("\n")
        read = estimator.count_parts(parts) if len(parts) else np.zeros(0)
        return Summary(text=text, input_tokens=int(np.sum(read)),
                       output_tokens=int(estimator.count([text])[0]), ms=0.0,
                       backend="recorded", model=self.model)


def recorded_points(log: Any) -> tuple[RecordedPoint, ...]:
    """Every recorded compaction of a transcript or corpus that has a summary part.

    The summary is the ``summary`` part the compaction inserted (Claude Code's compact
    summary message); compactions without one are left out.
    """
    ev = log.events[log.events["origin"] == "recorded"]
    if ev.empty:
        return ()
    f = log.frame
    summaries = f[(f["kind"] == "summary") & f["event"].notna()]
    calls = log.calls
    out = []
    for r in ev.sort_values(["session", "pos"], kind="stable").itertuples():
        mine = summaries[(summaries["session"] == r.session)
                         & (summaries["event"].astype("int64") == int(r.event))]
        if mine.empty:
            continue
        ends = calls.loc[(calls["session"] == r.session)
                         & (calls["input_end_pos"] <= float(r.pos)), "input_end_pos"]
        out.append(RecordedPoint(session=str(r.session), pos=float(r.pos),
                                 after_pos=float(ends.max()) if len(ends) else -np.inf,
                                 text="\n\n".join(mine.sort_values("pos")["content"]
                                                  .astype(str))))
    return tuple(out)


def recorded_summarizer(log: Any, *, fallback: str = "structured",
                        preamble: str = CLAUDE_CODE_PREAMBLE) -> Recorded:
    """The registered `Recorded` summarizer of a log, registering it the first time.

    Its name, ``recorded:<digest>``, depends only on the recorded summaries (and the
    fallback and preamble), so the same log gives the same registered instance.

    Args:
        log: a transcript or corpus with recorded compactions.
        fallback: the summarizer used where the log did not compact.
        preamble: text taken off the front of each recorded summary.
    """
    points = recorded_points(log)
    digest = hashlib.sha1(repr((fallback, preamble, [(p.session, p.after_pos, p.pos, p.text)
                                                     for p in points])).encode()).hexdigest()
    name = f"recorded:{digest[:12]}"
    found = summarizers.REGISTRY.find(name)
    if isinstance(found, Recorded):
        return found
    rec = Recorded(points, name=name, fallback=fallback, preamble=preamble)
    summarizers.register(rec)
    return rec


__all__ = ["CLAUDE_CODE_PREAMBLE", "Recorded", "RecordedPoint", "recorded_points",
           "recorded_summarizer"]
