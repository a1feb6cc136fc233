"""The notes of a structured summary: entries per section, and fitting them to a budget.

`_Notes` holds the entries of the nine sections (`TITLES`), keyed so that the same fact
said twice is one entry; each has a *tier* (how much it matters) and an age.
`fit` renders the notes within a token budget, dropping
the least important entries first (lowest tier, oldest first), and cuts the text only
when even the headings do not fit. `ctxlab.summarizers.structured` fills the notes (an
earlier summary first, by `ctxlab.summarizers.structured.merge_previous`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ctxlab.tokens.base import Estimator

TITLES: tuple[str, ...] = ("Primary Request and Intent", "Key Technical Concepts",
                           "Files and Code Sections", "Errors and fixes", "Problem Solving",
                           "All user messages", "Pending Tasks", "Current Work",
                           "Optional Next Step")

def _cut(text: str, chars: int) -> str:
    """One line of at most ``chars`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def _cut_lines(text: str, chars: int) -> str:
    r"""At most ``chars`` characters of a text with its lines kept: each line after the
    first on a line of its own, indented two spaces under the entry (spaces inside a line
    collapsed, blank lines dropped; an ellipsis marks a cut). Kept lines stay what they
    were, so an error line or an instruction in them is found again.

    Example:
        >>> print(_cut_lines("Rules:\n- Never   print the key\n\nKeyError: 'id'", 400))
        Rules:
          - Never print the key
          KeyError: 'id'
    """
    out: list[str] = []
    left = chars
    for line in (" ".join(ln.split()) for ln in text.splitlines()):
        if not line:
            continue
        if len(line) <= left:
            out.append(line)
            left -= len(line) + 1
            continue
        out.append(line[: left - 1].rstrip() + "…" if left > 1 else "…")
        break
    return "\n  ".join(out)


@functools.lru_cache(maxsize=65_536)
def _normal(text: str) -> str:
    """The merging key of an entry's text: spacing, quotes and case do not count."""
    return " ".join(text.split()).strip('"`').lower()


@dataclass(slots=True)
class _Entry:
    section: int
    text: str
    tier: int
    order: int
    ops: list[str] = field(default_factory=list)

    def render(self) -> str:
        if not self.ops:
            return self.text
        ops = self.ops if len(self.ops) <= 3 else [self.ops[0], "…", *self.ops[-2:]]
        said = f"({(', ' if self.section == 3 else '; ').join(ops)})"
        if "\n" not in self.text:
            return f"{self.text} {said}"
        if self.section == 3:           # a file, then the details an earlier summary gave
            path, rest = self.text.split("\n", 1)
            return f"{path} {said}\n{rest}"
        # an entry of several lines: its last line stays as it was (an error line)
        return f"{self.text}\n  {said}"


