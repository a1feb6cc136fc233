"""Seed 002's context guard (ai-agent): project the next request, decide ok / skip / final.

Counters (:class:`GuardCounters`, changed by methods that return copies):

* ``current`` — the committed conversation (after a turn: its input, output, schema);
* ``pending`` — the seed conversation of the turn, set when the turn begins;
* ``new`` — what the turn added so far (tool outputs, assistant messages);
* ``schema`` — the tool schemas' estimate, scaled by 2.09;
* ``extra`` — anything else the caller adds to the next request.

The projection is ``current + pending + new + extra`` (the seed's formula). The
seed leaves ``schema`` out because, after the first turn, the schema is already in
``current`` (the provider's cache counts include it); on the FIRST turn nothing
holds it, so the projection is short by ``schema`` tokens. ``first_turn_schema=True``
in :func:`evaluate` counts it while nothing is committed (an option the seed lacks).

Each :class:`Target` (a provider/model to try, in order) has a limit
``window - buffer - max_output`` (`ctxlab.tokens.windows.guard_limit`). A
target whose limit holds the projection is ``ok``; one that does not is ``skip``
when another target fits (the agent tries the next provider) and ``final`` when
none fits (the agent is forced into a final turn: tools restricted to
``final_report``). The seed's special case — when only the schema pushes the
projection over and the projection without it fits, the request goes ahead — is
reported as ``schema_only`` on the target.

Example (the seed's worked example):
    >>> t = Target(provider="openai", context_window=128_000, max_output_tokens=16_384)
    >>> t.limit
    103424
    >>> c = GuardCounters().begin_turn(50_000).add_new(40_000)
    >>> evaluate(c, [t]).status, evaluate(c.add_new(20_000), [t]).status
    ('ok', 'final')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ctxlab.errors import ConfigError
from ctxlab.stages.base import View
from ctxlab.tokens.windows import (
    AI_AGENT_DEFAULT_CONTEXT_WINDOW,
    DEFAULT_BUFFER_TOKENS,
    DEFAULT_REGISTRY,
    WindowRegistry,
    guard_limit,
    resolve_window,
)

__all__ = ["AI_AGENT_REGISTRY", "FINAL_TOOLS", "SCHEMA_SCALE", "GuardCounters", "GuardDecision",
           "Status", "Target", "TargetCheck", "ToolBudget", "evaluate",
           "guard_counters_from_view"]

SCHEMA_SCALE = 2.09  # seed 002: tool schema estimates are scaled by this
FINAL_TOOLS: tuple[str, ...] = ("final_report",)  # seed 002: tools left in a forced final turn

AI_AGENT_REGISTRY = replace(DEFAULT_REGISTRY, default_window=AI_AGENT_DEFAULT_CONTEXT_WINDOW)
"""Seed 000's table with seed 002's fallback window (131,072) for unknown providers."""

Status = Literal["ok", "skip", "final"]


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{what} must be an int >= 0 (tokens), got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardCounters:
    """The guard's token counters; every change returns a new instance.

    Example:
        >>> c = GuardCounters().begin_turn(1_000).add_new(300).add_new(200)
        >>> c.projected, c.commit().current, c.commit().projected
        (1500, 1500, 1500)
    """

    current: int = 0
    pending: int = 0
    new: int = 0
    schema: int = 0
    extra: int = 0

    def __post_init__(self) -> None:
        for name in ("current", "pending", "new", "schema", "extra"):
            _count(getattr(self, name), name)

    @property
    def projected(self) -> int:
        """The seed's projection: ``current + pending + new + extra`` (no schema)."""
        return self.current + self.pending + self.new + self.extra

    @property
    def projected_with_schema(self) -> int:
        """The projection plus the schema estimate."""
        return self.projected + self.schema

    def begin_turn(self, seed_tokens: int) -> GuardCounters:
        """A turn starts with ``seed_tokens`` of seed conversation; nothing new yet."""
        return replace(self, pending=_count(seed_tokens, "seed_tokens"), new=0)

    def add_new(self, tokens: int) -> GuardCounters:
        """The turn adds ``tokens`` (a tool output, an assistant message)."""
        return replace(self, new=self.new + _count(tokens, "tokens"))

    def commit(self) -> GuardCounters:
        """The turn completes: pending and new become part of ``current``."""
        return replace(self, current=self.current + self.pending + self.new, pending=0, new=0)

    def enforce(self) -> GuardCounters:
        """The seed's enforcement steps 3-4: commit pending to current, reset new.

        Unlike :meth:`commit`, the turn's new tokens are dropped (the seed resets the
        counter; the outputs it counted are replaced when the final turn is forced).
        """
        return replace(self, current=self.current + self.pending, pending=0, new=0)

    def set_schema(self, raw_tokens: int, *, scale: float = SCHEMA_SCALE) -> GuardCounters:
        """The tools changed: ``schema = ceil(raw_tokens * scale)`` (seed 002: 2.09).

        Example:
            >>> GuardCounters().set_schema(1_000).schema
            2090
        """
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
            raise ConfigError(f"scale must be a number > 0 (seed 002: 2.09), got {scale!r}")
        return replace(self, schema=math.ceil(_count(raw_tokens, "raw_tokens") * scale))

    def with_extra(self, tokens: int) -> GuardCounters:
        """Set the ``extra`` tokens the next request will also carry."""
        return replace(self, extra=_count(tokens, "extra tokens"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A provider/model the agent may send the next request to.

    Args:
        provider: provider name.
        model: model name (for the window lookup).
        context_window: the window; when None, looked up in ``registry``.
        buffer_tokens: safety margin kept free (seed 002: 8,192).
        max_output_tokens: reserved for the reply; None means ``window // 4``.
        registry: where windows are looked up (default :data:`AI_AGENT_REGISTRY`).

    Raises:
        ConfigError: a value is not a valid token count. (A limit of 0 or less is
            kept: no projection fits it, so `evaluate` skips the target.)

    Example:
        >>> Target(provider="anthropic").window_tokens, Target(provider="anthropic").limit
        (200000, 141808)
        >>> Target(provider="acme").window_tokens  # unknown: seed 002's fallback
        131072
    """

    provider: str
    model: str | None = None
    context_window: int | None = None
    buffer_tokens: int = DEFAULT_BUFFER_TOKENS
    max_output_tokens: int | None = None
    registry: WindowRegistry = field(default=AI_AGENT_REGISTRY, repr=False)
    window_tokens: int = field(init=False)
    limit: int = field(init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str) or not self.provider.strip():
            raise ConfigError(f"a target needs a provider name, got {self.provider!r}")
        if self.context_window is not None:
            window = self.context_window
        else:
            window = resolve_window(self.provider, self.model, registry=self.registry
                                    ).window_tokens
        # validates every number; 0 or less when the window cannot hold the buffer and
        # the reply: nothing fits it, so it is skipped (or the turn forced final)
        limit = guard_limit(window, max_output=self.max_output_tokens,
                            buffer=self.buffer_tokens)
        object.__setattr__(self, "window_tokens", window)
        object.__setattr__(self, "limit", limit)

    @property
    def name(self) -> str:
        """``provider/model`` (or the provider alone)."""
        return f"{self.provider}/{self.model}" if self.model else self.provider


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetCheck:
    """How one target fares.

    Attributes:
        target: the target.
        limit: its effective limit.
        projected: the projection compared with the limit.
        fits: the projection is at most the limit.
        schema_only: the projection with the schema is over the limit, without it
            under — the seed lets the request go ahead.
        status: ``ok`` (fits), ``skip`` (does not, another target does), ``final``
            (no target fits).
    """

    target: Target
    limit: int
    projected: int
    fits: bool
    schema_only: bool
    status: Status


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardDecision:
    """What the guard decides before a request.

    Attributes:
        status: ``ok`` (the first target fits), ``skip`` (it does not, a later target
            does), ``final`` (none fits: force the final turn).
        selected: index of the first target that fits; None when none does.
        targets: one check per target, in order.
        counters: the counters evaluated.
        allowed_tools: tools the request may offer; :data:`FINAL_TOOLS` when final,
            None for no restriction.
        reason: ``"context"`` when the final turn is forced, else None.
    """

    status: Status
    selected: int | None
    targets: tuple[TargetCheck, ...]
    counters: GuardCounters
    allowed_tools: tuple[str, ...] | None
    reason: str | None

    @property
    def forced_final(self) -> bool:
        """True when no target fits and the final turn is forced."""
        return self.status == "final"


def evaluate(counters: GuardCounters, targets: Sequence[Target], *,
             first_turn_schema: bool = False) -> GuardDecision:
    """The guard's pre-request decision (seed 002's ``turn_preflight``).

    Args:
        counters: the counters now.
        targets: providers to try, in order (at least one).
        first_turn_schema: while nothing is committed (``current == 0``), count the
            schema against the limit with no exemption; fixes the seed's first-turn
            underestimate. Off by default (seed behaviour).

    Raises:
        ConfigError: no targets, or something that is not a :class:`Target`.

    Example:
        >>> small = Target(provider="a", context_window=32_000, max_output_tokens=4_000)
        >>> big = Target(provider="b", context_window=200_000)
        >>> d = evaluate(GuardCounters(current=30_000), [small, big])
        >>> d.status, d.selected, [c.status for c in d.targets]
        ('skip', 1, ['skip', 'ok'])
    """
    targets = tuple(targets)
    if not targets or not all(isinstance(t, Target) for t in targets):
        raise ConfigError("evaluate needs one or more Target(provider=..., ...) to try, "
                          f"got {targets!r}")
    strict = first_turn_schema and counters.current == 0
    base = counters.projected_with_schema if strict else counters.projected
    full = counters.projected_with_schema
    fits = [base <= t.limit for t in targets]
    selected = next((i for i, ok in enumerate(fits) if ok), None)
    over: Status = "skip" if selected is not None else "final"
    checks = tuple(TargetCheck(target=t, limit=t.limit, projected=base, fits=ok,
                               schema_only=ok and full > t.limit, status="ok" if ok else over)
                   for t, ok in zip(targets, fits, strict=True))
    final = selected is None
    return GuardDecision(status=checks[0].status, selected=selected, targets=checks,
                         counters=counters, allowed_tools=FINAL_TOOLS if final else None,
                         reason="context" if final else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolBudget:
    """Seed 002's tool budget: room for tool outputs before the next request.

    Reservations add up while they fit; the first that would pass ``limit_tokens``
    is refused and sets ``exceeded`` — from then on nothing is granted and
    :meth:`can_execute` is False (the agent skips the remaining tool calls).

    Attributes:
        limit_tokens: the target's limit.
        used_tokens: the projection when the budget was opened.
        reserved_tokens: tool output granted so far.
        exceeded: a reservation was refused.

    Example:
        >>> b = ToolBudget(limit_tokens=1_000, used_tokens=700)
        >>> b = b.reserve(200)
        >>> b.preview(200), b.can_execute()
        (False, True)
        >>> b = b.reserve(200)
        >>> b.exceeded, b.can_execute(), b.reserved_tokens, b.reserve(1).reserved_tokens
        (True, False, 200, 200)
    """

    limit_tokens: int
    used_tokens: int = 0
    reserved_tokens: int = 0
    exceeded: bool = False

    def __post_init__(self) -> None:
        _count(self.limit_tokens, "limit_tokens")
        _count(self.used_tokens, "used_tokens")
        _count(self.reserved_tokens, "reserved_tokens")

    @classmethod
    def open(cls, counters: GuardCounters, target: Target) -> ToolBudget:
        """A budget for ``target`` starting from the counters' projection (none left
        when the target's limit is 0 or less)."""
        return cls(limit_tokens=max(target.limit, 0), used_tokens=counters.projected)

    @property
    def remaining_tokens(self) -> int:
        """Room left (negative when the projection was already over the limit)."""
        return self.limit_tokens - self.used_tokens - self.reserved_tokens

    def preview(self, tokens: int) -> bool:
        """Whether ``tokens`` more would fit, without reserving them."""
        return not self.exceeded and _count(tokens, "tokens") <= self.remaining_tokens

    def reserve(self, tokens: int) -> ToolBudget:
        """Grant ``tokens`` if they fit, else return the budget marked ``exceeded``."""
        if self.preview(tokens):
            return replace(self, reserved_tokens=self.reserved_tokens + tokens)
        return replace(self, exceeded=True)

    def can_execute(self) -> bool:
        """Whether more tools may run (False once a reservation was refused)."""
        return not self.exceeded


def guard_counters_from_view(view: View, schema_tokens: int = 0, *,
                             scale: float = SCHEMA_SCALE) -> GuardCounters:
    """Counters for a replayed request: what the guard would hold before sending it.

    The committed conversation (``current``) is the request minus its current
    turn: L1 and overhead, tool schemas, carried attachments, earlier turns and the
    message framing. The current turn is in flight: its user message (L5) is the
    seed conversation (``pending``), the agent's work since (L3) is ``new``. So
    ``projected`` equals ``view.total_tokens``. ``schema`` is ``schema_tokens``
    scaled by ``scale``; a view that holds tool schemas already counts them in
    ``current``, as the seed assumes after the first turn.

    Example:
        >>> import ctxlab
        >>> from ctxlab.engine import Budget, build_view, call_end_pos
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> s = t.calls["session"].iloc[0]
        >>> view = build_view(t, s, call_end_pos(t, s, 3), ctxlab.estimator("chars:4"),
        ...                   Budget(window_tokens=200_000, limit_tokens=160_000,
        ...                          target_tokens=100_000))
        >>> c = guard_counters_from_view(view, schema_tokens=1_000)
        >>> c.projected == view.total_tokens, c.schema
        (True, 2090)
    """
    p = view.parts
    pending = int(p.loc[p["layer"] == "prompt", "tokens"].sum()) if len(p) else 0
    new = int(p.loc[p["layer"] == "current", "tokens"].sum()) if len(p) else 0
    total = view.total_tokens if len(p) else view.overhead_tokens
    counters = GuardCounters(current=total - pending - new, pending=pending, new=new)
    return counters.set_schema(schema_tokens, scale=scale)
