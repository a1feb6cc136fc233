"""What compaction loses: artifact retention per event and needed-fact recall per call.

Agents lean on *artifacts*: file paths, shell commands, error lines, identifiers,
numbers, dates and the user's instructions. `artifacts` extracts them from a column of
texts (one ``str.extractall`` per family over the whole column) and normalises them;
an artifact is "in context" when a visible part yields the same kind and value (a file
written two ways within a session, absolute and relative, is one value: `one_spelling`).
`retention_df`: per compaction event, the distinct artifacts of the parts it hid, and
how many the request right after it still shows (summary, placeholders, other parts).
`needed_recall_df`: per call, the artifacts its output uses that the log stated before
(*needed*), and those no part of the call's input showed (*missing*). Both extract
every part once and use visibility intervals (`ctxlab.visibility`), never a per-call
extraction.

The extraction rules are in `ctxlab.artifacts`; the artifacts of a frame's parts, as
arrays, come from `ctxlab.occurrences` (a replay's frame takes those of the parts it
shares with the last frame measured: a sweep measures a session's replays in a row).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.artifacts import (ARTIFACT_KINDS, artifact_ids, artifact_kinds,  # noqa: F401
                              artifact_values, artifacts, artifacts_cached, instruction_rows)
from ctxlab.errors import ConfigError
from ctxlab.history import taken_over
from ctxlab.occurrences import Occurrences, occurrences, one_spelling  # noqa: F401
from ctxlab.schema import HISTORY_EDITS, Transcript  # noqa: F401 (HISTORY_EDITS re-exported)
from ctxlab.visibility import spans


def part_artifacts(t: Transcript) -> pd.DataFrame:
    """`artifacts` of every part of a transcript: ``row`` is the row position in ``t.frame``.

    Adds ``session`` and ``aid`` (one integer per distinct session, kind and value).
    """
    occ = _occurrences(t)
    return pd.DataFrame({"row": pd.Series(occ.rows.tolist(), dtype=object),
                         "kind": pd.Series(occ.kinds(), dtype="str"),
                         "value": pd.Series(occ.values(), dtype=object),
                         "session": pd.Series(occ.sessions(), dtype=object),
                         "aid": occ.aid})


def _occurrences(t: Transcript) -> Occurrences:
    """`part_artifacts` as arrays (`ctxlab.occurrences`), remembered for the last frame (a
    frame is never changed in place): do not modify. The next frame takes the artifacts
    of the texts it shares with the last one (a sweep measures a session's replays one
    after the other)."""
    f = t.frame
    last = _LAST[:]                     # (one read: another thread may replace it)
    if last and last[0] is f:           # recall and retention of one replay share it
        return last[1]
    occ = occurrences(f, last[1].texts if last else None)
    _LAST[:] = [f, occ]
    return occ


_LAST: list[Any] = []
"""The last frame `_occurrences` read and its result."""


def _base_spans(f: pd.DataFrame, ev: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """`part_spans` with compaction undone: only history edits (`HISTORY_EDITS`) count,
    and parts that other events inserted are never seen (``f``: parts of ONE session,
    ``ev``: its events)."""
    hist = ev["origin"].isin(sorted(HISTORY_EDITS)).to_numpy(dtype=bool)
    session = f["session"].iloc[0] if len(f) else None
    return _base_of(*_span_columns(f), f["part"].to_numpy(dtype=np.float64, na_value=np.nan),
                    _parts_back(taken_over(ev), session),
                    ev["event"].to_numpy(dtype=np.float64)[hist],
                    ev["pos"].to_numpy(dtype=np.float64)[hist])


def _base_of(pos: np.ndarray, ins: np.ndarray, hid: np.ndarray, part: np.ndarray,
             back: dict[int, int], hist: np.ndarray, hist_pos: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """`_base_spans` from one session's columns as arrays (`_span_columns`, ``part``), the
    parts a stage hid before the log's own edit did (``back``: part -> that edit,
    `taken_over`), and the ids and positions of its history edits."""
    keep_ins, keep_hid = np.isin(ins, hist), np.isin(hid, hist)
    hider = np.where(keep_hid, hid, np.nan)
    if back:        # hidden first by a stage, then by the log's own edit (a user's /clear)
        taken = np.array(sorted(back), dtype=np.float64)
        at = np.minimum(np.searchsorted(taken, part), len(taken) - 1)
        found = taken[at] == part           # (NaN: never)
        hider[found] = [back[int(p)] for p in taken[at[found]]]
    lo, hi = spans(pos, np.where(keep_ins, ins, np.nan), hider,
                   dict(zip(hist.astype(np.int64).tolist(), hist_pos.tolist())))
    return np.where(~np.isnan(ins) & ~keep_ins, np.inf, lo), hi


def _parts_back(back: dict[tuple[str, int], int], session: Any) -> dict[int, int]:
    """`taken_over` of one session: part -> the history edit."""
    return {p: h for (s, p), h in back.items() if s == session}


def _stabbed(q_key: np.ndarray, q: np.ndarray, key: np.ndarray, lo: np.ndarray,
             hi: np.ndarray, rows: np.ndarray | None = None,
             q_at: np.ndarray | None = None, by_key: np.ndarray | None = None
             ) -> np.ndarray:
    """For each query ``(key, q)``: does an interval of that key have ``lo < q <= hi``?
    (``rows``: interval i's bounds are ``lo[rows[i]]``, ``hi[rows[i]]``, per-row arrays;
    ``q_at``: query i's value is ``q[q_at[i]]``, ``q`` a few values that many share;
    ``by_key``: the intervals in key order, stable, when known: rows come in position
    order, so their bounds mostly ascend within a key and sorting costs little.)

    One sort and one search: the largest ``hi`` among intervals with ``lo < q``.

    Example:
        >>> _stabbed(np.array([0, 0, 1]), np.array([1.5, 3.0, 1.5]), np.array([0, 1]),
        ...          np.array([1.0, 0.0]), np.array([2.0, 1.0])).tolist()
        [True, False, False]
    """
    out = np.zeros(len(q_key), dtype=bool)
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    ok = lo < hi if rows is None else (lo < hi)[rows]
    if not len(q_key) or not ok.any():
        return out
    # one integer scale for the bounds, ranked once per row, not once per interval; a
    # query ranks as the first bound >= it (lo < q and q <= hi hold as for the values)
    scale = np.unique(np.concatenate([lo, hi]))
    lo_r, hi_r = np.searchsorted(scale, lo), np.searchsorted(scale, hi)
    if rows is not None:
        lo_r, hi_r = lo_r[rows], hi_r[rows]
    q_r, m = np.searchsorted(scale, np.asarray(q, dtype=float)), len(scale) + 1
    if q_at is not None:
        q_r = q_r[q_at]
    q_key, key = q_key.astype(np.int64), key.astype(np.int64)
    if 0 <= key.min() and key.max() < 4 * len(key):     # only the keys queried
        asked = np.zeros(int(key.max()) + 1, dtype=bool)
        asked[q_key[(q_key >= 0) & (q_key < len(asked))]] = True
        ok &= asked[key]
    mine = np.flatnonzero(ok) if by_key is None else by_key[ok[by_key]]
    # (key, value) as one integer; ties in it may come in any order (only the largest hi
    # up to the last of a tie counts)
    lo_k = key[mine] * m + lo_r[mine]
    by_lo = np.argsort(lo_k, kind="quicksort" if by_key is None else "stable")
    order, lo_k = mine[by_lo], lo_k[by_lo]
    k_s = key[order]
    # the largest hi so far within each key (keys ascending: earlier keys stay below)
    best = np.maximum.accumulate(k_s * m + hi_r[order]) - k_s * m
    # the intervals of a query's key with lo < q come just before (key, q) in that order
    # (the queries searched in order: much faster than at random)
    q_k = q_key * m + q_r
    by_q = np.argsort(q_k)
    at = np.empty(len(q_k), dtype=np.int64)
    at[by_q] = np.searchsorted(lo_k, q_k[by_q], side="left") - 1
    hit = at >= 0
    hit[hit] = k_s[at[hit]] == q_key[hit]
    out[hit] = best[at[hit]] >= q_r[hit]
    return out


def _span_columns(f: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A frame's ``pos``, ``event`` and ``hidden_by`` as float arrays (NaN: none)."""
    return (f["pos"].to_numpy(dtype=np.float64),
            f["event"].to_numpy(dtype=np.float64, na_value=np.nan),
            f["hidden_by"].to_numpy(dtype=np.float64, na_value=np.nan))


