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

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import Edit, Stage, View

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
    only_results = (segment["kind"] == "tool_result").groupby(segment["msg"], sort=False).all()
    trailing: list[int] = []
    for msg, results in reversed(list(only_results.items())):
        if not results:
            break
        trailing.append(int(msg))
    if trailing:
        return tuple(int(i) for i in segment.loc[segment["msg"].isin(trailing), "part"])
    assistant = segment[segment["role"] == "assistant"]
    if assistant.empty:
        return ()
    last_msg = assistant[assistant["msg"] == assistant["msg"].iloc[-1]]
    return tuple(int(i) for i in last_msg.loc[last_msg["kind"] == "text", "part"])


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
        p = view.parts
        if p.empty:
            return None
        convo = p[(p["role"] != "system").to_numpy(dtype=bool, na_value=True)]
        turn = convo["turn"].to_numpy(dtype="int64", na_value=0)
        segments = sorted({int(t) for t in turn if t >= 1})
        older = segments[:len(segments) - self.preserved]
        if not older:
            return None
        hide: list[int] = []
        finals = 0
        orphaned = 0
        for seg_turn in older:
            seg = convo[turn == seg_turn]
            final = set(final_answer(seg))
            finals += bool(final)
            kind = seg["kind"]
            keep_user = (seg["role"] == "user") & (kind != "tool_result")
            monologue = ~(keep_user | kind.isin(list(KEPT_KINDS))) & ~seg["part"].isin(final)
            hidden = seg[monologue.to_numpy(dtype=bool, na_value=False)]
            hide.extend(int(i) for i in hidden["part"])
            hidden_calls = set(hidden.loc[hidden["kind"] == "tool_call", "tool_call_id"].dropna())
            kept = seg[seg["part"].isin(final)]
            orphaned += int((kept["kind"].eq("tool_result")
                             & kept["tool_call_id"].isin(list(hidden_calls))).sum())
        if not hide:
            return Edit(stage=self.name, reason=f"{len(older)} older segment(s) hold no "
                        f"monologue to remove")
        msgs_before = view.messages
        msgs_after = int(p.loc[~p["part"].isin(hide), "msg"].nunique())
        return Edit(
            stage=self.name, hide=tuple(hide),
            reason=f"removed the monologue of {len(older)} older segment(s) ({len(hide)} "
                   f"parts); kept user messages, final answers and the last "
                   f"{self.preserved} segment(s) whole",
            details={"segments": len(segments), "compacted_segments": len(older),
                     "final_answers": finals, "parts_removed": len(hide),
                     "messages_removed": msgs_before - msgs_after,
                     "tokens_saved": view.tokens_of(hide), "orphaned_results": orphaned})


__all__ = ["Monologue", "final_answer"]
