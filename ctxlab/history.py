"""Non-destructive history: every edit is an event that hides parts and inserts parts.

Nothing is deleted or changed in place. `apply_edit` records a stage's `Edit` as
an event (a row of ``events``), sets ``hidden_by`` on the parts it hides and adds
the parts it inserts with ``event`` set; `rewind` undoes an event and every later
one of its session (timeline semantics). The effective view is the visible parts
in position order (`Transcript.effective`).

Seed 000 (NeuroLink) tags messages instead: `neurolink_tags` maps events onto its
``condenseId``/``condenseParent`` (summaries) and ``truncationId``/
``truncationParent``/``isTruncationMarker`` (sliding-window truncation) fields, and
its ``getEffectiveHistory`` is `effective_history`.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.placement import Placement, SortedFloats
from ctxlab.schema import (EVENT_COLUMNS, HISTORY_EDITS, PART_COLUMNS, Transcript, coerce,
                           session_rows)
from ctxlab.stages.base import Edit, NewPart
from ctxlab.stages.table import Table, concat, concat_all, from_columns
from ctxlab.visibility import part_spans

CONDENSING_STAGES = frozenset({"summarize", "reattach"})
TRUNCATING_STAGES = frozenset({"truncate", "keep_last", "trim_history", "monologue"})


class SessionHistory(Placement):
    """One session's parts and events while stages edit it, written back once.

    Applying an edit costs what the edit touches, not the session's length: hides and
    inserts are recorded here, and the transcript is rebuilt only when asked for
    (`transcript`). `apply_edit` is one edit on a fresh history; the engine and the
    replay keep one history for many edits. It also tracks every part's visibility
    span (``lo < input_end_pos <= hi``, as `ctxlab.visibility.part_spans`), so the
    parts a call sees are found without rebuilding anything (`visible`).
    """

    def __init__(self, t: Transcript, session: str) -> None:
        self.base = t
        self.session = session
        self.rows = session_rows(t.frame, session)
        self.frame = t.frame.iloc[self.rows]
        sevents = t.events.iloc[session_rows(t.events, session)]
        self.lo, self.hi = part_spans(self.frame, sevents)
        self.hi = self.hi.copy()
        parts = self.frame["part"].to_numpy(dtype=np.int64)
        self._row_of = dict(zip(parts.tolist(), range(len(parts))))
        self._hidden = self.frame["hidden_by"].notna().to_numpy().copy()
        self._base_hider = self.frame["hidden_by"].to_numpy(dtype=np.float64, na_value=np.nan)
        self._part = self.frame["part"].to_numpy(dtype=np.int64)
        self._pos = self.frame["pos"].to_numpy(dtype=np.float64)
        self._msg = self.frame["msg"].to_numpy(dtype=np.int64)
        self._turn = self.frame["turn"].to_numpy(dtype=np.int64, na_value=0)
        self._sorted_pos = np.sort(self._pos)
        self._event_pos = np.sort(sevents["pos"].to_numpy(dtype=np.float64))
        self.next_event = int(sevents["event"].max()) + 1 if len(sevents) else 0
        self._next_part = int(parts.max()) + 1 if len(parts) else 0
        self._next_msg = int(self._msg.max()) + 1 if len(parts) else 0
        self._hides: dict[int, int] = {}           # original row -> hiding event
        self._new: dict[str, list[Any]] = {c.name: [] for c in PART_COLUMNS}
        self._new_row_of: dict[int, int] = {}      # inserted part -> row of self._new
        self.new_lo: list[float] = []
        self.new_hi: list[float] = []
        self._new_pos_sorted = SortedFloats()          # inserted parts' positions
        self._new_event_pos: list[float] = []
        self._events: list[dict[str, Any]] = []
        self._meta: list[dict[str, Any]] = []
        self._new_all: pd.DataFrame | None = None   # inserted rows as a frame (on demand)
        self._new_table: Table | None = None        # inserted rows, hidden_by may be stale
        self._chunks: list[Table] = []              # inserted rows not yet in _new_table
        self._frame_stale = False                   # hidden_by changed since built
        self._table_hidden: list[int] = []          # inserted rows hidden since built
        self._table: Table | None = None
        self._transcript: Transcript | None = t

    # ---- edits -------------------------------------------------------------------------
    def apply(self, edit: Edit, *, end_pos: float, trigger: str | None = None,
              pre_tokens: int | None = None,
              meta: dict[str, Any] | None = None) -> tuple[int, Table]:
        """Record an edit as a new event; returns its id and the rows it inserted."""
        hide = sorted(set(int(h) for h in edit.hide))
        missing = [h for h in hide if h not in self._row_of and h not in self._new_row_of]
        if missing:
            raise ConfigError(f"{edit.stage}: edit hides parts {missing[:5]} that session "
                              f"{self.session!r} does not have")
        orig = [self._row_of[h] for h in hide if h in self._row_of]
        new = [self._new_row_of[h] for h in hide if h in self._new_row_of]
        # a part the log's own history edit hides after this call (a user's /clear or
        # rewind) is still in this request: the stage hides it first, and the event
        # remembers whose it was (`taken_over`), for a rewind to give it back
        took = {int(self._part[r]): int(self._base_hider[r]) for r in orig
                if self._hidden[r] and r not in self._hides and end_pos <= self.hi[r]}
        if any(self._hidden[r] and int(self._part[r]) not in took for r in orig) or any(
                self._new["hidden_by"][r] is not None for r in new):
            raise ConfigError(f"{edit.stage}: edit hides parts that are already hidden")
        positions = self._insert_positions(edit.insert, hide, end_pos)
        event_id = self.next_event
        pos = self.event_position(end_pos)
        for r in orig:
            self._hidden[r] = True
            self._hides[r] = event_id
            self.hi[r] = pos
        for r in new:
            self._new["hidden_by"][r] = event_id
            self.new_hi[r] = pos
        first = len(self.new_lo)
        self._add_rows(edit.insert, positions, edit.stage, event_id)
        self.new_lo.extend(max(p, pos) for p in positions)
        self.new_hi.extend([np.inf] * len(positions))
        self._new_pos_sorted.add(positions)
        record = {"stage_details": dict(edit.details), "hidden": len(hide),
                  "inserted": len(edit.insert), **(meta or {})}
        if took:
            record[TAKEN_OVER] = {str(k): v for k, v in took.items()}
        if edit.summarizer_calls:
            record["summarizer_calls"] = list(edit.summarizer_calls)
        self._events.append({"session": self.session, "event": event_id,
                             "origin": edit.stage, "trigger": trigger,
                             "pre_tokens": pre_tokens, "pos": pos, "reason": edit.reason,
                             "source": None})
        self._meta.append(record)
        bisect.insort(self._new_event_pos, pos)
        self.next_event += 1
        self._transcript = None
        chunk = from_columns({k: v[first:] for k, v in self._new.items()}, self.dtypes)
        if len(chunk):      # joined to the table of inserted rows when someone asks
            self._chunks.append(chunk)
            self._new_all = None
        if new:
            self._frame_stale = True
            self._table_hidden += new
        return event_id, chunk

    def _add_rows(self, inserts: tuple[NewPart, ...], positions: list[float], stage: str,
                  event_id: int) -> None:
        """Append an edit's inserted parts, in its order, to the new rows."""
        k = len(inserts)
        if not k:
            return
        anchors = [self._anchor(n.anchor) for n in inserts]
        msgs = []
        for n, (_, anchor_msg, _) in zip(inserts, anchors):
            if n.join_message:
                msgs.append(anchor_msg)
            else:
                msgs.append(self._next_msg)
                self._next_msg += 1
        parts = list(range(self._next_part, self._next_part + k))
        self._next_part += k
        self._new_row_of.update(zip(parts, range(len(self._new["part"]),
                                                 len(self._new["part"]) + k)))
        values = {"session": [self.session] * k, "part": parts, "pos": list(positions),
                  "msg": msgs, "turn": [a[2] for a in anchors],
                  "role": [n.role for n in inserts], "kind": [n.kind for n in inserts],
                  "content": [n.content for n in inserts],
                  "tool_name": [n.tool_name for n in inserts],
                  "tool_call_id": [n.tool_call_id for n in inserts],
                  "file_path": [n.file_path for n in inserts], "event": [event_id] * k,
                  "source": [f"event {event_id} ({stage})"] * k,
                  "meta": [json.dumps(dict(n.meta), default=str, sort_keys=True)
                           if n.meta else None for n in inserts]}
        for name, col in self._new.items():
            col.extend(values.get(name, [None] * k))

    def hidden_by_stage(self, row: int) -> bool:
        """Whether a stage of this history hid an original row (``row``: its position in
        the session's frame)."""
        return row in self._hides

    def note(self, event: int, **values: Any) -> None:
        """Add values to the meta JSON of an event this history made."""
        self._meta[event - (self.next_event - len(self._events))].update(values)
        self._transcript = None

    # ---- reading -----------------------------------------------------------------------
    @property
    def dtypes(self) -> dict[str, Any]:
        """The dtype of every part column (those of the session's frame)."""
        return self.table.dtypes

    @property
    def table(self) -> Table:
        """The session's own parts as a `Table` (built on first use)."""
        if self._table is None:
            self._table = Table.from_frame(self.frame.reset_index(drop=True))
        return self._table

    def new_frame(self) -> pd.DataFrame:
        """Every part inserted so far (with ``hidden_by`` as it stands)."""
        if self._new_all is None:
            self._new_all = coerce(self._new, PART_COLUMNS)
        elif self._frame_stale:
            self._new_all["hidden_by"] = pd.array(self._new["hidden_by"], dtype="Int64")
        self._frame_stale = False
        return self._new_all

    def new_table(self) -> Table:
        """`new_frame` as a `Table`."""
        if self._chunks:
            tables = ([self._new_table] if self._new_table is not None else []) + self._chunks
            self._new_table = concat_all(tables)
            self._chunks = []
        if self._new_table is None:
            return from_columns(self._new, self.dtypes)
        if self._table_hidden:      # only the rows hidden since change
            hidden = np.asarray(self._new_table.col("hidden_by"), dtype=np.float64).copy()
            rows = [r for r in self._table_hidden if r < len(hidden)]
            hidden[rows] = [self._new["hidden_by"][r] for r in rows]
            self._new_table = self._new_table.with_columns(
                hidden_by=(hidden, self.dtypes["hidden_by"]))
            self._table_hidden = [r for r in self._table_hidden if r >= len(hidden)]
        return self._new_table

    def visible_table(self, end_pos: float) -> Table:
        """The parts a call whose input ends at ``end_pos`` sees, in position order."""
        rows = np.flatnonzero((self.lo < end_pos) & (end_pos <= self.hi))
        out = self.table.take(rows)
        if self.new_lo:
            lo, hi = np.asarray(self.new_lo), np.asarray(self.new_hi)
            new = np.flatnonzero((lo < end_pos) & (end_pos <= hi))
            if len(new):
                out = concat(out, self.new_table().take(new))
        pos = np.asarray(out.col("pos"), dtype=np.float64)
        if len(pos) > 1 and not (pos[1:] >= pos[:-1]).all():
            out = out.take(np.argsort(pos, kind="stable"))
        return out

    def visible(self, end_pos: float) -> pd.DataFrame:
        """`visible_table` as a DataFrame."""
        return self.visible_table(end_pos).frame()

    def transcript(self) -> Transcript:
        """The transcript with every edit applied (built once per change)."""
        if self._transcript is not None:
            return self._transcript
        t = self.base
        frame = t.frame.copy()
        if self._hides:
            col = frame["hidden_by"].array.copy()
            col[self.rows[list(self._hides)]] = list(self._hides.values())
            frame["hidden_by"] = col
        if self._new["part"]:
            frame = pd.concat([frame, self.new_frame()], ignore_index=True)
            # sessions keep their order in the file; rows are ordered by pos within each
            rank = pd.Categorical(frame["session"], categories=pd.unique(t.frame["session"]))
            order = np.lexsort((frame["pos"].to_numpy(), np.asarray(rank.codes)))
            frame = frame.iloc[order].reset_index(drop=True)
        events = t.events
        if self._events:
            cols = {k: [e[k] for e in self._events] for k in self._events[0]}
            cols["meta"] = [json.dumps(m, default=str, sort_keys=True) for m in self._meta]
            rows = coerce(cols, EVENT_COLUMNS)
            events = pd.concat([t.events, rows], ignore_index=True) if len(t.events) else rows
        self._transcript = replace(t, frame=frame, events=events)
        return self._transcript