def _per_session(t: Transcript, occ: Occurrences
                 ) -> Iterable[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(session code, row positions in t.frame, in t.events, in t.calls) for every session
    of the frame, in order of first appearance (`_occurrences`' ``known``)."""
    n = len(occ.known)
    rows = _groups(occ.codes, n)
    ev, calls = _groups(occ.code_of(t.events["session"]), n), \
        _groups(occ.code_of(t.calls["session"]), n)
    for c, s in enumerate(occ.known):
        if not pd.isna(s):      # (a groupby's: NA is no session)
            yield c, rows[c], ev[c], calls[c]


def _groups(codes: np.ndarray, n: int) -> list[np.ndarray]:
    """The positions of each code ``0 .. n-1`` in ``codes``, ascending (others: none).

    Example:
        >>> [g.tolist() for g in _groups(np.array([1, 0, -1, 1]), 2)]
        [[1], [0, 3]]
    """
    if n == 1:
        return [np.flatnonzero(codes == 0)]
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n + 1))
    return [order[bounds[i]:bounds[i + 1]] for i in range(n)]


def _kinds(kinds: Iterable[str] | None) -> tuple[str, ...]:
    chosen = ARTIFACT_KINDS if kinds is None else tuple(kinds)
    bad = sorted(set(chosen) - set(ARTIFACT_KINDS))
    if bad or not chosen:
        raise ConfigError(f"unknown artifact kinds {bad or chosen!r}; kinds: "
                          f"{', '.join(ARTIFACT_KINDS)}")
    return chosen


