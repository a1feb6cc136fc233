"""The notes of a structured summary: entries per section, and fitting them to a budget.

`_Notes` holds the entries of the nine sections (`TITLES`), keyed so that the same fact
said twice is one entry; each has a *tier* (how much it matters) and an age.
`fit` renders the notes within a token budget, dropping
the least important entries first (lowest tier, oldest first), and cuts the text only
when even the headings do not fit. `ctxlab.summarizers.structured` fills the notes (an
earlier summary first, by `ctxlab.summarizers.structured.merge_previous`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ctxlab.tokens.base import Estimator

TITLES: tuple[str, ...] = ("Primary Request and Intent", "Key Technical Concepts",
                           "Files and Code Sections", "Errors and fixes", "Problem Solving",
                           "All user messages", "Pending Tasks", "Current Work",
                           "Optional Next Step")

def _cut(text: str, chars: int) -> str:
    """One line of at most ``chars`` characters (an ellipsis marks a cut)."""
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"
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
        return f"{self.text} ({(', ' if self.section == 3 else '; ').join(ops)})"


class _Notes:
    """Entries per section, keyed for merging; ``order`` is age (oldest first)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[int, str], _Entry] = {}
        self.count = 0

    @staticmethod
    def key(section: int, text: str) -> tuple[int, str]:
        return section, " ".join(text.split()).strip('"`').lower()

    def add(self, section: int, text: str, tier: int, *, key: str | None = None,
            ops: tuple[str, ...] = ()) -> _Entry:
        k = self.key(section, key or text)
        entry = self.entries.get(k)
        if entry is None:
            self.count += 1
            entry = self.entries[k] = _Entry(section=section, text=text, tier=tier,
                                             order=self.count)
        entry.tier = max(entry.tier, tier)
        entry.ops.extend(op for op in dict.fromkeys(ops) if op and op not in entry.ops)
        return entry

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

    first = min((e.order for e in notes.of(1)), default=0)
    drop = [e.order for e in sorted(notes.entries.values(),
                                    key=lambda e: (e.tier, e.order == first, e.order))]

    def render(k: int) -> str:
        return notes.render(frozenset(drop[:k]))

    lo, hi = 0, len(drop)          # the fewest dropped entries that fit the budget
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if tokens(render(mid)) <= budget_tokens else (mid + 1, hi)
    text = render(lo)
    return text if tokens(text) <= budget_tokens else _truncate(text, budget_tokens, tokens)


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
