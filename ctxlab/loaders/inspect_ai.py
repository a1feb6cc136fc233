"""Inspect AI eval logs: ``.json`` and ``.eval`` (a zip of ``header.json`` + ``samples/*.json``).

One session per sample, named ``f"{sample_id}:{epoch}"``. Parts come from the sample's
final conversation (``sample.messages``); every ``"attachment://<hash>"`` string, anywhere,
is resolved through ``sample.attachments``. The tool schemas of the first ``model`` event
open the session (role system, kind ``tool_schema``, content = JSON of
``{name, description, parameters}``); when a later call sends other tools, the call indices
are listed in ``Transcript.meta["tools_changed"]``.

Each ``model`` event is one call. Its input is the exact message list ``event.input``:
the loader matches those message ids to ``sample.messages`` and sets ``input_end_pos`` to
the start of the first message the call did not see; the call's output message (matched
by id) carries ``call=k`` and its first part's meta holds ``input_messages`` (the length of
``event.input``). A model event whose output is not in the conversation but whose input is
is still a call of the sample's session, with no output parts. A model event that sees none
of the conversation's messages (a model-graded scorer's or a sub-agent's call: the messages
have ids and none of its input's matches) is a session of its own, ``<sample>/call-<j>``
(``j`` its event index): its input messages, its tools, then its output, so its usage is
paired with what it was sent.

Usage: Inspect's ``input_tokens`` follows the provider. For OpenAI it is
``prompt_tokens``, which INCLUDES cached tokens (checked on the real log: per call
``input_tokens == call.response.usage.prompt_tokens`` and ``total_tokens == input + output``
while ``input_tokens_cache_read`` grows 0, 1024, 1536, 2688, 3840; the per-call sums equal
``stats.model_usage``: 15235 input, 9088 cache read). For Anthropic it is the uncached
part and ``total_tokens`` adds the cache reads and writes. The loader decides per call:
when ``total_tokens == input + output + cache_read + cache_write`` (with some cache) the
input is exclusive, else inclusive; ``input_total`` is every input token either way.

Events other than ``model`` (sample_init, state, store, step, span_*, tool, sandbox, score,
logger, ...) are not model input: each gets an "ignored" entry with its event type.

An ``attachment://<hash>`` whose hash ``sample.attachments`` does not hold (a pruned or
damaged log) stays as that text in the part, and the load report says so at the message
(or the tools of the model event) that refers to it: the part is shorter than what the
model was sent.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping

from ctxlab.loaders.builder import SessionBuilder, assemble, file_path_from_args, tool_call_text
from ctxlab.loaders.records import (SHAPE_ERRORS, LoadOptions, RecordLog, parse_json, read_json,
                                    to_json)
from ctxlab.loaders.safe import count
from ctxlab.loaders.registry import Loader, register
from ctxlab.schema import Transcript

NAME = "inspect_ai"
ATTACHMENT = "attachment://"
EVENT_REASONS = {
    "sample_init": "sample set-up; its input is the first messages of sample.messages",
    "state": "task-state change; the messages it records are in sample.messages",
    "store": "store change (solver/tool state)",
    "step": "solver step boundary", "span_begin": "span boundary", "span_end": "span boundary",
    "tool": "tool execution; its result is the tool message in sample.messages",
    "sandbox": "sandbox command run by a tool", "score": "scoring, after the conversation",
    "logger": "log message", "info": "informational event", "error": "sample error",
    "input": "console input", "approval": "tool-call approval",
    "subtask": "subtask bookkeeping", "sample_limit": "limit reached",
    "compaction": "Inspect's own compaction of the messages it sends: the model events "
                  "after it say what was sent (see the load report's entries for them)",
}


def _input_differs(sent: list[Any], conversation: list[Any]) -> str:
    """Why a call's recorded input is not the conversation's messages before it."""
    sent_ids, said = set(sent), set(conversation)
    gone = sum(1 for i in conversation if i is not None and i not in sent_ids)
    extra = sum(1 for i in sent if i is None or i not in said)
    return (f"the call was sent {len(sent)} messages, not the {len(conversation)} of the "
            f"conversation before it ({gone} of those left out, {extra} others: Inspect "
            f"compacted or injected messages); its input here is the conversation's, so "
            f"request sizes may differ from what was sent")


def resolve(value: Any, attachments: Mapping[str, str], missing: list[str] | None = None) -> Any:
    """``value`` with every ``attachment://<hash>`` string replaced by the attachment text;
    a hash ``attachments`` lacks stays as the reference, and is added to ``missing``.

    Example:
        >>> gone: list[str] = []
        >>> resolve(["attachment://a", "attachment://b"], {"a": "text"}, gone), gone
        (['text', 'attachment://b'], ['b'])
    """
    if isinstance(value, str):
        if value.startswith(ATTACHMENT):
            key = value[len(ATTACHMENT):]
            if key in attachments:
                return attachments[key]
            if missing is not None:
                missing.append(key)
        return value
    if isinstance(value, list):
        return [resolve(v, attachments, missing) for v in value]
    if isinstance(value, Mapping):
        return {k: resolve(v, attachments, missing) for k, v in value.items()}
    return value


def usage_fields(usage: Any) -> dict[str, int | None]:
    """Call columns from an Inspect ``ModelUsage`` (see the module doc for inclusivity)."""
    if not isinstance(usage, Mapping):
        return {}
    inp, out = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    read, write = count(usage.get("input_tokens_cache_read")), count(
        usage.get("input_tokens_cache_write"))
    total = count(usage.get("total_tokens"))
    cached = (read or 0) + (write or 0)
    fields: dict[str, int | None] = {"cache_read": read, "cache_write": write,
                                     "output_tokens": out,
                                     "reasoning_tokens": count(usage.get("reasoning_tokens"))}
    if inp is None:
        return fields
    exclusive = cached > 0 and total is not None and total == inp + (out or 0) + cached
    fields["input_total"] = inp + cached if exclusive else inp
    fields["input_tokens"] = inp if exclusive else inp - cached
    return fields


def tool_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """``{name, description, parameters}`` of an Inspect ToolInfo (or OpenAI-style tool)."""
    fn = tool.get("function", tool)
    return {"name": fn["name"], "description": fn.get("description"),
            "parameters": fn.get("parameters")}


def _output_id(ev: Mapping[str, Any]) -> Any:
    """The id of a model event's output message (None when it has none)."""
    choices = (ev.get("output") or {}).get("choices") or []
    return choices[0].get("message", {}).get("id") if choices else None


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if content is None:
        return []
    if not isinstance(content, list):   # (an object would give its keys as texts)
        raise TypeError(f"content is a {type(content).__name__}, not a text or a list")
    return [b if isinstance(b, Mapping) else {"type": "text", "text": str(b)} for b in content]


