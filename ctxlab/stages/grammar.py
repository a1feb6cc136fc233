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
        t = table_of(parts)
        assert t is not None
        scan = _scan(t)
        found = parts._memo["problem_rows"] = scan.found
        parts._memo["grammar_scan"] = scan
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
    return _scan(t).found


@dataclass(frozen=True, slots=True)
class _Scan:
    """The problems of a request, with what extends them to rows appended after it:
    the ids of its calls (sorted), the ids of its unanswered calls and the row that
    opens the conversation (None: none found)."""

    found: tuple[np.ndarray, np.ndarray, list[tuple[int, Problem, str]]]
    called: np.ndarray
    unanswered_ids: np.ndarray
    opening: int | None


def _scan(t: Table) -> _Scan:
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
    opening = _opening_row(t)
    return _Scan(found=(result_rows[~ok], unanswered, _role_problems(t, opening)),
                 called=called, unanswered_ids=ids[unanswered], opening=opening)


def grown_scan(before: _Scan, t: Table, n_before: int) -> _Scan | None:
    """`_scan` of ``t`` when its first ``n_before`` rows are those of a request whose scan
    is ``before`` (a replay's request grows by the parts that arrived since the last
    call): only the new rows are read. None when the conversation's opening message
    changes (scan the whole request then)."""
    if before.opening is None:
        return None
    msg = ints(t, "msg")
    if (msg[n_before:] == msg[before.opening]).any():
        return None
    ids = hashed(t, "tool_call_id")[n_before:]
    linked = ids != -1
    new_calls = np.flatnonzero(linked & equals(t, "kind", "tool_call")[n_before:])
    new_results = np.flatnonzero(linked & equals(t, "kind", "tool_result")[n_before:])
    orphans, unanswered, role = before.found
    if not len(new_calls) and not len(new_results):
        return before
    # a few new rows at each call: Python sets, not NumPy set operations, for them
    called = before.called
    was_open = set(before.unanswered_ids.tolist())

    def was_called(i: int) -> bool:
        k = int(called.searchsorted(i))
        return k < len(called) and int(called[k]) == i

    first_new_call: dict[int, int] = {}
    call_ids = ids[new_calls].tolist()
    for r, i in zip(new_calls.tolist(), call_ids):
        first_new_call.setdefault(i, r)
    answered_now: set[int] = set()              # ids the new results answer
    new_orphans = []
    for r, i in zip(new_results.tolist(), ids[new_results].tolist()):
        if was_called(i) or first_new_call.get(i, r) < r:
            answered_now.add(i)
        else:
            new_orphans.append(n_before + r)
    if answered_now & was_open:
        keep = np.fromiter((i not in answered_now for i in before.unanswered_ids.tolist()),
                           dtype=bool, count=len(before.unanswered_ids))
        unanswered, open_ids = unanswered[keep], before.unanswered_ids[keep]
    else:
        open_ids = before.unanswered_ids
    # a new call is unanswered when its id has no answering result: not answered before
    # (an earlier call's id that is not open), nor by a new result
    still_open = [(n_before + r, i) for r, i in zip(new_calls.tolist(), call_ids)
                  if i not in answered_now and (i in was_open or not was_called(i))]
    if still_open:
        unanswered = np.sort(np.concatenate([unanswered, [r for r, _ in still_open]])
                             ).astype(np.int64)
        open_ids = np.concatenate([open_ids, [i for _, i in still_open]]).astype(np.int64)
    fresh = sorted({i for i in call_ids if not was_called(i)})
    if fresh:
        called = np.insert(called, called.searchsorted(fresh), fresh)
    if new_orphans:
        orphans = np.concatenate([orphans, new_orphans]).astype(np.int64)
    return _Scan(found=(orphans, unanswered, role), called=called, unanswered_ids=open_ids,
                 opening=before.opening)


def _opening_row(parts: Table) -> int | None:
    """The first non-system row that opens its message (messages in order of first
    appearance), None when there is none."""
    msg = ints(parts, "msg")
    shown = np.flatnonzero(~equals(parts, "role", "system"))
    # usually the very first one
    row = next((int(r) for r in shown[:64] if not (msg[:r] == msg[r]).any()), None)
    if row is None and len(shown) > 64:
        _, first = np.unique(msg, return_index=True)
        opening = np.sort(first)[~equals(parts, "role", "system")[np.sort(first)]]
        row = int(opening[0]) if len(opening) else None
    return row


def _role_problems(parts: Table, row: int | None) -> list[tuple[int, Problem, str]]:
    """The conversation's first non-system message (opening at ``row``) must be a user
    message, and not one of tool results only."""
    if row is None:
        return []
    msg = ints(parts, "msg")
    role = labels(parts, "role")[row]
    out: list[tuple[int, Problem, str]] = []
    if role != "user":
        out.append((row, "role_order", f"conversation opens with {role}"))
    if bool(equals(parts, "kind", "tool_result")[msg == msg[row]].all()):
        out.append((row, "role_order", "tool results before any call"))
    return out
