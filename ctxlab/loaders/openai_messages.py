"""OpenAI chat-completions message lists (generic; priority 10).

Containers (see `ctxlab.loaders.message_lists`): a JSON list of messages; an object
``{"messages": [...], "tools": [...], "model"?, "usage"?}``; a JSON list of such
objects; JSONL of messages (one conversation) or of conversation objects (one session
per line, id from ``id``/``session`` or ``<stem>:<line>``).

Mapping:

* ``tools`` (or legacy ``functions``): one part each, role system, kind tool_schema,
  content = the schema as JSON, ``tool_name``; all in one message before the others.
* system/developer -> role system (``meta.role`` says developer). user -> a real user
  message: text parts, ``image_url`` -> image part (content = the URL or data URL,
  unchanged), ``input_audio``/``file`` -> attachment part (content = the block's JSON).
* assistant: ``reasoning_content``, then ``reasoning`` when it says something else ->
  thinking (one recorded as other JSON than a text, as that JSON); content -> text;
  ``tool_calls[].function{name, arguments}`` -> tool_call parts (arguments string kept
  verbatim); legacy ``function_call`` -> a tool_call without id. Every assistant
  message is one LLM call; usage from its ``usage`` field (or ``extra.response.usage``,
  mini-swe-agent style): prompt_tokens -> input_total, cached_tokens -> cache_read,
  input_tokens = prompt - cached, completion_tokens -> output_tokens,
  reasoning_tokens. Without usage the call has NA usage. A conversation-level
  ``usage`` is given to the call only when the conversation has exactly one assistant
  message, without usage of its own, and ends with it (a logged request/response pair);
  otherwise it is kept in ``Transcript.meta["conversation_usage"]``.
* tool -> role tool, kind tool_result, ``tool_call_id``, tool name and file path
  looked up from the call. Legacy role function -> role tool, tool name from ``name``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders.builder import (SessionBuilder, content_text, file_path_from_args,
                                    tool_call_text)
from ctxlab.loaders.message_lists import (Conversation, Message, ToolIndex, emit_group,
                                          emit_messages, load_message_list, small_meta,
                                          sniff_style)
from ctxlab.loaders.records import LoadOptions, RecordLog, to_json
from ctxlab.loaders.safe import count
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

KNOWN_KEYS = frozenset({"role", "content", "tool_calls", "function_call", "reasoning",
                        "reasoning_content", "tool_call_id", "usage", "refusal"})


# ---- pieces other loaders reuse ---------------------------------------------------------
def openai_usage(u: Any) -> dict[str, Any]:
    """Call fields from an OpenAI usage object (chat completions or Responses API)."""
    if not isinstance(u, Mapping):
        return {}
    total = count(u.get("prompt_tokens"))
    pdet = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
    cdet = u.get("completion_tokens_details") or u.get("output_tokens_details") or {}
    if total is None:
        total = count(u.get("input_tokens"))
    cached = count(pdet.get("cached_tokens")) if isinstance(pdet, Mapping) else None
    if cached is None:
        cached = count(u.get("cache_read_input_tokens"))
    out = count(u.get("completion_tokens"))
    return {"input_total": total,
            "cache_read": cached,
            "input_tokens": total - cached if total is not None and cached is not None else None,
            "cache_write": count(u.get("cache_creation_input_tokens")),
            "output_tokens": out if out is not None else count(u.get("output_tokens")),
            "reasoning_tokens": count(cdet.get("reasoning_tokens"))
            if isinstance(cdet, Mapping) else None}


def tool_call_parts(tool_calls: Any) -> list[dict[str, Any]]:
    """tool_call parts from an OpenAI ``tool_calls`` list."""
    parts = []
    for tc in tool_calls or []:
        fn = tc["function"]
        name, args = str(fn["name"]), fn.get("arguments", "")
        parts.append({"kind": "tool_call", "content": tool_call_text(name, args),
                      "tool_name": name, "tool_call_id": tc.get("id"),
                      "file_path": file_path_from_args(args),
                      "meta": {"type": tc["type"]} if tc.get("type") not in (None, "function")
                      else None})
    return parts


def content_parts(content: Any, kind: str = "text") -> list[dict[str, Any]]:
    """Parts of an OpenAI ``content`` value: a string or a list of content parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"kind": kind, "content": content}]
    if not isinstance(content, list):
        raise TypeError(f"content is {type(content).__name__}")
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"kind": kind, "content": block})
            continue
        t = block.get("type")
        if t in ("text", "input_text", "output_text") or (t is None and "text" in block):
            parts.append({"kind": kind, "content": block["text"]})
        elif t == "refusal":
            parts.append({"kind": kind, "content": block["refusal"], "meta": {"refusal": True}})
        elif t == "image_url":
            img = block["image_url"]
            url = img if isinstance(img, str) else img["url"]
            detail = None if isinstance(img, str) else img.get("detail")
            parts.append({"kind": "image", "content": url,
                          "meta": {"detail": detail} if detail else None})
        elif t in ("input_audio", "file"):
            inner = block.get(t, block)
            name = inner.get("filename") if isinstance(inner, Mapping) else None
            parts.append({"kind": "attachment", "content": to_json(inner),
                          "file_path": name if isinstance(name, str) else None,
                          "meta": {"type": t}})
        else:
            parts.append({"kind": kind, "content": to_json(block), "meta": {"type": t}})
    return parts


