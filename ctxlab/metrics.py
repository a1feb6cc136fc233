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

The extraction rules are in `ctxlab.artifacts`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.artifacts import (ARTIFACT_KINDS, artifact_ids, artifact_kinds,  # noqa: F401
                              artifact_values, artifacts, artifacts_cached, ids_generation,
                              instruction_rows, path_ids as _path_ids)
from ctxlab.errors import ConfigError
from ctxlab.history import taken_over
from ctxlab.schema import HISTORY_EDITS, Transcript  # noqa: F401 (HISTORY_EDITS re-exported)
from ctxlab.visibility import part_spans


def part_artifacts(t: Transcript) -> pd.DataFrame:
    """`artifacts` of every part of a transcript: ``row`` is the row position in ``t.frame``.

    Adds ``session`` and ``aid`` (one integer per distinct session, kind and value).
    """
    occ = _occurrences(t)
    return pd.DataFrame({"row": pd.Series(occ["row"].tolist(), dtype=object),
                         "kind": pd.Series(occ["kind"].to_numpy(), dtype="str"),
                         "value": occ["value"], "session": occ["session"],
                         "aid": occ["aid"]})


def _occurrences(t: Transcript) -> pd.DataFrame:
    """`part_artifacts` with plain columns (``row`` int64; text as objects), remembered
    for the last frame (a frame is never changed in place): do not modify."""
    f = t.frame
    if _LAST and _LAST[0] is f:          # recall and retention of one replay share it
        return _LAST[1]
    texts = f["content"].reset_index(drop=True)
    rows, ids = artifact_ids(texts, user=instruction_rows(f).reset_index(drop=True))
    session = f["session"].to_numpy(dtype=object)
    codes = _session_codes(t, session)
    ids = one_spelling(ids, codes[rows])
    occ = pd.DataFrame({"row": rows, "scode": codes[rows],
                        "kind": pd.Series(artifact_kinds(ids), dtype=object),
                        "value": pd.Series(artifact_values(ids), dtype=object),
                        "session": pd.Series(session[rows], dtype=object),
                        # one integer per (session, kind, value), in order of first occurrence
                        "aid": pd.factorize((codes[rows] << 32) | ids)[0]})
    _LAST[:] = [f, occ]
    return occ


def one_spelling(ids: np.ndarray, scode: np.ndarray) -> np.ndarray:
    """Artifact ids with each file written one way within a session: ``./src/x.py`` as
    ``src/x.py``; a diff's ``a/src/x.py`` and ``b/src/x.py`` (both written) as
    ``src/x.py``; and an absolute path as the longest relative path of two or more
    segments of the same session it ends with, when no other absolute path of the session
    ends with it (``/home/u/proj/lib/x.ex`` as ``lib/x.ex``: agents read absolute paths,
    summaries and diffs name them relative; 20 of the 24 paths "missing" after the real
    Claude Code compactions were in the request, written the other way). Two checkouts of
    one file (``/a/x/y.py``, ``/b/x/y.py``) stay two.

    Example:
        >>> from ctxlab.artifacts import artifact_ids, artifact_values
        >>> texts = pd.Series(["read /home/u/p/lib/x.ex", "edited lib/x.ex", "see ./lib/x.ex",
        ...                    "and /srv/lib/y.ex", "a/b/c.py"])
        >>> rows, ids = artifact_ids(texts)
        >>> artifact_values(one_spelling(ids, np.zeros(len(ids), np.int64))).tolist()
        ['lib/x.ex', 'lib/x.ex', 'lib/x.ex', '/srv/lib/y.ex', 'a/b/c.py']
    """
    at = np.flatnonzero(artifact_kinds(ids) == "path")
    if not len(at):
        return ids
    out = ids.copy()
    order = at[np.argsort(scode[at], kind="stable")]
    codes = scode[order]
    cuts = np.flatnonzero(np.diff(codes)) + 1
    for mine in np.split(order, cuts):
        distinct, inverse = np.unique(ids[mine], return_inverse=True)
        spelled = _spelled(distinct)
        if spelled is not None:
            out[mine] = spelled[inverse]
    return out


