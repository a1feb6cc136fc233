"""Which parts each LLM call saw, computed for all calls at once.

A part is in the input of a call when it was positioned before the call's first
output part, was already inserted (its event happened before), and was not yet
hidden. With ``E`` the call's ``input_end_pos``, a part with position ``pos``,
inserted by an event at ``ins`` (−∞ for original parts) and hidden by an event
at ``hid`` (+∞ for visible parts) is in the input exactly when
``max(pos, ins) < E <= hid``: an interval of calls. Sums over every call's input
(tokens, characters, messages) are then one difference array and one cumulative
sum: O((parts + calls) log calls), never a loop over calls × parts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd

from ctxlab.schema import Transcript


def part_spans(frame: pd.DataFrame, events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per part, the open/closed bounds ``(lo, hi]`` of ``input_end_pos`` that see it.

    Args:
        frame: parts of ONE session.
        events: events of that session (``event`` → ``pos``).
    """
    event_pos: Mapping[int, float] = dict(zip(events["event"].astype("int64"),
                                              events["pos"].astype("float64")))
    return spans(*_span_columns(frame), event_pos)


def _span_columns(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A frame's ``pos``, ``event`` and ``hidden_by`` as float arrays (NaN: none)."""
    return (frame["pos"].to_numpy(dtype=np.float64),
            frame["event"].to_numpy(dtype=np.float64, na_value=np.nan),
            frame["hidden_by"].to_numpy(dtype=np.float64, na_value=np.nan))


def spans(pos: np.ndarray, inserted_by: np.ndarray, hidden_by: np.ndarray,
          event_pos: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """`part_spans` from the parts' columns as arrays (event ids as floats, NaN: none) and
    each event's position."""
    return (np.maximum(pos, _event_positions(inserted_by, event_pos, -np.inf)),
            _event_positions(hidden_by, event_pos, np.inf))


def _event_positions(ids: np.ndarray, event_pos: Mapping[int, float],
                     default: float) -> np.ndarray:
    out = np.full(len(ids), default, dtype=np.float64)
    present = ~np.isnan(ids)
    if present.any():
        keys = ids[present].astype(np.int64).tolist()
        missing = sorted({k for k in keys if k not in event_pos})
        if missing:
            raise ValueError(f"parts refer to events {missing[:5]} that the events table lacks")
        out[present] = [event_pos[k] for k in keys]
    return out


def interval_sums(lo: np.ndarray, hi: np.ndarray, values: np.ndarray,
                  ends: np.ndarray) -> np.ndarray:
    """For each end ``E`` in ``ends``, the sum of ``values`` whose interval has ``lo < E <= hi``.

    Example:
        >>> interval_sums(np.array([0., 1.]), np.array([np.inf, 2.]), np.array([10, 1]),
        ...               np.array([1., 2., 3.])).tolist()
        [10.0, 11.0, 10.0]
    """
    values = np.asarray(values, dtype=np.float64)
    if not np.isfinite(values).all():   # a running sum: one NaN would spoil every later end
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"values must be finite numbers; value {bad} is {values[bad]} "
                         f"(count a missing value as 0)")
    order = np.argsort(ends, kind="stable")
    e = ends[order]
    first = np.searchsorted(e, lo, side="right")
    last = np.maximum(np.searchsorted(e, hi, side="right"), first)  # empty when hi <= lo
    diff = np.zeros(len(e) + 1, dtype=np.float64)
    np.add.at(diff, first, values)
    np.add.at(diff, last, -values)
    sums = np.cumsum(diff[:-1])
    out = np.empty_like(sums)
    out[order] = sums
    return out


def call_sums(t: Transcript, columns: Mapping[str, np.ndarray | pd.Series]) -> pd.DataFrame:
    """Per call, the sum of each per-part column over the call's input, plus ``messages``.

    Args:
        t: a transcript (any number of sessions).
        columns: name → one value per row of ``t.frame`` (e.g. token counts).

    Returns:
        ``session``, ``call`` and one column per name, plus ``messages`` (distinct
        messages in the input) and ``parts``; one row per row of ``t.calls``.
    """
    frame, calls = t.frame, t.calls
    values = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    for k, v in values.items():
        if len(v) != len(frame):
            raise ValueError(f"column {k!r} has {len(v)} values for {len(frame)} parts")
    out = {k: np.zeros(len(calls)) for k in [*values, "messages", "parts"]}
    msg = frame["msg"].to_numpy()
    call_ends = calls["input_end_pos"].to_numpy(dtype=np.float64)
    for idx, call_idx, lo, hi in _session_spans(t):
        ends = call_ends[call_idx]
        for k, v in values.items():
            out[k][call_idx] = interval_sums(lo, hi, v[idx], ends)
        out["parts"][call_idx] = interval_sums(lo, hi, np.ones(len(idx)), ends)
        m_lo, m_hi = message_spans(msg[idx], lo, hi)
        out["messages"][call_idx] = interval_sums(m_lo, m_hi, np.ones(len(m_lo)), ends)
    result = pd.DataFrame({"session": calls["session"].to_numpy(),
                           "call": calls["call"].to_numpy()})
    for k, v in out.items():
        result[k] = np.rint(v).astype(np.int64) if k in ("messages", "parts") else v
    return result


def sent_parts(t: Transcript) -> np.ndarray:
    """Per part of ``t.frame``, whether it is in the input of at least one call (a part
    written after a session's last call, such as mini-swe-agent's submission diff, is in
    none).

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")
        >>> bool(sent_parts(t).any())
        True
    """
    out = np.zeros(len(t.frame), dtype=bool)
    call_ends = t.calls["input_end_pos"].to_numpy(dtype=np.float64)
    for idx, call_idx, lo, hi in _session_spans(t):
        e = np.sort(call_ends[call_idx])
        # some end E with lo < E <= hi
        out[idx] = np.searchsorted(e, lo, side="right") < np.searchsorted(e, hi, side="right")
    return out


def _session_spans(t: Transcript) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]]:
    """Per session with calls and parts: its parts' rows of ``t.frame``, its calls' rows
    of ``t.calls``, and its parts' visibility spans ``(lo, hi]`` (the columns read once,
    cut per session: a log of many sessions)."""
    frame, events = t.frame, t.events
    by_session = frame.groupby("session", sort=False).indices
    ev_by_session = events.groupby("session", sort=False).indices
    pos, ins, hid = _span_columns(frame)
    ev_ids, ev_pos = events["event"].astype("int64").tolist(), \
        events["pos"].astype("float64").tolist()
    for session, call_idx in t.calls.groupby("session", sort=False).indices.items():
        idx = by_session.get(session)
        if idx is None:
            continue
        lo, hi = spans(pos[idx], ins[idx], hid[idx],
                       {ev_ids[i]: ev_pos[i] for i in ev_by_session.get(session, [])})
        yield idx, call_idx, lo, hi


