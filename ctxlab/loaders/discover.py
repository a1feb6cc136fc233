"""Find the user's own agent logs in the default locations of the CLIs that write them."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

# (format, root relative to home or an environment variable, glob under it)
LOCATIONS: tuple[tuple[str, str, str, str], ...] = (
    ("claude_code", "CLAUDE_CONFIG_DIR", ".claude", "projects/*/*.jsonl"),
    ("codex", "CODEX_HOME", ".codex", "sessions/**/rollout-*.jsonl"),
    ("gemini", "GEMINI_DIR", ".gemini", "tmp/*/chats/session-*.json*"),
)


def discover(home: str | Path | None = None) -> pd.DataFrame:
    """List agent logs in the default locations (``~/.claude``, ``~/.codex``, ``~/.gemini``).

    Args:
        home: the home folder to search (default: the user's). Environment variables
            ``CLAUDE_CONFIG_DIR`` and ``CODEX_HOME`` override the roots, as the CLIs do,
            when ``home`` is not given.

    Returns:
        One row per file: ``format``, ``path``, ``size_bytes``, ``modified`` (UTC),
        newest first. Empty when nothing is found.
    """
    base = Path(home) if home is not None else Path.home()
    rows = []
    for fmt, env, default, pattern in LOCATIONS:
        root = Path(os.environ[env]) if home is None and os.environ.get(env) else base / default
        if not root.is_dir():
            continue
        for p in root.glob(pattern):
            if p.is_file():
                st = p.stat()
                rows.append(dict(format=fmt, path=str(p), size_bytes=st.st_size,
                                 modified=pd.Timestamp(st.st_mtime, unit="s", tz="UTC")))
    df = pd.DataFrame(rows, columns=["format", "path", "size_bytes", "modified"])
    if df.empty:
        return df.astype({"format": "string", "path": "string", "size_bytes": "int64",
                          "modified": "datetime64[ns, UTC]"})
    return df.sort_values("modified", ascending=False, kind="stable").reset_index(drop=True)