def tool_schema_part(schema: Any) -> dict[str, Any]:
    """A tool_schema part from ``{"type": "function", "function": {...}}`` or a bare one."""
    fn = schema.get("function", schema)
    name = fn.get("name")
    return {"kind": "tool_schema", "content": to_json(schema), "role": "system",
            "tool_name": name if isinstance(name, str) else None}


def parse_message(m: Any, tools: ToolIndex, *, model: str | None = None) -> Message:
    """One OpenAI chat message as a `Message` (assistant messages carry their call)."""
    role = m["role"]
    meta = small_meta(m, KNOWN_KEYS | {"extra", "name", "model", "id", "timestamp"}) or {}
    if isinstance(m.get("name"), str):
        meta["name"] = m["name"]
    if role in ("system", "developer"):
        parts = content_parts(m.get("content"))
        if role == "developer":
            meta["role"] = "developer"
        msg = Message("system", parts)
    elif role == "user":
        msg = Message("user", content_parts(m.get("content")), real_user=True)
    elif role == "assistant":
        parts = []
        said: set[str] = set()      # (servers that give both give the same text twice)
        for key in ("reasoning_content", "reasoning"):
            value = m.get(key)
            text = value if isinstance(value, str) else content_text(value)
            if text and text not in said:
                parts.append({"kind": "thinking", "content": text, "meta": {"field": key}})
                said.add(text)
        parts += content_parts(m.get("content"))
        if isinstance(m.get("refusal"), str) and m["refusal"]:
            parts.append({"kind": "text", "content": m["refusal"], "meta": {"refusal": True}})
        parts += tool_call_parts(m.get("tool_calls"))
        fc = m.get("function_call")
        if fc:
            name = str(fc["name"])
            parts.append({"kind": "tool_call", "content": tool_call_text(name, fc.get(
                "arguments", "")), "tool_name": name,
                "file_path": file_path_from_args(fc.get("arguments")),
                "meta": {"legacy": "function_call"}})
        usage = m.get("usage")
        if usage is None and isinstance(m.get("extra"), Mapping):
            usage = (m["extra"].get("response") or {}).get("usage")
        call = openai_usage(usage)
        mdl = m.get("model") if isinstance(m.get("model"), str) else model
        cid = m.get("id")
        call.update(model=mdl, call_id=str(cid) if isinstance(cid, (str, int)) else None,
                    ts=m.get("timestamp") or m.get("created"))
        msg = Message("assistant", parts, call=call)
    elif role in ("tool", "function"):
        call_id = m.get("tool_call_id")
        name, path = tools.lookup(call_id)
        name = name or (m["name"] if isinstance(m.get("name"), str) else None)
        parts = content_parts(m.get("content"), kind="tool_result")
        if not parts:
            parts = [{"kind": "tool_result", "content": ""}]
        for p in parts:
            p.setdefault("tool_name", name)
            p.setdefault("file_path", path)
            p["tool_call_id"] = str(call_id) if call_id is not None else None
            if p["kind"] != "tool_result":
                p["meta"] = {**(p.get("meta") or {}), "in_tool_result": True}
        if role == "function":
            meta["legacy"] = "function"
        msg = Message("tool", parts)
    else:
        raise ValueError(f"unknown role {role!r}")
    if meta:
        for p in msg.parts:
            p["meta"] = {**meta, **(p.get("meta") or {})}
    ts = m.get("timestamp")         # the builder reads it (and reports one it cannot)
    if ts is not None and ts != "":
        for p in msg.parts:
            p.setdefault("ts", ts)
    return msg


# ---- the loader -------------------------------------------------------------------------
def convert(b: SessionBuilder, conv: Conversation, log: RecordLog,
            meta: dict[str, Any]) -> None:
    """Turn one conversation into parts and calls."""
    model = conv.fields.get("model") if isinstance(conv.fields.get("model"), str) else None
    if model:
        meta.setdefault("models", [])
        if model not in meta["models"]:
            meta["models"].append(model)
    schemas = list(conv.tools)
    if isinstance(conv.fields.get("functions"), list):
        schemas += [conv.record(f"functions[{j}]", v, log)
                    for j, v in enumerate(conv.fields["functions"])]
    emit_group(b, log, "system", schemas, "tool_schema", tool_schema_part)
    tools = ToolIndex()
    emit_messages(b, log, conv, lambda v: parse_message(v, tools, model=model), tools,
                  openai_usage, meta)


def sniff(path: Path, head: str) -> bool:
    """A JSON/JSONL head showing OpenAI-style messages (or plain role/content lists)."""
    return sniff_style(head) == "openai"


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load an OpenAI message-list file."""
    return load_message_list(path, options, fmt="openai_messages", convert=convert)


LOADER = register(Loader(name="openai_messages",
                         description="OpenAI chat-completions message lists (JSON or JSONL)",
                         sniff=sniff, load=load, priority=10))
