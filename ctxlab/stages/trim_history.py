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
from ctxlab.stages.base import Edit, NewPart, Stage, View


def truncation_notice(kept_chars: int, total_chars: int) -> str:
    """The notice appended to a truncated answer.

    Example:
        >>> truncation_notice(2000, 9000)
        '\\n\\n[answer truncated: first 2,000 of 9,000 characters kept]'
    """
    return f"\n\n[answer truncated: first {kept_chars:,} of {total_chars:,} characters kept]"


def history_turn_tokens(view: View) -> pd.Series:
    """Tokens of each history turn of a view, in order: parts plus message framing.

    A message counts its framing with its turn when all its parts are in the history.
    """
    p = view.parts
    hist = p["layer"] == "history"
    whole = hist.groupby(p["msg"]).transform("all").to_numpy(dtype=bool)
    first = ~p["msg"].duplicated().to_numpy()
    framing = np.where(whole & first, view.estimator.per_message, 0)
    turn = p["turn"].fillna(0).astype("int64")
    tokens = (p["tokens"].astype("int64") + framing)[hist]
    return tokens.groupby(turn[hist], sort=False).sum()


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

    def budget(self, view: View) -> int:
        """The history's budget in this view (may be negative when computed)."""
        if self.budget_tokens is not None:
            return self.budget_tokens
        rest = view.total_tokens - int(history_turn_tokens(view).sum())
        return view.limit_tokens - rest - self.output_reserve

    def plan(self, view: View) -> Edit | None:
        p = view.parts
        if p.empty or not (p["layer"] == "history").any():
            return None
        per_turn = history_turn_tokens(view)
        budget = self.budget(view)
        history = int(per_turn.sum())
        if history <= budget:
            return None
        kept = history
        droppable = per_turn.index.tolist()[:max(len(per_turn) - self.min_turns, 0)]
        dropped: list[int] = []
        for turn in droppable:
            if kept <= budget:
                break
            dropped.append(int(turn))
            kept -= int(per_turn[turn])
        turn = p["turn"].fillna(0).astype("int64")
        hist = p[(p["layer"] == "history").to_numpy() & ~turn.isin(dropped).to_numpy()]
        hide = [int(i) for i in p.loc[(p["layer"] == "history").to_numpy()
                                      & turn.isin(dropped).to_numpy(), "part"]]
        inserts: list[NewPart] = []
        if kept > budget:
            long = hist[(hist["role"] == "assistant").to_numpy() & (hist["kind"] == "text")
                        .to_numpy() & hist["event"].isna().to_numpy()
                        & (hist["content"].str.len() > self.truncate_chars)
                        .to_numpy(dtype=bool, na_value=False)]
            for r in long.itertuples():
                text = str(r.content)
                short = text[:self.truncate_chars] + truncation_notice(self.truncate_chars,
                                                                      len(text))
                saved = int(r.tokens) - view.estimate(short)
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
            "budget_tokens": budget, "history_tokens_before": history,
            "history_tokens_after": kept, "turns_dropped": len(dropped),
            "turns_kept": len(per_turn) - len(dropped), "answers_truncated": len(inserts)}
        what = []
        if dropped:
            what.append(f"dropped the {len(dropped)} oldest history turn(s)")
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
                                  f"{len(per_turn) - len(dropped)} turn(s); it goes on with "
                                  f"the most recent history")
            what.append(f"still {kept - budget:,} tokens over budget")
        return Edit(stage=self.name, hide=tuple(hide), insert=tuple(inserts),
                    reason="; ".join(what) if what else "history over budget", details=details)


__all__ = ["TrimHistory", "history_turn_tokens", "truncation_notice"]
