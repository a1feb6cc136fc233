"""Estimators by spec string: ``name`` or ``name:argument``.

Built-in families register here the same way plugins do (entry-point group
``ctxlab.estimators``, loaded lazily once). `estimator` returns one shared
instance per spec, so its count cache serves every caller.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass
from pathlib import Path

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
        file_argument: the argument names a file (a calibration, a tokenizer): the shared
            instance is that of the file as it is now, so a rewritten file is read again.
    """

    name: str
    make: Callable[[str | None], Estimator]
    doc: str
    argument: str = "optional"
    file_argument: bool = False


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
    key = instance_key(spec)
    if key in _INSTANCES:
        return _INSTANCES[key]
    name, arg = split_spec(spec.strip())
    family = _FAMILIES.find(name)
    if family is None:
        raise ConfigError(f"unknown estimator {spec!r}; known families: "
                          + "; ".join(f"{f.name} ({f.doc})" for f in families()))
    if family.argument == "required" and not arg:
        raise ConfigError(f"estimator {name!r} needs an argument: {family.doc}")
    if family.argument == "none" and arg:
        raise ConfigError(f"estimator {name!r} takes no argument (got {arg!r}): {family.doc}")
    made = family.make(arg)
    made.spec = spec.strip()
    _INSTANCES[key] = made
    return made


def instance_key(spec: str) -> str:
    """What one shared estimator instance stands for: the spec, with the identity of every
    file a file-backed family in it names (path, modification time and size: a calibration
    saved again under the same name is read again). Specs naming no file are their own key.

    Example:
        >>> instance_key(" chars:4 ")
        'chars:4'
    """
    key = spec.strip()
    pattern = _file_arguments() if ":" in key else None
    if pattern is None:
        return key
    stamps = []
    for m in pattern.finditer(key):
        path = Path(m.group(1).strip()).expanduser()
        try:
            st = path.stat()
        except OSError:
            continue            # the family says what is wrong when it is made
        stamps.append(f"{path.resolve()}@{st.st_mtime_ns}:{st.st_size}")
    return key + "|" + ";".join(stamps) if stamps else key


def _file_arguments() -> re.Pattern[str] | None:
    """The arguments of file-backed families in a spec (None: no such family), built again
    only when families were added."""
    families = list(_FAMILIES)
    if _FILE_PATTERN and _FILE_PATTERN[0] == len(families):
        return _FILE_PATTERN[1]
    names = [re.escape(f.name) for f in families if f.file_argument]
    pattern = re.compile(r"(?:^|[:,])\s*(?:" + "|".join(names) + r")\s*:\s*([^,]+)",
                         flags=re.IGNORECASE) if names else None
    _FILE_PATTERN[:] = [len(families), pattern]
    return pattern


_FILE_PATTERN: list[Any] = []
