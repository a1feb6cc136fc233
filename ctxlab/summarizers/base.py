"""The summarizer interface: parts in, one `Summary` out.

A summarizer turns some parts of a request (the older conversation, or one large
context block) into a text that stands in for them, within a token budget counted
with the caller's estimator. A previous summary, when there is one, is merged
rather than summarized again from nothing. Backends (the offline `structured`
extractor here; LLM clients and a recorded-response cache later) subclass
`Summarizer`; every failure is a `SummarizerError`, which callers may catch to fall
through to a cheaper stage.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from ctxlab.errors import ConfigError, CtxlabError
from ctxlab.stages.columns import strings
from ctxlab.tokens.base import Estimator

if TYPE_CHECKING:
    from ctxlab.stages.table import Table


ErrorKind = Literal["timeout", "http", "overflow", "connection", "empty", "missing", "config",
                   "backend"]
"""Why a summarizer failed: the request timed out; the server answered an HTTP error; the
prompt did not fit the model's context; the server could not be reached; the model
returned nothing; a recorded response is missing (replay mode); bad options; anything else
the backend raised."""

DEFAULT_BUDGET_TOKENS = 2000
"""Summary budget when a caller gives none (`Summarizer.summarize` called by hand)."""


class SummarizerError(CtxlabError):
    """A summarizer could not produce a summary (model error, timeout, bad response...).

    Attributes:
        kind: why (see `ErrorKind`); callers such as the summarize stage record it.
        status: the HTTP status of the failed request, when there was one.

    Example:
        >>> e = SummarizerError("openai (gpt-4o-mini): HTTP 503 Service Unavailable",
        ...                     kind="http", status=503)
        >>> e.kind, e.status, str(e)
        ('http', 503, 'openai (gpt-4o-mini): HTTP 503 Service Unavailable')
    """

    def __init__(self, message: str, *, kind: ErrorKind = "backend",
                 status: int | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """One summary and what it cost.

    Attributes:
        text: the summary the model will see.
        input_tokens: tokens the summarizer read (the parts and the previous summary).
        output_tokens: tokens of ``text``.
        ms: time the backend took (0.0 for offline extraction, which is deterministic).
        backend: which summarizer made it (``"structured"``, ``"openai"``...).
        model: the model or method behind the backend.

    Example:
        >>> s = Summary(text="1. ...", input_tokens=900, output_tokens=3, ms=0.0,
        ...             backend="structured", model="extractive")
        >>> s.call_record()["input_tokens"]
        900
    """

    text: str
    input_tokens: int
    output_tokens: int
    ms: float
    backend: str
    model: str

    def call_record(self) -> dict[str, Any]:
        """The record a stage keeps in ``Edit.summarizer_calls``."""
        return {"backend": self.backend, "model": self.model,
                "input_tokens": int(self.input_tokens),
                "output_tokens": int(self.output_tokens), "ms": float(self.ms)}


class Summarizer(ABC):
    """Base of every summarizer backend.

    Subclasses set ``name`` (the registry key) and ``model``, and implement `summarize`.
    Instances are registered with `ctxlab.summarizers.register`.

    Attributes:
        name: registry key, also reported as the backend.
        model: the model or method used (``"gpt-4o-mini"``, ``"extractive"``).
    """

    name: str = ""
    model: str = ""

    @abstractmethod
    def summarize(self, parts: pd.DataFrame, previous: str | None = None, *,
                  budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                  estimator: Estimator | str | None = None) -> Summary:
        """Summarize ``parts`` (rows of the part frame, in position order).

        Args:
            parts: the parts to summarize (at least ``role``, ``kind``, ``content``; also
                ``tool_name``, ``tool_call_id``, ``file_path`` when known). May be empty
                when only ``previous`` is to be condensed.
            previous: an earlier summary to merge (its facts are kept), or None.
            budget_tokens: the summary must not exceed this many tokens of ``estimator``.
            estimator: counts tokens of the summary (and of the input, for reporting);
                a spec or an instance (default ``chars:4``, see `resolve_estimator`).

        Raises:
            SummarizerError: the backend failed.
        """

    def summarize_table(self, parts: Table, previous: str | None = None, *,
                        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
                        estimator: Estimator | str | None = None) -> Summary:
        """`summarize` of a request's rows as a `ctxlab.stages.table.Table` (what the
        summarize stage holds): by default through its DataFrame; a backend that reads
        the columns itself can skip building one."""
        return self.summarize(parts.frame(), previous=previous, budget_tokens=budget_tokens,
                              estimator=estimator)

    def with_options(self, **options: Any) -> Summarizer:
        """A new instance of this backend configured by ``options`` (see
        `ctxlab.summarizers.summarizer`); backends without options refuse any.

        Raises:
            ConfigError: this backend takes no options, or one of them is unknown or bad.
        """
        raise ConfigError(f"summarizer {self.name!r} takes no options "
                          f"(got {', '.join(sorted(options))})")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} model={self.model!r}>"


def resolve_estimator(estimator: Estimator | str | None) -> Estimator:
    """The estimator a summarizer counts with: an instance as given, a spec through
    `ctxlab.tokens.estimator`, None as ``chars:4``."""
    if isinstance(estimator, Estimator):
        return estimator
    from ctxlab.tokens import estimator as make
    return make(estimator or "chars:4")


def input_tokens(parts: pd.DataFrame | Table, previous: str | None,
                 estimator: Estimator) -> int:
    """Tokens a summarizer reads: the parts' contents and the previous summary."""
    contents = [c if isinstance(c, str) else "" for c in strings(parts, "content").tolist()] \
        if "content" in parts else []
    texts = contents + ([previous] if previous else [])
    return int(estimator.count(texts).sum()) if texts else 0