class _Notes:
    """Entries per section, keyed for merging; ``order`` is age (oldest first)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, str], _Entry] = {}
        self.count = 0

    @staticmethod
    def key(section: int, text: str) -> tuple[int, str]:
        return section, _normal(text)

    def add(self, section: int, text: str, tier: int, *, key: str | None = None,
            ops: tuple[str, ...] = ()) -> _Entry:
        k = (section, _normal(key or text))
        entry = self.entries.get(k)
        if entry is None:
            self.count += 1
            entry = self.entries[k] = _Entry(section=section, text=text, tier=tier,
                                             order=self.count)
        elif tier > entry.tier:
            entry.tier = tier
        have = entry.ops
        for op in ops:              # each new one once, in order
            if op and op not in have:
                have.append(op)
        return entry

    def extend(self, entry: _Entry, line: str) -> None:
        """Add a line to an entry (a continuation line of an earlier summary's entry); the
        entry is keyed by its whole text again, as when it was made in one go, except a
        file's (section 3), which stays keyed by its path."""
        old = self.key(entry.section, entry.text)
        entry.text += "\n  " + line
        if entry.section == 3:
            return
        if self.entries.get(old) is entry:
            del self.entries[old]
        self.entries.setdefault(self.key(entry.section, entry.text), entry)

    def of(self, section: int) -> list[_Entry]:
        return [e for e in self.entries.values() if e.section == section]

    def render(self, skip: frozenset[int] = frozenset()) -> str:
        lines: list[str] = []
        for s, title in enumerate(TITLES, start=1):
            lines.append(f"{s}. {title}:")
            body = [f"- {e.render()}" for e in self.of(s) if e.order not in skip]
            lines.extend(body or ["- (none)"])
        return "\n".join(lines)


def fit(notes: _Notes, budget_tokens: int, estimator: Estimator) -> str:
    """Render ``notes`` within ``budget_tokens``: drop entries least important first
    (lowest tier, oldest first), then cut the text if even the headings do not fit."""

    def tokens(text: str) -> int:
        return int(estimator.count([text])[0])

    entries = list(notes.entries.values())
    first = min((e.order for e in entries if e.section == 1), default=0)
    drop = [e.order for e in sorted(entries, key=lambda e: (e.tier, e.order == first, e.order))]
    rank: dict[int, int] = {}          # an entry is shown while fewer than rank+1 are dropped
    for i, order in enumerate(drop):
        rank.setdefault(order, i)
    bodies: list[list[tuple[int, str]]] = [[] for _ in TITLES]
    for e in entries:
        bodies[e.section - 1].append((rank[e.order], f"- {e.render()}"))
    heads = [f"{s}. {title}:" for s, title in enumerate(TITLES, start=1)]

    def render(k: int) -> str:         # `_Notes.render` without the first k of ``drop``
        lines: list[str] = []
        for head, body in zip(heads, bodies):
            lines.append(head)
            lines.extend([line for r, line in body if r >= k] or [_NONE])
        return "\n".join(lines)

    count = _length_counter(heads, bodies, estimator)
    lo = _fewest_dropped(len(drop), budget_tokens, count or (lambda k: tokens(render(k))))
    text = render(lo)
    n = tokens(text)
    if count is not None and n != count(lo):     # the shortcut disagrees: search exactly
        lo = _fewest_dropped(len(drop), budget_tokens, lambda k: tokens(render(k)))
        text = render(lo)
        n = tokens(text)
    return text if n <= budget_tokens else _truncate(text, budget_tokens, tokens)


_NONE = "- (none)"


def _fewest_dropped(n: int, budget_tokens: int, count: Callable[[int], int]) -> int:
    """Binary search for the fewest dropped entries whose rendering fits the budget."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if count(mid) <= budget_tokens else (mid + 1, hi)
    return lo


def _length_counter(heads: list[str], bodies: list[list[tuple[int, str]]],
                    estimator: Estimator) -> Callable[[int], int] | None:
    """For a character-ratio estimator, the token count of the rendering without the first
    k dropped entries from the line lengths alone (lengths add up over joined lines in
    every unit, and the count is a function of the length); None for other estimators."""
    from ctxlab.tokens.base import text_lengths_of
    from ctxlab.tokens.heuristics import CharRatio

    if type(estimator) is not CharRatio:
        return None
    lines = heads + [_NONE] + [line for body in bodies for _, line in body]
    lengths = text_lengths_of(lines, estimator.unit).tolist()
    fixed, none = sum(lengths[:len(heads)]), lengths[len(heads)]
    it = iter(lengths[len(heads) + 1:])
    sized = [[(r, next(it)) for r, _ in body] for body in bodies]

    def count(k: int) -> int:
        total, n_lines = fixed, len(heads)
        for body in sized:
            kept = [size for r, size in body if r >= k]
            total += sum(kept) if kept else none
            n_lines += len(kept) or 1
        return int(estimator.from_lengths(np.array([total + n_lines - 1]))[0])

    return count


def _truncate(text: str, budget_tokens: int, tokens: Callable[[str], int]) -> str:
    """The longest head of ``text`` (with an ellipsis) within the budget, or ``""``."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokens(text[:mid] + "…") <= budget_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…" if lo and tokens(text[:lo] + "…") <= budget_tokens else ""
