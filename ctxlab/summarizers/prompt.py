"""The prompt ctxlab sends to an LLM summarizer: nine sections, facts kept verbatim.

`build_prompt` turns the parts to condense (and an earlier summary to merge) into a
system message and a user message. The sections are those of the offline `structured`
summarizer, so an LLM summary and an extractive one can be compared section by
section; the instructions stress what the retention metrics measure — paths,
commands, errors, identifiers, numbers and the user's own words — because that is what
an agent needs after compaction and what summaries most often lose.

`fit_text` cuts a model's answer that ran over the budget at a line boundary (models
count tokens their own way; the budget is counted with the caller's estimator).

Example:
    >>> import pandas as pd
    >>> parts = pd.DataFrame({"role": ["user"], "kind": ["text"], "content": ["Fix a.py"]})
    >>> system, user = build_prompt(parts, previous=None, budget_tokens=500)
    >>> user.splitlines()[2]
    '1. Primary Request and Intent: what the user asked for, in their own terms.'
    >>> "<conversation>\\n[user] Fix a.py\\n</conversation>" in user
    True
"""

from __future__ import annotations

import pandas as pd

from ctxlab.summarizers.base import render_parts
from ctxlab.summarizers.structured import TITLES
from ctxlab.tokens.base import Estimator

SYSTEM_PROMPT = (
    "You write the hand-over summary of a long working session between a user and an AI "
    "agent. The earlier part of the session is about to leave the agent's context window; "
    "your summary takes its place, and the agent will carry on from your summary and the "
    "latest messages alone. Keep everything it needs to continue without asking again: "
    "exact file paths, shell commands, error messages, identifiers, numbers, decisions and "
    "every instruction the user gave, copied verbatim rather than paraphrased. Never add "
    "anything the conversation does not contain. Answer with the summary only, in plain "
    "text.")
"""The system message of every LLM summary request."""

SECTION_GUIDE: tuple[str, ...] = (
    "what the user asked for, in their own terms.",
    "languages, frameworks, libraries, services and designs in play.",
    "every file read, edited or created, with its full path, what was done to it and the "
    "code that matters.",
    "each error message verbatim, the command that produced it, and how it was fixed or "
    "whether it is still open.",
    "what was tried, what worked and what was ruled out.",
    "every message the user wrote, verbatim or nearly, in order.",
    "work that was asked for and is not done yet.",
    "precisely what was being done just before this summary, with file names and code.",
    "the next step, only when it follows directly from the user's latest request.",
)
"""What each of the nine sections (`ctxlab.summarizers.structured.TITLES`) holds."""


def build_prompt(parts: pd.DataFrame, *, previous: str | None,
                 budget_tokens: int) -> tuple[str, str]:
    """The system and user messages asking for a summary of ``parts`` in at most
    ``budget_tokens`` tokens, merging ``previous`` when given."""
    sections = "\n".join(f"{i}. {title}: {guide}"
                         for i, (title, guide) in enumerate(zip(TITLES, SECTION_GUIDE), 1))
    lines = ["Summarize the conversation below under these nine numbered headings, in this "
             "order, each followed by its points (write \"None.\" under a heading with nothing "
             "to say):", "", sections, "",
             f"Use at most {int(budget_tokens):,} tokens. Prefer exact paths, commands and "
             f"error lines over descriptions of them."]
    if previous and previous.strip():
        lines += ["", "An earlier summary covers what happened before this conversation. "
                  "Keep its facts and merge them into your sections:",
                  "<earlier-summary>", previous.strip(), "</earlier-summary>"]
    lines += ["", "<conversation>", render_parts(parts), "</conversation>"]
    return SYSTEM_PROMPT, "\n".join(lines)


def fit_text(text: str, budget_tokens: int, estimator: Estimator) -> str:
    """``text`` cut to at most ``budget_tokens`` tokens: the whole lines that fit (a half
    path or command would mislead), or when not even the first line fits, its longest
    prefix that does.

    Example:
        >>> from ctxlab.tokens import estimator
        >>> fit_text("aaaa bbbb\\ncccc dddd\\neeee", 5, estimator("chars:4"))
        'aaaa bbbb\\ncccc dddd'
        >>> fit_text("aaaa bbbb cccc", 2, estimator("chars:4"))
        'aaaa bbb'
    """
    if budget_tokens <= 0:
        return ""
    lines = text.split("\n")
    counts = estimator.count(["\n".join(lines[:i + 1]) for i in range(len(lines))])
    fits = [i for i, n in enumerate(counts) if n <= budget_tokens]
    if fits:
        return "\n".join(lines[:fits[-1] + 1])
    first, lo, hi = lines[0], 0, len(lines[0])
    while lo < hi:                                   # the longest prefix that still fits
        mid = (lo + hi + 1) // 2
        if int(estimator.count([first[:mid]])[0]) <= budget_tokens:
            lo = mid
        else:
            hi = mid - 1
    return first[:lo]
