"""Single tool-output truncation (seed 000's tool output limits; seed 002's handles).

A tool result larger than ``max_bytes`` UTF-8 bytes or ``max_lines`` lines is hidden
and replaced by the part of it that fits — the tail by default, the head on request —
followed by the notice ``[Output truncated from X bytes to Y bytes]``. Lines are cut
first, then bytes; a multibyte character is never cut in half.

Seed 002 (ai-agent, ``toolResponseMaxBytes = 12,288``) stores the full output behind a
handle. In ctxlab the full output is never lost: it stays in the hidden original part,
so with ``handle=True`` the notice names that part (``part:<session>/<part id>``).
With ``save_dir`` the full text is also written to a file in that directory — the only
place this stage ever writes — and the notice gives its path.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, equals, is_na, optional_text,
                                part_rows)
from ctxlab.stages.table import Table

MAX_TOOL_OUTPUT_BYTES = 51_200  # seed 000: 50 KB
MAX_TOOL_OUTPUT_LINES = 2_000  # seed 000
LINKED_KINDS = frozenset({"tool_result", "tool_call", "attachment"})
_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
REPLACED_COLUMNS = ("part", "kind", "role", "tool_name", "tool_call_id", "file_path")


def meta_dict(meta: Any, key: str) -> dict[str, Any] | None:
    """A part's ``meta`` JSON as a dict when it mentions ``key`` (cheap text test first)."""
    text = optional_text(meta)
    if not text or key not in text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def replacement(row: Any, content: str, *, meta: Mapping[str, Any] | None = None) -> NewPart:
    """A part that takes the place of ``row`` (a view row) inside its message.

    Tool results, tool calls and attachments keep their kind and linkage
    (``tool_call_id``, ``tool_name``, ``file_path``), so tool pairs stay whole;
    any other part becomes a ``marker`` of the same role.
    """
    kind = row.kind if row.kind in LINKED_KINDS else "marker"
    return NewPart(content=content, kind=kind, role=row.role, anchor=int(row.part),
                   join_message=True, tool_name=optional_text(row.tool_name),
                   tool_call_id=optional_text(row.tool_call_id),
                   file_path=optional_text(row.file_path), meta=dict(meta or {}))


def utf8_bytes(text: str) -> bytes:
    """The UTF-8 bytes of a text (lone surrogates pass through, never raise)."""
    return text.encode("utf-8", "surrogatepass")


def cut_bytes(data: bytes, limit: int, direction: Literal["head", "tail"]) -> bytes:
    """At most ``limit`` bytes from the head or the tail, on a character boundary.

    Example:
        >>> cut_bytes("aé".encode(), 2, "head").decode(), cut_bytes("éa".encode(), 2, "tail")
        ('a', b'a')
    """
    if len(data) <= limit:
        return data
    if direction == "head":
        end = limit
        while end > 0 and (data[end] & 0xC0) == 0x80:
            end -= 1
        return data[:end]
    start = len(data) - limit
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def truncation_notice(original_bytes: int, kept_bytes: int, *, saved_path: str | None = None,
                      handle: str | None = None) -> str:
    """Seed 000's notice, with where the full output is when there is such a place.

    Example:
        >>> truncation_notice(60_000, 51_200)
        '[Output truncated from 60000 bytes to 51200 bytes]'
        >>> truncation_notice(60_000, 12_288, handle="part:s1/7")
        '[Output truncated from 60000 bytes to 12288 bytes; full output: part:s1/7]'
    """
    where = [w for w in (saved_path, handle) if w]
    tail = f"; full output: {' and '.join(where)}" if where else ""
    return f"[Output truncated from {original_bytes} bytes to {kept_bytes} bytes{tail}]"


