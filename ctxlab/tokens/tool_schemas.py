"""Tool schemas as OpenAI bills them: a function definition is not sent as its JSON.

OpenAI renders the ``tools`` of a chat request into the prompt in a compact form of its
own (a TypeScript-like namespace of functions), so counting a tool schema's JSON with the
model's own tokenizer overstates it: on the real Inspect AI log (gpt-4o-mini, 8 browser
tools) the schemas' JSON is 1,426 o200k tokens where the first request, schemas and all,
was billed 1,124. The accounting OpenAI's cookbook gives for it — per function a fixed
start, ``name:description``, and per parameter a fixed cost and ``name:type:description``
(a trailing period dropped), enums item by item — estimates that request at 1,147 tokens
with the chat framing (it was 1,482), and the log's five within −0.2% and +2.0% of what
was billed, where they were 5.4% to 31.9% over (the 12 tokens that close a request's tools
are not counted: parts are counted one by one).

`function_tokens` is that accounting for one schema part; `FUNCTION_START` holds the
per-function constant of the encodings whose models take tools (others count the JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

FUNCTION_START = {"o200k_base": 7, "cl100k_base": 10}
"""Tokens that open each function definition, per encoding (gpt-4o and later models;
gpt-4 and gpt-3.5-turbo)."""
PROPERTIES_START = 3
"""Tokens that open a function's parameters (when it has any)."""
PROPERTY = 3
"""Tokens of each parameter besides its ``name:type:description`` line."""
ENUM_START = -3
"""Adjustment for a parameter that lists an enum ..."""
ENUM_ITEM = 3
"""... and the tokens of each of its values besides the value itself."""


def function_of(text: str) -> Mapping[str, Any] | None:
    """The function definition a tool-schema part holds (its JSON, bare or in OpenAI's
    ``{"type": "function", "function": {...}}``), None when it is no OpenAI function (not
    JSON, no name, or an Anthropic ``input_schema``, rendered another way).

    Example:
        >>> function_of('{"type": "function", "function": {"name": "f"}}')
        {'name': 'f'}
        >>> function_of('{"name": "f", "input_schema": {}}') is None
        True
    """
    try:
        obj = json.loads(text)
    except (TypeError, ValueError):
        return None
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) \
            or "input_schema" in obj:
        return None
    params = obj.get("parameters")
    if params is not None and not isinstance(params, dict):
        return None
    return obj


def function_tokens(text: str, count: Callable[[str], int], start: int) -> int | None:
    """Tokens OpenAI bills for one tool-schema part (module doc), ``count`` counting a
    text with the encoding and ``start`` its `FUNCTION_START`; None when the part holds
    no OpenAI function definition (`function_of`).

    Example:
        >>> words = lambda s: len(s.replace(":", " ").split())
        >>> schema = ('{"name": "go", "description": "Open a page.", "parameters": '
        ...           '{"properties": {"url": {"type": "string", "description": "Where."}}}}')
        >>> function_tokens(schema, words, 7)   # 7 + "go:Open a page" + 3 + 3 + "url:string:Where"
        20
    """
    fn = function_of(text)
    if fn is None:
        return None
    desc = fn.get("description")
    n = start + count(f"{fn['name']}:{_sentence(desc)}")
    props = (fn.get("parameters") or {}).get("properties")
    if isinstance(props, dict) and props:
        n += PROPERTIES_START
        for name, prop in props.items():
            prop = prop if isinstance(prop, dict) else {}
            n += PROPERTY
            enum = prop.get("enum")
            if isinstance(enum, list):
                n += ENUM_START + sum(ENUM_ITEM + count(str(v)) for v in enum)
            kind = prop.get("type")
            kind = "|".join(map(str, kind)) if isinstance(kind, list) else kind or ""
            n += count(f"{name}:{kind}:{_sentence(prop.get('description'))}")
    return n


def _sentence(text: Any) -> str:
    """A description as the accounting takes it: text, one trailing period dropped."""
    text = text if isinstance(text, str) else ""
    return text[:-1] if text.endswith(".") else text


__all__ = ["FUNCTION_START", "function_of", "function_tokens"]
