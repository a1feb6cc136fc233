"""Estimators by spec string: ``name`` or ``name:argument``.

Built-in families register here the same way plugins do (entry-point group
``ctxlab.estimators``, loaded lazily once). `estimator` returns one shared
instance per spec, so its count cache serves every caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxlab.errors import ConfigError
from ctxlab.registry import Registry
from ctxlab.tokens.base import Estimator

BUILTIN_MODULES = ("heuristics", "combined", "calibration", "exact")


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """A family of estimators sharing a spec prefix.

    Attributes:
        name: the part of the spec before ``:``.
        make: builds an estimator from the argument after ``:`` (None when absent).
        doc: one line for listings, with an example spec.
        argument: whether an argument is required, optional or refused.
    """

    name: str
    make: Callable[[str | None], Estimator]
    doc: str
    argument: str = "optional"


_FAMILIES: Registry[Family] = Registry("estimator family", "ctxlab.tokens", BUILTIN_MODULES,
                                      "ctxlab.estimators", Family, name_of=lambda f: f.name)
_INSTANCES: dict[str, Estimator] = {}


def register(family: Family) -> Family:
    """Add an estimator family; a second one with the same name is an error."""
    if family.argument not in ("optional", "required", "none"):
        raise ConfigError(f"argument must be optional, required or none, not {family.argument!r}")
    return _FAMILIES.register(family)


def names() -> list[str]:
    """Names of every registered estimator family."""
    return _FAMILIES.names()


def families() -> list[Family]:
    """Every registered family, by name."""
    return list(_FAMILIES)


def split_spec(spec: str) -> tuple[str, str | None]:
    """Split a spec: ``"tiktoken:o200k_base"`` → ``("tiktoken", "o200k_base")``.

    Example:
        >>> split_spec("neuron"), split_spec(" Chars:3.5 ")
        (('neuron', None), ('chars', '3.5'))
    """
    name, sep, arg = spec.strip().partition(":")
    return name.strip().lower(), (arg.strip() if sep else None)


def estimator(spec: str | Estimator) -> Estimator:
    """The estimator a spec names (one shared instance per spec), or the instance itself.

    Args:
        spec: ``"chars:4"``, ``"neurolink:anthropic"``, ``"tiktoken:gpt-4o"``,
            ``"max:tiktoken:cl100k_base,chars:4"``..., or an `Estimator`.

    Raises:
        ConfigError: unknown family (the message lists the known ones) or a bad argument.

    Example:
        >>> estimator("chars:4").count(["twelve chars"]).tolist()
        [3]
        >>> estimator("chars:4") is estimator("chars:4")
        True
    """
    if isinstance(spec, Estimator):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"an estimator is a spec string such as 'chars:4' or an Estimator, "
                          f"not {spec!r}; known families: {', '.join(names())}")
    key = spec.strip()
    if key in _INSTANCES:
        return _INSTANCES[key]
    name, arg = split_spec(key)
    family = _FAMILIES.find(name)
    if family is None:
        raise ConfigError(f"unknown estimator {spec!r}; known families: "
                          + "; ".join(f"{f.name} ({f.doc})" for f in families()))
    if family.argument == "required" and not arg:
        raise ConfigError(f"estimator {name!r} needs an argument: {family.doc}")
    if family.argument == "none" and arg:
        raise ConfigError(f"estimator {name!r} takes no argument (got {arg!r}): {family.doc}")
    made = family.make(arg)
    made.spec = key
    _INSTANCES[key] = made
    return made
