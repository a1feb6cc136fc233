"""Rendering for `ctxlab.datasets`: Claude Code 2.x records and the facts sidecar.

The record shapes follow real Claude Code 2.1 session files: one line per content block
of a response (same ``message.id`` and ``requestId``, usage repeated, only the last line
with the final ``output_tokens``), one user record per tool result whose ``parentUuid``
is the line holding its ``tool_use``, progress and file-history records, and an auto
compaction as a ``compact_boundary`` that starts a new root plus an ``isCompactSummary``
user record.
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any, Iterator, Sequence

from ctxlab.datasets import Session, Usage, call_usage, iso, openai_conversations

VERSION = "2.1.39"
from ctxlab._datagen.text import B58
Record = dict[str, Any]


def _block(b: Any) -> Record:
    if b.type == "text":
        return {"type": "text", "text": b.text}
    if b.type == "thinking":
        return {"type": "thinking", "thinking": b.text, "signature": b.detail}
    return {"type": "tool_use", "id": b.tool_id, "name": b.tool, "input": dict(b.input),
            "caller": {"type": "direct"}}


def _usage(u: Usage, output: int, final: bool) -> Record:
    cache = {"ephemeral_5m_input_tokens": u.cache_write, "ephemeral_1h_input_tokens": 0}
    head = {"input_tokens": u.input_tokens, "cache_creation_input_tokens": u.cache_write,
            "cache_read_input_tokens": u.cache_read}
    if not final:
        return {**head, "cache_creation": cache, "output_tokens": output,
                "service_tier": "standard", "inference_geo": "not_available"}
    return {**head, "output_tokens": output,
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard", "cache_creation": cache, "inference_geo": "",
            "iterations": []}


def claude_code_records(s: Session) -> Iterator[tuple[int | None, Record]]:
    """Every record of the session file, with the index of the message it renders."""
    r = random.Random(f"ctxlab-cc:{s.kind}:{s.seed}")
    usage = iter(call_usage(s))
    state: dict[str, Any] = {"parent": None, "slug": False, "ts": 0}

    def uid() -> str:
        return str(uuid.UUID(int=r.getrandbits(128), version=4))

    def rid(prefix: str, n: int) -> str:
        return prefix + "".join(r.choice(B58) for _ in range(n))

    def stamp(ms: int) -> str:
        state["ts"] = max(ms, state["ts"] + r.randint(2, 40))
        return iso(state["ts"])

    def env(parent: str | None = None, *, root: bool = False) -> Record:
        d: Record = {"parentUuid": None if root else (parent or state["parent"]),
                     "isSidechain": False, "userType": "external", "cwd": s.cwd,
                     "sessionId": s.session_id, "version": VERSION, "gitBranch": s.git_branch}
        if state["slug"]:
            d["slug"] = s.slug
        return d

    def progress(data: Record, tool_id: str, ms: int, *, root: bool = False) -> Record:
        u = uid()
        rec = {**env(root=root), "type": "progress", "data": data, "parentToolUseID": tool_id,
               "toolUseID": tool_id, "timestamp": stamp(ms), "uuid": u}
        state["parent"] = u
        return rec

    def hook(event: str, name: str, command: str, tool_id: str, ms: int,
             root: bool = False) -> Record:
        return progress({"type": "hook_progress", "hookEvent": event, "hookName": name,
                         "command": command}, tool_id, ms, root=root)

    system: list[Record] = []
    tracked: dict[str, Record] = {}
    lines: dict[str, str] = {}
    prompt: Record = {}
    turn_start = 0
    ms0 = s.messages[0].ts_ms
    yield None, hook("SessionStart", "SessionStart:startup", "~/.claude/hooks/notify.sh start",
                     uid(), ms0 - 1500, root=True)
    for i, m in enumerate(s.messages):
        if m.kind == "system":
            system = [{"type": "text", "text": b.text} for b in m.blocks]
        elif m.kind == "prompt":
            if prompt:
                u = uid()
                yield None, {**env(), "type": "system", "subtype": "turn_duration",
                             "durationMs": state["ts"] - turn_start,
                             "timestamp": stamp(state["ts"]), "uuid": u, "isMeta": False}
                state["parent"] = u
            u = uid()
            turn_start = m.ts_ms
            prompt = {"uuid": u, "ts": iso(m.ts_ms), "edited": set()}
            yield None, {"type": "file-history-snapshot", "messageId": u,
                         "snapshot": {"messageId": u, "trackedFileBackups": dict(tracked),
                                      "timestamp": iso(m.ts_ms)}, "isSnapshotUpdate": False}
            texts = [{"type": "text", "text": b.text} for b in m.blocks]
            content: Any = system + texts if system else (m.blocks[0].text if len(texts) == 1
                                                          else texts)
            system = []
            yield i, {**env(), "type": "user", "message": {"role": "user", "content": content},
                      "uuid": u, "timestamp": stamp(m.ts_ms),
                      "thinkingMetadata": {"maxThinkingTokens": 31999}, "todos": [],
                      "permissionMode": "acceptEdits"}
            state["parent"] = u
        elif m.kind == "response":
            u_ = next(usage)
            mid, req, snap = rid("msg_01", 22), rid("req_011C", 20), r.choice((1, 8, 9))
            ms = m.ts_ms
            for j, b in enumerate(m.blocks):
                final = j == len(m.blocks) - 1
                u = uid()
                yield i, {**env(), "message": {
                    "model": s.model, "id": mid, "type": "message", "role": "assistant",
                    "content": [_block(b)], "stop_reason": None, "stop_sequence": None,
                    "usage": _usage(u_, u_.output_tokens if final else snap, final)},
                    "requestId": req, "type": "assistant", "uuid": u, "timestamp": stamp(ms)}
                state["parent"] = u
                ms = state["ts"] + r.randint(150, 1400)
                if b.type == "tool_use":
                    lines[b.tool_id or ""] = u
                    if b.tool == "Bash":
                        yield None, hook("PreToolUse", "PreToolUse:Bash",
                                         "~/.claude/hooks/guard.sh", b.tool_id or "", ms)
            state["slug"] = True
        elif m.kind == "results":
            for b in m.blocks:
                tool_line = lines[b.tool_id or ""]
                if b.tool == "Bash" and b.text.count("\n") > 200:
                    tail = "\n".join(b.text.split("\n")[-5:])
                    yield None, progress({"type": "bash_progress", "output": tail,
                                          "fullOutput": tail,
                                          "elapsedTimeSeconds": r.randint(3, 40),
                                          "totalLines": b.text.count("\n") + 1,
                                          "timeoutMs": 120000}, b.tool_id or "", m.ts_ms - 200)
                res: Record = {"tool_use_id": b.tool_id, "type": "tool_result", "content": b.text}
                if b.tool == "Bash" or b.is_error:
                    res["is_error"] = b.is_error
                u = uid()
                yield i, {**env(tool_line), "type": "user",
                          "message": {"role": "user", "content": [res]}, "uuid": u,
                          "timestamp": stamp(m.ts_ms), "toolUseResult": b.detail,
                          "sourceToolAssistantUUID": tool_line}
                state["parent"] = u
                edited = b.tool in ("Edit", "Write") and not b.is_error
                rel = str(b.detail["filePath"]).removeprefix(s.cwd + "/") if edited else ""
                if edited and rel not in prompt["edited"]:
                    prompt["edited"].add(rel)
                    version = int(tracked.get(rel, {}).get("version", 0)) + 1
                    tracked[rel] = {"backupFileName": f"{r.getrandbits(64):016x}@v{version}",
                                    "version": version, "backupTime": iso(state["ts"])}
                    yield None, {"type": "file-history-snapshot", "messageId": tool_line,
                                 "snapshot": {"messageId": prompt["uuid"],
                                              "trackedFileBackups": dict(tracked),
                                              "timestamp": prompt["ts"]},
                                 "isSnapshotUpdate": True}
        elif m.kind == "boundary":
            u = uid()
            yield i, {**env(root=True), "logicalParentUuid": state["parent"], "type": "system",
                      "subtype": "compact_boundary", "content": "Conversation compacted",
                      "isMeta": False, "timestamp": stamp(m.ts_ms), "uuid": u, "level": "info",
                      "compactMetadata": {"trigger": "auto", "preTokens": m.pre_tokens}}
            state["parent"] = u
        else:  # summary
            u = uid()
            yield i, {**env(), "type": "user", "message": {"role": "user", "content": m.text},
                      "isVisibleInTranscriptOnly": True, "isCompactSummary": True, "uuid": u,
                      "timestamp": iso(state["ts"])}
            state["parent"] = u
            yield None, hook("SessionStart", "SessionStart:compact",
                             "~/.claude/hooks/notify.sh start", uid(), state["ts"])
    yield None, {**env(), "type": "system", "subtype": "turn_duration",
                 "durationMs": state["ts"] - turn_start, "timestamp": stamp(state["ts"]),
                 "uuid": uid(), "isMeta": False}


def _text(record: Record) -> str:
    return json.dumps(record, ensure_ascii=False)


def facts_sidecar(sessions: Sequence[Session], fmt: str) -> dict[str, Any]:
    """Where each planted fact is stated and needed, in file lines and call indices.

    Claude Code: one session per file; ``line`` is the 1-based line of the record that holds
    the fact and ``call`` the 0-based index of the response. OpenAI: ``session`` is the
    conversation id (``id/2`` after a compaction), ``line`` its line, ``message`` the index
    in its ``messages`` and ``call`` the index of the assistant message in it. ``turn`` is
    the number of prompts so far (0: the project context before the first prompt).
    """
    out: list[Record] = []
    line0 = 0
    for s in sessions:
        loc: dict[Any, Record] = {}
        compactions: list[Record] = []
        calls = 0
        by_session: dict[str, int] = {}
        keys = [f.key for f in s.facts]
        if fmt == "claude_code":
            for n, (i, rec) in enumerate(claude_code_records(s), start=1):
                if i is None:
                    continue
                text = _text(rec)
                for key in keys:  # the exact line of a message that holds a fact
                    if (i, key) not in loc and key in text:
                        loc[(i, key)] = {"session": s.session_id, "line": n}
                if i in loc:
                    continue
                loc[i] = {"session": s.session_id, "line": n}
                kind = s.messages[i].kind
                if kind == "response":
                    loc[i]["call"] = calls
                    calls += 1
                elif kind == "boundary":
                    compactions.append({"line": n, "pre_tokens": s.messages[i].pre_tokens,
                                        "before_call": calls})
        else:
            for conv, where in openai_conversations(s):
                line0 += 1
                k = 0
                for j, i in enumerate(where):
                    if i is None:
                        continue
                    for key in keys:
                        if (i, key) not in loc and key in _text(conv["messages"][j]):
                            loc[(i, key)] = {"session": conv["id"], "line": line0, "message": j}
                    if i in loc:
                        continue
                    loc[i] = {"session": conv["id"], "line": line0, "message": j}
                    if s.messages[i].kind == "response":
                        loc[i]["call"] = k
                        k += 1
                        calls += 1
                    if s.messages[i].kind == "summary":
                        compactions.append({"session": conv["id"], "line": line0,
                                            "pre_tokens": s.messages[i - 1].pre_tokens})
                by_session[conv["id"]] = k
        for i, m in enumerate(s.messages):  # Claude Code: the context rides in the 1st prompt
            if m.kind == "system" and i not in loc:
                loc[i] = {k: v for k, v in loc[i + 1].items() if k != "call"}
                for key in keys:
                    loc.setdefault((i, key), loc.get((i + 1, key), loc[i]))

        def at(i: int, key: str) -> Record:
            return {"turn": s.messages[i].turn, **loc[i], **loc.get((i, key), {})}
        facts = [{"name": f.name, "key": f.key, "statement": f.statement,
                  "in_summary": f.in_summary, "stated": at(f.stated_in, f.key),
                  "needed": [at(i, f.key) for i in f.needed_in]} for f in s.facts]
        out.append({"session": s.session_id, "kind": s.kind, "seed": s.seed, "calls": calls,
                    "calls_by_session": by_session or {s.session_id: calls},
                    "overhead_tokens": s.overhead_tokens, "compactions": compactions,
                    "facts": facts})
    return {"format": fmt, "sessions": out}