class _Sample:
    """Turns one sample into a session."""

    def __init__(self, sample: Mapping[str, Any], prefix: str, log: RecordLog) -> None:
        self.sample, self.prefix, self.log = sample, prefix, log
        self.att = sample.get("attachments") or {}
        sid = f"{sample['id']}:{sample.get('epoch', 1)}"
        self.b = SessionBuilder(sid, log)
        self.tools: dict[str, tuple[str, str | None]] = {}
        self.tools_changed: list[int] = []
        self.apart: list[SessionBuilder] = []     # calls that saw none of the conversation
        self.unresolved: dict[int, list[str]] = {}  # model event -> attachments not held

    def where(self, what: str) -> str:
        return f"{self.prefix}.{what}" if not self.prefix.endswith(".json") else \
            f"{self.prefix}#{what}"

    def model_events(self, events: list[Any]) -> list[tuple[int, Mapping[str, Any]]]:
        """``(index, resolved event)`` of the model events that have an input and output."""
        out = []
        for j, ev in enumerate(events):
            if isinstance(ev, Mapping) and ev.get("event") == "model" and \
                    isinstance(ev.get("input"), list) and isinstance(ev.get("output"), Mapping):
                missing: list[str] = []
                out.append((j, resolve(ev, self.att, missing)))
                if missing:
                    self.unresolved[j] = missing
        return out

    def report_unresolved(self, missing: list[str], where: str) -> None:
        """Say which ``attachment://`` references of a record (``where``) stayed as they
        are, their text not being in the sample's attachments."""
        for key in dict.fromkeys(missing):
            self.log.skipped("attachment", f"attachment://{key[:80]} is not in the sample's "
                             "attachments: the reference is kept in place of its text, so "
                             "the part is shorter than what the model was sent",
                             where=f"{where} attachment://{key[:60]}")

    def build(self) -> SessionBuilder:
        b, log = self.b, self.log
        messages = self.sample["messages"]
        events = self.sample.get("events") or []
        if not isinstance(messages, list) or not isinstance(events, list):
            raise TypeError("sample.messages and sample.events must be lists")
        ids = [m.get("id") if isinstance(m, Mapping) else None for m in messages]
        index = {m_id: i for i, m_id in enumerate(ids) if m_id is not None}
        every = self.model_events(events)
        models, apart = [], []
        for j, ev in every:
            in_ids = [m.get("id") for m in ev.get("input") or [] if isinstance(m, Mapping)]
            known = [i for i in in_ids if i is not None]
            out_id = _output_id(ev)
            (apart if index and known and not any(i in index for i in known)
             and out_id not in index else models).append((j, ev))
        # which message each call produced, and how many messages it saw
        out_of: dict[int, int] = {}
        seen: list[int] = []
        for k, (_, ev) in enumerate(models):
            out_id = _output_id(ev)
            if out_id in index and index[out_id] not in out_of:
                out_of[index[out_id]] = k
            in_ids = [m.get("id") for m in ev.get("input") or [] if isinstance(m, Mapping)]
            hits = [index[i] for i in in_ids if i in index]
            seen.append(max(hits) + 1 if hits else min(len(ev.get("input") or []), len(ids)))
        # tool schemas of the first call open the session
        n_schema = 0
        if models:
            first = [to_json(tool_schema(t)) for t in models[0][1].get("tools") or []]
            if first:
                b.message("system")
            for text, tool in zip(first, models[0][1].get("tools") or []):
                b.part("tool_schema", text, tool_name=tool_schema(tool)["name"],
                       source=log.location(where=self.where(f"events[{models[0][0]}].tools")))
                n_schema += 1
            for k, (_, ev) in enumerate(models[1:], start=1):
                if [to_json(tool_schema(t)) for t in ev.get("tools") or []] != first:
                    self.tools_changed.append(k)
        starts: list[float] = []
        for i, m in enumerate(messages):
            starts.append(b.next_pos)
            w = self.where(f"messages[{i}]")
            try:
                k = out_of.get(i)
                extra = {"input_messages": len(models[k][1].get("input") or [])} \
                    if k is not None else None
                missing: list[str] = []
                n = self.message(resolve(m, self.att, missing), k, w, extra)
                log.used(f"message:{m.get('role')}", where=w, parts=n)
                self.report_unresolved(missing, w)
            except SHAPE_ERRORS as e:
                log.skipped("message", f"unexpected shape: {type(e).__name__}: {e}", where=w)
        starts.append(b.next_pos)
        for k, (j, ev) in enumerate(models):
            sent = [m.get("id") if isinstance(m, Mapping) else None
                    for m in ev.get("input") or []]
            if sent != ids[:min(seen[k], len(ids))]:
                log.skipped("event:model.input", _input_differs(sent, ids[:seen[k]]),
                            where=self.where(f"events[{j}].input"))
            out = ev.get("output") or {}
            resp = (ev.get("call") or {}).get("response") if isinstance(ev.get("call"),
                                                                        Mapping) else None
            call_id = resp.get("id") if isinstance(resp, Mapping) else None
            # the provider's response id, else the event's (an id that is no text: none)
            call_id = call_id if isinstance(call_id, str) and call_id else ev.get("uuid")
            b.call(call_id=call_id if isinstance(call_id, str) else None,
                   model=out.get("model") or ev.get("model"),
                   ts=ev.get("timestamp"), input_end_pos=starts[min(seen[k], len(ids))],
                   source=log.location(where=self.where(f"events[{j}]")),
                   **usage_fields(out.get("usage")))
        first_model = models[0][0] if models else None
        made = {j: self.call_apart(j, ev) for j, ev in apart}
        for j, ev in enumerate(events):
            w = self.where(f"events[{j}]")
            kind = ev.get("event") if isinstance(ev, Mapping) else None
            if kind == "model" and j in made:
                log.used("event:model", where=w, parts=made[j])
                self.report_unresolved(self.unresolved.get(j, []), w)   # its parts' own
            elif kind == "model" and any(j == mj for mj, _ in models):
                log.used("event:model", where=w, parts=n_schema if j == first_model else 0)
                if j == first_model and n_schema:       # its tools are the schema parts
                    missing = []
                    resolve(events[j].get("tools"), self.att, missing)
                    self.report_unresolved(missing, f"{w}.tools")
            elif kind == "model" or not isinstance(kind, str):
                log.skipped(f"event:{kind}", "model event without input/output" if kind
                            else "event without an 'event' type", where=w)
            else:
                log.ignored(f"event:{kind}", EVENT_REASONS.get(kind, "not model input"), where=w)
        return b

    def call_apart(self, j: int, ev: Mapping[str, Any]) -> int:
        """A call that saw none of the conversation, as a session of its own: its tools, its
        input messages, then its output; returns the parts made."""
        main = self.b
        self.b = b = SessionBuilder(f"{main.session}/call-{j}", self.log)
        try:
            tools = ev.get("tools") or []
            if tools:
                b.message("system")
            for tool in tools:
                b.part("tool_schema", to_json(tool_schema(tool)),
                       tool_name=tool_schema(tool)["name"],
                       source=self.log.location(where=self.where(f"events[{j}].tools")))
            for i, m in enumerate(ev.get("input") or []):
                self.guarded(m, None, self.where(f"events[{j}].input[{i}]"))
            out = ev.get("output") or {}
            b.call(model=out.get("model") or ev.get("model"), ts=ev.get("timestamp"),
                   source=self.log.location(where=self.where(f"events[{j}]")),
                   **usage_fields(out.get("usage")))
            choices = out.get("choices") or []
            if choices and isinstance(choices[0].get("message"), Mapping):
                self.guarded(choices[0]["message"], 0, self.where(f"events[{j}].output"))
        finally:
            self.b = main
        self.apart.append(b)
        return b.n_parts

    def guarded(self, m: Any, call: int | None, where: str) -> None:
        """`message` for a message of a call apart: one of an unexpected shape is skipped
        (reported), not the sample."""
        try:
            self.message(resolve(m, self.att), call, where, None)
        except SHAPE_ERRORS as e:
            self.log.skipped("message", f"unexpected shape: {type(e).__name__}: {e}",
                             where=where)

    def message(self, m: Mapping[str, Any], call: int | None, where: str,
                extra: Mapping[str, Any] | None) -> int:
        """Add one message's parts; returns how many."""
        b = self.b
        role = m["role"]
        calls = [(str(tc["function"]), tc.get("arguments", {}), str(tc["id"]))
                 for tc in m.get("tool_calls") or []] if role == "assistant" else []
        blocks = _blocks(m.get("content"))
        err = m.get("error") if role == "tool" else None
        if isinstance(err, Mapping):
            blocks = [{"type": "text", "text": f"Error: {err.get('message')}"}]
        b.message(role, real_user=role == "user")
        src = self.log.location(where=where)
        meta: dict[str, Any] = {k: m[k] for k in ("id", "source", "model") if m.get(k)}
        if err:
            meta["is_error"] = True
        if extra:
            meta.update(extra)
        link: dict[str, Any] = {}
        if role == "tool":
            tcid = str(m.get("tool_call_id")) if m.get("tool_call_id") is not None else None
            name, fp = self.tools.get(tcid or "", (m.get("function"), None))
            link = {"tool_name": m.get("function") or name, "tool_call_id": tcid, "file_path": fp}
            if not blocks:
                blocks = [{"type": "text", "text": ""}]
        elif not blocks and not calls:
            blocks = [{"type": "text", "text": ""}]
        start = b.n_parts
        for blk in blocks:
            kind, text = self._block(blk, role)
            pmeta = dict(meta)
            if kind == "thinking":
                pmeta.update({k: blk[k] for k in ("signature", "redacted") if blk.get(k)})
            b.part(kind, text, call=call, source=src, meta=pmeta,
                   **(link if kind in ("tool_result", "image") else {}))
            meta = {"id": m.get("id")} if m.get("id") else {}
        for name, args, tcid in calls:
            fp = file_path_from_args(args)
            b.part("tool_call", tool_call_text(name, args), tool_name=name, tool_call_id=tcid,
                   file_path=fp, call=call, source=src, meta=meta or None)
            self.tools[tcid] = (name, fp)
            meta = {}
        return b.n_parts - start

    @staticmethod
    def _block(blk: Mapping[str, Any], role: str) -> tuple[str, str]:
        t = blk.get("type")
        if t == "text":
            return ("tool_result" if role == "tool" else "text"), str(blk.get("text", ""))
        if t == "reasoning":
            return "thinking", str(blk.get("reasoning", ""))
        if t == "image":
            return "image", str(blk.get("image", ""))
        if t in ("audio", "video", "document", "data"):
            return "attachment", to_json(dict(blk))
        return ("tool_result" if role == "tool" else "text"), to_json(dict(blk))