def by_position(parts: pd.DataFrame) -> pd.DataFrame:
    """Parts in position order (stable), with a fresh index."""
    pos = parts["pos"].to_numpy(dtype=np.float64)
    if len(pos) > 1 and not (pos[1:] >= pos[:-1]).all():
        parts = parts.iloc[np.argsort(pos, kind="stable")]
    return parts.reset_index(drop=True)


def apply_edit(t: Transcript, edit: Edit, *, session: str, end_pos: float,
               trigger: str | None = None, pre_tokens: int | None = None,
               meta: dict[str, Any] | None = None) -> tuple[Transcript, int]:
    """Record an edit as a new event of ``session``, applied just before ``end_pos``.

    Args:
        t: the transcript (not changed).
        edit: what the stage planned.
        session: the session it applies to.
        end_pos: the ``input_end_pos`` of the call being compacted.
        trigger: why compaction ran (``"threshold"``, ``"overflow"``...).
        pre_tokens: the request's tokens before the edit.
        meta: more to record with the event (tokens after, stage parameters...).

    Returns:
        The new transcript and the new event's id.

    Raises:
        ConfigError: the edit hides a part that is not visible, or anchors on a missing part.
    """
    h = SessionHistory(t, session)
    event_id, _ = h.apply(edit, end_pos=end_pos, trigger=trigger, pre_tokens=pre_tokens,
                          meta=meta)
    return h.transcript(), event_id


