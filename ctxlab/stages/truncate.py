"""Sliding-window truncation (seed 000, stage 4): drop the oldest messages after the first pair.

The conversation is the request's messages apart from the system prompt (L1) and the
tool definitions; a summary or an earlier truncation marker counts as a message. With
4 messages or fewer nothing happens. The first ``keep_first`` messages (the first
user–assistant pair) always stay; of the messages after them, ``fraction`` is removed,
rounded down to an even number (to keep user/assistant alternation), oldest first; one
system-role marker is inserted where they were. The current user prompt is never
removed (NeuroLink keeps it out of the message list it truncates): when it comes after
the first pair, the removal stops before it, and the fraction is of the messages before
it (the list the seed truncates).

The seed counts messages, not tool pairs, so it can remove a tool call and keep its
result (or the reverse); the pipeline's ``repair`` post-step mends that. With
``keep_tool_pairs=True`` the removed range is moved to boundaries no tool pair crosses
— extended forward when possible, shrunk otherwise, even-sized when possible.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, floats, ints, labels, message_groups,
                                one_of, strings)

MARKER = "[Earlier conversation history was truncated to fit within context limits]"
MIN_MESSAGES = 4  # seed 000: no truncation with 4 messages or fewer
EXCLUDED_LAYERS = ("system", "tools")


def removal_count(messages: int, fraction: float = 0.5, keep_first: int = 2) -> int:
    """How many messages the seed removes: ``fraction`` of those after the first pair,
    rounded down to an even number; 0 with 4 messages or fewer.

    Example:
        >>> [removal_count(n) for n in (4, 5, 6, 7, 10, 11)]
        [0, 0, 2, 2, 4, 4]
    """
    if messages <= MIN_MESSAGES or messages <= keep_first:
        return 0
    remove = int((messages - keep_first) * fraction)
    return remove - remove % 2


def _pair_spans(of_row: np.ndarray, kind: np.ndarray,
                codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) message index of every tool pair split over two or more messages,
    as two arrays; per part: ``of_row`` its message, ``codes`` its tool call (-1: none)."""
    linked = (codes >= 0) & ((kind == "tool_call") | (kind == "tool_result"))
    lo = np.full(int(codes.max(initial=-1)) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full(len(lo), -1, dtype=np.int64)
    np.minimum.at(lo, codes[linked], of_row[linked])
    np.maximum.at(hi, codes[linked], of_row[linked])
    split = lo < hi
    return lo[split], hi[split]


def _clean_boundaries(spans: tuple[np.ndarray, np.ndarray], messages: int) -> np.ndarray:
    """``clean[b]`` for b in 0..messages: no tool pair has one half before message ``b``
    and the other at or after it."""
    crossing = np.zeros(messages + 2, dtype=np.int64)
    np.add.at(crossing, spans[0] + 1, 1)         # pair (lo, hi) crosses b when lo < b <= hi
    np.add.at(crossing, spans[1] + 1, -1)
    return np.cumsum(crossing)[:messages + 1] == 0


def _whole_pair_range(start: int, remove: int, limit: int,
                      clean: np.ndarray) -> tuple[int, int] | None:
    """A removal range [start, end) of about ``remove`` messages before ``limit`` whose
    boundaries no tool pair crosses: the start moves forward to the first clean
    boundary, the end forward to the first clean one (even-sized if possible), or back
    when none is left before ``limit``."""
    found = np.flatnonzero(clean[start:limit])
    if not len(found):
        return None
    start += int(found[0])
    end = min(max(start + remove, start + 1), limit)
    later = end + np.flatnonzero(clean[end:limit + 1])
    earlier = (start + 1 + np.flatnonzero(clean[start + 1:end]))[::-1]
    for group in (later, earlier):
        if len(group):
            even = group[(group - start) % 2 == 0]
            return start, int((even if len(even) else group)[0])
    return None


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Truncate(Stage):
    """Remove the oldest messages after the first pair; insert a truncation marker.

    Attributes:
        fraction: share of the messages after the first pair to remove (seed 000: 0.5).
        marker: the system-role text inserted where messages were removed.
        keep_first: messages at the start that always stay (seed 000: the first pair, 2).
        keep_tool_pairs: move the range so no tool call loses its result (improvement;
            the seed does not, so the default is False).

    The edit is not made when it would not save tokens (a marker longer than what it
    replaces).
    """

    name = "truncate"
    source = "seed 000 (NeuroLink truncateWithSlidingWindow)"
    fraction: float = 0.5
    marker: str = MARKER
    keep_first: int = 2
    keep_tool_pairs: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, (int, float)) \
                or not 0.0 < self.fraction <= 1.0:
            raise ConfigError(f"truncate: fraction must be in (0, 1], got {self.fraction!r}")
        if isinstance(self.keep_first, bool) or not isinstance(self.keep_first, int) \
                or self.keep_first < 0:
            raise ConfigError(f"truncate: keep_first must be a non-negative integer, got "
                              f"{self.keep_first!r}")
        if not isinstance(self.marker, str) or not self.marker:
            raise ConfigError("truncate: marker must be a non-empty text")
        if not isinstance(self.keep_tool_pairs, bool):
            raise ConfigError(f"truncate: keep_tool_pairs must be True or False, got "
                              f"{self.keep_tool_pairs!r}")

    def plan(self, view: View) -> Edit | None:
        p = view
        layer = labels(p, "layer")
        conv = np.flatnonzero(~one_of(layer, EXCLUDED_LAYERS))
        if not len(conv):
            return None
        m = message_groups(p, conv)                   # rows and messages of the conversation
        n = len(m)
        prompt = np.flatnonzero(layer[conv] == "prompt")
        at = int(m.of_row[prompt[0]]) if len(prompt) else n
        limit = at if at >= self.keep_first else n
        # the list the seed truncates ends before the current prompt (which it keeps apart):
        # the fraction is of the messages before it
        remove = removal_count(limit, self.fraction, self.keep_first)
        if remove == 0:
            where = " before the current prompt" if limit < n else ""
            return Edit(stage=self.name, reason=f"{limit} conversation messages{where}: nothing "
                        f"to remove (needs more than {MIN_MESSAGES} and at least 2 after the "
                        f"first {self.keep_first})")
        spans = _pair_spans(m.of_row, labels(p, "kind")[conv],
                            pd.factorize(strings(p, "tool_call_id"))[0][conv])
        start, end = self.keep_first, min(self.keep_first + remove, limit)
        end -= (end - start) % 2
        if self.keep_tool_pairs:
            moved = _whole_pair_range(start, remove, limit, _clean_boundaries(spans, n))
            if moved is None:
                return Edit(stage=self.name, reason="no range after the first messages can be "
                            "removed without splitting a tool pair")
            start, end = moved
        if end <= start:
            return Edit(stage=self.name, reason="the current prompt follows the first messages "
                        "closely: nothing to remove before it")
        removed = end - start
        rows = conv[(m.of_row >= start) & (m.of_row < end)]
        marker_tokens = view.estimate(self.marker)
        messages = view.messages
        framing = view.estimator.framing(messages) - view.estimator.framing(messages - removed + 1)
        saved = int(ints(p, "tokens")[rows].sum()) + framing - marker_tokens
        if saved <= 0:
            return Edit(stage=self.name, reason=f"removing {removed} messages would save "
                        f"no tokens ({saved:,})")
        lo, hi = spans
        split = int(np.count_nonzero(((start <= lo) & (lo < end)) != ((start <= hi) & (hi < end))))
        part = ints(p, "part")
        first = rows[np.argsort(floats(p, "pos")[rows], kind="stable")[0]]
        marker = NewPart(content=self.marker, kind="marker", role="system",
                         anchor=int(part[first]), side="before", join_message=False,
                         meta={"truncation_marker": True, "messages_removed": removed})
        return Edit(stage=self.name, hide=tuple(part[rows].tolist()), insert=(marker,),
                    reason=f"removed {removed} of {n} conversation messages after the "
                           f"first {start}",
                    details={"messages_removed": removed, "messages": n,
                             "messages_before_prompt": limit,
                             "first_removed": start, "tokens_saved": saved,
                             "tool_pairs_split": split,
                             "removed_even": bool(removed % 2 == 0)})
