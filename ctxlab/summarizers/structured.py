"""The default summarizer: seed 000's 9-section structured summary, extracted offline.

`Structured` fills the nine sections of seed 000's summary prompt without a model, by
extraction from the parts, so replays are fast, free and deterministic: (1) the asks of
the user messages; (2) technologies and frequent identifiers; (3) file paths with what
was done to them, and an outline of files read; (4) error lines of tool results
(tracebacks, ``Error:``, ``FAILED``, non-zero exits) and whether a later run passed;
(5) commands with their outcomes, and the assistant's notes; (6) the user messages,
verbatim up to 400 characters; (7) open items (TODO, open question...); (8) the last
steps; (9) what the assistant said it would do next, or the latest ask.

A previous summary is merged: its entries (this format, or Claude Code's, which uses the
same headings) come first and the new ones are added. The summary never exceeds
``budget_tokens``: whole entries are dropped, least important first (outlines, notes,
concepts ... files and the next step last), and only then is the text cut.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from typing import Any

import pandas as pd

from ctxlab.summarizers import register
from ctxlab.summarizers.base import (
    DEFAULT_BUDGET_TOKENS,
    Summarizer,
    Summary,
    input_tokens,
    resolve_estimator,
    tool_arguments,
)
from ctxlab.summarizers.notes import TITLES, _cut, _Entry, _Notes, fit
from ctxlab.tokens.base import Estimator

_LANGS = {"py": "Python", "ts": "TypeScript", "tsx": "TypeScript (React)", "js": "JavaScript",
          "jsx": "JavaScript (React)", "rs": "Rust", "go": "Go", "java": "Java", "rb": "Ruby",
          "sql": "SQL", "json": "JSON", "toml": "TOML", "yaml": "YAML", "yml": "YAML",
          "md": "Markdown", "css": "CSS", "html": "HTML", "sh": "shell", "c": "C", "cpp": "C++"}
_OPS = (("edited", ("edit", "replace", "patch", "update", "modify")),
        ("written", ("write", "create", "save")),
        ("read", ("read", "view", "cat", "open", "get_file")))
_IDENT = re.compile(r"`([^`\n]{3,60})`|\b([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|"
                    r"[a-z]+(?:[A-Z][a-z0-9]+)+|[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+)\b")
_ERROR = re.compile(r"(?i:^exit code [1-9]\d*$|^fatal:|^panic:|^error(?:\[\w+\])?:|"
                    r"returned non-zero exit status|^traceback \(most recent)|\bFAILED\b|"
                    r"\bERROR\b|\b(?:Error|Exception|Timeout)\b\s*:|^[\w.]*(?:Error|Exception)\b")
_PENDING = re.compile(r"(?i)\b(?:todo|to-do|still need(?:s|ed)? to|open question|follow[- ]up|"
                      r"remaining (?:work|tasks?|steps?)|pending (?:tasks?|work|items?|changes?)|"
                      r"not (?:yet )?done|left to do|next steps?:)|- \[ \]")
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
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
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


def _may_hold(text: str, words: tuple[str, ...]) -> bool:
    """False when ``text`` holds none of ``words`` in any case (ASCII texts only: Unicode
    case folding has more equivalents than `str.lower`)."""
    if not text.isascii():
        return True
    low = text.lower()
    return any(w in low for w in words)


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
    for raw in text.splitlines():
        line = _PERCENT.sub("", _E_PREFIX.sub("", raw.strip()))
        if not line or line.startswith("Traceback") or not _ERROR.search(line):
            continue
        line = _cut(line, 160)
        if line not in out:
            out.append(line)
        if len(out) >= limit:
            break
    return out




def merge_previous(notes: _Notes, previous: str) -> None:
    """Add the entries of an earlier summary (this format, Claude Code's, or free text)."""
    section, fenced, structured = 0, False, False
    titles = {t.lower() for t in TITLES}
    for raw in previous.splitlines():
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        m = _HEADING.match(raw)
        if m and not fenced and m.group(2).lower() in titles:
            section, structured = int(m.group(1)), True
            continue
        line = re.sub(r"^[-*]\s+", "", raw.strip())
        if fenced or not line or section == 0 or line == "(none)":
            continue
        nested = raw.startswith((" " * 4, "\t")) and raw.strip()[:1] in "-*"
        ops: tuple[str, ...] = ()
        if section in (3, 4, 5) and (suffix := _SUFFIX.match(line)):
            sep = "," if section == 3 else ";"
            line, ops = suffix.group(1), tuple(o.strip() for o in suffix.group(2).split(sep)
                                               if o.strip() != "…")
        if section == 3 and nested:
            op = re.match(r"(read|edited|written|created|modified|viewed)\b", line)
            if op and notes.of(3):
                notes.of(3)[-1].ops.extend([op.group(1)] if op.group(1) not in
                                           notes.of(3)[-1].ops else [])
            continue
        if section == 3 and (p := _PATH.match(line)) and p.end() == len(line):
            ops += tuple(o.strip() for o in (p.group(2) or "").split(",") if o.strip())
            notes.add(3, p.group(1), 6 if {"edited", "written"} & set(ops) else 5, ops=ops)
        else:
            notes.add(section, _cut(line, 400), _TIERS[section], ops=ops)
    if not structured:
        for path in sorted(set(re.findall(r"(?:/[\w.-]+){2,}", previous)), key=previous.index):
            notes.add(3, path, 5, ops=("mentioned",))
        for line in error_lines(previous, limit=10):
            notes.add(4, line, 4)
        notes.add(5, f"Earlier: {_cut(previous, 600)}", 3)


def _rows(parts: pd.DataFrame) -> list[dict[str, str]]:
    cols = ("role", "kind", "content", "tool_name", "tool_call_id", "file_path")
    data = {c: (parts[c].tolist() if c in parts else [None] * len(parts)) for c in cols}
    return [{c: v if isinstance(v := data[c][i], str) else "" for c in cols}
            for i in range(len(parts))]


def _command(args: dict[str, Any]) -> str:
    cmd = args.get("command", args.get("cmd", ""))
    if isinstance(cmd, list):
        cmd = " ".join(str(c) for c in cmd)
    return _cut(cmd, 200) if isinstance(cmd, str) else ""


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
        line = _LIST_MARK.sub("", line)
        out.extend(s.strip() for s in _SENTENCE.split(" ".join(line.split())) if s.strip())
    return out


class _Extraction:
    """One pass over the parts, filling the sections of ``notes``."""

    def __init__(self, notes: _Notes, rows: list[dict[str, str]]) -> None:
        self.notes, self.n_previous = notes, notes.count
        self.calls = {r["tool_call_id"]: r for r in rows
                      if r["kind"] == "tool_call" and r["tool_call_id"]}
        self.args = {cid: tool_arguments(c["content"], c["tool_name"])
                     for cid, c in self.calls.items()}
        self.idents: Counter[str] = Counter()
        self.techs: Counter[str] = Counter()
        self.failing: dict[str, _Entry] = {}
        self.edits_since: dict[str, list[str]] = {}
        self.steps: list[str] = []
        self.last_note = self.next_step = ""

    def row(self, r: dict[str, str]) -> None:
        kind, role, text, path = r["kind"], r["role"], r["content"], r["file_path"]
        if kind in ("text", "thinking", "tool_result", "attachment"):
            head = text[:20_000]
            if "`" in head or "_" in head or _CASE_HUMP.search(head):
                found = dict.fromkeys(x or y for x, y in _IDENT.findall(head))
                self.idents.update({i: 3 if kind in ("text", "thinking") else 1 for i in found})
        if path and "." in path.rsplit("/", 1)[-1] and kind != "tool_result":
            self.techs[_LANGS.get(path.rsplit(".", 1)[-1].lower(), "")] += 1
        said = kind == "text" and role in ("user", "assistant")
        sentences = _sentences(text) if said else []
        if kind in ("text", "thinking") and role in ("user", "assistant") \
                and _may_hold(text, _PENDING_WORDS):
            for s in sentences if said else _sentences(text):
                if _may_hold(s, _PENDING_WORDS) and _PENDING.search(s):
                    self.notes.add(7, _cut(s, 200), 2)
        if kind == "text" and role == "user":
            self.user(text, sentences)
        elif kind == "text" and role == "assistant":
            self.last_note = text
            if len(text) > 80:
                self.notes.add(5, f"Note: {_cut(text, 200)}", 1)
            intents = [s for s in sentences if _NEXT.match(s)]
            self.next_step = _cut(intents[-1], 200) if intents else self.next_step
        elif kind in ("tool_call", "tool_result", "attachment"):
            self.tool(r)

    def user(self, text: str, sentences: list[str]) -> None:
        asks = sentences[:1] + [s for s in sentences[1:]
                                if s.endswith("?") or _ASK.match(s) or _WANT.search(s)]
        if asks:
            self.notes.add(1, _cut(" ".join(asks), 240), 4)
            self.next_step = f"Continue with the user's latest request: {_cut(text, 200)}"
        self.notes.add(6, f'"{_cut(text, 400)}"', 2)

    def tool(self, r: dict[str, str]) -> None:
        kind, text, path, tool = r["kind"], r["content"], r["file_path"], r["tool_name"]
        cmd = _command(self.args.get(r["tool_call_id"], {}))
        op = operation(tool) if tool else ""
        what = f"$ {cmd}" if cmd else f"{tool} {path}".strip()
        if kind == "tool_call":
            if cmd:
                self.techs[_program(cmd)] += 1
                self.notes.add(5, f"`$ {cmd}`", 4)
            if path:
                self.notes.add(3, path, 6 if op in ("edited", "written") else 5, ops=(op,))
                for edited in self.edits_since.values() if op in ("edited", "written") else ():
                    edited.extend([path] if path not in edited else [])
            self.steps.append(what)
            return
        if path and (kind == "attachment" or r["tool_call_id"] not in self.calls):
            self.notes.add(3, path, 5, ops=(op or "attached",))
        if kind == "attachment":
            return
        if cmd:
            self.notes.add(5, f"`$ {cmd}`", 4, ops=(_outcome(text),))
        errs = error_lines(text) if op != "read" else []
        if errs:
            self.failing[what] = self.notes.add(4, f"{what}: {'; '.join(errs)}", 4)
            self.edits_since[what] = []
        elif what in self.failing:
            done = self.edits_since.pop(what, [])
            self.failing.pop(what).ops.append(f"fixed by editing {', '.join(done[:3])}"
                                              if done else "passed on a later run")
        if op != "read" and "/" in text:                # paths a listing or search showed
            found = itertools.islice(_PATH_IN_OUTPUT.finditer(text[:20_000]), 200)
            for seen in dict.fromkeys(m.group() for m in found):
                if self.notes.key(3, seen) not in self.notes.entries:  # touched files stay
                    self.notes.add(3, seen, 1, ops=("listed",))
        if op == "read" and path:
            lines = (_LINE_NO.sub("", ln).strip() for ln in text.splitlines()[:2000])
            for line in itertools.islice((ln for ln in lines if _OUTLINE.match(ln)), 4):
                self.notes.add(3, f"{path.rsplit('/', 1)[-1]}: {_cut(line.rstrip(':'), 80)}", 0)

    def finish(self) -> _Notes:
        notes, steps = self.notes, self.steps
        self.techs.pop("", None)
        for name, _ in sorted(self.techs.items(), key=lambda kv: -kv[1])[:6]:
            notes.add(2, name, 2)
        common = [i for i, n in self.idents.most_common(40) if n >= 2 and len(i) > 3][:12]
        for rank, ident in enumerate(common):
            notes.add(2, f"`{ident}`", 2 if rank < 5 else 0)
        for i, step in enumerate(steps[-5:], start=len(steps) - len(steps[-5:]) + 1):
            notes.add(8, f"step {i}/{len(steps)}: {step}", 3)
        if self.last_note:
            notes.add(8, f"Last said: {_cut(self.last_note, 200)}", 3)
        if self.next_step:
            notes.add(9, self.next_step, 5)
        for s in (8, 9):            # the latest work replaces the previous summary's
            if any(e.order > self.n_previous for e in notes.of(s)):
                notes.entries = {k: e for k, e in notes.entries.items()
                                 if e.section != s or e.order > self.n_previous}
        return notes


def extract(parts: pd.DataFrame, previous: str | None = None) -> _Notes:
    """The sections of a summary of ``parts``, merged onto ``previous`` (and onto the
    text of any ``summary`` part among ``parts``)."""
    notes = _Notes()
    rows = _rows(parts)
    earlier = [e for e in [previous or ""] + [r["content"] for r in rows
                                               if r["kind"] == "summary"] if e]
    if earlier:
        merge_previous(notes, "\n".join(earlier))
    run = _Extraction(notes, rows)
    for r in rows:
        run.row(r)
    return run.finish()


class Structured(Summarizer):
    """Offline, deterministic 9-section summary by extraction (the default summarizer).

    Example:
        >>> from ctxlab.tokens import estimator
        >>> parts = pd.DataFrame({"role": ["user", "assistant", "user"],
        ...     "kind": ["text", "tool_call", "tool_result"],
        ...     "content": ["Please fix the parser.", 'Bash({"command": "pytest -q"})',
        ...                 "Exit code 1\\nFAILED tests/test_parser.py::test_empty"],
        ...     "tool_name": [None, "Bash", "Bash"], "tool_call_id": [None, "t1", "t1"],
        ...     "file_path": [None, None, None]})
        >>> s = Structured().summarize(parts, previous=None, budget_tokens=300,
        ...                            estimator=estimator("chars:4"))
        >>> print(s.text.splitlines()[1])
        - Please fix the parser.
        >>> "FAILED tests/test_parser.py::test_empty" in s.text, s.output_tokens <= 300
        (True, True)
    """

    name = "structured"
    model = "extractive"

    def summarize(self, parts: pd.DataFrame, previous: str | None = None, *,
                  budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                  estimator: Estimator | str | None = None) -> Summary:
        estimator = resolve_estimator(estimator)
        text = fit(extract(parts, previous), max(0, int(budget_tokens)), estimator)
        return Summary(text=text, input_tokens=input_tokens(parts, previous, estimator),
                       output_tokens=int(estimator.count([text])[0]), ms=0.0,
                       backend=self.name, model=self.model)


STRUCTURED = register(Structured())
