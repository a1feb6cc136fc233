"""`SessionBuilder`: the one way loaders turn records into parts, calls and events.

A loader opens a message, adds its parts, declares the LLM calls (with their
reported usage) and any recorded compaction; `assemble` turns the builders into a
validated `Transcript`.

Every loader's tool results go through `SessionBuilder.part`, so the builder is where a
result whose call id no earlier tool call of its session has (an orphan: its call is not
in the log, or comes after it) is noticed; `assemble` reports each at its record.
"""

from __future__ import annotations

import bisect
import json
import re
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from ctxlab.loaders.records import RecordLog, clean, to_json
from ctxlab.loaders.safe import count, recorded_time, refused_counts
from ctxlab.schema import (CALL_COLUMNS, EVENT_COLUMNS, PART_COLUMNS, KINDS, ROLES, Column,
                           LoadReport, Transcript, coerce)

COUNT_COLUMNS = frozenset({"input_total", "input_tokens", "cache_read", "cache_write",
                           "output_tokens", "reasoning_tokens"})

FILE_PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "absolute_path",
                  "filename", "file", "target_file")


def file_path_from_args(args: Any) -> str | None:
    """The file a tool call reads or writes, when its arguments name one."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, Mapping):
        return None
    for key in FILE_PATH_KEYS:
        v = args.get(key)
        if isinstance(v, str) and v and "\n" not in v and len(v) < 4096:
            return v
    return None


def tool_call_text(name: str, arguments: Any) -> str:
    """What a tool call costs the model: its name and its JSON arguments.

    Arguments recorded as a JSON string (OpenAI style) are kept verbatim.
    """
    args = arguments if isinstance(arguments, str) else to_json(arguments)
    return f"{name}({args})"


def content_text(value: Any) -> str:
    """Text of a content value that may be a string, a list of blocks or anything JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for block in value:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                texts.append(to_json(block))
        return "\n".join(texts)
    return to_json(value)


