"""The data model: columns declared as data, validation, and the `Transcript`.

A transcript is tidy: one row per *part* (a message may hold text, thinking,
tool calls, tool results, images...). Calls (one row per LLM request) and events
(compactions: hide parts, insert parts) sit beside it. Nothing is deleted or
edited in place: a compaction hides parts (``hidden_by``) and inserts new ones
(``event``), so any state can be rewound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, get_args

import numpy as np
import pandas as pd

from ctxlab.errors import ConfigError, SchemaError
from ctxlab.wording import counted

Role = Literal["system", "user", "assistant", "tool"]
Kind = Literal["text", "thinking", "tool_call", "tool_result", "tool_schema",
               "attachment", "image", "summary", "marker"]
ROLES: tuple[str, ...] = get_args(Role)
KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One declared column: its name, pandas dtype, whether it may be NA, and what it means."""

    name: str
    dtype: str
    required: bool
    doc: str
    values: tuple[str, ...] = ()


PART_COLUMNS: tuple[Column, ...] = (
    Column(name="session", dtype="string", required=True, doc="session id"),
    Column(name="part", dtype="Int64", required=True,
           doc="stable id of the row within its session, never reused"),
    Column(name="pos", dtype="float64", required=True,
           doc="ordering key; inserted parts get a position between their neighbours"),
    Column(name="msg", dtype="Int64", required=True,
           doc="message index within the session; the parts of one message share it"),
    Column(name="turn", dtype="Int64", required=True,
           doc="user-turn number: 0 before the first real user message, then 1, 2, ..."),
    Column(name="role", dtype="string", required=True, doc="who speaks", values=ROLES),
    Column(name="kind", dtype="string", required=True, doc="what the part is", values=KINDS),
    Column(name="content", dtype="string", required=True,
           doc="the text the model sees (a tool call is its name and JSON arguments)"),
    Column(name="tool_name", dtype="string", required=False, doc="tool of a call or result"),
    Column(name="tool_call_id", dtype="string", required=False,
           doc="links a tool call to its result"),
    Column(name="file_path", dtype="string", required=False,
           doc="file read or written by this tool call/result, when the arguments say"),
    Column(name="call", dtype="Int64", required=False,
           doc="index of the LLM call that produced this part (assistant parts)"),
    Column(name="ts", dtype="datetime64[ns, UTC]", required=False, doc="timestamp"),
    Column(name="hidden_by", dtype="Int64", required=False,
           doc="event that hides this part; NA means visible"),
    Column(name="event", dtype="Int64", required=False,
           doc="event that inserted this part; NA means it is in the original log"),
    Column(name="source", dtype="string", required=False,
           doc="where in the input the part came from: file:line or file#json-path"),
    Column(name="meta", dtype="string", required=False,
           doc="JSON text of what the format recorded and the model did not see"),
)

CALL_COLUMNS: tuple[Column, ...] = (
    Column(name="session", dtype="string", required=True, doc="session id"),
    Column(name="call", dtype="Int64", required=True, doc="call index within the session"),
    Column(name="call_id", dtype="string", required=False,
           doc="the provider's or agent's id of the request/response"),
    Column(name="model", dtype="string", required=False, doc="model name as recorded"),
    Column(name="input_total", dtype="Int64", required=False,
           doc="every input token the provider billed for the request, cached or not"),
    Column(name="input_tokens", dtype="Int64", required=False,
           doc="uncached input tokens as reported"),
    Column(name="cache_read", dtype="Int64", required=False, doc="input tokens read from cache"),
    Column(name="cache_write", dtype="Int64", required=False, doc="input tokens written to cache"),
    Column(name="output_tokens", dtype="Int64", required=False, doc="output tokens reported"),
    Column(name="reasoning_tokens", dtype="Int64", required=False,
           doc="reasoning/thinking tokens reported (a subset or addition, per provider)"),
    Column(name="ts", dtype="datetime64[ns, UTC]", required=False, doc="timestamp"),
    Column(name="input_end_pos", dtype="float64", required=True,
           doc="the call's input is every part visible then with pos below this"),
    Column(name="source", dtype="string", required=False, doc="where in the input it was read"),
)

HISTORY_EDITS = frozenset({"rewind", "clear", "system_prompt", "not_resent"})
"""Event origins a loader records that edit the history the agent sends (a user's rewind,
a user's ``/clear``, a swapped system prompt, parts the client sends in no later request):
part of the log, never counted as compaction, kept by `Transcript.rewind` with no event."""

