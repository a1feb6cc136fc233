"""The loader registry: built-in formats and plugins register the same way.

A loader is a `Loader`: a name, a ``sniff(path, head)`` test on the first bytes
of a file, and a ``load(path, options)`` function returning a `Transcript`.
Built-in loaders are imported on first use; plugins come from the
``ctxlab.loaders`` entry-point group, loaded once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ctxlab.errors import LoadError
from ctxlab.loaders.records import LoadOptions
from ctxlab.registry import Registry
from ctxlab.schema import Transcript

HEAD_BYTES = 65536

BUILTIN_MODULES = ("claude_code", "codex", "gemini", "copilot_cli", "mini_swe_agent",
                   "swe_agent", "openhands", "inspect_ai", "openai_messages",
                   "anthropic_messages", "aider", "parquet")


@dataclass(frozen=True, slots=True, kw_only=True)
class Loader:
    """One log format.

    Attributes:
        name: registry name, e.g. ``"claude_code"``.
        description: one line for listings.
        sniff: ``(path, head_text) -> bool``: does this file look like the format?
        load: ``(path, options) -> Transcript``.
        priority: when several loaders claim a file, the highest priority wins
            (specific formats over generic message lists).
        owner: ``(path) -> main file or None``: a file that belongs to another log (a
            sub-agent transcript) is loaded with that log, not on its own, by `load_dir`.
    """

    name: str
    description: str
    sniff: Callable[[Path, str], bool]
    load: Callable[[Path, LoadOptions], Transcript]
    priority: int = 0
    owner: Callable[[Path], Path | None] | None = None


REGISTRY: Registry[Loader] = Registry("format", "ctxlab.loaders", BUILTIN_MODULES,
                                     "ctxlab.loaders", Loader, name_of=lambda ld: ld.name)
register = REGISTRY.register


def names() -> list[str]:
    """Names of every registered loader."""
    return REGISTRY.names()


def get(name: str | Loader) -> Loader:
    """A loader by name (or the instance itself); unknown names list the known ones."""
    if isinstance(name, Loader):
        return name
    return REGISTRY.get(name)


def read_head(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(HEAD_BYTES).decode("utf-8-sig", errors="replace")


def _sniffs(loader: Loader, path: Path, head: str) -> bool:
    """Does a loader claim the file? A head it cannot read (JSON nested past the parser's
    depth) is not its format: the other loaders are still asked."""
    try:
        return bool(loader.sniff(path, head))
    except RecursionError:
        return False


def detect(path: str | Path) -> Loader:
    """The loader for a file, by content; raises `LoadError` listing the formats tried."""
    path = Path(path)
    if path.is_dir():
        raise LoadError("is a directory; use ctxlab.load_dir() for a folder of logs",
                        path=str(path))
    if not path.exists():
        raise LoadError("no such file", path=str(path))
    if path.is_file() and path.stat().st_size == 0:
        raise LoadError("an empty file: there is no transcript in it", path=str(path))
    head = read_head(path)
    if not head.strip() and path.stat().st_size <= HEAD_BYTES:     # the head is all of it
        raise LoadError("a file of blank lines only: there is no transcript in it",
                        path=str(path))
    matches = [ld for ld in REGISTRY if _sniffs(ld, path, head)]
    if not matches:
        raise LoadError(f"not a known transcript format; tried: {', '.join(names())}. "
                        f"Force one with format=... (--format on the command line)",
                        path=str(path))
    return max(matches, key=lambda ld: ld.priority)
