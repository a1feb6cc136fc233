"""Claude Code's auto-compaction: one summary, then the files and the plan it restores.

What the real Claude Code logs show (CLI 2.1.39, ``../shared/realdata/claude_code``):
compaction replaces the whole conversation by one user message holding a summary
(12–16k characters); nothing else of the old conversation is sent again. Claude Code
then restores what it needs to carry on, and none of it is in the log: it shows only
in the reported input of the first call after compaction. `Reattach` models it after
the client:

* files: Claude Code keeps, per file, what it last read or wrote and the file's
  modification time then, and reads again the 5 most recently *modified* — files it
  wrote or edited first, newest write first, then files it only read — at most 5,000
  tokens each (a one-line note stands in for a larger file) and 50,000 in all;
* the plan: the plan file of plan mode, whole, with Claude Code's note around it;
* the session-start context (memory files, SessionStart hooks such as ``bd prime``) is
  sent again as at the session's first call: that is part of the unrecorded overhead
  a replay adds to every request, not of this stage.

The files' text is what the log says the agent knew (`ctxlab.stages.file_state`): the
latest whole read or write with later edits applied, numbered as the Read tool numbers
lines. Those constants come from the client, not from the logs, which cannot show them.

Why one stage does both. A stage sees only the visible parts of the request; once a
summarize stage has hidden the old reads, a later stage cannot see their text. So
`Reattach` wraps a `Summarize` planner: it plans the summary on the full request,
then adds, right after the summary (same anchor, same side, in order), an
``attachment`` part for each file and the plan. The whole compaction is one edit,
hence one event — as it is one step in Claude Code — and one rewind undoes it. When
the summarize planner makes no summary, nothing is re-attached. Files whose latest
read stays visible (kept verbatim) are not re-attached.

Limits of the model:

* a file known only from a partial read is re-attached as that fragment (Claude Code
  reads the whole file, which may then be over the per-file limit);
* changes made outside the agent's file tools (formatters, generators, ``git``) are
  not seen, and files only read are ordered by when they were read (their real
  modification times are not in the log);
* invoked skills, the to-do list and background tasks, which Claude Code also
  restores, are not modelled (none of the real sessions restored one: its only skill
  call failed);
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
from ctxlab.stages.file_state import file_states, numbered
from ctxlab.stages.summarize import Summarize

MAX_FILES = 5  # Claude Code: files restored after compaction
MAX_TOKENS_PER_FILE = 5_000  # Claude Code: per restored file
MAX_TOKENS = 50_000  # Claude Code: all restored files together
SUMMARY_TOKENS = 4_000  # the real summaries: 3.2k-3.7k o200k tokens (12-16k characters)
SUMMARY_PREFIX = ("This session is being continued from a previous conversation that ran out "
                  "of context. The summary below covers the earlier portion of the "
                  "conversation.")  # Claude Code's own words, as the logs record them
PLANS = ("*/.claude/plans/*",)
EXCLUDE = ("*/CLAUDE.md", "*/CLAUDE.local.md", *PLANS)
Oversize = Literal["reference", "truncate", "skip"]
Order = Literal["modified", "read"]


def claude_code_summarize(**changes: Any) -> Summarize:
    """The summary step of Claude Code's compaction: everything, into one user message.

    Example:
        >>> s = claude_code_summarize()
        >>> s.keep_recent, s.role, s.budget_tokens, s.summarizer
        (0, 'user', 4000, 'structured')
    """
    params: dict[str, Any] = {"keep_recent": 0, "role": "user", "prefix": SUMMARY_PREFIX,
                              "budget_tokens": SUMMARY_TOKENS}
    return Summarize(**(params | changes))


def attachment_text(path: str, content: str) -> str:
    """The text of a re-attached file.

    Example:
        >>> attachment_text("src/a.py", "     1→x = 1")
        'Contents of src/a.py, re-attached after compaction:\\n     1→x = 1'
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


