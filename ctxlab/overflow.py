"""Recognise context-overflow errors: in live exceptions and in recorded logs.

Two seeds list the messages providers send when a request does not fit:

* seed 000 (NeuroLink) — per-provider regular expressions, tried in table order
  (openai, azure, google, bedrock, mistral, openrouter, anthropic); the provider of
  an error is the first whose pattern matches.
* seed 001 (ProbeAgent) — a few provider phrases plus *generic* ones ("tokens
  exceed", "too long", "over limit"). Generic patterns also match ordinary prose
  ("the output was too long"), so every match says whether it is generic, and
  :func:`is_context_overflow` ignores generic matches unless asked.

Matching is case-insensitive (as the seeds' regexes are). Some seed-000 patterns
are weak too: ``RESOURCE_EXHAUSTED`` is also Google's rate-limit status and
"maximum number of tokens" appears in option help texts; they stay (faithful) and
:func:`scan_overflows` shows what they catch in a real log.

Example:
    >>> is_context_overflow("This model's maximum context length is 8192 tokens.")
    True
    >>> overflow_provider({"error": {"message": "prompt is too long: 210000 tokens"}})
    'anthropic'
    >>> is_context_overflow("the file is too long to read"), is_context_overflow(
    ...     "the file is too long to read", generic=True)
    (False, True)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxlab.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from ctxlab.schema import Transcript

__all__ = ["ERROR_KEYS", "LOCAL_PATTERNS", "NEUROLINK_PATTERNS", "OVERFLOW_PATTERNS",
           "PROBE_PATTERNS",
           "OverflowMatch", "OverflowPattern", "error_texts", "find_overflows",
           "is_context_overflow", "overflow_provider", "scan_overflows"]

GENERIC = "generic"
EXCERPT_CHARS = 80  # characters kept on each side of a match
DEFAULT_MAX_DEPTH = 8  # nesting levels of causes / payloads inspected

ERROR_KEYS: tuple[str, ...] = ("message", "msg", "error", "errors", "error_message",
                               "errorMessage", "detail", "details", "code", "type", "status",
                               "reason", "body", "cause")
"""Keys of an error payload (dict) whose values are inspected, recursively."""

_ERROR_ATTRS = ("message", "error", "body", "cause")  # attributes read from error objects


@dataclass(frozen=True, slots=True, kw_only=True)
class OverflowPattern:
    """One phrase a provider uses when a request overflows the context window.

    Attributes:
        provider: provider name, or ``"generic"`` for a phrase any error (or prose) may hold.
        pattern: a regular expression, matched case-insensitively, without capturing groups.
        source: the seed that lists it.

    Example:
        >>> p = OverflowPattern(provider="bedrock", pattern="ValidationException.*token",
        ...                     source="seed 000")
        >>> bool(p.regex.search("validationexception: too many input tokens")), p.generic
        (True, False)
    """

    provider: str
    pattern: str
    source: str = "user"
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str) or not self.provider.strip():
            raise ConfigError(f"pattern {self.pattern!r} needs a provider name (or 'generic')")
        try:
            compiled = re.compile(self.pattern, re.IGNORECASE)
        except (re.error, TypeError) as e:
            raise ConfigError(f"overflow pattern {self.pattern!r} of {self.provider} is not a "
                              f"valid regular expression: {e}") from e
        if compiled.groups:
            raise ConfigError(f"overflow pattern {self.pattern!r} has capturing groups; write "
                              f"(?:...) so the patterns can be searched as one expression")
        try:    # the patterns are searched as one expression: each must work as a group
            re.compile(f"(?:{self.pattern})")
        except re.error as e:
            raise ConfigError(f"overflow pattern {self.pattern!r} of {self.provider} cannot be "
                              f"searched with the others ({e}): flags such as (?i) must be "
                              f"scoped, (?i:...), and matching is case-insensitive "
                              f"already") from e
        object.__setattr__(self, "regex", compiled)

    @property
    def generic(self) -> bool:
        """True for phrases that do not identify a provider (and may match prose)."""
        return self.provider == GENERIC


def _patterns(source: str, table: Sequence[tuple[str, Sequence[str]]]
              ) -> tuple[OverflowPattern, ...]:
    return tuple(OverflowPattern(provider=p, pattern=x, source=source)
                 for p, xs in table for x in xs)


NEUROLINK_PATTERNS: tuple[OverflowPattern, ...] = _patterns("seed 000", (
    ("openai", (r"This model's maximum context length is", r"reduce the length of the messages")),
    ("azure", (r"content_length_exceeded",)),
    ("google", (r"RESOURCE_EXHAUSTED", r"exceeds the maximum number of tokens",
                r"content is too long")),
    ("bedrock", (r"ValidationException.*token", r"Input is too long",
                 r"exceeds the model's maximum")),
    ("mistral", (r"context length exceeded", r"maximum number of tokens")),
    ("openrouter", (r"context_length_exceeded",)),
    ("anthropic", (r"prompt is too long", r"input is too long", r"too many tokens")),
))
"""Seed 000's table, in its order (which decides the provider of an error)."""

