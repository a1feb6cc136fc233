"""Claude Code session logs (``~/.claude/projects/<cwd>/<sessionId>.jsonl``).

One file holds one conversation (plus, in 1.0.x, the interleaved sub-agent sidechains);
2.x writes sub-agents to ``<sessionId>/subagents/agent-<id>.jsonl`` beside it (read without
``sidechains`` too, each line reported as ignored). What the model
saw is the main chain of the record graph (`ctxlab.loaders.claude_code_chain`): pre-compaction
history joined through ``logicalParentUuid``, the lines of one API response merged into one
assistant message and the tool results of its parallel calls into the user message after it.

Calls: one per distinct ``message.id``, with the usage of the response's last line
(``input_total = input_tokens + cache_creation_input_tokens + cache_read_input_tokens``).
Lines with model ``<synthetic>`` (made by the CLI, not the API) make parts but no call.
An assistant line without ``message.id`` makes parts but no call too (the lines of one
response cannot be told apart without it): the load report says so at its line.

Compaction: a ``compact_boundary`` becomes a recorded event (trigger, ``preTokens``) that
hides every earlier part; the following ``isCompactSummary`` record is a ``summary`` part the
event inserted. The summarizer's own call (``subagents/agent-acompact-*.jsonl``, read even
without ``sidechains``) goes into the event's meta as ``summarizer_call``; with
``sidechains`` it is also a session of its own, which is no agent's conversation: it is
marked in ``meta["helper_sessions"]`` (`ctxlab.schema.HELPER_SESSIONS`, with the event it
served) and at its call's line of the load report, and replays leave it out
(`summarizer_marker` says how it is told from an agent). A
``microcompact_boundary`` (newer CLIs: old tool results cleared, the conversation goes on)
becomes a recorded event (``microcompactMetadata``'s trigger and ``preTokens``) that hides
the results of its ``compactedToolIds`` and puts ``[Old tool result content cleared]`` in
the place of each, in the same message. (No log here has one; the record's shape is the
one public readers of these files describe.)

**Real user message** (starts a turn): a ``user`` record, not a sidechain's, that is not
tool results, not ``isMeta`` (skill/command expansions, caveats, reminders: role user, kind
text, meta ``isMeta``), not the compact summary, not a local-command echo
(``<local-command-stdout|stderr|caveat>``, ``<bash-input|stdout|stderr>``), not an
interruption notice (``[Request interrupted by user...]``) and not a background-task
notification (``<task-notification>``); a ``<command-name>`` record counts when it runs a
prompt command, i.e. unless the next user message on the chain is its local-command output
(``/mcp``, ``/exit``...). All of these are still model input (kind text, role user; meta
``category`` says which). ``isVisibleInTranscriptOnly`` records other than the compact
summary, ``summary`` (a session title), ``progress``, ``system`` (except compact boundaries)
and ``file-history-*`` records are reported as ignored. A prompt the user typed while the
agent worked is queued (``queue-operation`` ``enqueue``) and, when taken from the queue
(``remove``) without a user record of its own, reaches the model with the next request: it
becomes a user message of its own (a new turn, meta ``category: "queued"``) after the tool
results written next (spotter 258c7280: Claude Code's summary lists both such prompts
among the user's messages), worded as Claude Code hands it over ("The user sent the
following message: ..."). Newer CLIs record such a prompt as an ``attachment`` of type
``queued_command`` on the chain: that record is the message (its text; a block of another
kind in it, such as a pasted image, is reported as left out). Other queue records, and
other attachments (the context the CLI builds from them is not in the log), are reported
as ignored.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxlab.loaders.builder import SessionBuilder, assemble, file_path_from_args, tool_call_text
from ctxlab.loaders.claude_code_chain import (CONVERSATION, NOTIFICATION_PREFIX, Item, Record,
                                              RecordFile,
                                              content_blocks, message_id, parse_ts,
                                              plan_messages, select_chain, sidechain_groups,
                                              summarizer_call, text_field, type_reason,
                                              usage_fields, user_category)
from ctxlab.loaders.records import SHAPE_ERRORS, LoadOptions, to_json
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import HELPER_SESSIONS, Transcript

NAME = "claude_code"
GRAPH_TYPES = frozenset({"user", "assistant", "system", "progress", "attachment"})
IGNORED_TYPES = {
    "file-history-snapshot": "file-history snapshot: undo bookkeeping, not sent to the model",
    "file-history-delta": "file-history delta: undo bookkeeping, not sent to the model",
    "queue-operation": "input queue (UI): a prompt queued here reaches the model as a "
                       "later user record, or was never taken from the queue",
}
OFF_CHAIN = "not on the main conversation chain"
BOUNDARIES = frozenset({"compact_boundary", "microcompact_boundary"})
CLEARED = "[Old tool result content cleared]"
"""What Claude Code's microcompaction puts in place of an old tool result's content."""
QUEUED = "The user sent the following message: "
"""How Claude Code hands the model a prompt typed while it worked (a meta user message)."""


def queued_text(obj: dict[str, Any]) -> str | None:
    """The prompt of an ``attachment`` record of type ``queued_command`` a person typed
    (newer CLIs write one for a prompt taken into the running turn), else None."""
    a = obj.get("attachment") if obj.get("type") == "attachment" else None
    if not isinstance(a, dict) or a.get("type") != "queued_command" or a.get("isMeta"):
        return None
    if a.get("commandMode", "prompt") != "prompt":
        return None
    origin = a.get("origin")
    if isinstance(origin, dict) and origin.get("kind", "human") != "human":
        return None
    prompt = a.get("prompt")
    if isinstance(prompt, list):
        prompt = "\n\n".join(b.get("text") for b in prompt if isinstance(b, dict)
                             and b.get("type") == "text" and isinstance(b.get("text"), str))
    return prompt if isinstance(prompt, str) and prompt.strip() else None


def queued_left_out(obj: dict[str, Any]) -> list[tuple[int, str]]:
    """``(index, block type)`` of the blocks of a ``queued_command`` prompt that are not
    text (`queued_text` keeps only its text)."""
    prompt = obj["attachment"].get("prompt")
    return [(j, str(b.get("type")) if isinstance(b, dict) else type(b).__name__)
            for j, b in enumerate(prompt if isinstance(prompt, list) else [])
            if not (isinstance(b, dict) and b.get("type") == "text"
                    and isinstance(b.get("text"), str))]


SIDECHAIN = "sidechain: load with sidechains=True (--sidechains)"
INJECTED = frozenset({"command", "local_command", "interrupt", "task_notification"})
SUMMARIZER_ID = "acompact"
"""How Claude Code's ``agentId`` of its compaction summarizer request starts (which also
names its file: ``subagents/agent-acompact-<id>.jsonl``)."""


def summarizer_marker(nodes: list[Record], name: str = "") -> str | None:
    """What shows that a sub-agent's records are Claude Code's compaction summarizer
    request, not an agent session; None: an agent.

    The records' own ``agentId`` (``acompact-<id>``, the id Claude Code gives that request)
    decides, with the file name (``agent-acompact-<id>``, derived from it) as corroboration;
    the file name alone only when no record carries an ``agentId``. The prompt text
    ("Your task is to create a detailed summary...") is not used: it is wording that
    changes between versions and that anyone can paste into an agent's task.
    """
    ids = sorted({o["agentId"] for _, o in nodes if isinstance(o.get("agentId"), str)})
    own = [i for i in ids if i.startswith(SUMMARIZER_ID)]
    named = name.startswith(f"agent-{SUMMARIZER_ID}")
    if own:
        return f"agentId {own[0]!r}" + (f" (file {name}.jsonl)" if named else "")
    return f"file name {name}.jsonl (no agentId)" if named and not ids else None


def _helper(f: RecordFile, nodes: list[Record], marker: str, name: str, of: str,
            event: Any) -> dict[str, Any]:
    """The `HELPER_SESSIONS` entry of a compaction summarizer session, said in the load
    report at its call's line (else its first used line)."""
    note = (f"{name} is Claude Code's compaction summarizer request, not an agent session: "
            f"loaded, not replayed")
    used = [ln for ln, _ in nodes if f.decided.get(ln, ("",))[0] == "used"]
    calls = [ln for ln in used if f.decided[ln][1] == "assistant"]
    if used:
        f.note((calls or used)[-1 if calls else 0], note)
    return {"kind": "compaction_summarizer", "note": note, "file": str(f.path),
            "marker": marker, "session": of, "event": event}


