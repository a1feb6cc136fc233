"""Replay a pipeline call by call over a log, with per-layer tokens, a ledger, rewind, what-if.

`replay` walks each session's calls in order, starting from the uncompacted log
(recorded compactions are rewound first). At every call it knows the request's tokens
per layer without rebuilding the request: parts enter when the walk passes their
position and leave when an event hides them, and per-layer sums are updated as they
do — so a walk costs O(parts + calls). Only when the trigger fires (or the pipeline
has stages that run on every request) is the full request built and the pipeline run
(`ctxlab.pipeline.compact`), and the sums updated from the events it made.

The result, `Replay`, holds ``calls`` (per call: tokens per layer before/after, usage,
trigger, stages used, reported input), ``events`` (per stage application), ``ledger``
(every hidden or inserted part, with its event, stage and reason), and methods `at`,
`rewind` and `resume`.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.engine import TOKENS_DTYPE, Budget, StageRun, make_view, request_parts
from ctxlab.errors import ConfigError, CtxlabError
from ctxlab.history import SessionHistory
from ctxlab.layers import (LayerContext, added_layers, assign_layers, layer_categories,
                           user_texts)
from ctxlab.pipeline import (Pipeline, call_models, changed, compact_view, filled_spec,
                             forced_final,
                             pipeline_estimator, request_note, resolve_pipeline,
                             measured_from_layers, session_provider, trigger_scope,
                             within_target)
from ctxlab.replay_state import (Anchor, Sums, after_values, apply_to_sums, call_row,
                                 empty_ledger, event_row, events_frame, ledger_rows,
                                 window_of)
from ctxlab.schema import (HELPER_SESSIONS, UNRECORDED_INPUT, Transcript, frames_unchanged,
                           one_log, session_rows)
from ctxlab.stages.base import Stage, View
from ctxlab.stages.grammar import grown_scan, view_grammar
from ctxlab.stages.table import Table, append
from ctxlab.tokens import Estimator, estimator as get_estimator


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How a replay was run (kept so it can be resumed)."""

    pipeline: Pipeline
    window: int | None
    estimator: str | Estimator | None
    overhead_tokens: Mapping[str, int]
    reported_until: Mapping[str, float] = field(default_factory=dict)
    log: Transcript | None = field(default=None, repr=False, compare=False)
    """The log as given, when the overheads were fitted from it (a resumed replay that
    counts with another estimator fits them again); None when they were given."""