UNRECORDED_INPUT = "unrecorded_input"
"""``Transcript.meta`` key: per session, the tokens of input the client reports sending with
every request that the log does not hold (Copilot CLI's tool definitions). A replay
counts them as the session's overhead where no call reports its input to fit it from."""

HELPER_SESSIONS = "helper_sessions"
"""``Transcript.meta`` key: per session that records a request the client made for itself
rather than an agent's conversation, what it is: ``kind`` (``"compaction_summarizer"``:
Claude Code's request that writes the summary of a compaction), ``note`` (one sentence for
people), ``file``, ``marker`` (what in the log tells), and the ``session`` and recorded
``event`` it serves when known. Such a session is loaded like any other (nothing is
dropped) but is not an agent session: replays, sweeps and the CLI leave it out and say so
(`ctxlab.replay.helper_sessions`)."""

EVENT_COLUMNS: tuple[Column, ...] = (
    Column(name="session", dtype="string", required=True, doc="session id"),
    Column(name="event", dtype="Int64", required=True, doc="event id within the session"),
    Column(name="origin", dtype="string", required=True,
           doc="'recorded' for compactions found in the log (undone by rewind_recorded); "
               "'rewind' (a user rewound the chat), 'clear' (a user dropped the chat history: "
               "aider's /clear), 'system_prompt' (the client swapped its "
               "system prompt) and 'not_resent' (the client sends some parts in no later "
               "request, e.g. Gemini CLI's thoughts) are recorded history edits that stay; "
               "else the stage that made it"),
    Column(name="trigger", dtype="string", required=False, doc="auto, manual, threshold, ..."),
    Column(name="pre_tokens", dtype="Int64", required=False,
           doc="context size before the compaction, as recorded"),
    Column(name="pos", dtype="float64", required=True,
           doc="where the event happened: calls with input_end_pos above it see its result"),
    Column(name="reason", dtype="string", required=False, doc="why, in words"),
    Column(name="source", dtype="string", required=False, doc="where in the input it was read"),
    Column(name="meta", dtype="string", required=False, doc="JSON text of the recorded details"),
)


def empty_frame(columns: tuple[Column, ...]) -> pd.DataFrame:
    """An empty frame with the declared columns and dtypes (text as `coerce` makes it)."""
    return pd.DataFrame({c.name: pd.Series(dtype=TEXT if c.dtype == "string" else c.dtype)
                         for c in columns})


def coerce(data: Mapping[str, list[Any]] | pd.DataFrame,
           columns: tuple[Column, ...]) -> pd.DataFrame:
    """Build a frame holding exactly the declared columns, in order, with their dtypes.

    Missing optional columns are filled with NA.
    """
    if isinstance(data, pd.DataFrame):
        n = len(data)
        out: dict[str, Any] = {}
        for c in columns:
            values = data[c.name] if c.name in data else [None] * n
            if c.dtype.startswith("datetime64"):
                out[c.name] = _timestamps(values, c.dtype)
            elif c.dtype == "string":
                out[c.name] = _strings(values)
            else:
                out[c.name] = pd.Series(values, dtype=c.dtype)
        return pd.DataFrame(out)
    n = len(next(iter(data.values()))) if len(data) else 0
    # lists: build the arrays directly (a frame of a few inserted rows is built at every
    # stage application, so pandas' per-Series overhead matters)
    out = {}
    for c in columns:
        values = data[c.name] if c.name in data else [None] * n
        if c.dtype.startswith("datetime64"):
            out[c.name] = _timestamps(values, c.dtype).array
        elif c.dtype == "string":
            out[c.name] = _strings(values).array
        elif c.dtype == "float64":
            out[c.name] = np.asarray(values, dtype=np.float64)
        else:
            out[c.name] = pd.array(values, dtype=c.dtype)
    return pd.DataFrame(out, index=pd.RangeIndex(n), copy=False)


_TS_MIN = pd.Timestamp("1678-01-01", tz="UTC")
_TS_MAX = pd.Timestamp("2262-04-01", tz="UTC")


