"""One registry mechanism for loaders, estimators and (later) stages, presets, summarizers.

Built-in entries register themselves when their module is imported; the modules
are imported on the first lookup, then plugins from the entry-point group, once.
A second entry with the same name is an error; an unknown name lists the known.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from ctxlab.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind, loaded lazily.

    Args:
        kind: what an entry is called in messages ("loader", "estimator family").
        package: where the built-in modules live (``"ctxlab.loaders"``).
        modules: built-in module names, imported on first use.
        group: the entry-point group plugins register through.
        entry_type: plugins must be instances of it.
        name_of: an entry's name.

    Example:
        >>> r = Registry("widget", "ctxlab", (), "ctxlab.widgets", str, name_of=str)
        >>> r.register("spanner")
        'spanner'
        >>> r.get("hammer")
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: unknown widget 'hammer'; known: spanner
    """

    def __init__(self, kind: str, package: str, modules: tuple[str, ...], group: str,
                 entry_type: type, *, name_of: Callable[[T], str]) -> None:
        self.kind, self.package, self.modules, self.group = kind, package, modules, group
        self.entry_type = entry_type
        self.name_of = name_of
        self._entries: dict[str, T] = {}
        self._loaded = False

    def register(self, entry: T) -> T:
        """Add an entry; a second one with the same name is an error."""
        name = self.name_of(entry)
        if name in self._entries:
            raise ConfigError(f"a {self.kind} named {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove an entry (tests and plugin reloads)."""
        self._entries.pop(name, None)

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for mod in self.modules:
            importlib.import_module(f"{self.package}.{mod}")
        for ep in entry_points(group=self.group):
            obj = ep.load()
            if isinstance(obj, self.entry_type) and self.name_of(obj) not in self._entries:
                self.register(obj)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self._ensure_loaded()
        return sorted(self._entries)

    def get(self, name: str) -> T:
        """The entry of a name; unknown names raise `ConfigError` listing the known ones."""
        self._ensure_loaded()
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {name!r}; known: "
                              f"{', '.join(self.names())}") from None

    def find(self, name: str) -> T | None:
        """The entry of a name, or None."""
        self._ensure_loaded()
        return self._entries.get(name)

    def __iter__(self) -> Iterator[T]:
        self._ensure_loaded()
        return iter([self._entries[n] for n in sorted(self._entries)])