PROBE_PATTERNS: tuple[OverflowPattern, ...] = _patterns("seed 001", (
    ("anthropic", (r"context_length_exceeded", r"prompt is too long")),
    ("openai", (r"maximum context length is \d[\d,]* tokens",)),
    # the seed writes "input token count exceeds limit"; Gemini puts the count in
    # parentheses ("The input token count (1200000) exceeds the maximum ..."), so it may be there
    ("google", (r"input token count(?: \(\d[\d,]*\))? exceeds",)),
    (GENERIC, (r"tokens exceed", r"too long", r"over limit")),
))
"""Seed 001's phrases; the three generic ones are marked ``provider="generic"``."""

LOCAL_PATTERNS: tuple[OverflowPattern, ...] = _patterns("ctxlab", (
    ("llama.cpp", (r"exceeds? (?:the )?context window of \d+",
                   r"exceeds the available context size")),
))
"""Local servers the seeds do not list: llama-cpp-python ("Requested tokens (5000) exceed
context window of 4096") and llama.cpp's own server."""

OVERFLOW_PATTERNS: tuple[OverflowPattern, ...] = NEUROLINK_PATTERNS + PROBE_PATTERNS + \
    LOCAL_PATTERNS
"""Both seeds (seed 000's first, so its provider order decides), then local servers."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OverflowMatch:
    """One pattern found in an error's text.

    Attributes:
        provider: the pattern's provider (``"generic"`` for a generic phrase).
        pattern: the regular expression that matched.
        excerpt: the matched text with up to 80 characters either side, whitespace collapsed.
        generic: True when the phrase does not identify a provider (weak evidence).
        source: the seed that lists the pattern.
    """

    provider: str
    pattern: str
    excerpt: str
    generic: bool
    source: str


def _walk(obj: object, depth: int, max_depth: int, seen: set[int]) -> Iterator[str]:
    if obj is None or depth > max_depth or isinstance(obj, (bool, int, float)):
        return
    if isinstance(obj, str):
        if obj:
            yield obj
        return
    if isinstance(obj, (bytes, bytearray)):
        yield bytes(obj).decode("utf-8", "replace")
        return
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, BaseException):
        yield f"{type(obj).__name__}: {obj}"
        children: list[object] = [obj.__cause__, obj.__context__]
        children += [getattr(obj, a, None) for a in _ERROR_ATTRS]
        children += list(getattr(obj, "exceptions", None) or ())   # an ExceptionGroup's
    elif isinstance(obj, Mapping):     # keys in any case (boto3: {"Error": {"Message": ...}})
        lower = {k.lower(): v for k, v in obj.items() if isinstance(k, str)}
        children = [lower[k.lower()] for k in ERROR_KEYS if k.lower() in lower]
    elif isinstance(obj, (list, tuple)):
        children = list(obj)
    else:
        children = [getattr(obj, a, None) for a in _ERROR_ATTRS]
    for child in children:
        yield from _walk(child, depth + 1, max_depth, seen)


def error_texts(error: object, *, max_depth: int = DEFAULT_MAX_DEPTH) -> tuple[str, ...]:
    """Every text an error carries: its message, nested payloads and causes.

    Accepts an exception (its type and message, then ``__cause__``, ``__context__``
    and the attributes ``message``, ``error``, ``body``, ``cause``; an exception group's
    exceptions), a string, a mapping (values of :data:`ERROR_KEYS`, keys in any case), a
    list of any of these, or any object
    with those attributes. Nesting deeper than ``max_depth`` is not inspected;
    cycles are visited once.

    Example:
        >>> try:
        ...     try:
        ...         raise ValueError("HTTP 400")
        ...     except ValueError as inner:
        ...         raise RuntimeError("request failed") from inner
        ... except RuntimeError as e:
        ...     error_texts(e)
        ('RuntimeError: request failed', 'ValueError: HTTP 400')
    """
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 0:
        raise ConfigError(f"max_depth must be an int >= 0, got {max_depth!r}")
    return tuple(dict.fromkeys(_walk(error, 0, max_depth, set())))


def _excerpt(text: str, start: int, end: int) -> str:
    lo, hi = max(0, start - EXCERPT_CHARS), min(len(text), end + EXCERPT_CHARS)
    body = " ".join(text[lo:hi].split())
    return ("…" if lo > 0 else "") + body + ("…" if hi < len(text) else "")


def _select(patterns: Iterable[OverflowPattern], generic: bool) -> tuple[OverflowPattern, ...]:
    chosen = tuple(patterns)
    if not all(isinstance(p, OverflowPattern) for p in chosen):
        raise ConfigError("patterns must be OverflowPattern instances, e.g. "
                          "OverflowPattern(provider='acme', pattern='window is full')")
    return chosen if generic else tuple(p for p in chosen if not p.generic)


def _matches(texts: Sequence[str], patterns: Sequence[OverflowPattern]) -> list[OverflowMatch]:
    out: list[OverflowMatch] = []
    for p in patterns:
        for text in texts:
            if (m := p.regex.search(text)) is not None:
                out.append(OverflowMatch(provider=p.provider, pattern=p.pattern,
                                         excerpt=_excerpt(text, m.start(), m.end()),
                                         generic=p.generic, source=p.source))
                break
    return out


def find_overflows(error: object, *, patterns: Sequence[OverflowPattern] = OVERFLOW_PATTERNS,
                   generic: bool = True, max_depth: int = DEFAULT_MAX_DEPTH
                   ) -> tuple[OverflowMatch, ...]:
    """Every pattern that matches some text of ``error``, in pattern order.

    Args:
        error: an exception, string, mapping or object (see :func:`error_texts`).
        patterns: what to look for (default: both seeds).
        generic: include generic patterns.
        max_depth: nesting levels inspected.

    Example:
        >>> [(m.provider, m.generic) for m in find_overflows("Error: prompt is too long")]
        [('anthropic', False), ('anthropic', False), ('generic', True)]
    """
    return tuple(_matches(error_texts(error, max_depth=max_depth), _select(patterns, generic)))


def is_context_overflow(error: object, *, generic: bool = False,
                        patterns: Sequence[OverflowPattern] = OVERFLOW_PATTERNS,
                        max_depth: int = DEFAULT_MAX_DEPTH) -> bool:
    """Whether ``error`` says the request did not fit the context window.

    Args:
        error: an exception, string, mapping or object (see :func:`error_texts`).
        generic: count generic phrases too. Seed 001 (ProbeAgent) does; pass
            ``patterns=PROBE_PATTERNS, generic=True`` for its behaviour and
            ``patterns=NEUROLINK_PATTERNS`` for seed 000's.
        patterns: what to look for (default: both seeds).
        max_depth: nesting levels of causes and payloads inspected.

    Example:
        >>> is_context_overflow(RuntimeError("HTTP 400: input token count exceeds limit"))
        True
        >>> is_context_overflow({"error": "rate limit, retry later"})
        False
    """
    return bool(find_overflows(error, patterns=patterns, generic=generic, max_depth=max_depth))


def overflow_provider(error: object, *, patterns: Sequence[OverflowPattern] = OVERFLOW_PATTERNS,
                      max_depth: int = DEFAULT_MAX_DEPTH) -> str | None:
    """The provider whose overflow message ``error`` holds, or None (seed 000).

    The first provider pattern that matches, in table order; generic phrases
    never name a provider.

    Example:
        >>> overflow_provider("ValidationException: input too long, max 200000 tokens")
        'bedrock'
        >>> overflow_provider("the output was too long") is None
        True
    """
    found = find_overflows(error, patterns=patterns, generic=False, max_depth=max_depth)
    return found[0].provider if found else None


SCAN_COLUMNS: dict[str, str] = {
    "session": "string", "part": "Int64", "msg": "Int64", "role": "string", "kind": "string",
    "where": "string", "event": "Int64", "provider": "string", "pattern": "string",
    "generic": "bool", "matches": "int64", "excerpt": "string"}


def _hits(texts: pd.Series, combined: str) -> pd.Series:
    """Vectorised first pass: which texts match any pattern."""
    try:
        return texts.str.contains(combined, case=False, regex=True, na=False)
    except ValueError:  # a pattern the Arrow regex engine refuses: use Python's re
        return texts.astype(object).str.contains(combined, case=False, regex=True, na=False)


def scan_overflows(transcript: Transcript, *,
                   patterns: Sequence[OverflowPattern] = OVERFLOW_PATTERNS,
                   generic: bool = True) -> pd.DataFrame:
    """Overflow messages recorded in a log: in part contents, part meta and events.

    Searches every part (hidden or not): its ``content`` (an assistant's
    ``API Error: ... prompt is too long``, a tool result) and its ``meta`` JSON
    (error fields the format recorded), and every event's ``reason`` and ``meta``.
    One combined expression selects the rows (vectorised); only those are then
    matched pattern by pattern.

    Args:
        transcript: the log.
        patterns: what to look for (default: both seeds).
        generic: report generic matches too (flagged in ``generic``).

    Returns:
        One row per text that matched: ``session``, ``part``, ``msg``, ``role``, ``kind``
        (NA for events), ``where`` (``content``, ``meta`` or ``event``), ``event`` (the
        event's id for an event row, else the event that inserted the part), ``provider``
        and ``pattern`` of the best match (the first provider pattern, else the first
        generic one), ``generic`` (True when only generic phrases matched), ``matches``
        (patterns that matched) and ``excerpt``.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> scan_overflows(t).empty
        True
    """
    import pandas as pd

    chosen = _select(patterns, generic)
    rows: list[dict[str, object]] = []
    if chosen:
        combined = "|".join(f"(?:{p.pattern})" for p in chosen)
        f = transcript.frame
        for where in ("content", "meta"):
            hit = f[_hits(f[where], combined).to_numpy(dtype=bool)]
            for r in hit.itertuples(index=False):
                found = _matches([getattr(r, where)], chosen)
                if found:
                    rows.append(_row(found, session=r.session, part=r.part, msg=r.msg,
                                     role=r.role, kind=r.kind, where=where, event=r.event))
        ev = transcript.events
        text = ev["reason"].fillna("") + "\n" + ev["meta"].fillna("")
        mask = _hits(text, combined).to_numpy(dtype=bool)
        for r, t in zip(ev[mask].itertuples(index=False), text[mask], strict=True):
            if found := _matches([t], chosen):
                rows.append(_row(found, session=r.session, part=pd.NA, msg=pd.NA, role=pd.NA,
                                 kind=pd.NA, where="event", event=r.event))
    out = pd.DataFrame(rows, columns=list(SCAN_COLUMNS))
    return out.astype(SCAN_COLUMNS).reset_index(drop=True)


def _row(found: list[OverflowMatch], **where: object) -> dict[str, object]:
    best = next((m for m in found if not m.generic), found[0])
    return {**where, "provider": best.provider, "pattern": best.pattern,
            "generic": all(m.generic for m in found), "matches": len(found),
            "excerpt": best.excerpt}
