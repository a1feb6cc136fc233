"""The one engine that applies stages: build a call's view, run stages, record events.

`build_view` assembles what a stage sees for one call. `run_stages` runs an ordered
list of stages on it — each edit becomes an event of a `ctxlab.history.SessionHistory`,
only the changed parts are counted again (the estimator caches every text it has
seen), grammar problems are counted before and after every stage, and it stops
as soon as the request is under the target.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.history import SessionHistory
from ctxlab.layers import LayerContext, assign_layers, layer_context
from ctxlab.schema import Transcript
from ctxlab.stages.base import Edit, Stage, View, labels
from ctxlab.stages.columns import codes, hashed, one_of
from ctxlab.stages.grammar import view_grammar
from ctxlab.stages.table import Table, interleave, replaced
from ctxlab.tokens.base import Estimator
from ctxlab.visibility import part_spans


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """The numbers a view is built with.

    Attributes:
        window_tokens: the model's context window.
        limit_tokens: what usage is measured against.
        target_tokens: what the stages try to get under.
        overhead_tokens: unrecorded input added to every request.
    """

    window_tokens: int
    limit_tokens: int
    target_tokens: int
    overhead_tokens: int = 0


BOOKKEEPING = ("part", "pos", "msg", "turn", "role", "kind", "content", "tool_name",
               "file_path", "event", "tokens", "layer")
"""The columns of `StageRun.removed` and `StageRun.added` (what the replay's layer sums
and ledger read)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StageRun:
    """One stage application: its event and what it did.

    ``removed`` and ``added`` are the view rows the stage hid and inserted, with the
    columns a replay's bookkeeping reads (`BOOKKEEPING`: ids, place, role and kind,
    ``tokens`` and ``layer``); None when it made no event. ``failure`` is the kind of
    backend failure that kept the stage from working (see `ctxlab.stages.base.Edit`).
    ``summarizer_*`` sum the summarizer calls the stage made (tokens read and written,
    backend time). ``warning`` is what a stage that made an edit says is still wrong
    (``Edit.details["warning"]``: `trim_history` could not hold its budget).
    """

    stage: str
    event: int | None
    tokens_before: int
    tokens_after: int
    hidden: int
    inserted: int
    grammar_before: int
    grammar_after: int
    summarizer_calls: int
    ms: float
    reason: str
    failure: str | None = None
    summarizer_input_tokens: int = 0
    summarizer_output_tokens: int = 0
    summarizer_ms: float = 0.0
    warning: str | None = None
    removed: Table | None = field(default=None, repr=False, compare=False)
    added: Table | None = field(default=None, repr=False, compare=False)

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass(frozen=True, slots=True, kw_only=True)
class StagesResult:
    """What `run_stages` did to one call's request."""

    transcript: Transcript
    view: View
    runs: tuple[StageRun, ...] = field(default_factory=tuple)

    @property
    def stages_used(self) -> list[str]:
        return [r.stage for r in self.runs if r.event is not None]


def request_parts(t: Transcript, session: str, end_pos: float) -> pd.DataFrame:
    """The parts of ``session`` a call ending its input at ``end_pos`` sees, in order."""
    f = t.frame[t.frame["session"] == session]
    lo, hi = part_spans(f, t.events[t.events["session"] == session])
    return f[(lo < end_pos) & (end_pos <= hi)].sort_values("pos", kind="stable")


def build_view(t: Transcript, session: str, end_pos: float, estimator: Estimator,
               budget: Budget, call: int | None = None) -> View:
    """The view of the request whose input ends at ``end_pos``."""
    return make_view(request_parts(t, session, end_pos), estimator, budget, session, call)


def make_view(parts: pd.DataFrame | Table, estimator: Estimator, budget: Budget, session: str,
              call: int | None = None, *, counted: bool = False,
              messages: int | None = None, layered: LayerContext | None = None) -> View:
    """A view of a request's parts (in position order), counted and layered
    (``counted``: the table's ``tokens`` are already this estimator's counts;
    ``messages``: its number of distinct messages, when the caller keeps count;
    ``layered``: the table's ``layer`` column is already assigned, in a request of this
    `ctxlab.layers.layer_context`, as a replay's is: the last request's rows with their
    layers, and `ctxlab.layers.added_layers` for the rows after them). The view
    remembers its layer context (``_memo["layer_context"]``)."""
    table = parts if isinstance(parts, Table) else \
        Table.from_frame(parts.reset_index(drop=True))
    if not (counted and "tokens" in table):
        tokens = estimator.count_parts(table) if len(table) else np.zeros(0, np.int64)
        table = table.with_columns(tokens=(tokens, TOKENS_DTYPE))
    if layered is not None and "layer" in table:
        context = layered
        if table.dtypes["layer"] != _layer_dtype(table):    # (the last request was empty)
            table = with_layers(table, table.col("layer"))
    else:
        context = layer_context(table)
        table = with_layers(table, assign_layers(table, context))
    view = View(table=table, estimator=estimator,
                window_tokens=budget.window_tokens, limit_tokens=budget.limit_tokens,
                target_tokens=budget.target_tokens, overhead_tokens=budget.overhead_tokens,
                session=session, call=call)
    view._memo["layer_context"] = context
    if messages is not None:
        view._memo["messages"] = messages
    return view