def rewind(t: Transcript, event: int | None = None, *, session: str | None = None) -> Transcript:
    """Undo an event and every later one of its session (no event: every compaction).

    Parts the undone events inserted are removed; parts they hid are visible again.
    The result equals the transcript as it was before the event, frame for frame. With
    no event, every event but the log's own history edits (`HISTORY_EDITS`: a user's
    rewind, parts the client never sends again) is undone: the log without compaction.

    Args:
        t: the transcript.
        event: the event id; None undoes all compactions of ``session`` (or of every
            session).
        session: which session (required when several sessions hold that event id).
    """
    ev = t.events
    if session is not None:
        scope = ev["session"] == session
    elif event is not None:
        owners = ev.loc[ev["event"] == event, "session"].unique()
        if len(owners) == 0:
            raise ConfigError(f"no event {event}; events: {ev['event'].tolist()[:20]}")
        if len(owners) > 1:
            raise ConfigError(f"event {event} exists in {len(owners)} sessions; pass session=")
        scope = ev["session"] == owners[0]
    else:
        scope = pd.Series(True, index=ev.index)
    undo = scope & ((ev["event"] >= event) if event is not None
                    else ~ev["origin"].isin(sorted(HISTORY_EDITS)))
    if event is not None and not (scope & (ev["event"] == event)).any():
        raise ConfigError(f"no event {event} in session {session!r}")
    keys = set(zip(ev.loc[undo, "session"], ev.loc[undo, "event"].astype("int64")))
    if not keys:
        return t
    f = t.frame
    sessions = f["session"].to_numpy()
    inserted = np.array([(s, e) in keys for s, e in zip(sessions, f["event"].fillna(-1))]) \
        & f["event"].notna().to_numpy()
    hidden = np.array([(s, h) in keys for s, h in zip(sessions, f["hidden_by"].fillna(-1))]) \
        & f["hidden_by"].notna().to_numpy()
    frame = f.copy()
    back = taken_over(ev[undo])         # the log's own edits hide them again
    frame.loc[hidden, "hidden_by"] = pd.array(
        [back.get((s, p), pd.NA) for s, p in zip(sessions[hidden], f["part"].to_numpy()[hidden])],
        dtype=f["hidden_by"].dtype)
    frame = frame[~inserted].reset_index(drop=True)
    return replace(t, frame=frame, events=ev[~undo].reset_index(drop=True))


