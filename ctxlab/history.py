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

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.schema import EVENT_COLUMNS, PART_COLUMNS, Transcript, coerce
from ctxlab.stages.base import Edit, NewPart

CONDENSING_STAGES = frozenset({"summarize", "reattach"})
TRUNCATING_STAGES = frozenset({"truncate", "keep_last", "trim_history", "monologue"})


def event_position(frame: pd.DataFrame, events: pd.DataFrame, end_pos: float) -> float:
    """Where an event applied just before a call (input ending at ``end_pos``) sits.

    After every part and earlier event below ``end_pos``, before ``end_pos``: the call
    sees the event's result, the calls before it do not.
    """
    below = [float(frame["pos"][frame["pos"] < end_pos].max()) if len(frame) else -np.inf]
    if len(events):
        ev = events["pos"][events["pos"] < end_pos]
        if len(ev):
            below.append(float(ev.max()))
    lo = max(b for b in below if np.isfinite(b)) if any(np.isfinite(b) for b in below) \
        else end_pos - 1.0
    return lo + (end_pos - lo) / 2.0


def _insert_positions(frame: pd.DataFrame, inserts: tuple[NewPart, ...]) -> list[float]:
    """A position for every inserted part, next to its anchor, in the edit's order."""
    pos = np.sort(frame["pos"].to_numpy(dtype=np.float64))
    by_id = dict(zip(frame["part"].astype("int64"), frame["pos"].astype("float64")))
    taken: list[float] = []
    for new in inserts:
        if new.anchor not in by_id:
            raise ConfigError(f"edit anchors a new part on part {new.anchor}, which the session "
                              f"does not have")
        a = by_id[new.anchor]
        i = int(np.searchsorted(pos, a, side="right"))
        if new.side == "after":
            hi = float(pos[i]) if i < len(pos) else a + 1.0
            lo = max([a] + [p for p in taken if a < p < hi])
        else:
            prev = float(pos[i - 2]) if i >= 2 else a - 1.0
            lo = max([prev] + [p for p in taken if prev < p < a])
            hi = a
        p = lo + (hi - lo) / 2.0
        if not lo < p < hi:
            raise ConfigError(f"no room to place a part next to part {new.anchor} "
                              f"(positions {lo!r}, {hi!r})")
        taken.append(p)
    return taken


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
    frame = t.frame
    in_session = (frame["session"] == session).to_numpy()
    sframe = frame[in_session]
    sevents = t.events[t.events["session"] == session]
    event_id = int(sevents["event"].max()) + 1 if len(sevents) else 0
    hide = np.asarray(sorted(set(edit.hide)), dtype=np.int64)
    target = in_session & frame["part"].isin(hide).to_numpy()
    if int(target.sum()) != len(hide):
        missing = sorted(set(hide.tolist()) - set(frame.loc[target, "part"].astype(int)))
        raise ConfigError(f"{edit.stage}: edit hides parts {missing[:5]} that session "
                          f"{session!r} does not have")
    if frame.loc[target, "hidden_by"].notna().any():
        raise ConfigError(f"{edit.stage}: edit hides parts that are already hidden")
    new_frame = frame.copy()
    new_frame.loc[target, "hidden_by"] = event_id
    if edit.insert:
        new_frame = pd.concat([new_frame, _inserted_rows(sframe, edit, session, event_id)],
                              ignore_index=True)
        # sessions keep their order in the file; rows are ordered by pos within each
        rank = pd.Series(pd.Categorical(new_frame["session"],
                                        categories=pd.unique(frame["session"])).codes)
        order = np.lexsort((new_frame["pos"].to_numpy(), rank.to_numpy()))
        new_frame = new_frame.iloc[order].reset_index(drop=True)
    pos = event_position(sframe, sevents, end_pos)
    record = {"stage_details": dict(edit.details), "hidden": len(hide),
              "inserted": len(edit.insert), **(meta or {})}
    if edit.summarizer_calls:
        record["summarizer_calls"] = list(edit.summarizer_calls)
    row = coerce({"session": [session], "event": [event_id], "origin": [edit.stage],
                  "trigger": [trigger], "pre_tokens": [pre_tokens], "pos": [pos],
                  "reason": [edit.reason], "source": [None],
                  "meta": [json.dumps(record, default=str, sort_keys=True)]}, EVENT_COLUMNS)
    events = pd.concat([t.events, row], ignore_index=True) if len(t.events) else row
    return replace(t, frame=new_frame, events=events), event_id


def _inserted_rows(sframe: pd.DataFrame, edit: Edit, session: str,
                   event_id: int) -> pd.DataFrame:
    positions = _insert_positions(sframe, edit.insert)
    by_id = sframe.set_index(sframe["part"].astype("int64"))
    next_part = int(sframe["part"].max()) + 1 if len(sframe) else 0
    next_msg = int(sframe["msg"].max()) + 1 if len(sframe) else 0
    rows: dict[str, list[Any]] = {c.name: [] for c in PART_COLUMNS}
    for i, (new, p) in enumerate(zip(edit.insert, positions)):
        anchor = by_id.loc[new.anchor]
        if new.join_message:
            msg = int(anchor["msg"])
        else:
            msg, next_msg = next_msg, next_msg + 1
        values = {"session": session, "part": next_part + i, "pos": p, "msg": msg,
                  "turn": int(anchor["turn"]), "role": new.role, "kind": new.kind,
                  "content": new.content, "tool_name": new.tool_name,
                  "tool_call_id": new.tool_call_id, "file_path": new.file_path,
                  "call": None, "ts": None, "hidden_by": None, "event": event_id,
                  "source": f"event {event_id} ({edit.stage})",
                  "meta": json.dumps(dict(new.meta), default=str, sort_keys=True)
                  if new.meta else None}
        for k in rows:
            rows[k].append(values.get(k))
    return coerce(rows, PART_COLUMNS)


def rewind(t: Transcript, event: int | None = None, *, session: str | None = None) -> Transcript:
    """Undo an event and every later one of its session (no event: every event).

    Parts the undone events inserted are removed; parts they hid are visible again.
    The result equals the transcript as it was before the event, frame for frame.

    Args:
        t: the transcript.
        event: the event id; None undoes all events of ``session`` (or of every session).
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
    undo = scope & ((ev["event"] >= event) if event is not None else True)
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
    frame.loc[hidden, "hidden_by"] = pd.NA
    frame = frame[~inserted].reset_index(drop=True)
    return replace(t, frame=frame, events=ev[~undo].reset_index(drop=True))


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
