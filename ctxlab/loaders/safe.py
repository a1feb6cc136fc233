"""Guards that keep corrupted or unusual input from crashing the frame builders.

Three things in otherwise valid JSON break pandas/pyarrow columns later:

* a lone UTF-16 surrogate written as an escape (``"\\ud83d"``, e.g. an emoji cut in
  half by a truncating writer) cannot be stored in a pyarrow string column;
* a number too large for ``Int64`` (or ``Infinity``) as a token count;
* a timestamp pandas cannot represent.

`clean` replaces lone surrogates with U+FFFD (everything else is kept unchanged);
`count` and `timestamp` turn unusable values into ``None``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ctxlab.loaders.records import as_int, ts_iso

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_YEAR = re.compile(r"\s*(\d{4})-\d")
MAX_COUNT = 2 ** 53


def may_hold_surrogates(path: Path) -> bool:
    """Whether the file contains a surrogate escape at all (cheap gate for `clean`)."""
    return _SURROGATE_ESCAPE.search(path.read_bytes()) is not None


def clean(value: Any) -> Any:
    """A copy of a parsed JSON value with lone surrogates replaced by U+FFFD.

    Example:
        >>> clean({"a": ["x\\ud83d"]})
        {'a': ['x\\ufffd']}
    """
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    return value


def count(value: Any) -> int | None:
    """A token count, or None when absent, not a finite number, or out of range.

    Example:
        >>> count(12), count(1e300), count("7"), count(None)
        (12, None, None, None)
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    n = as_int(value)
    return n if n is not None and abs(n) < MAX_COUNT else None


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
