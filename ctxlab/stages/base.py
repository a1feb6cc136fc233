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
from ctxlab.tokens.base import Estimator

Side = Literal["before", "after"]


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """The request of one call, as a stage sees it.

    Attributes:
        parts: the visible parts of the request in position order: the part columns of
            `ctxlab.schema.PART_COLUMNS` plus ``tokens`` (int64, this estimator's count,
            with flat image costs) and ``layer`` (see `ctxlab.layers`).
        estimator: the estimator that counted ``tokens``; stages estimate new text with it.
        window_tokens: the model's context window.
        limit_tokens: the input budget the trigger compares against (e.g. seed 000's
            available input tokens, or seed 003's ``autoCompactThreshold``).
        target_tokens: what the pipeline tries to get under.
        overhead_tokens: unrecorded input (system prompt, tool schemas) the log lacks.
        session: the session id.
        call: the call whose request this is (None: a request being assembled).
    """

    parts: pd.DataFrame
    estimator: Estimator
    window_tokens: int
    limit_tokens: int
    target_tokens: int
    overhead_tokens: int = 0
    session: str = ""
    call: int | None = None

    @property
    def messages(self) -> int:
        """Distinct messages in the request."""
        msg = self.parts["msg"]
        if msg.hasnans:
            return int(msg.nunique())
        return len(np.unique(msg.to_numpy(dtype=np.int64)))

    @property
    def content_tokens(self) -> int:
        """Tokens of the parts alone (no framing, no overhead)."""
        return int(self.parts["tokens"].sum())

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
        mask = self.parts["part"].isin(ids).to_numpy()
        return int(self.parts["tokens"].to_numpy()[mask].sum())

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


def strings(parts: pd.DataFrame, column: str) -> np.ndarray:
    """A text column as an object array, NA as None (the fast path for Arrow strings)."""
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return values.__arrow_array__().to_numpy(zero_copy_only=False)
    return parts[column].to_numpy(dtype=object, na_value=None)


def labels(parts: pd.DataFrame, column: str) -> np.ndarray:
    """A text column that is never NA in a valid part frame (``role``, ``kind``, ``layer``,
    ``content``) as an object array: `strings` without its pass over the values for NA."""
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return values.__arrow_array__().to_numpy(zero_copy_only=False)
    return parts[column].to_numpy(dtype=object)


def equals(parts: pd.DataFrame, column: str, value: str) -> np.ndarray:
    """Boolean array: where a text column equals ``value`` (NA never does)."""
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return pc.fill_null(pc.equal(values.__arrow_array__(), value), False).to_numpy(
            zero_copy_only=False)
    return strings(parts, column) == value


def is_na(parts: pd.DataFrame, column: str) -> np.ndarray:
    """Boolean array: where a column is NA."""
    return np.asarray(parts[column].array.isna(), dtype=bool)


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


def part_rows(parts: pd.DataFrame, rows: np.ndarray, columns: tuple[str, ...]) -> list[Any]:
    """The parts at row positions ``rows`` as named tuples of some columns (NA as None),
    converting only those cells (``itertuples`` converts every cell of every column)."""
    row_type = _ROW_TYPES.get(columns)
    if row_type is None:
        row_type = _ROW_TYPES.setdefault(columns, namedtuple("PartRow", columns))  # noqa: PYI024
    cells = []
    for c in columns:
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


def message_groups(parts: pd.DataFrame, rows: np.ndarray | None = None) -> Messages:
    """Group the rows of a part frame (or only the rows at positions ``rows``, then numbered
    0, 1, ... in that order) by ``msg``, messages in request order (see `Messages`).

    Example:
        >>> m = message_groups(pd.DataFrame({"msg": [7, 3, 7, 5], "pos": [2.0, 1.0, 4.0, 3.0]}))
        >>> m.msg.tolist(), m.of_row.tolist(), m.rows.tolist(), m.start.tolist()
        ([3, 7, 5], [1, 0, 1, 2], [1, 0, 2, 3], [0, 1, 3, 4])
    """
    msg = parts["msg"].to_numpy(dtype=np.int64)
    pos = parts["pos"].to_numpy(dtype=np.float64) if len(msg) else np.zeros(0)
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