class NotReplayed(CtxlabError, KeyError):
    """`Replay.at` was asked for a call the replay did not reach."""

    __str__ = Exception.__str__  # the message as written, not KeyError's quoted repr


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """A pipeline replayed over a log.

    Attributes:
        base: the log it started from (recorded compactions rewound).
        transcript: the log with every event the replay made.
        calls: one row per replayed call.
        events: one row per stage application that made an event.
        ledger: one row per part an event hid or inserted.
        settings: pipeline, window, estimator and overheads, for `resume`.
        next_call: per session, the first call not replayed (after `rewind`).
        not_replayed: the log's sessions that are not an agent's conversation, left out
            (not in ``base`` either), with what each is (`helper_sessions`).
    """

    base: Transcript
    transcript: Transcript
    calls: pd.DataFrame
    events: pd.DataFrame
    ledger: pd.DataFrame
    settings: Settings
    next_call: Mapping[str, int] = field(default_factory=dict)
    not_replayed: Mapping[str, str] = field(default_factory=dict)
    _metrics: dict[str, pd.DataFrame] = field(default_factory=dict, init=False, repr=False,
                                              compare=False)
    _sessions: dict[str, frozenset[str]] = field(default_factory=dict, init=False, repr=False,
                                                 compare=False)  # base's, once asked

    def _has_session(self, session: str) -> bool:
        """Whether ``base`` holds the session (its ids read once: the report asks per
        session, and reading them took 0.7 ms on aider's 588 sessions)."""
        if "base" not in self._sessions:
            self._sessions["base"] = frozenset(self.base.sessions)
        return session in self._sessions["base"]

    @property
    def pipeline(self) -> Pipeline:
        return self.settings.pipeline

    def _session(self, session: str | None) -> str:
        """``session``, or by default the log's first session with calls (aider's history
        opens with a session of none)."""
        if session is not None:
            if session in self.not_replayed:
                raise NotReplayed(f"session {session!r} was not replayed: "
                                  f"{self.not_replayed[session]}")
            if not self._has_session(session):
                raise NotReplayed(f"the replay has no session {session!r}; its sessions: "
                                  f"{', '.join(map(repr, self.base.sessions))}")
            return session
        with_calls = set(self.base.calls["session"])
        return next((s for s in self.base.sessions if s in with_calls), self.base.sessions[0])

    def estimator(self, session: str | None = None) -> Estimator:
        """The estimator that counted a session's calls (one per session)."""
        return _estimator(self.settings, self.base, self._session(session))

    def at(self, call: int, session: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The request of one call before and after its compaction (parts, with tokens, layer;
        ``hidden_by`` as it stood after that call: later events are not in it)."""
        call = _call_number(call, "at")
        s = self._session(session)
        held = self.calls.loc[self.calls["session"] == s, "call"]
        if not (held == call).any():
            raise NotReplayed(f"call {call} of session {s!r} was not replayed (" + (
                f"its calls {held.min()}..{held.max()} were)" if len(held)
                else "none of its calls was)"))
        end = float(self.base.calls.loc[(self.base.calls["session"] == s)
                                        & (self.base.calls["call"] == call),
                                        "input_end_pos"].iloc[0])
        ev = self.events[self.events["event"].notna()]          # failed attempts made none
        ev = ev[(ev["session"] == s) & (ev["call"] >= call)]
        later = ev.loc[ev["call"] > call, "event"]     # (their hidden_by is not this call's)
        after_t = self.transcript.rewind(int(later.min()), session=s) if len(later) \
            else self.transcript
        mine = ev.loc[ev["call"] == call, "event"]
        before_t = after_t.rewind(int(mine.min()), session=s) if len(mine) else after_t
        est = self.estimator(s)
        return (_annotate(request_parts(before_t, s, end), est),
                _annotate(request_parts(after_t, s, end), est))

    def rewind(self, call: int, session: str | None = None) -> Replay:
        """The replay as it was before ``call``: its events and later ones undone."""
        call = _call_number(call, "rewind")
        s = self._session(session)
        known = self.base.calls["call"].to_numpy()[session_rows(self.base.calls, s)]
        if call not in known:
            raise NotReplayed(f"session {s!r} has no call {call} (its calls are "
                              f"{known.min()}..{known.max()}): rewind to one of them"
                              if len(known) else f"session {s!r} has no calls")
        if s in self.next_call and call > self.next_call[s]:
            raise NotReplayed(f"this replay was rewound to call {self.next_call[s]} of session "
                              f"{s!r}: it holds no call from there on, so it cannot be rewound "
                              f"to call {call}; rewind to a call <= {self.next_call[s]}, or "
                              f"resume() first")
        ev = self.events[self.events["event"].notna()]          # failed attempts made none
        later = ev[(ev["session"] == s) & (ev["call"] >= call)]
        t = self.transcript.rewind(int(later["event"].min()), session=s) if len(later) \
            else self.transcript
        keep = ~((self.calls["session"] == s) & (self.calls["call"] >= call))
        keep_ev = ~((self.events["session"] == s) & (self.events["call"] >= call))
        keep_led = ~((self.ledger["session"] == s) & (self.ledger["call"] >= call))
        return replace(self, transcript=t, calls=self.calls[keep].reset_index(drop=True),
                       events=self.events[keep_ev].reset_index(drop=True),
                       ledger=self.ledger[keep_led].reset_index(drop=True),
                       next_call={**self.next_call, s: call})

    def resume(self, pipeline: str | Pipeline | None = None, **changes: Any) -> Replay:
        """Continue a rewound replay (what-if): another pipeline or changed fields of this one.

        The calls before the rewind point are kept as they were replayed: their rows
        (``target_tokens``, ``within_target``...) are the earlier pipeline's, and only the
        calls from there on follow the new one (a fresh replay with the new settings can
        differ before the rewind point where the target is concerned). Besides the fields
        of `Pipeline`, ``window`` changes the replay's window, and ``estimator`` counts
        with that spec even when the replay was given an estimator of its own.

        Raises:
            NotReplayed: the replay was not rewound (nothing to resume).
            ConfigError: a name that is neither a `Pipeline` field nor ``window``.

        Example:
            >>> import ctxlab
            >>> r = ctxlab.replay(ctxlab.load("datasets/coding_session_b.jsonl"), "neurolink",
            ...                   window=100_000)
            >>> what_if = r.rewind(30).resume(threshold=0.6)
            >>> len(what_if.calls) == len(r.calls)
            True
        """
        if not self.next_call:
            raise NotReplayed("this replay was not rewound, so there is nothing to resume: "
                              "rewind(call) first (rewind to the first call to replay every "
                              "call with the new settings), or replay() again")
        window = changes.pop("window", self.settings.window)
        p = changed(resolve_pipeline(pipeline) if pipeline is not None
                    else self.settings.pipeline, **changes)
        old = self.settings
        p, estimator = _per_provider(p, changes["estimator"] if "estimator" in changes
                                     and old.estimator is not None else old.estimator)
        settings = replace(old, pipeline=p, window=window, estimator=estimator)
        spec = estimator if estimator is not None else p.estimator
        if old.log is not None and spec != (old.estimator if old.estimator is not None
                                            else old.pipeline.estimator):
            # overheads fitted for the old counts
            settings = replace(settings, overhead_tokens=_fitted_overheads(old.log, p, estimator))
        with frames_unchanged():
            return _walk(self.base, self.transcript, settings, self.next_call, self)

    def recall(self) -> pd.DataFrame:
        """Needed-fact recall per call it holds (`ctxlab.metrics.needed_recall_df`;
        computed once)."""
        from ctxlab.metrics import needed_recall_df
        if "recall" not in self._metrics:
            rec = needed_recall_df(self.transcript)
            if self.next_call:      # rewound: only the calls it holds (its transcript has
                held = set(zip(self.calls["session"], self.calls["call"]))  # every call)
                rec = rec[[k in held for k in zip(rec["session"], rec["call"])]]
                rec = rec.reset_index(drop=True)
            self._metrics["recall"] = rec
        return self._metrics["recall"].copy()

    def retention(self) -> pd.DataFrame:
        """Artifact retention per event (`ctxlab.metrics.retention_df`; computed once)."""
        from ctxlab.metrics import retention_df
        if "retention" not in self._metrics:
            self._metrics["retention"] = retention_df(self.transcript)
        return self._metrics["retention"].copy()

    def summary(self) -> dict[str, Any]:
        """The replay in numbers: compactions (calls at which the trigger fired), calls
        compacted (whose request a stage changed: always-on stages need no trigger), tokens
        sent, peak usage, overflows, recall."""
        from ctxlab.metrics import summarize_recall
        c = self.calls
        rec = summarize_recall(self.recall())
        return {"pipeline": self.pipeline.name, "calls": len(c),
                "compactions": int(c["triggered"].sum()) if len(c) else 0,
                "calls_compacted": int(c["compacted"].sum()) if len(c) else 0,
                "events": int(self.events["event"].notna().sum()),
                "failures": int(self.events["failure"].notna().sum())
                if "failure" in self.events else 0,
                "tokens_sent": int(c["tokens_after"].sum()) if len(c) else 0,
                "peak_tokens": int(c["tokens_after"].max()) if len(c) else 0,
                "peak_usage": float(c["usage_after"].max()) if len(c) else 0.0,
                "over_window": int(c["over_window"].sum()) if len(c) else 0,
                "forced_final": int(c["forced_final"].sum()) if len(c) else 0,
                "recall": rec["recall"], "missing": rec["missing"]}

    def _repr_html_(self) -> str:
        c = self.calls
        return (f"<p><b>Replay</b> {self.pipeline.name}: {len(c)} calls, "
                f"{int(c['triggered'].sum())} compactions, {len(self.events)} events, "
                f"peak request {int(c['tokens_after'].max()) if len(c) else 0:,} tokens</p>")

    def __repr__(self) -> str:
        return (f"Replay({self.pipeline.name}, calls={len(self.calls)}, "
                f"events={len(self.events)}, ledger={len(self.ledger)})")


def _estimator(settings: Settings, t: Transcript, session: str) -> Estimator:
    """The estimator of a session's calls (one per session: `session_provider`)."""
    if settings.estimator is not None:
        return get_estimator(settings.estimator)
    return pipeline_estimator(settings.pipeline, session_provider(t, session))


def _annotate(parts: pd.DataFrame, est: Estimator) -> pd.DataFrame:
    out = parts.copy()
    out["tokens"] = est.count_parts(out) if len(out) else np.zeros(0, dtype=np.int64)
    out["layer"] = assign_layers(out)
    return out


def calls_without_input(t: Transcript) -> pd.DataFrame:
    """The calls of sessions that hold no part (the log records a call but nothing it was
    sent: e.g. an aider session that starts with an interrupted request's token count).
    A replay has no request to rebuild for them and leaves them out.

    Example:
        >>> import ctxlab
        >>> len(calls_without_input(ctxlab.load("datasets/coding_session.jsonl")))
        0
    """
    return t.calls[~t.calls["session"].isin(pd.unique(t.frame["session"]))]


def helper_sessions(t: Transcript) -> dict[str, str]:
    """The sessions of a log that record a request its client made for itself, not an
    agent's conversation (`ctxlab.schema.HELPER_SESSIONS`: Claude Code's compaction
    summarizer request), with what each is. A replay leaves them out
    (`Replay.not_replayed`), as a sweep does.

    Example:
        >>> import ctxlab
        >>> helper_sessions(ctxlab.load("datasets/coding_session.jsonl"))
        {}
    """
    given = t.meta.get(HELPER_SESSIONS)
    if not isinstance(given, Mapping) or not given:
        return {}
    present = set(t.frame["session"]) | set(t.calls["session"])
    return {str(s): str(v.get("note") if isinstance(v, Mapping) else v)
            for s, v in given.items() if s in present}


def replay(t: Transcript, pipeline: str | Pipeline, *, window: int | None = None,
           estimator: str | Estimator | None = None,
           overhead_tokens: Mapping[str, int] | int | None = None) -> Replay:
    """Replay a pipeline over every call of every session of a log.

    Args:
        t: the log. Recorded compactions are rewound first: the replay starts from what
            the agent would have sent without them. Sessions that are no agent's
            conversation (`helper_sessions`) are left out: `Replay.not_replayed`.
        pipeline: a preset name or a `Pipeline`.
        window: the context window (default: each call's model's, from the registry).
        estimator: spec or instance (default: the pipeline's). A spec with
            ``{provider}`` (as a sweep's ``estimator`` column shows a pipeline's own) is
            filled in per session, as the pipeline's is.
        overhead_tokens: unrecorded input per session (default: fitted from the log's
            reported usage with the replay's estimator, 0 where there is none).
    """
    t = one_log(t, "replay")
    p, estimator = _per_provider(resolve_pipeline(pipeline), estimator)
    with frames_unchanged():        # a replay edits no frame in place: facts remembered
        return _replay(t, p, window, estimator, overhead_tokens)


def _per_provider(p: Pipeline, estimator: str | Estimator | None
                  ) -> tuple[Pipeline, str | Estimator | None]:
    """A spec with ``{provider}`` given as the replay's estimator becomes the pipeline's,
    which is filled in per session (`pipeline_estimator`)."""
    if isinstance(estimator, str) and "{provider}" in estimator:
        return replace(p, estimator=estimator), None
    return p, estimator


def _replay(t: Transcript, p: Pipeline, window: int | None,
            estimator: str | Estimator | None,
            overhead_tokens: Mapping[str, int] | int | None) -> Replay:
    base = t.rewind_recorded()
    helpers = helper_sessions(t)
    if helpers:
        kept = {*base.frame["session"], *base.calls["session"], *base.events["session"]}
        base = base.sessions_of(kept - set(helpers))
    recorded = t.events[t.events["origin"] == "recorded"]
    # up to its first recorded compaction, the uncompacted request is the logged one
    reported_until = {str(k): float(v) for k, v in recorded.groupby("session")["pos"].min().items()}
    fitted = overhead_tokens is None
    if overhead_tokens is None:
        overhead_tokens = _fitted_overheads(t, p, estimator)
    if isinstance(overhead_tokens, int):
        overhead_tokens = {s: overhead_tokens for s in base.sessions}
    settings = Settings(pipeline=p, window=window, estimator=estimator,
                        overhead_tokens=dict(overhead_tokens), reported_until=reported_until,
                        log=t if fitted else None)
    r = _walk(base, base, settings, {}, None)
    return replace(r, not_replayed=helpers) if helpers else r


def _fitted_overheads(t: Transcript, p: Pipeline,
                      estimator: str | Estimator | None) -> dict[str, int]:
    """Each session's unrecorded overhead, fitted with the estimator of its calls;
    remembered for the last `OVERHEADS_KEPT` logs and estimator specs (a sweep replays a
    session once per configuration; an estimator instance is fitted every time). A
    session where no call reports its input has nothing to fit: it gets what the log
    says the client sent without recording it (`UNRECORDED_INPUT`), else 0."""
    if not len(t.calls):
        return {}
    helpers = helper_sessions(t)        # not replayed: no overhead of theirs to show
    return {s: v for s, v in _with_unrecorded(t, _fitted(t, p, estimator)).items()
            if s not in helpers}


def _with_unrecorded(t: Transcript, fitted: dict[str, int]) -> dict[str, int]:
    """The fitted overheads, with the input a client reports sending but the log does not
    hold (`UNRECORDED_INPUT`) for each session where no call reports its input."""
    given = t.meta.get(UNRECORDED_INPUT)
    if not isinstance(given, Mapping):
        return fitted
    reported = set(t.calls.loc[t.calls["input_total"].notna(), "session"])
    return {**fitted, **{str(s): int(v) for s, v in given.items()
                         if s in fitted and s not in reported}}


def _fitted(t: Transcript, p: Pipeline, estimator: str | Estimator | None) -> dict[str, int]:
    """`_fitted_overheads` as fitted from reported usage (remembered, see there)."""
    spec = p.estimator if estimator is None else estimator
    if not isinstance(spec, str):
        return _fit_overheads(t, p, estimator)
    from ctxlab.tokens.registry import instance_key

    specs = [spec] if estimator is not None or "{provider}" not in spec else sorted(
        {_spec_of(p, t, str(s)) for s in pd.unique(t.calls["session"])})
    # the specs that count, as filled in, with the files they name (a rewritten one too)
    key = (id(t.frame), id(t.calls), id(t.events), tuple(instance_key(x) for x in specs))
    with _OVERHEADS_LOCK:
        got = _OVERHEADS.get(key)
        if got is not None and all(a is b for a, b in zip(got[0], (t.frame, t.calls,
                                                                   t.events))):
            _OVERHEADS.move_to_end(key)
            return dict(got[1])
    out = _fit_overheads(t, p, estimator)
    with _OVERHEADS_LOCK:       # the frames are kept: their ids stay theirs
        _OVERHEADS[key] = ((t.frame, t.calls, t.events), dict(out))
        while len(_OVERHEADS) > OVERHEADS_KEPT:
            _OVERHEADS.popitem(last=False)
    return out


OVERHEADS_KEPT = 8
_OVERHEADS: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], dict[str, int]]] = OrderedDict()
_OVERHEADS_LOCK = threading.Lock()     # a Dask worker may replay in several threads