def _sizes(table: Table) -> np.ndarray:
    """UTF-8 bytes and newlines of every text (two columns; NA: 0, 0), kept with the
    table's rows (an always-on stage measures the same tool results at every call)."""
    out = np.zeros((len(table), 2), dtype=np.int64)
    for i, t in enumerate(table.col("content").tolist()):
        if t:
            out[i] = len(t) if t.isascii() else len(utf8_bytes(t)), t.count("\n")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Truncated:
    """What `truncate_text` kept."""

    text: str
    original_bytes: int
    kept_bytes: int
    original_lines: int
    kept_lines: int

    @property
    def truncated(self) -> bool:
        return self.kept_bytes < self.original_bytes


def truncate_text(text: str, *, max_bytes: int = MAX_TOOL_OUTPUT_BYTES,
                  max_lines: int | None = MAX_TOOL_OUTPUT_LINES,
                  direction: Literal["head", "tail"] = "tail") -> Truncated:
    """Keep at most ``max_lines`` lines (None: any number), then at most ``max_bytes``
    bytes, of one end.

    Example:
        >>> r = truncate_text("1\\n2\\n3\\n4\\n", max_bytes=100, max_lines=2)
        >>> r.text, r.original_bytes, r.kept_bytes
        ('3\\n4\\n', 8, 4)
        >>> truncate_text("1\\n2\\n3\\n4\\n", max_bytes=100, max_lines=2, direction="head").text
        '1\\n2\\n'
    """
    data = utf8_bytes(text)
    lines = _LINE.findall(text)
    kept = text
    if max_lines is not None and len(lines) > max_lines:
        kept = "".join(lines[:max_lines] if direction == "head" else lines[len(lines) - max_lines:])
    kept_data = cut_bytes(utf8_bytes(kept), max_bytes, direction)
    kept = kept_data.decode("utf-8", "surrogatepass")
    return Truncated(text=kept, original_bytes=len(data), kept_bytes=len(kept_data),
                     original_lines=len(lines), kept_lines=len(_LINE.findall(kept)))


