"""What the structured summarizer reads in one text, computed once per distinct text.

`ctxlab.summarizers.structured` fills its notes from these: identifiers, sentences, asks
and pending items of said texts, commands of tool calls, outcomes, error lines, listed
paths and outlines of tool outputs. Each is a pure function of the text, kept in a
bounded cache: a replay summarizes overlapping views of one session, so the same parts
come back at every summarize stage.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator
from typing import Any

from ctxlab.summarizers.base import tool_arguments
from ctxlab.summarizers.notes import _cut

_LANGS = {"py": "Python", "ts": "TypeScript", "tsx": "TypeScript (React)", "js": "JavaScript",
          "jsx": "JavaScript (React)", "rs": "Rust", "go": "Go", "java": "Java", "rb": "Ruby",
          "sql": "SQL", "json": "JSON", "toml": "TOML", "yaml": "YAML", "yml": "YAML",
          "md": "Markdown", "css": "CSS", "html": "HTML", "sh": "shell", "c": "C", "cpp": "C++"}
_OPS = (("edited", ("edit", "replace", "patch", "update", "modify")),
        ("written", ("write", "create", "save")),
        ("read", ("read", "view", "cat", "open", "get_file")))
# Possessive runs (``*+``, ``++``): giving back a letter or digit can never let the rest
# match (what follows a run must be another class, or the word must end), so a plain word
# fails without backtracking through its letters.
_IDENT = re.compile(r"`([^`\n]{3,60})`|\b([A-Za-z][A-Za-z0-9]*+(?:_[A-Za-z0-9]++)+|"
                    r"[a-z]++(?:[A-Z][a-z0-9]++)+|[A-Z][a-z0-9]++(?:[A-Z][A-Za-z0-9]*+)+)\b")
_ERROR = re.compile(r"(?i:^exit code [1-9]\d*$|^fatal:|^panic:|^error(?:\[\w+\])?:|"
                    r"returned non-zero exit status|^traceback \(most recent)|\bFAILED\b|"
                    r"\bERROR\b|\b(?:Error|Exception|Timeout)\b\s*:|^[\w.]*(?:Error|Exception)\b")
# The lookahead holds the letters the words open with: most word starts fail at once.
_PENDING = re.compile(r"(?i)\b(?=[tsofrpnl])(?:todo|to-do|still need(?:s|ed)? to|"
                      r"open question|follow[- ]up|remaining (?:work|tasks?|steps?)|"
                      r"pending (?:tasks?|work|items?|changes?)|not (?:yet )?done|left to do|"
                      r"next steps?:)|- \[ \]")
_ASK = re.compile(r"(?i)^(?:please|can you|could you|would you|we need|i need|i want|let's|"
                  r"add|fix|make|run|check|implement|write|update|remove|create|refactor|"
                  r"investigate|look|find|show|explain|help|start|get|review|rename|move)\b")
_WANT = re.compile(r"(?i)\b(?:i|we) (?:want|need|would like) to\b")
_NEXT = re.compile(r"(?i)^(?:i'll|i will|let me|next,? |now i|i'm going to|then i)")
_OUTLINE = re.compile(r"^(?:(?:async\s+)?(?:def|class|function|interface|fn|func)\s+\w+|#{1,3} )")
_PATH_IN_OUTPUT = re.compile(r"(?<![\w/.~:-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w-]+(?:\.[\w-]+)*"
                             r"\.[A-Za-z][A-Za-z0-9]{0,4}\b(?![/(])")
_HEADING = re.compile(r"^\s*(\d)\.\s+(.+?)\s*:\s*$")
_PATH = re.compile(r"^`?((?:/|\./|~/|[\w.-]+/)[^\s`()]+|[\w.-]+\.\w{1,6})`?(?:\s*\(([^)]*)\))?")
_TIERS = {1: 4, 2: 2, 3: 5, 4: 4, 5: 1, 6: 2, 7: 2, 8: 3, 9: 5}
_SUFFIX = re.compile(r"^(.*\S)\s+\(([^()]*)\)$")
# Splits a line spaced by single spaces after . ! or ? (the space first: a search
# looks at spaces only).
_SENTENCE = re.compile(r" (?<=[.!?] )")
_LINE_NO = re.compile(r"^\s*\d+(?:→|\t)")
_E_PREFIX, _PERCENT = re.compile(r"^E\s+"), re.compile(r"\s*\[\s*\d+%\]$")
_LIST_MARK = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")
# Every match of _ERROR (of _PENDING) holds one of these words, in any case; every match of
# _IDENT a backtick, "_" or a _CASE_HUMP. Texts without them skip the searches.
_ERROR_WORDS = ("exit code", "fatal:", "panic:", "error", "non-zero exit", "traceback", "failed",
                "exception", "timeout")
_PENDING_WORDS = ("todo", "to-do", "still", "question", "follow", "remaining", "pending",
                  "done", "left", "step", "[")
_CASE_HUMP = re.compile(r"[a-z0-9][A-Z]")
_ERROR_WORD = re.compile("|".join(map(re.escape, _ERROR_WORDS)))
_OTHER_BREAKS = re.compile(r"[\r\x0b\x0c\x1c\x1d\x1e]")


def _may_hold(text: str, words: tuple[str, ...]) -> bool:
    """False when ``text`` holds none of ``words`` in any case (ASCII texts only: Unicode
    case folding has more equivalents than `str.lower`)."""
    if not text.isascii():
        return True
    low = text.lower()
    return any(w in low for w in words)


def _worded_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` that hold one of `_ERROR_WORDS` (all its lines when it is not
    ASCII or breaks lines with other characters than ``\\n``)."""
    if not text.isascii() or _OTHER_BREAKS.search(text):
        yield from text.splitlines()
        return
    low, pos = text.lower(), 0
    while m := _ERROR_WORD.search(low, pos):
        end = low.find("\n", m.end())
        end = len(low) if end < 0 else end
        yield text[low.rfind("\n", 0, m.start()) + 1:end]
        pos = end + 1