TAKEN_OVER = "taken_over"
"""Key of a stage event's meta: the parts it hid that a later history edit of the log hides
too, each with that edit's id (``{"<part>": event}``)."""


def taken_over(events: pd.DataFrame) -> dict[tuple[str, int], int]:
    """``(session, part)`` → the log's history edit (`HISTORY_EDITS`: a user's /clear or
    rewind) that hid the part after one of ``events`` (a stage's) hid it first: a
    replay's stage acts on a request the user has not cleared yet. What a rewind of that
    event gives back to the history edit, and what metrics count as the user's edit."""
    out: dict[tuple[str, int], int] = {}
    for s, m in zip(events["session"], events["meta"]):
        if isinstance(m, str) and f'"{TAKEN_OVER}"' in m:
            out.update({(str(s), int(p)): int(h)
                        for p, h in json.loads(m)[TAKEN_OVER].items()})
    return out


def effective_history(frame: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's ``getEffectiveHistory``: the visible parts, in position order."""
    visible = frame[frame["hidden_by"].isna()]
    return visible.sort_values(["session", "pos"], kind="stable")


def neurolink_tags(t: Transcript) -> pd.DataFrame:
    """Seed 000's tag fields for every part, derived from the events.

    Columns: ``session``, ``part``, ``condense_id`` (on summaries), ``condense_parent``
    (on parts a summary replaced), ``truncation_id`` and ``is_truncation_marker`` (on
    truncation markers), ``truncation_parent`` (on parts a truncation hid). Ids are
    ``"<session>/<event>"``. Other stages (pruning, dedup) replace content in place in
    NeuroLink and have no tag: their rows are NA here.
    """
    f, ev = t.frame, t.events
    origin = dict(zip(zip(ev["session"], ev["event"].astype("int64")), ev["origin"]))

    def tag(col: str, stages: frozenset[str]) -> pd.Series:
        out = []
        for s, e in zip(f["session"], f[col]):
            ok = pd.notna(e) and origin.get((s, int(e))) in stages
            out.append(f"{s}/{int(e)}" if ok else None)
        return pd.Series(out, index=f.index, dtype="string")

    inserted_summary = tag("event", CONDENSING_STAGES).where(f["kind"] == "summary")
    inserted_marker = tag("event", TRUNCATING_STAGES).where(f["kind"] == "marker")
    return pd.DataFrame({
        "session": f["session"], "part": f["part"],
        "condense_id": inserted_summary,
        "condense_parent": tag("hidden_by", CONDENSING_STAGES),
        "truncation_id": inserted_marker,
        "truncation_parent": tag("hidden_by", TRUNCATING_STAGES),
        "is_truncation_marker": inserted_marker.notna(),
    })
