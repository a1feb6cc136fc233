"""Loaders: real agent logs in, `Transcript` out.

`load(path)` detects the format from the file's content (or takes ``format=``),
`load_dir(path)` gives a lazy `Corpus` of every log under a folder, and
`discover()` lists the user's own logs in the default locations of Claude Code,
Codex CLI and Gemini CLI.
"""

from __future__ import annotations

from pathlib import Path

from ctxlab.loaders.corpus import Corpus, load_dir
from ctxlab.loaders.discover import discover
from ctxlab.loaders.records import LoadOptions
from ctxlab.loaders.registry import Loader, detect, get, names, register
from ctxlab.schema import Transcript

__all__ = ["Corpus", "LoadOptions", "Loader", "detect", "discover", "get", "load", "load_dir",
           "names", "register"]


def load(path: str | Path, *, format: str | Loader | None = None, strict: bool = False,
         sidechains: bool = False) -> Transcript:
    """Load one log file into a `Transcript`.

    Args:
        path: the log file (never modified).
        format: a loader name or instance; detected from the content when omitted.
        strict: raise `LoadError` (naming file:line) at the first record that cannot be
            used, instead of listing it in ``load_report``.
        sidechains: also load sub-agent conversations, each as a session of its own.

    Raises:
        LoadError: the file is missing, of no known format, or (strict) has a bad record.
    """
    path = Path(path)
    loader = get(format) if format is not None else detect(path)
    if path.is_dir():
        from ctxlab.errors import LoadError
        raise LoadError("is a directory; use ctxlab.load_dir() for a folder of logs",
                        path=str(path))
    return loader.load(path, LoadOptions(strict=strict, sidechains=sidechains))