def _spelled(distinct: np.ndarray) -> np.ndarray | None:
    """The id each of a session's distinct path ids (ascending) becomes (`_spellings`),
    None when none changes; remembered for the last `SPELLINGS_KEPT` sets of paths (every
    replay of a session has the same paths, or nearly)."""
    key, generation = distinct.tobytes(), ids_generation()
    with _SPELLED_LOCK:
        got = _SPELLED.get(key)
    if got is not None and got[0] == generation:
        return got[1]
    values = artifact_values(distinct).tolist()
    mapped = _spellings(values)
    spelled = None
    if mapped:
        new = dict(zip(mapped, _path_ids(list(mapped.values())).tolist()))
        spelled = np.array([new.get(v, i) for v, i in zip(values, distinct.tolist())],
                           dtype=np.int64)
    with _SPELLED_LOCK:     # a Dask worker runs threads
        _SPELLED[key] = (generation, spelled)
        while len(_SPELLED) > SPELLINGS_KEPT:
            del _SPELLED[next(iter(_SPELLED))]
    return spelled


SPELLINGS_KEPT = 64
_SPELLED: dict[bytes, tuple[int, np.ndarray | None]] = {}
_SPELLED_LOCK = threading.Lock()


def _spellings(values: list[str]) -> dict[str, str]:
    """`one_spelling`'s renaming of one session's distinct paths (value -> its spelling)."""
    plain = {v: v[2:] if v.startswith("./") else v for v in values}
    written = set(plain.values())
    relative = {v for v in written if "/" in v and not v.startswith(("/", "~"))}
    out: dict[str, str] = {}
    ends: dict[str, list[str]] = {}           # relative path -> absolute paths ending so
    for v, c in plain.items():
        if c[:2] in ("a/", "b/") and c[2:] in relative and \
                {"a/" + c[2:], "b/" + c[2:]} <= written:
            c = c[2:]
        elif c.startswith(("/", "~")):
            segs = c.split("/")
            found = next((s for s in ("/".join(segs[i:]) for i in range(1, len(segs) - 1))
                          if s in relative), None)
            if found is not None:
                ends.setdefault(found, []).append(v)
            continue
        if c != v:
            out[v] = c
    for rel, absolute in ends.items():
        if len({plain[v] for v in absolute}) == 1:      # one file, not two checkouts
            out.update({v: rel for v in absolute})
    return out


_LAST: list[Any] = []
"""The last frame `_occurrences` read and its result (a frame is never changed in place)."""