def _label(role: Any, kind: Any, tool_name: Any) -> str:
    if not isinstance(kind, str):       # None, NaN, pd.NA (comparing NA is an error)
        return str(role)
    if kind == "tool_call":
        return f"{role} → tool call"
    if kind == "tool_result":
        return f"tool result ({tool_name})" if isinstance(tool_name, str) else "tool result"
    if kind in ("text", None) or not isinstance(kind, str):
        return str(role)
    return f"{role} ({kind})"


def render_parts(parts: pd.DataFrame) -> str:
    """The parts as a plain transcript, one block per part, for model prompts and baselines.

    Example:
        >>> df = pd.DataFrame({"role": ["user", "assistant"], "kind": ["text", "tool_call"],
        ...                    "content": ["Fix a.py", 'Read({"file_path": "a.py"})'],
        ...                    "tool_name": [None, "Read"]})
        >>> print(render_parts(df))
        [user] Fix a.py
        <BLANKLINE>
        [assistant → tool call] Read({"file_path": "a.py"})
    """
    if parts.empty:
        return ""
    tool = parts["tool_name"] if "tool_name" in parts else pd.Series(None, index=parts.index)
    blocks = [f"[{_label(r, k, t)}] {c if isinstance(c, str) else ''}"
              for r, k, c, t in zip(parts["role"], parts["kind"], parts["content"], tool)]
    return "\n\n".join(blocks)


def tool_arguments(content: str, tool_name: str | None) -> dict[str, Any]:
    """The JSON arguments of a tool-call part (``Name({...})``), or ``{}``.

    Example:
        >>> tool_arguments('Bash({"command": "ls"})', "Bash")
        {'command': 'ls'}
        >>> tool_arguments("not a call", None)
        {}
    """
    start = len(tool_name) + 1 if tool_name and content.startswith(f"{tool_name}(") \
        else content.find("(") + 1
    if start <= 0 or not content.endswith(")"):
        return {}
    try:
        args = json.loads(content[start:-1])
    except (json.JSONDecodeError, ValueError):
        return {}
    return args if isinstance(args, dict) else {}
