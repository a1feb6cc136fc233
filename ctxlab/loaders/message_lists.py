"""What the chat-message-list loaders share: containers, sniffing, and emitting messages.

Four formats are lists of chat messages: generic OpenAI and Anthropic message lists,
mini-swe-agent and SWE-agent trajectories. This module holds what is really the same
for them:

* `read_conversations` reads the containers of the two generic formats: a JSON list
  of messages, a JSON object ``{"messages": [...], "tools": [...], ...}``, a JSON list
  of such objects, or JSONL where each line is one message (one conversation) or one
  conversation object (one session per line).
* `sniff_style` tells whether a file's head looks like a message list and, if so,
  whether in OpenAI or Anthropic style.
* `Message` is a parsed message (role, parts, optional call); `emit_record` parses one
  input record with shape errors turned into report entries, and emits it through a
  `SessionBuilder`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.safe import refused_counts
from ctxlab.loaders.records import (SHAPE_ERRORS, LoadOptions, RecordLog, iter_jsonl, parse_json,
                                    read_text, to_json)
from ctxlab.schema import Transcript

SESSION_KEYS = ("id", "session", "session_id", "sessionId", "conversation_id")

Style = Literal["openai", "anthropic"]


# ---- parsed messages --------------------------------------------------------------------
@dataclass(slots=True)
class Message:
    """One parsed message, ready to emit.

    Attributes:
        role: role of the message (parts may override it, e.g. tool results).
        parts: keyword arguments of `SessionBuilder.part` (``kind`` and ``content``
            required), in order.
        real_user: a message a person wrote: starts a new turn.
        call: keyword arguments of `SessionBuilder.call` when this message is the output
            of one LLM request (every part then carries that call's index).
    """

    role: str
    parts: list[dict[str, Any]] = field(default_factory=list)
    real_user: bool = False
    call: dict[str, Any] | None = None


@dataclass(slots=True)
class Record:
    """One input record: its value and where it was read."""

    value: Any
    line: int | None
    where: str | None
    source: str


@dataclass(slots=True)
class Conversation:
    """One session of a message-list file.

    Attributes:
        session: session id.
        messages: the message records, in order.
        tools: tool schema records.
        fields: the conversation object's other fields (model, usage, system...).
        line: the JSONL line holding the conversation object, if any.
        prefix: JSON path of the object in its document (``""`` or ``"[2]."``).
    """

    session: str
    messages: list[Record] = field(default_factory=list)
    tools: list[Record] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    line: int | None = None
    prefix: str = ""

    def record(self, key: str, value: Any, log: RecordLog) -> Record:
        """A record for a field (or list element, ``key="tools[2]"``) of the object."""
        w = f"{self.prefix}{key}"
        if self.line is not None:
            return Record(value, self.line, f"line {self.line} {w}",
                          f"{log.location(line=self.line)}#{w}")
        return Record(value, None, w, log.location(where=w))


@dataclass(slots=True)
class ToolIndex:
    """Tool calls seen so far in a session: id -> (tool name, file path)."""

    calls: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def add(self, parts: list[dict[str, Any]]) -> None:
        for p in parts:
            if p["kind"] == "tool_call" and p.get("tool_call_id"):
                self.calls[str(p["tool_call_id"])] = (p.get("tool_name"), p.get("file_path"))

    def lookup(self, call_id: Any) -> tuple[str | None, str | None]:
        return self.calls.get(str(call_id), (None, None)) if call_id else (None, None)


def emit(b: SessionBuilder, msg: Message, source: str) -> int:
    """Add a parsed message to the builder (declaring its call first). Returns parts made."""
    b.message(msg.role, real_user=msg.real_user)
    call = b.call(**msg.call) if msg.call is not None else None
    parts = msg.parts or [{"kind": "text", "content": ""}]
    for spec in parts:
        spec = dict(spec)
        kind, content = spec.pop("kind"), spec.pop("content")
        spec.setdefault("source", source)
        b.part(kind, content if isinstance(content, str) else str(content), call=call, **spec)
    return len(parts)


def shape_problem(e: BaseException) -> str:
    return f"unexpected shape: {type(e).__name__}: {e}"


def emit_record(b: SessionBuilder, log: RecordLog, rec: Record, record_type: str,
                parse: Callable[[Any], Message | None],
                tools: ToolIndex | None = None) -> Message | None:
    """Parse one record and emit it; a shape error becomes a skipped report entry.

    ``parse`` returns None for a record that makes no message (it reports it itself).
    A message with no parts still gets one empty text part: the message was sent.
    """
    try:
        msg = parse(rec.value)
        if msg is not None:
            if not msg.parts:
                msg.parts = [{"kind": "text", "content": ""}]
            for p in msg.parts:
                if not isinstance(p.get("content"), str):
                    raise TypeError(f"content of a {p.get('kind')} part is "
                                    f"{type(p.get('content')).__name__}, not text")
    except SHAPE_ERRORS as e:
        refused_counts()    # counts its usage refused belong to no call: not the next one's
        log.skipped(record_type, shape_problem(e), line=rec.line, where=rec.where)
        return None
    if msg is None:
        return None
    n = emit(b, msg, rec.source)
    if tools is not None:
        tools.add(msg.parts)
    log.used(record_type, line=rec.line, where=rec.where, parts=n)
    return msg


def emit_messages(b: SessionBuilder, log: RecordLog, conv: Conversation,
                  parse: Callable[[Any], Message | None], tools: ToolIndex,
                  fields_of: Callable[[Any], dict[str, Any]], meta: dict[str, Any]) -> None:
    """Emit a conversation's messages in order (`emit_record`, the record type its role),
    then place its conversation-level usage (`conversation_usage`)."""
    own_usage: list[bool] = []
    last: Message | None = None
    for rec in conv.messages:
        rtype = rec.value.get("role") if isinstance(rec.value, dict) and \
            isinstance(rec.value.get("role"), str) else "message"
        last = emit_record(b, log, rec, rtype, parse, tools)
        if last is not None and last.call is not None:
            own_usage.append(last.call.get("input_total") is not None)
    conversation_usage(b, conv, own_usage, fields_of, meta,
                       ends_with_call=last is not None and last.call is not None)


def conversation_usage(b: SessionBuilder, conv: Conversation, own_usage: list[bool],
                       fields_of: Callable[[Any], dict[str, Any]], meta: dict[str, Any],
                       *, ends_with_call: bool) -> None:
    """A conversation-level ``usage``: the call's when the conversation has exactly one
    assistant message, without usage of its own, and ends with it (a logged
    request/response pair; ``own_usage`` says, per call, whether it had its own), else
    kept in ``meta["conversation_usage"]`` (a request whose response is not in the list
    was not that call's input; ``fields_of``: the call columns of a usage object)."""
    usage = conv.fields.get("usage")
    if not isinstance(usage, dict):
        return
    if own_usage == [False] and ends_with_call:
        b.update_call(0, **{k: v for k, v in fields_of(usage).items() if v is not None})
    else:
        meta.setdefault("conversation_usage", {})[conv.session] = dict(usage)


def emit_group(b: SessionBuilder, log: RecordLog, role: str, records: list[Record],
               record_type: str, parse: Callable[[Any], dict[str, Any]]) -> int:
    """Emit several records as the parts of one message (e.g. tool schemas). Returns parts."""
    parsed: list[tuple[Record, dict[str, Any]]] = []
    for rec in records:
        try:
            spec = parse(rec.value)
            if not isinstance(spec.get("content"), str):
                raise TypeError("part content is not text")
        except SHAPE_ERRORS as e:
            log.skipped(record_type, shape_problem(e), line=rec.line, where=rec.where)
            continue
        parsed.append((rec, spec))
    if not parsed:
        return 0
    b.message(role)
    for rec, spec in parsed:
        spec = dict(spec)
        spec.setdefault("source", rec.source)
        b.part(spec.pop("kind"), spec.pop("content"), **spec)
        log.used(record_type, line=rec.line, where=rec.where, parts=1)
    return len(parsed)


def small_meta(obj: dict[str, Any], skip: tuple[str, ...] | frozenset[str],
               limit: int = 200) -> dict[str, Any]:
    """Fields of a record the model did not see: short scalars as they are, anything
    else by size only (``<key>_chars``)."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k in skip:
            continue
        if v is None or isinstance(v, (bool, int, float)) or \
                (isinstance(v, str) and len(v) <= limit):
            out[k] = v
        else:
            out[f"{k}_chars"] = len(v) if isinstance(v, str) else len(to_json(v))
    return out


def load_message_list(path: Path, options: LoadOptions, *, fmt: str,
                      convert: Callable[[SessionBuilder, Conversation, RecordLog,
                                         dict[str, Any]], None]) -> Transcript:
    """Read conversations and convert each into a session; ``convert`` may add to meta."""
    log = RecordLog(path, strict=options.strict)
    convs = read_conversations(path, log)
    meta: dict[str, Any] = {"format": fmt, "path": str(path), "sessions": len(convs)}
    builders = []
    for conv in convs:
        b = SessionBuilder(conv.session, log)
        convert(b, conv, log, meta)
        builders.append(b)
    return assemble(builders, log, meta)


# ---- containers -------------------------------------------------------------------------
def _unique(sid: str, seen: set[str], suffix: str) -> str:
    """``sid``, or ``sid`` with ``suffix`` (then ``:2``, ``:3``...) appended until it names
    no session seen so far; the result is added to ``seen``."""
    out, n = sid, 1
    while out in seen:
        out = f"{sid}{suffix}" if n == 1 else f"{sid}{suffix}:{n}"
        n += 1
    seen.add(out)
    return out


def _session_id(obj: dict[str, Any], default: str) -> str:
    for key in SESSION_KEYS:
        v = obj.get(key)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return default


def _is_conversation(v: Any) -> bool:
    return isinstance(v, dict) and "messages" in v and "role" not in v


def _is_message_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(m, dict) and "role" in m
                                                   for m in v)


def _conversation(obj: dict[str, Any], log: RecordLog, session: str, *, line: int | None,
                  prefix: str) -> Conversation:
    """A conversation object's records; ``prefix`` locates the object (e.g. ``[2].``)."""
    conv = Conversation(session=session, line=line, prefix=prefix,
                        fields={k: v for k, v in obj.items() if k not in ("messages", "tools")})
    for key, target in (("messages", conv.messages), ("tools", conv.tools)):
        items = obj.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            rec = conv.record(key, items, log)
            log.skipped(key, f"unexpected shape: {key!r} is {type(items).__name__}, not a list",
                        line=rec.line, where=rec.where)
            continue
        target.extend(conv.record(f"{key}[{j}]", v, log) for j, v in enumerate(items))
    return conv


def read_conversations(path: Path, log: RecordLog) -> list[Conversation]:
    """Read a message-list file into conversations, reporting each container record.

    Raises:
        LoadError: the file is neither a JSON document nor JSONL, or holds no message list.
    """
    stem = path.stem
    if path.suffix.lower() != ".jsonl":
        text = read_text(path, log)
        try:
            doc = parse_json(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":
                raise log.error(f"malformed JSON: {e.msg} at column {e.colno}; the file may be "
                                f"truncated or not a JSON document", line=e.lineno) from None
            head = text[:e.pos].strip()
            if "\n" in head:   # a document over several lines, then something else: not JSONL
                doc = parse_json(head)
                log.skipped("trailing data", "text after the JSON document (the document is "
                            "read; remove what follows it)", line=e.lineno)
                return _from_document(doc, log, stem)
        else:
            return _from_document(doc, log, stem)
    return _from_jsonl(path, log, stem)


def _from_document(doc: Any, log: RecordLog, stem: str) -> list[Conversation]:
    if isinstance(doc, dict):
        if not isinstance(doc.get("messages"), list):
            raise log.error("no 'messages' list: not a message-list document "
                            "(expected a list of messages or an object with 'messages')")
        return [_conversation(doc, log, _session_id(doc, stem), line=None, prefix="")]
    if not isinstance(doc, list):
        raise log.error(f"the document is a JSON {type(doc).__name__}, not a list of messages "
                        f"or a conversation object")
    if doc and all(_is_conversation(v) for v in doc):
        convs, seen = [], set()
        for i, v in enumerate(doc):
            sid = _unique(_session_id(v, f"{stem}:{i}"), seen, f":{i}")
            convs.append(_conversation(v, log, sid, line=None, prefix=f"[{i}]."))
            log.used("conversation", where=f"[{i}]")
        return convs
    conv = Conversation(session=stem)
    conv.messages = [Record(v, None, f"[{j}]", log.location(where=f"[{j}]"))
                     for j, v in enumerate(doc)]
    return [conv]


def _from_jsonl(path: Path, log: RecordLog, stem: str) -> list[Conversation]:
    convs: list[Conversation] = []
    single: Conversation | None = None
    seen: set[str] = set()
    for i, v in iter_jsonl(path, log):
        if _is_conversation(v):
            sid = _unique(_session_id(v, f"{stem}:{i}"), seen, f":{i}")
            convs.append(_conversation(v, log, sid, line=i, prefix=""))
            log.used("conversation", line=i)
        elif _is_message_list(v):       # a line holding one conversation as its messages
            sid = _unique(f"{stem}:{i}", seen, ":list")
            conv = Conversation(session=sid, line=i)
            conv.messages = [conv.record(f"[{j}]", m, log) for j, m in enumerate(v)]
            convs.append(conv)
            log.used("conversation", line=i)
        elif isinstance(v, dict) and "role" in v:
            if single is None:
                single = Conversation(session=_unique(stem, seen, ":messages"))
                convs.append(single)
            single.messages.append(Record(v, i, None, log.location(line=i)))
        else:
            log.skipped(type(v).__name__ if not isinstance(v, dict) else "object",
                        "not a message (no 'role') nor a conversation object (no 'messages')",
                        line=i)
    return convs


# ---- sniffing ---------------------------------------------------------------------------
_ROLE = re.compile(r'"role"\s*:\s*"(system|developer|user|assistant|tool|function)"')
# markers only one style's messages hold, and those that could also be keys of a tool's
# input or schema in the other style's (an Anthropic tool_use whose input has "image_url")
_OPENAI_STRONG = re.compile(
    r'"(tool_calls|tool_call_id|function_call)"\s*:|"role"\s*:\s*"(tool|function|developer)"')
_ANTHROPIC_STRONG = re.compile(
    r'"type"\s*:\s*"(tool_use|tool_result|server_tool_use)"|"(input_schema|tool_use_id)"\s*:')
_OPENAI = re.compile(
    r'"(image_url|input_audio|reasoning_content|prompt_tokens)"\s*:|"type"\s*:\s*"function"')
_ANTHROPIC = re.compile(
    r'"type"\s*:\s*"(thinking|redacted_thinking|document)"'
    r'|"(cache_read_input_tokens)"\s*:'
    r'|"source"\s*:\s*\{\s*"type"\s*:\s*"(base64|url|file|text)"')
_DOC_MESSAGES = re.compile(r'"messages"\s*:\s*\[\s*\{')
_LIST_OF_OBJECTS = re.compile(r'\s*\[\s*\{')
_LINE_MESSAGE = re.compile(
    r'\{\s*"role"\s*:\s*"(system|developer|user|assistant|tool|function)"\s*,\s*"content"\s*:')
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _message_like(v: Any) -> bool:
    if isinstance(v, dict) and isinstance(v.get("role"), str):
        return "content" in v or "tool_calls" in v or "function_call" in v
    if _is_conversation(v) and isinstance(v["messages"], list):
        return any(_message_like(m) for m in v["messages"][:3])
    return False


def _first_value(head: str, start: int) -> Any:
    try:
        return json.JSONDecoder().raw_decode(head, start)[0]
    except json.JSONDecodeError:
        return None


def looks_like_messages(head: str) -> bool:
    """Does the head of a file show a chat message list (any container we read)?"""
    s = head.lstrip()
    if not s:
        return False
    if s[0] == "[":
        m = _LIST_OF_OBJECTS.match(s)
        if not m:
            return False
        first = _first_value(s, m.end() - 1)
        if first is not None:
            return _message_like(first)
        return bool(_ROLE.search(s[:4096]))
    if s[0] != "{":
        return False
    first_line = s.split("\n", 1)[0]
    value = _first_value(first_line, 0)
    if value is None:
        value = _first_value(s, 0)
    if value is not None:
        return _message_like(value)
    if _LINE_MESSAGE.match(first_line):  # JSONL whose first message is longer than the head
        return True
    m = _DOC_MESSAGES.search(s)
    return bool(m and _depth(s, m.start()) == 1 and _ROLE.search(s, m.end(), m.end() + 4096))


def _depth(s: str, pos: int) -> int:
    """Nesting depth of position ``pos`` in (possibly truncated) JSON text."""
    bare = _STRING.sub('""', s[:pos])
    return bare.count("{") + bare.count("[") - bare.count("}") - bare.count("]")


def sniff_style(head: str) -> Style | None:
    """``"openai"`` or ``"anthropic"`` when the head looks like a message list, else None.

    Markers are JSON structure (keys and type values outside strings), so text inside
    message contents does not count. Markers only one style's messages hold decide first
    (OpenAI's ``tool_calls``, ``tool_call_id``, role ``tool``...; then Anthropic's content
    blocks of type ``tool_use``/``tool_result``, ``tool_use_id``, ``input_schema``); then
    those a tool's input or schema could also hold (OpenAI's ``image_url``, type
    ``function``...; Anthropic's ``thinking`` blocks, ``source``...).
    A list with only plain string (or ``text`` block) contents is ambiguous: it is
    read as OpenAI style, which handles it the same way.
    """
    if not looks_like_messages(head):
        return None
    for pattern, style in ((_OPENAI_STRONG, "openai"), (_ANTHROPIC_STRONG, "anthropic"),
                           (_OPENAI, "openai"), (_ANTHROPIC, "anthropic")):
        if pattern.search(head):
            return style
    if re.search(r'"system"\s*:\s*[\["]', head) and not re.search(r'"role"\s*:\s*"system"', head):
        return "anthropic"  # a top-level system prompt: Anthropic's request shape
    return "openai"
