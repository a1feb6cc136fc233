"""Summarization (seed 000 stage 3, seed 004's SummarizationStrategy, seed 003's map-reduce).

History mode (seeds 000 and 004): the older conversation messages are replaced by one
summary message; the most recent ones are kept verbatim. Seed 000 keeps
``max(4, ceil(0.3 × messages))``, does nothing with 4 or fewer messages, merges a
previous summary into the new one (iterative summarization), inserts the summary as a
``system`` message and falls through silently when the summarizer fails. Seed 004 keeps
exactly N messages and prefixes the summary with ``[Summary of earlier conversation]``
(``keep_recent=N, prefix=SEED_004_PREFIX, role="user"``; the ``neuron`` preset, which follows
seed 004's default strategies, does not include this stage).

Blocks mode (seed 003's ContextCompactor): every context block of the carried and current
layers (L2, L3: attachments and tool results) longer than ``block_chars`` is summarized
on its own (map); when the block summaries together are still over the budget, they are
summarized together (reduce). The user's prompt (L5) is never touched.

Only conversation messages are summarized: system parts (L1), tool schemas and the
current prompt (L5) stay. The boundary between summarized and kept messages never
splits a tool call from its result, and is moved earlier (keeping more) when the kept
messages would open the conversation with something other than a user message. When no
such boundary exists (a run of tool calls since the last user message, as after a
compaction in an agent loop), the summary still replaces the older messages, as seed 000
does (``[summary, ...recent]``), and the request's grammar check counts what opens it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from ctxlab import summarizers
from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, Messages, NewPart, Rows, Stage, View, ints, labels,
                                message_groups, one_of, optional_text, part_rows, strings,
                                text_lengths)
from ctxlab.summarizers.base import Summarizer, SummarizerError, Summary
from ctxlab.wording import counted

SEED_004_PREFIX = "[Summary of earlier conversation]"
_FIXED = frozenset({"system", "tools", "prompt"})


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class Summarize(Stage):
    """Replace older messages (or large context blocks) by a summary.

    Attributes:
        keep_recent_ratio: share of the conversation messages kept verbatim (0.3, seed 000).
        min_recent: at least this many recent messages are kept (4, seed 000).
        keep_recent: keep exactly this many recent messages, overriding the ratio (seed
            004's N); None uses the ratio.
        min_messages: summarize only when there are at least this many conversation
            messages (5: seed 000 does nothing with 4 or fewer).
        summarizer: the summarizer's registry name (an instance is accepted and stored as
            its name; it must be registered); resolved when the stage plans.
        role: the summary message's role (``"system"``, seed 000; seed 004 uses ``"user"``).
        prefix: a line put before the summary (seed 004: ``"[Summary of earlier
            conversation]"``).
        budget_tokens: the summary's token budget; None: ``min(8000, 10% of the target)``.
        mode: ``"history"`` (seeds 000, 004) or ``"blocks"`` (seed 003).
        block_chars: blocks mode summarizes blocks longer than this (50,000, seed 003).

    Example:
        >>> from ctxlab.stages import stage
        >>> s = stage("summarize", keep_recent=5, prefix=SEED_004_PREFIX, role="user")
        >>> s.keep_recent, s.summarizer, s.mode
        (5, 'structured', 'history')
    """

    name = "summarize"
    source = ("seed 000 (NeuroLink summarizeMessages); seed 004 (neuron SummarizationStrategy); "
              "seed 003 (Copilot ContextCompactor map-reduce, blocks mode)")
    keep_recent_ratio: float = 0.3
    min_recent: int = 4
    keep_recent: int | None = None
    min_messages: int = 5
    summarizer: str = "structured"
    role: Literal["system", "user"] = "system"
    prefix: str = ""
    budget_tokens: int | None = None
    mode: Literal["history", "blocks"] = "history"
    block_chars: int = 50_000

    def __post_init__(self) -> None:
        if isinstance(self.summarizer, Summarizer):
            if summarizers.REGISTRY.find(self.summarizer.name) is not self.summarizer:
                raise ConfigError(f"summarize: summarizer {self.summarizer!r} is not registered; "
                                  f"register it with ctxlab.summarizers.register(...) first")
            object.__setattr__(self, "summarizer", self.summarizer.name)
        problems = []
        ratio = self.keep_recent_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) \
                or not 0.0 <= ratio <= 1.0:
            problems.append(f"keep_recent_ratio must be a number in [0, 1], not {ratio!r}")
        for f in ("min_recent", "min_messages", "keep_recent"):
            v = getattr(self, f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                problems.append(f"{f} must be an integer >= 0, not {v!r}")
        if self.role not in ("system", "user"):
            problems.append(f"role must be 'system' or 'user', not {self.role!r}")
        if self.mode not in ("history", "blocks"):
            problems.append(f"mode must be 'history' or 'blocks', not {self.mode!r}")
        if isinstance(self.block_chars, bool) or not isinstance(self.block_chars, int) \
                or self.block_chars < 1:
            problems.append(f"block_chars must be a positive integer, not {self.block_chars!r}")
        if self.budget_tokens is not None and (isinstance(self.budget_tokens, bool)
                                               or not isinstance(self.budget_tokens, int)
                                               or self.budget_tokens < 1):
            problems.append(f"budget_tokens must be a positive integer or None, "
                            f"not {self.budget_tokens!r}")
        if not isinstance(self.prefix, str):
            problems.append(f"prefix must be a string, not {self.prefix!r}")
        if problems:
            raise ConfigError("summarize: " + "; ".join(problems))
        summarizers.summarizer(self.summarizer)

    def plan(self, view: View) -> Edit | None:
        if not len(view):
            return None
        backend = summarizers.summarizer(self.summarizer)
        budget = self.budget_tokens or max(1, min(8000, view.target_tokens // 10))
        if self.mode == "blocks":
            return self._plan_blocks(view, backend, budget)
        return self._plan_history(view, backend, budget)

    # ---- history mode -----------------------------------------------------------------
    def keep_count(self, messages: int) -> int:
        """How many of ``messages`` conversation messages are kept verbatim.

        Example:
            >>> Summarize().keep_count(10), Summarize().keep_count(40)
            (4, 12)
            >>> Summarize(keep_recent=5).keep_count(40)
            5
        """
        if self.keep_recent is not None:
            return self.keep_recent
        return max(self.min_recent, math.ceil(self.keep_recent_ratio * messages - 1e-9))

    def _plan_history(self, view: View, backend: Summarizer, budget: int) -> Edit:
        p = view
        msgs = _Messages.of(p)
        cand = np.flatnonzero(msgs.candidate)
        n = len(cand)
        keep = self.keep_count(n)
        if n < self.min_messages or n <= keep:
            why = (f"{counted(n, 'conversation message')}, fewer than {self.min_messages}"
                   if n < self.min_messages else f"{counted(n, 'conversation message')}, all "
                   f"kept (keeping the {keep} most recent)")
            return Edit(stage=self.name, reason=f"nothing to summarize: {why}")
        b, opens = _boundary(msgs, cand, n - keep, self.role), True
        if b is None:
            # a tool loop since the last user message: seed 000 keeps [summary, ...recent]
            # whatever opens them (the request's grammar counts it)
            b, opens = _boundary(msgs, cand, n - keep, self.role, opener=False), False
        if b is None:
            return Edit(stage=self.name, reason="nothing to summarize: no boundary keeps tool "
                        "pairs together")
        part_ids = ints(p, "part")
        grouped = msgs.groups.rows_of(cand[:b])
        hide = part_ids[grouped].tolist()                     # message by message
        rows = np.sort(grouped)                               # in position order
        is_prev = msgs.kind[rows] == "summary"
        previous = "\n\n".join(_strip(r.content, self.prefix)
                               for r in part_rows(p, rows[is_prev], ("content",)))
        hidden_tokens = int(ints(p, "tokens")[rows].sum())
        header = f"{self.prefix}\n" if self.prefix else ""
        room = min(budget, hidden_tokens - 1) - view.estimate(header)
        if room < 1:
            return Edit(stage=self.name, reason=f"nothing to summarize: the {b} older messages "
                        f"hold only {hidden_tokens:,} tokens")
        try:
            summary = backend.summarize_table(view.table.take(rows[~is_prev]),
                                              previous=previous or None,
                                              budget_tokens=room, estimator=view.estimator)
        except SummarizerError as e:
            return Edit(stage=self.name, reason=f"summarizer failed: {e}", failure=e.kind)
        if not summary.text.strip():
            return Edit(stage=self.name, reason="summarizer returned an empty summary",
                        summarizer_calls=(summary.call_record(),))
        content = header + summary.text
        if b < n:
            anchor, side = int(part_ids[msgs.groups.first_rows[cand[b]]]), "before"
        else:
            anchor, side = hide[-1], "after"
        new = NewPart(content=content, kind="summary", role=self.role, anchor=anchor,
                      side=side, join_message=False,
                      meta={"summarized_messages": b, "backend": summary.backend})
        tokens = view.estimate(content)
        merged = " and merged the previous summary" if previous else ""
        kept = "kept none" if b >= n else f"kept the {n - b} most recent" + (
            "" if opens else ", which no user message opens (a run of tool calls)")
        return Edit(stage=self.name, hide=tuple(hide), insert=(new,),
                    reason=f"summarized the {counted(b, 'oldest conversation message')} "
                           f"({hidden_tokens:,} tokens) into {tokens:,} tokens{merged}; {kept}",
                    details={"messages": n, "summarized": b, "kept": n - b,
                             "merged_previous": bool(previous), "opens_with_user": opens,
                             "hidden_tokens": hidden_tokens,
                             "summary_tokens": tokens, "budget_tokens": room},
                    summarizer_calls=(summary.call_record(),))

    # ---- blocks mode ------------------------------------------------------------------
    def _plan_blocks(self, view: View, backend: Summarizer, budget: int) -> Edit | None:
        p = view
        chars = text_lengths(p)
        kind = labels(p, "kind")
        big = np.flatnonzero(one_of(labels(p, "layer"), ("carried", "current"))
                             & one_of(kind, ("attachment", "tool_result"))
                             & (chars > self.block_chars))
        if not len(big):    # said: "nothing to do" over the limit read as a failure
            return Edit(stage=self.name, reason=f"nothing to summarize: no carried or current "
                        f"attachment or tool result over {self.block_chars:,} characters")
        part, call_ids, is_call = ints(p, "part"), \
            strings(p, "tool_call_id"), kind == "tool_call"
        calls: list[dict[str, Any]] = []
        rows = part_rows(p, big, ("part", "kind", "role", "content", "tool_name", "tool_call_id",
                                  "file_path", "tokens"))
        heads = [self.prefix or f"[Summary of a {len(row.content):,}-character "
                 f"{str(row.kind).replace('_', ' ')}]" for row in rows]
        done: list[tuple[Any, str, Summary]] = []
        try:
            for row, head, head_tokens in zip(rows, heads,
                                              view.estimate_all([h + "\n" for h in heads])):
                in_block = part == row.part           # the block and the call it answers
                if row.tool_call_id is not None:
                    in_block |= is_call & (call_ids == row.tool_call_id)
                s = backend.summarize_table(view.table.take(np.flatnonzero(in_block)),
                                            previous=None, estimator=view.estimator,
                                            budget_tokens=max(1, budget - head_tokens))
                calls.append(s.call_record())
                if s.text.strip():
                    done.append((row, f"{head}\n{s.text}", s))
            maps = [m for m, tokens in zip(done, view.estimate_all([t for _, t, _ in done]))
                    if tokens < int(m[0].tokens)]
            reduced = None
            if len(maps) > 1 and sum(s.output_tokens for _, _, s in maps) > budget:
                head = self.prefix or "[Summary of the large context blocks]"
                reduced = backend.summarize_table(view.table.take([]), previous="\n\n".join(
                    s.text for _, _, s in maps), estimator=view.estimator,
                    budget_tokens=max(1, budget - view.estimate(head + "\n")))
                calls.append(reduced.call_record())
        except SummarizerError as e:
            return Edit(stage=self.name, reason=f"summarizer failed: {e}",
                        summarizer_calls=tuple(calls), failure=e.kind)
        if not maps:
            return Edit(stage=self.name, reason=f"{len(big)} blocks over {self.block_chars:,} "
                        f"characters, but no summary was smaller", summarizer_calls=tuple(calls))
        inserts = []
        for i, (row, text, _) in enumerate(maps):
            if reduced is not None:
                text = f"{head}\n{reduced.text}" if i == 0 else \
                    f"[{str(row.kind).replace('_', ' ').capitalize()} summarized with the " \
                    f"other large blocks above]"
            inserts.append(NewPart(
                content=text, kind=row.kind, role=row.role, anchor=int(row.part),
                join_message=True, tool_name=optional_text(row.tool_name),
                tool_call_id=optional_text(row.tool_call_id),
                file_path=optional_text(row.file_path),
                meta={"summary_of": int(row.part)}))
        hide = tuple(int(row.part) for row, _, _ in maps)
        return Edit(stage=self.name, hide=hide, insert=tuple(inserts),
                    reason=f"summarized {len(maps)} context blocks over {self.block_chars:,} "
                           f"characters" + (" (map-reduce)" if reduced is not None else ""),
                    details={"blocks": len(maps), "reduced": reduced is not None,
                             "hidden_tokens": view.tokens_of(hide)},
                    summarizer_calls=tuple(calls))


def _strip(text: str, prefix: str) -> str:
    text = text.strip()
    for p in filter(None, (prefix, SEED_004_PREFIX)):
        if text.startswith(p):
            return text[len(p):].strip()
    return text


@dataclass(frozen=True, slots=True)
class _Messages:
    """The view's messages in order, with what the boundary search needs: per part its
    ``kind`` and tool call (``tool_codes``, -1 for none); per message the ``role`` of its
    first part, whether it may be summarized, may open the conversation, is only summaries."""

    groups: Messages
    kind: np.ndarray
    tool_codes: np.ndarray
    role: np.ndarray
    candidate: np.ndarray
    opener: np.ndarray
    summary_only: np.ndarray

    @classmethod
    def of(cls, parts: Rows) -> _Messages:
        m = message_groups(parts)
        kind, role = labels(parts, "kind"), labels(parts, "role")[m.first_rows]
        fixed = m.any(one_of(labels(parts, "layer"), _FIXED))
        summary = kind == "summary"
        return cls(groups=m, kind=kind, tool_codes=pd.factorize(strings(parts, "tool_call_id"))[0],
                   role=role,
                   candidate=~fixed & ((role != "system") | m.any(summary)),
                   opener=(role == "user") & ~m.all(kind == "tool_result"),
                   summary_only=m.all(summary))


def _boundary(msgs: _Messages, cand: np.ndarray, start: int, role: str,
              opener: bool = True) -> int | None:
    """The largest number ``b <= start`` of oldest candidate messages that can be hidden
    without splitting a tool pair or (``opener``) making the conversation open with a
    non-user message."""
    n, total = len(cand), len(msgs.groups)
    index_of = np.full(total, n, dtype=np.int64)     # parts outside the candidates are
    index_of[cand] = np.arange(n)                    # never hidden
    codes = msgs.tool_codes                          # per part, its tool call (NA: -1)
    linked = codes >= 0
    at = index_of[msgs.groups.of_row[linked]]
    lo = np.full(int(codes.max(initial=-1)) + 1, n, dtype=np.int64)
    hi = np.full(len(lo), -1, dtype=np.int64)
    np.minimum.at(lo, codes[linked], at)
    np.maximum.at(hi, codes[linked], at)
    split = lo < hi                                  # hiding cand[:b] splits the pair when
    blocked = np.zeros(n + 2, dtype=np.int64)        # lo < b <= hi
    np.add.at(blocked, lo[split] + 1, 1)
    np.add.at(blocked, hi[split] + 1, -1)
    blocked = np.cumsum(blocked)
    nonsys = msgs.role != "system"
    fixed = np.flatnonzero(nonsys & ~msgs.candidate)
    first_fixed = int(fixed[0]) if len(fixed) else total
    # next_open[b]: the first non-system message among cand[b:] (total if none)
    next_open = np.append(np.minimum.accumulate(np.where(nonsys[cand], cand, total)[::-1])[::-1],
                          total)
    first = min(first_fixed, int(next_open[0]))
    role_ok = first == total or bool(msgs.opener[first])
    only_summaries = np.logical_and.accumulate(msgs.summary_only[cand])
    b = np.arange(min(start, n), 0, -1)
    if not len(b):
        return None
    summary_at = np.append(cand, total)[b]
    first = np.minimum(first_fixed, next_open[b])
    opens = np.append(msgs.opener, False)[first]
    ok = (blocked[b] == 0) & (((role == "user") & (summary_at <= first)) | (not role_ok)
                              | (first == total) | opens | (not opener))
    stop = only_summaries[b - 1] | ok
    if not stop.any():
        return None
    i = int(np.argmax(stop))
    return None if only_summaries[b[i] - 1] else int(b[i])