@functools.lru_cache(maxsize=1024)
def operation(tool_name: str) -> str:
    """What a tool does to the file it names: ``read``, ``edited``, ``written`` or its name.

    Example:
        >>> [operation(t) for t in ("Read", "MultiEdit", "write_file", "Grep")]
        ['read', 'edited', 'written', 'grep']
    """
    low = tool_name.lower()
    for op, words in _OPS:
        if any(w in low for w in words):
            return op
    return low or "used"


def error_lines(text: str, limit: int = 3) -> list[str]:
    """The lines of a tool output that report a failure (at most ``limit``, deduplicated).

    Example:
        >>> error_lines("Exit code 1\\nok\\nE   KeyError: 'id'\\nFAILED t.py::a - KeyError")
        ['Exit code 1', "KeyError: 'id'", 'FAILED t.py::a - KeyError']
    """
    out: list[str] = []
    if not _may_hold(text, _ERROR_WORDS):
        return out
    for raw in _worded_lines(text):
        line = _PERCENT.sub("", _E_PREFIX.sub("", raw.strip()))
        if not line or line.startswith("Traceback") or not _ERROR.search(line):
            continue
        line = _cut(line, 300)          # as an error artifact is (`ctxlab.artifacts`)
        if line not in out:
            out.append(line)
        if len(out) >= limit:
            break
    return out


def _command(args: dict[str, Any]) -> str:
    """A shell call's whole command (shown cut at 200 characters, but two commands that
    share their first 200 are two commands)."""
    cmd = args.get("command", args.get("cmd", ""))
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    return cmd if isinstance(cmd, str) else ""


@functools.lru_cache(maxsize=8192)
def _program(cmd: str) -> str:
    """The program a command runs (``python -m pytest -q`` → ``pytest``)."""
    words = [w for w in cmd.split() if not w.startswith("-") and "=" not in w]
    while len(words) > 1 and words[0] in ("python", "python3", "uv", "run", "npx", "sudo"):
        words = words[1:]
    return words[0] if words else ""


def _outcome(text: str) -> str:
    m = re.search(r"=+ ((?:\d+ \w+(?:, )?)+)(?: in [\d.]+s)? =+", text)
    code = re.match(r"Exit code (\d+)", text)
    if m:
        return (f"exit {code.group(1)}: " if code else "") + m.group(1).rstrip(", ")
    if code:
        return f"exit {code.group(1)}"
    return "failed" if error_lines(text, 1) else "ok"


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        first = line.lstrip()[:1]
        if not first:
            continue
        if first in _MARK_START:
            line = _LIST_MARK.sub("", line)
        line = " ".join(line.split())     # no space at either end, single spaces inside
        if "." in line or "!" in line or "?" in line:
            out.extend(s for s in _SENTENCE.split(line) if s)
        elif line:
            out.append(line)
    return out


_MARK_START = frozenset("-*0123456789")   # what a `_LIST_MARK` opens with


_cached = functools.lru_cache(maxsize=8192)


@_cached
def _idents(text: str) -> tuple[str, ...]:
    head = text[:20_000]
    if not ("`" in head or "_" in head or _CASE_HUMP.search(head)):
        return ()
    # No match spans a "\n", and a line without "`", "_" or a case hump holds none.
    found = (m for line in head.split("\n")
             if "`" in line or "_" in line or _CASE_HUMP.search(line)
             for m in _IDENT.findall(line))
    return tuple(dict.fromkeys(x or y for x, y in found))


@_cached
def _said(text: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """Sentences, pending items and the last intent (``""``) of a user/assistant text."""
    sentences = tuple(_sentences(text))
    # a sentence is a stretch of the text with its spacing made single spaces, and no
    # match of _PENDING spans a sentence's end, so only the sentences holding one of its
    # words are searched (searching the whole text first cost more than it saved)
    pending = tuple(_cut(s, 200) for s in sentences if _may_hold(s, _PENDING_WORDS)
                    and _PENDING.search(s)) if _may_hold(text, _PENDING_WORDS) else ()
    intents = [s for s in sentences if _NEXT.match(s)]
    return sentences, pending, _cut(intents[-1], 200) if intents else ""


@_cached
def _asks(text: str) -> str:
    sentences = _said(text)[0]
    asks = sentences[:1] + tuple(s for s in sentences[1:]
                                 if s.endswith("?") or _ASK.match(s) or _WANT.search(s))
    return _cut(" ".join(asks), 240) if asks else ""


@_cached
def _call_command(content: str, tool_name: str) -> str:
    return _command(tool_arguments(content, tool_name))


@_cached
def _result(text: str) -> tuple[str, tuple[str, ...]]:
    """The outcome and the error lines of a tool output."""
    return _outcome(text), tuple(error_lines(text))


@_cached
def _listed(text: str) -> tuple[str, ...]:
    """Paths a listing or search output shows (from its first 200 path-like matches)."""
    # Every match holds a "/" and none spans a "\n": only such lines need a search.
    found = (m.group() for line in text[:20_000].split("\n") if "/" in line
             for m in _PATH_IN_OUTPUT.finditer(line))
    return tuple(dict.fromkeys(itertools.islice(found, 200)))


@_cached
def _outline(text: str) -> tuple[str, ...]:
    lines = (_LINE_NO.sub("", ln).strip() for ln in text.splitlines()[:2000])
    return tuple(_cut(ln.rstrip(":"), 80)
                 for ln in itertools.islice((ln for ln in lines if _OUTLINE.match(ln)), 4))