class SessionBuilder:
    """Accumulates the parts, calls and events of one session."""

    def __init__(self, session: str, log: RecordLog) -> None:
        self.session = session
        self.log = log
        self._parts: dict[str, list[Any]] = {c.name: [] for c in PART_COLUMNS}
        self._calls: dict[str, list[Any]] = {c.name: [] for c in CALL_COLUMNS}
        self._events: dict[str, list[Any]] = {c.name: [] for c in EVENT_COLUMNS}
        self._msg = -1
        self._role: str | None = None
        self.turn = 0
        self._call_index: dict[str, int] = {}
        self._refused_counts: list[tuple[int, list[Any]]] = []
        self._sorted_pos: list[float] = []          # every part's position, ascending
        self._by_call_id: dict[str, list[int]] = {}  # tool_call_id -> its parts
        self._called: set[str] = set()               # ids of the tool calls so far
        self._orphans: list[tuple[str, str]] = []    # (source, call id) of orphan results
        refused_counts()            # what an earlier load in this thread left

    # ---- messages and parts -------------------------------------------------------------
    def message(self, role: str, *, real_user: bool = False) -> int:
        """Open a new message; a real user message (not tool results or injected text)
        starts a new turn. Returns the message index."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; roles: {ROLES}")
        self._msg += 1
        self._role = role
        if real_user:
            self.turn += 1
        return self._msg

    @property
    def n_parts(self) -> int:
        return len(self._parts["part"])

    @property
    def next_pos(self) -> float:
        return float(self.n_parts)

    def part(self, kind: str, content: str, *, role: str | None = None,
             tool_name: str | None = None, tool_call_id: str | None = None,
             file_path: str | None = None, call: int | None = None, ts: Any = None,
             source: str | None = None, meta: Mapping[str, Any] | None = None,
             event: int | None = None, hidden_by: int | None = None,
             pos: float | None = None) -> int:
        """Add one part to the current message (opened with `message`). Returns its id.

        ``pos`` defaults to the part id (append order); pass it to insert a part between
        existing ones (e.g. a recorded summary placed where the compaction happened).
        """
        if self._msg < 0:
            raise RuntimeError("call message() before part()")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; kinds: {KINDS}")
        p = self._parts
        pid = self.n_parts
        p["session"].append(self.session)
        p["part"].append(pid)
        p["pos"].append(float(pid) if pos is None else float(pos))
        bisect.insort(self._sorted_pos, p["pos"][-1])     # appended ones: at the end
        if tool_call_id is not None:
            cid = str(tool_call_id)
            self._by_call_id.setdefault(cid, []).append(pid)
            if kind == "tool_call":
                self._called.add(cid)
            elif kind == "tool_result" and cid not in self._called:
                self._orphans.append((source or "", cid))
        p["msg"].append(self._msg)
        p["turn"].append(self.turn)
        p["role"].append(role or self._role)
        p["kind"].append(kind)
        p["content"].append(clean(content if isinstance(content, str) else content_text(content)))
        p["tool_name"].append(tool_name)
        p["tool_call_id"].append(tool_call_id)
        p["file_path"].append(file_path)
        p["call"].append(call)
        p["ts"].append(recorded_time(ts))
        p["hidden_by"].append(hidden_by)
        p["event"].append(event)
        p["source"].append(source)
        p["meta"].append(clean(to_json(dict(meta))) if meta else None)
        return pid

    def kind_of(self, part: int) -> str:
        return str(self._parts["kind"][part])

    def parts_of_calls(self, tool_call_ids: set[str], kinds: tuple[str, ...]) -> list[int]:
        """The visible parts (not hidden, not inserted) of some kinds answering some tool
        calls, in order."""
        p = self._parts
        found = sorted(pid for cid in tool_call_ids for pid in self._by_call_id.get(cid, ()))
        return [pid for pid in found if p["kind"][pid] in kinds and p["hidden_by"][pid] is None
                and p["event"][pid] is None]

    def insert_after(self, part: int, content: str, *, event: int, source: str | None,
                     meta: Mapping[str, Any] | None = None) -> int:
        """A part right after ``part``, in its message (same message, turn, role, kind and
        tool fields), inserted by ``event``: what the event replaced ``part`` with."""
        p = self._parts
        pos = p["pos"][part]
        i = bisect.bisect_right(self._sorted_pos, pos)
        pid = self.n_parts
        for name, col in p.items():
            col.append(col[part])
        p["part"][pid] = pid
        p["pos"][pid] = (pos + self._sorted_pos[i]) / 2 if i < len(self._sorted_pos) \
            else pos + 0.5
        bisect.insort(self._sorted_pos, p["pos"][pid])
        cid = p["tool_call_id"][pid]
        if cid is not None:
            self._by_call_id.setdefault(str(cid), []).append(pid)
        p["content"][pid] = clean(content)
        p["call"][pid] = None
        p["hidden_by"][pid] = None
        p["event"][pid] = event
        p["source"][pid] = source
        p["meta"][pid] = clean(to_json(dict(meta))) if meta else None
        return pid

    def hide(self, part_ids: Iterable[int], event: int) -> None:
        """Mark parts as hidden by a (recorded) event; a part an earlier event hid stays
        that event's (undoing the later one does not bring it back)."""
        col = self._parts["hidden_by"]
        for pid in part_ids:
            if col[pid] is None:
                col[pid] = event

    # ---- calls ------------------------------------------------------------------------
    def call(self, *, call_id: str | None = None, model: str | None = None,
             input_total: int | None = None, input_tokens: int | None = None,
             cache_read: int | None = None, cache_write: int | None = None,
             output_tokens: int | None = None, reasoning_tokens: int | None = None,
             ts: Any = None, input_end_pos: float | None = None,
             source: str | None = None) -> int:
        """Declare one LLM call. ``input_end_pos`` defaults to the position of the next
        part added (so: declare the call, then add its output parts)."""
        c = self._calls
        idx = len(c["call"])
        c["session"].append(self.session)
        c["call"].append(idx)
        c["call_id"].append(call_id)
        c["model"].append(model)
        c["input_total"].append(count(input_total))
        c["input_tokens"].append(count(input_tokens))
        c["cache_read"].append(count(cache_read))
        c["cache_write"].append(count(cache_write))
        c["output_tokens"].append(count(output_tokens))
        c["reasoning_tokens"].append(count(reasoning_tokens))
        c["ts"].append(recorded_time(ts))
        c["input_end_pos"].append(self.next_pos if input_end_pos is None else input_end_pos)
        c["source"].append(source)
        if call_id is not None:
            self._call_index[call_id] = idx
        self._refused(idx)
        return idx

    def _refused(self, idx: int) -> None:
        """Remember the token counts of call ``idx``'s usage that were no counts (a text,
        a negative or absurd number): the call keeps them empty, and `report_refused`
        says so in the load report."""
        bad = refused_counts()
        if bad:
            self._refused_counts.append((idx, bad))

    def report_refused(self) -> None:
        """Put the refused counts in the load report, each at its call's record (the
        call's source, else its first output part's)."""
        pending, self._refused_counts = self._refused_counts, []
        sources = _first_sources(self._parts) if pending else {}
        for idx, bad in pending:
            self._report_refused(bad, self._calls["source"][idx] or sources.get(idx, ""),
                                 "usage", f"call {idx}", "the call is kept")

    def _report_refused(self, bad: list[Any], loc: str, record: str, fallback: str,
                        kept: str) -> None:
        report_refused(self.log, bad, loc, record, fallback, kept)

    def report_orphans(self) -> None:
        """Put the tool results whose call id matches no earlier tool call of the session
        in the load report, one entry per record and id (the parts of one result share
        it): the result is kept, unlinked; strict mode stops there, as at a refused
        count."""
        pending, self._orphans = self._orphans, []
        for loc, cid in dict.fromkeys(pending):
            line, at = _located(loc, f"session {self.session}")
            self.log.skipped("tool_result", f"tool result for call id {cid[:80]!r} has no "
                             f"matching tool call before it in the session (its call is not "
                             f"in the log, or comes after it): the result is kept, unlinked",
                             line=line, where=f"{at} tool_result {cid[:60]}")

    def call_by_id(self, call_id: str) -> int | None:
        return self._call_index.get(call_id)

    def update_call(self, idx: int, **values: Any) -> None:
        """Overwrite recorded values of a call (e.g. the last line's usage wins)."""
        for k, v in values.items():
            self._calls[k][idx] = count(v) if k in COUNT_COLUMNS else \
                recorded_time(v) if k == "ts" else v
        self._refused(idx)

    @property
    def n_calls(self) -> int:
        return len(self._calls["call"])

    def not_resent(self, part_ids: Iterable[int], reason: str, *, source: str | None = None,
                   meta: Mapping[str, Any] | None = None, at_once: bool = False) -> int:
        """Hide parts the client sends in no later request (a history edit, origin
        ``not_resent``): right after the last part so far (the output of the call that
        made them), or, ``at_once``, where the first of them is (seen by no call).
        Returns the event id."""
        ids = sorted(part_ids)
        pos = self._parts["pos"]
        at = pos[ids[0]] if at_once else (pos[-1] + self.next_pos) / 2
        eid = self.event(origin="not_resent", trigger="history", pre_tokens=None, pos=at,
                         source=source, reason=reason, meta=meta)
        self.hide(ids, eid)
        return eid

    def positions(self) -> list[float]:
        """The positions of the parts so far."""
        return list(self._parts["pos"])

    def input_ends(self) -> list[float]:
        """The input end positions of the calls so far."""
        return list(self._calls["input_end_pos"])

    # ---- events -----------------------------------------------------------------------
    def event(self, *, trigger: str | None, pre_tokens: int | None, reason: str,
              origin: str = "recorded", source: str | None = None,
              meta: Mapping[str, Any] | None = None, pos: float | None = None) -> int:
        """Declare a compaction event happening at ``pos`` (default: the next part)."""
        e = self._events
        idx = len(e["event"])
        e["session"].append(self.session)
        e["event"].append(idx)
        e["origin"].append(origin)
        e["trigger"].append(trigger)
        e["pre_tokens"].append(count(pre_tokens))
        bad = refused_counts()
        if bad:
            self._report_refused(bad, source or "", "pre_tokens", f"event {idx}",
                                 "the compaction is kept")
        e["pos"].append(self.next_pos if pos is None else pos)
        e["reason"].append(reason)
        e["source"].append(source)
        e["meta"].append(to_json(dict(meta)) if meta else None)
        return idx

    # ---- output -----------------------------------------------------------------------