def needed_facts_df(t: Transcript, *, kinds: Iterable[str] | None = None) -> pd.DataFrame:
    """Every needed artifact of every call, and whether the call's input missed it.

    An artifact is *needed* at call k when a part call k produced mentions it and a
    part of the log before k's input end mentioned it too (an original part, visible
    then when compaction is ignored: parts that compaction events inserted are not
    statements). It is *missing* when no part of k's input (summaries and placeholders
    included) mentions it.

    Args:
        t: an annotated transcript (compaction events and the parts they hid/inserted).
        kinds: artifact kinds to count (default: all of `ARTIFACT_KINDS`).

    Returns:
        ``session``, ``call``, ``kind``, ``value``, ``missing``.
    """
    cols = {"session": "string", "call": "int64", "kind": "string", "value": "object",
            "missing": "bool"}
    out = _needed(t, _kinds(kinds))
    if out.empty:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in cols.items()})
    order = out["kind"].map({k: i for i, k in enumerate(ARTIFACT_KINDS)})
    out = out.assign(_o=order).sort_values(["session", "call", "_o", "value"], kind="stable")
    return out[list(cols)].astype(cols).reset_index(drop=True)


def _needed(t: Transcript, chosen: tuple[str, ...]) -> pd.DataFrame:
    """The needed artifacts of every call (``session``, ``kind``, ``value``, ``aid``,
    ``call``, ``input_end_pos``, ``missing``), unordered: `needed_facts_df`'s rows."""
    occ, at, call, q, missing = _needed_arrays(t, chosen)
    return pd.DataFrame({"session": pd.Series(occ.sessions()[at], dtype=object),
                         "kind": pd.Series(artifact_kinds(occ.ids[at]), dtype=object),
                         "value": pd.Series(artifact_values(occ.ids[at]), dtype=object),
                         "aid": occ.aid[at], "call": call, "input_end_pos": q,
                         "missing": missing})


