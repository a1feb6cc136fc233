"""Context-window registry: how many tokens a provider's model accepts.

Built in: NeuroLink's table (seed 000), 11 provider defaults and 50 model
entries. Budgets: NeuroLink's available input (window - output reserve) and
ai-agent's guard limit (window - buffer - max output, seed 002).

Resolution, with a provider: an equal model entry (``"exact"``); else the
longest entry that the model starts with (``"prefix"``; ``prefix_rule="first"``
takes the first in table order as seed 000 does, so ``gpt-4.1-x`` gets
``gpt-4``'s 8,192); else the provider's default (``"provider-default"``); else
``default_window`` = 128,000 (``"global-default"``), also for an unknown
provider even when another provider lists the model. Without a provider, the
model is matched against every provider (a tie goes to the provider listed
first); failing that, the provider whose entries share the model's family (text
before the first ``-``, e.g. ``claude``) gives its default. ``vendor/name``
with no provider: a known ``vendor`` becomes the provider, else ``name`` is
looked up alone. Case is ignored. An override replaces the built-in with the
same key (method ``"override"``); a more specific built-in still wins.

Example:
    >>> context_window("anthropic", "claude-sonnet-4-20250514")
    200000
    >>> r = resolve_window("acme", "big-model")
    >>> r.window_tokens, r.method
    (128000, 'global-default')
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from ctxlab.errors import ConfigError
from ctxlab.tokens.window_table import SEED_000_TABLE

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AI_AGENT_DEFAULT_CONTEXT_WINDOW", "DEFAULT_BUFFER_TOKENS", "DEFAULT_CONTEXT_WINDOW",
    "DEFAULT_MODEL_KEY", "DEFAULT_OUTPUT_RESERVE_RATIO", "DEFAULT_REGISTRY",
    "MAX_DEFAULT_OUTPUT_RESERVE", "SEED_000_WINDOWS", "SEED_REFERENCE_WINDOWS", "ContextWindow",
    "Method", "PrefixRule", "ResolvedWindow", "WindowRegistry", "available_input_tokens",
    "context_window", "effective_limit", "output_reserve", "resolve_window", "windows_df",
]

DEFAULT_CONTEXT_WINDOW = 128_000  # seed 000: window of an unknown provider/model
MAX_DEFAULT_OUTPUT_RESERVE = 64_000  # seed 000: cap of the reserve when max tokens is unset
DEFAULT_OUTPUT_RESERVE_RATIO = 0.35  # seed 000: reserve as a fraction of the window
DEFAULT_BUFFER_TOKENS = 8_192  # seed 002: safety buffer ai-agent's context guard keeps free
AI_AGENT_DEFAULT_CONTEXT_WINDOW = 131_072  # seed 002: ai-agent's fallback (as default_window)
DEFAULT_MODEL_KEY = "_default"  # seed 000's model key of a provider's default window

Method = Literal["override", "exact", "prefix", "provider-default", "global-default"]
PrefixRule = Literal["longest", "first"]


def _tokens(value: object, what: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{what} must be an int >= {minimum} (tokens), got "
                          f"{type(value).__name__} {value!r}; pass e.g. 128_000")
    return value


_BEDROCK_PROFILE = re.compile(r"^(?:us|eu|apac|us-gov|global)\.(?=[a-z]+\.)")
"""A Bedrock cross-region inference profile's region prefix (``us.anthropic.claude-...``)."""


