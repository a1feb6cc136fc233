"""A request's parts as NumPy columns: what the engine moves between stages.

A replay builds a request at every call and edits it at every compaction. Held as a
DataFrame, each of those steps costs a take, concat or column set per column (the
part frame's Arrow strings and nullable integers are ~20 separate blocks, and taking
an Arrow string column copies its text). `Table` holds the same rows as one NumPy
array per column instead: text as object arrays (None for NA), integers as int64
(float64 with NaN when a nullable column has NA), other columns as their pandas
arrays. Taking rows copies pointers, never text. `Table.frame` gives the DataFrame,
with the original dtypes, built once and only when someone asks for it.

Columns are read-only: stages get the arrays themselves, not copies.

A table also keeps *derived* per-row arrays (`Table.derived`): values that a row-local
function computes from a row's own cells (UTF-8 sizes of a text, codes of a label). Takes
and concats carry them, and a concat computes them only for the rows that lack them, so
an always-on stage that looks at every part of every request pays only for the parts
that are new since the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd


def _column(series: pd.Series) -> Any:
    """One column as the array a `Table` holds (see the module docstring)."""
    dtype = series.dtype
    values = series.array
    if isinstance(dtype, pd.StringDtype) or _is_object(dtype):
        if isinstance(values, pd.arrays.ArrowExtensionArray):
            out = values.__arrow_array__().to_numpy(zero_copy_only=False)
        else:
            out = series.to_numpy(dtype=object, na_value=None)
        return out.astype(object, copy=False)
    if isinstance(dtype, pd.Int64Dtype):
        if values.isna().any():
            return series.to_numpy(dtype=np.float64, na_value=np.nan)
        return series.to_numpy(dtype=np.int64)
    if isinstance(dtype, np.dtype) and dtype.kind in "ifb":
        return series.to_numpy()
    if isinstance(dtype, pd.DatetimeTZDtype):     # UTC datetime64 (NaT for NA)
        return np.asarray(values.tz_convert("UTC").tz_localize(None))
    return values


def _owned(value: Any) -> Any:
    """A NumPy column this table may make read-only (a copy when it is a view of other
    data, e.g. a DataFrame's block)."""
    if isinstance(value, np.ndarray) and value.base is not None:
        return value.copy()
    return value


class Table:
    """Columns of equal length (see the module docstring).

    Attributes:
        cols: column name -> array, in frame column order.
        dtypes: column name -> the pandas dtype `frame` gives it.

    Example:
        >>> df = pd.DataFrame({"part": pd.array([1, 2, 3], dtype="Int64"),
        ...                    "kind": pd.array(["text", None, "image"], dtype="string")})
        >>> t = Table.from_frame(df)
        >>> t.col("kind").tolist(), t.take([2, 0]).col("part").tolist()
        (['text', None, 'image'], [3, 1])
        >>> t.take([0, 1]).frame().equals(df.iloc[[0, 1]])
        True
    """

    __slots__ = ("cols", "dtypes", "n", "_frame", "_derived", "_bufs")

    def __init__(self, cols: Mapping[str, Any], dtypes: Mapping[str, Any], n: int,
                 frame: pd.DataFrame | None = None, *, fresh: bool = False) -> None:
        # fresh: every array was made for this table (takes, concats): no copy needed
        self.cols = dict(cols) if fresh else {k: _owned(v) for k, v in cols.items()}
        self.dtypes = dict(dtypes)
        self.n = n
        self._frame = frame
        self._derived: dict[str, Derived] = {}
        self._bufs: dict[str, Buffer] = {}      # columns that are views of growable buffers

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> Table:
        """The table of a frame (which it keeps as its `frame` when the index is 0..n-1)."""
        keep = df if isinstance(df.index, pd.RangeIndex) and df.index.start == 0 \
            and df.index.step == 1 else None
        return cls({c: _column(df[c]) for c in df.columns},
                   {c: df[c].dtype for c in df.columns}, len(df), keep)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, name: object) -> bool:
        return name in self.cols

    @property
    def columns(self) -> list[str]:
        return list(self.cols)

    @property
    def empty(self) -> bool:
        return self.n == 0

    def col(self, name: str) -> Any:
        """One column's array (read-only: stages get the array itself, not a copy)."""
        try:
            v = self.cols[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; columns: {', '.join(self.cols)}") from None
        if isinstance(v, np.ndarray) and v.flags.writeable:
            v.flags.writeable = False
        return v

    def isna(self, name: str) -> np.ndarray:
        """Where a column is NA."""
        v = self.col(name)
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                return np.fromiter((x is None for x in v), dtype=bool, count=len(v))
            if v.dtype.kind == "f":
                return np.isnan(v)
            if v.dtype.kind == "M":
                return np.isnat(v)
            return np.zeros(len(v), dtype=bool)
        return np.asarray(v.isna(), dtype=bool)

    def ints(self, name: str, na: int = 0) -> np.ndarray:
        """An integer column as int64, NA as ``na``."""
        v = self.col(name)
        if isinstance(v, np.ndarray) and v.dtype.kind == "i":
            return v
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            return np.where(np.isnan(v), na, v).astype(np.int64)
        return pd.array(v, dtype="Int64").to_numpy(dtype=np.int64, na_value=na)

    def derived(self, key: str, columns: tuple[str, ...],
                fn: Callable[[Table], np.ndarray]) -> np.ndarray:
        """A per-row array ``fn(self)``, computed once and kept with the rows.

        ``fn`` must be row-local: a row's value depends on that row's cells of
        ``columns`` alone (takes and concats carry the array; a concat calls ``fn`` on
        the rows that lack it; setting one of ``columns`` drops it). Read-only.

        Example:
            >>> t = Table.from_frame(pd.DataFrame({"content": ["ab", "xyz"]}))
            >>> size = lambda tb: np.array([len(x) for x in tb.col("content")])
            >>> t.derived("len", ("content",), size).tolist()
            [2, 3]
            >>> concat(t.take([1]), t).derived("len", ("content",), size).tolist()
            [3, 2, 3]
        """
        got = self._derived.get(key)
        if got is None:
            values = np.asarray(fn(self))
            values.flags.writeable = False
            got = self._derived[key] = Derived(fn, columns, values)
        return got.values

    def derive_like(self, other: Table) -> None:
        """Compute the derived arrays of ``other`` that this table lacks (of columns it
        has), for all its rows at once: rows taken from it then carry them.

        Example:
            >>> t = Table.from_frame(pd.DataFrame({"content": ["ab", "xyz", "q"]}))
            >>> size = lambda tb: np.array([len(x) for x in tb.col("content")])
            >>> few = t.take([1])
            >>> few.derived("len", ("content",), size).tolist()
            [3]
            >>> t.derive_like(few)          # computed here for every row, then carried
            >>> t.take([2, 0]).derived("len", ("content",), lambda tb: 1 / 0).tolist()
            [1, 2]
        """
        for k, d in other._derived.items():
            if k not in self._derived and all(c in self.cols for c in d.columns):
                self.derived(k, d.columns, d.fn)

    def take(self, rows: Any, columns: tuple[str, ...] | None = None) -> Table:
        """The rows at some positions, in that order (only ``columns`` of them, those
        present, when given; derived arrays of those columns alone go with them)."""
        rows = np.asarray(rows, dtype=np.int64)
        names = self.cols if columns is None else [c for c in columns if c in self.cols]
        cols = self.cols
        out = Table({k: cols[k][rows] if isinstance(cols[k], np.ndarray)
                     else cols[k].take(rows) for k in names},
                    {k: self.dtypes[k] for k in names}, len(rows), fresh=True)
        out._derived = {k: d.taken(rows) for k, d in self._derived.items()
                        if columns is None or set(d.columns).issubset(columns)}
        return out

    def with_columns(self, **columns: tuple[Any, Any]) -> Table:
        """A table with columns set (name=(array, dtype)); new ones go last."""
        cols, dtypes = dict(self.cols), dict(self.dtypes)
        for k, (v, dtype) in columns.items():
            cols[k], dtypes[k] = _owned(v), dtype
        out = Table(cols, dtypes, self.n, fresh=True)
        out._derived = {k: d for k, d in self._derived.items()
                        if not set(d.columns) & set(columns)}
        out._bufs = {k: b for k, b in self._bufs.items() if k not in columns}
        return out

    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame with the original dtypes (built once)."""
        if self._frame is None:
            self._frame = pd.DataFrame(
                {k: _series(v, self.dtypes[k]) for k, v in self.cols.items()},
                index=pd.RangeIndex(self.n))
        return self._frame


class Derived:
    """One derived array of a `Table` (see `Table.derived`)."""

    __slots__ = ("fn", "columns", "values")

    def __init__(self, fn: Callable[[Table], np.ndarray], columns: tuple[str, ...],
                 values: np.ndarray) -> None:
        self.fn, self.columns, self.values = fn, columns, values

    def taken(self, rows: np.ndarray) -> Derived:
        values = self.values[rows]
        values.flags.writeable = False
        return Derived(self.fn, self.columns, values)


def concat(a: Table, b: Table) -> Table:
    """The rows of ``a`` then those of ``b`` (the columns of ``a``; ``b`` must have them)."""
    out = Table({k: _joined(v, b.col(k)) for k, v in a.cols.items()}, a.dtypes, a.n + b.n,
                fresh=True)
    _join_derived(a, b, out)
    return out


def _joined(v: Any, w: Any) -> Any:
    """One column of ``a`` then the same of ``b``."""
    if isinstance(v, np.ndarray) and isinstance(w, np.ndarray):
        return np.concatenate([v, w]) if v.dtype == w.dtype or v.dtype == object \
            or w.dtype == object else np.concatenate([v.astype(np.float64),
                                                      w.astype(np.float64)])
    return type(_as_array(v))._concat_same_type([_as_array(v), _as_array(w)])


def _join_derived(a: Table, b: Table, out: Table) -> None:
    for k, d in a._derived.items():
        values = np.concatenate([d.values, b.derived(k, d.columns, d.fn)])
        values.flags.writeable = False
        out._derived[k] = Derived(d.fn, d.columns, values)


class Buffer:
    """A growable column: a table's column is ``data[:n]``, and `append` writes past
    ``n`` in place, for the table whose length is ``n`` (the newest one) only."""

    __slots__ = ("data", "n")

    def __init__(self, dtype: Any, n: int) -> None:
        self.data = np.empty(max(2 * n, 64), dtype=dtype)   # room to double
        self.n = n


def append(a: Table, b: Table) -> Table:
    """`concat` for a table that grows by a few rows at a time (a replay's request at every
    call): NumPy columns live in buffers of spare capacity, so the rows of ``a`` are not
    copied again; a column whose dtype would change, or a buffer another table already
    extended, is copied as `concat` does.

    Example:
        >>> t = Table.from_frame(pd.DataFrame({"x": [1, 2]}))
        >>> u = append(append(t, t), t.take([0]))
        >>> u.col("x").tolist(), append(t, t.take([1])).col("x").tolist()
        ([1, 2, 1, 2, 1], [1, 2, 2])
    """
    n = a.n + b.n
    cols: dict[str, Any] = {}
    bufs: dict[str, Buffer] = {}
    for k, v in a.cols.items():
        w = b.cols[k] if k in b.cols else b.col(k)
        if not (isinstance(v, np.ndarray) and isinstance(w, np.ndarray) and v.ndim == 1
                and (w.dtype == v.dtype or v.dtype == object)):
            cols[k] = _joined(v, w)
            continue
        buf = a._bufs.get(k)
        if buf is None or buf.n != a.n or n > len(buf.data):
            buf = Buffer(v.dtype, n)
            buf.data[:a.n] = v
        buf.data[a.n:n] = w
        buf.n = n
        bufs[k] = buf
        cols[k] = buf.data[:n]
    out = Table(cols, a.dtypes, n, fresh=True)
    out._bufs = bufs
    _join_derived(a, b, out)
    return out


def concat_all(tables: list[Table]) -> Table:
    """The rows of several tables with the same columns, in order (one copy per column;
    derived arrays are not carried).

    Example:
        >>> t = Table.from_frame(pd.DataFrame({"x": [1, 2]}))
        >>> concat_all([t, t.take([1]), t]).col("x").tolist()
        [1, 2, 2, 1, 2]
    """
    first = tables[0]
    cols = {}
    for k, v in first.cols.items():
        parts = [t.col(k) for t in tables]
        if all(isinstance(x, np.ndarray) for x in parts):
            cols[k] = np.concatenate(parts)      # int with float gives float; object stays
        else:
            arrays = [_as_array(x) for x in parts]
            cols[k] = type(arrays[0])._concat_same_type(arrays)
    return Table(cols, first.dtypes, sum(t.n for t in tables), fresh=True)


def interleave(a: Table, a_rows: np.ndarray, b: Table, b_rows: np.ndarray,
               from_b: np.ndarray) -> Table:
    """Rows of ``a`` and ``b`` in one pass: output row i is ``b``'s row ``b_rows[j]`` where
    ``from_b[i]`` (the j-th such row), else ``a``'s row ``a_rows[k]`` (the k-th other):
    ``concat(a, b).take(...)`` without building the concatenation (columns of ``a``).

    Example:
        >>> a = Table.from_frame(pd.DataFrame({"x": [1, 2, 3]}))
        >>> b = Table.from_frame(pd.DataFrame({"x": [9]}))
        >>> take = interleave(a, np.array([0, 2]), b, np.array([0]), np.array([False, True,
        ...                                                                     False]))
        >>> take.col("x").tolist()
        [1, 9, 3]
    """
    n = len(from_b)
    from_a = ~from_b
    bufs: dict[str, Buffer] = {}

    def merged(v: Any, w: Any, name: str | None = None) -> Any:
        if not (isinstance(v, np.ndarray) and isinstance(w, np.ndarray)):
            both = type(_as_array(v))._concat_same_type([_as_array(v).take(a_rows),
                                                         _as_array(w).take(b_rows)])
            order = np.empty(n, dtype=np.int64)
            order[from_a] = np.arange(len(a_rows))
            order[from_b] = len(a_rows) + np.arange(len(b_rows))
            return both.take(order)
        out = _room(v, w, n, name, bufs)
        out[from_a] = v[a_rows]
        out[from_b] = w[b_rows]
        return out

    return _combined(a, b, n, merged, bufs)


def _room(v: np.ndarray, w: np.ndarray, n: int, name: str | None,
          bufs: dict[str, Buffer]) -> np.ndarray:
    """An empty array of ``n`` rows for the values of ``v`` and ``w``: a column's (``name``)
    in a new buffer, recorded in ``bufs``, with room for the next request to `append`."""
    dtype = _common_dtype(v, w)
    if name is not None and v.ndim == 1:
        buf = bufs[name] = Buffer(dtype, n)
        return buf.data[:n]
    return np.empty((n, *v.shape[1:]), dtype=dtype)


def _common_dtype(v: np.ndarray, w: np.ndarray) -> np.dtype:
    """The dtype holding the values of both arrays (object, or float for mixed numbers)."""
    return v.dtype if v.dtype == w.dtype or v.dtype == object else \
        (w.dtype if w.dtype == object else np.dtype(np.float64))


def _combined(a: Table, b: Table, n: int, column: Callable[..., Any],
              bufs: dict[str, Buffer], kept: set[str] | None = None) -> Table:
    """A table of ``n`` rows with ``a``'s columns and derived arrays, each made by
    ``column(a's array, b's array, name)`` (name None for a derived array); a derived
    array whose columns are all in ``kept`` (given back by ``column`` unchanged, as
    ``column`` fills it) is ``a``'s own."""
    out = Table({k: column(v, b.cols[k] if k in b.cols else b.col(k), k)
                 for k, v in a.cols.items()}, a.dtypes, n, fresh=True)
    out._bufs = bufs
    for k, d in a._derived.items():
        if kept is not None and kept.issuperset(d.columns):
            out._derived[k] = d
            continue
        values = column(d.values, b.derived(k, d.columns, d.fn))
        values.flags.writeable = False
        out._derived[k] = Derived(d.fn, d.columns, values)
    return out


def replaced(a: Table, rows: np.ndarray, b: Table) -> Table:
    """``a`` with its rows ``rows`` (ascending) replaced by the rows of ``b``, in order:
    `interleave` when each new row takes the place of an old one (placeholders, cut
    tool outputs). A column whose values there do not change is shared with ``a``, with
    its buffer (the first table to `append` to it extends it, the other copies); the
    others are copied once. So is a derived array whose columns all stay (a row's
    derived value depends on its own cells alone).

    Example:
        >>> a = Table.from_frame(pd.DataFrame({"x": [1, 2, 3]}))
        >>> b = Table.from_frame(pd.DataFrame({"x": [9]}))
        >>> replaced(a, np.array([1]), b).col("x").tolist(), a.col("x").tolist()
        ([1, 9, 3], [1, 2, 3])
    """
    n = a.n
    bufs: dict[str, Buffer] = {}
    kept: set[str] = set()
    one = int(rows[0]) if len(rows) == 1 else None      # (most edits replace one row)

    def put(v: Any, w: Any, name: str | None = None) -> Any:
        if not (isinstance(v, np.ndarray) and isinstance(w, np.ndarray)):
            out = _as_array(v).copy()
            out[rows] = _as_array(w)
            return out
        if v.dtype == w.dtype and (_same_value(v, one, w) if one is not None and v.ndim == 1
                                   else _same_values(v[rows], w)):
            if name is not None:
                kept.add(name)
                if name in a._bufs:
                    bufs[name] = a._bufs[name]
            return v
        out = _room(v, w, n, name, bufs)
        out[:] = v
        out[rows] = w
        return out

    return _combined(a, b, n, put, bufs, kept)


def _same_value(v: np.ndarray, row: int, w: np.ndarray) -> bool:
    """`_same_values` of ``v[row]`` and the one value of ``w`` (``v[row:row + 1]``, compared
    without building arrays for the common dtypes)."""
    kind = v.dtype.kind
    if kind in "iub":
        return bool(v[row] == w[0])
    if kind == "O":
        x, y = v[row], w[0]
        return x is y or bool(_equal_objects(x, y))
    if kind == "f":
        x, y = float(v[row]), float(w[0])
        return x == y or (x != x and y != y)
    return _same_values(v[row:row + 1], w)


def _equal_objects(x: Any, y: Any) -> bool:
    """Two cells of object columns hold the same value (`_same_values`' rule for one)."""
    try:
        if x == y:
            return True
    except (TypeError, ValueError):
        pass
    return (x == y) is True or (x != x and y != y)


def _same_values(v: np.ndarray, w: np.ndarray) -> bool:
    """Two arrays of one dtype (the few rows an edit replaces) hold the same values,
    compared as Python objects: NA equals NA (NaT becomes None, NaN is the one value not
    equal to itself)."""
    if v.dtype.kind in "iub":
        return bool(np.array_equal(v, w))
    xs, ys = v.tolist(), w.tolist()
    try:
        if xs == ys:            # identity, then ==, element by element
            return True
    except (TypeError, ValueError):     # a value whose == is no bool (pd.NA, arrays)
        pass
    return all(x is y or (x == y) is True or (x != x and y != y) for x, y in zip(xs, ys))


def from_columns(values: Mapping[str, list[Any]], dtypes: Mapping[str, Any]) -> Table:
    """A table from lists of Python values (None for NA), one per column of ``dtypes``."""
    n = len(next(iter(values.values()))) if values else 0
    cols: dict[str, Any] = {}
    for k, dtype in dtypes.items():
        v = values[k]
        if isinstance(dtype, pd.StringDtype) or _is_object(dtype):
            arr = np.empty(n, dtype=object)
            arr[:] = v
            cols[k] = arr
        elif isinstance(dtype, pd.Int64Dtype):
            cols[k] = np.array([np.nan if x is None else x for x in v], dtype=np.float64) \
                if any(x is None for x in v) else np.array(v, dtype=np.int64)
        elif isinstance(dtype, np.dtype) and dtype.kind in "ifb":
            cols[k] = np.array(v, dtype=dtype)
        elif isinstance(dtype, pd.DatetimeTZDtype):
            unit = f"datetime64[{dtype.unit}]"
            cols[k] = np.full(n, np.datetime64("NaT"), dtype=unit) \
                if all(x is None for x in v) else _column(pd.Series(pd.array(v, dtype=dtype)))
        else:
            cols[k] = pd.array(v, dtype=dtype)
    return Table(cols, dtypes, n, fresh=True)


def _is_object(dtype: Any) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind == "O"


def _as_array(v: Any) -> Any:
    return v if not isinstance(v, np.ndarray) else pd.array(v)


def _series(v: Any, dtype: Any) -> Any:
    if isinstance(v, np.ndarray):
        if isinstance(dtype, np.dtype) and v.dtype == dtype:
            return v
        if isinstance(dtype, pd.DatetimeTZDtype):
            return pd.Series(v).dt.tz_localize("UTC").dt.tz_convert(dtype.tz).array
        return pd.array(v, dtype=dtype)
    return v