def _fit_overheads(t: Transcript, p: Pipeline,
                   estimator: str | Estimator | None) -> dict[str, int]:
    from ctxlab.tokens.accuracy import session_overheads

    if estimator is not None:
        return session_overheads(t, estimator)
    by_spec: dict[str, list[str]] = {}
    for s in pd.unique(t.calls["session"]):
        by_spec.setdefault(_spec_of(p, t, str(s)), []).append(str(s))
    if len(by_spec) == 1:
        return session_overheads(t, next(iter(by_spec)))
    out: dict[str, int] = {}
    for spec, sessions in by_spec.items():      # sessions of different providers
        out.update(session_overheads(t.sessions_of(sessions), spec))
    return out


def _spec_of(p: Pipeline, t: Transcript, session: str) -> str:
    """The pipeline's estimator spec filled in for a session's provider."""
    return filled_spec(p.estimator, session_provider(t, session))


def _walk(base: Transcript, t: Transcript, settings: Settings, start: Mapping[str, int],
          previous: Replay | None) -> Replay:
    rows: list[dict[str, Any]] = []
    ledger: list[pd.DataFrame] = []
    events: list[dict[str, Any]] = []
    with_parts = set(pd.unique(base.frame["session"]))
    for session in base.sessions:
        if session not in with_parts:
            continue        # calls without input (`calls_without_input`): nothing to replay
        calls = base.calls.iloc[session_rows(base.calls, session)].sort_values("input_end_pos")
        first = start.get(session, 0) if previous is not None else 0
        if previous is not None and session not in start:
            continue  # this session was not rewound: keep it as it was
        calls = calls[calls["call"] >= first]
        if calls.empty:
            continue
        anchor = Anchor(until=settings.reported_until.get(session, np.inf))
        if previous is not None:
            est = _estimator(settings, t, session)
            overhead = int(settings.overhead_tokens.get(session, 0))
            same = est.spec == _estimator(previous.settings, t, session).spec and \
                overhead == int(previous.settings.overhead_tokens.get(session, 0))
            anchor.resume(previous, base, session, first, None if same else (
                lambda end: est.request_tokens(request_parts(t, session, end)) + overhead))
        t = _walk_session(t, session, calls, settings, rows, events, ledger, anchor)
    # every row has the same keys in the same order (`call_row`): built column by column
    calls_df = pd.DataFrame({k: [r[k] for r in rows] for k in rows[0]}) if rows \
        else pd.DataFrame()
    events_df = events_frame(events)
    ledger_df = pd.concat(ledger, ignore_index=True) if ledger else empty_ledger()
    if previous is not None:        # sessions in log order, as a walk over them all gives
        order = {s: i for i, s in enumerate(base.sessions)}
        calls_df = _by_session(_joined(previous.calls, calls_df), order)
        events_df = _by_session(_joined(previous.events, events_df), order)
        ledger_df = _by_session(_joined(previous.ledger, ledger_df), order)
        t = replace(t, events=_events_in_order(t.events, base.events, order))
    if calls_df.empty:
        calls_df = pd.DataFrame(columns=["session", "call"])
    return Replay(base=base, transcript=t, calls=calls_df, events=events_df, ledger=ledger_df,
                  settings=settings, next_call={},
                  not_replayed=previous.not_replayed if previous is not None else {})


