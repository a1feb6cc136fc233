"""What a sweep's results say it left out, as plain values in ``df.attrs``: the records
of the swept logs that could not be used (`skipped_records`), the sessions it does not
replay (`replayed_sessions`: those without calls or parts, `left_out`; sessions that are
no agent's conversation, `not_replayed_records`) and the lists that carry them
(`SharedRecords`). `ctxlab.sweep` re-exports them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from ctxlab.replay import helper_sessions
from ctxlab.schema import Transcript


def replayed_sessions(t: Transcript) -> list[str]:
    """The sessions of a log that a sweep replays: those with parts and calls, in log
    order (a session of calls alone has no request to replay: `calls_without_input`),
    but for sessions that are no agent's conversation (`helper_sessions`: Claude Code's
    compaction summarizer request), which `not_replayed_records` lists."""
    helpers = helper_sessions(t)
    return [s for s in pd.unique(t.frame["session"])
            if s not in helpers and (t.calls["session"] == s).any()]


NOT_REPLAYED = "not replayed"
"""The ``status`` of the rows `not_replayed_records` adds to a log's skipped records (a
sweep carries them apart: ``attrs["not_replayed"]``)."""


def not_replayed_records(t: Transcript) -> pd.DataFrame:
    """One load-report row per session of a log a sweep leaves out as no agent's
    conversation (`helper_sessions`): ``file`` (the log), ``where`` (``session <id>``),
    ``record`` ``session``, ``status`` `NOT_REPLAYED` and the ``reason``."""
    helpers = helper_sessions(t)
    return _not_replayed([str(t.meta.get("path") or "")] * len(helpers), list(helpers),
                         list(helpers.values()))


def _not_replayed(files: list[str], sessions: list[str], reasons: list[str]) -> pd.DataFrame:
    from ctxlab.schema import REPORT_COLUMNS, coerce
    n = len(files)
    return coerce({"file": files, "line": [None] * n,
                   "where": [f"session {s}" for s in sessions], "record": ["session"] * n,
                   "status": [NOT_REPLAYED] * n, "parts": [0] * n, "reason": reasons},
                  REPORT_COLUMNS)


def partitions_not_replayed(files: pd.DataFrame) -> pd.DataFrame:
    """`not_replayed_records` of a corpus dataset's partitions (``Corpus.files`` rows
    whose note says why a sweep leaves them out)."""
    return _not_replayed(files["source"].astype(str).tolist(),
                         files["session"].astype(str).tolist(),
                         files["note"].astype(str).tolist())


def listed_sessions(t: Transcript) -> tuple[list[str], pd.DataFrame]:
    """The sessions of a log a sweep replays, and the records it runs without: those
    that could not be used (`LoadReport.skipped`) and the sessions it leaves out
    (`not_replayed_records`)."""
    sk = t.load_report.skipped.reset_index(drop=True)
    left = not_replayed_records(t)
    return replayed_sessions(t), pd.concat([sk, left], ignore_index=True) if len(left) else sk


LeftOut = dict[str, list[dict[str, Any]]]
"""What a sweep leaves out of a log besides its skipped records: ``sessions_without_calls``
(``file``, ``session``) and ``calls_without_input`` (``file``, ``session``, ``call``,
``source``), as plain values (`left_out`)."""
NO_LEFT_OUT: LeftOut = {"sessions_without_calls": [], "calls_without_input": []}


def left_out(t: Transcript, file: str) -> LeftOut:
    """The sessions of a log that a sweep does not replay (`replayed_sessions`): those
    without an LLM call, and the calls of sessions that hold no part
    (`ctxlab.replay.calls_without_input`: no recorded input to rebuild), ``file`` naming
    the log.

    Example:
        >>> import ctxlab
        >>> left_out(ctxlab.load("datasets/coding_session.jsonl"), "f") == NO_LEFT_OUT
        True
    """
    from ctxlab.replay import calls_without_input

    called = set(pd.unique(t.calls["session"]))
    every = pd.unique(pd.concat([t.frame["session"], t.calls["session"],
                                 t.events["session"]], ignore_index=True).astype(object))
    bare = calls_without_input(t)
    return {"sessions_without_calls": [{"file": file, "session": str(s)} for s in every
                                       if s not in called],
            "calls_without_input": [
                {"file": file, "session": str(s), "call": int(c),
                 "source": None if pd.isna(src) else str(src)}
                for s, c, src in zip(bare["session"], bare["call"], bare["source"])]}


def once_each(records: Iterable[dict[str, Any]]) -> SharedRecords:
    """Each record once, in order (pieces of one log swept in memory share its sessions)."""
    out, seen = SharedRecords(), set()
    for rec in records:
        key = tuple(rec.values())
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out


def skipped_records(frames: Iterable[pd.DataFrame]) -> SkippedRecords:
    """Skipped records (`LoadReport.skipped` frames) as plain values, as a sweep's results
    carry them in ``attrs["skipped"]`` (which Parquet files keep): ``file``, ``line``
    (None inside a JSON document), ``where``, ``record`` and ``reason``, in order, each
    record once (pieces of one log, such as its sessions swept in memory, share its
    report)."""
    return SkippedRecords(once_each(
        {"file": str(r.file), "line": None if pd.isna(r.line) else int(r.line),
         "where": str(r.where), "record": str(r.record),
         "reason": None if pd.isna(r.reason) else str(r.reason)}
        for sk in frames for r in sk.itertuples(index=False)))


class SharedRecords(list):
    """A list of records in a sweep result's ``attrs``, read-only by convention: pandas
    copies a frame's ``attrs`` deeply at every operation, and this list is handed on as it
    is instead (thousands of records would otherwise slow every step on the results)."""

    def __copy__(self) -> SharedRecords:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedRecords:
        return self


class SkippedRecords(SharedRecords):
    """The list of `skipped_records` (`SharedRecords`)."""


__all__ = ["NOT_REPLAYED", "NO_LEFT_OUT", "LeftOut", "SharedRecords", "SkippedRecords", "left_out",
           "listed_sessions", "not_replayed_records", "once_each", "partitions_not_replayed",
           "replayed_sessions", "skipped_records"]
