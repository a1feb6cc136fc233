"""SWE-agent trajectories (``*.traj``, 0.x and >= 1.0; FORMATS.md §5).

``history`` is the message list the agent kept; each element becomes one message:

* system -> role system. Demonstrations (``is_demo`` or ``message_type ==
  "demonstration"``) keep their role and meta ``is_demo``, with their tool calls and
  tool results as written (SWE-agent >= 1.0's ``put_demos_in_history`` sends them so);
  they are not turns and never calls (nobody generated them in this run).
* The first non-demo user message before any step is the task: a real user turn.
* An assistant message is one LLM call with NA usage (usage is only per run): a text
  part (thought + action, as sent) and, in >= 1.0 function calling, tool_call parts
  from ``tool_calls`` (``thinking_blocks`` become thinking parts).
* Observations: 0.x sends them as ``user`` messages. Decision: they are the output of
  the previous step's action, so role user, kind tool_result, tool_name = the action's
  command (first word of ``action``), file_path for ``open``/``create`` (also set on
  the assistant part that ran it); no tool_call_id (there is no tool call record).
  In >= 1.0 function calling they are ``role: "tool"`` with ``tool_call_ids``: role
  tool, linked to the call. SWE-agent sends only the first id (as ``tool_call_id``):
  further ids are reported as ignored.
* ``trajectory`` entries (action/observation/response/thought, and in >= 1.0 the
  per-step ``query``/``messages``) duplicate ``history``: reported as ignored. An
  observation that is in no history message (the last step's, ``submit``: the run ended,
  often ``info.submission``) was never sent: its report entry says so. Note:
  >= 1.0 history processors may have trimmed what was actually sent; the ``history``
  here is the untrimmed list.

``info.model_stats`` goes to ``Transcript.meta["run_usage"]``: ``tokens_sent`` is the sum
of the prompt totals of ``api_calls`` calls (no per-call counts exist).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders.builder import SessionBuilder, assemble, content_text
from ctxlab.loaders.message_lists import Message, Record, ToolIndex, emit_record, small_meta
from ctxlab.loaders.openai_messages import content_parts, tool_call_parts
from ctxlab.loaders.records import LoadOptions, RecordLog, read_json, to_json
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

FILE_COMMANDS = ("open", "create")
_HEAD = re.compile(r'^\s*\{\s*"(environment|trajectory)"\s*:')
_MSG_KEYS = frozenset({"role", "content", "tool_calls", "thinking_blocks", "tool_call_ids",
                       "thought", "action", "is_demo", "cache_control"})


def command_of(action: Any) -> tuple[str | None, str | None]:
    """The command name of a text action and the file it opens/creates, if any."""
    if not isinstance(action, str) or not action.strip():
        return None, None
    first = action.strip().split("\n", 1)[0]
    try:
        words = shlex.split(first)
    except ValueError:
        words = first.split()
    if not words:
        return None, None
    path = words[1] if words[0] in FILE_COMMANDS and len(words) > 1 else None
    return words[0], path


def _parts(content: Any, kind: str = "text", meta: dict[str, Any] | None = None,
           **fields: Any) -> list[dict[str, Any]]:
    """Parts of a history ``content`` (string or OpenAI content blocks, images kept)."""
    parts = content_parts(content, kind=kind) or [{"kind": kind, "content": ""}]
    for p in parts:
        p.update(fields)
        p["meta"] = {**(meta or {}), **(p.get("meta") or {})} or None
    return parts


class _State:
    def __init__(self) -> None:
        self.task_seen = False
        self.steps = 0
        self.command: tuple[str | None, str | None] = (None, None)
        self.tools = ToolIndex()


def parse(m: Any, st: _State, model: str | None) -> Message:
    """One history element as a `Message`."""
    role = m["role"]
    meta = small_meta(m, _MSG_KEYS)
    demo = bool(m.get("is_demo")) or m.get("message_type") == "demonstration"
    if demo:
        meta["is_demo"] = True
    if role == "system":
        return Message("system", _parts(m["content"], meta=meta))
    if demo:    # sent as written (put_demos_in_history): tool calls and results included
        if role == "assistant":
            calls = tool_call_parts(m.get("tool_calls"))
            for c in calls:
                c["meta"] = {**meta, **(c.get("meta") or {})}
            return Message(role, _parts(m["content"], meta=meta) + calls)
        if role == "tool":
            return _tool_result(m, st, meta)
        if role != "user":
            raise ValueError(f"unknown role {role!r} in a demonstration")
        return Message(role, _parts(m["content"], meta=meta))
    if role == "assistant":
        name, path = command_of(m.get("action"))
        parts: list[dict[str, Any]] = [
            {"kind": "thinking", "content": str(tb.get("thinking", tb.get("data", "")))
             if isinstance(tb, Mapping) else str(tb)} for tb in m.get("thinking_blocks") or []]
        parts += _parts(m["content"], meta={**meta, **({"command": name} if name else {})},
                        file_path=path)
        parts += tool_call_parts(m.get("tool_calls"))
        return Message("assistant", parts, call={"model": model})
    if role == "user" and not st.task_seen and st.steps == 0:
        return Message("user", _parts(m["content"], meta=meta), real_user=True)
    if role == "user":
        name, path = st.command
        return Message("user", _parts(m["content"], "tool_result", meta, tool_name=name,
                                      file_path=path))
    if role == "tool":
        return _tool_result(m, st, meta)
    raise ValueError(f"unknown role {role!r}")


def _tool_result(m: Any, st: _State, meta: dict[str, Any]) -> Message:
    """A ``tool`` message: the result of the tool call it names."""
    ids = m.get("tool_call_ids")
    call_id = ids if isinstance(ids, str) else (ids or [m.get("tool_call_id")])[0]
    name, path = st.tools.lookup(call_id)
    return Message("tool", _parts(m["content"], "tool_result", meta, tool_name=name,
                                  file_path=path, tool_call_id=str(call_id) if call_id else None))


def _model_name(doc: Mapping[str, Any]) -> str | None:
    """The model name from a >= 1.0 ``replay_config`` (a JSON string), when present."""
    rc = doc.get("replay_config")
    try:
        rc = json.loads(rc) if isinstance(rc, str) else rc
        name = rc["agent"]["model"]["name"]
    except (ValueError, TypeError, KeyError):
        return None
    return name if isinstance(name, str) else None


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load a SWE-agent ``.traj`` file."""
    log = RecordLog(path, strict=options.strict)
    doc = read_json(path, log)
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        raise log.error("no 'history' list: not a SWE-agent trajectory")
    model = _model_name(doc)
    b = SessionBuilder(path.name.removesuffix(".traj"), log)
    st = _State()
    for k, m in enumerate(doc["history"]):
        rec = Record(m, None, f"history[{k}]", log.location(where=f"history[{k}]"))
        role = m.get("role") if isinstance(m, dict) and isinstance(m.get("role"), str) \
            else "message"
        msg = emit_record(b, log, rec, role, lambda v: parse(v, st, model), st.tools)
        if msg is None:
            continue
        ids = m.get("tool_call_ids") if msg.role == "tool" else None
        if isinstance(ids, list) and len(ids) > 1:
            log.ignored("tool", f"tool_call_ids holds {len(ids)} ids: SWE-agent sends the "
                        f"first as the message's tool_call_id, not {to_json(ids[1:])[:80]}",
                        where=f"{rec.where} tool_call_ids[1:]")
        demo = any((p.get("meta") or {}).get("is_demo") for p in msg.parts)
        if msg.real_user:
            st.task_seen = True
        elif msg.call is not None and not demo:
            st.steps += 1
            st.command = command_of(m.get("action"))
    traj = doc.get("trajectory")
    sent = "\n".join(content_text(m.get("content")) for m in doc["history"]
                     if isinstance(m, dict))
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    for i, step in enumerate(traj if isinstance(traj, list) else []):
        obs = step.get("observation") if isinstance(step, dict) else None
        if isinstance(obs, str) and obs.strip() and obs.strip() not in sent:
            # the last step's (submit) output: the run ended, history never got it
            what = " (info.submission)" if obs == info.get("submission") else ""
            why = "the run ended with this step, " if i == len(traj) - 1 else ""
            log.ignored("trajectory-step", f"its observation{what}, {len(obs)} chars, is in "
                        f"no history message: {why}it was not sent to the model; its "
                        "action/response/thought duplicate history", where=f"trajectory[{i}]")
        else:
            log.ignored("trajectory-step", "duplicates history (action/observation/response/"
                        "thought of one step)", where=f"trajectory[{i}]")
    if traj is not None and not isinstance(traj, list):
        log.ignored("trajectory", f"a {type(traj).__name__}, not a list of steps (history "
                    f"holds what the model saw)", where="trajectory")
    if doc.get("info", {}) is None:
        log.ignored("info", "null: the run recorded no usage, exit status or submission",
                    where="info")
    elif "info" in doc and not isinstance(doc["info"], dict):
        log.skipped("info", f"a {type(doc['info']).__name__}, not an object: no run usage, "
                    f"exit status or submission", where="info")
    elif "info" in doc:
        log.used("info", where="info")
        if info.get("model_stats") is not None and not isinstance(info["model_stats"], dict):
            log.skipped("info.model_stats", f"a {type(info['model_stats']).__name__}, not an "
                        f"object: no run usage", where="info.model_stats")
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else None
    sub = info.get("submission")
    meta = {"format": "swe_agent", "path": str(path), "model": model,
            "environment": doc.get("environment") if isinstance(doc.get("environment"), str)
            else None, "exit_status": info.get("exit_status"), "run_usage": stats,
            "submission_chars": len(sub) if isinstance(sub, str) else None,
            "version": info.get("swe_agent_version") or (">=1.0" if "replay_config" in doc or any(
                isinstance(m, dict) and "message_type" in m for m in doc["history"]) else "0.x")}
    return assemble([b], log, {k: v for k, v in meta.items() if v is not None})


def sniff(path: Path, head: str) -> bool:
    """``*.traj`` holding a JSON object, or a head starting with SWE-agent's keys."""
    s = head.lstrip()
    if not s.startswith("{") or path.name.endswith(".traj.json"):
        return False
    if path.name.endswith(".traj"):
        return True
    return bool(_HEAD.match(s) and re.search(r'"(history|trajectory)"\s*:\s*\[', s)
                and re.search(r'"(action|observation|thought)"\s*:', s))


LOADER = register(Loader(name="swe_agent", description="SWE-agent trajectories (*.traj)",
                         sniff=sniff, load=load, priority=50))