def _norm(name: str | None) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str):
        raise ConfigError(f"provider and model names must be str, got {type(name).__name__}")
    return name.strip().lower() or None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextWindow:
    """The window of one provider's model (or model prefix), or the provider's default.

    Names are stored stripped and lower case; ``model="_default"`` is stored as ``None``.

    Attributes:
        provider: provider name, e.g. ``"anthropic"`` (no ``/``).
        model: model name or prefix; ``None`` is the provider default.
        window_tokens: context window in tokens (input and output together).
        max_output_tokens: largest reply the model produces, when known.
        source: where the number comes from, e.g. ``"seed 000"`` or ``"override"``.

    Example:
        >>> ContextWindow(provider="OpenAI", model="gpt-4", window_tokens=8_192).key
        'openai/gpt-4'
    """

    provider: str
    model: str | None = None
    window_tokens: int
    max_output_tokens: int | None = None
    source: str = "unspecified"

    def __post_init__(self) -> None:
        provider, model = _norm(self.provider), _norm(self.model)
        if provider is None or "/" in provider:
            raise ConfigError(f"provider {self.provider!r} must be a non-empty name without '/'")
        object.__setattr__(self, "provider", provider)
        object.__setattr__(self, "model", None if model == DEFAULT_MODEL_KEY else model)
        _tokens(self.window_tokens, f"window of {self.key}")
        if self.max_output_tokens is not None:
            _tokens(self.max_output_tokens, f"max output of {self.key}")

    @property
    def key(self) -> str:
        """``"provider/model"``, with ``_default`` for the provider default."""
        return f"{self.provider}/{self.model or DEFAULT_MODEL_KEY}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedWindow:
    """A looked-up window and how it was found.

    Attributes:
        window_tokens: the window.
        method: one of :data:`Method`; ``"override"`` when a user override was used.
        provider: provider used (inferred for a bare model), else the one asked for.
        model: model asked for, normalised.
        entry: the registry row used; ``None`` for the global default.
        reason: one sentence for people, e.g. why a fallback was used.
    """

    window_tokens: int
    method: Method
    provider: str | None
    model: str | None
    entry: ContextWindow | None
    reason: str

    @property
    def is_fallback(self) -> bool:
        """True when a default was used because no row names the model."""
        return self.method in ("provider-default", "global-default")


