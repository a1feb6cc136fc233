"""Compaction stages: pure planners, registered by name.

Every module in this package that defines a `Stage` subclass registers it with
`register`; plugins register through the ``ctxlab.stages`` entry point. `stage`
builds one from a name and parameters (or passes an instance through).

    >>> from ctxlab.stages import stage
    >>> stage("prune", protect_tokens=10_000).protect_tokens
    10000
"""

from __future__ import annotations

import pkgutil
from typing import Any, TypeVar

from ctxlab.errors import ConfigError
from ctxlab.registry import Registry
from ctxlab.stages.base import Edit, NewPart, Stage, View

S = TypeVar("S", bound=type[Stage])

_INTERNAL = frozenset({"base", "grammar"})
BUILTIN_MODULES: tuple[str, ...] = tuple(sorted(
    m.name for m in pkgutil.iter_modules(__path__) if m.name not in _INTERNAL))

REGISTRY: Registry[type[Stage]] = Registry("stage", "ctxlab.stages", BUILTIN_MODULES,
                                           "ctxlab.stages", type, name_of=lambda c: c.name)


def register(cls: S) -> S:
    """Class decorator: add a `Stage` subclass under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Stage)) or not cls.name:
        raise ConfigError(f"{cls!r} is not a Stage subclass with a name")
    REGISTRY.register(cls)
    return cls


def names() -> list[str]:
    """Every registered stage name."""
    return REGISTRY.names()


def stage(spec: str | Stage, **params: Any) -> Stage:
    """A stage from its name and parameters, or the instance itself.

    Raises:
        ConfigError: unknown name (listing the known ones) or unknown parameters.
    """
    if isinstance(spec, Stage):
        if params:
            raise ConfigError("parameters go with a stage name, not with an instance; use "
                              "dataclasses.replace(stage, ...)")
        return spec
    cls = REGISTRY.get(spec)
    try:
        return cls(**params)
    except TypeError as e:
        known = ", ".join(cls().params()) if not params else ", ".join(
            f for f in cls.__dataclass_fields__)
        raise ConfigError(f"stage {spec!r}: {e}; its parameters: {known}") from None


__all__ = ["Edit", "NewPart", "REGISTRY", "Stage", "View", "names", "register", "stage"]
