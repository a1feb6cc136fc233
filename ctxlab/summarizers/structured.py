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
same headings) come first and the new ones are added; what Claude Code nests under a file
(what changed, code) stays with that file, up to `FILE_DETAIL_CHARS`. The summary never exceeds
``budget_tokens``: whole entries are dropped, least important first (outlines, notes,
concepts ... files and the next step last), and only then is the text cut.
"""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd

from ctxlab.stages.columns import strings
from ctxlab.stages.table import Table
from ctxlab.summarizers import register
from ctxlab.summarizers.base import (
    DEFAULT_BUDGET_TOKENS,
    Summarizer,
    Summary,
    input_tokens,
    resolve_estimator,
)
from ctxlab.summarizers.notes import TITLES, _cut, _cut_lines, _Entry, _Notes, fit
from ctxlab.summarizers.text_facts import (
    _HEADING,
    _LANGS,
    _PATH,
    _SUFFIX,
    _TIERS,
    _asks,
    _call_command,
    _idents,
    _listed,
    _outline,
    _program,
    _result,
    _said,
    error_lines,
    operation,
)
from ctxlab.tokens.base import Estimator


FILE_DETAIL_CHARS = 400
"""Characters of an earlier summary's details under one file (Claude Code nests what
changed and code under each file of "Files and Code Sections") kept with the file."""


def merge_previous(notes: _Notes, previous: str) -> None:
    """Add the entries of an earlier summary (this format, Claude Code's, or free text).
    A file's nested details and code (Claude Code's) stay with the file, up to
    `FILE_DETAIL_CHARS`."""
    section, fenced, structured = 0, False, False
    last: _Entry | None = None
    detail: dict[int, int] = {}         # file entry (order) -> detail characters left
    titles = {t.lower() for t in TITLES}

    def detail_of(line: str) -> None:
        """A nested line or a line of code under the last file: kept with it."""
        if last is None or last.section != 3 or section != 3:
            return
        left = detail.setdefault(last.order, FILE_DETAIL_CHARS)
        text = " ".join(line.split())
        if left <= 0 or not text:
            return
        cut = text if len(text) < left else text[:max(left - 1, 0)].rstrip() + "…"
        detail[last.order] = left - len(text) - 1
        notes.extend(last, cut)

    for raw in previous.splitlines():
        if raw.strip().startswith("```"):
            fenced = not fenced
            continue
        m = _HEADING.match(raw)
        if m and not fenced and m.group(2).lower() in titles:
            section, structured = int(m.group(1)), True
            continue
        line = re.sub(r"^[-*]\s+", "", raw.strip())
        if fenced:
            detail_of(raw)
            continue
        if not line or section == 0 or line == "(none)":
            continue
        if raw[:2] == "  " and raw[2:3] not in (" ", "\t") and last is not None \
                and last.section == section:
            # a continuation line of this format's entry of several lines (an error line,
            # a line of a user message, what became of a failure)
            said = re.fullmatch(r"\((.*)\)", raw.strip())
            if said and section in (3, 4, 5):
                sep = "," if section == 3 else ";"
                last.ops.extend(o.strip() for o in said.group(1).split(sep)
                                if o.strip() not in ("", "…") and o.strip() not in last.ops)
            else:
                notes.extend(last, " ".join(raw.split()))
            continue
        nested = raw.startswith((" " * 4, "\t")) and raw.strip()[:1] in "-*"
        ops: tuple[str, ...] = ()
        whole = line
        if section in (3, 4, 5) and (suffix := _SUFFIX.match(line)):
            sep = "," if section == 3 else ";"
            line, ops = suffix.group(1), tuple(o.strip() for o in suffix.group(2).split(sep)
                                               if o.strip() != "…")
        if section == 3 and nested:
            op = re.match(r"(read|edited|written|created|modified|viewed)\b", line)
            if op and notes.of(3):
                notes.of(3)[-1].ops.extend([op.group(1)] if op.group(1) not in
                                           notes.of(3)[-1].ops else [])
            else:
                detail_of(whole)
            continue
        if section == 3 and (p := _PATH.match(line)) and p.end() == len(line):
            ops += tuple(o.strip() for o in (p.group(2) or "").split(",") if o.strip())
            last = notes.add(3, p.group(1), 6 if {"edited", "written"} & set(ops) else 5,
                             ops=ops)
        else:
            last = notes.add(section, _cut(line, 400), _TIERS[section], ops=ops)
    if not structured:
        for path in sorted(set(re.findall(r"(?:/[\w.-]+){2,}", previous)), key=previous.index):
            notes.add(3, path, 5, ops=("mentioned",))
        for line in error_lines(previous, limit=10):
            notes.add(4, line, 4)
        notes.add(5, f"Earlier: {_cut(previous, 600)}", 3)


_COLUMNS = ("role", "kind", "content", "tool_name", "tool_call_id", "file_path")
_Row = tuple[str, str, str, str, str, str]   # the _COLUMNS of one part, "" for missing


def _rows(parts: pd.DataFrame | Table) -> list[_Row]:
    cols = [[v if isinstance(v, str) else "" for v in strings(parts, c).tolist()]
            if c in parts else [""] * len(parts) for c in _COLUMNS]
    return list(zip(*cols))


class _Extraction:
    """One pass over the parts, filling the sections of ``notes``."""

    def __init__(self, notes: _Notes, rows: list[_Row]) -> None:
        self.notes, self.n_previous = notes, notes.count
        calls = {r[4]: r for r in rows if r[1] == "tool_call" and r[4]}
        self.commands = {cid: _call_command(r[2], r[3]) for cid, r in calls.items()}
        # each command as shown (cut), once: a call and its result both show it
        self.shown = {cid: _cut(cmd, 200) for cid, cmd in self.commands.items() if cmd}
        self.idents: Counter[str] = Counter()
        self.techs: Counter[str] = Counter()
        self.failing: dict[str, _Entry] = {}
        self.edits_since: dict[str, list[str]] = {}
        for e in notes.of(4):       # failures an earlier summary left open: a later run
            if not e.ops and ":\n" in e.text:     # here may fix them, as in one pass
                key = e.text.split(":\n", 1)[0]
                self.failing.setdefault(key, e)
                self.edits_since.setdefault(key, [])
        self.steps: list[str] = []
        self.last_note = self.next_step = ""

    def row(self, r: _Row) -> None:
        role, kind, text, _, _, path = r
        if kind in ("text", "thinking", "tool_result", "attachment"):
            found = _idents(text)
            if found:
                weight = 3 if kind in ("text", "thinking") else 1
                idents = self.idents
                for i in found:
                    idents[i] += weight
        if path and kind != "tool_result" and "." in path.rsplit("/", 1)[-1]:
            self.techs[_LANGS.get(path.rsplit(".", 1)[-1].lower(), "")] += 1
        if kind in ("text", "thinking") and role in ("user", "assistant"):
            _, pending, intent = _said(text)
            for item in pending:
                self.notes.add(7, item, 2)
            if kind == "text" and role == "user":
                if ask := _asks(text):
                    self.notes.add(1, ask, 4)
                    self.next_step = f"Continue with the user's latest request: {_cut(text, 200)}"
                said = _cut_lines(text, 400)
                # quoted when one line; a message of several lines keeps its last line as
                # it was (an error line, an instruction)
                self.notes.add(6, said if "\n" in said else f'"{said}"', 2)
            elif kind == "text":
                self.last_note = text
                if len(text) > 80:
                    self.notes.add(5, f"Note: {_cut(text, 200)}", 1)
                self.next_step = intent or self.next_step
        elif kind in ("tool_call", "tool_result", "attachment"):
            self.tool(r)

    def tool(self, r: _Row) -> None:
        _, kind, text, tool, call_id, path = r
        notes = self.notes
        whole = self.commands.get(call_id, "")
        cmd = self.shown.get(call_id, "")   # a failure is known by the whole command
        op = operation(tool) if tool else ""
        what = f"$ {cmd}" if cmd else f"{tool} {path}".strip()
        key = f"$ {whole}" if whole else what
        if kind == "tool_call":
            if cmd:
                self.techs[_program(cmd)] += 1
                notes.add(5, f"`$ {cmd}`", 4)
            if path:
                notes.add(3, path, 6 if op in ("edited", "written") else 5, ops=(op,))
                for edited in self.edits_since.values() if op in ("edited", "written") else ():
                    edited.extend([path] if path not in edited else [])
            self.steps.append(what)
            return
        if path and (kind == "attachment" or call_id not in self.commands):
            notes.add(3, path, 5, ops=(op or "attached",))
        if kind == "attachment":
            return
        outcome, errs = _result(text) if cmd or op != "read" else ("", ())
        if cmd:
            notes.add(5, f"`$ {cmd}`", 4, ops=(outcome,))
        if op == "read":
            errs = ()
        if errs:
            # each error line on a line of its own, as the output had it
            self.failing[key] = notes.add(4, f"{what}:" + "".join(f"\n  {e}" for e in errs), 4)
            self.edits_since[key] = []
        elif key in self.failing:
            done = self.edits_since.pop(key, [])
            self.failing.pop(key).ops.append(f"fixed by editing {', '.join(done[:3])}"
                                             if done else "passed on a later run")
        if op != "read" and "/" in text:                # paths a listing or search showed
            for seen in _listed(text):
                if notes.key(3, seen) not in notes.entries:  # touched files stay
                    notes.add(3, seen, 1, ops=("listed",))
        if op == "read" and path:
            name = path.rsplit("/", 1)[-1]
            for line in _outline(text):
                notes.add(3, f"{name}: {line}", 0)

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


def extract(parts: pd.DataFrame | Table, previous: str | None = None) -> _Notes:
    """The sections of a summary of ``parts``, merged onto ``previous`` (and onto the
    text of any ``summary`` part among ``parts``)."""
    notes = _Notes()
    rows = _rows(parts)
    earlier = [e for e in [previous or ""] + [r[2] for r in rows if r[1] == "summary"] if e]
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
        return self._summarize(parts, previous, budget_tokens, estimator)

    def summarize_table(self, parts: Table, previous: str | None = None, *,
                        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                        estimator: Estimator | str | None = None) -> Summary:
        """`summarize` reading the table's columns (no DataFrame is built)."""
        return self._summarize(parts, previous, budget_tokens, estimator)

    def _summarize(self, parts: pd.DataFrame | Table, previous: str | None,
                   budget_tokens: int, estimator: Estimator | str | None) -> Summary:
        estimator = resolve_estimator(estimator)
        text = fit(extract(parts, previous), max(0, int(budget_tokens)), estimator)
        return Summary(text=text, input_tokens=input_tokens(parts, previous, estimator),
                       output_tokens=int(estimator.count([text])[0]), ms=0.0,
                       backend=self.name, model=self.model)


STRUCTURED = register(Structured())
