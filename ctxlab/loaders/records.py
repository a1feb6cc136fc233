"""Reading input records and accounting for every one of them.

`RecordLog` is the load report under construction: each record read is marked
used, ignored (a known record the model never saw) or skipped (a problem), with
its file, line and reason. In strict mode a skip raises `LoadError` instead.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from ctxlab.errors import LoadError
from ctxlab.schema import REPORT_COLUMNS, LoadReport, coerce


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadOptions:
    """Options every loader accepts.

    Attributes:
        strict: raise `LoadError` at the first record that cannot be used.
        sidechains: also load sub-agent conversations (as sessions of their own).
    """

    strict: bool = False
    sidechains: bool = False


class RecordLog:
    """Collects one report row per input record."""

    def __init__(self, path: Path | str, *, strict: bool = False) -> None:
        self.file = str(path)
        self.strict = strict
        self._rows: dict[str, list[Any]] = {c.name: [] for c in REPORT_COLUMNS}
        self.bytes_checked = False      # `read_text` reported the file's bytes (once)

    def _add(self, line: int | None, where: str | None, record: str, status: str,
             parts: int, reason: str | None) -> None:
        r = self._rows
        r["file"].append(self.file)
        r["line"].append(line)
        r["where"].append(where if where is not None else f"line {line}")
        r["record"].append(record)
        r["status"].append(status)
        r["parts"].append(parts)
        r["reason"].append(reason)

    def used(self, record: str, *, line: int | None = None, where: str | None = None,
             parts: int = 0, note: str | None = None) -> None:
        """The record became parts, calls, events or transcript metadata (``note``: what
        it became, when that needs saying)."""
        self._add(line, where, record, "used", parts, note)

    def ignored(self, record: str, reason: str, *, line: int | None = None,
                where: str | None = None) -> None:
        """A known record that is not model input (UI bookkeeping, progress...)."""
        self._add(line, where, record, "ignored", 0, reason)

    def skipped(self, record: str, reason: str, *, line: int | None = None,
                where: str | None = None) -> None:
        """A record that could not be used; raises `LoadError` in strict mode."""
        if self.strict:
            raise LoadError(f"{reason} (record type {record!r}); load without strict (drop "
                            f"--strict on the command line) to "
                            f"skip it and list it in the load report",
                            path=self.file, line=line, where=where)
        self._add(line, where, record, "skipped", 0, reason)

    def mark(self) -> int:
        """How many rows the report has: `rollback` to it forgets the rows added since."""
        return len(self._rows["file"])

    def rollback(self, mark: int) -> None:
        """Forget the rows added since `mark` (a record that failed after some of its
        pieces were reported: the record's own entry says what became of them)."""
        for col in self._rows.values():
            del col[mark:]

    def skipped_lines(self) -> list[int]:
        """The lines reported as skipped so far, ascending."""
        r = self._rows
        return sorted(line for line, status in zip(r["line"], r["status"])
                      if status == "skipped" and line is not None)

    def location(self, line: int | None = None, where: str | None = None) -> str:
        """``file:line`` or ``file#where``, for the ``source`` column."""
        if line is not None:
            return f"{self.file}:{line}"
        return f"{self.file}#{where}" if where else self.file

    def report(self) -> LoadReport:
        return LoadReport(records=coerce(self._rows, REPORT_COLUMNS))

    def error(self, reason: str, *, line: int | None = None, where: str | None = None) -> LoadError:
        """A `LoadError` for this file (for problems that stop the whole file)."""
        return LoadError(reason, path=self.file, line=line, where=where)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(value: Any) -> Any:
    """A copy of a parsed JSON value with lone UTF-16 surrogates replaced by U+FFFD.

    A surrogate escape such as ``"\\ud83d"`` (an emoji cut in half by a truncating
    writer) parses to a string no Arrow column can store; everything else is kept.

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


def parse_json(text: str | bytes) -> Any:
    """`json.loads`, with lone surrogates cleaned (only when the text has an escape)."""
    value = json.loads(text)
    raw = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return clean(value) if _SURROGATE_ESCAPE.search(raw) else value


SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError)
"""What reading a record of an unexpected shape raises (a missing key, a value of another
type, a number too large: ``int(1e400)``); loaders catch these and report the record."""


def read_text(path: Path, log: RecordLog | None = None) -> str:
    r"""The file as text; undecodable bytes are kept as U+FFFD rather than failing (with
    ``log``, each line holding some gets a skipped entry, once per file: strict mode stops
    there), a leading byte-order mark is not text, and Windows line ends (CRLF, as aider's
    history gets on Windows) are plain line ends.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "x.md"
        >>> _ = p.write_bytes(b"\xef\xbb\xbf# hi\r\nthere\r\n")
        >>> read_text(p)
        '# hi\nthere\n'
    """
    data = path.read_bytes()
    text = data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")
    if log is not None and not log.bytes_checked:
        log.bytes_checked = True
        for line, n in undecodable_lines(data).items():
            log.skipped("bytes", f"{n} byte sequence{'s' if n > 1 else ''} that "
                        f"{'are' if n > 1 else 'is'} not UTF-8: read as U+FFFD (the "
                        f"line is read with {'them' if n > 1 else 'it'} replaced)", line=line,
                        where=f"line {line} bytes")
    return text


def undecodable_lines(data: bytes) -> dict[int, int]:
    r"""Line number -> how many byte sequences of that line are not UTF-8 (each read as one
    U+FFFD); empty for a file that is UTF-8 throughout.

    Example:
        >>> undecodable_lines(b"ok\n\xff\xfeab\xc3\n\xef\xbf\xbd is U+FFFD itself")
        {2: 3}
    """
    try:
        data.decode("utf-8")
        return {}
    except UnicodeDecodeError:
        pass
    out = {}
    for i, raw in enumerate(data.split(b"\n"), start=1):
        n = raw.decode("utf-8", errors="replace").count("\ufffd") - raw.count(b"\xef\xbf\xbd")
        if n:
            out[i] = n
    return out


def iter_jsonl(path: Path, log: RecordLog) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each parseable JSON line.

    Blank lines are not records. A line that does not parse is reported as
    skipped: "truncated last line" when it is the unterminated last line, else
    "malformed JSON" with the parser's message.
    """
    text = read_text(path, log)
    lines = text.split("\n")
    last_terminated = text.endswith("\n")
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = parse_json(raw)
        except RecursionError:
            log.skipped("invalid-json", "JSON nested too deeply to parse", line=i)
            continue
        except json.JSONDecodeError as e:
            is_last = i == len(lines) and not last_terminated
            reason = ("truncated last line (the writer was probably interrupted)" if is_last
                      else f"malformed JSON: {_where(e)}")
            log.skipped("invalid-json", reason, line=i)
            continue
        yield i, value


def _where(e: json.JSONDecodeError) -> str:
    """The decoder's message with its column (``Unterminated string starting at column
    5``: the message already ends with "at").

    Example:
        >>> try:
        ...     json.loads('{"a": "b')
        ... except json.JSONDecodeError as e:
        ...     print(_where(e))
        Unterminated string starting at column 7
    """
    return f"{e.msg.removesuffix(' at')} at column {e.colno}"


def read_json(path: Path, log: RecordLog) -> Any:
    """Parse a whole-file JSON document or raise `LoadError` naming file:line."""
    text = read_text(path, log)
    try:
        return parse_json(text)
    except RecursionError:
        raise log.error("JSON nested too deeply to parse") from None
    except json.JSONDecodeError as e:
        raise log.error(f"malformed JSON: {_where(e)}; the file may be "
                        f"truncated or not a JSON document", line=e.lineno) from None


def as_int(value: Any) -> int | None:
    """An int from a recorded number, or None when absent/not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return None


def as_list(value: Any, what: str) -> list[Any]:
    """A value recorded as one item (a text or an object) or a list of them, as a list.

    Example:
        >>> as_list("hi", "content"), as_list({"text": "hi"}, "content"), as_list([1], "x")
        (['hi'], [{'text': 'hi'}], [1])
    """
    if isinstance(value, (str, Mapping)):
        return [value]
    if isinstance(value, list):
        return value
    raise TypeError(f"{what} is a JSON {type(value).__name__}, not a text, an object or a "
                    f"list of them")


def to_json(value: Any) -> str:
    """Compact JSON text that keeps non-ASCII as is (used for arguments and meta)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def ts_iso(value: Any) -> str | None:
    """An ISO-8601 string from a recorded timestamp (ISO text or epoch seconds/ms)."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        unit = "ms" if value > 1e11 else "s"
        return pd.Timestamp(value, unit=unit, tz="UTC").isoformat()
    return str(value)