def _base_spans(f: pd.DataFrame, ev: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """`part_spans` with compaction undone: only history edits (`HISTORY_EDITS`) count,
    and parts that other events inserted are never seen."""
    hist = ev[ev["origin"].isin(sorted(HISTORY_EDITS))]
    keep_ins, keep_hid = f["event"].isin(hist["event"]), f["hidden_by"].isin(hist["event"])
    hider = f["hidden_by"].where(keep_hid)
    back = taken_over(ev)
    if back:        # hidden first by a stage, then by the log's own edit (a user's /clear)
        hider = pd.Series([back.get((s, p), h) for s, p, h in zip(
            f["session"], f["part"], hider)], index=f.index, dtype=f["hidden_by"].dtype)
    lo, hi = part_spans(f.assign(event=f["event"].where(keep_ins), hidden_by=hider), hist)
    return np.where((f["event"].notna() & ~keep_ins).to_numpy(), np.inf, lo), hi


def _stabbed(q_key: np.ndarray, q: np.ndarray, key: np.ndarray, lo: np.ndarray,
             hi: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """For each query ``(key, q)``: does an interval of that key have ``lo < q <= hi``?
    (``rows``: interval i's bounds are ``lo[rows[i]]``, ``hi[rows[i]]``, per-row arrays.)

    One sort and one search: the largest ``hi`` among intervals with ``lo < q``.

    Example:
        >>> _stabbed(np.array([0, 0, 1]), np.array([1.5, 3.0, 1.5]), np.array([0, 1]),
        ...          np.array([1.0, 0.0]), np.array([2.0, 1.0])).tolist()
        [True, False, False]
    """
    out = np.zeros(len(q), dtype=bool)
    lo, hi, q = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float), q.astype(float)
    # one integer scale for every bound and query (any order-keeping one gives the same
    # answers): ranked once per row, not once per interval
    scale = np.unique(np.concatenate([lo, hi, q]))
    lo_r, hi_r = np.searchsorted(scale, lo), np.searchsorted(scale, hi)
    ok = lo < hi
    if rows is not None:
        lo_r, hi_r, ok = lo_r[rows], hi_r[rows], ok[rows]
    if not len(q) or not ok.any():
        return out
    key, lo_r, hi_r = key[ok].astype(np.int64), lo_r[ok], hi_r[ok]
    q_r, m = np.searchsorted(scale, q), len(scale) + 1
    # (key, value) as one integer; ties in it may come in any order (only the largest hi
    # up to the last of a tie counts)
    lo_k = key * m + lo_r
    order = np.argsort(lo_k)
    k_s = key[order]
    # the largest hi so far within each key (keys ascending: earlier keys stay below)
    best = np.maximum.accumulate(k_s * m + hi_r[order]) - k_s * m
    # the intervals of a query's key with lo < q come just before (key, q) in that order
    at = np.searchsorted(lo_k[order], q_key.astype(np.int64) * m + q_r, side="left") - 1
    hit = at >= 0
    hit[hit] = k_s[at[hit]] == q_key[hit]
    out[hit] = best[at[hit]] >= q_r[hit]
    return out


def _per_session(t: Transcript) -> Iterable[tuple[str, np.ndarray, pd.DataFrame, pd.DataFrame]]:
    """(session, row positions in t.frame, its events, its calls) for every session."""
    ev_idx = t.events.groupby("session", sort=False).indices
    call_idx = t.calls.groupby("session", sort=False).indices
    for s, idx in t.frame.groupby("session", sort=False).indices.items():
        yield (s, idx, t.events.iloc[ev_idx.get(s, [])],
               t.calls.iloc[call_idx.get(s, [])])


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
    occ, at, aid, call, q, missing = _needed_arrays(t, chosen)
    return pd.DataFrame({"session": pd.Series(occ["session"].to_numpy(dtype=object)[at],
                                              dtype=object),
                         "kind": pd.Series(occ["kind"].to_numpy(dtype=object)[at], dtype=object),
                         "value": pd.Series(occ["value"].to_numpy(dtype=object)[at],
                                            dtype=object),
                         "aid": aid[at], "call": call[at].astype(np.int64),
                         "input_end_pos": q, "missing": missing})


def _needed_arrays(t: Transcript, chosen: tuple[str, ...]) -> tuple[Any, ...]:
    """`_needed`'s rows as arrays: the occurrences, the positions in them of the needed
    artifacts (``at``), every occurrence's ``aid`` and ``call``, and per needed artifact
    its call's ``input_end_pos`` and whether it was missing."""
    f = t.frame
    occ = _occurrences(t)
    if set(chosen) != set(ARTIFACT_KINDS):
        occ = occ[occ["kind"].isin(chosen)]
    n = len(f)
    lo, hi = np.full(n, np.inf), np.full(n, np.inf)
    base_lo, base_hi = np.full(n, np.inf), np.full(n, np.inf)
    for _, idx, ev, _calls in _per_session(t):
        lo[idx], hi[idx] = part_spans(f.iloc[idx], ev)
        base_lo[idx], base_hi[idx] = _base_spans(f.iloc[idx], ev)
    rows = occ["row"].to_numpy(dtype=np.int64)
    aid = occ["aid"].to_numpy(dtype=np.int64)
    call = f["call"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    # the artifacts each call produced: once per call, where the log has that call
    at = np.flatnonzero((f["role"].to_numpy(dtype=object)[rows] == "assistant")
                        & ~np.isnan(call) & f["event"].isna().to_numpy()[rows])
    at = at[_first(call[at].astype(np.int64), aid[at])]
    calls = t.calls
    end_of = _matches(occ["scode"].to_numpy()[at], call[at].astype(np.int64),
                      _session_codes(t, calls["session"]),
                      calls["call"].to_numpy(dtype=np.int64, na_value=-1))
    at, end_of = at[end_of >= 0], end_of[end_of >= 0]
    q = calls["input_end_pos"].to_numpy(dtype=float)[end_of]
    stated = _stabbed(aid[at], q, aid, base_lo, base_hi, rows)
    seen = _stabbed(aid[at], q, aid, lo, hi, rows)
    return occ, at[stated], aid, call, q[stated], ~seen[stated]


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
    return np.sort(np.unique(key, return_index=True)[1])


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
    order = np.argsort(right, kind="stable")
    if len(right) > 1 and (np.diff(right[order]) == 0).any():
        raise ValueError("_matches: the right-hand pairs repeat")
    left = a.astype(np.int64) * m + b
    at = np.minimum(np.searchsorted(right[order], left), len(right) - 1)
    hit = right[order][at] == left
    out[hit] = ok[order[at[hit]]]
    return out


def _session_codes(t: Transcript, sessions: Any) -> np.ndarray:
    """One integer per session (its order of first appearance in ``t.frame``), -1 for a
    session the frame does not have: the ``scode`` of `_occurrences`, and how calls and
    events are matched to it."""
    known = pd.Index(pd.unique(t.frame["session"].to_numpy(dtype=object)))
    return known.get_indexer(np.asarray(sessions, dtype=object)).astype(np.int64)


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
    lost = pd.DataFrame({"session": occ["session"].to_numpy(dtype=object)[at],
                         "event": events["event"].to_numpy()[ev_of],
                         "stage": events["stage"].to_numpy()[ev_of],
                         "kind": occ["kind"].to_numpy(dtype=object)[at],
                         "aid": occ["aid"].to_numpy(dtype=np.int64)[at],
                         "q": q, "retained": retained})
    return lost, events


def _lost_arrays(t: Transcript, include_recorded: bool) -> tuple[Any, ...]:
    """`_lost`'s rows as arrays: the occurrences, the positions in them of the lost
    artifacts (``at``) and of their events in the measured events (``ev_of``), those
    events, and per lost artifact its event's ``q`` and whether it was retained."""
    f, skip = t.frame, HISTORY_EDITS | (set() if include_recorded else {"recorded"})
    occ = _occurrences(t)
    rows = occ["row"].to_numpy(dtype=np.int64)
    lo, hi = np.zeros(len(f)), np.zeros(len(f))
    measured = []
    for s, idx, ev, calls in _per_session(t):
        ev = ev.sort_values(["pos", "event"], kind="stable")  # time order
        order = dict(zip(ev["event"].astype("int64").tolist(), range(len(ev))))
        ends = np.sort(calls["input_end_pos"].to_numpy(dtype=float))
        req = np.append(ends, np.inf)[np.searchsorted(ends, ev["pos"].to_numpy(dtype=float),
                                                      side="right")]
        fs = f.iloc[idx]
        first = np.searchsorted(req, fs["pos"].to_numpy(dtype=float), side="right")
        # a part shows in the requests after events lo + ½ ... hi − ½ (time-order ranks)
        lo[idx] = np.maximum(_rank(fs["event"], order, -1), first) - 0.5
        hi[idx] = _rank(fs["hidden_by"], order, len(ev)) - 0.5
        chosen = ev[~ev["origin"].isin(sorted(skip)) & ev["event"].isin(fs["hidden_by"])]
        measured.append(pd.DataFrame({"session": s, "event": chosen["event"].astype("int64"),
                                      "stage": chosen["origin"].astype(object),
                                      "q": _rank(chosen["event"], order, 0)}))
    cols = ["session", "event", "stage", "q"]
    events = pd.concat(measured, ignore_index=True) if measured else pd.DataFrame(columns=cols)
    events = events.astype({"session": object, "event": "int64"})
    # each measured event's hidden parts' artifacts, once per event
    hid = f["hidden_by"].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    at = np.flatnonzero(~np.isnan(hid))
    ev_of = _matches(occ["scode"].to_numpy()[at], hid[at].astype(np.int64),
                     _session_codes(t, events["session"]),
                     events["event"].to_numpy(dtype=np.int64))
    at, ev_of = at[ev_of >= 0], ev_of[ev_of >= 0]
    aid = occ["aid"].to_numpy(dtype=np.int64)
    first = _first(ev_of, aid[at])
    at, ev_of = at[first], ev_of[first]
    q = events["q"].to_numpy(dtype=float)[ev_of]
    return occ, at, ev_of, events, q, _stabbed(aid[at], q, aid, lo, hi, rows)


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


def _rank(ids: pd.Series, order: dict[int, int], absent: int) -> np.ndarray:
    """Time-order rank of each event id (``absent`` where NA or not in ``order``)."""
    values = ids.to_numpy(dtype=np.float64, na_value=np.nan)
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