def _timestamps(values: list[Any], dtype: str) -> pd.Series:
    """Parse ISO-8601 text; unparseable or out-of-range values become NaT, never an error."""
    if all(v is None for v in values):
        return pd.Series(pd.NaT, index=pd.RangeIndex(len(values)), dtype=dtype)
    ts = pd.to_datetime(pd.Series(values, dtype="object"), utc=True, format="ISO8601",
                        errors="coerce")
    return ts.where((ts >= _TS_MIN) & (ts < _TS_MAX)).astype(dtype)


# Text columns hold Python strings: taking rows or reading a column back as objects is a
# pointer copy, where Arrow-backed strings copy every byte (the engine takes the rows of a
# request, and stages read its texts, at every compaction).
TEXT = pd.StringDtype("python")


def _strings(values: list[Any]) -> pd.Series:
    """A string column; lone UTF-16 surrogates (half an emoji) become U+FFFD."""
    fixed = values
    if _any_surrogate(values):
        fixed = [v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
                 if isinstance(v, str) and _has_surrogate(v) else v for v in values]
    try:
        return pd.Series(fixed, dtype=TEXT)
    except (ValueError, TypeError):
        return pd.Series([None if v is None or v is pd.NA or (isinstance(v, float) and v != v)
                          else str(v) for v in fixed], dtype=TEXT)


