"""GitHub Copilot CLI session events JSONL (``~/.copilot/session-state/<id>/events.jsonl``).

Lines are ``{type, data, id, timestamp, parentId}``. What the model saw:

* ``system.message``: the system prompt (recorded here, unlike most CLIs) -> a system
  text part. Copilot re-records it before every user interaction; an identical copy is
  reported as ignored, a changed one replaces the old (an event with origin
  ``system_prompt`` hides the old part).
* ``user.message``: ``transformedContent`` (the text with the CLI's
  ``<current_datetime>``/``<reminder>`` additions) is what the model saw; ``content``,
  what the user typed, is kept in meta. A message with empty ``content`` and no
  attachments is the CLI's own nudge (autopilot's "You have not yet marked the task as
  complete..."), so it does not start a turn. Attachments -> attachment parts.
* ``assistant.message``: one LLM request each (it carries the request's ``requestId``
  and ``outputTokens``; in the file here each ``assistant.turn_start``/``turn_end``
  pair brackets exactly one, and their count equals ``modelMetrics.requests.count``).
  Parts: ``reasoningText`` -> thinking (the opaque signature's length in meta),
  ``content`` -> text, ``toolRequests`` -> tool_call parts. The call has
  ``output_tokens`` = ``outputTokens`` and NA input usage unless an
  ``assistant.usage`` event follows (then ``inputTokens`` -> input_total, which
  includes cache reads: the session totals only add up that way).
* ``tool.execution_complete``: role tool results (``result.content``; the UI's
  ``detailedContent`` is only measured in meta), linked by ``toolCallId``. A result
  whose ``toolCallId`` no assistant.message requested cannot have been sent to the model
  and is reported as ignored; the result of a request left out (no name) is skipped
  with it.
* ``session.shutdown``: per-session usage only: ``modelMetrics`` and the client's
  context breakdown (``currentTokens``, ``systemTokens``, ``conversationTokens``,
  ``toolDefinitionsTokens``) go to ``Transcript.meta["session_usage"]`` (the last
  shutdown's; those of earlier runs of a resumed session, in order, to
  ``meta["earlier_session_usage"]``).
Tool schemas are not recorded: ``toolDefinitionsTokens`` gives their size, which a replay
counts in every request (``meta["unrecorded_input"]``, `ctxlab.schema.UNRECORDED_INPUT`)
where no call reports its input to fit that overhead from.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders import safe
from ctxlab.loaders.builder import (SessionBuilder, assemble, content_text, file_path_from_args,
                                    tool_call_text)
from ctxlab.loaders.records import SHAPE_ERRORS, LoadOptions, RecordLog, iter_jsonl, to_json
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import UNRECORDED_INPUT, Transcript

IGNORED = {
    "session.mode_changed": "UI state: agent mode change",
    "session.info": "UI notice shown in the terminal",
    "session.task_complete": "duplicates the task_complete tool call and its result",
    "assistant.turn_start": "turn bracket: the request itself is the assistant.message",
    "assistant.turn_end": "turn bracket: the request itself is the assistant.message",
    "tool.execution_start": "UI event: the call is in assistant.message toolRequests",
}
USAGE_KEYS = ("currentModel", "currentTokens", "systemTokens", "conversationTokens",
              "toolDefinitionsTokens", "totalPremiumRequests", "totalApiDurationMs",
              "shutdownType")
_TYPE_RE = re.compile(r'"type"\s*:\s*"(session\.start|user\.message|assistant\.message|'
                      r'assistant\.turn_start|system\.message|tool\.execution_start)"')


def sniff(path: Path, head: str) -> bool:
    """Event lines ``{"type": "session.start" | "user.message" | ..., "data": {...}}``."""
    return '"data"' in head and _TYPE_RE.search(head) is not None


class _Events:
    """Loader state while walking one events file."""

    def __init__(self, path: Path, log: RecordLog, session: str) -> None:
        self.log = log
        self.b = SessionBuilder(session, log)
        self.meta: dict[str, Any] = {"format": "copilot_cli", "path": str(path),
                                     "session_id": session}
        self.model: str | None = None
        self.system: tuple[int, str] | None = None  # (part, text) of the current prompt
        self.tools: dict[str, tuple[str, str | None]] = {}
        self.left_out: dict[str, int] = {}  # toolCallId of a request left out -> its line
        self.last_call: int | None = None
        self.seen_start = False

    def record(self, line: int, rtype: str, d: Mapping[str, Any], ts: str | None) -> None:
        loc = self.log.location(line=line)
        if rtype in IGNORED:
            self.log.ignored(rtype, IGNORED[rtype], line=line)
        elif rtype == "session.start":
            self.start(line, d)
        elif rtype == "session.model_change":
            if isinstance(d.get("newModel"), str):
                self.model = d["newModel"]
            self.log.used(rtype, line=line)
        elif rtype == "system.message":
            self.system_message(line, d, ts)
        elif rtype == "user.message":
            self.user(line, d, ts)
        elif rtype == "assistant.message":
            self.assistant(line, d, ts)
        elif rtype == "assistant.usage":
            self.usage(line, d)
        elif rtype == "tool.execution_complete":
            self.result(line, d, ts, loc)
        elif rtype == "session.shutdown":
            usage = {k: d[k] for k in USAGE_KEYS if k in d}
            usage["modelMetrics"] = dict(d["modelMetrics"])
            if "session_usage" in self.meta:    # a resumed session: each run shuts down
                self.meta.setdefault("earlier_session_usage", []).append(
                    self.meta["session_usage"])
            self.meta["session_usage"] = usage
            tools = d.get("toolDefinitionsTokens")
            if type(tools) is int and tools > 0:    # sent with every request, not recorded
                self.meta[UNRECORDED_INPUT] = {self.b.session: tools}
            else:                                   # the last run's, or none
                self.meta.pop(UNRECORDED_INPUT, None)
            self.log.used(rtype, line=line)
        else:
            self.log.skipped(rtype, "unknown record type", line=line)

    def start(self, line: int, d: Mapping[str, Any]) -> None:
        if self.seen_start:
            self.log.ignored("session.start", "repeated session.start (resumed session): "
                             "the first one is used", line=line)
            return
        ctx = d.get("context") if isinstance(d.get("context"), Mapping) else {}
        for key, value in (("copilot_version", d.get("copilotVersion")),
                           ("producer", d.get("producer")), ("start_time", d.get("startTime")),
                           ("cwd", ctx.get("cwd")), ("branch", ctx.get("branch")),
                           ("repository", ctx.get("repository"))):
            if isinstance(value, str):
                self.meta[key] = value
        self.seen_start = True
        self.log.used("session.start", line=line)

    def system_message(self, line: int, d: Mapping[str, Any], ts: str | None) -> None:
        text = d["content"] if isinstance(d["content"], str) else content_text(d["content"])
        if self.system is not None and self.system[1] == text:
            self.log.ignored("system.message", "identical system prompt re-recorded for the "
                             f"next interaction (already part {self.system[0]})", line=line)
            return
        loc = self.log.location(line=line)
        if self.system is not None:
            eid = self.b.event(origin="system_prompt", trigger="replace", pre_tokens=None,
                               reason="system prompt changed: the new one replaces the old",
                               source=loc)
            self.b.hide([self.system[0]], eid)
        self.b.message("system")
        self.system = (self.b.part("text", text, ts=ts, source=loc), text)
        self.log.used("system.message", line=line, parts=1)

    def user(self, line: int, d: Mapping[str, Any], ts: str | None) -> None:
        typed = d.get("content")
        typed = typed if isinstance(typed, str) else content_text(typed)
        shown = d.get("transformedContent")
        text = shown if isinstance(shown, str) and shown else typed
        atts = [a for a in d.get("attachments") or []]
        specs = [("attachment", a["content"] if isinstance(a.get("content"), str) else to_json(a),
                  a.get("path") if isinstance(a.get("path"), str) else None) for a in atts]
        meta = {k: d[k] for k in ("interactionId", "agentMode") if isinstance(d.get(k), str)}
        if text != typed:
            meta["content"] = typed
        loc = self.log.location(line=line)
        self.b.message("user", real_user=bool(typed.strip()) or bool(atts))
        n = 0
        if text:
            self.b.part("text", text, ts=ts, source=loc, meta=meta or None)
            n += 1
        for kind, content, fp in specs:
            self.b.part(kind, content, file_path=fp, ts=ts, source=loc)
            n += 1
        self.log.used("user.message", line=line, parts=n)

    def assistant(self, line: int, d: Mapping[str, Any], ts: str | None) -> None:
        specs: list[dict[str, Any]] = []
        if isinstance(d.get("reasoningText"), str) and d["reasoningText"]:
            opaque = d.get("reasoningOpaque")
            specs.append({"kind": "thinking", "content": d["reasoningText"],
                          "meta": {"reasoningOpaque_chars": len(opaque)
                                   if isinstance(opaque, str) else 0}})
        content = d.get("content")
        if content:
            text = content if isinstance(content, str) else content_text(content)
            specs.append({"kind": "text", "content": text})
        bad: list[str] = []
        for j, tr in enumerate(d.get("toolRequests") or []):
            # a request without its name or id is left out alone (the call and its other
            # requests are kept), and said so below
            if not isinstance(tr, Mapping) or tr.get("name") is None \
                    or tr.get("toolCallId") is None:
                bad.append(f"toolRequests[{j}]")
                if isinstance(tr, Mapping) and tr.get("toolCallId") is not None:
                    self.left_out[str(tr["toolCallId"])] = line   # its result goes too
                continue
            name, args = str(tr["name"]), tr.get("arguments") or {}
            extra = {k: tr[k] for k in ("intentionSummary", "toolTitle", "mcpServerName")
                     if isinstance(tr.get(k), str)}
            specs.append({"kind": "tool_call", "content": tool_call_text(name, args),
                          "tool_name": name, "tool_call_id": str(tr["toolCallId"]),
                          "file_path": file_path_from_args(args), "meta": extra or None})
        for where in bad:
            self.log.skipped("assistant.message", "a tool request without its name or "
                             "toolCallId: left out (the rest of the message is kept)",
                             line=line, where=f"line {line} {where}")
        loc = self.log.location(line=line)
        call_id = d.get("requestId") or d.get("messageId")
        self.last_call = self.b.call(call_id=str(call_id) if call_id else None, model=self.model,
                                     output_tokens=safe.count(d.get("outputTokens")), ts=ts,
                                     source=loc)
        self.b.message("assistant")
        ids = {k: d[k] for k in ("messageId", "interactionId") if isinstance(d.get(k), str)}
        for s in specs:
            if s["kind"] == "tool_call":
                self.tools[s["tool_call_id"]] = (s["tool_name"], s["file_path"])
            self.b.part(s["kind"], s["content"], tool_name=s.get("tool_name"),
                        tool_call_id=s.get("tool_call_id"), file_path=s.get("file_path"),
                        call=self.last_call, ts=ts, source=loc,
                        meta={**ids, **(s.get("meta") or {})} or None)
        self.log.used("assistant.message", line=line, parts=len(specs))

    def usage(self, line: int, d: Mapping[str, Any]) -> None:
        if self.last_call is None:
            self.log.ignored("assistant.usage", "usage before any assistant.message", line=line)
            return
        inp, cached = safe.count(d.get("inputTokens")), safe.count(d.get("cacheReadTokens"))
        written = safe.count(d.get("cacheWriteTokens"))
        fields = {"input_total": inp, "cache_read": cached, "cache_write": written,
                  "input_tokens": inp - (cached or 0) - (written or 0) if inp is not None
                  else None}
        out = safe.count(d.get("outputTokens"))
        if out is not None:
            fields["output_tokens"] = out
        if isinstance(d.get("model"), str):
            fields["model"] = d["model"]
        self.b.update_call(self.last_call, **fields)
        self.log.used("assistant.usage", line=line)

    def result(self, line: int, d: Mapping[str, Any], ts: str | None, loc: str) -> None:
        cid = str(d["toolCallId"])
        if cid not in self.tools and cid in self.left_out:
            self.log.skipped("tool.execution_complete", f"result of toolCallId {cid}, whose "
                             f"request (line {self.left_out[cid]}) was left out for having "
                             "no name: left out with it", line=line)
            return
        if cid not in self.tools:
            self.log.ignored("tool.execution_complete", f"result of toolCallId {cid}, which no "
                             "assistant.message requested: it cannot have been sent to the "
                             "model", line=line)
            return
        res = d.get("result") if isinstance(d.get("result"), Mapping) else {}
        content = res.get("content")
        if content is None:
            content = d.get("error") if d.get("error") is not None else ""
        text = content if isinstance(content, str) else content_text(content)
        meta = {"success": d.get("success"),
                "detailedContent_chars": len(to_json(res.get("detailedContent")))
                if "detailedContent" in res else None}
        name, fp = self.tools[cid]
        self.b.message("tool")
        self.b.part("tool_result", text, tool_name=name, tool_call_id=cid, file_path=fp, ts=ts,
                    source=loc, meta={k: v for k, v in meta.items() if v is not None} or None)
        self.log.used("tool.execution_complete", line=line, parts=1)


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load one Copilot CLI events file (see the module docstring for the mapping)."""
    path = Path(path)
    log = RecordLog(path, strict=options.strict)
    records = list(iter_jsonl(path, log))
    start = next((r["data"] for _, r in records if isinstance(r, dict)
                  and r.get("type") == "session.start" and isinstance(r.get("data"), dict)), {})
    session = start.get("sessionId") if isinstance(start.get("sessionId"), str) else path.stem
    ev = _Events(path, log, session)
    for line, rec in records:
        rtype = "unknown"
        try:
            if not isinstance(rec, dict):
                raise TypeError(f"line is a JSON {type(rec).__name__}, not an object")
            rtype = str(rec["type"])
            data = rec["data"]
            if not isinstance(data, Mapping):
                raise TypeError("data is not an object")
            ev.record(line, rtype, data, rec.get("timestamp"))
        except SHAPE_ERRORS as e:
            log.skipped(rtype, f"unexpected shape: {type(e).__name__}: {e}", line=line)
    if ev.model:
        ev.meta["model"] = ev.model
    return assemble([ev.b], log, ev.meta)


LOADER = register(Loader(name="copilot_cli", description="GitHub Copilot CLI session events JSONL",
                         sniff=sniff, load=load, priority=50))
