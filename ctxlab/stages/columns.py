"""Column helpers for stage planners: read a request's columns as NumPy arrays.

Planners run at every compaction of a replay, so they work on arrays of the request's
columns, not row by row. Each helper takes a view (`ctxlab.stages.base.View`: its
`Table` is read, no DataFrame is built), a `Table` or a part DataFrame: `strings`,
`labels`, `equals`, `is_na`, `ints`, `floats` and `one_of` give column arrays and
masks (`codes` and `hashed`: per-row integers a table keeps with its rows, so `equals`
on ``role`` and ``kind`` compares small integers), `part_rows` converts only the rows
an edit needs, and `message_groups` groups rows by message (no ``groupby`` with Python
callbacks). `ctxlab.stages.base` re-exports them all.
"""

from __future__ import annotations

import threading
from collections import namedtuple
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from ctxlab.stages.table import Table

if TYPE_CHECKING:
    from ctxlab.stages.base import View

Rows = Union[pd.DataFrame, "View", Table]
"""What the column helpers read: a part frame, a view (its `Table`, no DataFrame built)
or a table."""


def table_of(parts: Rows) -> Table | None:
    """The table behind a view (`ctxlab.stages.base.View`) or table (None for a DataFrame)."""
    if isinstance(parts, Table):
        return parts
    table = getattr(parts, "table", None)
    return table if isinstance(table, Table) else None


def strings(parts: Rows, column: str) -> np.ndarray:
    """A text column as an object array, NA as None (the fast path for Arrow strings)."""
    return _texts(parts, column, na_as_none=True)


def labels(parts: Rows, column: str) -> np.ndarray:
    """A text column that is never NA in a valid part frame (``role``, ``kind``, ``layer``,
    ``content``) as an object array: `strings` without its pass over the values for NA."""
    return _texts(parts, column, na_as_none=False)


def _texts(parts: Rows, column: str, *, na_as_none: bool) -> np.ndarray:
    t = table_of(parts)
    if t is not None:
        return t.col(column)
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return values.__arrow_array__().to_numpy(zero_copy_only=False)
    if na_as_none:
        return parts[column].to_numpy(dtype=object, na_value=None)
    return parts[column].to_numpy(dtype=object)


def equals(parts: Rows, column: str, value: str) -> np.ndarray:
    """Boolean array: where a text column equals ``value`` (NA never does)."""
    t = table_of(parts)
    if t is not None:
        if column in _CODES:
            return codes(t, column) == _code(column, value)
        return np.asarray(t.col(column) == value, dtype=bool)
    values = parts[column].array
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        return pc.fill_null(pc.equal(values.__arrow_array__(), value), False).to_numpy(
            zero_copy_only=False)
    return strings(parts, column) == value


LABEL_COLUMNS = ("role", "kind")
"""The columns `codes` encodes: a handful of distinct values each."""

_CODES: dict[str, dict[Any, int]] = {c: {None: -1} for c in LABEL_COLUMNS}
_CODES_LOCK = threading.Lock()   # a Dask worker runs tasks in threads


def _code(column: str, value: Any) -> int:
    """The code of one value of a `LABEL_COLUMNS` column (new values get the next one)."""
    code = _CODES[column].get(value)
    if code is None:
        with _CODES_LOCK:
            code = _CODES[column].setdefault(value, len(_CODES[column]) - 1)
    return code


def codes(parts: Table, column: str) -> np.ndarray:
    """A ``role`` or ``kind`` column as int32 codes (NA: -1), the same value the same code
    in every table of the process; kept with the table's rows (`Table.derived`).

    Example:
        >>> t = Table.from_frame(pd.DataFrame({"kind": ["text", "tool_call", "text"]}))
        >>> c = codes(t, "kind")
        >>> bool(c[0] == c[2]), bool(c[0] == c[1]), equals(t, "kind", "text").tolist()
        (True, False, [True, False, True])
    """
    def encode(tb: Table) -> np.ndarray:
        values = tb.col(column)
        if len(values) <= 64:
            return np.fromiter((_code(column, v) for v in values), dtype=np.int32,
                               count=len(values))
        local, uniques = pd.factorize(values)      # a whole session: its few values once
        known = np.array([_code(column, u) for u in uniques] + [-1], dtype=np.int32)
        return known[local]                         # NA: local -1, the appended -1
    return parts.derived(f"codes:{column}", (column,), encode)


def hashed(parts: Table, column: str) -> np.ndarray:
    """A text column as int64 hashes (NA: -1, a value no string hashes to); equal
    texts, equal hashes (within a process). Kept with the table's rows (`Table.derived`)."""
    def encode(tb: Table) -> np.ndarray:
        values = tb.col(column)
        return np.fromiter((-1 if v is None else hash(v) for v in values), dtype=np.int64,
                           count=len(values))
    return parts.derived(f"hash:{column}", (column,), encode)


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
    """Boolean array: which of ``values`` (an object array, None for NA, or a numeric one)
    are in ``options`` (NA never is). Unlike `numpy.isin`, never sorts object values, so
    mixed None and text are fine; a few options are compared one by one (faster)."""
    options = [o for o in dict.fromkeys(options) if o is not None]
    if len(options) <= 8:
        out = np.zeros(len(values), dtype=bool)
        for o in options:
            out |= values == o
        return out
    if values.dtype != object:
        return np.isin(values, np.asarray(options, dtype=values.dtype))
    allowed = frozenset(options)
    return np.fromiter((v in allowed for v in values), dtype=bool, count=len(values))


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a numeric array, sorted (`numpy.unique`, by sorting: for
    integers NumPy 2 otherwise hashes, which is several times slower on short arrays).

    Example:
        >>> distinct(np.array([3, 1, 3, 2])).tolist()
        [1, 2, 3]
    """
    s = np.sort(values)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) else s


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
