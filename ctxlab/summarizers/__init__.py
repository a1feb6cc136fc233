"""Summarizers: turn older parts into a summary, registered by name.

Built-in backends register themselves the same way plugins do (entry-point group
``ctxlab.summarizers``, loaded lazily once). `summarizer` returns the registered
instance of a name, or passes an instance through.

    >>> from ctxlab.summarizers import names, summarizer
    >>> "structured" in names()
    True
    >>> summarizer("structured").model
    'extractive'
"""

from __future__ import annotations

from pathlib import Path

from typing import Any

from ctxlab.errors import ConfigError
from ctxlab.registry import Registry
from ctxlab.summarizers.base import (DEFAULT_BUDGET_TOKENS, Summarizer, SummarizerError,
                                     Summary, render_parts, tool_arguments)

BUILTIN_MODULES: tuple[str, ...] = ("structured", "truncation", "openai_chat",
                                    "anthropic_chat")

REGISTRY: Registry[Summarizer] = Registry("summarizer", "ctxlab.summarizers", BUILTIN_MODULES,
                                          "ctxlab.summarizers", Summarizer,
                                          name_of=lambda s: s.name)


def register(entry: Summarizer) -> Summarizer:
    """Add a summarizer instance under its ``name``; a second one with that name is an error.

    Raises:
        ConfigError: not a `Summarizer`, no name, or the name is taken.
    """
    if not isinstance(entry, Summarizer) or not entry.name:
        raise ConfigError(f"{entry!r} is not a Summarizer instance with a name")
    return REGISTRY.register(entry)


def unregister(name: str) -> None:
    """Remove a summarizer (tests, plugin reloads)."""
    REGISTRY.unregister(name)


def names() -> list[str]:
    """Every registered summarizer name."""
    return REGISTRY.names()


def summarizer(spec: str | Summarizer, **options: Any) -> Summarizer:
    """The summarizer registered under a name, or the instance itself; with ``options``,
    that backend configured by them (registered under a name derived from the options, so
    a pipeline can refer to it and asking again returns the same instance).

    Raises:
        ConfigError: unknown name (the message lists the known ones), not a name,
            options given with an instance, or options the backend does not take.

    Example:
        >>> summarizer("gpt-9")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: unknown summarizer 'gpt-9'; known: ...structured...
        >>> summarizer("openai", model="gpt-4.1-mini").name
        'openai[model=gpt-4.1-mini]'
    """
    if isinstance(spec, Summarizer):
        if options:
            raise ConfigError(f"options ({', '.join(sorted(options))}) go with a summarizer "
                              f"name, not an instance")
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"a summarizer is a name such as 'structured' or a Summarizer, not "
                          f"{spec!r}; known: {', '.join(names())}")
    base = REGISTRY.get(spec.strip())
    if not options:
        return base
    configured = base.with_options(**options)
    existing = REGISTRY.find(configured.name)
    if existing is None:
        return register(configured)
    for attr in ("cache_path", "http_client"):    # what the derived name leaves out
        a, b = getattr(existing, attr, None), getattr(configured, attr, None)
        if attr == "cache_path":
            a, b = (Path(x).resolve() if x is not None else None for x in (a, b))
        if a is not b and a != b:
            raise ConfigError(f"a summarizer named {configured.name!r} already exists with "
                              f"another {attr} ({a}); this one ({b}) would be that one: give "
                              f"it a name of its own (name='...')")
    return existing


__all__ = ["DEFAULT_BUDGET_TOKENS", "REGISTRY", "Summarizer", "SummarizerError", "Summary",
           "names", "register", "render_parts", "summarizer", "tool_arguments", "unregister"]
