"""Tool-output pruning (seed 000, stage 1): clear old tool results, protect the recent ones.

Walking the request backwards, tool results are protected until their summed tokens
pass ``protect_tokens``; every older result (unless its tool is protected) is
replaced by a placeholder that keeps the tool-call linkage. The edit is made only
when it saves at least ``minimum_savings`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctxlab.stages import register
from ctxlab.stages.base import Edit, NewPart, Stage, View

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

    def plan(self, view: View) -> Edit | None:
        p = view.parts
        results = p[(p["kind"] == "tool_result") & p["event"].isna()]
        if results.empty:
            return None
        newest_first = results.iloc[::-1]
        seen = np.cumsum(newest_first["tokens"].to_numpy())
        old = newest_first[seen > self.protect_tokens]
        old = old[~old["tool_name"].isin(list(self.protected_tools)).to_numpy(dtype=bool,
                                                                             na_value=False)]
        if old.empty:
            return None
        placeholder_tokens = view.estimate(self.placeholder)
        saved = int(old["tokens"].sum()) - placeholder_tokens * len(old)
        if saved < self.minimum_savings:
            return Edit(stage=self.name, reason=f"would save {saved:,} tokens, under the "
                        f"minimum of {self.minimum_savings:,}")
        inserts = tuple(
            NewPart(content=self.placeholder, kind="tool_result", role=r.role, anchor=int(r.part),
                    join_message=True, tool_name=r.tool_name if isinstance(r.tool_name, str)
                    else None, tool_call_id=r.tool_call_id if isinstance(r.tool_call_id, str)
                    else None, file_path=r.file_path if isinstance(r.file_path, str) else None)
            for r in old.iloc[::-1].itertuples())
        return Edit(stage=self.name, hide=tuple(int(i) for i in old["part"].iloc[::-1]),
                    insert=inserts,
                    reason=f"cleared {len(old)} tool results older than the newest "
                           f"{self.protect_tokens:,} tokens of tool output",
                    details={"pruned": len(old), "tokens_saved": saved})