def report_refused(log: RecordLog, bad: list[Any], loc: str, record: str, fallback: str,
                   kept: str) -> None:
    """Report token counts `ctxlab.loaders.safe.count` refused (``bad``) at the record
    they came from (``loc``: ``file:LINE``, ``file:LINE#path`` for a record inside a JSONL
    line, or ``file#path``; ``fallback`` names it when ``loc`` does not), saying what was
    kept."""
    line, at = _located(loc, fallback)
    shown = ", ".join(repr(v)[:40] for v in bad[:3]) + (" …" if len(bad) > 3 else "")
    log.skipped(record, f"token count{'s' if len(bad) > 1 else ''} {shown} "
                f"{'are' if len(bad) > 1 else 'is'} not a whole number from 0 to "
                f"2**53: left empty ({kept})", line=line, where=f"{at} {record}")


def _report_times(builders: list[SessionBuilder], attr: str, given: list[Any],
                  parsed: pd.Series) -> None:
    """Report the timestamps that were given but could not be parsed (not ISO-8601, or
    outside the years 1678-2262 that ``datetime64[ns]`` holds): they are left empty, each
    reported once per record at the part's or call's source (``attr``: ``_parts`` or
    ``_calls``; ``given`` the builders' values joined, ``parsed`` their column). A call
    whose time is that of one of its output parts is reported with the part."""
    bad = np.flatnonzero(parsed.isna().to_numpy()
                         & np.fromiter((v is not None for v in given), bool, len(given)))
    if not len(bad):
        return
    ends = np.cumsum([len(getattr(b, attr)["ts"]) for b in builders])
    seen: set[tuple[int, str, str]] = set()
    what = "part" if attr == "_parts" else "call"
    parts_of: dict[int, tuple[set[tuple[Any, Any]], dict[Any, str]]] = {}
    for i in bad.tolist():
        k = int(np.searchsorted(ends, i, side="right"))
        b = builders[k]
        j = i - (int(ends[k - 1]) if k else 0)
        if what == "part":
            loc = b._parts["source"][j] or ""
        else:       # (each builder's parts read once, however many of its calls are bad)
            if k not in parts_of:
                p = b._parts
                parts_of[k] = (set(zip(p["call"], p["ts"])), _first_sources(p))
            times, sources = parts_of[k]
            if (j, given[i]) in times:
                continue        # read from the record of one of its parts: reported there
            loc = b._calls["source"][j] or sources.get(j, "")
        key = (k, loc, str(given[i]))
        if key in seen:
            continue
        seen.add(key)
        line, at = _located(loc, f"{what} {j} of session {b.session}")
        b.log.skipped("timestamp", f"timestamp {str(given[i])[:60]!r} is not an ISO-8601 time "
                      f"from the years 1678 to 2262 (nor epoch seconds or milliseconds): left "
                      f"empty (the {what} is kept)", line=line, where=f"{at} timestamp")