TOKENS_DTYPE = np.dtype(np.int64)


def with_layers(table: Table, layers: np.ndarray | None = None) -> Table:
    """The table with its ``layer`` column (re)assigned (``layers``: its values, when
    known): text, or object when empty, as a DataFrame column set from the same array
    would be."""
    return table.with_columns(layer=(assign_layers(table) if layers is None else layers,
                                     _layer_dtype(table)))


def _layer_dtype(table: Table) -> Any:
    return pd.StringDtype(na_value=np.nan) if len(table) else np.dtype(object)


def call_end_pos(t: Transcript, session: str, call: int) -> float:
    """``input_end_pos`` of one call."""
    c = t.calls[(t.calls["session"] == session) & (t.calls["call"] == call)]
    if c.empty:
        raise KeyError(f"no call {call} in session {session!r}")
    return float(c["input_end_pos"].iloc[0])


def run_stages(t: Transcript, view: View, stages: Sequence[Stage], *, end_pos: float,
               trigger: str | None, until_target: bool = True) -> StagesResult:
    """Run stages in order on a view; every edit becomes an event.

    Args:
        t: the transcript the view was built from.
        view: the request.
        stages: the stages, in order.
        end_pos: the request's ``input_end_pos``.
        trigger: recorded on each event (``"threshold"``, ``"always"``, ``"post"``...).
        until_target: stop once the request is at or under ``view.target_tokens``.
    """
    history = SessionHistory(t, view.session)
    view, runs = run_on(history, view, stages, end_pos=end_pos, trigger=trigger,
                        until_target=until_target)
    return StagesResult(transcript=history.transcript(), view=view, runs=tuple(runs))


def run_on(history: SessionHistory, view: View, stages: Sequence[Stage], *, end_pos: float,
           trigger: str | None, until_target: bool = True,
           measure: Callable[[View], int] | None = None) -> tuple[View, list[StageRun]]:
    """`run_stages` on a session history: the edits are recorded in it, nothing is copied.

    The view is updated edit by edit (hidden parts leave, inserted parts are counted and
    join, layers are assigned again), which gives the same view as rebuilding it from
    the edited transcript. ``measure``: what is held against the target (None: the whole
    request, ``view.total_tokens``).
    """
    runs: list[StageRun] = []
    grammar = sum(view_grammar(view).values())
    for st in stages:
        if until_target and runs and (view.total_tokens if measure is None
                                      else measure(view)) <= view.target_tokens:
            break
        before = view.total_tokens
        t0 = time.perf_counter()
        edit = st.plan(view)
        if edit is None or edit.empty:
            runs.append(StageRun(stage=st.name, event=None, tokens_before=before,
                                 tokens_after=before, hidden=0, inserted=0,
                                 grammar_before=grammar, grammar_after=grammar,
                                 summarizer_calls=len(edit.summarizer_calls) if edit else 0,
                                 ms=1000 * (time.perf_counter() - t0),
                                 reason=edit.reason if edit is not None else "nothing to do",
                                 failure=edit.failure if edit is not None else None,
                                 **summarizer_totals(edit)))
            continue
        event, inserted = history.apply(edit, end_pos=end_pos, trigger=trigger,
                                        pre_tokens=before, meta={"params": st.params()})
        view, removed, added = edit_view(view, edit.hide, inserted)
        after = view.total_tokens
        history.note(event, tokens_after=int(after))
        g_after = sum(view_grammar(view).values())
        runs.append(StageRun(stage=st.name, event=event, tokens_before=before,
                             tokens_after=after, hidden=len(edit.hide),
                             inserted=len(edit.insert), grammar_before=grammar,
                             grammar_after=g_after,
                             summarizer_calls=len(edit.summarizer_calls),
                             **summarizer_totals(edit),
                             ms=1000 * (time.perf_counter() - t0), reason=edit.reason,
                             warning=_warning(edit), removed=removed, added=added))
        grammar = g_after
    return view, runs


def _warning(edit: Edit) -> str | None:
    warning = edit.details.get("warning") if isinstance(edit.details, Mapping) else None
    return str(warning) if warning else None


def summarizer_totals(edit: Edit | None) -> dict[str, Any]:
    """What an edit's summarizer calls cost, summed (the ``summarizer_*`` of `StageRun`)."""
    calls = edit.summarizer_calls if edit is not None else ()
    return {"summarizer_input_tokens": sum(int(c.get("input_tokens", 0)) for c in calls),
            "summarizer_output_tokens": sum(int(c.get("output_tokens", 0)) for c in calls),
            "summarizer_ms": float(sum(float(c.get("ms", 0.0)) for c in calls))}


