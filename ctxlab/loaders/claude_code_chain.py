"""Records and conversation graph of a Claude Code session file: what the model saw, in order.

`RecordFile` reads one file and keeps the one report decision each record gets.

Claude Code links its records into a tree through ``parentUuid``. The live conversation is
the chain from the newest leaf back to the root; a ``compact_boundary`` starts a new root and
points back through ``logicalParentUuid``. Two things make a plain parent walk too narrow:

* **parallel tool calls** (2.x): each ``tool_use`` line of one API response is chained after
  the previous one, but each tool result hangs off *its own* ``tool_use`` line, so the
  results of all but the last call sit on side twigs;
* **one response, several lines**: the lines of one API response share ``message.id``.

`select_chain` therefore walks the parent chain and then adds, in file order, the other lines
of every response on it and the (unanswered) results of its tool calls. Where a boundary's
``logicalParentUuid`` is not in the file (spotter 4d5611e5), the walk continues from the last
message written before the boundary. A uuid written twice (a resumed 1.0.x session re-writes
the record it continues from) resolves to the later copy. `plan_messages` puts
the chain in wire order: the lines of one response form one assistant message, and the tool
results written while it streamed follow it as one user message.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from ctxlab.loaders import safe
from ctxlab.loaders.builder import report_refused
from ctxlab.loaders.records import RecordLog, iter_jsonl

Record = tuple[int, dict[str, Any]]

CONVERSATION = frozenset({"user", "assistant"})

LOCAL_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
                  "<bash-input>", "<bash-stdout>", "<bash-stderr>")
COMMAND_PREFIXES = ("<command-name>", "<command-message>")
INTERRUPT_PREFIX = "[Request interrupted by user"
NOTIFICATION_PREFIX = "<task-notification>"


def content_blocks(obj: dict[str, Any]) -> list[Any]:
    """The content blocks of a user/assistant record (a string counts as one text block)."""
    content = obj["message"]["content"]
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise TypeError(f"message.content is {type(content).__name__}, not a string or list")
    return content


def _blocks_of(obj: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def tool_result_ids(obj: dict[str, Any]) -> list[str]:
    """``tool_use_id`` of every tool_result block of a user record."""
    return [str(b.get("tool_use_id")) for b in _blocks_of(obj, "tool_result")]


def tool_use_ids(obj: dict[str, Any]) -> list[str]:
    """``id`` of every tool_use block of an assistant record."""
    return [str(b.get("id")) for b in _blocks_of(obj, "tool_use")]


def message_id(obj: dict[str, Any]) -> str | None:
    msg = obj.get("message")
    mid = msg.get("id") if isinstance(msg, dict) else None
    return mid if isinstance(mid, str) and mid else None


def user_category(obj: dict[str, Any]) -> str:
    """What a user record is: see the rule in `ctxlab.loaders.claude_code`.

    Returns one of ``tool_result``, ``summary``, ``meta``, ``command``, ``local_command``,
    ``interrupt``, ``task_notification``, ``human``.
    """
    if tool_result_ids(obj):
        return "tool_result"
    if obj.get("isCompactSummary"):
        return "summary"
    if obj.get("isMeta"):
        return "meta"
    content = obj["message"]["content"]
    if isinstance(content, list):
        texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        text = next((t for t in texts if isinstance(t, str)), "")
    else:
        text = content if isinstance(content, str) else ""
    head = text.lstrip()
    if head.startswith(COMMAND_PREFIXES):
        return "command"
    if head.startswith(LOCAL_PREFIXES) or head.startswith("Caveat: The messages below were"):
        return "local_command"
    if head.startswith(INTERRUPT_PREFIX):
        return "interrupt"
    if head.startswith(NOTIFICATION_PREFIX):
        return "task_notification"
    return "human"


@dataclass(slots=True)
class Chain:
    """The records of one conversation and how its graph was resolved.

    Attributes:
        records: the records on the conversation, in file order.
        lines: their line numbers.
        fallbacks: boundary line -> line the chain continued from, where the boundary's
            ``logicalParentUuid`` is not in the file.
        added: lines joined to the parent chain as sibling lines of a response or results of
            its parallel tool calls.
        bridged: line -> line the chain continued from, where the record's parent is not
            in the file and a line before it could not be read (the lost parent): the
            conversation record or compaction boundary just before that line; or where the
            record has no ``parentUuid`` key: the one just before the record.
    """

    records: list[Record] = field(default_factory=list)
    lines: set[int] = field(default_factory=set)
    fallbacks: dict[int, int] = field(default_factory=dict)
    added: set[int] = field(default_factory=set)
    bridged: dict[int, int] = field(default_factory=dict)


def index_uuids(nodes: list[Record]) -> tuple[dict[str, Record], dict[int, int]]:
    """uuid -> record (a later copy of a uuid wins, as when a resumed session re-writes it),
    and superseded line -> line of the copy that replaced it."""
    by_uuid: dict[str, Record] = {}
    superseded: dict[int, int] = {}
    for rec in nodes:
        uuid = rec[1].get("uuid")
        if isinstance(uuid, str):
            if uuid in by_uuid:
                superseded[by_uuid[uuid][0]] = rec[0]
            by_uuid[uuid] = rec
    return by_uuid, superseded


def select_chain(nodes: list[Record], *, flat: bool = False,
                 unread: Sequence[int] = ()) -> tuple[Chain, dict[int, int]]:
    """The conversation of a group of graph records (records with a ``uuid``).

    Args:
        nodes: the records, in file order.
        flat: take every record in file order (a compaction summarizer's file, whose
            records hang off the main session's uuids, not off each other).
        unread: lines of the file that could not be read: a record whose parent is
            missing continues, instead of ending the conversation there, from the last
            conversation record or compaction boundary before the latest unread line
            before it (the lost parent's place: `Chain.bridged`). Records between that
            line and the record (another branch, e.g. one a rewind abandoned) stay off.
            A message without the ``parentUuid`` key (a root has it, as null) continues
            from the conversation record or boundary written before it, the same way.

    Returns:
        The chain and the superseded duplicates (line -> replacing line).
    """
    by_uuid, superseded = index_uuids(nodes)
    conv_lines = [ln for ln, obj in nodes
                  if obj.get("type") in CONVERSATION and ln not in superseded]
    chain = Chain()
    if flat or not conv_lines:
        if flat:
            chain.records = [(ln, obj) for ln, obj in nodes if ln not in superseded]
            chain.lines = {ln for ln, _ in chain.records}
        return chain, superseded
    by_line = {ln: obj for ln, obj in nodes}
    # where a chain broken by a lost line may go on: messages and compaction boundaries
    anchors = [ln for ln, obj in nodes if ln not in superseded and (
        obj.get("type") in CONVERSATION or obj.get("type") == "attachment" or (
            obj.get("type") == "system"
            and obj.get("subtype") in ("compact_boundary", "microcompact_boundary")))]
    line, seen = conv_lines[-1], set()
    while line is not None and line not in seen:
        seen.add(line)
        obj = by_line[line]
        parent = obj.get("parentUuid")
        nxt = by_uuid.get(parent) if isinstance(parent, str) else None
        if parent is None and obj.get("type") == "system" and \
                obj.get("subtype") == "compact_boundary":
            logical = obj.get("logicalParentUuid")
            nxt = by_uuid.get(logical) if isinstance(logical, str) else None
            if nxt is None:  # the pre-compaction leaf is not in the file: take the last message
                i = bisect.bisect_left(conv_lines, line)
                if i > 0:
                    nxt = (conv_lines[i - 1], by_line[conv_lines[i - 1]])
                    chain.fallbacks[line] = nxt[0]
        elif nxt is None and isinstance(parent, str) and unread and unread[0] < line:
            lost = unread[bisect.bisect_left(unread, line) - 1]   # the parent's line
            i = bisect.bisect_left(anchors, lost)
            if i > 0:
                nxt = (anchors[i - 1], by_line[anchors[i - 1]])
                chain.bridged[line] = nxt[0]
        elif "parentUuid" not in obj and obj.get("type") in CONVERSATION:
            # no link at all (a root says ``"parentUuid": null``): the record it was
            # written after, as for a lost parent
            i = bisect.bisect_left(anchors, line)
            if i > 0:
                nxt = (anchors[i - 1], by_line[anchors[i - 1]])
                chain.bridged[line] = nxt[0]
        line = nxt[0] if nxt is not None else None
    lines = set(seen)
    mids = {message_id(by_line[ln]) for ln in lines if by_line[ln].get("type") == "assistant"}
    mids.discard(None)
    calls: set[str] = set()
    answered: set[str] = set()
    for ln in lines:
        obj = by_line[ln]
        calls.update(tool_use_ids(obj) if obj.get("type") == "assistant" else ())
        answered.update(tool_result_ids(obj) if obj.get("type") == "user" else ())
    for ln, obj in nodes:
        if ln in lines or ln in superseded:
            continue
        kind = obj.get("type")
        if kind == "assistant" and message_id(obj) in mids:
            calls.update(tool_use_ids(obj))
        elif kind == "user":
            ids = tool_result_ids(obj)
            if not ids or not all(i in calls and i not in answered for i in ids):
                continue
            answered.update(ids)
        else:
            continue
        lines.add(ln)
        chain.added.add(ln)
    chain.lines = lines
    chain.records = [(ln, obj) for ln, obj in nodes if ln in lines]
    return chain, superseded


def sidechain_groups(nodes: list[Record]) -> dict[str, list[Record]]:
    """Sidechain records grouped by sub-agent: ``agentId`` when recorded, else the uuid of the
    root their ``parentUuid`` chain leads to (1.0.x interleaves Task agents in the main file)."""
    by_uuid = {obj["uuid"]: (ln, obj) for ln, obj in nodes if isinstance(obj.get("uuid"), str)}
    roots: dict[int, str] = {}

    def root_of(rec: Record) -> str:
        path: list[int] = []
        ln, obj = rec
        key = None
        while key is None:
            if ln in roots:
                key = roots[ln]
                break
            path.append(ln)
            parent = obj.get("parentUuid")
            up = by_uuid.get(parent) if isinstance(parent, str) else None
            if up is None or up[0] in path:
                key = str(obj.get("uuid") or f"line{ln}")
            else:
                ln, obj = up
        for p in path:
            roots[p] = key
        return key

    groups: dict[str, list[Record]] = {}
    for rec in nodes:
        agent = rec[1].get("agentId")
        key = agent if isinstance(agent, str) and agent else root_of(rec)
        groups.setdefault(key, []).append(rec)
    return groups


@dataclass(slots=True)
class Item:
    """One step of the wire order: ``assistant`` (lines of one response), ``results`` (tool
    results that answer it), ``user`` (one other user record) or ``boundary``."""

    kind: str
    records: list[Record]


def plan_messages(records: list[Record]) -> list[Item]:
    """Order chain records (user, assistant, compact boundaries) as the API saw them."""
    items: list[Item] = []
    current: Item | None = None
    pending: list[Record] = []

    def flush() -> None:
        if pending:
            items.append(Item("results", list(pending)))
            pending.clear()

    for rec in records:
        obj = rec[1]
        kind = obj.get("type")
        if kind == "assistant":
            mid = message_id(obj)
            if current is not None and mid is not None and message_id(current.records[0][1]) == mid:
                current.records.append(rec)
                continue
            flush()
            current = Item("assistant", [rec])
            items.append(current)
        elif kind == "user" and current is not None and tool_result_ids(obj):
            pending.append(rec)
        else:
            flush()
            current = None
            items.append(Item("boundary" if kind == "system" else "user", [rec]))
    flush()
    return items


class RecordFile:
    """The records of one input file and the one report decision each gets."""

    def __init__(self, path: Path, strict: bool) -> None:
        self.path = path
        self.log = RecordLog(path, strict=strict)
        self.records: list[Record] = []
        self.decided: dict[int, tuple[str, str, str | None, int]] = {}
        for line, obj in iter_jsonl(path, self.log):
            if not isinstance(obj, dict):
                self.skip(line, "non-object", f"unexpected shape: a JSON {type(obj).__name__}")
            elif not isinstance(obj.get("type"), str):
                self.skip(line, "untyped", "unexpected shape: no record type")
            else:
                self.records.append((line, obj))

    @property
    def unread(self) -> list[int]:
        """The lines skipped so far: not JSON, or a record of an unexpected shape (a lost
        link of the conversation graph either way)."""
        return sorted({*self.log.skipped_lines(),
                       *(ln for ln, d in self.decided.items() if d[0] == "skipped")})

    def used(self, line: int, record: str, parts: int = 0) -> None:
        """The record became parts (or an event, or meta); the first decision stands."""
        self.decided.setdefault(line, ("used", record, None, parts))

    def note(self, line: int, text: str) -> None:
        """Say what a used record became (`RecordLog.used`'s ``note``)."""
        status, record, _, parts = self.decided[line]
        self.decided[line] = (status, record, text, parts)

    def ignore(self, line: int, record: str, reason: str) -> None:
        """A known record the model did not see."""
        self.decided.setdefault(line, ("ignored", record, reason, 0))

    def skip(self, line: int, record: str, reason: str) -> None:
        """A record that could not be used; raises `LoadError` at once in strict mode."""
        if self.log.strict:
            self.log.skipped(record, reason, line=line)
        self.decided.setdefault(line, ("skipped", record, reason, 0))

    def loc(self, line: int) -> str:
        return self.log.location(line=line)

    def flush(self) -> RecordLog:
        """Write one report entry per record, in line order, and return the log."""
        for line, obj in self.records:
            if line not in self.decided:
                self.skip(line, str(obj.get("type")), "unexpected shape: not part of any session")
        for line in sorted(self.decided):
            status, record, reason, parts = self.decided[line]
            if status == "used":
                self.log.used(record, line=line, parts=parts, note=reason)
            elif status == "ignored":
                self.log.ignored(record, reason or "", line=line)
            else:
                self.log.skipped(record, reason or "", line=line)
        return self.log


def usage_fields(usage: Any) -> dict[str, int | None]:
    """Call columns from an Anthropic ``usage`` object (all None when absent). A count
    given that is no count is left empty and reported (`ctxlab.loaders.safe.count`), and
    the total is then unknown: a sum of the other parts would look right and be wrong."""
    u = usage if isinstance(usage, dict) else {}
    raw = [u.get(k) for k in ("input_tokens", "cache_creation_input_tokens",
                              "cache_read_input_tokens")]
    inp, cw, cr = (safe.count(v) for v in raw)
    refused = any(v is not None and c is None for v, c in zip(raw, (inp, cw, cr)))
    total = None if inp is None or refused else inp + (cw or 0) + (cr or 0)
    return dict(input_total=total, input_tokens=inp, cache_write=cw, cache_read=cr,
                output_tokens=safe.count(u.get("output_tokens")))


def type_reason(obj: dict[str, Any]) -> str:
    """Why a graph record that is not a message was not sent to the model."""
    kind = obj.get("type")
    if kind == "progress":
        data = obj.get("data")
        sub = data.get("type") if isinstance(data, dict) else None
        return f"progress ({sub}): UI progress, not sent to the model"
    if kind == "system":
        return f"system ({obj.get('subtype')}): CLI status record, not sent to the model"
    if kind == "attachment":
        a = obj.get("attachment")
        sub = a.get("type") if isinstance(a, dict) else None
        return (f"attachment ({sub}): the context the CLI adds from it is not rebuilt (its "
                "wording is not in the log)")
    return f"{kind}: not sent to the model"


def text_field(block: dict[str, Any], key: str) -> str:
    """A string field of a content block (TypeError when it is not a string)."""
    value = block[key]
    if not isinstance(value, str):
        raise TypeError(f"{block.get('type')}.{key} is {type(value).__name__}, not a string")
    return value


def parse_ts(value: Any) -> datetime | None:
    """A timezone-aware datetime from an ISO timestamp, or None."""
    try:
        when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def summarizer_call(f: RecordFile) -> dict[str, Any] | None:
    """The compaction summarizer's call: the last assistant line with usage of an acompact file."""
    found, refused = None, []
    for line, obj in f.records:
        msg = obj.get("message")
        if obj.get("type") == "assistant" and isinstance(msg, dict) and \
                isinstance(msg.get("usage"), dict):
            found = dict(usage_fields(msg["usage"]), model=msg.get("model"),
                         call_id=message_id(obj), request_id=obj.get("requestId"),
                         agent_id=obj.get("agentId"), ts=obj.get("timestamp"),
                         source=f.loc(line), line=line)
            refused = safe.refused_counts()     # (an earlier line's are not the call's)
    if found is not None and refused:           # a count that is none: said, not dropped
        report_refused(f.log, refused, found["source"], "usage", "the summarizer's call",
                       "the compaction summarizer's call is kept")
    return found
