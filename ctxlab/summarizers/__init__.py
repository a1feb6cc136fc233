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

from ctxlab.errors import ConfigError
from ctxlab.registry import Registry
from ctxlab.summarizers.base import (Summarizer, SummarizerError, Summary, render_parts,
                                     tool_arguments)

BUILTIN_MODULES: tuple[str, ...] = ("structured",)

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


def summarizer(spec: str | Summarizer) -> Summarizer:
    """The summarizer registered under a name, or the instance itself.

    Raises:
        ConfigError: unknown name (the message lists the known ones), or not a name.

    Example:
        >>> summarizer("gpt-9")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: unknown summarizer 'gpt-9'; known: ...structured
    """
    if isinstance(spec, Summarizer):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"a summarizer is a name such as 'structured' or a Summarizer, not "
                          f"{spec!r}; known: {', '.join(names())}")
    return REGISTRY.get(spec.strip())


__all__ = ["REGISTRY", "Summarizer", "SummarizerError", "Summary", "names", "register",
           "render_parts", "summarizer", "tool_arguments", "unregister"]