def _call_number(call: Any, what: str) -> int:
    """A call number as given to `Replay.at` / `Replay.rewind`: an integer (NumPy's too),
    not a bool or a float, which compared equal to calls 1 and 0 or 3.0 and were taken."""
    if isinstance(call, (bool, np.bool_)) or not isinstance(call, (int, np.integer)):
        raise ConfigError(f"{what}() takes a call number (an integer, as in "
                          f"replay.calls['call']), not {call!r}")
    return int(call)


def _by_session(df: pd.DataFrame, order: Mapping[str, int]) -> pd.DataFrame:
    """Rows grouped by session in log order, each session's rows in the order they have."""
    if len(df) < 2 or "session" not in df:
        return df
    rank = df["session"].map(order).to_numpy()
    if (rank[1:] >= rank[:-1]).all():
        return df
    return df.iloc[np.argsort(rank, kind="stable")].reset_index(drop=True)


def _events_in_order(events: pd.DataFrame, logged: pd.DataFrame,
                     order: Mapping[str, int]) -> pd.DataFrame:
    """A resumed replay's transcript events in the order a walk over every session gives:
    the log's own (``logged``) as they are, then the replay's by session in log order (a
    resumed session's new events come last until then)."""
    if len(events) < 2:
        return events
    def keys(df: pd.DataFrame) -> pd.MultiIndex:
        return pd.MultiIndex.from_arrays([df["session"], df["event"].astype("int64")])
    rank = np.where(keys(events).isin(keys(logged)), -1,
                    events["session"].map(order).to_numpy())
    if (rank[1:] >= rank[:-1]).all():
        return events
    return events.iloc[np.argsort(rank, kind="stable")].reset_index(drop=True)


