"""What a stage sees (`View`), what it returns (`Edit`), and the `Stage` base class.

A stage is a pure planner: given the request of one call — its visible parts in
position order with their token counts and layers, and the budget — it returns an
`Edit` (parts to hide, parts to insert, why) or None. It never changes the view
or the transcript; the engine (`ctxlab.history.apply_edit`) records the edit as an
event, so every stage application can be rewound.

Planners run at every compaction of a replay, so they work on NumPy arrays of the
view's columns, not row by row: `strings`, `labels`, `equals`, `is_na` and `one_of`
give column arrays and masks, `part_rows` converts only the rows an edit needs, and
`message_groups` groups rows by message (no ``groupby`` with Python callbacks).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from itertools import pairwise
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from ctxlab.schema import Kind, Role
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
                m = len(np.unique(msg[~t.isna("msg")] if msg.dtype.kind != "i" else msg))
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


Rows = pd.DataFrame | View | Table
"""What the column helpers read: a part frame, a view (its `Table`, no DataFrame built)
or a table."""


def table_of(parts: Rows) -> Table | None:
    """The table behind a view or table (None for a DataFrame)."""
    if isinstance(parts, View):
        return parts.table
    return parts if isinstance(parts, Table) else None


def strings(parts: Rows, column: str) -> np.ndarray:
    """A text column as an object array, NA as None (the fast path for Arrow strings)."""
    t = table_of(parts)
    if t is not None:
        return t.col(column)
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return values.__arrow_array__().to_numpy(zero_copy_only=False)
    return parts[column].to_numpy(dtype=object, na_value=None)


def labels(parts: Rows, column: str) -> np.ndarray:
    """A text column that is never NA in a valid part frame (``role``, ``kind``, ``layer``,
    ``content``) as an object array: `strings` without its pass over the values for NA."""
    t = table_of(parts)
    if t is not None:
        return t.col(column)
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return values.__arrow_array__().to_numpy(zero_copy_only=False)
    return parts[column].to_numpy(dtype=object)


def equals(parts: Rows, column: str, value: str) -> np.ndarray:
    """Boolean array: where a text column equals ``value`` (NA never does)."""
    t = table_of(parts)
    if t is not None:
        return np.asarray(t.col(column) == value, dtype=bool)
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return pc.fill_null(pc.equal(values.__arrow_array__(), value), False).to_numpy(
            zero_copy_only=False)
    return strings(parts, column) == value


def is_na(parts: Rows, column: str) -> np.ndarray:
    """Boolean array: where a column is NA."""
    t = table_of(parts)
    if t is not None:
        return t.isna(column)
    return np.asarray(parts[column].array.isna(), dtype=bool)


def ints(parts: Rows, column: str, na: int = 0) -> np.ndarray:
    """An integer column as int64, NA as ``na``."""
    t = table_of(parts)
    if t is not None:
        return t.ints(column, na)
    return parts[column].to_numpy(dtype=np.int64, na_value=na)


def floats(parts: Rows, column: str) -> np.ndarray:
    """A numeric column as float64 (NA as NaN)."""
    t = table_of(parts)
    if t is not None:
        return np.asarray(t.col(column), dtype=np.float64)
    return parts[column].to_numpy(dtype=np.float64, na_value=np.nan)


def text_lengths(parts: Rows, column: str = "content") -> np.ndarray:
    """Characters of every text of a column (NA: 0)."""
    values = strings(parts, column)
    return np.fromiter((0 if t is None else len(t) for t in values), dtype=np.int64,
                       count=len(values))


def count_rows(parts: Rows) -> int:
    """How many parts."""
    t = table_of(parts)
    return t.n if t is not None else len(parts)


def one_of(values: np.ndarray, options: Any) -> np.ndarray:
    """Boolean array: which of ``values`` (an object array, None for NA) are in ``options``
    (NA never is). Unlike `numpy.isin`, never sorts, so mixed None and text are fine."""
    options = [o for o in dict.fromkeys(options) if o is not None]
    if len(options) <= 8:
        out = np.zeros(len(values), dtype=bool)
        for o in options:
            out |= values == o
        return out
    allowed = frozenset(options)
    return np.fromiter((v in allowed for v in values), dtype=bool, count=len(values))


def optional_text(value: Any) -> str | None:
    """A column value as text, or None when it is NA."""
    return value if isinstance(value, str) else None


def part_rows(parts: Rows, rows: np.ndarray, columns: tuple[str, ...]) -> list[Any]:
    """The parts at row positions ``rows`` as named tuples of some columns (NA as None),
    converting only those cells (``itertuples`` converts every cell of every column)."""
    row_type = _ROW_TYPES.get(columns)
    if row_type is None:
        row_type = _ROW_TYPES.setdefault(columns, namedtuple("PartRow", columns))  # noqa: PYI024
    t = table_of(parts)
    cells = []
    for c in columns:
        if t is not None:
            v = t.col(c)
            if isinstance(t.dtypes.get(c), pd.Int64Dtype) and v.dtype.kind == "f":
                cells.append([None if x != x else int(x) for x in v[rows].tolist()])
            elif isinstance(v, np.ndarray):
                cells.append(v[rows].tolist())
            else:
                cells.append(v.take(np.asarray(rows, dtype=np.int64)).tolist())
            continue
        values = parts[c].array
        if isinstance(values, pd.arrays.ArrowExtensionArray):
            cells.append(values.__arrow_array__().take(rows).to_pylist())
        else:
            taken = parts[c].to_numpy(dtype=object)[rows]
            cells.append(np.where(pd.isna(taken), None, taken).tolist())
    return [row_type._make(values) for values in zip(*cells)]


_ROW_TYPES: dict[tuple[str, ...], Any] = {}


@dataclass(frozen=True, slots=True)
class Messages:
    """The messages of a part frame in request order: by their smallest ``pos``, ties by
    first appearance (what ``groupby("msg", sort=False)`` then a stable sort on the
    smallest position gives).

    Attributes:
        msg: the message id of each message, in order.
        of_row: for every row of the frame, the index of its message.
        rows: row positions grouped by message (messages in order, rows in frame order).
        start: offsets into ``rows``: message ``i`` is ``rows[start[i]:start[i + 1]]``.
    """

    msg: np.ndarray
    of_row: np.ndarray
    rows: np.ndarray
    start: np.ndarray

    def __len__(self) -> int:
        return len(self.msg)

    @property
    def first_rows(self) -> np.ndarray:
        """The first row (in frame order) of every message."""
        return self.rows[self.start[:-1]]

    @property
    def last_rows(self) -> np.ndarray:
        """The last row (in frame order) of every message."""
        return self.rows[self.start[1:] - 1]

    def any(self, row_mask: np.ndarray) -> np.ndarray:
        """Per message: whether any of its rows is set in ``row_mask``."""
        return np.bincount(self.of_row[row_mask], minlength=len(self.msg)) > 0

    def all(self, row_mask: np.ndarray) -> np.ndarray:
        """Per message: whether all of its rows are set in ``row_mask``."""
        return ~self.any(~row_mask)

    def rows_of(self, messages: np.ndarray) -> np.ndarray:
        """The rows of some messages (indices, ascending), message by message."""
        chosen = np.zeros(len(self.msg), dtype=bool)
        chosen[messages] = True
        return self.rows[chosen[self.of_row[self.rows]]]


def message_groups(parts: Rows, rows: np.ndarray | None = None) -> Messages:
    """Group the rows of a part frame (or only the rows at positions ``rows``, then numbered
    0, 1, ... in that order) by ``msg``, messages in request order (see `Messages`).

    Example:
        >>> m = message_groups(pd.DataFrame({"msg": [7, 3, 7, 5], "pos": [2.0, 1.0, 4.0, 3.0]}))
        >>> m.msg.tolist(), m.of_row.tolist(), m.rows.tolist(), m.start.tolist()
        ([3, 7, 5], [1, 0, 1, 2], [1, 0, 2, 3], [0, 1, 3, 4])
    """
    msg = ints(parts, "msg")
    pos = floats(parts, "pos") if len(msg) else np.zeros(0)
    if rows is not None:
        msg, pos = msg[rows], pos[rows]
    ids, first, inv = np.unique(msg, return_index=True, return_inverse=True)
    order = np.zeros(0, dtype=np.int64)
    if len(msg):
        grouped = np.argsort(inv, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(inv, minlength=len(ids)))[:-1]))
        low = np.fmin.reduceat(pos[grouped], bounds)
        order = np.lexsort((first, low))
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.arange(len(ids))
    of_row = rank[inv]
    rows = np.argsort(of_row, kind="stable")
    start = np.concatenate(([0], np.cumsum(np.bincount(of_row, minlength=len(ids)))))
    return Messages(msg=ids[order], of_row=of_row, rows=rows, start=start.astype(np.int64))


@dataclass(frozen=True, slots=True, kw_only=True)
class NewPart:
    """A part an edit inserts: a placeholder, a summary, a truncation marker...

    Attributes:
        content: the text the model will see.
        kind: ``marker`` for placeholders and truncation notices, ``summary`` for summaries.
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

    def params(self) -> dict[str, Any]:
        """The stage's parameters, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{self.name}({args})"