def _needed_arrays(t: Transcript, chosen: tuple[str, ...]) -> tuple[Any, ...]:
    """`_needed`'s rows as arrays: the occurrences (`Occurrences`), the positions in them
    of the needed artifacts (``at``), and per needed artifact its call, that call's
    ``input_end_pos`` and whether it was missing."""
    f = t.frame
    occ = _occurrences(t)
    if set(chosen) != set(ARTIFACT_KINDS):
        occ = occ.take(np.isin(occ.kinds(), chosen))
    n = len(f)
    lo, hi = np.full(n, np.inf), np.full(n, np.inf)
    base_lo, base_hi = np.full(n, np.inf), np.full(n, np.inf)
    pos, ins, hid = _span_columns(f)
    part = f["part"].to_numpy(dtype=np.float64, na_value=np.nan)
    ev_id, ev_pos = t.events["event"].to_numpy(dtype=np.int64), \
        t.events["pos"].to_numpy(dtype=np.float64)
    hist = t.events["origin"].isin(sorted(HISTORY_EDITS)).to_numpy(dtype=bool)
    back = taken_over(t.events)
    for c, idx, ev, _calls in _per_session(t, occ):
        lo[idx], hi[idx] = spans(pos[idx], ins[idx], hid[idx],
                                 dict(zip(ev_id[ev].tolist(), ev_pos[ev].tolist())))
        mine = ev[hist[ev]]
        base_lo[idx], base_hi[idx] = _base_of(
            pos[idx], ins[idx], hid[idx], part[idx], _parts_back(back, occ.known[c]),
            ev_id[mine].astype(np.float64), ev_pos[mine])
    rows, aid = occ.rows, occ.aid
    call = f["call"].to_numpy(dtype=np.float64, na_value=np.nan)
    # the artifacts each call produced: once per call, where the log has that call
    said = (f["role"] == "assistant").to_numpy(dtype=bool, na_value=False) \
        & ~np.isnan(call) & np.isnan(ins)
    at = np.flatnonzero(said[rows])
    made = call[rows[at]].astype(np.int64)
    first = _first(made, aid[at])
    at, made = at[first], made[first]
    calls = t.calls
    end_of = _matches(occ.scode[at], made, occ.code_of(calls["session"]),
                      calls["call"].to_numpy(dtype=np.int64, na_value=-1))
    at, made, end_of = at[end_of >= 0], made[end_of >= 0], end_of[end_of >= 0]
    ends = calls["input_end_pos"].to_numpy(dtype=float)
    stated = _stabbed(aid[at], ends, aid, base_lo, base_hi, rows, end_of, occ.by_aid())
    seen = _stabbed(aid[at], ends, aid, lo, hi, rows, end_of, occ.by_aid())
    return occ, at[stated], made[stated], ends[end_of[stated]], ~seen[stated]