def _eval_samples(path: Path, log: RecordLog) -> tuple[dict[str, Any], Iterator[tuple[str, Any]]]:
    """Header and ``(member name, sample)`` pairs of an ``.eval`` zip."""
    try:
        z = zipfile.ZipFile(path)
        names = z.namelist()
        header = parse_json(z.read("header.json")) if "header.json" in names else {}
        order = {}
        if "summaries.json" in names:
            for i, s in enumerate(parse_json(z.read("summaries.json"))):
                order[f"samples/{s['id']}_epoch_{s['epoch']}.json"] = i
    except (zipfile.BadZipFile, OSError, KeyError, TypeError, ValueError, zlib.error,
            RecursionError) as e:
        raise log.error(f"not a readable .eval archive: {type(e).__name__}: {e}") from None
    if not isinstance(header, Mapping):
        raise log.error(f"not a readable .eval archive: header.json is a JSON "
                        f"{type(header).__name__}, not an object")
    members = sorted((n for n in names if n.startswith("samples/") and n.endswith(".json")),
                     key=lambda n: (order.get(n, len(order)), n))

    def gen() -> Iterator[tuple[str, Any]]:
        with z:
            for n in members:
                try:
                    raw = z.read(n)
                    yield n, parse_json(raw)
                except (zipfile.BadZipFile, OSError, ValueError, zlib.error, RecursionError) as e:
                    yield n, ValueError(f"{type(e).__name__}: {e}") if isinstance(
                        e, RecursionError) else e
    return header, gen()


