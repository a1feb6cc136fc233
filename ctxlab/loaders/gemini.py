"""Gemini CLI chat recordings (``~/.gemini/tmp/<projectHash>/chats/session-*.json[l]``).

Two generations, one mapping:

* JSONL: a header line ``{sessionId, projectHash, startTime, lastUpdated, kind}``, then
  message lines and ``{"$set": {...}}`` metadata patches. A message id can be written
  more than once (first without, then with its finished ``toolCalls``): the last copy
  wins and takes the place of the first; earlier copies are reported as superseded.
  A copy written without its id is a copy of the nearest message with an id of the same
  type, timestamp and content (or none yet on one side: a copy keeps all three), else a
  message of its own.
  Two shapes that other readers of gemini-cli's recordings describe (not in the files
  here, unverified) are handled too:
  ``{"$rewindTo": id}`` (the user rewound: that message and every later one are hidden
  by an event with origin ``rewind``) and ``{"$set": {"messages": [...]}}`` (the history
  is replaced: a recorded event hides the visible parts and inserts the new list).
* Legacy single JSON ``{sessionId, projectHash, startTime, lastUpdated, messages: [...]}``.

Messages: ``user`` -> a real user message (``content`` is what the model saw;
``displayContent`` is kept in meta) unless it is the CLI's own ``System: Please
continue.``; ``gemini`` -> one LLM call: thinking parts (``**subject**`` + description),
the text, tool_call parts; then the results follow as a user message of ``tool_result``
parts (the model saw ``functionResponse``; content = its ``response`` as JSON). Gemini
CLI keeps thoughts out of the history it sends back (its chat adds only the parts that
are not ``thought``): an event with origin ``not_resent`` hides a message's thinking
parts after its call, so they are that call's output and no later call's input.
``tokens`` gives the call's usage: ``input`` (+ ``tool``, the tool-use prompt tokens
Gemini counts apart) -> input_total (``cached`` is a subset),
``output``, ``thoughts`` -> reasoning_tokens; ``total == 0`` means unknown (NA).
``info``/``error``/``warning`` messages are terminal UI and are reported as ignored.
The system prompt, GEMINI.md memory and tool declarations are not recorded.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders import safe
from ctxlab.loaders.builder import (SessionBuilder, assemble, content_text, file_path_from_args,
                                    tool_call_text)
from ctxlab.loaders.records import (SHAPE_ERRORS, LoadOptions, RecordLog, as_list, iter_jsonl,
                                    read_json, read_text, to_json)
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

UI_TYPES = frozenset({"info", "error", "warning"})
CONTINUATIONS = frozenset({"System: Please continue."})
_GEMINI_RE = re.compile(r'"type"\s*:\s*"gemini"')

Entry = tuple[int | None, str | None, Any]  # (line, where, record)


def sniff(path: Path, head: str) -> bool:
    """A header/document with ``sessionId`` and ``projectHash``, or a ``gemini`` message."""
    return ('"projectHash"' in head and '"sessionId"' in head) or \
        _GEMINI_RE.search(head) is not None


def _usage(tokens: Any) -> dict[str, Any]:
    """Call fields from a message's ``tokens``. A ``total`` of 0 means unknown (Gemini CLI
    writes zeros before the response's usage is known), as do counts that are all 0; a
    ``total`` that is missing does not make the other counts unknown."""
    if not isinstance(tokens, Mapping) or tokens.get("total") == 0:
        return {}
    c = {k: safe.count(tokens.get(k)) for k in ("input", "cached", "tool", "output",
                                                "thoughts")}
    if not any(c.values()):
        return {}
    # toolUsePromptTokenCount: prompt tokens of tool use, counted apart from ``input``
    inp = c["input"] + (c["tool"] or 0) if c["input"] is not None else None
    return {"input_total": inp, "cache_read": c["cached"],
            "input_tokens": inp - (c["cached"] or 0) if inp is not None else None,
            "output_tokens": c["output"], "reasoning_tokens": c["thoughts"]}


def _small(value: Any, limit: int = 2000) -> Any:
    text = to_json(value)
    return value if len(text) <= limit else {"chars": len(text)}


def part_list(value: Any) -> list[Any]:
    """A Gemini ``PartListUnion`` (a text, one ``Part``, or a list of them) as a list, as
    gemini-cli's ``toParts`` reads it.

    Example:
        >>> part_list("hi"), part_list({"text": "hi"}), part_list(None)
        (['hi'], [{'text': 'hi'}], [])
    """
    return [] if value is None or value == "" else as_list(value, "a part list")


def content_specs(content: Any, role: str) -> list[dict[str, Any]]:
    """Parts of a Gemini ``content`` value: a text, a Gemini ``Part`` or a list of them."""
    specs: list[dict[str, Any]] = []
    for p in part_list(content):
        if isinstance(p, str):
            specs.append({"kind": "text", "content": p})
        elif isinstance(p.get("text"), str):
            specs.append({"kind": "thinking" if p.get("thought") else "text",
                          "content": p["text"]})
        elif isinstance(p.get("functionResponse"), Mapping):
            fr = p["functionResponse"]
            specs.append({"kind": "tool_result", "content": to_json(fr.get("response")),
                          "tool_name": fr.get("name"), "tool_call_id": fr.get("id")})
        elif isinstance(p.get("functionCall"), Mapping):
            fc = p["functionCall"]
            specs.append({"kind": "tool_call", "tool_name": fc["name"],
                          "tool_call_id": fc.get("id"),
                          "content": tool_call_text(fc["name"], fc.get("args") or {}),
                          "file_path": file_path_from_args(fc.get("args"))})
        elif isinstance(p.get("inlineData"), Mapping):
            specs.append({"kind": "image", "content": str(p["inlineData"].get("data") or ""),
                          "meta": {"mimeType": p["inlineData"].get("mimeType")}})
        elif isinstance(p.get("fileData"), Mapping):
            specs.append({"kind": "attachment", "content": to_json(p["fileData"])})
        else:
            specs.append({"kind": "text", "content": to_json(p), "meta": {"part": sorted(p)}})
    for s in specs:
        if role == "assistant" and s["kind"] == "tool_result":
            raise ValueError("functionResponse in a gemini message")
    return specs


class _Chat:
    """Loader state for one recording."""

    def __init__(self, path: Path, log: RecordLog, session: str) -> None:
        self.log = log
        self.b = SessionBuilder(session, log)
        self.meta: dict[str, Any] = {"format": "gemini", "path": str(path), "session_id": session}
        self.msg_parts: dict[str, list[int]] = {}  # message id -> its parts, in order
        self.tools: dict[str, tuple[str | None, str | None]] = {}
        self.models: list[str] = []

    def loc(self, line: int | None, where: str | None) -> str:
        return self.log.location(line=line, where=where)

    # ---- messages ---------------------------------------------------------------------
    def plan(self, rec: Mapping[str, Any]) -> dict[str, Any] | None:
        """What one message will add (no side effects); None when it is not model input.

        Raises:
            KeyError, TypeError, ...: the message does not have the expected shape.
        """
        mtype = rec["type"]
        if mtype in UI_TYPES:
            return None
        if mtype not in ("user", "gemini"):
            raise KeyError(f"unknown message type {mtype!r}")
        out: dict[str, Any] = {"type": mtype, "ts": rec.get("timestamp"),
                               "id": str(rec.get("id")), "meta": {"id": rec.get("id")}}
        if mtype == "user":
            specs = content_specs(rec.get("content"), "user")
            text = content_text(rec.get("content")).strip()
            if "displayContent" in rec:
                out["meta"]["displayContent"] = _small(rec["displayContent"])
            out["real"] = text not in CONTINUATIONS and any(s["kind"] != "tool_result"
                                                            for s in specs)
            out["specs"] = specs
            return out
        specs = [{"kind": "thinking",
                  "content": f"**{t.get('subject') or ''}**\n\n{t.get('description') or ''}"}
                 for t in rec.get("thoughts") or []]
        specs += content_specs(rec.get("content"), "assistant")
        results: list[dict[str, Any]] = []
        problems: list[tuple[str, str]] = []        # (where in the message, reason)
        for j, tc in enumerate(rec.get("toolCalls") or []):
            if not isinstance(tc, Mapping) or tc.get("name") is None:
                problems.append((f"toolCalls[{j}]", "unexpected shape: a tool call without "
                                 "a name: it and its result are left out of the call, the "
                                 "rest of the message is loaded"))
                continue
            name, args = str(tc["name"]), tc.get("args") or {}
            specs.append({"kind": "tool_call", "tool_name": name, "tool_call_id": tc.get("id"),
                          "content": tool_call_text(name, args),
                          "file_path": file_path_from_args(args),
                          "meta": {k: tc[k] for k in ("status", "displayName")
                                   if isinstance(tc.get(k), str)} or None})
            for r in part_list(tc.get("result")):
                spec = content_specs([r], "user")[0]
                spec["tool_name"] = spec.get("tool_name") or name
                spec["tool_call_id"] = spec.get("tool_call_id") or tc.get("id")
                spec["meta"] = {"resultDisplay_chars": len(to_json(tc.get("resultDisplay")))}
                results.append(spec)
        model = rec.get("model") if isinstance(rec.get("model"), str) else None
        out.update(specs=specs, results=results, model=model, usage=_usage(rec.get("tokens")),
                   call_id=rec.get("id") if isinstance(rec.get("id"), str) else None,
                   problems=problems)
        return out

    def report(self, plans: list[dict[str, Any] | None], line: int | None, where: str | None,
               each: str | None = None) -> None:
        """Report the pieces of planned messages that were left out (``each``: where the
        messages are in the record, ``"messages"`` for ``messages[i]``)."""
        for i, plan in enumerate(plans):
            for inner, reason in (plan or {}).get("problems", ()):
                at = ".".join(w for w in (where, f"{each}[{i}]" if each else None, inner) if w)
                if where is None and line is not None:     # a piece of a JSONL line
                    at = f"line {line} {at}"
                self.log.skipped("toolCall", reason, line=line, where=at)

    def emit(self, plan: Mapping[str, Any], source: str, event: int | None = None) -> int:
        """Add a planned message (a gemini message is one LLM call unless inserted)."""
        ts, meta = plan["ts"], plan["meta"]
        if plan["type"] == "user":
            self.b.message("user", real_user=plan["real"] and event is None)
            pids = [self.add(s, ts=ts, source=source, meta=meta, event=event)
                    for s in plan["specs"]]
        else:
            call = None
            if event is None:
                call = self.b.call(call_id=plan["call_id"], model=plan["model"], ts=ts,
                                   source=source, **plan["usage"])
                if plan["model"] and plan["model"] not in self.models:
                    self.models.append(plan["model"])
            self.b.message("assistant")
            pids = [self.add(s, ts=ts, source=source, meta=meta, call=call, event=event)
                    for s in plan["specs"]]
            if plan["results"]:
                self.b.message("user")
                pids += [self.add(s, ts=ts, source=source, event=event)
                         for s in plan["results"]]
            made = len(pids)
            thoughts = {pid for pid, s in zip(pids, plan["specs"]) if s["kind"] == "thinking"}
            if thoughts:
                # a call's own: output of that call only; in a history that $set.messages
                # wrote: seen by no call
                self.b.not_resent(thoughts, "Gemini CLI sends thoughts back in no later "
                                  "request (its history keeps the parts that are not thought)",
                                  source=source, meta={"id": plan["meta"].get("id")},
                                  at_once=event is not None)
                pids = [p for p in pids if p not in thoughts]   # already out of the history
            self.msg_parts.setdefault(plan["id"], []).extend(pids)
            return made
        self.msg_parts.setdefault(plan["id"], []).extend(pids)
        return len(pids)

    def add(self, s: Mapping[str, Any], *, ts: str | None, source: str,
            meta: Mapping[str, Any] | None = None, call: int | None = None,
            event: int | None = None) -> int:
        kind, tool_name, cid, fp = s["kind"], s.get("tool_name"), s.get("tool_call_id"), \
            s.get("file_path")
        cid = None if cid is None else str(cid)
        tool_name = None if tool_name is None else str(tool_name)
        if kind == "tool_call" and cid:
            self.tools[cid] = (tool_name, fp)
        elif kind == "tool_result" and cid in self.tools:
            tool_name, fp = tool_name or self.tools[cid][0], self.tools[cid][1]
        return self.b.part(kind, s["content"], tool_name=tool_name, tool_call_id=cid,
                           file_path=fp, call=call, ts=ts, source=source,
                           meta={**(meta or {}), **(s.get("meta") or {})} or None, event=event)

    def visible(self) -> list[int]:
        return [p for pids in self.msg_parts.values() for p in pids]

    # ---- patches ----------------------------------------------------------------------
    def rewind(self, target: Any, line: int | None, where: str | None = None) -> None:
        ids = list(self.msg_parts)
        if str(target) not in ids:
            raise KeyError(f"$rewindTo names message {target!r}, which is not in the history")
        gone = ids[ids.index(str(target)):]
        eid = self.b.event(origin="rewind", trigger="rewind", pre_tokens=None,
                           reason=f"user rewound to before message {target}",
                           source=self.loc(line, where), meta={"messages": len(gone)})
        self.b.hide([p for m in gone for p in self.msg_parts.pop(m)], eid)

    def replace(self, messages: list[Any], line: int | None, where: str | None = None) -> int:
        plans = [self.plan(m) for m in messages]  # shapes checked before changing anything
        safe.refused_counts()   # their usage makes no call: not the next call's or event's
        self.report(plans, line, where, "$set.messages")
        if not messages and not self.msg_parts:
            return 0
        eid = self.b.event(trigger="replace", pre_tokens=None, source=self.loc(line, where),
                           reason="history replaced by $set.messages (compression or rollback)",
                           meta={"messages": len(messages)})
        self.b.hide(self.visible(), eid)
        self.msg_parts = {}
        src = self.loc(line, where)
        return sum(self.emit(p, src, event=eid) for p in plans if p is not None)


def _is_header(rec: Any) -> bool:
    return isinstance(rec, dict) and "sessionId" in rec and "type" not in rec and "id" not in rec


def _read(path: Path, log: RecordLog) -> tuple[dict[str, Any], list[Entry]]:
    """The header and the entries (JSONL lines, or ``messages[i]`` of a legacy document)."""
    text = read_text(path)
    doc: Any = None
    if path.suffix == ".json":
        doc = read_json(path, log)
    elif path.suffix != ".jsonl" and text.lstrip().startswith("{") and "\n{" not in text.strip():
        doc = read_json(path, log)  # one document: legacy (pretty-printed or not)
    if doc is not None:
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise log.error("not a Gemini CLI recording: expected an object with a "
                            "'messages' list")
        return ({k: v for k, v in doc.items() if k != "messages"},
                [(None, f"messages[{i}]", m) for i, m in enumerate(doc["messages"])])
    entries: list[Entry] = [(ln, None, r) for ln, r in iter_jsonl(path, log)]
    header = entries[0][2] if entries and _is_header(entries[0][2]) else {}
    return header, entries


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load one Gemini CLI recording, JSONL or legacy JSON (see the module docstring)."""
    path = Path(path)
    log = RecordLog(path, strict=options.strict)
    header, entries = _read(path, log)
    session = header.get("sessionId") if isinstance(header.get("sessionId"), str) else path.stem
    chat = _Chat(path, log, session)
    for key in ("projectHash", "startTime", "lastUpdated", "kind", "summary"):
        if isinstance(header.get(key), str):
            chat.meta[key] = header[key]
    _walk(chat, entries, log)
    if chat.models:
        chat.meta["model"] = chat.models[-1]
    if len(chat.models) > 1:
        chat.meta["models"] = chat.models
    return assemble([chat.b], log, chat.meta)


