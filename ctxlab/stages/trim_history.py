"""Token-budgeted history trimming (seed 003, Obsidian Copilot fix plan 1.2 and 2.1).

The history (the L4 layer) gets what the rest of the request leaves::

    budget = limit - tokens(L1 incl. overhead, tools, L2, L3, L5) - output_reserve

and, when it is over that budget, is cut in the seed's order:

1. drop the oldest complete history turns (a user message with its answer and
   everything between) until the rest fits, always keeping the most recent
   ``min_turns`` turn(s) (the seed's "history guarantee");
2. truncate the remaining long assistant answers of the history, oldest first and
   only until the rest fits, to their first ``truncate_chars`` characters plus a
   notice (answers an earlier event produced are not truncated again);
3. if still over, warn (``details["warning"]`` and ``details["over_budget_tokens"]``)
   and let the request go on with what is left.

Tokens come from ``view.estimator`` (the seed uses chars/4: give the view the
``chars:4`` estimator). A history message's framing tokens count with its turn.
With ``budget_tokens=None`` the budget may be negative (L1 alone over the limit,
as in the seed's Projects mode): every droppable turn goes and the warning gives
how far over the limit the request still is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, ints, is_na, labels, part_rows,
                                text_lengths)


def truncation_notice(kept_chars: int, total_chars: int) -> str:
    """The notice appended to a truncated answer.

    Example:
        >>> truncation_notice(2000, 9000)
        '\\n\\n[answer truncated: first 2,000 of 9,000 characters kept]'
    """
    return f"\n\n[answer truncated: first {kept_chars:,} of {total_chars:,} characters kept]"


def history_turn_tokens(view: View) -> pd.Series:
    """Tokens of each history turn of a view, in order: parts plus message framing
    (remembered with the view: `carry_forward`'s ``min_room`` and `TrimHistory` ask in turn).

    A message counts its framing with its turn when all its parts are in the history.
    """
    got = view._memo.get("history_turn_tokens")
    if got is None:
        got = view._memo["history_turn_tokens"] = _turn_tokens(view)
    return got


def _turn_tokens(view: View) -> pd.Series:
    p = view
    hist = labels(p, "layer") == "history"
    msg = ints(p, "msg")
    _, first, inv = np.unique(msg, return_index=True, return_inverse=True)
    whole = (np.bincount(inv[~hist], minlength=len(first)) == 0)[inv]   # all parts history
    is_first = np.zeros(len(msg), dtype=bool)
    is_first[first] = True
    framing = np.where(whole & is_first, view.estimator.per_message, 0)
    turn = ints(p, "turn")[hist]
    tokens = (ints(p, "tokens") + framing)[hist]
    turns, at, of = np.unique(turn, return_index=True, return_inverse=True)
    sums = np.zeros(len(turns), dtype=np.int64)
    np.add.at(sums, of, tokens)
    order = np.argsort(at, kind="stable")               # turns by first appearance
    return pd.Series(sums[order], index=pd.Index(turns[order], name="turn"), name="tokens")


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TrimHistory(Stage):
    """Fit the history into what the rest of the request leaves of the limit.

    Attributes:
        budget_tokens: the history's budget; None computes it from the view (see the
            module docstring).
        output_reserve: tokens kept free for the answer (seed 003: ~4,096).
        truncate_chars: characters kept of a long history answer in step 2 (seed 003
            says "first N chars" without N; 2,000).
        min_turns: most recent history turns never dropped (seed 003: at least 1).

    Example:
        >>> from ctxlab.stages import stage
        >>> stage("trim_history", budget_tokens=8_000).min_turns
        1
    """

    name = "trim_history"
    source = "seed 003 (Obsidian Copilot fix plan: history token budget, prioritized trimming)"
    budget_tokens: int | None = None
    output_reserve: int = 4_096
    truncate_chars: int = 2_000
    min_turns: int = 1

    def __post_init__(self) -> None:
        checks = {"output_reserve": (self.output_reserve, 0), "min_turns": (self.min_turns, 0),
                  "truncate_chars": (self.truncate_chars, 1)}
        if self.budget_tokens is not None:
            checks["budget_tokens"] = (self.budget_tokens, 0)
        for name, (value, lowest) in checks.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                raise ConfigError(f"trim_history: {name} must be an int >= {lowest}, got "
                                  f"{value!r}")

    def budget(self, view: View, history_tokens: int | None = None) -> int:
        """The history's budget in this view (may be negative when computed);
        ``history_tokens`` saves counting the history again."""
        if self.budget_tokens is not None:
            return self.budget_tokens
        if history_tokens is None:
            history_tokens = int(history_turn_tokens(view).sum())
        rest = view.total_tokens - history_tokens
        return view.limit_tokens - rest - self.output_reserve

    def plan(self, view: View) -> Edit | None:
        p = view
        layer = labels(p, "layer")
        history = layer == "history"
        if not len(p) or not history.any():
            return None
        per_turn = history_turn_tokens(view)
        turn_tokens = per_turn.to_numpy()
        history_tokens = int(turn_tokens.sum())
        budget = self.budget(view, history_tokens)
        if history_tokens <= budget:
            return None
        droppable = max(len(per_turn) - self.min_turns, 0)
        # drop the oldest turns while the history is over budget: turn i goes when what is
        # left after dropping the turns before it is still over
        left = history_tokens - np.concatenate(([0], np.cumsum(turn_tokens[:droppable])))
        count = int(np.argmax(left <= budget)) if (left <= budget).any() else droppable
        kept = int(left[count])
        turn = ints(p, "turn")
        gone = history & np.isin(turn, per_turn.index.to_numpy()[:count])
        hide = ints(p, "part")[gone].tolist()
        inserts: list[NewPart] = []
        if kept > budget:
            chars = text_lengths(p)
            long = np.flatnonzero(history & ~gone & (labels(p, "role") == "assistant")
                                  & (labels(p, "kind") == "text") & is_na(p, "event")
                                  & (chars > self.truncate_chars))
            rows = part_rows(p, long, ("part", "content", "tokens"))
            shorts = [str(r.content)[:self.truncate_chars] + truncation_notice(
                self.truncate_chars, len(str(r.content))) for r in rows]
            for r, short, tokens_after in zip(rows, shorts, view.estimate_all(shorts)):
                text = str(r.content)
                saved = int(r.tokens) - tokens_after
                if saved <= 0:
                    continue
                hide.append(int(r.part))
                inserts.append(NewPart(content=short, kind="text", role="assistant",
                                       anchor=int(r.part), join_message=True,
                                       meta={"truncated_from_chars": len(text)}))
                kept -= saved
                if kept <= budget:
                    break
        details: dict[str, object] = {
            "budget_tokens": budget, "history_tokens_before": history_tokens,
            "history_tokens_after": kept, "turns_dropped": count,
            "turns_kept": len(per_turn) - count, "answers_truncated": len(inserts)}
        what = []
        if count:
            what.append(f"dropped the {count} oldest history turn(s)")
        if inserts:
            what.append(f"truncated {len(inserts)} long answer(s) to {self.truncate_chars:,} "
                        f"chars")
        if kept > budget:
            details["over_budget_tokens"] = kept - budget
            over = (f"the request is still {kept - budget:,} tokens over its limit of "
                    f"{view.limit_tokens:,} ({self.output_reserve:,} kept for output)"
                    if self.budget_tokens is None else
                    f"the history is still {kept - budget:,} tokens over its budget of "
                    f"{budget:,}")
            details["warning"] = (f"{over} after trimming the history to "
                                  f"{len(per_turn) - count} turn(s); it goes on with "
                                  f"the most recent history")
            what.append(f"still {kept - budget:,} tokens over budget")
        return Edit(stage=self.name, hide=tuple(hide), insert=tuple(inserts),
                    reason="; ".join(what) if what else "history over budget", details=details)


__all__ = ["TrimHistory", "history_turn_tokens", "truncation_notice"]
