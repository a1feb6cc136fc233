"""OpenAI Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Every line is ``{"timestamp", "type", "payload"}``. What the model saw:

* ``session_meta``: transcript metadata. Its ``base_instructions.text`` (newer CLIs) and
  ``instructions`` are sent as the request's instructions, so each becomes a system
  text part at the start (``instructions`` is skipped when a ``<user_instructions>``
  message already carries the same text; either of another shape than a text is
  reported). The base prompt and tool schemas of older CLIs are not recorded.
* ``response_item``: the Responses API input history, one message per item.
  ``message``: user ``input_text``/``input_image`` -> text/image parts; assistant
  ``output_text`` -> text; role ``developer`` (instructions the harness adds, which the
  Responses API treats as system-level) -> role ``system``. The first user items such as
  ``<environment_context>`` and ``<user_instructions>`` are injected context, not user
  turns. ``reasoning`` -> one thinking part (summary texts, then its ``content`` items: a
  text, or an item of another shape as JSON; the unreadable ``encrypted_content`` is sent
  back but only its length is kept in ``meta``).
  ``function_call``/``custom_tool_call``/``local_shell_call``/``web_search_call`` ->
  tool_call parts; ``function_call_output``/``custom_tool_call_output`` -> role tool
  results, linked by ``call_id``. ``ghost_snapshot`` (git undo) is never sent.
* ``event_msg`` ``token_count``: one LLM call per distinct
  ``total_token_usage.total_tokens`` (cli 0.60.1 writes each twice; the 0.39.0 file here
  writes each once). ``last_token_usage.input_tokens`` -> input_total,
  ``cached_input_tokens`` -> cache_read, the rest -> input_tokens; output and reasoning
  tokens as reported; model from the latest ``turn_context``. In both versions the
  (first) token_count of a call precedes the call's own output items, so the call's
  input is every response item before it (``input_end_pos`` = next part then) and the
  assistant items after it, up to the next token_count, are its output. codex records
  each tool call of a response followed by its output (call A, output A, call B, output
  B), so items after a tool output with no token_count between stay in the same call;
  assistant items after a user message with no token_count since get a call with NA
  usage (as do outputs after a lost line that may have been their token_count).
* ``compacted``: a recorded compaction event (trigger ``auto`` unless recorded;
  ``pre_tokens`` = ``last_token_usage.total_tokens`` of the preceding token_count, the
  context size then). It hides the history before it (not the instructions) and
  inserts ``replacement_history`` (when given) and the summary (kind summary). Older
  CLIs rebuilt the history from the initial context and recent user messages; without
  ``replacement_history`` that part is not reconstructed. A server-side compaction
  writes an empty message and a replacement history holding a ``compaction`` item (also
  ``compaction_summary``): a summary part whose content the log does not have (its
  ``encrypted_content`` length is in meta). A replacement item it cannot read is left
  out alone, with a report entry; a ``ghost_snapshot`` there is never sent (reported as
  ignored, as in the history); a compaction item outside a ``compacted`` record is left
  out with a report entry.
* Other ``event_msg`` lines are UI events (``user_message``/``agent_message``/
  ``agent_reasoning`` duplicate response items) and are reported as ignored.
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
from ctxlab.schema import Transcript

RECORD_TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
INJECTED_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
                     "<INSTRUCTIONS>", "<user_shell_command>", "<turn_aborted>")
UI_DUPLICATES = frozenset({"user_message", "agent_message", "agent_reasoning",
                           "agent_reasoning_raw_content", "agent_reasoning_section_break"})
UI_REASONS = {
    "turn_aborted": "UI event: turn aborted (interrupted items, if any, are response items)",
    "context_compacted": "UI event: the compaction itself is the `compacted` record",
    "patch_apply_end": "UI event: tool execution detail; the model sees the *_output item",
    "exec_command_end": "UI event: tool execution detail; the model sees the *_output item",
}
ROLES = {"user": "user", "assistant": "assistant", "developer": "system", "system": "system"}
TOOL_CALLS = {"function_call": "arguments", "custom_tool_call": "input",
              "local_shell_call": "action", "web_search_call": "action"}
TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")
COMPACTION_ITEMS = ("compaction", "compaction_summary")
_TYPE_RE = re.compile(r'"type"\s*:\s*"(session_meta|response_item|event_msg|turn_context)"')
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)


class Unknown(Exception):
    """A record or item type this loader does not know."""


def sniff(path: Path, head: str) -> bool:
    """A rollout line is ``{"timestamp", "type": <rollout type>, "payload": {...}}``."""
    return '"payload"' in head and _TYPE_RE.search(head) is not None


def _patch_file(patch: Any) -> str | None:
    m = _PATCH_FILE.search(patch) if isinstance(patch, str) else None
    return m.group(1).strip() if m else None


def parse_item(item: Mapping[str, Any]) -> tuple[str, bool, bool, list[dict[str, Any]]] | None:
    """One response item -> (role, real_user, is_model_output, part specs); None = not sent.

    Raises:
        Unknown: an item type this loader does not know.
    """
    t = item["type"]
    if t == "ghost_snapshot":
        return None
    if t in COMPACTION_ITEMS:       # a server-side compaction's summary: opaque to us
        enc = item.get("encrypted_content")
        return "user", False, False, [{
            "kind": "summary", "content": item["summary"] if isinstance(item.get("summary"),
                                                                        str) else "",
            "meta": {"type": t, "encrypted_content_chars": len(enc) if isinstance(enc, str)
                     else 0}}]
    if t == "message":
        role = ROLES[item["role"]]
        specs: list[dict[str, Any]] = []
        for block in item["content"]:
            bt = block["type"]
            if bt == "input_image":
                specs.append({"kind": "image", "content": str(block.get("image_url") or "")})
            elif isinstance(block.get("text"), str):
                specs.append({"kind": "text", "content": block["text"],
                              "meta": {"type": bt} if bt not in ("input_text", "output_text")
                              else None})
            else:
                specs.append({"kind": "text", "content": to_json(block), "meta": {"type": bt}})
        first = next((s["content"] for s in specs if s["kind"] == "text"), "")
        real = role == "user" and not first.lstrip().startswith(INJECTED_PREFIXES)
        meta = {"role": "developer"} if item["role"] == "developer" else None
        for s in specs:
            s["meta"] = {**(s.get("meta") or {}), **(meta or {})} or None
        return role, real, role == "assistant", specs
    if t == "reasoning":
        texts = [s["text"] for s in item.get("summary") or []]
        texts += [c["text"] if isinstance(c.get("text"), str) else to_json(c)
                  for c in item.get("content") or []]
        enc = item.get("encrypted_content")
        meta = {"encrypted_content_chars": len(enc) if isinstance(enc, str) else 0,
                "summary_items": len(item.get("summary") or [])}
        return "assistant", False, True, [{"kind": "thinking", "content": "\n\n".join(texts),
                                           "meta": meta}]
    if t in TOOL_CALLS:
        name = str(item.get("name") or t.removesuffix("_call"))
        args = item.get(TOOL_CALLS[t])
        args = {} if args is None else args
        fp = _patch_file(args) if t == "custom_tool_call" else file_path_from_args(args)
        meta = {k: item[k] for k in ("id", "status") if isinstance(item.get(k), str)}
        return "assistant", False, True, [{
            "kind": "tool_call", "content": tool_call_text(name, args), "tool_name": name,
            "tool_call_id": item.get("call_id") or item.get("id"), "file_path": fp,
            "meta": meta or None}]
    if t in TOOL_OUTPUTS:
        out = item["output"]
        text = out if isinstance(out, str) else content_text(out)
        return "tool", False, False, [{"kind": "tool_result", "role": "tool", "content": text,
                                       "tool_call_id": item["call_id"]}]
    raise Unknown(f"unknown response_item type {t!r}")


class _Rollout:
    """Loader state while walking the lines of one rollout."""

    def __init__(self, path: Path, log: RecordLog, records: list[tuple[int, Any]]) -> None:
        self.log = log
        self.records = records
        meta0 = next((r["payload"] for _, r in records if isinstance(r, dict)
                      and r.get("type") == "session_meta" and isinstance(r.get("payload"), dict)),
                      {})
        session = meta0.get("id") if isinstance(meta0.get("id"), str) else path.stem
        self.b = SessionBuilder(session, log)
        self.meta: dict[str, Any] = {"format": "codex", "path": str(path), "session_id": session}
        self.user_instructions = [
            content_text(r["payload"].get("content")) for _, r in records
            if isinstance(r, dict) and r.get("type") == "response_item"
            and isinstance(r.get("payload"), dict) and r["payload"].get("type") == "message"
            and "<user_instructions>" in str(r["payload"].get("content"))]
        self.seen_meta = False
        self.model: str | None = None
        self.models: list[str] = []
        self.call: int | None = None
        self.call_implicit = False
        # a line was lost (unreadable, or of an unexpected shape) since the last call began,
        # and the last item was model input: see `item` and `event_msg`
        self.lost = False
        self.after_input = False
        self.uncounted: int | None = None     # a call whose token_count may have been lost
        self.last_total: int | None = None
        self.last_raw_total: Any = None
        self.last_usage: Mapping[str, Any] | None = None
        self.tools: dict[str, tuple[str | None, str | None]] = {}
        self.history: list[int] = []

    # ---- dispatch ---------------------------------------------------------------------
    def run(self) -> None:
        unread = self.log.skipped_lines()      # lines that did not parse as JSON
        j = 0
        for line, rec in self.records:
            while j < len(unread) and unread[j] < line:
                self.lost, j = True, j + 1
            rtype = "unknown"
            try:
                if not isinstance(rec, dict):
                    raise TypeError(f"line is a JSON {type(rec).__name__}, not an object")
                rtype = str(rec.get("type"))
                payload = rec["payload"]
                if rtype in ("response_item", "event_msg"):
                    rtype = f"{rtype}:{payload['type']}"
                self.record(line, rec, rtype, payload)
            except Unknown as e:
                self.log.skipped(rtype, str(e), line=line)
            except SHAPE_ERRORS as e:
                safe.refused_counts()   # counts read from the skipped line: not the next call's
                self.lost = True
                self.log.skipped(rtype, f"unexpected shape: {type(e).__name__}: {e}", line=line)

    def record(self, line: int, rec: Mapping[str, Any], rtype: str, payload: Any) -> None:
        ts = rec.get("timestamp")     # the builder reads it (and reports one it cannot)
        kind = rtype.split(":", 1)[0]
        if kind == "response_item":
            self.item(line, payload, ts, rtype)
        elif kind == "event_msg":
            self.event_msg(line, payload, ts, rtype)
        elif kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str):
                self.model = model
                if model not in self.models:
                    self.models.append(model)
            self.log.used(rtype, line=line)
        elif kind == "session_meta":
            self.session_meta(line, payload, ts)
        elif kind == "compacted":
            self.compacted(line, payload, ts)
        else:
            raise Unknown(f"unknown record type {rtype!r}; known: {', '.join(RECORD_TYPES)}")

    # ---- records ----------------------------------------------------------------------
    def session_meta(self, line: int, p: Mapping[str, Any], ts: str | None) -> None:
        if self.seen_meta:
            self.log.ignored("session_meta", "repeated session_meta (resumed or forked "
                             "session): the first one is used", line=line)
            return
        texts: list[tuple[str, str]] = []
        raw = p.get("base_instructions")
        base = raw.get("text") if isinstance(raw, Mapping) else raw
        odd = raw if isinstance(raw, Mapping) and raw and "text" not in raw else base
        for key, value in (("base_instructions", odd), ("instructions", p.get("instructions"))):
            if value is not None and not isinstance(value, str):
                self.log.skipped("session_meta", f"{key} is {to_json(value)[:60]}, not a text: "
                                 "no instructions part from it", line=line,
                                 where=f"line {line} {key}")
        if isinstance(base, str) and base:
            texts.append(("base_instructions", base))
        instr = p.get("instructions")
        if isinstance(instr, str) and instr.strip():
            if any(instr.strip() in u for u in self.user_instructions):
                self.meta["instructions_in_history"] = True
            else:
                texts.append(("instructions", instr))
        self.seen_meta = True
        for key in ("cli_version", "originator", "cwd", "model_provider", "source", "timestamp"):
            if isinstance(p.get(key), (str, int)):
                self.meta["session_start" if key == "timestamp" else key] = p[key]
        if isinstance(p.get("git"), Mapping):
            self.meta["git"] = dict(p["git"])
        loc = self.log.location(line=line)
        for key, text in texts:
            self.b.message("system")
            self.b.part("text", text, ts=ts, source=loc, meta={"from": f"session_meta.{key}"})
        self.log.used("session_meta", line=line, parts=len(texts))

    def item(self, line: int, payload: Mapping[str, Any], ts: str | None, rtype: str) -> None:
        if payload.get("type") in COMPACTION_ITEMS:
            self.log.skipped(rtype, "a compaction item outside a `compacted` record: which "
                             "history it replaced is unknown, so it is left out", line=line)
            return
        parsed = parse_item(payload)
        if parsed is None:
            self.log.ignored(rtype, "git undo snapshot: never sent to the model", line=line)
            return
        role, real, is_output, specs = parsed
        call = None
        if is_output:
            # outputs after model input, with a line lost in between that may have been
            # their call's token_count, start a call of their own (usage unknown until a
            # later token_count proves to be that call's, see `event_msg`) rather than
            # joining the previous call
            if self.call is None or (self.lost and self.after_input):
                self.call = self.b.call(model=self.model, ts=ts,
                                        source=self.log.location(line=line))
                # its token_count may be among the lost lines (a later copy can claim it)
                self.uncounted = self.call if self.lost else None
                self.call_implicit, self.lost = True, False
            call = self.call
        elif role == "tool":
            if self.call_implicit:
                self.call = None
        else:
            self.call = None
        n, _ = self.emit(role, real, specs, ts=ts, source=self.log.location(line=line),
                         call=call)
        self.after_input = not is_output
        self.log.used(rtype, line=line, parts=n)

    def emit(self, role: str, real: bool, specs: list[dict[str, Any]], *, ts: str | None,
             source: str, call: int | None = None, event: int | None = None,
             summary: str | None = None) -> tuple[int, bool]:
        """Add one message; returns (parts made, whether a part containing ``summary``
        was marked as the summary)."""
        self.b.message(role, real_user=real)
        found = False
        for s in specs:
            kind = s["kind"]
            tool_name, file_path = s.get("tool_name"), s.get("file_path")
            cid = s.get("tool_call_id")
            if kind == "tool_call" and cid:
                self.tools[str(cid)] = (tool_name, file_path)
            elif kind == "tool_result":
                tool_name, file_path = self.tools.get(str(cid), (None, None))
            if summary and kind == "text" and summary.strip() in s["content"]:
                kind, found = "summary", True
            pid = self.b.part(kind, s["content"], role=s.get("role"), tool_name=tool_name,
                              tool_call_id=None if cid is None else str(cid),
                              file_path=file_path, call=call, ts=ts, source=source,
                              meta=s.get("meta"), event=event)
            self.history.append(pid)
        return len(specs), found

    def event_msg(self, line: int, p: Mapping[str, Any], ts: str | None, rtype: str) -> None:
        sub = p["type"]
        if sub != "token_count":
            reason = ("UI event: duplicates response items" if sub in UI_DUPLICATES else
                      UI_REASONS.get(sub, f"UI event ({sub}): not model input"))
            self.log.ignored(rtype, reason, line=line)
            return
        info = p.get("info")
        if info is None:
            self.log.ignored(rtype, "no usage yet: info is null before the first response",
                             line=line)
            return
        raw = info["total_token_usage"]["total_tokens"]
        total = safe.count(raw)
        # (compared as recorded: a total no count column holds is still the same copy)
        if raw is not None and not isinstance(raw, bool) and raw == self.last_raw_total:
            safe.refused_counts()       # the first copy's call reported them already
            self.log.ignored(rtype, "second copy of the previous token_count (same "
                             "total_token_usage.total_tokens)", line=line)
            return
        last = info["last_token_usage"]
        inp, cached = safe.count(last["input_tokens"]), safe.count(last.get("cached_input_tokens"))
        usage = dict(model=self.model, input_total=inp, cache_read=cached,
                     input_tokens=inp - (cached or 0) if inp is not None else None,
                     output_tokens=safe.count(last.get("output_tokens")),
                     reasoning_tokens=safe.count(last.get("reasoning_output_tokens")))
        own = safe.count(last.get("total_tokens"))
        if self.uncounted is not None and total is not None and own is not None \
                and total - (self.last_total or 0) == own:
            # the usage right after the last counted call's: that of the call whose outputs
            # came without a token_count (its first copy was lost), not of a new call
            self.b.update_call(self.uncounted, **usage)
        else:
            self.call = self.b.call(**usage, ts=ts, source=self.log.location(line=line))
            # the outputs that follow are this call's, whatever is lost before them
            self.call_implicit, self.lost, self.after_input = False, False, False
        self.uncounted = None
        self.last_total, self.last_usage, self.last_raw_total = total, last, raw
        self.log.used(rtype, line=line)

    def compacted(self, line: int, p: Mapping[str, Any], ts: str | None) -> None:
        message = p.get("message")
        message = message if isinstance(message, str) else content_text(message)
        repl = p.get("replacement_history")
        items = []
        for i, it in enumerate(repl if isinstance(repl, list) else []):
            try:        # one item it cannot read is left out alone: the compaction stays
                items.append(parse_item(it))
                if items[-1] is None:
                    self.log.ignored("compacted", "git undo snapshot in the replacement "
                                     "history: never sent to the model", line=line,
                                     where=f"line {line} replacement_history[{i}]")
            except Unknown as e:
                self.log.skipped("compacted", f"{e}: left out of the replacement history",
                                 line=line, where=f"line {line} replacement_history[{i}]")
            except SHAPE_ERRORS as e:
                self.log.skipped("compacted", f"unexpected shape: {type(e).__name__}: {e}: "
                                 "left out of the replacement history", line=line,
                                 where=f"line {line} replacement_history[{i}]")
        trigger = p.get("trigger") if isinstance(p.get("trigger"), str) else "auto"
        pre = safe.count(self.last_usage.get("total_tokens")) if self.last_usage else None
        extra = {k: v for k, v in p.items() if k not in ("message", "replacement_history")
                 and isinstance(v, (str, int, float, bool))}
        loc = self.log.location(line=line)
        eid = self.b.event(trigger=trigger, pre_tokens=pre, source=loc,
                           reason="codex compaction: history replaced by a summary",
                           meta={"summary_chars": len(message),
                                 "replacement_items": len(repl) if isinstance(repl, list) else None,
                                 **extra})
        self.b.hide(self.history, eid)
        self.history = []
        n, found = 0, False
        for parsed in items:
            if parsed is None:
                continue
            role, _, _, specs = parsed
            made, marked = self.emit(role, False, specs, ts=ts, source=loc, event=eid,
                                     summary=message if role == "user" and message else None)
            n, found = n + made, found or marked
        if message and not found:
            n += self.emit("user", False, [{"kind": "summary", "content": message}],
                           ts=ts, source=loc, event=eid)[0]
        self.call, self.call_implicit = None, False
        self.log.used("compacted", line=line, parts=n)


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load one Codex CLI rollout file (see the module docstring for the mapping)."""
    path = Path(path)
    log = RecordLog(path, strict=options.strict)
    records = list(iter_jsonl(path, log))
    r = _Rollout(path, log, records)
    r.run()
    if r.model:
        r.meta["model"] = r.model
    if len(r.models) > 1:
        r.meta["models"] = r.models
    return assemble([r.b], log, r.meta)


LOADER = register(Loader(name="codex", description="OpenAI Codex CLI rollout JSONL",
                         sniff=sniff, load=load, priority=50))
