"""Anthropic Messages API lists (generic; priority 10).

Containers (see `ctxlab.loaders.message_lists`): a JSON list of ``{role, content}``; an
object ``{system?, messages, tools?, model?}``; a JSON list of such objects; JSONL of
such objects (one session per line) or of messages.

Mapping:

* ``tools``: one part each, role system, kind tool_schema, content = the schema JSON.
* ``system`` (string or text blocks): role system text parts, after the tool schemas
  (the order in which the API renders them).
* Content blocks: text -> text; thinking -> thinking (``signature`` recorded by size
  only); redacted_thinking -> thinking whose content is the opaque ``data`` (it is sent
  back, unreadable); tool_use / server_tool_use -> tool_call; tool_result -> role
  user, kind tool_result, linked by ``tool_use_id`` (its text blocks make one part,
  its images become image parts of the same tool_call_id); ``*_tool_result`` blocks of
  server tools stay in the assistant message as tool_result parts; image -> image
  (content = base64 data or URL, unchanged); document -> attachment.
* A user message is a real user turn unless it holds tool_result blocks.
* Every assistant message is one LLM call; usage from its ``usage`` field when present:
  input_total = input_tokens + cache_creation_input_tokens + cache_read_input_tokens. A
  conversation-level ``usage`` goes to the call when the conversation has exactly one
  assistant message, without usage of its own, and ends with it (a logged request/response
  pair); otherwise
  it is kept in ``Transcript.meta["conversation_usage"]`` (as for OpenAI lists).

Sniffing: Anthropic style shows content blocks of type tool_use/tool_result/thinking
(or ``input_schema``, ``tool_use_id``, a top-level ``system`` prompt) and no OpenAI
markers (``tool_calls``, ``tool_call_id``, role tool...). Lists whose contents are only
plain strings are ambiguous and go to ``openai_messages``, which reads them the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders.builder import SessionBuilder, content_text, file_path_from_args, \
    tool_call_text
from ctxlab.loaders.message_lists import (Conversation, Message, ToolIndex,
                                          emit_group, emit_messages,
                                          emit_record, load_message_list, sniff_style)
from ctxlab.loaders.records import LoadOptions, RecordLog, as_list, to_json
from ctxlab.loaders.safe import count
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript


def anthropic_usage(u: Any) -> dict[str, Any]:
    """Call fields from an Anthropic usage object (prompt total = the three input counts)."""
    if not isinstance(u, Mapping):
        return {}
    fresh = count(u.get("input_tokens"))
    write = count(u.get("cache_creation_input_tokens"))
    read = count(u.get("cache_read_input_tokens"))
    total = None if fresh is None else fresh + (write or 0) + (read or 0)
    return {"input_total": total, "input_tokens": fresh, "cache_read": read,
            "cache_write": write, "output_tokens": count(u.get("output_tokens"))}


def _source_content(source: Any) -> str:
    """What an image/document source holds: base64 data, text, or a URL (unchanged)."""
    if not isinstance(source, Mapping):
        return content_text(source)
    for key in ("data", "url", "file_id"):
        if isinstance(source.get(key), str):
            return source[key]
    if source.get("type") == "content":
        return content_text(source.get("content"))
    return to_json(source)


def _media(block: Mapping[str, Any]) -> dict[str, Any] | None:
    src = block.get("source")
    if not isinstance(src, Mapping):
        return None
    meta = {k: src[k] for k in ("type", "media_type") if isinstance(src.get(k), str)}
    return meta or None


def block_parts(block: Any, tools: ToolIndex) -> list[dict[str, Any]]:
    """Parts of one content block (a tool_result may give several)."""
    if isinstance(block, str):
        return [{"kind": "text", "content": block}]
    t = block["type"]
    if t == "text":
        return [{"kind": "text", "content": block["text"]}]
    if t == "thinking":
        sig = block.get("signature")
        return [{"kind": "thinking", "content": block["thinking"],
                 "meta": {"signature_chars": len(sig)} if isinstance(sig, str) else None}]
    if t == "redacted_thinking":
        return [{"kind": "thinking", "content": block["data"], "meta": {"redacted": True}}]
    if t in ("tool_use", "server_tool_use"):
        name, args = str(block["name"]), block.get("input", {})
        return [{"kind": "tool_call", "content": tool_call_text(name, args), "tool_name": name,
                 "tool_call_id": block["id"], "file_path": file_path_from_args(args),
                 "meta": {"type": t} if t != "tool_use" else None}]
    if t == "tool_result" or t.endswith("_tool_result"):
        call_id = block["tool_use_id"]
        name, path = tools.lookup(call_id)
        content = block.get("content")
        blocks = content if isinstance(content, list) else [content]
        texts = [b for b in blocks if not (isinstance(b, Mapping) and b.get("type") == "image")]
        images = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "image"]
        meta = {k: block[k] for k in ("is_error",) if k in block}
        if t != "tool_result":
            meta["type"] = t
        link = {"tool_name": name, "tool_call_id": str(call_id), "file_path": path}
        parts = [{"kind": "tool_result", "content": "" if content is None else
                  content_text(texts if isinstance(content, list) else content),
                  "meta": meta or None, **link}]
        parts += [{"kind": "image", "content": _source_content(img.get("source")),
                   "meta": {"in_tool_result": True, **(_media(img) or {})}, **link}
                  for img in images]
        return parts
    if t == "image":
        return [{"kind": "image", "content": _source_content(block["source"]),
                 "meta": _media(block)}]
    if t == "document":
        meta = {**(_media(block) or {}), **{k: block[k] for k in ("title",)
                                             if isinstance(block.get(k), str)}}
        return [{"kind": "attachment", "content": _source_content(block["source"]),
                 "meta": meta or None}]
    return [{"kind": "text", "content": to_json(block), "meta": {"type": t}}]


def parse_message(m: Any, tools: ToolIndex, *, model: str | None = None) -> Message:
    """One Anthropic message as a `Message` (assistant messages carry their call)."""
    role, content = m["role"], m["content"]
    blocks = as_list(content, "content")
    if role == "user":
        has_results = any(isinstance(b, Mapping) and b.get("type") == "tool_result"
                          for b in blocks)
        parts = [p for b in blocks for p in block_parts(b, tools)]
        for p in parts:
            if p["kind"] == "tool_result" or (p.get("meta") or {}).get("in_tool_result"):
                p["role"] = "user"
        return Message("user", parts, real_user=not has_results)
    if role == "assistant":
        parts = [p for b in blocks for p in block_parts(b, tools)]
        call = anthropic_usage(m.get("usage"))
        mid = m.get("id")
        call.update(model=m.get("model") if isinstance(m.get("model"), str) else model,
                    call_id=mid if isinstance(mid, str) else None,
                    ts=m.get("timestamp"))
        return Message("assistant", parts, call=call)
    if role == "system":  # not in the API, but some logs keep it as a message
        return Message("system", [p for b in blocks for p in block_parts(b, tools)])
    raise ValueError(f"unknown role {role!r}")


def tool_schema_part(schema: Any) -> dict[str, Any]:
    name = schema["name"]
    return {"kind": "tool_schema", "content": to_json(schema), "role": "system",
            "tool_name": name if isinstance(name, str) else None}


def convert(b: SessionBuilder, conv: Conversation, log: RecordLog,
            meta: dict[str, Any]) -> None:
    """Turn one conversation into parts and calls."""
    model = conv.fields.get("model") if isinstance(conv.fields.get("model"), str) else None
    if model:
        meta.setdefault("models", [])
        if model not in meta["models"]:
            meta["models"].append(model)
    emit_group(b, log, "system", conv.tools, "tool_schema", tool_schema_part)
    tools = ToolIndex()
    system = conv.fields.get("system")
    if system is not None:
        rec = conv.record("system", system, log)
        emit_record(b, log, rec, "system",
                    lambda v: Message("system", [p for blk in as_list(v, "system")
                                                 for p in block_parts(blk, tools)]))
    emit_messages(b, log, conv, lambda v: parse_message(v, tools, model=model), tools,
                  anthropic_usage, meta)


def sniff(path: Path, head: str) -> bool:
    """A JSON/JSONL head showing Anthropic content blocks and no OpenAI markers."""
    return sniff_style(head) == "anthropic"


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load an Anthropic message-list file."""
    return load_message_list(path, options, fmt="anthropic_messages", convert=convert)


LOADER = register(Loader(name="anthropic_messages",
                         description="Anthropic Messages API lists (JSON or JSONL)",
                         sniff=sniff, load=load, priority=10))