_Row = tuple[ContextWindow, bool]  # (entry, is_override)


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowRegistry:
    """An immutable table of context windows; changes return a new registry.

    Args:
        entries: built-in rows; each ``provider/model`` key at most once.
        overrides: user rows; each replaces the built-in with the same key.
        default_window: window for unknown providers (seed 000: 128,000).
        prefix_rule: ``"longest"`` matching prefix, or ``"first"`` in table order (seed 000).

    Example:
        >>> reg = DEFAULT_REGISTRY.with_overrides({"anthropic/claude-x": 300_000})
        >>> reg.lookup("anthropic", "claude-x-1"), reg.resolve("anthropic", "claude-x").method
        (300000, 'override')
        >>> DEFAULT_REGISTRY.lookup("anthropic", "claude-x")
        200000
    """

    entries: tuple[ContextWindow, ...] = ()
    overrides: tuple[ContextWindow, ...] = ()
    default_window: int = DEFAULT_CONTEXT_WINDOW
    prefix_rule: PrefixRule = "longest"
    _table: dict[str, dict[str | None, _Row]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _tokens(self.default_window, "default_window")
        if self.prefix_rule not in ("longest", "first"):
            raise ConfigError(f"prefix_rule must be 'longest' or 'first', got {self.prefix_rule!r}")
        object.__setattr__(self, "entries", tuple(self.entries))
        object.__setattr__(self, "overrides", tuple(self.overrides))
        table: dict[str, dict[str | None, _Row]] = {}
        for rows, is_override in ((self.entries, False), (self.overrides, True)):
            seen: set[str] = set()
            for e in rows:
                if not isinstance(e, ContextWindow):
                    raise ConfigError(f"registry rows must be ContextWindow, got {e!r}")
                if e.key in seen:
                    raise ConfigError(f"window {e.key!r} is listed twice; keep one row per key")
                seen.add(e.key)
                table.setdefault(e.provider, {})[e.model] = (e, is_override)
        object.__setattr__(self, "_table", table)

    def providers(self) -> tuple[str, ...]:
        """Known provider names in table order."""
        return tuple(self._table)

    def rows(self) -> tuple[_Row, ...]:
        """Effective ``(entry, is_override)`` rows in table order (overrides replace built-ins)."""
        return tuple(row for models in self._table.values() for row in models.values())

    def with_overrides(self, overrides: Mapping[str, int]) -> WindowRegistry:
        """A new registry where the given windows replace or extend the table.

        Args:
            overrides: ``{"provider/model": tokens}`` for a model (or prefix),
                ``{"provider": tokens}`` for the provider's default. A key given
                again in a later call replaces the earlier override.

        Raises:
            ConfigError: a key is empty, malformed or repeated, or a value is not
                a positive int.

        Example:
            >>> DEFAULT_REGISTRY.with_overrides({"openai": 64_000}).lookup("openai", "gpt-x")
            64000
        """
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"overrides must be a mapping like {{'openai/gpt-4o': 128_000}}, "
                              f"got {type(overrides).__name__}")
        merged, given = {e.key: e for e in self.overrides}, set()
        for key, tokens in overrides.items():
            provider, slash, model = key.partition("/") if isinstance(key, str) else ("", "", "")
            if not provider.strip() or (slash and not model.strip()):
                raise ConfigError(f"override key {key!r} is not valid: write 'provider/model' "
                                  f"(e.g. 'anthropic/claude-x') or 'provider' for its default")
            row = ContextWindow(provider=provider, model=model or None, source="override",
                                window_tokens=_tokens(tokens, f"override {key!r}"))
            if row.key in given:
                raise ConfigError(f"override {row.key!r} is given twice (keys ignore case); "
                                  f"keep one")
            given.add(row.key)
            merged[row.key] = row
        return replace(self, overrides=tuple(merged.values()))

    def resolve(self, provider: str | None = None, model: str | None = None, *,
                strict: bool = False) -> ResolvedWindow:
        """The window of ``provider``/``model`` and how it was found (module rule).

        Args:
            provider: provider name; ``None`` searches every provider by model.
            model: model name; ``None`` asks for the provider's default.
            strict: raise instead of falling back to the global default.

        Raises:
            ConfigError: ``strict`` is set and no row applies; lists known providers.

        Example:
            >>> r = DEFAULT_REGISTRY.resolve(model="claude-opus-4-6")
            >>> r.window_tokens, r.method, r.provider
            (200000, 'provider-default', 'anthropic')
        """
        p, m = _norm(provider), _norm(model)
        if m is not None and "/" in m:     # openai/gpt-4.1, models/gemini-1.5-pro: the name
            vendor = m.partition("/")[0]   # after the last slash, with or without a provider
            p = p if p is not None else vendor if vendor in self._table else None
            m = _norm(m.rsplit("/", 1)[1])
        if m is not None and (bare := _BEDROCK_PROFILE.sub("", m)) != m and bare:
            m = bare                       # a Bedrock inference profile: us.anthropic.claude-...
        if p is not None and p not in self._table:
            return self._global(p, m, f"provider {p!r} is not in the registry", strict)
        if m is not None and (hit := self._match(p, m)) is not None:
            return hit
        why = [f"no row matches model {m!r}" if m is not None
               else "no model given" if p else "neither provider nor model given"]
        if p is None and m is not None:
            family = m.split("-", 1)[0]
            p = next((q for q, models in self._table.items()
                      if any(k and k.split("-", 1)[0] == family for k in models)), None)
            why.append(f"family {family!r} is listed under {p}" if p else
                       f"no provider lists family {family!r}")
        if p is None or None not in self._table[p]:
            return self._global(p, m, "; ".join(why), strict)
        entry, is_override = self._table[p][None]
        return ResolvedWindow(window_tokens=entry.window_tokens, provider=p, model=m, entry=entry,
                              method="override" if is_override else "provider-default",
                              reason="; ".join([*why, f"used {entry.key} ({entry.source})"]))

    def _match(self, provider: str | None, model: str) -> ResolvedWindow | None:
        tables = [self._table[provider]] if provider is not None else list(self._table.values())
        rows = [row for models in tables for k, row in models.items() if k is not None]
        exact = [row for row in rows if row[0].model == model]
        prefix = [row for row in rows if model.startswith(row[0].model or "")]
        if exact:
            (entry, is_override), how = exact[0], "exact"
        elif prefix:
            longest = max(prefix, key=lambda row: len(row[0].model or ""))
            (entry, is_override) = prefix[0] if self.prefix_rule == "first" else longest
            how = "prefix"
        else:
            return None
        verb = "equals" if how == "exact" else "starts with"
        return ResolvedWindow(window_tokens=entry.window_tokens, provider=entry.provider,
                              model=model, entry=entry, method="override" if is_override else how,
                              reason=f"{model!r} {verb} {entry.key} ({entry.source})")

    def _global(self, provider: str | None, model: str | None, why: str,
                strict: bool) -> ResolvedWindow:
        if strict:
            raise ConfigError(f"no context window for provider={provider!r} model={model!r}: "
                              f"{why}. Known providers: {', '.join(self._table) or '(none)'}. "
                              f"Pass one of them, or add it with with_overrides({{name: tokens}}).")
        return ResolvedWindow(window_tokens=self.default_window, method="global-default",
                              provider=provider, model=model, entry=None,
                              reason=f"{why}; used the global default {self.default_window:,}")

    def lookup(self, provider: str | None = None, model: str | None = None, *,
               strict: bool = False) -> int:
        """Window tokens of ``provider``/``model``; see :meth:`resolve`.

        Example:
            >>> DEFAULT_REGISTRY.lookup("openai", "gpt-4o-mini-2024-07-18")
            128000
        """
        return self.resolve(provider, model, strict=strict).window_tokens

    def output_reserve(self, window: int, max_tokens: int | None = None) -> int:
        """Seed 000's output reserve; the same as :func:`output_reserve`."""
        return output_reserve(window, max_tokens)

    def available_input(self, provider: str | None = None, model: str | None = None,
                        max_tokens: int | None = None) -> int:
        """Seed 000's input budget: the window minus :func:`output_reserve`.

        Raises:
            ConfigError: ``max_tokens`` leaves no room for input.

        Example:
            >>> DEFAULT_REGISTRY.available_input("openai", "gpt-4o")  # 128,000 - 44,800
            83200
        """
        found = self.resolve(provider, model)
        window, reserve = found.window_tokens, output_reserve(found.window_tokens, max_tokens)
        if reserve >= window:
            raise ConfigError(f"max_tokens {reserve:,} leaves no input room in the "
                              f"{window:,}-token window ({found.reason}); lower max_tokens")
        return window - reserve

    def effective_limit(self, window: int, *, max_output: int | None = None,
                        buffer: int = DEFAULT_BUFFER_TOKENS) -> int:
        """Seed 002's guard limit; the same as :func:`effective_limit`."""
        return effective_limit(window, max_output=max_output, buffer=buffer)


