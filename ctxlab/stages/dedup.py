"""File-read deduplication (seed 000, stage 2): keep only the latest read of each file.

Every earlier read of a file that is read again later is replaced by the placeholder
``[File - refer to latest read below]`` (a replaced tool result keeps its tool-call
linkage, so pairs stay whole). The edit is made only when it saves at least
``threshold`` (seed 000's ``DEDUP_THRESHOLD``, 30%) of the tokens of the file-read
content the stage considered: every part detected as a read, the latest ones included.

Two ways to find reads:

* ``mode="regex"`` (the seed, faithfully): seed 000's pattern is searched in the text
  of every conversation part (not the system prompt, tool schemas, the current user
  prompt or thinking, which NeuroLink's messages do not carry as content); its first
  match names the "path". The pattern also matches prose — "I read the docs" reads a
  file called ``the``, and the placeholder itself ("refer to latest read below]") reads
  ``below]`` — and the stage keeps that behaviour (its own placeholders are skipped).
* ``mode="paths"`` (the improvement): only tool results of read tools count, keyed on
  the file they really read: ``Read``/``read_file``/``view``/``open``-style tools (the
  part's ``file_path``), editor tools called with ``command: "view"`` (OpenHands), and
  shell tools whose whole command is ``cat <file>`` (Codex ``shell``, Claude Code
  ``Bash``). A partial read (``offset``/``limit``/``view_range``...) is replaced only by
  a later read of the same range or of the whole file; error results never count.
  Prose never matches.
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, Stage, View, equals, ints, is_na, labels, one_of,
                               optional_text, part_rows, strings, table_of)
from ctxlab.stages.columns import hashed
from ctxlab.stages.tool_output import REPLACED_COLUMNS, meta_dict, replacement

PLACEHOLDER = "[File - refer to latest read below]"
DEDUP_THRESHOLD = 0.3  # seed 000
READ_PATTERN = re.compile(r"(?:read|reading|read_file|readFile|Read file|cat)\s+['\"`]?"
                          r"([^\s'\"`\n]+)", re.IGNORECASE)
READ_TOOLS = frozenset({"Read", "NotebookRead", "read_file", "ReadFile", "read_text_file",
                        "read", "view", "open"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
SHELL_TOOLS = frozenset({"Bash", "bash", "shell", "exec", "exec_command", "execute_bash",
                         "run_shell_command", "local_shell", "shell_command"})
RANGE_KEYS = ("offset", "limit", "view_range", "start_line", "end_line", "line_start",
              "line_end", "lines", "pages")
REGEX_LAYERS = ("carried", "current", "history")
REGEX_KINDS = ("text", "tool_call", "tool_result", "attachment", "summary", "marker")
UNKNOWN = "?"  # range of a read whose arguments are not in the request
_SHELL_OPERATORS = re.compile(r"[|;&<>$`]")


@functools.lru_cache(maxsize=65_536)
def regex_read_path(text: str) -> str | None:
    """The file seed 000's pattern says a text reads (its first match), or None.
    Remembered per text: every compaction of a replay scans the same parts again.

    Example:
        >>> regex_read_path("I read README.md and then cat setup.py")
        'README.md'
        >>> regex_read_path("I read the docs"), regex_read_path("no file here")
        ('the', None)
    """
    if not text.isascii():
        m = READ_PATTERN.search(text)
        return m.group(1) if m else None
    low, at = text.lower(), 0       # an ASCII match starts at "read" or "cat", in any case:
    while True:                     # try those places only, leftmost first
        starts = [i for i in (low.find("read", at), low.find("cat", at)) if i >= 0]
        if not starts:
            return None
        m = READ_PATTERN.match(text, min(starts))
        if m:
            return m.group(1)
        at = min(starts) + 1


def call_arguments(content: str, tool_name: str | None = None) -> dict[str, Any] | None:
    """The JSON arguments of a tool-call part (``name({...})``), or None.

    Example:
        >>> call_arguments('Read({"file_path": "a.py", "offset": 10})', "Read")
        {'file_path': 'a.py', 'offset': 10}
    """
    if tool_name and content.startswith(f"{tool_name}(") and content.endswith(")"):
        raw = content[len(tool_name) + 1:-1]
    else:
        i = content.find("(")
        if i < 0 or not content.endswith(")"):
            return None
        raw = content[i + 1:-1]
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def cat_path(command: Any) -> str | None:
    """The file a shell command reads whole, when the command is just ``cat <file>``.

    Example:
        >>> cat_path("cat setup.py"), cat_path(["bash", "-lc", "cat -n 'a b.txt'"])
        ('setup.py', 'a b.txt')
        >>> cat_path("cat a.py | head"), cat_path("sed -n 1,20p a.py")
        (None, None)
    """
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = command[-1] if len(command) >= 3 and command[-2] in ("-c", "-lc") \
            else shlex.join(command)
    if not isinstance(command, str) or _SHELL_OPERATORS.search(command):
        return None
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if len(tokens) < 2 or tokens[0] != "cat":
        return None
    files = [t for t in tokens[1:] if t not in ("-n", "--number")]
    if len(files) != 1 or files[0].startswith("-"):
        return None
    return files[0]


def _normal(path: str) -> str:
    return posixpath.normpath(path) if path else path


@functools.lru_cache(maxsize=8192)
def _is_error(meta: str | None) -> bool:
    value = meta_dict(meta, "is_error")
    return value is not None and value.get("is_error") is True


@functools.lru_cache(maxsize=8192)
def _read(name: str, file_path: str | None, call: str | None,
          call_tool: str | None) -> tuple[str, Any] | None:
    """`_read_of` a result of tool ``name`` whose call has the content ``call`` (None: not in
    the request). Cached: it depends on these texts only, and the requests a replay
    compacts share most of their parts."""
    return _read_of(name, file_path, None if call is None else call_arguments(call, call_tool))


def _read_of(name: str, file_path: str | None,
             args: dict[str, Any] | None) -> tuple[str, Any] | None:
    """(path, range) of a tool result (of tool ``name``) that reads a file, else None.

    The range is None for a whole-file read, a tuple of the range arguments for a
    partial one, and `UNKNOWN` when the call's arguments are not in the request.
    """
    if name in SHELL_TOOLS:
        path = cat_path((args or {}).get("command", (args or {}).get("cmd")))
        return (_normal(path), None) if path else None
    if name in EDITOR_TOOLS:
        if not args or args.get("command") != "view" or not isinstance(args.get("path"), str):
            return None
        path, rng = args["path"], None
    elif name in READ_TOOLS or name.endswith(("__read_file", "__read_text_file")):
        path = file_path or (args or {}).get("file_path") or (args or {}).get("path")
        if not isinstance(path, str) or not path:
            return None
        if args is None:
            return _normal(path), UNKNOWN
        rng = None
    else:
        return None
    given = tuple((k, json.dumps(args[k], sort_keys=True)) for k in RANGE_KEYS
                  if args.get(k) is not None)
    return _normal(path), (given or rng)


def file_reads(parts: pd.DataFrame) -> pd.DataFrame:
    """The tool results of a request that read a file, with the file and the range read.

    Columns: ``part`` (id), ``path`` (normalised), ``range`` (None: the whole file).
    Error results and parts inserted by earlier edits (placeholders, cut outputs) are
    left out: they are not reads of the file.
    """
    return pd.DataFrame(_file_reads(parts), columns=["part", "path", "range"])


def _file_reads(parts: pd.DataFrame) -> list[tuple[int, str, Any]]:
    """`file_reads` as ``(part, path, range)`` tuples."""
    kind = labels(parts, "kind")
    name = strings(parts, "tool_name")
    results = np.flatnonzero((kind == "tool_result") & is_na(parts, "event"))
    results = results[np.array([_read_tool(n) for n in name[results].tolist()], dtype=bool)]
    if not len(results):
        return []
    t = table_of(parts)
    if t is not None:           # the calls of these results: by id hash (sort-based)
        ids = hashed(t, "tool_call_id")
        asked = ids[results]
        calls = np.flatnonzero((kind == "tool_call") & one_of(ids, asked[asked != -1].tolist()))
    else:
        cids = strings(parts, "tool_call_id")
        calls = np.flatnonzero((kind == "tool_call") & one_of(cids, set(cids[results].tolist())))
    call_of = {c.tool_call_id: c for c in part_rows(parts, calls, ("tool_call_id", "content",
                                                                  "tool_name"))}
    rows: list[tuple[int, str, Any]] = []
    for r in part_rows(parts, results, ("part", "tool_name", "tool_call_id", "file_path",
                                        "meta")):
        if _is_error(r.meta):
            continue
        call = call_of.get(r.tool_call_id) if r.tool_call_id else None
        read = _read(r.tool_name, optional_text(r.file_path), None if call is None else
                     call.content, None if call is None else optional_text(call.tool_name))
        if read is not None:
            rows.append((int(r.part), read[0], read[1]))
    return rows


def _read_tool(name: str | None) -> bool:
    """Whether a tool's results may be file reads (`_read_of` looks at no other tool)."""
    return isinstance(name, str) and (name in SHELL_TOOLS or name in EDITOR_TOOLS
                                      or name in READ_TOOLS
                                      or name.endswith(("__read_file", "__read_text_file")))


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Dedup(Stage):
    """Replace every earlier read of a file with a placeholder; keep the latest.

    Attributes:
        mode: ``"regex"`` (seed 000's pattern over message text, prose included) or
            ``"paths"`` (the files read tools really read).
        threshold: the edit is made only if it saves at least this fraction of the
            tokens of the file-read parts considered (seed 000's ``DEDUP_THRESHOLD``: 0.3).
        placeholder: the text that replaces an earlier read.
    """

    name = "dedup"
    source = "seed 000 (NeuroLink deduplicateFileReads)"
    mode: Literal["regex", "paths"] = "regex"
    threshold: float = DEDUP_THRESHOLD
    placeholder: str = PLACEHOLDER

    def __post_init__(self) -> None:
        if self.mode not in ("regex", "paths"):
            raise ConfigError(f"dedup: mode must be 'regex' or 'paths', got {self.mode!r}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)) \
                or not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"dedup: threshold must be a fraction between 0 and 1, got "
                              f"{self.threshold!r}")
        if not isinstance(self.placeholder, str) or not self.placeholder:
            raise ConfigError("dedup: placeholder must be a non-empty text")

    def plan(self, view: View) -> Edit | None:
        p = view
        reads = self._reads(p)
        if not reads:
            return None
        stale = _superseded(reads, by_range=self.mode == "paths")
        if not stale:
            return None
        part = ints(p, "part")
        rows = np.flatnonzero(np.isin(part, stale))
        tokens = ints(p, "tokens")
        considered = int(tokens[np.isin(part, [r[0] for r in reads])].sum())
        saved = int(tokens[rows].sum()) - view.estimate(self.placeholder) * len(rows)
        replaced = set(stale)
        files = len({path for read, path, _ in reads if read in replaced})
        if saved <= 0 or saved < self.threshold * considered:
            share = saved / considered if considered else 0.0
            return Edit(stage=self.name, reason=f"would save {saved:,} of {considered:,} "
                        f"file-read tokens ({share:.0%}), under the {self.threshold:.0%} "
                        f"threshold")
        inserts = tuple(replacement(r, self.placeholder, meta={"deduplicated": True})
                        for r in part_rows(p, rows, REPLACED_COLUMNS))
        return Edit(stage=self.name, hide=tuple(part[rows].tolist()), insert=inserts,
                    reason=f"replaced {len(rows)} earlier reads of {files} "
                           f"file{'' if files == 1 else 's'} with a pointer to the latest read",
                    details={"mode": self.mode, "files_deduped": files, "replaced": len(rows),
                             "tokens_saved": saved, "considered_tokens": considered})

    def _reads(self, p: pd.DataFrame) -> list[tuple[int, str, Any]]:
        """Candidate reads in position order: ``(part, path, range)``."""
        if not len(p):
            return []
        placeholder = equals(p, "content", self.placeholder)
        if self.mode == "paths":
            reads = _file_reads(p)  # whole-file reads keep range None (a frame made it NaN)
        else:
            cand = np.flatnonzero(one_of(labels(p, "layer"), REGEX_LAYERS)
                                  & one_of(labels(p, "kind"), REGEX_KINDS) & ~placeholder)
            found = [regex_read_path(c) for c in labels(p, "content")[cand].tolist()]
            reads = [(int(i), path, None) for i, path in
                     zip(ints(p, "part")[cand].tolist(), found)
                     if path is not None]
        if not placeholder.any():
            return reads
        placeholders = set(ints(p, "part")[placeholder].tolist())
        return [r for r in reads if r[0] not in placeholders]


def _superseded(reads: list[tuple[int, str, Any]], *, by_range: bool) -> list[int]:
    """Part ids of reads a later read of the same file replaces.

    Without ``by_range`` any later read of the path does (the seed); with it, only a later
    whole-file read or a later read of the very same (known) range.
    """
    stale: list[int] = []
    latest_whole: set[str] = set()
    latest_range: set[tuple[str, Any]] = set()
    for part, path, rng in reversed(reads):
        if not by_range:
            if path in latest_whole:
                stale.append(int(part))
            latest_whole.add(path)
            continue
        if path in latest_whole or (rng not in (None, UNKNOWN) and (path, rng) in latest_range):
            stale.append(int(part))
        if rng is None:
            latest_whole.add(path)
        elif rng != UNKNOWN:
            latest_range.add((path, rng))
    return sorted(stale)
