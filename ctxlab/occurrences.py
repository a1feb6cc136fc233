"""Every artifact of every part of a frame, as arrays: what recall and retention read.

`occurrences` finds the artifacts of a frame's parts (`ctxlab.artifacts.artifact_ids`,
with each part's instruction flag: `instruction_flags`), writes each file one way within
a session (`one_spelling`) and numbers each distinct (session, kind, value) (``aid``), one
array per column, no frame (`ctxlab.metrics.part_artifacts` is the frame).

A sweep measures the replays of one session one after the other, and a replay's frame is
the session's with some parts hidden and others inserted: given the last frame's `Texts`,
each part it has with the same text and flag takes its artifacts from there, and only
the other parts' distinct texts are looked up (`Texts.artifacts`).
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pandas as pd

from ctxlab.artifacts import (artifact_ids, artifact_kinds, artifact_values, ids_generation,
                              path_ids as _path_ids)
from ctxlab.layers import INJECTED_CONTEXT


class Occurrences:
    """The artifacts of a frame's parts (`occurrences`): per artifact, its row position in
    the frame (``rows``), the code of its session (``scode``), its id
    (`ctxlab.artifacts.artifact_ids`, in `one_spelling`) and ``aid`` (one integer per
    distinct session, kind and value, in order of first occurrence); per row of the
    frame, the code of its session (``codes``: positions in ``known``, the frame's
    sessions in order of first appearance); and the frame's `Texts`. Kinds, values and
    sessions are looked up when asked. Read-only."""

    def __init__(self, rows: np.ndarray, scode: np.ndarray, ids: np.ndarray,
                 aid: np.ndarray, codes: np.ndarray, known: pd.Index,
                 session: np.ndarray, texts: Texts | None = None) -> None:
        self.rows, self.scode, self.ids, self.aid = rows, scode, ids, aid
        self.codes, self.known, self._session, self.texts = codes, known, session, texts
        self._by_aid: np.ndarray | None = None

    def kinds(self) -> np.ndarray:
        """The kind of every artifact (objects)."""
        return artifact_kinds(self.ids)

    def values(self) -> np.ndarray:
        """The value of every artifact (objects; paths in `one_spelling`)."""
        return artifact_values(self.ids)

    def sessions(self) -> np.ndarray:
        """The session of every artifact (objects)."""
        return self._session[self.rows]

    def by_aid(self) -> np.ndarray | None:
        """The artifacts' positions in ``aid`` order (stable), when a radix sort finds
        them (fewer than 65,536 aids; None otherwise)."""
        if self._by_aid is None and len(self.aid) and self.aid.max() < 1 << 16:
            self._by_aid = np.argsort(self.aid.astype(np.uint16), kind="stable")
        return self._by_aid

    def code_of(self, sessions: pd.Series) -> np.ndarray:
        """The code of each of some sessions (-1: not in the frame), e.g. of calls."""
        if len(self.known) == 1 and not self.known.hasnans:
            return np.where(sessions.eq(self.known[0]).to_numpy(dtype=bool, na_value=False),
                            0, -1)
        return self.known.get_indexer(sessions.to_numpy(dtype=object))

    def take(self, keep: np.ndarray) -> Occurrences:
        """The artifacts where ``keep`` (a mask) holds."""
        return Occurrences(self.rows[keep], self.scode[keep], self.ids[keep],
                           self.aid[keep], self.codes, self.known, self._session)


def occurrences(f: pd.DataFrame, last: Texts | None = None) -> Occurrences:
    """The artifacts of every part of a frame (``last``: another frame's `Texts`, whose
    parts' artifacts are taken where the part, text and flag are the same).

    Example:
        >>> f = pd.DataFrame({"session": "s", "part": [0, 1], "msg": [0, 1], "turn": 1,
        ...                   "role": ["user", "assistant"], "kind": "text",
        ...                   "content": ["Fix /r/src/x.py", "Fixed src/x.py."]})
        >>> occ = occurrences(f)
        >>> occ.rows.tolist(), occ.values().tolist(), occ.aid.tolist()
        ([0, 1], ['src/x.py', 'src/x.py'], [0, 0])
    """
    session, no_session = _objects(f["session"])
    # one code per session, in order of first appearance: how calls and events are matched
    if len(session) and not no_session.any() and (session == session[0]).all():
        codes, known = np.zeros(len(session), dtype=np.int64), session[:1]   # (a replay's)
    else:
        codes, known = pd.factorize(session, use_na_sentinel=False)
        codes = codes.astype(np.int64)
    content, no_text = _objects(f["content"])
    if no_text.any():
        content = np.where(no_text, "", content)
    texts = Texts(content, instruction_flags(f, np.where(no_session, -1, codes), content),
                  f["part"].to_numpy(dtype=np.float64, na_value=np.nan))
    rows, ids = texts.artifacts(last)
    scode = codes[rows]
    # each distinct (session, artifact) once: spelled, then numbered in order of first
    # occurrence (the numbering of every occurrence: the same first occurrences)
    labels, keys = pd.factorize((scode << 32) | ids)
    paths = np.zeros(len(keys), dtype=bool)
    paths[labels[texts.path]] = True
    spelled = _respelled(keys & _LOW, keys >> 32, np.flatnonzero(paths))
    aid = pd.factorize(((keys >> 32) << 32) | spelled)[0][labels]
    return Occurrences(rows, scode, spelled[labels], aid.astype(np.int64), codes,
                       pd.Index(known, dtype=object), session, texts)


def _objects(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """A column as objects, and where it is NA."""
    return col.to_numpy(dtype=object), col.isna().to_numpy(dtype=bool)


def _is(col: pd.Series, value: str) -> np.ndarray:
    """``col == value`` as booleans (NA: False), compared as objects (much faster than a
    string column's ``==``)."""
    values, missing = _objects(col)
    if missing.any():
        values = np.where(missing, None, values)
    return np.asarray(values == value, dtype=bool)


class Texts:
    """A frame's texts (NA as ""), instruction flags (`instruction_flags`) and ``part``
    ids, and once found (`artifacts`) the artifacts of each row: ``ids[start[i]:start[i] +
    count[i]]`` (``path``: which are paths), valid while the artifact ids stay in
    generation ``generation`` (`ctxlab.artifacts.ids_generation`)."""

    def __init__(self, texts: np.ndarray, user: np.ndarray, part: np.ndarray) -> None:
        self.texts, self.user, self.part = texts, user, part
        self.start = self.count = self.ids = np.zeros(0, dtype=np.int64)
        self.path = np.zeros(0, dtype=bool)
        self.generation = -1

    def artifacts(self, last: Texts | None) -> tuple[np.ndarray, np.ndarray]:
        """`artifact_ids` of the rows (row of each artifact, its id), taking those of
        ``last`` (another frame's) for every row whose part there has the same text and
        flag: a replay's frame is its session's with some parts inserted. The other rows'
        distinct texts are looked up once each (a stage inserts one placeholder many
        times)."""
        n, generation = len(self.texts), ids_generation()
        source = np.full(n, -1, dtype=np.int64)      # the row of ``last`` taken
        if last is not None and last.generation == generation and len(last.part):
            order = np.argsort(last.part, kind="stable")
            at = np.minimum(np.searchsorted(last.part[order], self.part), len(order) - 1)
            row = order[at]
            same = (last.part[row] == self.part) & (last.user[row] == self.user)
            same[same] = last.texts[row[same]] == self.texts[same]
            source[same] = row[same]
        taken = source >= 0
        new = np.flatnonzero(~taken)
        # distinct (text, flag) pairs, numbered in order of first row (a dict: a text's
        # hash is kept, pandas' hash tables hash each text again)
        pairs: dict[tuple[str, bool], int] = {}
        which = np.fromiter((pairs.setdefault(k, len(pairs)) for k in zip(
            self.texts[new].tolist(), self.user[new].tolist())), dtype=np.int64, count=len(new))
        first = new[np.flatnonzero(np.diff(np.maximum.accumulate(which), prepend=-1) > 0)]
        rows = ids = np.zeros(0, dtype=np.int64)
        if len(first):
            rows, ids = artifact_ids(pd.Series(self.texts[first], dtype=object),
                                     user=pd.Series(self.user[first], dtype=bool))
            if taken.any() and ids_generation() != generation:    # ids restarted meanwhile
                return self.artifacts(None)
        path = artifact_kinds(ids) == "path" if len(ids) else np.zeros(0, dtype=bool)
        count_of = np.bincount(rows, minlength=len(first))
        count, start = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        count[new] = count_of[which]
        if taken.any():         # ``start``: in last.ids, then in ids after them
            count[taken] = last.count[source[taken]]
            start[taken] = last.start[source[taken]]
            ids, path = np.concatenate([last.ids, ids]), np.concatenate([last.path, path])
        start[new] = (len(ids) - len(rows) + np.cumsum(count_of) - count_of)[which]
        end = np.cumsum(count)
        # every row's run of ids, one after the other
        take = np.arange(end[-1] if n else 0) - np.repeat(end - count - start, count)
        self.ids, self.path = ids[take], path[take]
        self.count, self.start, self.generation = count, end - count, generation
        return np.repeat(np.arange(n, dtype=np.int64), count), self.ids


_LOW = (1 << 32) - 1
_INJECTED = re.compile(INJECTED_CONTEXT)


def instruction_flags(f: pd.DataFrame, codes: np.ndarray | None = None,
                      texts: np.ndarray | None = None) -> np.ndarray:
    """`ctxlab.artifacts.instruction_rows` of a frame as a boolean array, from arrays
    (``codes``: the rows' session codes, -1 for none; ``texts``: the contents as objects,
    when known).

    Example:
        >>> from ctxlab.artifacts import instruction_rows
        >>> f = pd.DataFrame({"session": "s", "part": [0, 1, 2], "msg": [0, 1, 2],
        ...                   "turn": [1, 1, 2], "role": ["user", "user", "assistant"],
        ...                   "kind": ["text", "text", "summary"], "content": "Use uv."})
        >>> instruction_flags(f).tolist(), instruction_rows(f).tolist()
        ([True, False, True], [True, False, True])
    """
    if codes is None:
        codes = pd.factorize(f["session"])[0].astype(np.int64)
    turn = f["turn"].to_numpy(dtype=np.float64, na_value=np.nan)
    msg = f["msg"].to_numpy(dtype=np.float64, na_value=np.nan)
    out = _is(f["kind"], "summary")
    real = (turn > 0) & ~np.isnan(msg) & _is(f["role"], "user") & _is(f["kind"], "text")
    # the first message of each (session, turn): the smallest msg of the turn's rows
    grouped = np.flatnonzero((turn > 0) & (codes >= 0))
    if not real.any() or not len(grouped):
        return out
    turns = turn[grouped].astype(np.int64)
    key = codes[grouped] * (int(turns.max()) + 1) + turns
    distinct, inverse = np.unique(key, return_inverse=True)
    first = np.full(len(distinct), np.inf)
    np.fmin.at(first, inverse, msg[grouped])
    is_first = np.zeros(len(f), dtype=bool)
    is_first[grouped] = msg[grouped] == first[inverse]
    content = texts if texts is not None else f["content"].to_numpy(dtype=object)
    for i in np.flatnonzero(real & is_first):      # (a text, not a summary)
        out[i] = _INJECTED.match(content[i] if isinstance(content[i], str) else "") is None
    return out


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
    return _respelled(ids, scode, np.flatnonzero(artifact_kinds(ids) == "path"))


def _respelled(ids: np.ndarray, scode: np.ndarray, at: np.ndarray) -> np.ndarray:
    """`one_spelling`, given the positions of the paths (``at``, ascending)."""
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