def output_reserve(window: int, max_tokens: int | None = None) -> int:
    """Tokens held back for the reply (seed 000).

    ``max_tokens`` when given and positive (``0`` counts as not given, as in the
    seed), else ``min(64_000, ceil(window * 0.35))``.

    Example:
        >>> output_reserve(128_000), output_reserve(1_048_576), output_reserve(128_000, 4_096)
        (44800, 64000, 4096)
    """
    _tokens(window, "window")
    if max_tokens is not None and _tokens(max_tokens, "max_tokens", minimum=0) > 0:
        return max_tokens
    return min(MAX_DEFAULT_OUTPUT_RESERVE, math.ceil(window * DEFAULT_OUTPUT_RESERVE_RATIO))


def guard_limit(window: int, *, max_output: int | None = None,
                buffer: int = DEFAULT_BUFFER_TOKENS) -> int:
    """Seed 002's ``window - buffer - max_output`` as it is, 0 or less for a window too
    small to hold the buffer and the reply (gpt-4's 8,192): every request projects over
    it, so the guard skips that target or forces a final turn.

    Example:
        >>> guard_limit(128_000), guard_limit(8_192)
        (87808, -2048)
    """
    _tokens(window, "window")
    _tokens(buffer, "buffer", minimum=0)
    out = window // 4 if max_output is None else _tokens(max_output, "max_output", minimum=0)
    return window - buffer - out


def effective_limit(window: int, *, max_output: int | None = None,
                    buffer: int = DEFAULT_BUFFER_TOKENS) -> int:
    """ai-agent's context-guard limit (seed 002): ``window - buffer - max_output``.

    ``max_output`` defaults to ``window // 4`` when not given.

    Raises:
        ConfigError: the limit is not positive (no room for any input; `guard_limit`
            gives it as it is).

    Example:
        >>> effective_limit(128_000, max_output=16_384), effective_limit(128_000)
        (103424, 87808)
    """
    out = window // 4 if max_output is None else max_output
    if (limit := guard_limit(window, max_output=max_output, buffer=buffer)) <= 0:
        raise ConfigError(f"window {window:,} - buffer {buffer:,} - max output {out:,} = "
                          f"{limit:,} leaves no room for input; lower buffer or max_output")
    return limit


