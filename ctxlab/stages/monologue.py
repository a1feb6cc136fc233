"""Segment compaction (seed 001, ProbeAgent): drop the agent's monologue of older segments.

A *segment* is one user turn: it starts at a real user message (the ``turn``
column; tool results carried in user-role messages do not start one) and holds
the agent's monologue (thinking, intermediate assistant steps, tool calls and
their results) and the segment's final answer. Every older segment keeps its
user messages and its final answer only; the last ``keep_segments`` segments
(always at least the active one while ``keep_last_segment``) stay whole. System
parts are never touched.

The seed's *final answer* is "tool results or attempt_completion". In ctxlab's
part model it is, for each older segment:

* the segment's last message, when that message holds only tool results (the
  seed's before/after example: ``User → Tool result``; formats that send one
  message per result, like OpenAI's, give the trailing run of such messages).
  Their calls are part of the monologue and are hidden, so these results become
  orphans — as in the seed; the pipeline's ``repair`` post-step deals with them;
* otherwise the text parts of the segment's last assistant message (the answer
  that closes the turn, ProbeAgent's ``attempt_completion``); that message's
  thinking and tool calls are monologue. A segment whose last assistant message
  has no text (it ended on a call without a result) has no final answer, like
  ProbeAgent's ``finalIndex: null``.

"Keep all user messages" keeps every user-role part that is not a tool result,
and summaries and markers inserted by earlier events. Parts before the first user
message (turn 0) belong to no segment and are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, Stage, View, distinct, equals, ints, is_na, labels,
                                one_of, strings)
from ctxlab.wording import counted

KEPT_KINDS = frozenset({"summary", "marker"})


def final_answer(segment: pd.DataFrame) -> tuple[int, ...]:
    """Part ids of one segment's final answer (see the module docstring).

    Args:
        segment: the segment's non-system parts, in position order.

    Example:
        >>> seg = pd.DataFrame({"part": [1, 2, 3, 4], "msg": [1, 2, 2, 3],
        ...     "role": ["user", "assistant", "assistant", "user"],
        ...     "kind": ["text", "thinking", "tool_call", "tool_result"]})
        >>> final_answer(seg)
        (4,)
        >>> final_answer(seg.iloc[:3].assign(kind=["text", "thinking", "text"]))
        (3,)
    """
    if segment.empty:
        return ()
    final = _final_rows(np.zeros(len(segment), dtype=np.int64),
                        segment["msg"].to_numpy(dtype=np.int64), labels(segment, "role"),
                        labels(segment, "kind"))
    return tuple(segment["part"].to_numpy(dtype=np.int64)[final].tolist())


def _final_rows(seg: np.ndarray, msg: np.ndarray, role: np.ndarray,
                kind: np.ndarray) -> np.ndarray:
    """Which rows (in position order, ``seg`` the segment of each) are the final answer
    of their segment: `final_answer` for every segment at once."""
    if not len(msg):
        return np.zeros(0, dtype=bool)
    span = int(msg.max()) - int(msg.min()) + 1
    key = (seg - seg.min()) * span + (msg - msg.min())        # (segment, message)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    only_results = np.bincount(group[kind != "tool_result"], minlength=len(first)) == 0
    order = np.lexsort((first, seg[first]))     # messages by segment, then first appearance
    sorted_seg = seg[first][order]
    new_seg = np.r_[True, sorted_seg[1:] != sorted_seg[:-1]]
    at = np.arange(len(order))
    last_other = np.maximum.reduceat(np.where(only_results[order], -1, at),
                                     np.flatnonzero(new_seg))
    trailing = np.empty(len(order), dtype=bool)   # after the segment's last message that
    trailing[order] = at > last_other[np.cumsum(new_seg) - 1]   # is not all tool results
    in_trailing = trailing[group]
    segs, seg_of = np.unique(seg, return_inverse=True)
    has_trailing = np.bincount(seg_of[in_trailing], minlength=len(segs)) > 0
    assistant = np.flatnonzero(role == "assistant")
    last = np.full(len(segs), -1, dtype=np.int64)             # last assistant row
    np.maximum.at(last, seg_of[assistant], assistant)
    closing = last[seg_of]
    answer = (role == "assistant") & (kind == "text") & (closing >= 0) \
        & (msg == msg[closing]) & ~has_trailing[seg_of]
    return in_trailing | answer


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Monologue(Stage):
    """Keep user messages and final answers of older segments; hide their monologue.

    Attributes:
        keep_segments: recent segments kept whole, monologue included (seed 001's
            ``minSegmentsToKeep``, default 1 in its options table and its code; the
            seed's prose says "defaults to last 2 segments" — pass 2 for that reading).
        keep_last_segment: always keep the active (latest) segment whole, even with
            ``keep_segments=0`` (seed 001's ``keepLastSegment``, True).

    Example:
        >>> from ctxlab.stages import stage
        >>> stage("monologue")
        Monologue(keep_segments=1, keep_last_segment=True)
        >>> stage("monologue", keep_segments=0, keep_last_segment=False).preserved
        0
    """

    name = "monologue"
    source = "seed 001 (ProbeAgent compactMessages)"
    keep_segments: int = 1
    keep_last_segment: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.keep_segments, bool) or not isinstance(self.keep_segments, int) \
                or self.keep_segments < 0:
            raise ConfigError(f"monologue: keep_segments must be an int >= 0, got "
                              f"{self.keep_segments!r}")
        if not isinstance(self.keep_last_segment, bool):
            raise ConfigError(f"monologue: keep_last_segment must be True or False, got "
                              f"{self.keep_last_segment!r}")

    @property
    def preserved(self) -> int:
        """How many recent segments stay whole."""
        return max(self.keep_segments, 1) if self.keep_last_segment else self.keep_segments

    def plan(self, view: View) -> Edit | None:
        p = view
        if not len(p):
            return None
        role, kind = labels(p, "role"), labels(p, "kind")
        convo = np.flatnonzero(~equals(p, "role", "system"))
        turn = ints(p, "turn")[convo]
        segments = distinct(turn[turn >= 1])
        older = segments[:len(segments) - self.preserved]
        if not len(older):
            return None
        in_older = np.isin(turn, older)
        rows, seg = convo[in_older], turn[in_older]
        msg = ints(p, "msg")
        k = kind[rows]
        final = _final_rows(seg, msg[rows], role[rows], k)
        keep_user = (role[rows] == "user") & (k != "tool_result")
        # a part an earlier event inserted (a summary, a marker, the call `repair` put
        # back for an answer whose call went) is not monologue: hiding it would have repair
        # insert it again at the next call, and the stage act at every call
        monologue = ~(keep_user | one_of(k, KEPT_KINDS)) & ~final & is_na(p, "event")[rows]
        order = np.lexsort((rows, seg))                  # segment by segment
        hidden_rows = rows[order][monologue[order]]
        part = ints(p, "part")
        hide = part[hidden_rows].tolist()
        codes = pd.factorize(strings(p, "tool_call_id"))[0][rows]
        span = int(codes.max(initial=0)) + 2                  # (segment, tool call) keys
        calls = monologue & (k == "tool_call") & (codes >= 0)
        results = final & (k == "tool_result") & (codes >= 0)
        orphaned = int(np.isin(seg[results] * span + codes[results],
                               seg[calls] * span + codes[calls]).sum())
        if not hide:
            return Edit(stage=self.name, reason=f"{counted(len(older), 'older segment')} "
                        f"{'holds' if len(older) == 1 else 'hold'} no monologue to remove")
        hidden = np.zeros(len(p), dtype=bool)
        hidden[hidden_rows] = True
        msgs_before = view.messages
        msgs_after = len(distinct(msg[~hidden]))
        return Edit(
            stage=self.name, hide=tuple(hide),
            reason=f"removed the monologue of {counted(len(older), 'older segment')} "
                   f"({counted(len(hide), 'part')}); kept user messages, final answers and "
                   f"the last {counted(self.preserved, 'segment')} whole",
            details={"segments": len(segments), "compacted_segments": len(older),
                     "final_answers": len(distinct(seg[final])),
                     "parts_removed": len(hide), "messages_removed": msgs_before - msgs_after,
                     "tokens_saved": int(ints(p, "tokens")[hidden].sum())
                     + view.estimator.framing(msgs_before) - view.estimator.framing(msgs_after),
                     "orphaned_results": orphaned})


__all__ = ["Monologue", "final_answer"]
