"""What an agent last knew of each file: its reads, writes and edits, replayed in order.

Claude Code keeps, per file, the content it last read or wrote and the file's
modification time then; after compacting it reads the most recently modified of
those files again (`ctxlab.stages.reattach`). A log does not record the files, but it
records what the agent did to them, so `file_states` rebuilds that knowledge from the
parts of a request, in position order:

* a read (the tool results `ctxlab.stages.dedup.file_reads` recognises) of the whole
  file sets its content; a partial read sets it only while nothing more is known (a
  fragment, with the line it starts at);
* a write (``Write``'s ``content``, ``create``'s ``file_text``) sets the whole content;
* an edit (``Edit``/``str_replace``: ``old_string`` → ``new_string``, ``replace_all``;
  ``MultiEdit``: several) is applied to the known content when its old text is there;
  one that failed (an error result) is skipped;
* a file an earlier compaction re-attached counts as known again, with the recency of
  the read or write it copied: its meta holds ``text_span`` (where the file's text is
  in the part), ``read_pos`` and ``written_pos``.

Read tools number the lines they return (``     1→text``, Claude Code's ``cat -n``
format); the numbers are stripped, so edits apply to the text itself, and
`numbered` puts them back.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.stages.dedup import call_arguments, file_reads
from ctxlab.stages.tool_output import meta_dict, optional_text

WRITE_TOOLS = frozenset({"Write", "write_file", "create_file", "WriteFile"})
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "edit_file", "replace"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
STATE_COLUMNS = ("path", "content", "first_line", "complete", "read_pos", "written_pos",
                 "recent_pos")
_NUMBERED = re.compile(r"^ *(\d+)(?:→|\t)(.*)$")
_REMINDER_TAIL = re.compile(r"(?:\n\s*<system-reminder>(?:(?!<system-reminder>).)*?"
                            r"</system-reminder>)+\s*\Z", re.S)


def strip_line_numbers(text: str) -> tuple[str, int]:
    """A read tool's output without its line numbers, and the first line's number.

    A ``<system-reminder>`` block Claude Code appends after the numbered lines (1.0.x)
    is the client's, not the file's: it is left out. Text that is not numbered on every
    line comes back as it is, starting at line 1.

    Example:
        >>> strip_line_numbers("    10→a = 1\\n    11→b = 2")
        ('a = 1\\nb = 2', 10)
        >>> strip_line_numbers("     1→x\\n\\n<system-reminder>\\nBe careful.</system-reminder>")
        ('x', 1)
        >>> strip_line_numbers("plain text")
        ('plain text', 1)
    """
    body = _REMINDER_TAIL.sub("", text)
    lines = body.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    found = [_NUMBERED.match(line) for line in lines]
    if not lines or not all(found):
        return text, 1
    return "\n".join(m.group(2) for m in found if m), int(found[0].group(1)) if found[0] else 1


def numbered(text: str, first_line: int = 1) -> str:
    """A file's text as Claude Code's Read tool returns it: ``%6d→line``.

    Example:
        >>> print(numbered("a = 1\\nb = 2", 9))
             9→a = 1
            10→b = 2
    """
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(text.split("\n"), first_line))


def _edits(name: str, args: dict[str, Any]) -> list[tuple[str, str, bool]] | None:
    """(old, new, replace_all) of an edit call, in order; None when it is not an edit."""
    if name == "MultiEdit" and isinstance(args.get("edits"), list):
        pairs = [e for e in args["edits"] if isinstance(e, dict)]
    elif name in EDIT_TOOLS or (name in EDITOR_TOOLS and args.get("command") == "str_replace"):
        pairs = [args]
    else:
        return None
    out = []
    for e in pairs:
        old = e.get("old_string", e.get("old_str"))
        new = e.get("new_string", e.get("new_str", ""))
        if isinstance(old, str) and old and isinstance(new, str):
            out.append((old, new, bool(e.get("replace_all", False))))
    return out


def _written(name: str, args: dict[str, Any]) -> str | None:
    """The whole text a write call puts in its file, else None."""
    if name in WRITE_TOOLS:
        text = args.get("content", args.get("file_text"))
    elif name in EDITOR_TOOLS and args.get("command") == "create":
        text = args.get("file_text")
    else:
        return None
    return text if isinstance(text, str) else None


def _failed(parts: pd.DataFrame) -> set[str]:
    """Tool call ids whose result is an error."""
    res = parts[parts["kind"] == "tool_result"]
    return {str(cid) for cid, meta in zip(res["tool_call_id"], res["meta"])
            if isinstance(cid, str) and (meta_dict(meta, "is_error") or {}).get("is_error")
            is True}


def _operations(parts: pd.DataFrame) -> list[tuple[float, str, str, Any]]:
    """(pos, path, op, value) of every file operation, in position order.

    ``op`` is ``read`` (value: text, full), ``write`` (text), ``edit`` (pairs) or
    ``again`` (an earlier re-attachment: text, first line, read pos, written pos).
    """
    ops: list[tuple[float, str, str, Any]] = []
    reads = file_reads(parts)
    if len(reads):
        info = parts.set_index(parts["part"].astype("int64"))
        for r in reads.itertuples():
            row = info.loc[int(r.part)]
            ops.append((float(row["pos"]), str(r.path), "read",
                        (optional_text(row["content"]) or "", r.range is None)))
    calls = parts[parts["kind"] == "tool_call"]
    failed = _failed(parts)
    for pos, content, name, cid in zip(calls["pos"], calls["content"], calls["tool_name"],
                                       calls["tool_call_id"]):
        tool = optional_text(name) or ""
        if not isinstance(content, str) or (isinstance(cid, str) and cid in failed):
            continue
        args = call_arguments(content, tool) or {}
        path = args.get("file_path", args.get("path"))
        if not isinstance(path, str) or not path:
            continue
        text = _written(tool, args)
        if text is not None:
            ops.append((float(pos), path, "write", text))
        elif (pairs := _edits(tool, args)):
            ops.append((float(pos), path, "edit", pairs))
    again = parts[(parts["kind"] == "attachment") & parts["event"].notna()
                  & parts["file_path"].notna()]
    for pos, path, content, meta in zip(again["pos"], again["file_path"], again["content"],
                                        again["meta"]):
        m = meta_dict(meta, "text_span") or {}
        span = m.get("text_span")
        if not isinstance(span, list) or len(span) != 2 or not isinstance(content, str):
            continue
        text, first = strip_line_numbers(content[int(span[0]):int(span[1])])
        ops.append((float(pos), str(path), "again", (text, first, m.get("read_pos"),
                                                     m.get("written_pos"))))
    ops.sort(key=lambda o: o[0])
    return ops


def file_states(parts: pd.DataFrame) -> pd.DataFrame:
    """The agent's knowledge of every file it read, wrote or edited in a request.

    Args:
        parts: the parts of a request (a view's ``parts``), in position order.

    Returns:
        One row per file, most recent first (see ``recent_pos``): ``path``, ``content``
        (the text as last known, line numbers stripped; None when only edits are known),
        ``first_line`` (1 unless only a fragment of a partial read is known),
        ``complete`` (the whole file is known), ``read_pos`` and ``written_pos`` (the
        latest read and the latest write or edit; NaN when none), ``recent_pos`` (the
        latest of the two).

    Example:
        >>> parts = pd.DataFrame({"part": [0, 1, 2], "pos": [0.0, 1.0, 2.0],
        ...     "kind": ["tool_call", "tool_result", "tool_call"],
        ...     "tool_name": ["Read", "Read", "Edit"], "tool_call_id": ["a", "a", "b"],
        ...     "file_path": ["x.py"] * 3, "event": [pd.NA] * 3, "meta": [None] * 3,
        ...     "content": ['Read({"file_path": "x.py"})', "     1→a = 1\\n     2→b = 2",
        ...                 'Edit({"file_path": "x.py", "old_string": "b = 2", '
        ...                 '"new_string": "b = 3"})']})
        >>> s = file_states(parts).iloc[0]
        >>> s["content"], bool(s["complete"]), float(s["read_pos"]), float(s["written_pos"])
        ('a = 1\\nb = 3', True, 1.0, 2.0)
    """
    state: dict[str, dict[str, Any]] = {}
    for pos, path, op, value in _operations(parts):
        s = state.setdefault(path, {"path": path, "content": None, "first_line": 1,
                                    "complete": False, "read_pos": np.nan,
                                    "written_pos": np.nan})
        if op == "read":
            text, full = value
            if full or not s["complete"]:
                s["content"], s["first_line"] = strip_line_numbers(text)
                s["complete"] = bool(full)
            s["read_pos"] = pos
        elif op == "write":
            s.update(content=value, first_line=1, complete=True, written_pos=pos)
        elif op == "edit":
            s["written_pos"] = pos
            for old, new, every in value:
                if isinstance(s["content"], str) and old in s["content"]:
                    s["content"] = s["content"].replace(old, new, -1 if every else 1)
        else:
            text, first, read_pos, written_pos = value
            s.update(content=text, first_line=first, complete=first == 1,
                     read_pos=float(read_pos) if read_pos is not None else np.nan,
                     written_pos=float(written_pos) if written_pos is not None else np.nan)
    out = pd.DataFrame(list(state.values()),
                       columns=[c for c in STATE_COLUMNS if c != "recent_pos"])
    out["recent_pos"] = out[["read_pos", "written_pos"]].max(axis=1)
    out = out.astype({"first_line": "int64", "complete": bool, "read_pos": "float64",
                      "written_pos": "float64", "recent_pos": "float64"})
    return out.sort_values("recent_pos", ascending=False, kind="stable").reset_index(drop=True)


__all__ = ["file_states", "numbered", "strip_line_numbers"]