def _first_sources(parts: Mapping[str, list[Any]]) -> dict[Any, str]:
    """Per call, the source of its first output part that has one (of a builder's part
    columns)."""
    out: dict[Any, str] = {}
    for c, src in zip(parts["call"], parts["source"]):
        if c is not None and src and c not in out:
            out[c] = src
    return out


def _located(loc: str, fallback: str) -> tuple[int | None, str]:
    """The line and the record locator (``line 12``, ``line 12 [3]``, ``messages[3]``) of a
    part's or call's source (``file:LINE``, ``file:LINE#path`` or ``file#path``);
    ``fallback`` when it names neither.

    Example:
        >>> _located("/l/a.jsonl:12", "x"), _located("/l/a.json#messages[3]", "x")
        ((12, 'line 12'), (None, 'messages[3]'))
    """
    m = re.search(r":(\d+)(?:#(.*))?$", loc)
    line = int(m.group(1)) if m else None
    inner = (m.group(2) if m else loc.partition("#")[2]) or ""
    at = " ".join(x for x in (f"line {line}" if line is not None else "", inner) if x) \
        or fallback
    return line, at


def assemble(builders: list[SessionBuilder], logs: list[RecordLog] | RecordLog,
             meta: Mapping[str, Any]) -> Transcript:
    """Join session builders into one validated `Transcript`.

    The column lists of all builders are joined first and converted to typed columns
    once, so a file with thousands of sessions costs one conversion, not thousands.
    """
    logs = [logs] if isinstance(logs, RecordLog) else logs
    for b in builders:
        b.report_refused()
        b.report_orphans()

    def joined(attr: str, columns: tuple[Column, ...]) -> pd.DataFrame:
        data: dict[str, list[Any]] = {c.name: [] for c in columns}
        for b in builders:
            for name, values in getattr(b, attr).items():
                data[name].extend(values)
        out = coerce(data, columns)
        if "ts" in data:
            _report_times(builders, attr, data["ts"], out["ts"])
        return out

    frame, calls = joined("_parts", PART_COLUMNS), joined("_calls", CALL_COLUMNS)
    t = Transcript(frame=frame, calls=calls, events=joined("_events", EVENT_COLUMNS),
                   meta=dict(meta), load_report=LoadReport.concat([lg.report() for lg in logs]))
    t.validate(strict=True)
    return t
