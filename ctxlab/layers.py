"""Which layer of the request every visible part belongs to (seed 003's L1–L5).

=========  ==========  ===============================================================
layer      name        parts
=========  ==========  ===============================================================
L1         system      role ``system`` that is not a summary or marker (system prompt,
                       project context), context a client injects into a user message
                       (a part opening with ``<project_context>``, ``<system-reminder>``
                       or ``<context>``: Claude Code's CLAUDE.md, Copilot's project
                       files), plus the unrecorded overhead
—          tools       ``tool_schema`` parts (tool definitions)
L2         carried     attachments of earlier turns, carried into this request
L3         current     the current turn's attachments and the agent's work after the
                       current user message (assistant steps, tool calls and results)
L4         history     the conversation of earlier turns (and summaries, markers)
L5         prompt      the current user message
=========  ==========  ===============================================================

The current turn is the latest turn in the request; its prompt is the first user
message of that turn.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from ctxlab.stages.base import Rows, count_rows, ints
from ctxlab.stages.columns import table_of
from ctxlab.stages.table import Table

LayerContext = tuple[int, int]
"""What a request's layers depend on besides each part's own cells: its current turn
and its prompt's message (-1: none). `layer_context` gives it."""
Layer = Literal["system", "tools", "carried", "current", "history", "prompt"]
LAYERS: tuple[str, ...] = get_args(Layer)
INJECTED_CONTEXT = r"\s*<(?:project_context|system-reminder|context|prior_context)[\s>]"
LAYER_CODES = {"system": "L1", "tools": "tools", "carried": "L2", "current": "L3",
               "history": "L4", "prompt": "L5"}


def assign_layers(parts: Rows, context: LayerContext | None = None) -> np.ndarray:
    """The layer of every part of one request (parts of ONE session, any order;
    ``context``: its `layer_context`, when known).

    Example:
        >>> parts = pd.DataFrame({
        ...     "msg": [0, 1, 2, 3, 4, 4], "turn": [0, 1, 1, 2, 2, 2],
        ...     "role": ["system", "user", "assistant", "user", "assistant", "assistant"],
        ...     "kind": ["text", "text", "text", "text", "thinking", "tool_call"]})
        >>> assign_layers(parts).tolist()
        ['system', 'history', 'history', 'prompt', 'current', 'current']
    """
    if not count_rows(parts):
        return np.array([], dtype=object)
    t = table_of(parts)
    if t is None:
        t = Table.from_frame(parts.reset_index(drop=True))
    return _layers(t, layer_context(t) if context is None else context)


def layer_context(t: Table) -> LayerContext:
    """The current turn (the highest) and the prompt's message (the first user text of
    the current turn, -1 when there is none or the current turn is 0) of a request."""
    if not t.n:
        return 0, -1
    turn = ints(t, "turn")
    current = int(turn.max())
    if current <= 0:
        return current, -1
    user_msgs = ints(t, "msg")[(turn == current) & user_texts(t)]
    return current, int(user_msgs.min()) if len(user_msgs) else -1


def added_layers(new: Table, before: LayerContext) -> np.ndarray | None:
    """The layers of rows joining a request of layer context ``before``, in the request
    they make together (a replay's request: the last one's rows and those that arrived
    since); only the new rows are read. None when they change the context (a new turn,
    an earlier prompt message): the earlier rows' layers change too, and the whole
    request is assigned again (`assign_layers`)."""
    if new.n > _FEW:
        context = _grown_context(new, before)
        return _layers(new, context) if context == before else None
    # a few rows (a replay's arrivals at one call): the same rules, in Python
    current, prompt = before
    rows = list(zip(layer_classes(new).tolist(), ints(new, "turn").tolist(),
                    ints(new, "msg").tolist()))
    for flags, turn, msg in rows:
        if turn > current or (current > 0 and turn == current and flags & _USER_TEXT
                              and (prompt == -1 or msg < prompt)):
            return None             # a new turn, or an earlier prompt message
    return np.array([_layer(flags, turn == current > 0, msg == prompt)
                     for flags, turn, msg in rows], dtype=object)


_FEW = 16
"""`added_layers` assigns at most this many rows in Python, more with NumPy."""


def _layer(flags: int, in_current: bool, in_prompt: bool) -> str:
    """One part's layer (`_layers`, for one row): its `layer_classes` flags, whether it
    is of the current turn and of the prompt's message."""
    if flags & _TOOLS:
        return "tools"
    if flags & _SYSTEM:
        return "system"
    if flags & _ATTACHMENT:
        return "current" if in_current else "carried"
    return "prompt" if in_prompt else "current" if in_current else "history"


def _grown_context(new: Table, before: LayerContext) -> LayerContext:
    """The `layer_context` of a request of context ``before`` with ``new`` rows added."""
    if not new.n:
        return before
    turn = ints(new, "turn")
    if int(turn.max()) > before[0]:     # a new turn: the earlier rows have none of it
        return layer_context(new)
    current = before[0]
    if current <= 0:
        return before
    user_msgs = ints(new, "msg")[(turn == current) & user_texts(new)]
    if not len(user_msgs):
        return before
    first = int(user_msgs.min())
    return current, first if before[1] == -1 else min(before[1], first)


