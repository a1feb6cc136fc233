"""Guards for recorded numbers and timestamps that typed columns cannot hold.

A token count too large for ``Int64`` (or ``Infinity``) and a timestamp pandas cannot
represent would break the frame builders; `count` and `timestamp` turn them into
``None``. (Lone UTF-16 surrogates are cleaned where JSON is parsed:
`ctxlab.loaders.records.parse_json`.)
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any

from ctxlab.loaders.records import as_int, ts_iso

_YEAR = re.compile(r"\s*(\d{4})-\d")
MAX_COUNT = 2 ** 53


def count(value: Any) -> int | None:
    """A token count, or None when absent, not a finite number, negative, or out of range.

    A value given that is not a count is remembered (per thread) until
    `refused_counts` takes it: the session builder reports it in the load report at the
    call it belonged to, so no count is left empty silently.

    Example:
        >>> count(12), count(1e300), count("7"), count(None), count(-5)
        (12, None, None, None, None)
        >>> refused_counts()
        [1e+300, '7', -5]
    """
    if isinstance(value, float) and not math.isfinite(value):
        n = None
    else:
        n = as_int(value)
        n = n if n is not None and 0 <= n < MAX_COUNT else None
    if n is None and value is not None:
        _refused().append(value)
    return n


_STATE = threading.local()


def _refused() -> list[Any]:
    if not hasattr(_STATE, "refused"):
        _STATE.refused = []
    return _STATE.refused


def refused_counts() -> list[Any]:
    """The values `count` refused in this thread since the last call (then forgotten)."""
    got = _refused()
    out = list(got)
    got.clear()
    return out


def recorded_time(value: Any) -> str | None:
    """A recorded timestamp as the text the session builder stores: ISO text as given,
    epoch seconds or milliseconds converted; None when absent. A value that is no time at
    all stays as its text: the frame builder cannot parse it, and the session builder
    reports it (`ctxlab.loaders.builder.assemble`), rather than leaving it empty unsaid.

    Example:
        >>> recorded_time(1700000000), recorded_time("yesterday"), recorded_time("")
        ('2023-11-14T22:13:20+00:00', 'yesterday', None)
        >>> recorded_time(1e30)
        '1e+30'
    """
    try:
        return ts_iso(value)
    except (ValueError, OverflowError, TypeError):
        return str(value)


def timestamp(value: Any) -> str | None:
    """An ISO-8601 timestamp, or None when it cannot be one in ``datetime64[ns]``.

    Example:
        >>> timestamp("2025-09-19T09:02:12.457Z"), timestamp("2426-04-23T17:11:38Z")
        ('2025-09-19T09:02:12.457Z', None)
    """
    try:
        text = ts_iso(value)
    except (ValueError, OverflowError, TypeError):
        return None
    m = _YEAR.match(text) if text is not None else None
    return text if m and 1678 <= int(m.group(1)) <= 2261 else None
