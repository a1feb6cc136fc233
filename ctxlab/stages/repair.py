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
from typing import Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, ints, labels, message_groups,
                               optional_text, part_rows)
from ctxlab.stages.grammar import check_grammar

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
    roles = Counter(str(r) for r in labels(parts, "role")[labels(parts, "kind")
                                                           == "tool_result"].tolist())
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
        p = view
        if not len(p):
            return None
        problems = check_grammar(p)
        calls = [pb.part for pb in problems if pb.problem == "unanswered_call"]
        orphans = [pb.part for pb in problems if pb.problem == "orphan_result"]
        if not calls and not orphans:
            return None
        role = result_role(p) if self.results_role == "auto" else self.results_role
        m = message_groups(p)
        part_ids = ints(p, "part")
        row_of = {int(pid): i for i, pid in enumerate(part_ids.tolist())}
        results_only = m.all(labels(p, "kind") == "tool_result")
        roles = labels(p, "role")
        users_only, assistants_only = m.all(roles == "user"), m.all(roles == "assistant")
        first_part, last_part = part_ids[m.first_rows], part_ids[m.last_rows]
        wanted = [row_of[pid] for pid in calls + orphans]
        cells = {r: row for r, row in zip(wanted, part_rows(p, np.asarray(wanted, dtype=np.int64),
                                                             ("tool_name", "tool_call_id")))}
        inserts: list[NewPart] = []
        for pid in calls:
            row = row_of[pid]
            msg = int(m.of_row[row])
            after = msg + 1 if msg + 1 < len(m) else None
            join = (role == "user" and after is not None and bool(results_only[after])
                    and bool(users_only[after]))
            anchor = after if join and after is not None else msg
            inserts.append(NewPart(
                content=SYNTHETIC_RESULT, kind="tool_result", role=role,
                anchor=int(last_part[anchor]), side="after", join_message=join,
                tool_name=optional_text(cells[row].tool_name),
                tool_call_id=optional_text(cells[row].tool_call_id), meta=dict(SYNTHETIC_META)))
        for pid in orphans:
            row = row_of[pid]
            msg = int(m.of_row[row])
            before = msg - 1 if msg > 0 else None
            join = before is not None and bool(assistants_only[before])
            tool = optional_text(cells[row].tool_name)
            common = {"content": synthetic_call_text(tool), "kind": "tool_call",
                      "role": "assistant", "tool_name": tool,
                      "tool_call_id": optional_text(cells[row].tool_call_id),
                      "meta": dict(SYNTHETIC_META)}
            if join and before is not None:
                inserts.append(NewPart(anchor=int(last_part[before]), side="after",
                                       join_message=True, **common))
            else:
                inserts.append(NewPart(anchor=int(first_part[msg]), side="before",
                                       join_message=False, **common))
        return Edit(stage=self.name, insert=tuple(inserts),
                    reason=f"added {len(calls)} synthetic results and {len(orphans)} synthetic "
                           f"calls for tool pairs compaction split",
                    details={"orphaned_calls_fixed": len(calls),
                             "orphaned_results_fixed": len(orphans), "results_role": role})
