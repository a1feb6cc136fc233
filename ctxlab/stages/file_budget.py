"""File token budget (seed 000's file read budget): keep file contents within a share of
what the window has left.

Files are the request's ``attachment`` parts and the tool results of read tools
(`ctxlab.stages.dedup.file_reads`: ``Read``, ``read_file``, ``view``, ``cat``...),
original parts only. The budget is
``floor((window - current - max_output) * budget_percent)``, 0 when negative, where
``current`` is what the request costs without its files: the view's total (parts,
message framing and unrecorded overhead, counted by the view's estimator) minus the
files' tokens — NeuroLink computes the budget before the files are added.
``max_output`` is ``max_output_tokens`` or, when None, seed 000's output reserve
(``min(64,000, 35% of the window)``).

Each file, by its size in UTF-8 bytes: over ``preview_mode_bytes`` (5 MB) only its
first ``preview_chars`` (2,000) characters stay; under ``fast_path_bytes`` (100 KB) it
is untouched; otherwise it is cut to ``budget * chars_per_token`` characters when its
estimate (``ceil(chars / chars_per_token)``) exceeds the budget. Then the aggregate
rule: when all files together still exceed the budget, each gets a share of it in
proportion to its size, and a file whose share is under 200 characters is dropped
(replaced by a one-line notice). Every change replaces the part and keeps its
linkage; nothing is made that would not cost fewer tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.stages import register
from ctxlab.stages.base import (Edit, NewPart, Stage, View, ints, is_na, labels, optional_text,
                                part_rows, strings)
from ctxlab.stages.dedup import file_reads
from ctxlab.stages.tool_output import REPLACED_COLUMNS, replacement, utf8_bytes
from ctxlab.tokens.windows import output_reserve

FILE_READ_BUDGET_PERCENT = 0.6  # seed 000
FILE_FAST_PATH_SIZE = 102_400  # seed 000: 100 KB
FILE_PREVIEW_MODE_SIZE = 5_242_880  # seed 000: 5 MB
FILE_PREVIEW_CHARS = 2_000  # seed 000
MIN_FILE_CHARS = 200  # a proportional share smaller than this drops the file
_COUNT_NAMES = {"preview": "previewed", "truncate": "truncated", "aggregate": "cut_to_share",
                "drop": "dropped"}


def file_token_budget(window: int, current: int, max_output: int,
                      percent: float = FILE_READ_BUDGET_PERCENT) -> int:
    """Tokens file contents may use: ``floor((window - current - max_output) * percent)``.

    Example:
        >>> file_token_budget(200_000, 50_000, 64_000)
        51600
        >>> file_token_budget(128_000, 100_000, 44_800)
        0
    """
    remaining = window - current - max_output
    return math.floor(remaining * percent) if remaining > 0 else 0


def file_action(size_bytes: int, chars: int, budget: int, *,
                fast_path_bytes: int = FILE_FAST_PATH_SIZE,
                preview_mode_bytes: int = FILE_PREVIEW_MODE_SIZE,
                preview_chars: int = FILE_PREVIEW_CHARS,
                chars_per_token: float = 4.0) -> tuple[str, int]:
    """Seed 000's per-file decision: ``("preview" | "keep" | "truncate", chars to keep)``.

    Example:
        >>> file_action(6_000_000, 6_000_000, 10_000)
        ('preview', 2000)
        >>> file_action(50_000, 50_000, 10)
        ('keep', 50000)
        >>> file_action(200_000, 200_000, 10_000)
        ('truncate', 40000)
        >>> file_action(200_000, 200_000, 60_000)
        ('keep', 200000)
    """
    if size_bytes > preview_mode_bytes:
        return "preview", min(chars, preview_chars)
    if size_bytes < fast_path_bytes:
        return "keep", chars
    if math.ceil(chars / chars_per_token) > budget:
        return "truncate", min(chars, math.floor(budget * chars_per_token))
    return "keep", chars


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class FileBudget(Stage):
    """Preview, cut or drop file contents so they fit seed 000's file token budget.

    Attributes:
        budget_percent: share of the remaining window files may use (seed 000: 0.6).
        fast_path_bytes: files smaller than this skip the per-file check (100 KB).
        preview_mode_bytes: files larger than this are previewed (5 MB).
        preview_chars: characters a preview keeps (2,000).
        max_output_tokens: the reply's reserve; None: seed 000's default reserve.
        chars_per_token: the seed's file estimate (4 characters per token).
    """

    name = "file_budget"
    source = "seed 000 (NeuroLink fileTokenBudget, enforceAggregateFileBudget)"
    budget_percent: float = FILE_READ_BUDGET_PERCENT
    fast_path_bytes: int = FILE_FAST_PATH_SIZE
    preview_mode_bytes: int = FILE_PREVIEW_MODE_SIZE
    preview_chars: int = FILE_PREVIEW_CHARS
    max_output_tokens: int | None = None
    chars_per_token: float = 4.0

    def __post_init__(self) -> None:
        if not _number(self.budget_percent) or not 0.0 < self.budget_percent <= 1.0:
            raise ConfigError(f"file_budget: budget_percent must be in (0, 1], got "
                              f"{self.budget_percent!r}")
        for field_name in ("fast_path_bytes", "preview_mode_bytes", "preview_chars"):
            value = getattr(self, field_name)
            if not _number(value) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"file_budget: {field_name} must be a non-negative integer, "
                                  f"got {value!r}")
        if self.fast_path_bytes > self.preview_mode_bytes:
            raise ConfigError(f"file_budget: fast_path_bytes ({self.fast_path_bytes:,}) must not "
                              f"exceed preview_mode_bytes ({self.preview_mode_bytes:,})")
        if self.max_output_tokens is not None and (
                not _number(self.max_output_tokens) or not isinstance(self.max_output_tokens, int)
                or self.max_output_tokens < 0):
            raise ConfigError(f"file_budget: max_output_tokens must be None or a non-negative "
                              f"integer, got {self.max_output_tokens!r}")
        if not _number(self.chars_per_token) or self.chars_per_token <= 0:
            raise ConfigError(f"file_budget: chars_per_token must be positive, got "
                              f"{self.chars_per_token!r}")

    def plan(self, view: View) -> Edit | None:
        p = view
        files = self._files(p)
        if not len(files):
            return None
        file_tokens = int(ints(p, "tokens")[files].sum())
        current = view.total_tokens - file_tokens
        reserve = self.max_output_tokens if self.max_output_tokens is not None else (
            output_reserve(view.window_tokens) if view.window_tokens > 0 else 0)
        budget = file_token_budget(view.window_tokens, current, reserve, self.budget_percent)
        rows = part_rows(p, files, REPLACED_COLUMNS + ("content", "tokens"))
        chars = [len(t) if t is not None else 0 for t in strings(p, "content")[files].tolist()]
        actions = [file_action(len(utf8_bytes(r.content)), n, budget,
                               fast_path_bytes=self.fast_path_bytes,
                               preview_mode_bytes=self.preview_mode_bytes,
                               preview_chars=self.preview_chars,
                               chars_per_token=self.chars_per_token)
                   for r, n in zip(rows, chars)]
        keep = [n for _, n in actions]
        kinds = [a for a, _ in actions]
        estimates = [math.ceil(n / self.chars_per_token) for n in keep]
        total = sum(estimates)
        if total > budget:
            for i, est in enumerate(estimates):
                share = math.floor(budget * est / total * self.chars_per_token) if total else 0
                if share < keep[i]:
                    kinds[i] = "drop" if share < MIN_FILE_CHARS else "aggregate"
                    keep[i] = 0 if kinds[i] == "drop" else share
        hide: list[int] = []
        inserts: list[NewPart] = []
        counts = {"preview": 0, "truncate": 0, "aggregate": 0, "drop": 0}
        saved = 0
        cuts = [(r, kind, n, original, self._content(r, kind, n, original, budget))
                for r, kind, n, original in zip(rows, kinds, keep, chars)
                if kind != "keep" and n < original]
        for (r, kind, n, original, content), tokens_after in zip(
                cuts, view.estimate_all([c[-1] for c in cuts])):
            gain = int(r.tokens) - tokens_after
            if gain <= 0:
                continue
            hide.append(int(r.part))
            inserts.append(replacement(r, content, meta={
                "truncated": True, "file_budget": kind, "kept_chars": n,
                "original_chars": original, "budget_tokens": budget}))
            counts[kind] += 1
            saved += gain
        details = {"budget_tokens": budget, "current_tokens": current,
                   "max_output_tokens": reserve, "files": len(files),
                   "file_tokens": file_tokens, "tokens_saved": saved,
                   **{_COUNT_NAMES[k]: v for k, v in counts.items()}}
        if not hide:
            return Edit(stage=self.name, reason=f"{len(files)} files ({file_tokens:,} tokens) "
                        f"fit the file budget of {budget:,} tokens", details=details)
        return Edit(stage=self.name, hide=tuple(hide), insert=tuple(inserts), details=details,
                    reason=f"cut {len(hide)} of {len(files)} files to the file budget of "
                           f"{budget:,} tokens")

    def _files(self, p: pd.DataFrame) -> np.ndarray:
        """Row positions of the file parts, in order: original attachments and read-tool
        results."""
        if not len(p):
            return np.zeros(0, dtype=np.int64)
        reads = file_reads(p)["part"].to_numpy(dtype=np.int64)
        attach = (labels(p, "kind") == "attachment") & is_na(p, "event") \
            & (labels(p, "role") != "system")
        return np.flatnonzero(attach | np.isin(ints(p, "part"), reads))

    def _content(self, r: Any, kind: str, keep: int, original: int, budget: int) -> str:
        text = str(r.content)
        if kind == "drop":
            path = optional_text(r.file_path) or "file"
            return (f"[File {path} omitted: the files of this request exceed the file token "
                    f"budget of {budget:,} tokens]")
        if kind == "preview":
            note = (f"[File preview: first {keep:,} of {original:,} characters; the file is "
                    f"larger than {self.preview_mode_bytes:,} bytes]")
        else:
            note = (f"[File truncated to {keep:,} of {original:,} characters to fit the file "
                    f"token budget of {budget:,} tokens]")
        return f"{text[:keep]}\n\n{note}" if keep else note


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
