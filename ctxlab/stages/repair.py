"""Tool-pair repair (seed 000's post-compaction step): no call without its result, no
result without its call.

Compaction that removes messages can keep one half of a tool pair; providers reject
such requests. For every problem `ctxlab.stages.grammar.check_grammar` reports:

* ``unanswered_call`` — a synthetic result ``[Tool result unavailable - conversation
  was compacted]`` (kind ``tool_result``, same ``tool_call_id``, meta
  ``{"truncated": true}``) is inserted right after the call's message, in the role tool
  results have in this session (``tool`` in OpenAI-style logs, ``user`` in
  Anthropic/Claude Code ones). In ``user`` style, when the call's message is directly
  followed by a message of tool results, the synthetic result joins that message (all
  results of one assistant turn belong in one user message).
* ``orphan_result`` — a synthetic assistant tool call ``[Tool call for <tool> -
  conversation was compacted]`` is inserted right before the result: into the
  assistant message just before it when there is one, else as a message of its own.

Nothing is hidden; the request grows by the placeholders (which is why this is a
post-step, not a compaction stage).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import Edit, NewPart, Stage, View
from ctxlab.stages.grammar import check_grammar
from ctxlab.stages.tool_output import optional_text

SYNTHETIC_RESULT = "[Tool result unavailable - conversation was compacted]"
SYNTHETIC_META = {"truncated": True}


def synthetic_call_text(tool_name: str | None) -> str:
    """The text of a synthetic call standing in for a compacted one.

    Example:
        >>> synthetic_call_text("Read")
        '[Tool call for Read - conversation was compacted]'
    """
    return f"[Tool call for {tool_name or 'unknown tool'} - conversation was compacted]"


def result_role(parts: pd.DataFrame) -> Literal["tool", "user"]:
    """The role tool results have in a request: the most common one, ``tool`` if none.

    Example:
        >>> result_role(pd.DataFrame({"kind": ["tool_result"], "role": ["user"]}))
        'user'
    """
    roles = Counter(parts.loc[parts["kind"] == "tool_result", "role"].astype(str))
    return "user" if roles and roles.most_common(1)[0][0] == "user" else "tool"


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Repair(Stage):
    """Insert synthetic halves for tool calls and tool results left alone.

    Attributes:
        results_role: the role of synthetic results: ``"auto"`` (the role this session's
            tool results have, ``tool`` when the request shows none), ``"tool"`` or
            ``"user"``.
    """

    name = "repair"
    source = "seed 000 (NeuroLink repairToolPairs)"
    results_role: Literal["auto", "tool", "user"] = "auto"

    def __post_init__(self) -> None:
        if self.results_role not in ("auto", "tool", "user"):
            raise ConfigError(f"repair: results_role must be 'auto', 'tool' or 'user', got "
                              f"{self.results_role!r}")

    def plan(self, view: View) -> Edit | None:
        p = view.parts
        if p.empty:
            return None
        problems = check_grammar(p)
        calls = [pb.part for pb in problems if pb.problem == "unanswered_call"]
        orphans = [pb.part for pb in problems if pb.problem == "orphan_result"]
        if not calls and not orphans:
            return None
        role = result_role(p) if self.results_role == "auto" else self.results_role
        by_part = p.set_index(p["part"].astype("int64"), drop=False)
        msgs = [int(m) for m in p.groupby("msg", sort=False)["pos"].min()
                .sort_values(kind="stable").index]
        rows_of = {int(m): g for m, g in p.groupby("msg", sort=False)}
        nxt = dict(pairwise(msgs))
        prev = {b: a for a, b in pairwise(msgs)}
        inserts: list[NewPart] = []
        for pid in calls:
            call = by_part.loc[pid]
            msg = int(call["msg"])
            after = nxt.get(msg)
            follow = rows_of[after] if after is not None else None
            join = (role == "user" and follow is not None
                    and bool((follow["kind"] == "tool_result").all())
                    and bool((follow["role"] == "user").all()))
            anchor = follow if join and follow is not None else rows_of[msg]
            inserts.append(NewPart(
                content=SYNTHETIC_RESULT, kind="tool_result", role=role,
                anchor=int(anchor["part"].iloc[-1]), side="after", join_message=join,
                tool_name=optional_text(call["tool_name"]),
                tool_call_id=optional_text(call["tool_call_id"]), meta=dict(SYNTHETIC_META)))
        for pid in orphans:
            res = by_part.loc[pid]
            msg = int(res["msg"])
            before = prev.get(msg)
            lead = rows_of[before] if before is not None else None
            join = lead is not None and bool((lead["role"] == "assistant").all())
            tool = optional_text(res["tool_name"])
            common = {"content": synthetic_call_text(tool), "kind": "tool_call",
                      "role": "assistant", "tool_name": tool,
                      "tool_call_id": optional_text(res["tool_call_id"]),
                      "meta": dict(SYNTHETIC_META)}
            if join and lead is not None:
                inserts.append(NewPart(anchor=int(lead["part"].iloc[-1]), side="after",
                                       join_message=True, **common))
            else:
                first = int(rows_of[msg]["part"].iloc[0])
                inserts.append(NewPart(anchor=first, side="before", join_message=False,
                                       **common))
        return Edit(stage=self.name, insert=tuple(inserts),
                    reason=f"added {len(calls)} synthetic results and {len(orphans)} synthetic "
                           f"calls for tool pairs compaction split",
                    details={"orphaned_calls_fixed": len(calls),
                             "orphaned_results_fixed": len(orphans), "results_role": role})
