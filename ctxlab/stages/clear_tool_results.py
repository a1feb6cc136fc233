"""Tool-result clearing (seed 004, neuron-context ``ToolResultClearingStrategy``).

Also known as *observation masking*: every tool result except the ``keep`` most
recent is replaced by a short placeholder that keeps the tool-call id (and tool
name), so each call still has its answer and the conversation keeps its shape.
The most recent results are counted over every visible tool result, as
neuron-context counts result blocks by position.

Two things are left as they are: parts an earlier event inserted (placeholders,
truncated results — never cleared twice), and results no bigger than the
placeholder (clearing them would add tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, equals, ints, is_na, optional_text,
                                part_rows)
from ctxlab.stages.table import Table
from ctxlab.wording import counted

PLACEHOLDER = "[tool result cleared]"


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ClearToolResults(Stage):
    """Replace all but the ``keep`` most recent tool results with a placeholder.

    Attributes:
        keep: most recent tool results kept intact (seed 004's example: 2).
        placeholder: the text of a cleared result (seed 004: ``"[tool result cleared]"``).

    Example:
        >>> import pandas as pd
        >>> from ctxlab.stages.base import View
        >>> from ctxlab.tokens import estimator
        >>> parts = pd.DataFrame({"part": range(6), "msg": range(6),
        ...     "role": ["user", "assistant", "user", "assistant", "user", "assistant"],
        ...     "kind": ["text", "tool_call", "tool_result"] * 2,
        ...     "tool_call_id": [None, "a", "a", None, None, None],
        ...     "tool_name": [None, "Read", "Read", None, None, None],
        ...     "file_path": None, "event": None, "content": "x" * 400, "tokens": 100})
        >>> parts.loc[3:5, "kind"] = ["tool_call", "tool_result", "text"]
        >>> parts.loc[3:4, "tool_call_id"] = "b"
        >>> view = View(parts=parts, estimator=estimator("chars:4"), window_tokens=1000,
        ...             limit_tokens=500, target_tokens=500)
        >>> edit = ClearToolResults(keep=1).plan(view)
        >>> edit.hide, edit.insert[0].tool_call_id, edit.insert[0].content
        ((2,), 'a', '[tool result cleared]')
    """

    name = "clear_tool_results"
    source = "seed 004 (neuron-context ToolResultClearingStrategy)"
    keep: int = 2
    placeholder: str = PLACEHOLDER

    def __post_init__(self) -> None:
        if isinstance(self.keep, bool) or not isinstance(self.keep, int) or self.keep < 0:
            raise ConfigError(f"clear_tool_results: keep must be an int >= 0, got {self.keep!r}")
        if not isinstance(self.placeholder, str) or not self.placeholder.strip():
            raise ConfigError("clear_tool_results: placeholder must be a non-empty text")

    def plan(self, view: View) -> Edit | None:
        p = view
        results = np.flatnonzero(equals(p, "kind", "tool_result"))
        if len(results) <= self.keep:
            return None
        older = results[:len(results) - self.keep]
        tokens = ints(p, "tokens")
        placeholder_tokens = view.estimate(self.placeholder)
        older = older[is_na(p, "event")[older] & (tokens[older] > placeholder_tokens)]
        if not len(older):
            return Edit(stage=self.name, reason="every older tool result is already cleared "
                        "or no bigger than the placeholder")
        inserts = tuple(
            NewPart(content=self.placeholder, kind="tool_result", role=r.role,
                    anchor=r.part, join_message=True,
                    tool_name=optional_text(r.tool_name),
                    tool_call_id=optional_text(r.tool_call_id),
                    file_path=optional_text(r.file_path))
            for r in part_rows(p, older, ("part", "role", "tool_name", "tool_call_id",
                                          "file_path")))
        saved = int(tokens[older].sum()) - placeholder_tokens * len(older)
        return Edit(stage=self.name, hide=tuple(r.anchor for r in inserts), insert=inserts,
                    reason=f"cleared {counted(len(older), 'tool result')}, kept the "
                           f"{self.keep} most recent",
                    details={"cleared": len(older), "kept": self.keep, "tokens_saved": saved})

    def candidates(self, table: Table) -> np.ndarray:
        """Tool results: other rows change neither which results are the most recent
        nor what the older ones hold."""
        return equals(table, "kind", "tool_result")


__all__ = ["PLACEHOLDER", "ClearToolResults"]
