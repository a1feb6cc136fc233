"""Seed 000's budget check: does a request fit, and should it be compacted?

NeuroLink estimates a request's input (system prompt, conversation history,
current prompt, tool definitions, file attachments), compares it with the
model's *available input* — the context window minus the output reserve
(`ctxlab.tokens.windows.output_reserve`) — and compacts once the usage ratio
reaches the threshold (0.80). Its CLI shows the ratio as a level: nothing up to
60%, information above 60%, a warning from the compaction threshold on.

The breakdown is read off the view's layers (`ctxlab.layers`):

=======================  ===========================================================
breakdown field          parts of the view
=======================  ===========================================================
``system_prompt``        L1 (``system``) plus the unrecorded overhead
``tool_definitions``     the ``tools`` layer (``tool_schema`` parts)
``file_attachments``     ``attachment`` parts of L2 (carried) and L3 (current turn)
``current_prompt``       L5 (``prompt``): the current user message
``conversation_history`` everything else — L3 apart from attachments, and L4 — plus
                         the estimator's message framing (seed 000 counts its
                         per-message overhead with the conversation)
=======================  ===========================================================

The five fields add up to the view's ``total_tokens``.

Example:
    >>> import ctxlab
    >>> from ctxlab.engine import Budget, build_view, call_end_pos
    >>> t = ctxlab.load("datasets/coding_session.jsonl")
    >>> s = t.calls["session"].iloc[0]
    >>> view = build_view(t, s, call_end_pos(t, s, 3), ctxlab.estimator("chars:4"),
    ...                   Budget(window_tokens=200_000, limit_tokens=136_000,
    ...                          target_tokens=100_000))
    >>> check = check_budget(view, provider="anthropic")
    >>> check.available_input_tokens, check.level, check.should_compact
    (136000, 'ok', False)
    >>> check.breakdown.total == check.estimated_input_tokens == view.total_tokens
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ctxlab.errors import ConfigError
from ctxlab.stages.base import View
from ctxlab.tokens.windows import WindowRegistry, output_reserve, resolve_window

__all__ = ["DEFAULT_THRESHOLD", "INFO_RATIO", "BudgetBreakdown", "BudgetCheck", "Level",
           "check_budget"]

DEFAULT_THRESHOLD = 0.8  # seed 000: compaction threshold (usage ratio)
INFO_RATIO = 0.6  # seed 000's CLI: usage above this is shown as information

Level = Literal["ok", "info", "warning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetBreakdown:
    """Estimated input tokens by category (seed 000's ``breakdown``).

    Attributes:
        system_prompt: L1 and the unrecorded overhead.
        conversation_history: earlier turns, the current turn's work, message framing.
        current_prompt: the current user message.
        tool_definitions: tool schemas.
        file_attachments: attachments carried or added this turn.
    """

    system_prompt: int
    conversation_history: int
    current_prompt: int
    tool_definitions: int
    file_attachments: int

    @property
    def total(self) -> int:
        """The sum of the five categories."""
        return (self.system_prompt + self.conversation_history + self.current_prompt
                + self.tool_definitions + self.file_attachments)

    def as_dict(self) -> dict[str, int]:
        """The categories by name, in seed 000's order."""
        return {"system_prompt": self.system_prompt,
                "conversation_history": self.conversation_history,
                "current_prompt": self.current_prompt,
                "tool_definitions": self.tool_definitions,
                "file_attachments": self.file_attachments}


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCheck:
    """The result of :func:`check_budget` (seed 000's ``BudgetCheckResult`` and more).

    Attributes:
        within_budget: the estimate is at most the available input.
        estimated_input_tokens: the request's estimated input.
        available_input_tokens: window minus output reserve.
        usage_ratio: estimate / available input (1.0 when nothing is available, as
            in the seed).
        should_compact: ``usage_ratio >= threshold``.
        breakdown: the estimate by category.
        level: ``"ok"`` (up to 60%), ``"info"`` (above 60%), ``"warning"`` (from the
            threshold on).
        message: one line for people, in the style of seed 000's CLI (the percentage
            rounded down, so it never shows a level the ratio has not reached); empty
            when the level is ``"ok"``.
        window_tokens: the context window used.
        output_reserve_tokens: tokens held back for the reply.
        threshold: the compaction threshold used.
        window_source: how the window was found.
    """

    within_budget: bool
    estimated_input_tokens: int
    available_input_tokens: int
    usage_ratio: float
    should_compact: bool
    breakdown: BudgetBreakdown
    level: Level
    message: str
    window_tokens: int
    output_reserve_tokens: int
    threshold: float
    window_source: str


def _breakdown(view: View) -> BudgetBreakdown:
    p = view.parts
    if p.empty:
        return BudgetBreakdown(system_prompt=view.overhead_tokens, conversation_history=0,
                               current_prompt=0, tool_definitions=0, file_attachments=0)
    layer = p["layer"].to_numpy(dtype=object)
    tokens = p["tokens"].to_numpy(dtype=np.int64)
    attachment = ((p["kind"] == "attachment").to_numpy(dtype=bool, na_value=False)
                  & np.isin(layer, ["carried", "current"]))

    def total(mask: np.ndarray) -> int:
        return int(tokens[mask].sum())

    system, tools, prompt = layer == "system", layer == "tools", layer == "prompt"
    history = ~(system | tools | prompt | attachment)
    return BudgetBreakdown(
        system_prompt=total(system) + view.overhead_tokens,
        conversation_history=total(history) + view.estimator.framing(view.messages),
        current_prompt=total(prompt), tool_definitions=total(tools),
        file_attachments=total(attachment))


def _level(ratio: float, threshold: float) -> Level:
    if ratio >= threshold:
        return "warning"
    return "info" if ratio > INFO_RATIO else "ok"


def _message(level: Level, ratio: float, used: int, available: int) -> str:
    if level == "ok":
        return ""
    if available <= 0:      # the reply's reserve takes the whole window
        return (f"No room for input: the output reserve takes the whole window "
                f"({used:,} input tokens); compaction cannot help, lower max_tokens.")
    head = f"Context usage: {math.floor(ratio * 100):d}% of available input " \
           f"({used:,} / {available:,} tokens)"
    if level == "info":
        return head
    return f"{head}; compaction due."


def check_budget(view: View, *, provider: str | None = None, model: str | None = None,
                 max_tokens: int | None = None, threshold: float = DEFAULT_THRESHOLD,
                 window_tokens: int | None = None,
                 registry: WindowRegistry | None = None) -> BudgetCheck:
    """Seed 000's budget check of one request.

    The window is ``window_tokens`` when given; else the registry's window of
    ``provider``/``model`` when either is given; else ``view.window_tokens`` (seed
    000 falls back to provider ``"openai"`` — pass ``provider="openai"`` for that).
    Available input = window - :func:`~ctxlab.tokens.windows.output_reserve`
    (``max_tokens``, else ``min(64,000, 35% of the window)``).

    Args:
        view: the request (its ``total_tokens`` is the estimate).
        provider: provider whose window to use.
        model: model whose window to use.
        max_tokens: the reply's token limit, reserved from the window.
        threshold: usage ratio from which compaction should run, in (0, 1].
        window_tokens: the context window, overriding the registry.
        registry: window registry (default: seed 000's).

    Raises:
        ConfigError: ``threshold`` out of range, or a window/max_tokens that is not a
            positive int.

    Example:
        >>> import ctxlab, pandas as pd
        >>> from ctxlab.stages.base import View
        >>> empty = View(parts=pd.DataFrame(), estimator=ctxlab.estimator("chars:4"),
        ...              window_tokens=200_000, limit_tokens=136_000, target_tokens=95_200,
        ...              overhead_tokens=110_000)
        >>> c = check_budget(empty)
        >>> c.level, round(c.usage_ratio, 3), c.should_compact, c.within_budget
        ('warning', 0.809, True, True)
        >>> print(c.message)
        Context usage: 80% of available input (110,000 / 136,000 tokens); compaction due.
    """
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0 < threshold <= 1:
        raise ConfigError(f"threshold must be a usage ratio in (0, 1] (seed 000: 0.8), "
                          f"got {threshold!r}")
    if window_tokens is not None:
        window, source = window_tokens, "window_tokens argument"
    elif provider is not None or model is not None:
        found = resolve_window(provider, model, registry=registry)
        window, source = found.window_tokens, f"{found.method}: {found.reason}"
    else:
        window, source = view.window_tokens, "the view's window"
    reserve = output_reserve(window, max_tokens)  # validates window and max_tokens
    available = max(window - reserve, 0)
    breakdown = _breakdown(view)
    used = breakdown.total
    ratio = used / available if available > 0 else 1.0
    level = _level(ratio, float(threshold))
    return BudgetCheck(within_budget=used <= available, estimated_input_tokens=used,
                       available_input_tokens=available, usage_ratio=ratio,
                       should_compact=ratio >= threshold, breakdown=breakdown, level=level,
                       message=_message(level, ratio, used, available), window_tokens=window,
                       output_reserve_tokens=reserve, threshold=float(threshold),
                       window_source=source)