def message_spans(msg: np.ndarray, lo: np.ndarray, hi: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """When each message is in a request: the union of its parts' spans ``(lo, hi]``, as
    one span per stretch of time (a message whose parts were all hidden, then one put
    back into it, is in no request in between).

    Example:
        >>> lo, hi = message_spans(np.array([0, 0, 0]), np.array([0.0, 0.0, 9.0]),
        ...                        np.array([5.0, 5.0, np.inf]))
        >>> lo.tolist(), hi.tolist()
        ([0.0, 9.0], [5.0, inf])
    """
    if not len(msg):
        return lo[:0], hi[:0]
    order = np.lexsort((lo, msg))
    m, a, b = msg[order], lo[order], hi[order]
    reach = pd.Series(b).groupby(m).cummax().to_numpy()    # the furthest end so far
    first = np.r_[True, m[1:] != m[:-1]]
    start = first | (a > np.r_[-np.inf, reach[:-1]])
    span = np.cumsum(start) - 1
    return a[start], pd.Series(b).groupby(span).max().to_numpy()


def call_input(t: Transcript, call: int, session: str | None = None) -> pd.DataFrame:
    """The parts in the input of one call, in position order."""
    sessions = t.sessions
    session = session if session is not None else (sessions[0] if sessions else None)
    calls = t.calls[(t.calls["session"] == session) & (t.calls["call"] == call)]
    if calls.empty:
        raise KeyError(f"no call {call} in session {session!r}")
    end = float(calls["input_end_pos"].iloc[0])
    f = t.frame[t.frame["session"] == session]
    lo, hi = part_spans(f, t.events[t.events["session"] == session])
    return f[(lo < end) & (end <= hi)].sort_values("pos", kind="stable")


def call_segments(t: Transcript) -> np.ndarray:
    """Per call, how many recorded compactions of its session came before it (0, 1, ...).

    What a log leaves out of the request (system prompt, tool schemas, files an agent
    re-attaches after compacting) is constant within a segment and changes at a
    compaction, so overheads are fitted per segment.
    """
    calls, events = t.calls, t.events
    out = np.zeros(len(calls), dtype=np.int64)
    rec = events[events["origin"] == "recorded"]
    if rec.empty:
        return out
    ends = calls["input_end_pos"].to_numpy(dtype=np.float64)
    by_session = rec.groupby("session", sort=False)["pos"].apply(
        lambda p: np.sort(p.to_numpy(dtype=np.float64)))
    for session, idx in calls.groupby("session", sort=False).indices.items():
        if session in by_session.index:
            out[idx] = np.searchsorted(by_session[session], ends[idx], side="left")
    return out
