"""OpenHands V0 event-stream trajectories (a JSON list of events).

What the model saw is rebuilt the way OpenHands' ``ConversationMemory`` builds it:

* user ``message`` actions are user text (a real turn); agent ``message`` actions are
  assistant text;
* an agent action carrying ``tool_call_metadata`` came from one LLM response
  (``model_response``, the raw LiteLLM object). The first action of a response emits
  the call and its output parts: the response's text (``choices[0].message.content``)
  then one ``tool_call`` part per ``tool_calls[]`` entry. Later actions of the same
  response (and the copy of the response on each observation) are deduplicated by
  ``model_response.id``. ``finish``/``think`` are tool calls like any other;
* an observation answering a tool call becomes a ``tool`` / ``tool_result`` part linked by
  ``tool_call_id``. Its content is the text OpenHands renders for the model, not always
  the stored ``content``: ``run`` observations add the shell metadata
  (``to_agent_observation``: prefix + content + suffix + working dir / interpreter /
  exit code lines), ``edit`` observations from the ACI editor send
  ``extras.formatted_output_and_error`` (the stored ``content`` is a diff the model never
  saw), ``error`` observations get "[Error occurred in processing last action]".
  Verified on the real files: after an ACI edit the next call's ``prompt_tokens`` grows by
  25 tokens (previous input + output + the one-line message), not by the ~1000-token diff;
* usage (LiteLLM, Anthropic): ``prompt_tokens`` INCLUDES cache reads and writes. On the
  real files ``cache_read`` of call k+1 equals ``cache_read + cache_write`` of call k and
  ``prompt_tokens - cache_read - cache_write`` is 4..6 tokens each call, so
  ``input_total = prompt_tokens`` and ``input_tokens`` is the uncached remainder;
* ``condensation`` actions (from OpenHands' condensers; not in the real files) hide the
  parts made from the forgotten events and insert the summary (kind ``summary``, role
  user, as ``AgentCondensationObservation``) at ``summary_offset`` within the kept history
  (the agent's history: recall events count, agent-state and null events do not; an offset
  that is no whole number is reported and counts as none); only the
  newest summary is shown, so an older summary is hidden by the newer event; an event
  with no summary sits before the next call's input end, so that call no longer sees
  what it forgot;
* a ``system`` action (newer OpenHands) gives the system prompt and tool schemas; older
  logs such as the real files do not record them (``meta.prompt_recorded`` is false).

UI/state events (``change_agent_state``, ``agent_state_changed``, ``null``, ``recall``,
``condensation_request``...) are reported as ignored with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders.builder import (SessionBuilder, assemble, content_text, file_path_from_args,
                                    tool_call_text)
from ctxlab.loaders.records import SHAPE_ERRORS, LoadOptions, RecordLog, as_int, read_json, to_json
from ctxlab.loaders.safe import count
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

NAME = "openhands"

IGNORED_ACTIONS = {
    "change_agent_state": "agent state change (UI/controller bookkeeping)",
    "null": "null action (no model input)",
    "pause": "controller command", "resume": "controller command", "stop": "controller command",
    "recall": "memory look-up request; its result is a separate observation",
    "condensation_request": "request for a condensation; the condensation itself is recorded",
}
IGNORED_OBSERVATIONS = {
    "agent_state_changed": "agent state change (UI/controller bookkeeping)",
    "null": "null observation (no model input)",
    "recall": "workspace/microagent context rendered through OpenHands prompt templates that "
              "the log does not record",
}
# what never enters the agent's history (OpenHands' controller filters these events out),
# the list that a condensation's summary_offset indexes; recall events do enter it
NOT_IN_HISTORY = {"action": {"change_agent_state", "null", "pause", "resume", "stop",
                             "condensation", "condensation_request"},
                  "observation": {"agent_state_changed", "null"}}
# action args that are bookkeeping, not the call's arguments
BOOKKEEPING_ARGS = {"thought", "impl_source", "translated_ipython_code", "confirmation_state",
                    "security_risk", "hidden", "blocking", "is_input", "wait_for_response"}
_B64_IMAGE = re.compile(r".*!\[image\]\(data:image/png;base64,.*")


def usage_fields(usage: Any) -> dict[str, int | None]:
    """Call columns from a LiteLLM ``usage`` object (prompt_tokens includes cached tokens)."""
    if not isinstance(usage, Mapping):
        return {}
    total = count(usage.get("prompt_tokens"))
    read = count(usage.get("cache_read_input_tokens"))
    if read is None and isinstance(usage.get("prompt_tokens_details"), Mapping):
        read = count(usage["prompt_tokens_details"].get("cached_tokens"))
    write = count(usage.get("cache_creation_input_tokens"))
    details = usage.get("completion_tokens_details")
    reasoning = count(details.get("reasoning_tokens")) if isinstance(details, Mapping) else None
    return {"input_total": total,
            "input_tokens": None if total is None else total - (read or 0) - (write or 0),
            "cache_read": read, "cache_write": write,
            "output_tokens": count(usage.get("completion_tokens")),
            "reasoning_tokens": reasoning}


def observation_text(ev: Mapping[str, Any]) -> tuple[str, str]:
    """The text OpenHands sends for an observation, and how it was rendered."""
    kind = ev.get("observation")
    content = ev.get("content") if isinstance(ev.get("content"), str) else content_text(
        ev.get("content"))
    extras = ev.get("extras") if isinstance(ev.get("extras"), Mapping) else {}
    if kind == "run" and isinstance(extras.get("metadata"), Mapping):
        md = extras["metadata"]
        text = f"{md.get('prefix') or ''}{content}{md.get('suffix') or ''}"
        if md.get("working_dir"):
            text += f"\n[Current working directory: {md['working_dir']}]"
        if md.get("py_interpreter_path"):
            text += f"\n[Python interpreter: {md['py_interpreter_path']}]"
        if md.get("exit_code") not in (None, -1):
            text += f"\n[Command finished with exit code {md['exit_code']}]"
        return text, "to_agent_observation"
    if (kind == "edit" and extras.get("impl_source") == "oh_aci"
            and isinstance(extras.get("formatted_output_and_error"), str)):
        return extras["formatted_output_and_error"], "formatted_output_and_error"
    if kind == "error":
        return content + "\n[Error occurred in processing last action]", "error"
    if kind == "user_rejected":
        return ("OBSERVATION:\n" + content + "\n[Last action has been rejected by the user]",
                "user_rejected")
    if kind == "run_ipython":
        lines = ["![image](data:image/png;base64, ...) already displayed to user"
                 if _B64_IMAGE.match(line) else line for line in content.split("\n")]
        return "\n".join(lines), "run_ipython"
    return content, "content"


def _event_id(ev: Mapping[str, Any]) -> Any:
    """An event's ``id``: a number, a text or absent. Anything else (a list, an object) could
    not key the parts a condensation forgets: the record is refused before any of it is used."""
    eid = ev.get("id")
    if eid is not None and (isinstance(eid, bool) or not isinstance(eid, (int, float, str))):
        raise TypeError(f"id is a {type(eid).__name__}, not a number or a text")
    return eid


class _Stream:
    """State of one event stream while it is turned into parts."""

    def __init__(self, b: SessionBuilder, log: RecordLog) -> None:
        self.b = b
        self.log = log
        self.responses: dict[str, int] = {}          # model_response.id -> call index
        self.tool_calls: dict[str, tuple[str, str | None]] = {}  # id -> (name, file_path)
        self.event_parts: dict[Any, list[int]] = {}  # event id -> part ids
        self.history: list[Any] = []                 # event ids in the model's history
        self.pos: dict[int, float] = {}
        self.hidden: set[int] = set()
        self.summary_part: int | None = None
        self.models: set[str] = set()
        self.prompt_recorded = False

    def add(self, kind: str, content: str, eid: Any, **kw: Any) -> int:
        pid = self.b.part(kind, content, **kw)
        self.pos[pid] = float(pid)
        self.event_parts.setdefault(eid, []).append(pid)
        return pid

    # ---- model responses -----------------------------------------------------------
    def response(self, mr: Mapping[str, Any], eid: Any, ts: str | None, src: str) -> None:
        """Declare the call of a LiteLLM response and add its output parts."""
        message = mr["choices"][0]["message"]
        calls = [(str(tc["function"]["name"]), tc["function"].get("arguments"), str(tc["id"]))
                 for tc in message.get("tool_calls") or []]
        model = mr.get("model")
        if isinstance(model, str):
            self.models.add(model)
        call = self.b.call(call_id=str(mr["id"]), model=model, ts=ts, source=src,
                           **usage_fields(mr.get("usage")))
        self.responses[str(mr["id"])] = call
        self.b.message("assistant")
        meta = {"response_id": mr["id"], "event_id": eid}
        for attr in ("reasoning_content", "thinking"):
            if isinstance(message.get(attr), str) and message[attr].strip():
                self.add("thinking", message[attr], eid, call=call, ts=ts, source=src, meta=meta)
        text = content_text(message.get("content"))
        if text.strip():
            self.add("text", text, eid, call=call, ts=ts, source=src, meta=meta)
        for name, args, tcid in calls:
            fp = file_path_from_args(args)
            self.add("tool_call", tool_call_text(name, args if args is not None else {}), eid,
                     tool_name=name, tool_call_id=tcid, file_path=fp, call=call, ts=ts,
                     source=src, meta=meta)
            self.tool_calls[tcid] = (name, fp)

    def action_call(self, ev: Mapping[str, Any], eid: Any, ts: str | None, src: str,
                    tool_call_id: str, name: str, call: int | None) -> None:
        """A tool-call part made from the action itself (no usable model_response)."""
        args = {k: v for k, v in (ev.get("args") or {}).items() if k not in BOOKKEEPING_ARGS}
        fp = file_path_from_args(args)
        self.add("tool_call", tool_call_text(name, args), eid, tool_name=name,
                 tool_call_id=tool_call_id, file_path=fp, call=call, ts=ts, source=src,
                 meta={"event_id": eid, "from": "action args"})
        self.tool_calls[tool_call_id] = (name, fp)

    # ---- events ----------------------------------------------------------------------
    def action(self, ev: Mapping[str, Any], where: str) -> None:
        action, eid, ts = ev["action"], _event_id(ev), ev.get("timestamp")
        src = self.log.location(where=where)
        b, args = self.b, ev.get("args") or {}
        if not isinstance(args, Mapping):   # before anything is added: the whole record goes
            raise TypeError(f"args is a {type(args).__name__}, not an object")
        if action in ("condensation", "condensation_request"):
            if action == "condensation":
                self.condensation(ev, where)
            else:
                self.log.ignored(f"action:{action}", IGNORED_ACTIONS[action], where=where)
            return
        if action not in NOT_IN_HISTORY["action"]:
            self.history.append(eid)
        if action in IGNORED_ACTIONS:
            self.log.ignored(f"action:{action}", IGNORED_ACTIONS[action], where=where)
            return
        start = b.n_parts
        source, tcm = ev.get("source"), ev.get("tool_call_metadata")
        if action == "system":
            self.system(args, eid, ts, src)
        elif source == "user" and tcm is None:
            self.user_action(action, args, eid, ts, src)
        elif isinstance(tcm, Mapping):
            mr = tcm.get("model_response")
            rid = str(mr["id"]) if isinstance(mr, Mapping) and mr.get("id") is not None else None
            tcid = str(tcm.get("tool_call_id") or f"event-{eid}")
            if rid is not None and rid not in self.responses:
                self.response(mr, eid, ts, src)
            if rid is not None:
                call = self.responses[rid]
            else:
                call = b.call(ts=ts, source=src)
                b.message("assistant")
                if str(args.get("thought") or "").strip():
                    self.add("text", str(args["thought"]), eid, call=call, ts=ts, source=src)
            if action != "message" and tcid not in self.tool_calls:
                self.action_call(ev, eid, ts, src, tcid, str(tcm.get("function_name") or action),
                                 call)
        elif source == "agent":
            call = b.call(ts=ts, source=src)
            b.message("assistant")
            text = args.get("content") if action == "message" else args.get("thought")
            if action == "message" or str(text or "").strip():
                self.add("text", content_text(text), eid, call=call, ts=ts, source=src,
                         meta={"event_id": eid})
            if action != "message":
                self.action_call(ev, eid, ts, src, f"event-{eid}", action, call)
        else:
            self.log.skipped(f"action:{action}", f"action from source {source!r} without "
                             f"tool_call_metadata is not a known model input", where=where)
            return
        self.log.used(f"action:{action}", where=where, parts=b.n_parts - start)

    def user_action(self, action: str, args: Mapping[str, Any], eid: Any, ts: str | None,
                    src: str) -> None:
        """A user message (a real turn) or another user-initiated action."""
        urls = args.get("image_urls") or []
        urls = [urls] if isinstance(urls, str) else list(urls)     # one URL, not its letters
        self.b.message("user", real_user=action == "message")
        meta = {"event_id": eid}
        if action == "message":
            self.add("text", content_text(args.get("content")), eid, ts=ts, source=src, meta=meta)
            for url in urls:
                self.add("image", str(url), eid, ts=ts, source=src, meta=meta)
        elif action == "run":
            self.add("text", f"User executed the command:\n{args['command']}", eid, ts=ts,
                     source=src, meta=meta)
        else:
            self.add("text", tool_call_text(action, dict(args)), eid, ts=ts, source=src,
                     meta={**meta, "user_action": action})

    def observation(self, ev: Mapping[str, Any], where: str) -> None:
        kind, eid, ts = ev["observation"], _event_id(ev), ev.get("timestamp")
        src = self.log.location(where=where)
        if kind not in NOT_IN_HISTORY["observation"]:
            self.history.append(eid)
        if kind in IGNORED_OBSERVATIONS:
            self.log.ignored(f"observation:{kind}", IGNORED_OBSERVATIONS[kind], where=where)
            return
        text, rendered = observation_text(ev)
        meta: dict[str, Any] = {"event_id": eid, "cause": ev.get("cause"), "rendered": rendered}
        if rendered != "content" and isinstance(ev.get("content"), str):
            meta["stored_content_chars"] = len(ev["content"])
        if ev.get("success") is not None:
            meta["success"] = ev.get("success")
        tcm = ev.get("tool_call_metadata")
        start = self.b.n_parts
        tcid: str | None = None
        if isinstance(tcm, Mapping):
            mr = tcm.get("model_response")
            if (isinstance(mr, Mapping) and mr.get("id") is not None
                    and str(mr["id"]) not in self.responses):
                self.response(mr, eid, ts, src)   # the action itself is missing
            tcid = str(tcm.get("tool_call_id") or "") or None
        elif ev.get("cause") is not None and f"event-{ev['cause']}" in self.tool_calls:
            tcid = f"event-{ev['cause']}"
        if tcid is not None:
            name, fp = self.tool_calls.get(tcid, (str((tcm or {}).get("function_name") or kind),
                                                  None))
            self.b.message("tool")
            self.add("tool_result", text, eid, tool_name=name, tool_call_id=tcid, file_path=fp,
                     ts=ts, source=src, meta=meta)
        else:
            if kind == "run":
                text = f"\nObserved result of command executed by user:\n{text}"
            self.b.message("user")
            self.add("text", text, eid, ts=ts, source=src, meta=meta)
        self.log.used(f"observation:{kind}", where=where, parts=self.b.n_parts - start)

    def system(self, args: Mapping[str, Any], eid: Any, ts: str | None, src: str) -> None:
        """System prompt and tool schemas (``SystemMessageAction``, newer OpenHands)."""
        tools = [t.get("function", t) for t in args.get("tools") or []]
        for fn in tools:
            if not isinstance(fn, Mapping):
                raise TypeError(f"a tool is a {type(fn).__name__}, not an object")
        self.b.message("system")
        self.prompt_recorded = True
        if content_text(args.get("content")):
            self.add("text", content_text(args.get("content")), eid, ts=ts, source=src)
        for fn in tools:
            schema = {"name": fn.get("name"), "description": fn.get("description"),
                      "parameters": fn.get("parameters")}
            self.add("tool_schema", to_json(schema), eid, tool_name=fn.get("name"), ts=ts,
                     source=src)

    def _between_calls(self) -> float:
        """Where an event that inserts no part goes: after every part and every call's input
        end so far, before the next call's (which ends at the next position). A call whose
        input ends there already (its response added no part) ends it just after the last
        part instead: the same parts, room for the event after it."""
        b = self.b
        nxt = b.next_pos
        floor = max(b.positions(), default=-1.0)
        lo = floor
        for idx, end in enumerate(b.input_ends()):
            if end >= nxt:
                end = floor + (nxt - floor) / 3
                b.update_call(idx, input_end_pos=end)
            lo = max(lo, end)
        return lo + (nxt - lo) / 2

    def condensation(self, ev: Mapping[str, Any], where: str) -> None:
        args = ev.get("args") or {}
        ids = args.get("forgotten_event_ids")
        if ids is None and args.get("forgotten_events_start_id") is not None:
            lo, hi = int(args["forgotten_events_start_id"]), int(args["forgotten_events_end_id"])
            ids = [e for e in {*self.event_parts, *self.history}
                   if isinstance(e, int) and lo <= e <= hi]
        forgotten = set(ids or [])
        # numbers in order, then texts (ids are numbers or texts, `_event_id`)
        forgotten_ids = sorted(forgotten, key=lambda e: (1, e, 0) if isinstance(e, str)
                               else (0, "", e))
        summary, offset = args.get("summary"), as_int(args.get("summary_offset"))
        if offset is None and args.get("summary_offset") is not None:
            self.log.skipped("action:condensation", f"summary_offset "
                             f"{args['summary_offset']!r:.40} is not a whole number: read as "
                             "none (the summary is not shown)", where=f"{where} summary_offset")
        b = self.b
        inserts = summary is not None and offset is not None
        ev_id = b.event(trigger="auto", pre_tokens=None, source=self.log.location(where=where),
                        pos=None if inserts else self._between_calls(),
                        reason=f"OpenHands condensation: {len(forgotten)} event(s) forgotten"
                               + (", summary inserted" if inserts else
                                  ", summary not shown (no summary_offset)" if summary else ""),
                        meta={"event_id": ev.get("id"), "forgotten_event_ids": forgotten_ids,
                              "summary_offset": offset})
        to_hide = [p for e in forgotten for p in self.event_parts.get(e, [])]
        # OpenHands shows the summary of the latest condensation that has one and an
        # offset: a summary without an offset is never shown and replaces nothing
        if inserts and self.summary_part is not None:
            to_hide.append(self.summary_part)
        to_hide = sorted(p for p in set(to_hide) if p not in self.hidden)
        b.hide(to_hide, ev_id)
        self.hidden.update(to_hide)
        self.history = [e for e in self.history if e not in forgotten]
        n = 0
        if inserts:
            def first(es: list[Any], last: bool) -> float | None:
                ps = [self.pos[p] for e in es for p in self.event_parts.get(e, [])
                      if p not in self.hidden]
                return (max(ps) if last else min(ps)) if ps else None
            before = first(self.history[:offset], True)
            after = first(self.history[offset:], False)
            after = b.next_pos if after is None else after
            if before is not None:
                taken = [p for p in b.positions() if before < p < after]
                pos = (before + min(taken, default=after)) / 2
            else:
                taken = [p for p in b.positions() if p < after]
                pos = (max(taken) + after) / 2 if taken and max(taken) >= after - 0.5 \
                    else after - 0.5
            b.message("user")
            pid = b.part("summary", content_text(summary), ts=ev.get("timestamp"),
                         event=ev_id, source=self.log.location(where=where),
                         meta={"event_id": ev.get("id"), "summary_offset": offset}, pos=pos)
            self.pos[pid] = pos
            self.summary_part = pid
            n = 1
        self.log.used("action:condensation", where=where, parts=n)


def sniff(path: Path, head: str) -> bool:
    """A JSON list (or ``{"trajectory": [...]}``) of events with source and action/observation."""
    h = head.lstrip()
    if not (h.startswith("[") or (h.startswith("{") and '"trajectory"' in h[:200])):
        return False
    return (re.search(r'"source"\s*:\s*"(agent|user|environment)"', h) is not None
            and re.search(r'"(action|observation)"\s*:\s*"', h) is not None)


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load one OpenHands trajectory file (one session named after the file stem)."""
    path = Path(path)
    log = RecordLog(path, strict=options.strict)
    doc = read_json(path, log)
    prefix = ""
    if isinstance(doc, Mapping) and isinstance(doc.get("trajectory"), list):
        doc, prefix = doc["trajectory"], "trajectory"
    if not isinstance(doc, list):
        raise log.error("not an OpenHands trajectory: expected a JSON list of events")
    b = SessionBuilder(path.stem, log)
    st = _Stream(b, log)
    for i, ev in enumerate(doc):
        where = f"{prefix}[{i}]"
        kind = "event"
        try:
            if not isinstance(ev, Mapping):
                raise TypeError(f"event is a {type(ev).__name__}, not an object")
            if "action" in ev:
                kind = f"action:{ev['action']}"
                st.action(ev, where)
            elif "observation" in ev:
                kind = f"observation:{ev['observation']}"
                st.observation(ev, where)
            else:
                log.skipped("event", "neither 'action' nor 'observation'", where=where)
        except SHAPE_ERRORS as e:
            log.skipped(kind, f"unexpected shape: {type(e).__name__}: {e}", where=where)
    meta: dict[str, Any] = {"format": NAME, "path": str(path),
                            "prompt_recorded": st.prompt_recorded}
    if st.models:
        meta["model"] = sorted(st.models)[0] if len(st.models) == 1 else sorted(st.models)
    return assemble([b], log, meta)


LOADER = register(Loader(name=NAME, description="OpenHands V0 event-stream trajectory (JSON list "
                         "of actions and observations)", sniff=sniff, load=load, priority=50))