def plan_text(path: str, content: str) -> str:
    """The plan re-attached after compaction, in Claude Code's words.

    Example:
        >>> text = plan_text("/h/.claude/plans/p.md", "1. Do it")
        >>> text.splitlines()[:5]  # doctest: +NORMALIZE_WHITESPACE
        ['A plan file exists from plan mode at: /h/.claude/plans/p.md', '',
         'Plan contents:', '', '1. Do it']
    """
    return (f"A plan file exists from plan mode at: {path}\n\nPlan contents:\n\n"
            f"{content}\n\nIf this plan is relevant to the current work and not already "
            f"complete, continue working on it.")


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Reattach(Stage):
    """Summarize the conversation, then re-attach recent files and the plan (Claude Code).

    Attributes:
        max_files: the most recently modified files considered (5, Claude Code).
        max_tokens_per_file: a file's tokens may not exceed this (5,000, Claude Code).
        max_tokens: all re-attached files together (50,000, Claude Code); a file that
            would pass it is left out and the next one tried.
        oversize: a file over ``max_tokens_per_file``: ``"reference"`` (Claude Code: a
            one-line note), ``"truncate"`` (its head, cut to the limit) or ``"skip"``.
        order: which files are the most recent: ``"modified"`` (Claude Code: written or
            edited files first, by their latest write, then files only read, by their
            latest read) or ``"read"`` (by the latest read or write, whichever is later).
        exclude: glob patterns of paths never re-attached as files (memory and plan
            files, which Claude Code restores by other means).
        plans: glob patterns of plan files; the most recent one with known content is
            re-attached whole (`plan_text`). Empty: no plan.
        summarize: the summary step (`claude_code_summarize`: keep nothing, one user
            message, a 4,000-token budget).

    Example:
        >>> from ctxlab.stages import stage
        >>> r = stage("reattach", max_files=3)
        >>> r.max_files, r.max_tokens_per_file, r.order, r.summarize.keep_recent
        (3, 5000, 'modified', 0)
    """

    name = "reattach"
    source = ("Claude Code auto-compaction (CLI 2.1.39, real logs): summary, then up to 5 "
              "recently modified files, 5,000 tokens each, 50,000 in all, and the plan")
    max_files: int = MAX_FILES
    max_tokens_per_file: int = MAX_TOKENS_PER_FILE
    max_tokens: int = MAX_TOKENS
    oversize: Oversize = "reference"
    order: Order = "modified"
    exclude: tuple[str, ...] = EXCLUDE
    plans: tuple[str, ...] = PLANS
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
        if self.order not in ("modified", "read"):
            problems.append(f"order must be 'modified' or 'read', not {self.order!r}")
        for name in ("exclude", "plans"):
            v = getattr(self, name)
            if not isinstance(v, tuple) or not all(isinstance(p, str) for p in v):
                problems.append(f"{name} must be a tuple of glob patterns, not {v!r}")
        if not isinstance(self.summarize, Summarize):
            problems.append(f"summarize must be a Summarize stage (ctxlab.stages.stage("
                            f"'summarize', ...)), not {self.summarize!r}")
        if problems:
            raise ConfigError("reattach: " + "; ".join(problems))

    def plan(self, view: View) -> Edit | None:
        if not len(view):
            return None
        base = self.summarize.plan(view)
        inserted = base.insert if base is not None else ()
        summary = next((n for n in inserted if n.kind == "summary"), None)
        if base is None or summary is None:
            why = base.reason if base is not None else "nothing to summarize"
            return Edit(stage=self.name, reason=f"no summary, nothing re-attached ({why})",
                        summarizer_calls=base.summarizer_calls if base is not None else (),
                        failure=base.failure if base is not None else None)
        hidden = set(base.hide)
        p = view.parts
        kept = p[~p["part"].isin(list(hidden))]
        states = file_states(p)
        states = states[states["content"].notna()
                        & ~states["path"].isin(set(file_reads(kept)["path"]))]
        plan = self._plan_file(view, states, summary)
        excluded = np.array([self._excluded(x) for x in states["path"]], dtype=bool)
        files = self.recent(states[~excluded])
        chosen, oversize = self._attachments(view, files.head(self.max_files), summary)
        if plan is not None:
            chosen.append(plan)
        # a compaction never makes the request bigger: drop the plan, then files (oldest
        # first) until the summary and what follows it cost less than what they replace
        room = view.tokens_of(hidden) - view.estimate(summary.content) - 1
        while chosen and sum(t for t, _ in chosen) > room:
            chosen.pop()
        parts = tuple(n for _, n in chosen)
        spent = sum(t for t, _ in chosen)
        n_files = sum(1 for n in parts if not n.meta.get("plan"))
        planned = len(parts) - n_files
        return Edit(stage=self.name, hide=base.hide, insert=(*base.insert, *parts),
                    reason=f"{base.reason}; re-attached {n_files} recent "
                           f"file{'' if n_files == 1 else 's'}"
                           f"{' and the plan' if planned else ''} ({spent:,} tokens)",
                    details={**base.details, "reattached": n_files,
                             "reattached_tokens": spent, "plan": bool(planned),
                             "reattached_files": [str(n.file_path) for n in parts
                                                  if not n.meta.get("plan")],
                             "referenced": sum(1 for n in parts if n.meta.get("reference")),
                             "candidates": len(files), "oversize": oversize,
                             "left_out": min(len(files), self.max_files) - n_files},
                    summarizer_calls=base.summarizer_calls)

    def recent(self, states: pd.DataFrame) -> pd.DataFrame:
        """`file_states` rows in the order files are re-attached, most recent first."""
        if self.order == "read":
            key = states["recent_pos"]
        else:  # written files rank above every file only read
            newest = states["recent_pos"].max()
            span = float(newest) + 1.0 if len(states) and not np.isnan(newest) else 0.0
            key = states["written_pos"].add(span).fillna(states["read_pos"])
        return states.assign(_key=key.to_numpy()).sort_values(
            "_key", ascending=False, kind="stable").drop(columns="_key")

    def _excluded(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, p) for p in self.exclude)

    def _plan_file(self, view: View, states: pd.DataFrame,
                   summary: NewPart) -> tuple[int, NewPart] | None:
        """(tokens, part) of the most recent plan file, if any."""
        if not self.plans or states.empty:
            return None
        plans = states[np.array([any(fnmatch.fnmatchcase(x, p) for p in self.plans)
                                 for x in states["path"]], dtype=bool)]
        if plans.empty:
            return None
        r = plans.iloc[0]
        text = plan_text(r["path"], r["content"])
        start = text.index("\n\nPlan contents:\n\n") + len("\n\nPlan contents:\n\n")
        return view.estimate(text), NewPart(
            content=text, kind="attachment", role="user", anchor=summary.anchor,
            side=summary.side, join_message=False, file_path=r["path"],
            meta={"plan": True, "text_span": [start, start + len(r["content"])],
                  "read_pos": _pos(r["read_pos"]), "written_pos": _pos(r["written_pos"])})

    def _attachments(self, view: View, files: pd.DataFrame,
                     summary: NewPart) -> tuple[list[tuple[int, NewPart]], int]:
        """(tokens, part) of the files re-attached within ``max_tokens``, newest first,
        and how many files were over ``max_tokens_per_file``."""
        out: list[tuple[int, NewPart]] = []
        used = oversize = 0
        for r in files.itertuples():
            body = numbered(r.content, int(r.first_line))
            text = attachment_text(r.path, body)
            tokens = view.estimate(text)
            meta: dict[str, Any] = {"text_span": [len(text) - len(body), len(text)],
                                    "read_pos": _pos(r.read_pos),
                                    "written_pos": _pos(r.written_pos)}
            if tokens > self.max_tokens_per_file:
                oversize += 1
                if self.oversize == "skip":
                    continue
                if self.oversize == "reference":
                    text, meta["reference"] = reference_text(r.path, tokens), True
                    del meta["text_span"]
                else:
                    text, meta["truncated"] = self._cut(view, r.path, body), True
                    meta["text_span"] = [len(attachment_text(r.path, "")), len(text)]
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


def _pos(value: float) -> float | None:
    """A position for the meta JSON (None for NaN)."""
    return None if np.isnan(value) else float(value)
