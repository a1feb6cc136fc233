"""Claude Code's auto-compaction: one summary, then the most recently read files again.

What the real Claude Code logs show (CLI 2.1.39, ``../shared/realdata/claude_code``):
compaction replaces the whole conversation by one user message holding a summary
(12–16k characters, about 3.2–3.7k o200k tokens); nothing else of the old
conversation is sent again. Claude Code then re-attaches the files it read most
recently, and that content is not in the log: it shows only in the reported input of
the first call after compaction. Claude Code's client restores at most 5 files, newest
first, at most 5,000 tokens each and 50,000 in all, and puts a one-line note in place
of a file over the per-file limit. Those constants come from the client, not from the
logs, which cannot show them directly; with them the replayed input right after
compaction is within 16% of the reported one in all three real sessions (without any
files re-attached: up to 30% under; see ``tests/test_fidelity.py``).

Why one stage does both. A stage sees only the visible parts of the request; once a
summarize stage has hidden the old reads, a later stage cannot see their text. So
`Reattach` wraps a `Summarize` planner: it plans the summary on the full request,
then adds, right after the summary (same anchor, same side, in order), an
``attachment`` part for each of the latest reads that the summary hides. The whole
compaction is one edit, hence one event — as it is one step in Claude Code — and one
rewind undoes it. When the summarize planner makes no summary, nothing is
re-attached. Files whose latest read stays visible (kept verbatim) are not re-attached.

Reads are the tool results `ctxlab.stages.dedup.file_reads` recognises (``Read`` and
the like, ``cat <file>``), partial reads included, plus files this stage re-attached at
an earlier compaction. The model's limits:

* the content of the latest read stands in for the file as Claude Code re-reads it
  from disk, so later edits and unread parts of a partially read file are not there;
* Claude Code also restores files it edited or wrote, a plan file and invoked skills;
  those are not modelled (the one real session that used plan mode and a skill is
  6.6k tokens under its reported input right after compaction);
* the current prompt (L5) is never hidden by `Summarize`, so it stays verbatim where
  Claude Code folds it into the summary.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import Edit, NewPart, Stage, View
from ctxlab.stages.dedup import file_reads
from ctxlab.stages.summarize import Summarize
from ctxlab.stages.tool_output import meta_dict

MAX_FILES = 5  # Claude Code: files restored after compaction
MAX_TOKENS_PER_FILE = 5_000  # Claude Code: per restored file
MAX_TOKENS = 50_000  # Claude Code: all restored files together
SUMMARY_TOKENS = 4_000  # the real summaries: 3.2k-3.7k o200k tokens (12-16k characters)
SUMMARY_PREFIX = ("This conversation continues an earlier one that ran out of context; "
                  "what follows summarizes it.")
EXCLUDE = ("*/CLAUDE.md", "*/CLAUDE.local.md", "*/.claude/plans/*")
Oversize = Literal["reference", "truncate", "skip"]


def claude_code_summarize(**changes: Any) -> Summarize:
    """The summary step of Claude Code's compaction: everything, into one user message.

    Example:
        >>> s = claude_code_summarize()
        >>> s.keep_recent, s.role, s.budget_tokens
        (0, 'user', 4000)
    """
    params: dict[str, Any] = {"keep_recent": 0, "role": "user", "prefix": SUMMARY_PREFIX,
                              "budget_tokens": SUMMARY_TOKENS}
    return Summarize(**(params | changes))


def attachment_text(path: str, content: str) -> str:
    """The text of a re-attached file.

    Example:
        >>> attachment_text("src/a.py", "x = 1")
        'Contents of src/a.py, re-attached after compaction:\\nx = 1'
    """
    return f"Contents of {path}, re-attached after compaction:\n{content}"


def reference_text(path: str, tokens: int) -> str:
    """The note that stands in for a file too large to re-attach.

    Example:
        >>> print(reference_text("big.py", 9000).replace("; ", ";\\n"))
        big.py was read before compaction;
        at 9,000 tokens it is too large to re-attach. Read it again if it is needed.
    """
    return (f"{path} was read before compaction; at {tokens:,} tokens it is too large to "
            f"re-attach. Read it again if it is needed.")


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Reattach(Stage):
    """Summarize the conversation, then re-attach the latest reads it hides (Claude Code).

    Attributes:
        max_files: the most recently read files considered (5, Claude Code).
        max_tokens_per_file: a file's tokens may not exceed this (5,000, Claude Code).
        max_tokens: all re-attached files together (50,000, Claude Code); a file that
            would pass it is left out and the next one tried.
        oversize: a file over ``max_tokens_per_file``: ``"reference"`` (Claude Code: a
            one-line note), ``"truncate"`` (its head, cut to the limit) or ``"skip"``.
        exclude: glob patterns of paths never re-attached (memory and plan files, which
            Claude Code restores by other means).
        summarize: the summary step (`claude_code_summarize`: keep nothing, one user
            message, a 4,000-token budget).

    Example:
        >>> from ctxlab.stages import stage
        >>> r = stage("reattach", max_files=3)
        >>> r.max_files, r.max_tokens_per_file, r.summarize.keep_recent
        (3, 5000, 0)
    """

    name = "reattach"
    source = ("Claude Code auto-compaction as seen in real logs (CLI 2.1.39): summary, then "
              "up to 5 recently read files, 5,000 tokens each, 50,000 in all")
    max_files: int = MAX_FILES
    max_tokens_per_file: int = MAX_TOKENS_PER_FILE
    max_tokens: int = MAX_TOKENS
    oversize: Oversize = "reference"
    exclude: tuple[str, ...] = EXCLUDE
    summarize: Summarize = field(default_factory=claude_code_summarize)

    def __post_init__(self) -> None:
        problems = []
        for name in ("max_files", "max_tokens_per_file", "max_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                problems.append(f"{name} must be an integer >= 0, not {v!r}")
        if self.oversize not in ("reference", "truncate", "skip"):
            problems.append(f"oversize must be 'reference', 'truncate' or 'skip', not "
                            f"{self.oversize!r}")
        if not isinstance(self.exclude, tuple) or not all(isinstance(p, str)
                                                          for p in self.exclude):
            problems.append(f"exclude must be a tuple of glob patterns, not {self.exclude!r}")
        if not isinstance(self.summarize, Summarize):
            problems.append(f"summarize must be a Summarize stage (ctxlab.stages.stage("
                            f"'summarize', ...)), not {self.summarize!r}")
        if problems:
            raise ConfigError("reattach: " + "; ".join(problems))

    def plan(self, view: View) -> Edit | None:
        if view.parts.empty:
            return None
        base = self.summarize.plan(view)
        inserted = base.insert if base is not None else ()
        summary = next((n for n in inserted if n.kind == "summary"), None)
        if base is None or summary is None:
            why = base.reason if base is not None else "nothing to summarize"
            return Edit(stage=self.name, reason=f"no summary, nothing re-attached ({why})",
                        summarizer_calls=base.summarizer_calls if base is not None else ())
        hidden = set(base.hide)
        files = latest_reads(view.parts)
        gone = files[files["part"].isin(hidden) & ~files["path"].map(self._excluded)]
        chosen, oversize = self._attachments(view, gone.head(self.max_files), summary)
        # a compaction never makes the request bigger: drop files (oldest first) until
        # the summary and the files cost less than what they replace
        room = view.tokens_of(hidden) - view.estimate(summary.content) - 1
        while chosen and sum(t for t, _ in chosen) > room:
            chosen.pop()
        parts = tuple(n for _, n in chosen)
        spent = sum(t for t, _ in chosen)
        return Edit(stage=self.name, hide=base.hide, insert=(*base.insert, *parts),
                    reason=f"{base.reason}; re-attached {len(parts)} recently read "
                           f"file{'' if len(parts) == 1 else 's'} ({spent:,} tokens)",
                    details={**base.details, "reattached": len(parts),
                             "reattached_tokens": spent,
                             "reattached_files": [str(n.file_path) for n in parts],
                             "referenced": sum(1 for n in parts if n.meta.get("reference")),
                             "candidates": len(gone), "oversize": oversize,
                             "left_out": min(len(gone), self.max_files) - len(parts)},
                    summarizer_calls=base.summarizer_calls)

    def _excluded(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, p) for p in self.exclude)

    def _attachments(self, view: View, files: pd.DataFrame,
                     summary: NewPart) -> tuple[list[tuple[int, NewPart]], int]:
        """(tokens, part) of the files re-attached within ``max_tokens``, newest first,
        and how many files were over ``max_tokens_per_file``."""
        out: list[tuple[int, NewPart]] = []
        used = oversize = 0
        for r in files.itertuples():
            text = attachment_text(r.path, r.content)
            tokens = view.estimate(text)
            meta: dict[str, Any] = {"reattached_from": int(r.part), "read_pos": float(r.pos)}
            if tokens > self.max_tokens_per_file:
                oversize += 1
                if self.oversize == "skip":
                    continue
                if self.oversize == "reference":
                    text, meta["reference"] = reference_text(r.path, tokens), True
                else:
                    text, meta["truncated"] = self._cut(view, r.path, r.content), True
                tokens = view.estimate(text)
            if used + tokens > self.max_tokens:
                continue
            used += tokens
            out.append((tokens, NewPart(content=text, kind="attachment", role="user",
                                        anchor=summary.anchor, side=summary.side,
                                        join_message=False, file_path=r.path, meta=meta)))
        return out, oversize

    def _cut(self, view: View, path: str, content: str) -> str:
        """The head of a file's text whose attachment fits ``max_tokens_per_file``."""
        lo, hi = 0, len(content)
        while lo < hi:  # the longest head that fits (estimates grow with length)
            mid = (lo + hi + 1) // 2
            if view.estimate(attachment_text(path, content[:mid])) <= self.max_tokens_per_file:
                lo = mid
            else:
                hi = mid - 1
        return attachment_text(path, content[:lo])