def _layers(t: Table, context: LayerContext) -> np.ndarray:
    """The layer of every part of a table, in a request of that context."""
    cls = layer_classes(t)
    turn = ints(t, "turn")
    msg = ints(t, "msg")
    current, prompt_msg = context
    in_current = turn == current if current > 0 else np.zeros(len(turn), dtype=bool)
    code = np.where(in_current, np.int8(_CODE["current"]), np.int8(_CODE["history"]))
    attachment = (cls & _ATTACHMENT) != 0
    code[attachment & ~in_current] = _CODE["carried"]
    code[(msg == prompt_msg) & ~attachment] = _CODE["prompt"]
    code[(cls & _SYSTEM) != 0] = _CODE["system"]
    code[(cls & _TOOLS) != 0] = _CODE["tools"]
    return _NAMES[code]


# What of a part's layer depends on the part alone (`_classes`, bit flags); the rest
# depends on the request's current turn and prompt.
_ATTACHMENT, _SYSTEM, _TOOLS, _USER_TEXT = 1, 2, 4, 8
USER_TEXT = _USER_TEXT
CATEGORY_OF_CLASS: tuple[str, ...] = tuple(
    "tools" if f & _TOOLS else "system" if f & _SYSTEM else "attach" if f & _ATTACHMENT
    else "other" for f in range(16))
"""The `layer_categories` category of each `layer_classes` value (what of a part's layer
does not depend on the request: tools, then system, then attachment)."""
_CATEGORIES = np.array(CATEGORY_OF_CLASS, dtype=object)


def layer_categories(t: Table) -> np.ndarray:
    """Per part, what of its layer does not depend on the request's current turn:
    ``"system"``, ``"tools"``, ``"attach"`` (an attachment: carried or current) or
    ``"other"`` (history, current or prompt). A replay keeps a token sum per category.

    Example:
        >>> t = Table.from_frame(pd.DataFrame({"role": ["system", "user", "user"],
        ...     "kind": ["text", "attachment", "text"],
        ...     "content": ["You are...", "file", "<system-reminder>x</system-reminder>"]}))
        >>> layer_categories(t).tolist()
        ['system', 'attach', 'system']
    """
    return _CATEGORIES[layer_classes(t)]


def layer_classes(t: Table) -> np.ndarray:
    """Per part, what of its layer depends on the part alone, as bit flags (`USER_TEXT`
    and the others; `CATEGORY_OF_CLASS` maps them to `layer_categories`). Kept with the
    table's rows."""
    return t.derived("layer_class", ("role", "kind", "content"), _classes)


def user_texts(t: Table) -> np.ndarray:
    """Per part, whether it is a user text (what `assign_layers` picks a turn's prompt
    message among; injected context included)."""
    return (layer_classes(t) & _USER_TEXT) != 0


def _classes(t: Table) -> np.ndarray:
    """`_class` of every part (a table's, once: the array travels with the rows)."""
    contents = t.col("content").tolist() if "content" in t else [None] * t.n
    return np.fromiter((_class(r, k, c) for r, k, c in zip(
        t.col("role").tolist(), t.col("kind").tolist(), contents)), dtype=np.int8, count=t.n)


def _class(role: Any, kind: Any, content: Any) -> int:
    """What of one part's layer depends on the part alone, as `_ATTACHMENT`, `_SYSTEM`
    (a system part that is not a summary or marker, or context a client injects into a
    user text), `_TOOLS` (a tool schema) and `_USER_TEXT` flags."""
    flags = _TOOLS if kind == "tool_schema" else _ATTACHMENT if kind == "attachment" else 0
    if role == "system" and kind not in ("summary", "marker"):
        flags |= _SYSTEM
    elif role == "user" and kind == "text":
        flags |= _USER_TEXT
        if isinstance(content, str) and _INJECTED.match(content):
            flags |= _SYSTEM
    return flags


_CODE = {name: i for i, name in enumerate(LAYERS)}
_NAMES = np.array(LAYERS, dtype=object)
_INJECTED = re.compile(INJECTED_CONTEXT)


def layers_df(parts: pd.DataFrame, *, overhead_tokens: int = 0) -> pd.DataFrame:
    """Tokens, parts and characters per layer of one request.

    Args:
        parts: the request's parts with ``tokens`` (and ``layer``, else assigned here).
        overhead_tokens: unrecorded input, counted in L1.

    Returns:
        One row per layer in L1–L5 order: ``layer``, ``code``, ``parts``, ``chars``,
        ``tokens`` (``system`` includes the overhead), ``overhead_tokens``, ``share``.
    """
    layer = parts["layer"] if "layer" in parts else pd.Series(assign_layers(parts),
                                                              index=parts.index)
    df = pd.DataFrame({"layer": layer.to_numpy(), "tokens": parts["tokens"].to_numpy(),
                       "chars": parts["content"].str.len().to_numpy(dtype=np.int64,
                                                                    na_value=0)})
    g = df.groupby("layer").agg(parts=("tokens", "size"), chars=("chars", "sum"),
                                tokens=("tokens", "sum"))
    out = g.reindex(list(LAYERS), fill_value=0).rename_axis("layer").reset_index()
    out["overhead_tokens"] = np.where(out["layer"] == "system", overhead_tokens, 0)
    out["tokens"] = out["tokens"] + out["overhead_tokens"]
    total = out["tokens"].sum()
    out["share"] = out["tokens"] / total if total else 0.0
    out.insert(1, "code", out["layer"].map(LAYER_CODES))
    return out.astype({"parts": "int64", "chars": "int64", "tokens": "int64",
                       "overhead_tokens": "int64"})
