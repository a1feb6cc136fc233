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
from typing import Any, Literal

import numpy as np

from ctxlab.stages.base import Rows, View, equals, ints, labels, strings, table_of
from ctxlab.stages.columns import hashed
from ctxlab.stages.table import Table

Problem = Literal["orphan_result", "unanswered_call", "role_order"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GrammarProblem:
    """One problem: what, and which part."""

    problem: Problem
    part: int
    detail: str


def check_grammar(parts: Rows) -> list[GrammarProblem]:
    """Every grammar problem of one request (parts in position order).

    Example:
        >>> import pandas as pd
        >>> parts = pd.DataFrame({"part": [0, 1, 2], "msg": [0, 1, 2],
        ...     "role": ["user", "assistant", "user"], "kind": ["text", "tool_call", "tool_result"],
        ...     "tool_call_id": [None, "a", "b"]})
        >>> [(p.problem, p.part) for p in check_grammar(parts)]
        [('unanswered_call', 1), ('orphan_result', 2)]
    """
    orphans, unanswered, role_order = _problem_rows(parts)
    if not (len(orphans) or len(unanswered) or role_order):
        return []
    part_ids = ints(parts, "part")
    ids = strings(parts, "tool_call_id")
    found = [(int(r), "orphan_result", f"result of {ids[r]} without its call")
             for r in orphans.tolist()]
    found += [(int(r), "unanswered_call", f"call {ids[r]} without a result")
              for r in unanswered.tolist()]
    found += role_order
    found.sort(key=lambda f: (f[0], f[1]))
    return [GrammarProblem(problem=problem, part=int(part_ids[row]), detail=detail)
            for row, problem, detail in found]


def grammar_counts(parts: Rows) -> dict[str, int]:
    """How many problems of each kind a request has."""
    orphans, unanswered, role_order = _problem_rows(parts)
    return {"orphan_result": len(orphans), "unanswered_call": len(unanswered),
            "role_order": len(role_order)}


def view_grammar(view: Any) -> dict[str, int]:
    """`grammar_counts` of a view (computed once per view, see `_problem_rows`)."""
    return grammar_counts(view)


def _problem_rows(parts: Rows) -> tuple[np.ndarray, np.ndarray,
                                        list[tuple[int, Problem, str]]]:
    """`_find_problem_rows`, remembered on a view (views never change)."""
    if not isinstance(parts, View):
        return _find_problem_rows(parts)
    found = parts._memo.get("problem_rows")
    if found is None:
        found = parts._memo["problem_rows"] = _find_problem_rows(parts)
    return found


def _find_problem_rows(parts: Rows) -> tuple[np.ndarray, np.ndarray,
                                             list[tuple[int, Problem, str]]]:
    """Rows of orphan results, rows of unanswered calls, and the role-order problems as
    ``(row, problem, detail)``.

    A result answers a call when a call with its id comes before it in the request; a
    call is answered when some result answers its id.
    """
    t = table_of(parts)
    if t is None:
        t = Table.from_frame(parts.reset_index(drop=True))
    ids = hashed(t, "tool_call_id")      # NA: -1
    linked = ids != -1
    call_rows = np.flatnonzero(linked & equals(t, "kind", "tool_call"))
    result_rows = np.flatnonzero(linked & equals(t, "kind", "tool_result"))
    called, at = np.unique(ids[call_rows], return_index=True)   # sorted ids
    first_call = call_rows[at]
    j = np.minimum(np.searchsorted(called, ids[result_rows]), max(len(called) - 1, 0))
    has_call = called[j] == ids[result_rows] if len(called) else \
        np.zeros(len(result_rows), dtype=bool)
    ok = has_call & (first_call[j] < result_rows) if len(called) else has_call
    answered = np.zeros(len(called), dtype=bool)
    answered[j[ok]] = True
    unanswered = call_rows[~answered[np.searchsorted(called, ids[call_rows])]]
    return result_rows[~ok], unanswered, _role_order(t)


def _role_order(parts: Table) -> list[tuple[int, Problem, str]]:
    """The conversation's first non-system message (messages in order of first
    appearance) must be a user message, and not one of tool results only."""
    msg = ints(parts, "msg")
    shown = np.flatnonzero(~equals(parts, "role", "system"))
    # the first non-system row that opens its message (usually the very first one)
    row = next((int(r) for r in shown[:64] if not (msg[:r] == msg[r]).any()), None)
    if row is None:
        if len(shown) <= 64:
            return []
        _, first = np.unique(msg, return_index=True)
        opening = np.sort(first)[~equals(parts, "role", "system")[np.sort(first)]]
        if not len(opening):
            return []
        row = int(opening[0])
    role = labels(parts, "role")[row]
    out: list[tuple[int, Problem, str]] = []
    if role != "user":
        out.append((row, "role_order", f"conversation opens with {role}"))
    if bool(equals(parts, "kind", "tool_result")[msg == msg[row]].all()):
        out.append((row, "role_order", "tool results before any call"))
    return out