def latest_reads(parts: pd.DataFrame) -> pd.DataFrame:
    """The latest read of every file in a request, newest first.

    Reads are the tool results `ctxlab.stages.dedup.file_reads` finds and the files an
    earlier compaction re-attached (not its notes on files too large to include).

    Returns:
        ``part``, ``path``, ``pos`` (of the read; for a re-attached file, of the read it
        copies), ``content`` (the file's text), one row per file, newest first.

    Example:
        >>> parts = pd.DataFrame({"part": [0, 1, 2, 3], "pos": [0.0, 1.0, 2.0, 3.0],
        ...     "kind": ["tool_call", "tool_result", "tool_call", "tool_result"],
        ...     "tool_name": ["Read"] * 4, "tool_call_id": ["a", "a", "b", "b"],
        ...     "file_path": ["x.py"] * 4, "event": [pd.NA] * 4, "meta": [None] * 4,
        ...     "content": ['Read({"file_path": "x.py"})', "v1",
        ...                 'Read({"file_path": "x.py"})', "v2"]})
        >>> latest_reads(parts)[["part", "path", "content"]].values.tolist()
        [[3, 'x.py', 'v2']]
    """
    cols = ["part", "path", "pos", "content"]
    if parts.empty:
        return pd.DataFrame(columns=cols)
    reads = file_reads(parts)[["part", "path"]]
    again = parts[(parts["kind"] == "attachment") & parts["event"].notna()
                  & parts["file_path"].notna()]
    read_pos = [_read_pos(m) for m in again["meta"]]
    keep = np.array([p is not None for p in read_pos], dtype=bool)
    again = again[keep]
    info = parts.set_index(parts["part"].astype("int64"))[["pos", "content"]]
    found = [reads.join(info, on="part"),
             pd.DataFrame({"part": again["part"].astype("int64").to_numpy(),
                           "path": again["file_path"].astype(object).to_numpy(),
                           "pos": np.array([p for p in read_pos if p is not None], dtype=float),
                           "content": [_unwrap(p, c) for p, c in
                                       zip(again["file_path"], again["content"])]})]
    found = [f for f in found if len(f)]
    if not found:
        return pd.DataFrame(columns=cols)
    rows = pd.concat(found, ignore_index=True) if len(found) > 1 else found[0]
    rows = rows.sort_values("pos", kind="stable").drop_duplicates("path", keep="last")
    out = rows.iloc[::-1][cols].reset_index(drop=True)
    return out.astype({"part": "int64", "pos": "float64"})


def _unwrap(path: str, text: str) -> str:
    """The file's text inside an attachment made by `attachment_text`."""
    return text.removeprefix(attachment_text(path, ""))


def _read_pos(meta: Any) -> float | None:
    """Where the read a re-attached file copies was, from the attachment's meta; None
    when the part is not a re-attached file with its content (a note, or another part)."""
    value = meta_dict(meta, "reattached_from")
    if value is None or "reattached_from" not in value or value.get("reference"):
        return None
    pos = value.get("read_pos")
    return float(pos) if isinstance(pos, (int, float)) else None
