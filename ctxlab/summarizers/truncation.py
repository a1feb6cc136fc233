"""The plain-truncation baseline: the transcript itself, cut to the budget.

`Truncation` renders the parts as a transcript (`render_parts`), a previous summary
first, and keeps as many characters as fit ``budget_tokens`` of the caller's
estimator: the head and the tail (``keep="both"``, the default), only the head or
only the tail. One line, ``[... N characters cut ...]``, marks where text went. It
reads nothing and ranks nothing, so it is what any summarizer must beat at the same
size (`ctxlab.summary_quality` measures both with one metric).

The count of the whole cut text is checked, so the result never exceeds the budget
under any estimator; when not even the marker fits, the summary is empty. Where an
estimator's counts are not monotone in the length (a calibrated one weighs kinds of
text differently), the search may stop short of the longest cut that would fit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.summarizers import register
from ctxlab.summarizers.base import (DEFAULT_BUDGET_TOKENS, Summarizer, Summary, input_tokens,
                                     render_parts, resolve_estimator)
from ctxlab.tokens.base import Estimator

Keep = Literal["both", "head", "tail"]
KEEPS: tuple[str, ...] = get_args(Keep)


def cut_text(text: str, kept_chars: int, keep: Keep = "both") -> str:
    """``text`` with all but ``kept_chars`` characters cut, the cut marked by one line.

    Example:
        >>> print(cut_text("abcdefghij", 4))
        ab
        [... 6 characters cut ...]
        ij
        >>> cut_text("abcdefghij", 4, "tail")
        '[... 6 characters cut ...]\\nghij'
        >>> cut_text("abc", 5)
        'abc'
    """
    n = max(0, min(int(kept_chars), len(text)))
    if n == len(text):
        return text
    mark = f"[... {len(text) - n} characters cut ...]"
    if keep == "head":
        return "\n".join(s for s in (text[:n], mark) if s)
    if keep == "tail":
        return "\n".join(s for s in (mark, text[len(text) - n:]) if s)
    head, tail = text[: (n + 1) // 2], text[len(text) - n // 2:]
    return "\n".join(s for s in (head, mark, tail) if s)


def fit_cut(text: str, budget_tokens: int, tokens: Callable[[str], int],
             keep: Keep = "both") -> str:
    """The longest `cut_text` of ``text`` within ``budget_tokens`` (``""`` if none fits).

    The search starts from the length the budget's share of the tokens suggests and
    brackets the answer by doubling steps before bisecting, so few long candidates are
    counted. Every candidate is counted whole: the answer is within the budget even
    where counts are not monotone in the length.

    Example:
        >>> fit_cut("x" * 100, 10, lambda s: len(s) // 4)
        'xxxxxxx\\n[... 86 characters cut ...]\\nxxxxxxx'
    """
    total = tokens(text)
    if total <= budget_tokens:
        return text

    def fits(n: int) -> bool:
        return tokens(cut_text(text, n, keep)) <= budget_tokens

    lo, hi = -1, len(text) - 1  # lo: most kept characters known to fit (-1: none); hi: at most
    guess, step = max(0, min(hi, len(text) * budget_tokens // max(total, 1))), 1
    if fits(guess):
        lo = guess
        while lo < hi:  # gallop up from the guess
            probe = min(hi, lo + step)
            if not fits(probe):
                hi = probe - 1
                break
            lo, step = probe, step * 2
    else:
        hi = guess - 1
        while hi > lo:  # gallop down from the guess
            probe = max(0, hi - step)
            if fits(probe):
                lo = probe
                break
            hi, step = probe - 1, step * 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return cut_text(text, lo, keep) if lo >= 0 else ""


class Truncation(Summarizer):
    """Plain truncation of the rendered parts to the budget (the baseline summarizer).

    Args:
        keep: which end(s) of the transcript survive: ``"both"`` (half the kept
            characters from each end), ``"head"`` or ``"tail"``.

    Example:
        >>> from ctxlab.tokens import estimator
        >>> parts = pd.DataFrame({"role": ["user", "assistant"], "kind": ["text", "text"],
        ...                       "content": ["Fix the parser. " * 20, "Done."]})
        >>> s = Truncation().summarize(parts, previous="Earlier: read a.py.",
        ...                            budget_tokens=30, estimator=estimator("chars:4"))
        >>> s.text.startswith("Earlier: read a.py."), s.text.endswith("Done.")
        (True, True)
        >>> "characters cut ...]" in s.text, s.output_tokens <= 30
        (True, True)
    """

    name = "truncation"

    def __init__(self, keep: Keep = "both") -> None:
        if keep not in KEEPS:
            raise ConfigError(f"keep must be one of {', '.join(KEEPS)}, not {keep!r}")
        self.keep: Keep = keep
        self.model = "head+tail" if keep == "both" else keep

    def with_options(self, **options: object) -> Truncation:
        unknown = sorted(set(options) - {"keep"})
        if unknown:
            raise ConfigError(f"truncation: unknown option(s) {', '.join(unknown)}; options: keep")
        made = Truncation(**options)  # type: ignore[arg-type]
        made.name = f"truncation[keep={made.keep}]"
        return made

    def summarize(self, parts: pd.DataFrame, previous: str | None = None, *,
                  budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                  estimator: Estimator | str | None = None) -> Summary:
        estimator = resolve_estimator(estimator)
        text = "\n\n".join(s for s in (previous or "", render_parts(parts)) if s)

        def tokens(s: str) -> int:
            return int(estimator.count([s])[0])

        out = fit_cut(text, max(0, int(budget_tokens)), tokens, self.keep)
        return Summary(text=out, input_tokens=input_tokens(parts, previous, estimator),
                       output_tokens=tokens(out), ms=0.0, backend=self.name, model=self.model)


TRUNCATION = register(Truncation())