def sniff(path: Path, head: str) -> bool:
    """``.eval`` zips, or a JSON object whose head shows an Inspect ``eval`` spec."""
    if path.suffix == ".eval":
        return head.startswith("PK")
    h = head.lstrip()
    return h.startswith("{") and '"eval"' in h and ('"eval_id"' in h or '"task_id"' in h) \
        and '"version"' in h


def load(path: Path, options: LoadOptions) -> Transcript:
    """Load an Inspect AI log (``.json`` or ``.eval``): one session per sample and epoch."""
    path = Path(path)
    log = RecordLog(path, strict=options.strict)
    if path.suffix == ".eval":
        header, samples = _eval_samples(path, log)
    else:
        doc = read_json(path, log)
        if not isinstance(doc, Mapping) or not isinstance(doc.get("eval"), Mapping):
            raise log.error("not an Inspect AI log: expected a JSON object with an 'eval' spec")
        header = doc
        raw = doc.get("samples") or []
        samples = iter([(f"samples[{i}]", s) for i, s in enumerate(raw)]
                       if isinstance(raw, list) else [("samples", raw)])
        reductions = doc.get("reductions")
        for i, _ in enumerate(reductions if isinstance(reductions, list) else []):
            log.ignored("reduction", "score reduction over epochs, not model input",
                        where=f"reductions[{i}]")
    builders: list[SessionBuilder] = []
    tools_changed: dict[str, list[int]] = {}
    sessions: set[str] = set()
    for prefix, sample in samples:
        mark = log.mark()
        try:
            if isinstance(sample, Exception):
                raise ValueError(f"sample file does not parse: {sample}")
            s = _Sample(sample, prefix, log)
            if s.b.session in sessions:     # a repeated id and epoch: a session of its own
                s.b.session = f"{s.b.session}@{prefix}"
            b = s.build()
        except (*SHAPE_ERRORS, RecursionError) as e:
            log.rollback(mark)      # the entries of its messages and events: none was kept
            why = "nested too deeply" if isinstance(e, RecursionError) else \
                f"unexpected shape: {type(e).__name__}: {e}"
            log.skipped("sample", why, where=prefix)
            continue
        sessions.update(x.session for x in (b, *s.apart))
        log.used("sample", where=prefix, parts=0)
        builders.append(b)
        builders += s.apart
        if s.tools_changed:
            tools_changed[b.session] = s.tools_changed
    ev = header.get("eval") if isinstance(header.get("eval"), Mapping) else {}
    meta: dict[str, Any] = {"format": NAME, "path": str(path), "version": header.get("version"),
                            "status": header.get("status"), "task": ev.get("task"),
                            "model": ev.get("model"),
                            "inspect_version": ev["packages"].get("inspect_ai")
                            if isinstance(ev.get("packages"), Mapping) else None}
    stats = header.get("stats")
    if isinstance(stats, Mapping) and stats.get("model_usage"):
        meta["model_usage"] = stats["model_usage"]
    if tools_changed:
        meta["tools_changed"] = tools_changed
    return assemble(builders, log, meta)


LOADER = register(Loader(name=NAME, description="Inspect AI eval log (.json or .eval zip): exact "
                         "per-call input and tool schemas", sniff=sniff, load=load, priority=50))