def text_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every string column held as Python strings (`TEXT`), e.g. after
    reading Arrow data, whose strings pandas keeps in Arrow."""
    change = {c: TEXT for c in frame.columns
              if isinstance(frame[c].dtype, pd.StringDtype) and frame[c].dtype != TEXT}
    return frame.astype(change) if change else frame


_FROZEN: ContextVar[dict[tuple[int, str], tuple[Any, Any]] | None] = ContextVar(
    "ctxlab_frozen", default=None)


@contextmanager
def frames_unchanged() -> Iterator[None]:
    """Within it, no frame is changed in place (a replay's own work), so facts read off a
    frame (`session_rows`, `remembered`) are remembered by the frame's identity until the
    outermost such block ends. Outside, they are computed afresh every time: a frame a
    user edits in place (``t.calls["model"] = ...``) is never read stale."""
    token = _FROZEN.set({}) if _FROZEN.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _FROZEN.reset(token)


def remembered(df: pd.DataFrame, what: str, make: Callable[[pd.DataFrame], Any]) -> Any:
    """``make(df)``, remembered per frame and ``what`` inside `frames_unchanged`."""
    scope = _FROZEN.get()
    if scope is None:
        return make(df)
    key = (id(df), what)
    got = scope.get(key)
    if got is None or got[0] is not df:
        got = (df, make(df))         # the frame is kept: its id stays its own
        scope[key] = got
    return got[1]


def session_rows(df: pd.DataFrame, session: Any) -> np.ndarray:
    """Positions of a frame's rows of one session (``df["session"] == session``, NA
    never). Inside `frames_unchanged`, every session's rows are found by one pass over the
    frame and remembered: a log of many sessions looks each up without comparing every
    row again.

    Example:
        >>> df = pd.DataFrame({"session": ["a", "b", "a"]})
        >>> session_rows(df, "a").tolist(), session_rows(df, "c").tolist()
        ([0, 2], [])
        >>> with frames_unchanged():
        ...     session_rows(df, "a").tolist()
        [0, 2]

    The array may be shared: do not modify it.
    """
    if _FROZEN.get() is None:
        return np.flatnonzero((df["session"] == session).to_numpy(dtype=bool, na_value=False))
    found = remembered(df, "session_rows", _rows_by_session)
    return found.get(session, np.empty(0, dtype=np.intp))


def _rows_by_session(df: pd.DataFrame) -> dict[Any, np.ndarray]:
    codes, names = pd.factorize(df["session"], use_na_sentinel=True)
    order = np.argsort(codes, kind="stable")
    cuts = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return {name: order[cuts[i]:cuts[i + 1]] for i, name in enumerate(names)}


def _any_surrogate(values: list[Any]) -> bool:
    """Whether any text holds a lone surrogate (one encode of them all)."""
    try:
        "".join(v for v in values if isinstance(v, str)).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _dtype_ok(series: pd.Series, dtype: str) -> bool:
    if dtype.startswith("datetime64"):
        return isinstance(series.dtype, pd.DatetimeTZDtype) and str(series.dtype.tz) == "UTC"
    return str(series.dtype) == dtype


def validate(frame: pd.DataFrame, strict: bool = True,
             columns: tuple[Column, ...] = PART_COLUMNS) -> list[str]:
    """Check a frame against declared columns, reporting every problem at once.

    Args:
        frame: the frame to check.
        strict: raise `SchemaError` listing all problems (default) instead of returning them.
        columns: the declaration to check against (parts by default).

    Returns:
        The list of problems (empty when the frame is valid).

    Example:
        >>> import ctxlab.schema as s
        >>> s.validate(s.empty_frame(s.PART_COLUMNS))
        []
    """
    problems: list[str] = []
    for c in columns:
        if c.name not in frame.columns:
            problems.append(f"missing column {c.name!r} ({c.doc})")
            continue
        s = frame[c.name]
        if not _dtype_ok(s, c.dtype):
            problems.append(f"column {c.name!r} has dtype {s.dtype}, expected {c.dtype}")
        if c.required and s.isna().any():
            problems.append(f"column {c.name!r} is required but has {int(s.isna().sum())} "
                            f"NA value(s)")
        if c.values:
            bad = sorted(set(s.dropna().astype(str)) - set(c.values))
            if bad:
                problems.append(f"column {c.name!r} has unknown value(s) {bad}; "
                                f"allowed: {list(c.values)}")
    extra = [n for n in frame.columns if n not in {c.name for c in columns}]
    if extra:
        problems.append(f"undeclared column(s) {extra}")
    if columns is PART_COLUMNS and not problems:
        dup = frame.duplicated(["session", "part"])
        if dup.any():
            problems.append(f"{int(dup.sum())} duplicate (session, part) id(s)")
    if problems and strict:
        raise SchemaError(problems)
    return problems


REPORT_COLUMNS: tuple[Column, ...] = (
    Column(name="file", dtype="string", required=True, doc="input file"),
    Column(name="line", dtype="Int64", required=False,
           doc="1-based line (JSONL, Markdown); NA inside a JSON document"),
    Column(name="where", dtype="string", required=True,
           doc="record locator: 'line 12' or a JSON path such as 'messages[3]'"),
    Column(name="record", dtype="string", required=True, doc="record type as the format names it"),
    Column(name="status", dtype="string", required=True,
           doc="used (became parts/calls/events/meta), ignored (known, never sent to the model), "
               "skipped (could not be used: see reason)",
           values=("used", "ignored", "skipped")),
    Column(name="parts", dtype="Int64", required=True, doc="parts made from this record"),
    Column(name="reason", dtype="string", required=False,
           doc="why ignored or skipped; for a used record, a note on what it became when "
               "that needs saying (e.g. a session loaded but not replayed)"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadReport:
    """Every input record and what became of it: nothing is dropped silently."""

    records: pd.DataFrame

    @property
    def records_read(self) -> int:
        return len(self.records)

    @property
    def parts_made(self) -> int:
        return int(self.records["parts"].sum())

    @property
    def skipped(self) -> pd.DataFrame:
        """Records that could not be used, with file, line and reason: in line order within
        each file (files as they come; a loader may report a record on a later pass)."""
        sk = self.records[self.records["status"] == "skipped"]
        if len(sk) < 2:
            return sk
        order = np.lexsort((sk["line"].to_numpy(dtype=np.float64, na_value=np.inf),
                            pd.factorize(sk["file"])[0]))
        return sk.iloc[order]

    def summary_df(self) -> pd.DataFrame:
        """Counts by record type and status."""
        r = self.records
        return (r.assign(n=1).groupby(["record", "status"], dropna=False, observed=True)
                .agg(records=("n", "sum"), parts=("parts", "sum")).reset_index())

    @staticmethod
    def concat(reports: list[LoadReport]) -> LoadReport:
        frames = [r.records for r in reports if len(r.records)]
        if not frames:
            return LoadReport(records=empty_frame(REPORT_COLUMNS))
        return LoadReport(records=pd.concat(frames, ignore_index=True))

    def __str__(self) -> str:
        s = self.records["status"].value_counts()
        return (f"{self.records_read} records: {int(s.get('used', 0))} used, "
                f"{int(s.get('ignored', 0))} ignored, {int(s.get('skipped', 0))} skipped; "
                f"{self.parts_made} parts")


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """A loaded log: parts, calls, events, metadata and the load report.

    Attributes:
        frame: one row per part (`PART_COLUMNS`), in session and position order.
        calls: one row per LLM call (`CALL_COLUMNS`).
        events: compactions (`EVENT_COLUMNS`); recorded ones have ``origin == "recorded"``.
        meta: format, source path, versions and other facts about the whole log.
        load_report: what became of every input record.
    """

    frame: pd.DataFrame
    calls: pd.DataFrame
    events: pd.DataFrame
    meta: Mapping[str, Any] = field(default_factory=dict)
    load_report: LoadReport

    @property
    def sessions(self) -> list[str]:
        """Session ids in the order they appear."""
        return list(pd.unique(self.frame["session"])) if len(self.frame) else \
            list(pd.unique(self.calls["session"]))

    def effective(self) -> pd.DataFrame:
        """The parts the model saw last: visible parts in position order."""
        f = self.frame
        return f[f["hidden_by"].isna()].sort_values(["session", "pos"], kind="stable")

    def rewind_recorded(self) -> Transcript:
        """The uncompacted log: recorded compactions undone (summaries removed, parts shown)."""
        recorded = self.events[self.events["origin"] == "recorded"]
        if recorded.empty:
            return self
        keys = set(zip(recorded["session"], recorded["event"].astype("int64")))
        f = self.frame
        inserted = pd.Series([(s, e) in keys for s, e in zip(f["session"], f["event"])],
                             index=f.index, dtype=bool) & f["event"].notna()
        hidden = pd.Series([(s, h) in keys for s, h in zip(f["session"], f["hidden_by"])],
                           index=f.index, dtype=bool) & f["hidden_by"].notna()
        frame = f[~inserted].copy()
        frame.loc[hidden[~inserted], "hidden_by"] = pd.NA
        events = self.events[self.events["origin"] != "recorded"].reset_index(drop=True)
        return replace(self, frame=frame.reset_index(drop=True), events=events)

    def rewind(self, event: int | None = None, *, session: str | None = None) -> Transcript:
        """Undo an event and every later one of its session; no event: every event.

        See `ctxlab.history.rewind`.
        """
        from ctxlab.history import rewind
        return rewind(self, event, session=session)

    def session(self, session_id: str) -> Transcript:
        """The part of this transcript that belongs to one session."""
        if session_id not in set(self.frame["session"]) | set(self.calls["session"]):
            raise KeyError(f"no session {session_id!r}; sessions: {self.sessions[:10]}")
        return self.sessions_of([session_id])

    def sessions_of(self, sessions: Iterable[Any]) -> Transcript:
        """The part of this transcript that belongs to some sessions (none there: empty)."""
        keep = list(sessions)

        def pick(df: pd.DataFrame) -> pd.DataFrame:
            return df[df["session"].isin(keep)].reset_index(drop=True)
        return replace(self, frame=pick(self.frame), calls=pick(self.calls),
                       events=pick(self.events))

    def validate(self, strict: bool = True) -> list[str]:
        """Check frame, calls and events against their declared columns."""
        problems = (validate(self.frame, False, PART_COLUMNS)
                    + [f"calls: {p}" for p in validate(self.calls, False, CALL_COLUMNS)]
                    + [f"events: {p}" for p in validate(self.events, False, EVENT_COLUMNS)])
        if problems and strict:
            raise SchemaError(problems)
        return problems

    def __repr__(self) -> str:
        return (f"Transcript(format={self.meta.get('format')!r}, sessions={len(self.sessions)}, "
                f"parts={len(self.frame)}, calls={len(self.calls)}, events={len(self.events)})")


def one_log(t: Any, what: str) -> Transcript:
    """``t`` when it is a `Transcript`; otherwise a `ConfigError` saying what ``what``
    (a function's name) takes, and for a `ctxlab.Corpus` (a folder's logs) how to go over
    its logs one by one or sweep them all.

    Example:
        >>> one_log("session.jsonl", "replay")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: replay() takes one log, a Transcript (...), not a str
    """
    if isinstance(t, Transcript):
        return t
    # a Corpus, known by what it has: ctxlab.loaders, which defines it, imports this module
    if hasattr(t, "files") and hasattr(t, "transcript"):
        raise ConfigError(f"{what}() takes one log, a Transcript; this Corpus holds "
                          f"{counted(len(t), 'log')}: go over them (for t in corpus: "
                          f"{what}(t, ...)) or sweep them all (ctxlab.sweep(corpus, grid))")
    raise ConfigError(f"{what}() takes one log, a Transcript (ctxlab.load(path)), not a "
                      f"{type(t).__name__}")
