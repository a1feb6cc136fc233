"""Tool-output pruning (seed 000, stage 1): clear old tool results, protect the recent ones.

Walking the request backwards, tool results are protected until their summed tokens
pass ``protect_tokens``; every older result (unless its tool is protected) is
replaced by a placeholder that keeps the tool-call linkage. The edit is made only
when it saves at least ``minimum_savings`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, equals, ints, is_na, one_of,
                                optional_text, part_rows, strings)

PLACEHOLDER = "[Tool result cleared]"


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Prune(Stage):
    """Replace tool results older than the protected recent window with a placeholder.

    Attributes:
        protect_tokens: tokens of the most recent tool results kept intact (40,000).
        minimum_savings: the edit is made only if it saves this many tokens (20,000).
        protected_tools: tools whose results are never pruned (``("skill",)``).
        placeholder: the text that replaces a pruned result.
    """

    name = "prune"
    source = "seed 000 (NeuroLink pruneToolOutputs)"
    protect_tokens: int = 40_000
    minimum_savings: int = 20_000
    protected_tools: tuple[str, ...] = ("skill",)
    placeholder: str = PLACEHOLDER

    def __post_init__(self) -> None:
        for name in ("protect_tokens", "minimum_savings"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"prune: {name} must be an int >= 0, got {value!r}")
        if not isinstance(self.protected_tools, tuple) or not all(
                isinstance(t, str) for t in self.protected_tools):
            raise ConfigError(f"prune: protected_tools must be a tuple of tool names, got "
                              f"{self.protected_tools!r}")
        if not isinstance(self.placeholder, str) or not self.placeholder.strip():
            raise ConfigError(f"prune: placeholder must be a non-empty text, got "
                              f"{self.placeholder!r}")

    def plan(self, view: View) -> Edit | None:
        p = view
        rows = np.flatnonzero(equals(p, "kind", "tool_result") & is_na(p, "event"))
        if not len(rows):
            return None
        tokens = ints(p, "tokens")[rows]
        seen = np.cumsum(tokens[::-1])[::-1]        # tokens of this result and every later one
        tool = strings(p, "tool_name")[rows]
        old = (seen > self.protect_tokens) & ~one_of(tool, self.protected_tools)
        if not old.any():
            return None
        rows = rows[old]
        placeholder_tokens = view.estimate(self.placeholder)
        saved = int(tokens[old].sum()) - placeholder_tokens * len(rows)
        if saved < self.minimum_savings:
            return Edit(stage=self.name, reason=f"would save {saved:,} tokens, under the "
                        f"minimum of {self.minimum_savings:,}")
        inserts = tuple(
            NewPart(content=self.placeholder, kind="tool_result", role=r.role, anchor=r.part,
                    join_message=True, tool_name=optional_text(r.tool_name),
                    tool_call_id=optional_text(r.tool_call_id),
                    file_path=optional_text(r.file_path))
            for r in part_rows(p, rows, ("part", "role", "tool_name", "tool_call_id",
                                         "file_path")))
        return Edit(stage=self.name, hide=tuple(r.anchor for r in inserts), insert=inserts,
                    reason=f"cleared {len(rows)} tool results older than the newest "
                           f"{self.protect_tokens:,} tokens of tool output",
                    details={"pruned": len(rows), "tokens_saved": saved})