def sniff(path: Path, head: str) -> bool:
    """A ``.jsonl`` file whose records carry Claude Code's graph fields."""
    if path.suffix.lower() != ".jsonl" or not head.lstrip().startswith("{"):
        return False
    lines = head.split("\n")[:-1] or [head]
    for raw in lines[:20]:
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and (
                ("parentUuid" in obj and "type" in obj and "sessionId" in obj)
                or (obj.get("type") == "summary" and "leafUuid" in obj)
                or (obj.get("type") == "file-history-snapshot" and "snapshot" in obj)):
            return True
    return '"parentUuid":' in head and '"isSidechain":' in head and '"sessionId":' in head


def owner(path: Path) -> Path | None:
    """The main log of a 2.x sub-agent file ``<sessionId>/subagents/agent-<id>.jsonl``."""
    if path.parent.name != "subagents":
        return None
    main = path.parent.parent.parent / f"{path.parent.parent.name}.jsonl"
    return main if main.is_file() else None


class _Session:
    """Builds one session (the main conversation or one sub-agent) from its graph records."""

    def __init__(self, b: SessionBuilder, f: RecordFile,
                 summarizers: list[dict[str, Any]]) -> None:
        self.b, self.f, self.summarizers = b, f, summarizers
        self.tools: dict[str, tuple[str | None, str | None]] = {}
        self.visible_from = 0
        self.pending_event: int | None = None
        self.models: list[str] = []
        self.bridged: dict[str, int] = {}   # "file:line" -> line the chain went on from

    def build(self, nodes: list[Record], *, flat: bool = False, queued: bool = False) -> None:
        """Build the session; ``queued``: prompts the user queued while the agent worked
        (the file's ``queue-operation`` records) go in where they were taken from the
        queue (the main conversation's only)."""
        chain, superseded = select_chain(nodes, flat=flat, unread=self.f.unread)
        self.bridged = {f"{self.f.path.name}:{line}": prev for line, prev in chain.bridged.items()}
        for line, obj in nodes:
            kind = str(obj.get("type"))
            if kind == "queue-operation":       # decided when the session is built
                continue
            if line in superseded:
                self.f.ignore(line, kind, f"duplicate uuid: superseded by the copy at line "
                                          f"{superseded[line]}")
            elif line not in chain.lines:
                self.f.ignore(line, kind, OFF_CHAIN if kind in CONVERSATION else type_reason(obj))
            elif kind == "attachment" and queued_text(obj) is not None:
                pass
            elif kind not in CONVERSATION and obj.get("subtype") not in BOUNDARIES:
                self.f.ignore(line, kind, type_reason(obj))
            elif kind == "user" and obj.get("isVisibleInTranscriptOnly") and \
                    not obj.get("isCompactSummary"):
                self.f.ignore(line, kind, "visible in the transcript only, not sent to the model")
        wanted = [r for r in chain.records if r[0] not in self.f.decided]
        items = plan_messages(wanted)
        cats: dict[int, str] = {}
        for item in items:
            if item.kind == "user" and item.records[0][1].get("type") == "user":
                line, obj = item.records[0]
                try:
                    cats[line] = user_category(obj)
                except SHAPE_ERRORS as e:
                    self.f.skip(line, "user", f"unexpected shape: {e!r}")
        delivered = delivered_prompts(self.f.records) if queued and not flat else []
        for i, item in enumerate(items):
            first = item.records[0][0]
            if item.kind == "assistant":
                delivered = self._queued(delivered, first)  # taken for this request
                self._assistant(item)
            elif item.kind == "results":
                self._records(item.records, "user", real_user=False)
            elif item.kind == "boundary" and \
                    item.records[0][1].get("subtype") == "microcompact_boundary":
                self._microcompact(*item.records[0])
            elif item.kind == "boundary":
                self._boundary(*item.records[0], fallback=chain.fallbacks.get(item.records[0][0]))
            elif item.records[0][1].get("type") == "attachment":
                line, obj = item.records[0]
                self._queued_prompt(line, obj, str(queued_text(obj)), None)
                for j, kind in queued_left_out(obj):
                    self.f.log.skipped("attachment", f"a block of type {kind!r} in a queued "
                                       "prompt: left out (the prompt's text is the message)",
                                       line=line, where=f"line {line} prompt[{j}]")
            elif item.records[0][0] in cats:
                self._user(item, cats, items[i + 1:])
            if item.kind in ("results", "user"):    # sent with these results
                delivered = self._queued(delivered, first)
        self._queued(delivered, None)
        for line, obj in self.f.records:
            if obj.get("type") == "queue-operation" and obj.get("operation") == "remove" \
                    and line not in self.f.decided:
                self.f.ignore(line, "queue-operation", "input queue (UI): no queued prompt "
                              "left to take")

    def _queued(self, delivered: list[tuple[int, int, dict[str, Any]]],
                before: int | None) -> list[tuple[int, int, dict[str, Any]]]:
        """Add, as user messages of their own, the queued prompts taken from the queue
        before line ``before`` (None: all); returns those left."""
        n = 0
        for taken, line, obj in delivered:
            if before is not None and taken > before:
                break
            n += 1
            self._queued_prompt(line, obj, str(obj["content"]), taken)
            self.f.used(taken, "queue-operation")
        return delivered[n:]

    def _queued_prompt(self, line: int, obj: dict[str, Any], text: str,
                       taken: int | None) -> None:
        """A prompt typed while the agent worked, as the model gets it: a user message of
        its own (a new turn) saying what the user sent."""
        ts = obj.get("timestamp")       # the builder reads it (and reports one it cannot)
        self.b.message("user", real_user=True)
        meta: dict[str, Any] = {"category": "queued"}
        if taken is not None:
            meta["taken_at_line"] = taken
        self.b.part("text", QUEUED + text, role="user", ts=ts, source=self.f.loc(line),
                    meta=meta)
        self.f.used(line, str(obj.get("type")), parts=1)

    # ---- records -> parts ------------------------------------------------------------
    def _specs(self, line: int, obj: dict[str, Any], role: str) -> list[dict[str, Any]]:
        base: dict[str, Any] = {"uuid": obj.get("uuid")}
        if role == "assistant":
            base.update(message_id=message_id(obj), request_id=obj.get("requestId"))
            if obj["message"].get("model") == "<synthetic>":
                base["synthetic"] = True
        for flag in ("isMeta", "isCompactSummary", "isVisibleInTranscriptOnly"):
            if obj.get(flag):
                base[flag] = True
        common = dict(role=role, ts=obj.get("timestamp"), source=self.f.loc(line))
        specs: list[dict[str, Any]] = []
        for block in content_blocks(obj):
            for spec in self._block(block, obj):
                spec["meta"] = {**base, **spec.get("meta", {})}
                specs.append({**common, **spec})
        return specs

    def _block(self, block: Any, obj: dict[str, Any]) -> list[dict[str, Any]]:
        if not isinstance(block, dict):
            raise TypeError(f"content block is a {type(block).__name__}")
        kind = block.get("type")
        if kind == "text":
            return [dict(kind="text", content=text_field(block, "text"))]
        if kind == "thinking":
            meta = {"signature": block.get("signature")} if "signature" in block else {}
            return [dict(kind="thinking", content=text_field(block, "thinking"), meta=meta)]
        if kind == "redacted_thinking":
            return [dict(kind="thinking", content=text_field(block, "data"),
                         meta={"redacted": True})]
        if kind == "tool_use":
            name, call_id = text_field(block, "name"), text_field(block, "id")
            args = block.get("input")
            path = file_path_from_args(args)
            self.tools[call_id] = (name, path)
            meta = {"caller": block["caller"]} if "caller" in block else {}
            return [dict(kind="tool_call", content=tool_call_text(name, args), tool_name=name,
                         tool_call_id=call_id, file_path=path, meta=meta)]
        if kind == "tool_result":
            return self._result(block, obj)
        if kind == "image":
            return [dict(kind="image", content=to_json(block))]
        return [dict(kind="attachment", content=to_json(block), meta={"block_type": kind})]

    def _result(self, block: dict[str, Any], obj: dict[str, Any]) -> list[dict[str, Any]]:
        call_id = text_field(block, "tool_use_id")
        name, path = self.tools.get(call_id, (None, None))
        link = dict(tool_name=name, tool_call_id=call_id, file_path=path)
        meta: dict[str, Any] = {}
        if "is_error" in block:
            meta["is_error"] = block["is_error"]
        extra = obj.get("toolUseResult")
        if extra is not None:
            keys = sorted(extra)[:30] if isinstance(extra, dict) else type(extra).__name__
            meta["toolUseResult"] = {"keys": keys, "size": len(to_json(extra))}
        content = block.get("content")
        texts: list[str] = []
        images: list[dict[str, Any]] = []
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict) and b.get("type") == "image":
                    images.append(dict(kind="image", content=to_json(b), **link))
                elif isinstance(b, dict) and b.get("type") == "text":
                    texts.append(text_field(b, "text"))
                else:
                    texts.append(b if isinstance(b, str) else to_json(b))
        elif content is not None:
            texts.append(content if isinstance(content, str) else to_json(content))
        return [dict(kind="tool_result", content="\n".join(texts), meta=meta, **link), *images]

    def _readable(self, records: list[Record], role: str
                  ) -> list[tuple[int, dict[str, Any], list[dict[str, Any]]]]:
        """The records that can be read, with their part specs; the others are skipped
        (before anything is built from them: no call or event from a skipped record)."""
        out = []
        for line, obj in records:
            try:
                out.append((line, obj, self._specs(line, obj, role)))
            except SHAPE_ERRORS as e:
                self.f.skip(line, str(obj.get("type")), f"unexpected shape: {e!r}")
        return out

    def _records(self, records: list[Record], role: str, *, real_user: bool,
                 call: int | None = None, tag: dict[str, Any] | None = None,
                 read: list[tuple[int, dict[str, Any], list[dict[str, Any]]]] | None = None,
                 **extra: Any) -> None:
        """Add the parts of some records as one message (``read``: already read)."""
        read = self._readable(records, role) if read is None else read
        if read:
            self.b.message(role, real_user=real_user)
        for line, obj, specs in read:
            for spec in specs:
                if tag:
                    spec["meta"] = {**spec["meta"], **tag}
                self.b.part(call=call, **{**spec, **extra})
            self.f.used(line, str(obj.get("type")), parts=len(specs))

    def _assistant(self, item: Item) -> None:
        read = self._readable(item.records, "assistant")
        if not read:            # every line skipped: no call from them
            return
        records = [(ln, obj) for ln, obj, _ in read]
        first, (ln_u, last) = records[0][1], records[-1]
        mid, model = message_id(first), last["message"].get("model")
        model = model if isinstance(model, str) else None
        for ln, obj in reversed(records):  # the last line with usage has the final counts
            if isinstance(obj["message"].get("usage"), dict):
                ln_u, last = ln, obj
                break
        call = None
        if mid is None and model != "<synthetic>":
            self.f.log.skipped("assistant", "an assistant message without message.id: its "
                               "parts are kept but make no call (its usage is not loaded)",
                               line=ln_u, where=f"line {ln_u} message.id")
        if mid is not None and model != "<synthetic>":
            usage = usage_fields(last["message"].get("usage"))
            call = self.b.call_by_id(mid)
            if call is not None and call != self.b.n_calls - 1:
                call = None     # an id back after another call: a request of its own
            if call is None:
                call = self.b.call(call_id=mid, model=model, ts=first.get("timestamp"),
                                   source=self.f.loc(ln_u), **usage)
            else:
                self.b.update_call(call, source=self.f.loc(ln_u), **usage)
            if model and model not in self.models:
                self.models.append(model)
        self._records(records, "assistant", real_user=False, call=call, read=read)

    def _user(self, item: Item, cats: dict[int, str], rest: list[Item]) -> None:
        line, obj = item.records[0]
        cat = cats[line]
        if cat == "summary":
            read = self._readable(item.records, "user")
            if not read:        # an unreadable summary hides nothing (its boundary's event
                self.pending_event = None       # stays, without a summary, as before)
                return
            event = self.pending_event if self.pending_event is not None else \
                self._event(line, obj, {}, {"summary_without_boundary": True})
            self.pending_event = None
            self._records(item.records, "user", real_user=False, kind="summary", event=event,
                          read=read)
            return
        real = cat == "human"
        if cat == "command":  # a local command's output follows it; a prompt command's doesn't
            real = not rest or cats.get(rest[0].records[0][0]) != "local_command"
        tag = {"category": cat} if cat in INJECTED else {}
        self._records(item.records, "user", real_user=real, tag=tag)

    def _boundary(self, line: int, obj: dict[str, Any], fallback: int | None) -> None:
        cm = obj.get("compactMetadata")
        meta: dict[str, Any] = {"logical_parent_uuid": obj.get("logicalParentUuid")}
        if fallback is not None:
            meta["logical_parent_missing"] = True
            meta["continued_from_line"] = fallback
        self.pending_event = self._event(line, obj, cm if isinstance(cm, dict) else {}, meta)
        self.f.used(line, "system")

    def _microcompact(self, line: int, obj: dict[str, Any]) -> None:
        """Claude Code cleared old tool results (``compactedToolIds``): an event hides each
        and puts the cleared placeholder in its place, in the same message."""
        mm = obj.get("microcompactMetadata")
        mm = mm if isinstance(mm, dict) else {}
        ids = mm.get("compactedToolIds")
        ids = {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()
        trigger = mm.get("trigger")
        loc = self.f.loc(line)
        event = self.b.event(trigger=trigger if isinstance(trigger, str) else None,
                             pre_tokens=mm.get("preTokens"), origin="recorded", source=loc,
                             reason="Claude Code microcompaction: old tool results cleared",
                             meta={"uuid": obj.get("uuid"), "ts": obj.get("timestamp"),
                                   "microcompact": True, "tokens_saved": mm.get("tokensSaved"),
                                   "tool_ids": len(ids)})
        cleared = self.b.parts_of_calls(ids, ("tool_result", "image"))
        self.b.hide(cleared, event)
        made = [self.b.insert_after(pid, CLEARED, event=event, source=loc)
                for pid in cleared if self.b.kind_of(pid) == "tool_result"]
        self.f.used(line, "system", parts=len(made))

    def _event(self, line: int, obj: dict[str, Any], cm: dict[str, Any],
               meta: dict[str, Any]) -> int:
        ts = obj.get("timestamp")
        meta = {"uuid": obj.get("uuid"), "ts": ts, **meta}
        call = self._match_summarizer(parse_ts(ts))
        if call is not None:
            meta["summarizer_call"] = {k: v for k, v in call.items()
                                       if k not in ("line", "matched", "event")}
        trigger = cm.get("trigger")
        event = self.b.event(trigger=trigger if isinstance(trigger, str) else None,
                             pre_tokens=cm.get("preTokens"),
                             reason="Claude Code compaction", origin="recorded",
                             source=self.f.loc(line), meta=meta)
        if call is not None:
            call["event"] = event               # its session links to it (`_helper`)
        self.b.hide(range(self.visible_from, self.b.n_parts), event)  # earlier ones: hidden
        self.visible_from = self.b.n_parts
        return event

    def _match_summarizer(self, when: datetime | None) -> dict[str, Any] | None:
        """The unused summarizer call closest in time before the boundary (within 10 min)."""
        best, gap = None, 600.0
        for s in self.summarizers:
            t = parse_ts(s["ts"])
            if s.get("matched") or when is None or t is None:
                continue
            d = (when - t).total_seconds()
            if -60.0 <= d <= gap:
                best, gap = s, abs(d)
        if best is not None:
            best["matched"] = True
        return best


def delivered_prompts(records: list[Record]) -> list[tuple[int, int, dict[str, Any]]]:
    """The prompts the user queued while the agent worked that reached the model without
    a user record of their own: ``(line taken from the queue, enqueue line, record)``, in
    order. In file order, each queued prompt ends in one of: ``remove`` (taken into the
    running turn: the oldest queued prompt, or the one with the text it carries),
    ``dequeue`` (sent as a new turn: a user record follows), ``popAll`` (every queued
    prompt back to the input box), or a user record holding its text while it is queued.
    A task notification is queued too but always arrives as a record of its own; a file
    that records taken prompts as ``queued_command`` attachments (newer CLIs) has its
    prompts there, and its removes take nothing more."""
    if any(queued_text(obj) is not None for _, obj in records):
        return []
    pending: list[Record] = []
    out: list[tuple[int, int, dict[str, Any]]] = []
    for line, obj in records:
        kind = obj.get("type")
        if kind == "user":
            msg = obj.get("message")
            content = msg.get("content") if isinstance(msg, dict) else None
            blocks = [content] if isinstance(content, str) else content if isinstance(
                content, list) else []
            texts = {(b if isinstance(b, str) else str(b.get("text"))).strip() for b in blocks
                     if isinstance(b, str) or isinstance(b, dict) and b.get("type") == "text"}
            at = next((k for k, (_, o) in enumerate(pending)
                       if str(o.get("content")).strip() in texts), None)
            if at is not None:          # sent as this record
                pending.pop(at)
            continue
        if kind != "queue-operation":
            continue
        op, text = obj.get("operation"), obj.get("content")
        if op == "enqueue" and isinstance(text, str) and text.strip() \
                and not text.lstrip().startswith(NOTIFICATION_PREFIX):
            pending.append((line, obj))
        elif op == "remove":
            given = text.strip() if isinstance(text, str) else ""
            at = next((k for k, (_, o) in enumerate(pending)
                       if str(o.get("content")).strip() == given), 0 if pending else None)
            if at is not None:
                line0, obj0 = pending.pop(at)
                out.append((line, line0, obj0))
            elif given and not given.startswith(NOTIFICATION_PREFIX):
                out.append((line, line, obj))   # its enqueue is not in the file
        elif op == "dequeue" and pending:
            pending.pop(0)
        elif op == "popAll":
            pending.clear()
    return out


def _split(f: RecordFile, subagent: bool, titles: list[str]) -> tuple[list[Record], list[Record]]:
    """Report the records that are not part of the graph; return (main, sidechain) nodes."""
    main: list[Record] = []
    side: list[Record] = []
    for line, obj in f.records:
        kind = obj["type"]
        if kind in IGNORED_TYPES:
            if kind != "queue-operation" or subagent:   # the main session decides those
                f.ignore(line, kind, IGNORED_TYPES[kind])
            if isinstance(obj.get("uuid"), str):  # still a link of the parentUuid chain
                (side if obj.get("isSidechain") is True and not subagent else main).append(
                    (line, obj))
        elif kind == "summary":
            if isinstance(obj.get("summary"), str):
                titles.append(obj["summary"])
            f.ignore(line, kind, "session title (summary record), not a compaction; "
                                 "kept in meta['titles']")
        elif kind not in GRAPH_TYPES:
            f.skip(line, kind, f"unknown record type {kind!r}")
        elif not isinstance(obj.get("uuid"), str):
            f.skip(line, kind, "unexpected shape: no uuid")
        elif kind in CONVERSATION and not isinstance(obj.get("message"), dict):
            f.skip(line, kind, "unexpected shape: no message object")
        elif obj.get("isSidechain") is True and not subagent:
            side.append((line, obj))
        else:
            main.append((line, obj))
    return main, side


def _session_id(nodes: list[Record], fallback: str) -> str:
    conv = [o for _, o in nodes if o.get("type") in CONVERSATION] or [o for _, o in nodes]
    sid = conv[-1].get("sessionId") if conv else None
    return sid if isinstance(sid, str) and sid else fallback


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load one Claude Code session file (and its sub-agent files) into a `Transcript`.

    Args:
        path: the main ``<sessionId>.jsonl`` (or a sub-agent file, loaded on its own).
        options: ``sidechains=True`` also loads sub-agent conversations as sessions
            ``<sessionId>/<agentId or root uuid>`` (1.0.x) and ``<sessionId>/agent-<id>`` (2.x);
            the compaction summarizer's is marked in ``meta["helper_sessions"]``.
    """
    path = Path(path)
    subagent = path.parent.name == "subagents"
    main = RecordFile(path, options.strict)
    titles: list[str] = []
    nodes, side = _split(main, subagent, titles)
    sid = _session_id(nodes, path.stem)
    if subagent:
        sid = f"{_session_id(nodes, path.parent.parent.name)}/{path.stem}"
    folder = path.parent / path.stem / "subagents"
    sub_paths = sorted(folder.glob("agent-*.jsonl")) if folder.is_dir() and not subagent else []
    subs = [(p, RecordFile(p, options.strict)) for p in sub_paths]
    found = {p: summarizer_call(f) for p, f in subs if p.stem.startswith("agent-acompact")}
    summarizers = [s for s in found.values() if s is not None]
    sessions = [_Session(SessionBuilder(sid, main.log), main, summarizers)]
    alone = summarizer_marker(nodes, path.stem) if subagent else None
    sessions[0].build(nodes, flat=alone is not None, queued=not subagent)
    helpers: dict[str, dict[str, Any]] = {}
    if alone is not None:       # a summarizer's file loaded on its own
        helpers[sid] = _helper(main, nodes, alone, path.stem, sid.rpartition("/")[0], None)
    for line, obj in main.records:      # queued prompts no session took
        if obj.get("type") == "queue-operation" and line not in main.decided:
            main.ignore(line, "queue-operation", IGNORED_TYPES["queue-operation"])
    if options.sidechains:
        for key, group in sidechain_groups(side).items():
            sessions.append(_Session(SessionBuilder(f"{sid}/{key}", main.log), main, []))
            marker = summarizer_marker(group)
            sessions[-1].build(group, flat=marker is not None)
            if marker is not None:
                helpers[f"{sid}/{key}"] = _helper(main, group, marker, key, sid, None)
    else:
        for line, obj in side:
            main.ignore(line, str(obj["type"]), SIDECHAIN)
    for p, f in subs:
        sub_nodes, _ = _split(f, True, titles)
        if options.sidechains:
            key = f"{_session_id(sub_nodes, sid)}/{p.stem}"
            sessions.append(_Session(SessionBuilder(key, f.log), f, []))
            marker = summarizer_marker(sub_nodes, p.stem)
            sessions[-1].build(sub_nodes, flat=marker is not None)
            if marker is not None:
                event = found[p].get("event") if found.get(p) is not None else None
                helpers[key] = _helper(f, sub_nodes, marker, p.stem, sid, event)
            continue
        summary = found.get(p)
        if summary is not None and summary.get("matched"):
            f.used(summary["line"], "assistant")
        what = ("compaction summarizer input" if p.stem.startswith("agent-acompact")
                else "sub-agent conversation")
        for line, obj in f.records:
            f.ignore(line, str(obj["type"]), f"{what} (sidechain): "
                                             "load with sidechains=True (--sidechains)")
    records = [o for _, o in nodes]
    meta: dict[str, Any] = {"format": NAME, "path": str(path), "session": sid}
    for key, field in (("session_ids", "sessionId"), ("versions", "version"),
                       ("cwds", "cwd"), ("git_branches", "gitBranch")):
        values = list(dict.fromkeys(o[field] for o in records if isinstance(o.get(field), str)))
        if values:
            meta[key] = values
    for one, many in (("version", "versions"), ("cwd", "cwds"), ("git_branch", "git_branches")):
        if many in meta:
            meta[one] = meta[many][-1] if one == "version" else meta[many][0]
    meta["models"] = list(dict.fromkeys(m for s in sessions for m in s.models))
    bridged = {key: prev for s in sessions for key, prev in s.bridged.items()}
    if bridged:    # the conversation went on past a lost line, from the record before it
        meta["chain_bridged"] = dict(sorted(bridged.items()))
    builders = [s.b for s in sessions]
    if titles:
        meta["titles"] = titles
    if sub_paths:
        meta["subagent_files"] = [str(p) for p in sub_paths]
    if helpers:
        meta[HELPER_SESSIONS] = helpers
    return assemble(builders, [main.flush()] + [f.flush() for _, f in subs], meta)


LOADER = register(Loader(name=NAME, description="Claude Code session JSONL (~/.claude/projects)",
                         sniff=sniff, load=load, priority=50, owner=owner))