def _first(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Positions of the first occurrence of each distinct pair ``(a, b)`` of non-negative
    integers, ascending (``drop_duplicates`` keeping the first).

    Example:
        >>> _first(np.array([1, 2, 1, 1]), np.array([5, 5, 5, 6])).tolist()
        [0, 1, 3]
    """
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    key = a.astype(np.int64) * (int(b.max()) + 1) + b
    return np.flatnonzero(~pd.Series(key).duplicated().to_numpy())


def _matches(a: np.ndarray, b: np.ndarray, ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    """For each pair ``(a[i], b[i])`` of non-negative integers, the row of ``(ra, rb)``
    holding it (pairs there are distinct; -1 in ``ra`` matches nothing), -1 where none
    does: an inner merge on two keys, by row.

    Example:
        >>> _matches(np.array([0, 0, 1]), np.array([1, 2, 1]), np.array([1, 0, -1]),
        ...          np.array([1, 2, 1])).tolist()
        [-1, 1, 0]
    """
    out = np.full(len(a), -1, dtype=np.int64)
    ok = np.flatnonzero((ra >= 0) & (rb >= 0))
    if not len(a) or not len(ok):
        return out
    m = int(max(b.max(), rb[ok].max())) + 1
    right = ra[ok].astype(np.int64) * m + rb[ok]
    left = a.astype(np.int64) * m + b
    top = int(right.max())
    if top < 4 * (len(left) + len(right)) + 4096:      # a table of every pair, by value
        if np.bincount(right).max() > 1:
            raise ValueError("_matches: the right-hand pairs repeat")
        table = np.full(top + 1, -1, dtype=np.int64)
        table[right] = ok
        inside = (left >= 0) & (left <= top)
        out[inside] = table[left[inside]]
        return out
    order = np.argsort(right, kind="stable")
    if len(right) > 1 and (np.diff(right[order]) == 0).any():
        raise ValueError("_matches: the right-hand pairs repeat")
    at = np.minimum(np.searchsorted(right[order], left), len(right) - 1)
    hit = right[order][at] == left
    out[hit] = ok[order[at[hit]]]
    return out


def needed_recall_df(t: Transcript, *, kinds: Iterable[str] | None = None) -> pd.DataFrame:
    """Needed-fact recall of every call (see `needed_facts_df` for the definitions).

    Returns:
        One row per call of ``t.calls``: ``session``, ``call``, ``needed``, ``missing``,
        ``recall`` (1 − missing/needed; NaN when nothing was needed) and
        ``missing_values`` (tuple of the missing values, by kind then value).

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl")  # with its recorded compaction
        >>> r = needed_recall_df(t, kinds=["number"]).set_index("call")
        >>> r.loc[[95, 109, 128], "missing_values"].tolist()  # port and rate limit lost
        [('8387',), ('87 requests',), ()]
    """
    facts = needed_facts_df(t, kinds=kinds)
    calls = t.calls[["session", "call"]].astype({"session": object, "call": "int64"})
    g = facts.astype({"session": object}).groupby(["session", "call"], sort=False)
    agg = pd.DataFrame({"needed": g.size(), "missing": g["missing"].sum()})
    lost = facts[facts["missing"]].astype({"session": object})
    values = lost.groupby(["session", "call"], sort=False)["value"].agg(tuple)
    out = calls.merge(agg.reset_index(), on=["session", "call"], how="left")
    out = out.merge(values.rename("missing_values").reset_index(), on=["session", "call"],
                    how="left")
    out[["needed", "missing"]] = out[["needed", "missing"]].fillna(0).astype("int64")
    out["recall"] = (1.0 - out["missing"] / out["needed"].where(out["needed"] > 0)) \
        .astype("float64")
    out["missing_values"] = [v if isinstance(v, tuple) else () for v in out["missing_values"]]
    out["session"] = out["session"].astype("string")
    return out[["session", "call", "needed", "missing", "recall", "missing_values"]]


def recall_summary(t: Transcript, *, kinds: Iterable[str] | None = None) -> dict[str, Any]:
    """Summary numbers of `needed_recall_df` (plain data)."""
    return summarize_recall(needed_recall_df(t, kinds=kinds))


def summarize_recall(df: pd.DataFrame) -> dict[str, Any]:
    """``calls``, ``calls_needing``, ``needed``, ``missing``, ``recall`` (pooled over calls:
    1 − total missing / total needed, NaN when nothing was needed), ``mean_call_recall``
    and ``calls_with_missing`` of a `needed_recall_df` result.

    Example:
        >>> df = pd.DataFrame({"needed": [4, 0, 2], "missing": [1, 0, 0],
        ...                    "recall": [0.75, float("nan"), 1.0]})
        >>> summarize_recall(df)["recall"], summarize_recall(df)["calls_with_missing"]
        (0.8333333333333334, 1)
    """
    needed, missing = int(df["needed"].sum()), int(df["missing"].sum())
    mean = df["recall"].mean()
    return {"calls": len(df), "calls_needing": int((df["needed"] > 0).sum()),
            "needed": needed, "missing": missing,
            "recall": 1.0 - missing / needed if needed else math.nan,
            "mean_call_recall": float(mean) if pd.notna(mean) else math.nan,
            "calls_with_missing": int((df["missing"] > 0).sum())}


def retention_df(t: Transcript, *, include_recorded: bool = False) -> pd.DataFrame:
    """What each compaction event kept of the artifacts in the parts it hid.

    The request right after an event is that of the first call whose input ends after
    the event, once this event and those before it (not those after) had applied. An
    artifact of a hidden part is retained when a part visible there (the event's
    summary or placeholders, other parts) has the same kind and value.

    Args:
        t: an annotated transcript.
        include_recorded: also measure recorded compactions (e.g. Claude Code's own).

    Returns:
        One row per compaction event that hid parts and per kind of `ARTIFACT_KINDS`
        plus ``"all"``: ``session``, ``event``, ``stage`` (the event's origin),
        ``kind``, ``hidden_artifacts`` (distinct values in the hidden parts),
        ``retained`` and ``retention`` (retained / hidden; NaN when nothing was hidden).
    """
    lost, events = _lost(t, include_recorded)
    cols = ["session", "event", "stage", "q"]
    both = pd.concat([lost, lost.assign(kind="all")], ignore_index=True)
    g = both.groupby(["session", "event", "kind"])["retained"].agg(["size", "sum"])
    grid = events[cols[:3]].merge(pd.DataFrame({"kind": [*ARTIFACT_KINDS, "all"]}),
                                  how="cross")
    out = grid.merge(g.reset_index(), how="left", on=["session", "event", "kind"])
    hidden = out["size"].fillna(0).astype("int64")
    kept = out["sum"].fillna(0).astype("int64")
    return pd.DataFrame({
        "session": out["session"].astype("string"), "event": out["event"].astype("int64"),
        "stage": out["stage"].astype("string"), "kind": out["kind"].astype("string"),
        "hidden_artifacts": hidden, "retained": kept,
        "retention": (kept / hidden.where(hidden > 0)).astype("float64")})


def _lost(t: Transcript, include_recorded: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The distinct artifacts each measured event hid (``session``, ``event``, ``stage``,
    ``kind``, ``aid``, ``q``, ``retained``), and the measured events (``session``,
    ``event``, ``stage``, ``q``): `retention_df`'s input."""
    occ, at, ev_of, events, q, retained = _lost_arrays(t, include_recorded)
    code, event, stage, event_q = events
    lost = pd.DataFrame({"session": occ.sessions()[at], "event": event[ev_of],
                         "stage": stage[ev_of], "kind": artifact_kinds(occ.ids[at]),
                         "aid": occ.aid[at], "q": q, "retained": retained})
    return lost, pd.DataFrame({"session": np.asarray(occ.known, dtype=object)[code],
                               "event": event, "stage": stage, "q": event_q})


def _lost_arrays(t: Transcript, include_recorded: bool) -> tuple[Any, ...]:
    """`_lost`'s rows as arrays: the occurrences (`Occurrences`), the positions in them of
    the lost artifacts (``at``) and of their events in the measured events (``ev_of``),
    those events (session code, ``event``, ``stage``, ``q``: arrays, in session then time
    order), and per lost artifact its event's ``q`` and whether it was retained."""
    f, skip = t.frame, HISTORY_EDITS | (set() if include_recorded else {"recorded"})
    occ = _occurrences(t)
    rows = occ.rows
    pos, ins, hid = _span_columns(f)
    lo, hi = np.zeros(len(f)), np.zeros(len(f))
    ev = t.events
    ev_id, ev_pos = ev["event"].to_numpy(dtype=np.int64), ev["pos"].to_numpy(dtype=np.float64)
    origin = ev["origin"].to_numpy(dtype=object)
    measures = ~ev["origin"].isin(sorted(skip)).to_numpy(dtype=bool)
    ends_of = t.calls["input_end_pos"].to_numpy(dtype=float)
    measured: list[tuple[np.ndarray, ...]] = []
    for c, idx, mine, calls in _per_session(t, occ):
        mine = mine[np.lexsort((ev_id[mine], ev_pos[mine]))]    # time order
        order = dict(zip(ev_id[mine].tolist(), range(len(mine))))
        ends = np.sort(ends_of[calls])
        req = np.append(ends, np.inf)[np.searchsorted(ends, ev_pos[mine], side="right")]
        first = np.searchsorted(req, pos[idx], side="right")
        # a part shows in the requests after events lo + ½ ... hi − ½ (time-order ranks)
        lo[idx] = np.maximum(_rank(ins[idx], order, -1), first) - 0.5
        hi[idx] = _rank(hid[idx], order, len(mine)) - 0.5
        chosen = mine[measures[mine] & np.isin(ev_id[mine], hid[idx])]
        measured.append((np.full(len(chosen), c), ev_id[chosen], origin[chosen],
                         _rank(ev_id[chosen].astype(np.float64), order, 0)))
    cols = [np.concatenate(c) for c in zip(*measured)] if measured else [[]] * 4
    events = tuple(np.asarray(c, dtype=d) for c, d in zip(cols, (np.int64, np.int64, object,
                                                                 np.float64)))
    # each measured event's hidden parts' artifacts, once per event
    at = np.flatnonzero(~np.isnan(hid[rows]))
    ev_of = _matches(occ.scode[at], hid[rows[at]].astype(np.int64), events[0], events[1])
    at, ev_of = at[ev_of >= 0], ev_of[ev_of >= 0]
    aid = occ.aid
    first = _first(ev_of, aid[at])
    at, ev_of = at[first], ev_of[first]
    return occ, at, ev_of, events, events[3][ev_of], _stabbed(
        aid[at], events[3], aid, lo, hi, rows, ev_of, occ.by_aid())


def loss_totals(t: Transcript) -> dict[str, Any]:
    """What a sweep records of an annotated transcript's losses, without the per-call and
    per-event frames: ``needed``, ``missing``, ``recall`` (as `summarize_recall` of
    `needed_recall_df`) and ``hidden_artifacts``, ``retained``, ``retention`` (as
    `summarize_retention` of `retention_df`)."""
    lacked = _needed_arrays(t, ARTIFACT_KINDS)[-1]
    needed, missing = len(lacked), int(lacked.sum()) if len(lacked) else 0
    retained = _lost_arrays(t, False)[-1]
    hidden, kept = len(retained), int(retained.sum()) if len(retained) else 0
    return {"needed": needed, "missing": missing,
            "recall": 1.0 - missing / needed if needed else math.nan,
            "hidden_artifacts": hidden, "retained": kept,
            "retention": kept / hidden if hidden else math.nan}


def _rank(ids: np.ndarray, order: dict[int, int], absent: int) -> np.ndarray:
    """Time-order rank of each event id (floats; ``absent`` where NaN or not in ``order``)."""
    values = np.asarray(ids, dtype=np.float64)
    out = np.full(len(values), float(absent))
    if not order or not len(values):
        return out
    keys = np.fromiter(order.keys(), dtype=np.float64, count=len(order))
    ranks = np.fromiter(order.values(), dtype=np.float64, count=len(order))
    by_key = np.argsort(keys, kind="stable")
    keys, ranks = keys[by_key], ranks[by_key]
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    found = keys[at] == values          # (NaN: never)
    out[found] = ranks[at[found]]
    return out


def retention_summary(t: Transcript, *, include_recorded: bool = False) -> dict[str, Any]:
    """Summary numbers of `retention_df` (plain data)."""
    return summarize_retention(retention_df(t, include_recorded=include_recorded))


def summarize_retention(df: pd.DataFrame) -> dict[str, Any]:
    """``events``, ``hidden_artifacts``, ``retained``, ``retention`` (pooled over events),
    ``mean_retention`` (mean over events) and ``retention_by_kind`` (kind → mean over
    the events that hid that kind) of a `retention_df` result."""
    all_ = df[df["kind"] == "all"]
    hidden, kept = int(all_["hidden_artifacts"].sum()), int(all_["retained"].sum())
    by_kind = df[df["kind"] != "all"].groupby("kind", sort=False)["retention"].mean()
    mean = all_["retention"].mean()
    return {"events": len(all_), "hidden_artifacts": hidden, "retained": kept,
            "retention": kept / hidden if hidden else math.nan,
            "mean_retention": float(mean) if pd.notna(mean) else math.nan,
            "retention_by_kind": {k: float(by_kind.get(k, math.nan)) for k in ARTIFACT_KINDS}}