def edit_view(view: View, hide: Sequence[int],
              inserted: Table) -> tuple[View, Table, Table]:
    """The view after an edit (hidden parts gone, inserted parts counted and placed), and
    the rows the edit removed and added (with tokens and layer)."""
    p = view.table
    gone = one_of(p.ints("part"), hide)
    old_rows = np.flatnonzero(gone)
    removed = p.take(old_rows, BOOKKEEPING)
    if len(inserted):               # kept and inserted rows merged in position order
        tokens = view.estimator.count_parts(inserted)
        pos = np.asarray(p.col("pos"), dtype=np.float64)
        new_pos = np.asarray(inserted.col("pos"), dtype=np.float64)
        slots = _slots(pos, old_rows, new_pos)
        if slots is not None and "layer" in p:  # (layers of the slots: kept if in place)
            layer = p.col("layer")[old_rows[np.argsort(slots)]]
        else:
            layer = np.full(len(inserted), "", dtype=object)
        new = inserted.with_columns(tokens=(tokens, TOKENS_DTYPE),
                                    layer=(layer, p.dtypes.get("layer", np.dtype(object))))
        if slots is not None:       # each new row takes the place of a hidden one
            if (slots != np.arange(len(slots))).any():
                new = new.take(slots)
            parts, new_rows = replaced(p, old_rows, new), old_rows
        else:
            kept = np.flatnonzero(~gone)
            order = np.argsort(np.concatenate([pos[kept], new_pos]), kind="stable")
            is_new = order >= len(kept)
            parts = interleave(p, kept[order[~is_new]], new, order[is_new] - len(kept),
                               is_new)
            new_rows = np.flatnonzero(is_new)
    else:                           # the kept rows are already in position order
        parts = p.take(np.flatnonzero(~gone))
        new_rows = np.zeros(0, dtype=np.int64)
    in_place = in_place_rows(p, old_rows, parts, new_rows)
    # a part replaced in place has its layer, unless a user's text (injected context)
    layers_kept = in_place and "layer" in p and not (
        (labels(p, "role")[old_rows] == "user") & (labels(p, "kind")[old_rows] == "text")).any()
    context = view._memo.get("layer_context") if layers_kept else layer_context(parts)
    if not layers_kept:
        parts = with_layers(parts, assign_layers(parts, context))
    elif parts.cols["layer"] is not p.cols["layer"]:
        parts = parts.with_columns(layer=(p.col("layer"), p.dtypes["layer"]))
    added = parts.take(new_rows, BOOKKEEPING)
    out = view.with_table(parts)
    if context is not None:                     # the same layers: the same context
        out._memo["layer_context"] = context
    if in_place and "messages" in view._memo:   # the same messages at the same rows
        out._memo["messages"] = view._memo["messages"]
    found = view._memo.get("problem_rows")
    if found is not None and in_place and np.array_equal(
            hashed(p, "tool_call_id")[old_rows], hashed(parts, "tool_call_id")[new_rows]):
        out._memo["problem_rows"] = found   # nothing the grammar reads has changed
        if "grammar_scan" in view._memo:
            out._memo["grammar_scan"] = view._memo["grammar_scan"]
    return out, removed, added


def _slots(pos: np.ndarray, rows: np.ndarray, new_pos: np.ndarray) -> np.ndarray | None:
    """The order of the new rows when, merged by position with the rows that stay, they
    land exactly in the hidden ``rows`` (each strictly between the neighbours of its
    slot, the view in position order); None otherwise."""
    n = len(pos)
    if len(new_pos) != len(rows) or not len(rows) or \
            (n > 1 and not (pos[1:] >= pos[:-1]).all()):
        return None
    if len(rows) == 1:              # (most edits replace one part)
        r, x = int(rows[0]), float(new_pos[0])
        fits = (r == 0 or x > pos[r - 1]) and (r == n - 1 or x < pos[r + 1])
        return _ONE_SLOT if fits else None
    order = np.argsort(new_pos, kind="stable")
    merged = pos.copy()
    merged[rows] = new_pos[order]
    left, right = rows[rows > 0], rows[rows < n - 1]
    if (merged[left] > merged[left - 1]).all() and (merged[right] < merged[right + 1]).all():
        return order
    return None


_ONE_SLOT = np.zeros(1, dtype=np.int64)
_ONE_SLOT.flags.writeable = False


def in_place_rows(old: Table, old_rows: np.ndarray, new: Table, new_rows: np.ndarray) -> bool:
    """Did an edit replace each part it removed in the same row by one of the same role,
    kind, message and turn (placeholders, cut tool outputs)? Every other row is then
    what it was, and so are the layers and, with the same tool-call ids, the grammar."""
    if not len(new_rows) or not np.array_equal(old_rows, new_rows):
        return False
    pairs = [(codes(old, "kind"), codes(new, "kind")), (codes(old, "role"), codes(new, "role")),
             (old.ints("msg"), new.ints("msg")), (old.ints("turn"), new.ints("turn"))]
    if len(old_rows) == 1:
        r = int(old_rows[0])
        return all(a[r] == b[r] for a, b in pairs)
    return all(np.array_equal(a[old_rows], b[new_rows]) for a, b in pairs)
