"""mini-swe-agent trajectories (``*.traj.json``, ``mini-swe-agent-1`` and ``-1.1``).

``messages`` is exactly the OpenAI chat list that was sent (FORMATS.md §4): system,
the task (user), then assistant steps and the environment's replies.

* Assistant message k is one LLM call whose input is ``messages[0:k]``; its usage is
  ``extra.response.usage``: prompt_tokens -> input_total, cached_tokens -> cache_read,
  input_tokens = prompt - cached, completion_tokens -> output_tokens,
  reasoning_tokens. In ``mini-swe-agent-1`` the model's reasoning exists only in
  ``extra.response.choices[0].message.reasoning``: the message sent back holds just
  role and content, so no later call saw it and it is *not* a part (its size is in the
  part's meta, ``reasoning_chars``). A 1.1 message that carries ``reasoning`` at its top
  level was sent back (only ``extra`` is stripped) and becomes a thinking part.
* The first user message is the task (a real user turn). A later user message that
  starts like the action_observation_template (``<returncode>``, ``<exception>``) or
  the timeout_template (``The last command <command>``) is the output of the step's
  bash command: role user, kind tool_result, tool_name ``bash``, no call id (the action
  is parsed from the assistant's text; there is no tool call record). Other later user
  messages (format errors) are role user, kind text, not a turn.
  In 1.1 files, tool-calling models write ``tool_calls`` and ``role: "tool"``
  messages: they are read like OpenAI messages.
* Messages after the last assistant message were never sent (the run ended): the
  submission (1) or an ``exit`` message (1.1). Decision: a *user/tool* message there
  stays a part (it is the last step's output, and the conversation is incomplete
  without it) with meta ``{"sent": false, "note": "never sent to the model (after the
  last call)"}``, hidden right after it by an event with origin ``not_resent`` (a history
  edit, not a compaction): no call includes it, and neither does the final context
  (``Transcript.effective``), which it would otherwise dominate (the submission is often
  a large diff). A 1.1 ``role:"exit"``
  message is not a chat message at all: reported as ignored.
* ``info`` (exit_status, model_stats, config with the templates, mini_version, model
  name) goes to ``Transcript.meta``; the submission by size only (it is also the last
  message).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from ctxlab.loaders.builder import SessionBuilder, assemble
from ctxlab.loaders.message_lists import Message, Record, ToolIndex, emit_record
from ctxlab.loaders.openai_messages import content_parts, openai_usage, parse_message
from ctxlab.loaders.records import LoadOptions, RecordLog, read_json
from ctxlab.loaders.safe import timestamp
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

NEVER_SENT = "never sent to the model (after the last call)"
_OBSERVATION = re.compile(r"\s*(<returncode>|<exception>|The last command <command>)")
_HEAD = re.compile(r'"trajectory_format"\s*:\s*"mini-swe-agent|"mini_version"\s*:')


def _response(m: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = m.get("extra")
    resp = extra.get("response") if isinstance(extra, Mapping) else None
    return resp if isinstance(resp, Mapping) else {}


def _reasoning_chars(resp: Mapping[str, Any]) -> int | None:
    choices = resp.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        msg = choices[0].get("message")
        if isinstance(msg, Mapping) and isinstance(msg.get("reasoning"), str):
            return len(msg["reasoning"])
    return None


def parse(m: Any, *, task_seen: bool, after_last_call: bool, tools: ToolIndex,
          model: str | None) -> Message | None:
    """One trajectory message as a `Message`."""
    role = m["role"]
    if role == "assistant":
        # usage read here from extra.response (once: parse_message would read it too)
        msg = parse_message({key: v for key, v in m.items() if key not in ("usage", "extra")},
                            tools, model=model)
        resp = _response(m)
        usage = openai_usage(resp.get("usage"))
        extra = m.get("extra") if isinstance(m.get("extra"), Mapping) else {}    # never sent
        created, noted = resp.get("created"), extra.get("timestamp")
        # the response's time, else the one noted beside it (a bad one given alone is
        # the builder's to report)
        ts = created if timestamp(created) is not None or noted is None else noted
        rid = resp.get("id")
        msg.call = {**usage, "model": resp.get("model") if isinstance(resp.get("model"), str)
                    else model, "call_id": rid if isinstance(rid, str) else None, "ts": ts}
        usage_raw = resp.get("usage") if isinstance(resp.get("usage"), Mapping) else {}
        info = {k: v for k, v in (("provider", resp.get("provider")),
                                  ("reasoning_chars", _reasoning_chars(resp)),
                                  ("cost", usage_raw.get("cost"))) if v is not None}
        for p in msg.parts:
            p["meta"] = {**(p.get("meta") or {}), **info} or None
        return msg
    if role == "user" and not task_seen:
        msg = Message("user", content_parts(m["content"]), real_user=True)
    elif role == "user":
        parts = content_parts(m["content"])
        if after_last_call or (parts and _OBSERVATION.match(parts[0]["content"])):
            for p in parts:
                if p["kind"] == "text":
                    p.update(kind="tool_result", tool_name="bash")
        msg = Message("user", parts)
    elif role in ("system", "tool"):
        msg = parse_message(m, tools, model=model)
    else:
        raise ValueError(f"unknown role {role!r}")
    if after_last_call:
        for p in msg.parts:
            p["meta"] = {**(p.get("meta") or {}), "sent": False, "note": NEVER_SENT}
    return msg


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load a mini-swe-agent ``.traj.json`` file."""
    log = RecordLog(path, strict=options.strict)
    doc = read_json(path, log)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise log.error("no 'messages' list: not a mini-swe-agent trajectory")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    mconf = config.get("model") if isinstance(config.get("model"), dict) else {}
    model = mconf.get("model_name") if isinstance(mconf.get("model_name"), str) else None
    session = doc.get("instance_id") if isinstance(doc.get("instance_id"), str) else \
        path.name.removesuffix(".json").removesuffix(".traj")
    messages = doc["messages"]
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    last_call = max((k for k, r in enumerate(roles) if r == "assistant"), default=None)
    b = SessionBuilder(session, log)
    tools = ToolIndex()
    task_seen = False
    for k, m in enumerate(messages):
        rec = Record(m, None, f"messages[{k}]", log.location(where=f"messages[{k}]"))
        role = roles[k] if isinstance(roles[k], str) else "message"
        if role == "exit":
            log.ignored("exit", "run exit marker, not a chat message: never sent to the model "
                        "(exit_status/submission are in meta)", where=rec.where)
            continue
        after = last_call is not None and k > last_call
        first = b.n_parts
        msg = emit_record(b, log, rec, role,
                          lambda v: parse(v, task_seen=task_seen, after_last_call=after,
                                          tools=tools, model=model), tools)
        if msg is not None and role == "user":
            task_seen = True
        if after and b.n_parts > first:
            b.not_resent(range(first, b.n_parts), NEVER_SENT, source=rec.source,
                         meta={"message": rec.where})
    if "info" in doc:
        log.used("info", where="info")
    submission = info.get("submission")
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    meta = {"format": "mini_swe_agent", "path": str(path),
            "trajectory_format": doc.get("trajectory_format"),
            "mini_version": info.get("mini_version"), "model": model,
            "exit_status": info.get("exit_status"), "model_stats": stats,
            "api_calls": stats.get("api_calls"),
            "submission_chars": len(submission) if isinstance(submission, str) else None,
            "instance_id": doc.get("instance_id"), "config": config}
    return assemble([b], log, {k: v for k, v in meta.items() if v is not None})


def sniff(path: Path, head: str) -> bool:
    """``*.traj.json`` holding a JSON object, or a head naming the mini-swe-agent format."""
    if not head.lstrip().startswith("{"):
        return False
    return path.name.endswith(".traj.json") or bool(_HEAD.search(head))


LOADER = register(Loader(name="mini_swe_agent",
                         description="mini-swe-agent trajectories (*.traj.json)",
                         sniff=sniff, load=load, priority=50))