SEED_000_WINDOWS: tuple[ContextWindow, ...] = tuple(
    ContextWindow(provider=p, model=m, window_tokens=n, source="seed 000")
    for p, rows in SEED_000_TABLE.items() for m, n in rows)
"""Seed 000's registry: every provider default and model entry, in the seed's order."""

SEED_REFERENCE_WINDOWS: tuple[ContextWindow, ...] = (
    ContextWindow(provider="openai", model="gpt-4-turbo", window_tokens=128_000,
                  max_output_tokens=16_384, source="seed 002 (example configuration)"),
    ContextWindow(provider="openai", model="gpt-4", window_tokens=128_000,
                  max_output_tokens=16_384, source="seed 002 (debug example; seed 000: 8,192)"),
    ContextWindow(provider="vertex", model=None, window_tokens=1_048_575,
                  source="seed 003 (input limit quoted by a Vertex AI overflow error)"),
)
"""Windows that other seeds state in examples: shown by ``windows_df``, never looked up."""

DEFAULT_REGISTRY = WindowRegistry(entries=SEED_000_WINDOWS)
"""Seed 000's table, its 128,000 global default, and the longest-prefix rule."""


def _registry(registry: WindowRegistry | None) -> WindowRegistry:
    return DEFAULT_REGISTRY if registry is None else registry


def resolve_window(provider: str | None = None, model: str | None = None, *,
                   strict: bool = False, registry: WindowRegistry | None = None) -> ResolvedWindow:
    """:meth:`WindowRegistry.resolve` on ``registry`` (default :data:`DEFAULT_REGISTRY`)."""
    return _registry(registry).resolve(provider, model, strict=strict)


def context_window(provider: str | None = None, model: str | None = None, *,
                   strict: bool = False, registry: WindowRegistry | None = None) -> int:
    """Window tokens of ``provider``/``model``; see :meth:`WindowRegistry.resolve`.

    Example:
        >>> context_window("openai", "gpt-4.1-mini"), context_window(model="gemini-1.5-pro-002")
        (1047576, 2097152)
    """
    return _registry(registry).lookup(provider, model, strict=strict)


def available_input_tokens(provider: str | None = None, model: str | None = None,
                           max_tokens: int | None = None, *,
                           registry: WindowRegistry | None = None) -> int:
    """Seed 000's input budget; see :meth:`WindowRegistry.available_input`.

    Example:
        >>> available_input_tokens("openai", "gpt-4")  # 8,192 - ceil(8,192 * 0.35)
        5324
    """
    return _registry(registry).available_input(provider, model, max_tokens)


def windows_df(registry: WindowRegistry | None = None, *,
               include_reference: bool = False) -> pd.DataFrame:
    """The effective rows of ``registry`` as a DataFrame, for display.

    Columns: ``provider``, ``model`` (``_default`` for provider defaults),
    ``window_tokens``, ``max_output_tokens`` (nullable), ``source``, and ``kind``
    (``builtin``, ``override``, or ``reference`` for :data:`SEED_REFERENCE_WINDOWS`).

    Example:
        >>> df = windows_df()
        >>> len(df), df.loc[df.model == "codestral-latest", "window_tokens"].item()
        (61, 256000)
    """
    import pandas as pd

    rows = [(e, "override" if ov else "builtin") for e, ov in _registry(registry).rows()]
    if include_reference:
        rows += [(e, "reference") for e in SEED_REFERENCE_WINDOWS]
    frame = pd.DataFrame(
        [(e.provider, e.model or DEFAULT_MODEL_KEY, e.window_tokens, e.max_output_tokens, e.source,
          kind) for e, kind in rows],
        columns=["provider", "model", "window_tokens", "max_output_tokens", "source", "kind"])
    return frame.astype({"provider": "str", "model": "str", "window_tokens": "int64",
                         "max_output_tokens": "Int64", "source": "str", "kind": "str"})