def _keys(entries: list[Entry]) -> list[tuple[int, Any]]:
    """Identity of each entry: (segment, message id); a rewind or replace starts a segment.
    A message written without its id takes the identity of the nearest message with an id
    of its segment, type and timestamp whose content is the same or empty on one side (a
    copy), else its own: two messages without an id are never one."""
    seg, keys, stamps = 0, [], []
    for i, (_, _, rec) in enumerate(entries):
        if isinstance(rec, dict) and ("$rewindTo" in rec or (
                isinstance(rec.get("$set"), dict) and "messages" in rec["$set"])):
            seg += 1
        is_msg = isinstance(rec, dict) and "type" in rec and isinstance(rec.get("id"), str)
        keys.append((seg, rec["id"]) if is_msg else (seg, i))
        stamps.append((seg, rec["type"], rec["timestamp"]) if isinstance(rec, dict)
                      and isinstance(rec.get("type"), str)
                      and isinstance(rec.get("timestamp"), str) else None)
    out = list(keys)
    by_stamp: dict[Any, list[int]] = {}
    for i, stamp in enumerate(stamps):
        if stamp is not None:
            by_stamp.setdefault(stamp, []).append(i)
    for i, (_, _, rec) in enumerate(entries):
        if stamps[i] is None or isinstance(rec.get("id"), str):
            continue
        mine = to_json(rec.get("content"))
        same = sorted((j for j in by_stamp[stamps[i]] if isinstance(keys[j][1], str)
                       and _same_content(mine, to_json(entries[j][2].get("content")))),
                      key=lambda j: abs(j - i))
        if same:
            out[i] = keys[same[0]]
    return out


