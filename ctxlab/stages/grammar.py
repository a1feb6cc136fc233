"""Message-grammar checks on a request: the shapes providers reject.

* ``orphan_result``: a tool result whose call is not in the request before it;
* ``unanswered_call``: a tool call with no result after it in the request;
* ``role_order``: the conversation does not open with a user message after the
  system parts, or a message of tool results comes first.

Compaction that hides one half of a tool pair makes the request invalid for the
provider; `ctxlab.stages.repair` fixes that, and the engine counts problems before
and after every stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

Problem = Literal["orphan_result", "unanswered_call", "role_order"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GrammarProblem:
    """One problem: what, and which part."""

    problem: Problem
    part: int
    detail: str


def check_grammar(parts: pd.DataFrame) -> list[GrammarProblem]:
    """Every grammar problem of one request (parts in position order).

    Example:
        >>> parts = pd.DataFrame({"part": [0, 1, 2], "msg": [0, 1, 2],
        ...     "role": ["user", "assistant", "user"], "kind": ["text", "tool_call", "tool_result"],
        ...     "tool_call_id": [None, "a", "b"]})
        >>> [(p.problem, p.part) for p in check_grammar(parts)]
        [('unanswered_call', 1), ('orphan_result', 2)]
    """
    problems: list[GrammarProblem] = []
    kind = parts["kind"].to_numpy(dtype=object, na_value=None).tolist()
    ids = parts["tool_call_id"].to_numpy(dtype=object, na_value=None).tolist()
    part_ids = parts["part"].to_numpy(dtype=np.int64).tolist()
    seen_calls: set[str] = set()
    answered: set[str] = set()
    for k, cid, pid in zip(kind, ids, part_ids):
        if not isinstance(cid, str):
            continue
        if k == "tool_call":
            seen_calls.add(cid)
        elif k == "tool_result":
            if cid in seen_calls:
                answered.add(cid)
            else:
                problems.append(GrammarProblem(problem="orphan_result", part=pid,
                                               detail=f"result of {cid} without its call"))
    for k, cid, pid in zip(kind, ids, part_ids):
        if k == "tool_call" and isinstance(cid, str) and cid not in answered:
            problems.append(GrammarProblem(problem="unanswered_call", part=pid,
                                           detail=f"call {cid} without a result"))
    problems.extend(_role_order(parts))
    rank = {pid: i for i, pid in enumerate(part_ids)}
    return sorted(problems, key=lambda p: (rank[p.part], p.problem))


def _role_order(parts: pd.DataFrame) -> list[GrammarProblem]:
    out: list[GrammarProblem] = []
    messages: dict[int, list[tuple[str, str, int]]] = {}
    for msg, role, kind, pid in zip(parts["msg"].to_numpy(dtype=np.int64).tolist(),
                                    parts["role"].to_numpy(dtype=object).tolist(),
                                    parts["kind"].to_numpy(dtype=object).tolist(),
                                    parts["part"].to_numpy(dtype=np.int64).tolist()):
        messages.setdefault(msg, []).append((role, kind, pid))
    prev_role: str | None = None
    opened = False
    for rows in messages.values():
        role, _, first = rows[0]
        if role == "system":
            continue
        if not opened and role != "user":
            out.append(GrammarProblem(problem="role_order", part=first,
                                      detail=f"conversation opens with {role}"))
        opened = True
        if all(k == "tool_result" for _, k, _ in rows) and prev_role is None:
            out.append(GrammarProblem(problem="role_order", part=first,
                                      detail="tool results before any call"))
        prev_role = role
    return out


def grammar_counts(parts: pd.DataFrame) -> dict[str, int]:
    """How many problems of each kind a request has."""
    counts = {"orphan_result": 0, "unanswered_call": 0, "role_order": 0}
    for p in check_grammar(parts):
        counts[p.problem] += 1
    return counts