@functools.lru_cache(maxsize=4096)
def _truncated(text: str, max_bytes: int, max_lines: int | None,
               direction: Literal["head", "tail"]) -> Truncated:
    """`truncate_text`, remembered: an always-on stage meets an oversized result whose
    cut would not save tokens again at every call."""
    return truncate_text(text, max_bytes=max_bytes, max_lines=max_lines, direction=direction)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TruncateToolOutput(Stage):
    """Cut every oversized tool result to its tail (or head) plus a notice.

    Attributes:
        max_bytes: UTF-8 bytes a tool result may have (seed 000: 51,200; seed 002's
            ``toolResponseMaxBytes``: 12,288).
        max_lines: lines a tool result may have (seed 000: 2,000); None: no line limit
            (seed 002 sets bytes only).
        direction: which end to keep (seed 000: ``"tail"``).
        save_dir: a directory to write each full output to (seed 000's ``saveToDisk``);
            None writes nothing.
        handle: name the hidden original part in the notice (seed 002's handles).

    A replacement that would not cost fewer tokens than the original (a result just over
    the line limit) is not made.
    """

    name = "truncate_tool_output"
    source = "seed 000 (NeuroLink truncateToolOutput); seed 002 (ai-agent toolResponseMaxBytes)"
    max_bytes: int = MAX_TOOL_OUTPUT_BYTES
    max_lines: int | None = MAX_TOOL_OUTPUT_LINES
    direction: Literal["head", "tail"] = "tail"
    save_dir: str | None = None
    handle: bool = False

    def __post_init__(self) -> None:
        for field_name in ("max_bytes", "max_lines"):
            value = getattr(self, field_name)
            if value is None and field_name == "max_lines":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"truncate_tool_output: {field_name} must be a positive "
                                  f"integer{' or None' if field_name == 'max_lines' else ''}, "
                                  f"got {value!r}")
        if not isinstance(self.handle, bool):
            raise ConfigError(f"truncate_tool_output: handle must be True or False, got "
                              f"{self.handle!r}")
        if self.direction not in ("head", "tail"):
            raise ConfigError(f"truncate_tool_output: direction must be 'head' or 'tail', got "
                              f"{self.direction!r}")
        if self.save_dir is not None and (not isinstance(self.save_dir, str)
                                          or not self.save_dir.strip()):
            raise ConfigError(f"truncate_tool_output: save_dir must be a directory path or "
                              f"None, got {self.save_dir!r}")

    def plan(self, view: View) -> Edit | None:
        p = view
        results = np.flatnonzero(equals(p, "kind", "tool_result") & is_na(p, "event"))
        if not len(results):
            return None
        oversized = results[self._oversized(view.table, results)]
        hide: list[int] = []
        inserts: list[NewPart] = []
        saved = skipped = 0
        cuts = []
        for r in part_rows(p, oversized, REPLACED_COLUMNS + ("content", "tokens")):
            cut = _truncated(r.content, self.max_bytes, self.max_lines, self.direction)
            if not cut.truncated:
                continue
            path = self._save(view.session, int(r.part), r.content) if self.save_dir else None
            handle = f"part:{view.session}/{int(r.part)}" if self.handle else None
            notice = truncation_notice(cut.original_bytes, cut.kept_bytes, saved_path=path,
                                       handle=handle)
            cuts.append((r, cut, path, handle, f"{cut.text}\n\n{notice}" if cut.text else notice))
        for (r, cut, path, handle, content), tokens_after in zip(
                cuts, view.estimate_all([c[-1] for c in cuts])):
            gain = int(r.tokens) - tokens_after
            if gain <= 0:
                skipped += 1
                continue
            meta = {"truncated": True, "original_bytes": cut.original_bytes,
                    "kept_bytes": cut.kept_bytes, "original_lines": cut.original_lines,
                    "direction": self.direction}
            if path:
                meta["saved_path"] = path
            if handle:
                meta["handle"] = handle
            hide.append(int(r.part))
            inserts.append(replacement(r, content, meta=meta))
            saved += gain
        if not hide:
            if skipped:
                return Edit(stage=self.name, reason=f"{skipped} oversized tool results would "
                            f"not get smaller in tokens")
            return None
        return Edit(stage=self.name, hide=tuple(hide), insert=tuple(inserts),
                    reason=f"truncated {len(hide)} tool output{'s' if len(hide) != 1 else ''} "
                           f"over {self.max_bytes:,} bytes"
                           + (f" or {self.max_lines:,} lines" if self.max_lines is not None
                              else "") + f" to their {self.direction}",
                    details={"truncated": len(hide), "tokens_saved": saved,
                             "not_smaller": skipped})

    def candidates(self, table: Table) -> np.ndarray:
        """Tool results of no event over the byte or line limit: only these are cut."""
        out = equals(table, "kind", "tool_result") & is_na(table, "event")
        rows = np.flatnonzero(out)
        out[rows] = self._oversized(table, rows)
        return out

    def _oversized(self, table: Table, rows: np.ndarray) -> np.ndarray:
        """Which of the rows may be over a limit (bool per row): a text has at most one
        line more than it has "\\n"s."""
        sizes = table.derived("utf8_bytes_newlines", ("content",), _sizes)[rows]
        if self.max_lines is None:
            return sizes[:, 0] > self.max_bytes
        return (sizes[:, 0] > self.max_bytes) | (sizes[:, 1] >= self.max_lines)

    def _save(self, session: str, part: int, text: str) -> str:
        """Write the full output to ``save_dir`` (only there); returns the file's path."""
        directory = Path(str(self.save_dir))
        if not directory.is_dir():
            if not directory.parent.is_dir():
                raise ConfigError(f"truncate_tool_output: save_dir {directory} does not exist "
                                  f"and neither does its parent; create it first")
            directory.mkdir(exist_ok=True)
        data = utf8_bytes(text)
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", session)[:80] or "session"
        digest = hashlib.sha256(data).hexdigest()[:12]
        target = directory / f"{slug}-part{part}-{digest}.txt"
        if not target.exists():
            target.write_bytes(data)
        return str(target)

