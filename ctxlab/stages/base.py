"""What a stage sees (`View`), what it returns (`Edit`), and the `Stage` base class.

A stage is a pure planner: given the request of one call — its visible parts in
position order with their token counts and layers, and the budget — it returns an
`Edit` (parts to hide, parts to insert, why) or None. It never changes the view
or the transcript; the engine (`ctxlab.history.apply_edit`) records the edit as an
event, so every stage application can be rewound.

Planners read the view's columns through the helpers of `ctxlab.stages.columns`
(re-exported here): NumPy arrays of the request's `Table`, no DataFrame built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from itertools import pairwise
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from ctxlab.schema import Kind, Role
from ctxlab.stages.columns import (Messages, Rows, count_rows, distinct, equals,  # noqa: F401
                                   floats, ints, is_na, labels, message_groups, one_of,
                                   optional_text, part_rows, strings, table_of, text_lengths)
from ctxlab.stages.table import Table
from ctxlab.tokens.base import Estimator

Side = Literal["before", "after"]


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class View:
    """The request of one call, as a stage sees it.

    Attributes:
        parts: the visible parts of the request in position order: the part columns of
            `ctxlab.schema.PART_COLUMNS` plus ``tokens`` (int64, this estimator's count,
            with flat image costs) and ``layer`` (see `ctxlab.layers`). A DataFrame built
            from ``table`` the first time it is asked for.
        table: the same rows as NumPy columns (`ctxlab.stages.table.Table`): what the
            engine moves and what `labels`, `strings`, `equals`, `is_na` and `ints` read
            when given the view itself, without building the DataFrame.
        estimator: the estimator that counted ``tokens``; stages estimate new text with it.
        window_tokens: the model's context window.
        limit_tokens: the input budget the trigger compares against (e.g. seed 000's
            available input tokens, or seed 003's ``autoCompactThreshold``).
        target_tokens: what the pipeline tries to get under.
        overhead_tokens: unrecorded input (system prompt, tool schemas) the log lacks.
        session: the session id.
        call: the call whose request this is (None: a request being assembled).

    Build one from ``parts=`` (a DataFrame) or ``table=``; ``parts`` wins when both are
    given.
    """

    table: Table
    estimator: Estimator
    window_tokens: int
    limit_tokens: int
    target_tokens: int
    overhead_tokens: int = 0
    session: str = ""
    call: int | None = None
    _memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __init__(self, parts: pd.DataFrame | None = None, *, table: Table | None = None,
                 estimator: Estimator, window_tokens: int, limit_tokens: int,
                 target_tokens: int, overhead_tokens: int = 0, session: str = "",
                 call: int | None = None, _memo: Any = None) -> None:
        if parts is not None:
            table = Table.from_frame(parts)
            table._frame = parts
        elif table is None:
            table = Table.from_frame(pd.DataFrame())
        for k, v in (("table", table), ("estimator", estimator),
                     ("window_tokens", window_tokens), ("limit_tokens", limit_tokens),
                     ("target_tokens", target_tokens), ("overhead_tokens", overhead_tokens),
                     ("session", session), ("call", call), ("_memo", {})):
            object.__setattr__(self, k, v)

    @property
    def parts(self) -> pd.DataFrame:
        return self.table.frame()

    def with_table(self, table: Table) -> View:
        """The same request settings over other rows."""
        return View(table=table, estimator=self.estimator, window_tokens=self.window_tokens,
                    limit_tokens=self.limit_tokens, target_tokens=self.target_tokens,
                    overhead_tokens=self.overhead_tokens, session=self.session,
                    call=self.call)

    def col(self, name: str) -> Any:
        """One column of the parts as an array (read-only; see `Table`)."""
        return self.table.col(name)

    def __len__(self) -> int:
        return self.table.n

    def __contains__(self, name: object) -> bool:
        return name in self.table

    @property
    def messages(self) -> int:
        """Distinct messages in the request."""
        m = self._memo.get("messages")
        if m is None:
            t = self.table
            if "msg" not in t:
                m = 0
            else:
                msg = t.col("msg")
                m = len(distinct(msg[~t.isna("msg")] if msg.dtype.kind != "i" else msg))
            self._memo["messages"] = m
        return m

    @property
    def content_tokens(self) -> int:
        """Tokens of the parts alone (no framing, no overhead)."""
        m = self._memo.get("content_tokens")
        if m is None:
            m = int(np.asarray(self.table.col("tokens"), dtype=np.int64).sum()) \
                if "tokens" in self.table else 0
            self._memo["content_tokens"] = m
        return m

    @property
    def total_tokens(self) -> int:
        """Everything the request costs: parts, message framing and the overhead."""
        return self.content_tokens + self.estimator.framing(self.messages) + self.overhead_tokens

    @property
    def usage_ratio(self) -> float:
        """``total_tokens / limit_tokens``."""
        return self.total_tokens / self.limit_tokens if self.limit_tokens > 0 else float("inf")

    def tokens_of(self, part_ids: Any) -> int:
        """Summed tokens of some parts of the view (by part id)."""
        ids = np.asarray(list(part_ids), dtype=np.int64)
        mask = np.isin(self.table.ints("part"), ids)
        return int(np.asarray(self.col("tokens"), dtype=np.int64)[mask].sum())

    def estimate(self, text: str) -> int:
        """Tokens of a text a stage is about to insert."""
        return int(self.estimator.count([text])[0])

    def estimate_all(self, texts: list[str]) -> list[int]:
        """`estimate` of several texts, in one call to the estimator."""
        return [int(n) for n in self.estimator.count(texts)] if texts else []

    def message_frame(self) -> pd.DataFrame:
        """One row per message in order: ``msg``, ``role``, ``turn``, first/last ``pos``,
        ``parts``, ``tokens``, ``kinds`` (set of kinds), ``part_ids`` (tuple)."""
        p = self.parts
        m = message_groups(p)
        first, rows = m.first_rows, m.rows
        turn = p["turn"]
        turns = turn.iloc[first].reset_index(drop=True) if not turn.isna().any() \
            else turn.groupby(p["msg"], sort=False).first().loc[m.msg].reset_index(drop=True)
        pos = p["pos"].to_numpy(dtype=np.float64)[rows]
        tokens = p["tokens"].to_numpy(dtype=np.int64)[rows]
        kind = labels(p, "kind")[rows].tolist()
        ids = p["part"].to_numpy(dtype=np.int64)[rows].tolist()
        spans = list(pairwise(m.start.tolist()))
        return pd.DataFrame({
            "msg": p["msg"].iloc[first].reset_index(drop=True),
            "role": p["role"].iloc[first].reset_index(drop=True), "turn": turns,
            "first_pos": np.fmin.reduceat(pos, m.start[:-1]) if len(pos) else pos,
            "last_pos": np.fmax.reduceat(pos, m.start[:-1]) if len(pos) else pos,
            "parts": np.diff(m.start), "tokens": np.add.reduceat(tokens, m.start[:-1])
            if len(tokens) else tokens,
            "kinds": pd.Series([frozenset(kind[a:b]) for a, b in spans],
                               dtype=object if spans else p["kind"].dtype),
            "part_ids": pd.Series([tuple(ids[a:b]) for a, b in spans],
                                  dtype=object if spans else p["part"].dtype),
        })


@dataclass(frozen=True, slots=True, kw_only=True)
class NewPart:
    """A part an edit inserts: a placeholder, a summary, a truncation marker...

    Attributes:
        content: the text the model will see.
        kind: ``tool_result`` for a placeholder that replaces a tool result (with its
            ``tool_call_id``: a ``marker`` there leaves the call unanswered), ``marker``
            for other placeholders and truncation notices, ``summary`` for summaries.
        role: the speaker.
        anchor: the part id it is placed next to (in the full session, hidden or not).
        side: ``"after"`` or ``"before"`` the anchor.
        join_message: True: part of the anchor's message (a placeholder in place of a
            tool result keeps the message well-formed); False: a message of its own.
        tool_name, tool_call_id, file_path: linkage, as for original parts.
        meta: what the stage wants recorded about it.
    """

    content: str
    kind: Kind
    role: Role
    anchor: int
    side: Side = "after"
    join_message: bool = False
    tool_name: str | None = None
    tool_call_id: str | None = None
    file_path: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Edit:
    """What a stage wants done to the request.

    Attributes:
        stage: the stage's name.
        reason: one line, for the ledger (``"pruned 14 tool results older than the 40k
            protected window"``).
        hide: ids of visible parts to hide.
        insert: parts to insert.
        details: numbers the stage reports (files deduplicated, messages removed...).
        summarizer_calls: summaries requested from a summarizer, with their token counts.
        failure: when the stage could not do its work because a backend failed, the kind
            of failure (`ctxlab.summarizers.base.ErrorKind`: ``"timeout"``, ``"overflow"``...);
            the edit is then empty and ``reason`` says what happened.
    """

    stage: str
    reason: str
    hide: tuple[int, ...] = ()
    insert: tuple[NewPart, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    summarizer_calls: tuple[Mapping[str, Any], ...] = ()
    failure: str | None = None

    @property
    def empty(self) -> bool:
        return not self.hide and not self.insert


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """Base of every stage: a frozen dataclass of parameters with a `plan` method.

    Subclasses set the class attribute ``name`` (the registry key) and ``source``
    (which seed the behaviour comes from), declare their parameters as fields with the
    seed's defaults, and implement `plan`.
    """

    name: ClassVar[str] = ""
    source: ClassVar[str] = ""

    def plan(self, view: View) -> Edit | None:
        """The edit this stage makes to ``view``, or None when it does nothing."""
        raise NotImplementedError(f"{type(self).__name__} must implement plan(view)")

    def candidates(self, table: Table) -> np.ndarray | None:
        """The rows of ``table`` whose arrival could make this stage act (bool per row),
        or None when the stage cannot tell (the default).

        A stage that answers promises: when `plan` made no edit on a request (no event,
        no failure, no summarizer call), it makes none, with the same reason, on that
        request with rows added anywhere and none removed, if no added row is a
        candidate and the window, limit and target are the same. The answer may read
        only the part columns of each row (not ``tokens`` or ``layer``). A replay uses
        it to skip such a stage between calls when it runs on every request
        (``Pipeline.always``): ``ai-agent``'s cut of big tool outputs, for instance,
        has nothing to do at a call that brought none.
        """
        return None

    def params(self) -> dict[str, Any]:
        """The stage's parameters, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.name}({args})"