def _same_content(a: str, b: str) -> bool:
    """Two copies of one message: the same content, or none yet on one side."""
    return a == b or a in ("null", '""', "[]") or b in ("null", '""', "[]")


def _walk(chat: _Chat, entries: list[Entry], log: RecordLog) -> None:
    """Emit every entry in order; a re-written message takes its first copy's place."""
    keys = _keys(entries)
    first: dict[Any, int] = {}
    last: dict[Any, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
        last[k] = i
    header_seen = False
    for i, (line, where, rec) in enumerate(entries):
        rtype = "unknown"
        try:
            if not isinstance(rec, dict):
                raise TypeError(f"record is a JSON {type(rec).__name__}, not an object")
            rtype = str(rec["type"]) if "type" in rec else next(iter(rec), "{}")
            if _is_header(rec):
                if header_seen:
                    log.ignored("header", "repeated session header: the first one is used",
                                line=line, where=where)
                    continue
                header_seen = True
                plans = [chat.plan(m) for m in rec.get("messages") or []]
                chat.report(plans, line, where, "messages")
                src = chat.loc(line, where)
                log.used("header", line=line, where=where,
                         parts=sum(chat.emit(p, src) for p in plans if p is not None))
            elif "$set" in rec:
                patch = rec["$set"]
                n = chat.replace(patch["messages"], line, where) if "messages" in patch else 0
                chat.meta.update({k: v for k, v in patch.items() if isinstance(v, str)})
                log.used("$set", line=line, where=where, parts=n)
            elif "$rewindTo" in rec:
                chat.rewind(rec["$rewindTo"], line, where)
                log.used("$rewindTo", line=line, where=where)
            elif "type" in rec:
                ident = keys[i][1]
                _message(chat, entries, i, first[keys[i]], last[keys[i]], log,
                         ident if isinstance(ident, str) else f"(no id, entry {ident + 1})")
            else:
                log.skipped(rtype, "unknown record: not a header, message, $set or $rewindTo",
                            line=line, where=where)
        except SHAPE_ERRORS as e:
            safe.refused_counts()   # counts read from the skipped record: not the next call's
            log.skipped(rtype, f"unexpected shape: {type(e).__name__}: {e}", line=line,
                        where=where)


def _message(chat: _Chat, entries: list[Entry], i: int, first: int, last: int,
             log: RecordLog, identity: str) -> None:
    """Entry ``i`` is a copy of a message (``identity``: its id, or what stands for a
    missing one): report it; at the first copy emit the last."""
    line, where, rec = entries[i]
    ln, wh, final = entries[last]
    if i != last:
        log.ignored(str(rec["type"]), f"superseded by a later copy of message {identity} "
                    f"at {'line ' + str(ln) if ln is not None else wh}", line=line, where=where)
    if i != first:
        return
    ftype = str(final.get("type"))
    try:
        plan = chat.plan(final)
    except SHAPE_ERRORS as e:
        log.skipped(ftype, f"unexpected shape: {type(e).__name__}: {e}", line=ln, where=wh)
        return
    if plan is None:
        log.ignored(ftype, f"UI message (type {ftype}): shown in the terminal, never sent "
                    "to the model", line=ln, where=wh)
    else:
        plan["id"] = identity       # one entry of the history per message, id or not
        log.used(ftype, line=ln, where=wh, parts=chat.emit(plan, chat.loc(ln, wh)))
        chat.report([plan], ln, wh)


LOADER = register(Loader(name="gemini", description="Gemini CLI chat recording (JSONL or JSON)",
                         sniff=sniff, load=load, priority=50))