def _joined(kept: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """A resumed replay's frame: the rows it kept, then the new ones, with the dtypes a
    replay walking them all at once infers (a column all NA in one of the two, such as
    the model of a call that names none, would otherwise turn into objects); with no rows
    kept, the new frame as it is (an empty one keeps a walk's empty shape)."""
    if not len(kept):
        return new                  # nothing kept: the frame (or empty shape) of a walk
    if not len(new):
        return kept
    out = pd.concat([kept, new], ignore_index=True)
    for c in new.columns:
        if c in kept and kept[c].dtype != new[c].dtype:
            out[c] = pd.Series(kept[c].tolist() + new[c].tolist())
    return out


def _walk_session(t: Transcript, session: str, calls: pd.DataFrame, settings: Settings,
                  rows: list[dict[str, Any]], events: list[dict[str, Any]],
                  ledger: list[pd.DataFrame], anchor: Anchor) -> Transcript:
    p = settings.pipeline
    est = _estimator(settings, t, session)
    overhead = int(settings.overhead_tokens.get(session, 0))
    history = SessionHistory(t, session)
    f = history.frame
    lo, hi = history.lo.tolist(), history.hi.tolist()
    counts = est.count_parts(history.table)
    tokens = counts.tolist()
    cats = layer_categories(history.table).tolist()
    turns = f["turn"].to_numpy(dtype=np.int64, na_value=0).tolist()
    msgs = f["msg"].to_numpy(dtype=np.int64).tolist()
    users = user_texts(history.table).tolist()
    sums = Sums(overhead)
    order = np.argsort(history.lo, kind="stable").tolist()
    exits: list[tuple[float, int]] = []
    compactions: list[tuple[int, list[StageRun]]] = []
    nxt, n = 0, len(order)
    target_ratio = p.target if p.target is not None else p.threshold
    inf = float("inf")
    rows_seen = RequestRows(history, counts)

    def one_turn() -> bool:
        """The request holds a single turn (seed 002's guard: nothing committed yet)."""
        return sum(1 for turn in sums.turn_refs if turn > 0) <= 1

    models = call_models(t, session) if settings.window is None else {}
    # rows that could wake the stages run on every request (None: they run at every
    # call), and what they said on the last request where they did nothing
    # (see `Stage.candidates`)
    every = len(p.always) + len(p.enforce)
    wake = _candidates((*p.always, *p.enforce), history.table)
    quiet: tuple[tuple[int, int, int], tuple[StageRun, ...]] | None = None
    woken = False
    for c in zip(calls["call"].tolist(), calls["input_end_pos"].tolist(),
                 calls["model"].tolist(), calls["input_total"].tolist()):
        k, end = int(c[0]), float(c[1])
        while nxt < n and lo[order[nxt]] < end:
            i = order[nxt]
            nxt += 1
            if end <= hi[i]:
                sums.add(cats[i], tokens[i], turns[i], msgs[i], +1, users[i])
                rows_seen.entered.append(i)
                woken = woken or (wake is not None and wake[i])
                if hi[i] != inf:
                    heapq.heappush(exits, (hi[i], i))
        while exits and exits[0][0] < end:
            _, i = heapq.heappop(exits)
            if history.hidden_by_stage(i):      # a stage took it out before the log's edit
                continue
            sums.add(cats[i], tokens[i], turns[i], msgs[i], -1, users[i])
            rows_seen.left.append(i)
        win = settings.window if settings.window is not None else \
            window_of(models[k], p.default_window)
        limit = p.limit_for(win)
        layers = sums.layers()
        total = sum(layers.values()) + est.framing(sums.messages)
        checked = total if p.trigger_layers is None else sum(
            v for name, v in layers.items() if name in p.trigger_layers)
        if not p.trigger_tools:
            checked -= layers["tools"]
        reported = anchor.checked(total) if p.trigger_on == "reported" else None
        if reported is not None:
            checked = reported
        anchor.passed(end, c[3], total)
        row = call_row(session, k, c[2], c[3], layers, total, limit, win, p, target_ratio,
                       one_turn)
        row["checked_tokens"] = int(checked)
        fire = checked > p.threshold * limit
        if quiet is not None and not woken and not rows_seen.left and not (fire and p.stages) \
                and quiet[0] == (win, limit, row["target_tokens"]):
            # the always-stages would do nothing again and no other stage runs
            within = within_target(p, total, row["target_tokens"], limit, fire,
                                   measured_from_layers(p, total, layers))
            row.update({"triggered": fire, "within_target": within,
                        "note": request_note(quiet[1], triggered=fire, within_target=within,
                                             over_window=total > win,
                                             forced_final=row["forced_final"],
                                             window_tokens=win,
                                             trigger_scope=trigger_scope(p))})
        elif every or fire:
            budget = Budget(window_tokens=win, limit_tokens=limit,
                            target_tokens=row["target_tokens"], overhead_tokens=overhead)
            view = make_view(rows_seen.request(end), est, budget, session, k,
                             counted=rows_seen.last is not None, messages=sums.messages,
                             layered=rows_seen.layered)
            rows_seen.seed(view)
            r = compact_view(history, view, p, end_pos=end, checked=reported)
            rows_seen.built(r.view)
            made = [run for run in r.runs if run.event is not None]
            # (no event: no post-step ran, and the enforced stages ran last)
            woken = False
            always_runs = r.runs[:len(p.always)] + r.runs[len(r.runs) - len(p.enforce):]
            quiet = ((win, limit, row["target_tokens"]), always_runs) \
                if wake is not None and not made and all(
                    run.failure is None and not run.summarizer_calls for run in always_runs) \
                else None
            if made:
                anchor.replayed = True
                apply_to_sums(sums, made)
                compactions.append((k, made))
            for run in r.runs:
                if run.event is not None or run.failure is not None:
                    events.append(event_row(session, k, run))
            after = sums.layers()
            after_total = sum(after.values()) + est.framing(sums.messages)
            row.update(after_values(after, after_total, limit))
            row.update({"triggered": r.triggered, "compacted": bool(made),
                        "stages_used": ",".join(r.stages_used),
                        "within_target": within_target(
                            p, after_total, r.target_tokens, limit, r.triggered,
                            measured_from_layers(p, after_total, after)),
                        "over_window": after_total > win,
                        "forced_final": forced_final(p, after_total, limit,
                                                     lambda: after["tools"], one_turn),
                        "note": r.note})
        rows.append(row)
    if compactions:
        ledger.append(ledger_rows(session, compactions))
    return history.transcript()


def _candidates(stages: Sequence[Stage], table: Table) -> list[bool] | None:
    """Per row of ``table``: could its arrival make one of ``stages`` act (None: some
    stage cannot tell, or there is none)?"""
    if not stages:
        return None
    out = np.zeros(table.n, dtype=bool)
    for st in stages:
        got = st.candidates(table)
        if got is None:
            return None
        out |= np.asarray(got, dtype=bool)
    return out.tolist()


class RequestRows:
    """The rows of the request the walk is at, kept from one built request to the next.

    A walk builds the request of every call that may compact. Rather than taking every
    visible row from the session again, it keeps the last request (after its
    compaction, with token counts) and adds the rows that arrived since (``entered``,
    original rows in the order they became visible), less those whose visibility ended
    (``left``). The rows are those of ``history.visible_table(end)``: edits between two
    builds happen only inside a compaction, whose resulting view is what is kept.
    ``tokens``: the estimator's count of every row of ``history.table``, which arriving
    rows carry, with an empty ``layer`` that `request` assigns while the last request's
    layer context holds (`layered`), the view otherwise.
    """

    def __init__(self, history: SessionHistory, tokens: np.ndarray) -> None:
        self.history = history
        self._rows = history.table.with_columns(
            tokens=(tokens, TOKENS_DTYPE),
            layer=(np.full(history.table.n, "", dtype=object), np.dtype(object)))
        self.entered: list[int] = []
        self.left: list[int] = []
        self.last: Table | None = None
        self._scan: Any = None          # the grammar scan of the last request
        self._context: LayerContext | None = None   # and its layer context
        self._grown_from: int | None = None
        self.layered: LayerContext | None = None
        """The layer context of the request just built, when its layers are assigned
        (the last request's and `added_layers`): the rows only grew, in that context."""

    def request(self, end: float) -> Table:
        """The rows of the request ending at ``end`` (tokens counted when kept, layers
        assigned when `layered`)."""
        self._grown_from = None
        self.layered = None
        if self.last is None:
            return self.history.visible_table(end)
        out = self.last
        context = self._context if not self.left else None
        if self.entered:                # (the dtypes are those of the last request)
            self._rows.derive_like(out)     # (once per array, for the whole session)
            new = self._rows.take(self.entered)
            layers = added_layers(new, context) if context is not None else None
            if layers is not None:
                new = new.with_columns(layer=(layers, new.dtypes["layer"]))
            else:
                context = None
            out = append(out, new)
        if self.left:
            gone = self.history.table.ints("part")[self.left]
            out = out.take(np.flatnonzero(~np.isin(out.ints("part"), gone)))
        pos = np.asarray(out.col("pos"), dtype=np.float64)
        if len(pos) > 1 and not (pos[1:] >= pos[:-1]).all():
            out = out.take(np.argsort(pos, kind="stable"))
        elif not self.left:             # the last request's rows, then the new ones
            self._grown_from = self.last.n
            self.layered = context
        return out

    def seed(self, view: View) -> None:
        """Give the view of the request just built its grammar, extended from the last
        request's to the rows that arrived (when it only grew)."""
        # (many new rows, at a compaction long after the last one: a whole scan is cheaper)
        if self._grown_from is not None and self._scan is not None \
                and view.table.n - self._grown_from <= 32:
            scan = grown_scan(self._scan, view.table, self._grown_from)
            if scan is not None:
                view._memo["problem_rows"] = scan.found
                view._memo["grammar_scan"] = scan

    def built(self, view: View) -> None:
        """The request after its compaction: the base of the next one."""
        self.last = view.table
        view_grammar(view)              # read by the stages; kept for the next request
        self._scan = view._memo.get("grammar_scan")
        self._context = view._memo.get("layer_context")
        self.entered.clear()
        self.left.clear()


__all__ = ["Replay", "Settings", "calls_without_input", "helper_sessions", "replay"]
