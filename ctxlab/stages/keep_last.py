"""Sliding window (seed 004, neuron-context ``SlidingWindowStrategy``): keep the last N messages.

System-role parts (system prompt, tool definitions) are always kept; of the other
messages only the last ``keep`` survive and the older ones are hidden whole. With
``scope="history"`` the window counts only messages of the L4 history layer (the
current turn and carried attachments are left alone): that models Obsidian
Copilot's ``BufferWindowMemory`` with ``k = contextTurns * 2 = 30`` messages
(seed 003).

A window edge can fall between a tool call and its result; neuron-context drops
messages without looking, so the faithful stage leaves such orphans to the
pipeline's ``repair`` post-step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import Edit, Stage, View, equals, ints, labels, one_of, strings

Scope = Literal["all", "history"]


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class KeepLast(Stage):
    """Keep system parts and the last ``keep`` non-system messages; hide the rest.

    Attributes:
        keep: non-system messages kept (seed 004's quick example uses 10).
        scope: ``"all"`` (every non-system message, as neuron-context) or
            ``"history"`` (only the L4 history layer, as Copilot's memory window).

    Example:
        Seed 004's ``SlidingWindowStrategy::new(2, 500)``:

        >>> import pandas as pd
        >>> from ctxlab.stages.base import View
        >>> from ctxlab.tokens import estimator
        >>> roles = ["system", "user", "assistant", "user", "assistant", "user", "assistant"]
        >>> parts = pd.DataFrame({"part": range(7), "msg": range(7), "turn": [0, 1, 1, 2, 2, 3, 3],
        ...     "role": roles, "kind": ["text"] * 7, "layer": ["system"] + ["history"] * 4
        ...     + ["prompt", "current"], "tokens": [7, 4, 10, 6, 9, 5, 10], "tool_call_id": None})
        >>> view = View(parts=parts, estimator=estimator("chars:4"), window_tokens=1000,
        ...             limit_tokens=500, target_tokens=500)
        >>> KeepLast(keep=2).plan(view).hide
        (1, 2, 3, 4)
    """

    name = "keep_last"
    source = "seed 004 (neuron-context SlidingWindowStrategy)"
    keep: int = 10
    scope: Scope = "all"

    def __post_init__(self) -> None:
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 0:
            raise ConfigError(f"keep_last: keep must be an int >= 0, got {self.keep!r}")
        if self.scope not in ("all", "history"):
            raise ConfigError(f"keep_last: scope must be 'all' or 'history', got "
                              f"{self.scope!r}")

    def plan(self, view: View) -> Edit | None:
        p = view
        if not len(p):
            return None
        kind = labels(p, "kind")
        if self.scope == "all":
            window = ~equals(p, "role", "system") & ~equals(p, "kind", "tool_schema")
        else:
            window = labels(p, "layer") == "history"
        msg = ints(p, "msg")
        _, first = np.unique(msg[window], return_index=True)
        order = msg[window][np.sort(first)]           # messages by first appearance
        if len(order) <= self.keep:
            return None
        dropped = order[:len(order) - self.keep]
        hidden = window & np.isin(msg, dropped)
        part = ints(p, "part")
        hide = tuple(part[hidden].tolist())
        call_ids = strings(p, "tool_call_id")
        hidden_calls = set(call_ids[hidden & (kind == "tool_call")].tolist()) - {None}
        orphans = int(np.count_nonzero(~hidden & (kind == "tool_result")
                                       & one_of(call_ids, hidden_calls)))
        where = "non-system" if self.scope == "all" else "history"
        return Edit(stage=self.name, hide=hide,
                    reason=f"kept the last {self.keep} {where} messages, dropped "
                           f"{len(dropped)} older ones",
                    details={"messages_dropped": len(dropped), "messages_kept": self.keep,
                             # with the framing of the messages that go
                             "tokens_saved": int(ints(p, "tokens")[hidden].sum())
                             + view.estimator.framing(view.messages)
                             - view.estimator.framing(view.messages - len(dropped)),
                             "orphaned_results": orphans})


__all__ = ["KeepLast"]
