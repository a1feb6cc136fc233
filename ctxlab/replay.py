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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ctxlab.engine import Budget, StageRun, make_view, request_parts
from ctxlab.history import SessionHistory
from ctxlab.layers import INJECTED_CONTEXT, assign_layers
from ctxlab.pipeline import (Pipeline, compact_view, pipeline_estimator, provider_for,
                             resolve_pipeline, trigger_scope)
from ctxlab.tokens.windows import resolve_window
from ctxlab.schema import TEXT, Transcript
from ctxlab.tokens import Estimator, estimator as get_estimator


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How a replay was run (kept so it can be resumed)."""

    pipeline: Pipeline
    window: int | None
    estimator: str | Estimator | None
    overhead_tokens: Mapping[str, int]
    reported_until: Mapping[str, float] = field(default_factory=dict)


def _categories(f: pd.DataFrame) -> np.ndarray:
    """Layer category of every part that does not depend on the current turn."""
    role = f["role"].to_numpy(dtype=object)
    kind = f["kind"].to_numpy(dtype=object)
    injected = f["content"].str.match(INJECTED_CONTEXT).to_numpy(dtype=bool, na_value=False)
    cat = np.where(kind == "attachment", "attach", "other").astype(object)
    cat[((role == "system") & ~np.isin(kind, ["summary", "marker"]))
        | (injected & (role == "user") & (kind == "text"))] = "system"
    cat[kind == "tool_schema"] = "tools"
    return cat


class _Sums:
    """Per-layer token sums of the visible parts of one session, updated part by part."""

    def __init__(self, overhead: int) -> None:
        self.overhead = overhead
        self.system = self.tools = self.attach = self.other = 0
        self.attach_turn: dict[int, int] = {}
        self.other_turn: dict[int, int] = {}
        self.msg_tokens: dict[int, int] = {}
        self.msg_refs: dict[int, int] = {}
        self.max_turn = 0

    def add(self, cat: str, tokens: int, turn: int, msg: int, sign: int) -> None:
        t = sign * tokens
        if cat == "system":
            self.system += t
        elif cat == "tools":
            self.tools += t
        elif cat == "attach":
            self.attach += t
            self.attach_turn[turn] = self.attach_turn.get(turn, 0) + t
        else:
            self.other += t
            self.other_turn[turn] = self.other_turn.get(turn, 0) + t
            self.msg_tokens[msg] = self.msg_tokens.get(msg, 0) + t
        self.msg_refs[msg] = self.msg_refs.get(msg, 0) + sign
        if self.msg_refs[msg] == 0:
            del self.msg_refs[msg]
        if sign > 0 and turn > self.max_turn:
            self.max_turn = turn

    def layers(self, prompt_msg: int | None) -> dict[str, int]:
        turn = self.max_turn
        cur_a = self.attach_turn.get(turn, 0) if turn > 0 else 0
        cur_o = self.other_turn.get(turn, 0) if turn > 0 else 0
        prompt = self.msg_tokens.get(prompt_msg, 0) if (turn > 0 and prompt_msg is not None
                                                        and prompt_msg in self.msg_refs) else 0
        return {"system": self.system + self.overhead, "tools": self.tools,
                "carried": self.attach - cur_a, "current": cur_a + cur_o - prompt,
                "history": self.other - cur_o, "prompt": prompt}

    @property
    def messages(self) -> int:
        return len(self.msg_refs)


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
    """

    base: Transcript
    transcript: Transcript
    calls: pd.DataFrame
    events: pd.DataFrame
    ledger: pd.DataFrame
    settings: Settings
    next_call: Mapping[str, int] = field(default_factory=dict)

    @property
    def pipeline(self) -> Pipeline:
        return self.settings.pipeline

    def _session(self, session: str | None) -> str:
        return session if session is not None else self.base.sessions[0]

    def at(self, call: int, session: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The request of one call before and after its compaction (parts, with tokens, layer)."""
        s = self._session(session)
        c = self.calls[(self.calls["session"] == s) & (self.calls["call"] == call)]
        if c.empty:
            raise KeyError(f"call {call} of session {s!r} was not replayed")
        end = float(self.base.calls.loc[(self.base.calls["session"] == s)
                                        & (self.base.calls["call"] == call),
                                        "input_end_pos"].iloc[0])
        mine = self.events[(self.events["session"] == s) & (self.events["call"] == call)]
        before_t = self.transcript.rewind(int(mine["event"].min()), session=s) if len(mine) \
            else self.transcript
        est = _estimator(self.settings, self.base, s, call)
        return (_annotate(request_parts(before_t, s, end), est),
                _annotate(request_parts(self.transcript, s, end), est))

    def rewind(self, call: int, session: str | None = None) -> Replay:
        """The replay as it was before ``call``: its events and later ones undone."""
        s = self._session(session)
        later = self.events[(self.events["session"] == s) & (self.events["call"] >= call)]
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

        Example:
            >>> import ctxlab
            >>> r = ctxlab.replay(ctxlab.load("datasets/coding_session_b.jsonl"), "neurolink",
            ...                   window=100_000)
            >>> what_if = r.rewind(30).resume(threshold=0.6)
            >>> len(what_if.calls) == len(r.calls)
            True
        """
        p = resolve_pipeline(pipeline) if pipeline is not None else self.settings.pipeline
        if changes:
            p = replace(p, **changes)
        settings = replace(self.settings, pipeline=p)
        return _walk(self.base, self.transcript, settings, self.next_call, self)

    def recall(self) -> pd.DataFrame:
        """Needed-fact recall per call (`ctxlab.metrics.needed_recall_df`)."""
        from ctxlab.metrics import needed_recall_df
        return needed_recall_df(self.transcript)

    def retention(self) -> pd.DataFrame:
        """Artifact retention per event (`ctxlab.metrics.retention_df`)."""
        from ctxlab.metrics import retention_df
        return retention_df(self.transcript)

    def summary(self) -> dict[str, Any]:
        """The replay in numbers: compactions, tokens sent, peak usage, overflows, recall."""
        from ctxlab.metrics import summarize_recall
        c = self.calls
        rec = summarize_recall(self.recall())
        return {"pipeline": self.pipeline.name, "calls": len(c),
                "compactions": int(c["triggered"].sum()) if len(c) else 0,
                "events": len(self.events),
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


def _estimator(settings: Settings, t: Transcript, session: str, call: int) -> Estimator:
    if settings.estimator is not None:
        return get_estimator(settings.estimator)
    return pipeline_estimator(settings.pipeline, provider_for(t, session, call))


def _annotate(parts: pd.DataFrame, est: Estimator) -> pd.DataFrame:
    out = parts.copy()
    out["tokens"] = est.count_parts(out) if len(out) else np.zeros(0, dtype=np.int64)
    out["layer"] = assign_layers(out)
    return out


def replay(t: Transcript, pipeline: str | Pipeline, *, window: int | None = None,
           estimator: str | Estimator | None = None,
           overhead_tokens: Mapping[str, int] | int | None = None) -> Replay:
    """Replay a pipeline over every call of every session of a log.

    Args:
        t: the log. Recorded compactions are rewound first: the replay starts from what
            the agent would have sent without them.
        pipeline: a preset name or a `Pipeline`.
        window: the context window (default: each call's model's, from the registry).
        estimator: spec or instance (default: the pipeline's).
        overhead_tokens: unrecorded input per session (default: fitted from the log's
            reported usage with the replay's estimator, 0 where there is none).
    """
    p = resolve_pipeline(pipeline)
    base = t.rewind_recorded()
    recorded = t.events[t.events["origin"] == "recorded"]
    # up to its first recorded compaction, the uncompacted request is the logged one
    reported_until = {str(k): float(v) for k, v in recorded.groupby("session")["pos"].min().items()}
    if overhead_tokens is None:
        from ctxlab.tokens.accuracy import session_overheads
        spec = estimator if estimator is not None else p.estimator.replace(
            "{provider}", provider_for(t, t.sessions[0], int(t.calls["call"].min()))
            if len(t.calls) else "").rstrip(":")
        overhead_tokens = session_overheads(t, spec) if len(t.calls) else {}
    if isinstance(overhead_tokens, int):
        overhead_tokens = {s: overhead_tokens for s in base.sessions}
    settings = Settings(pipeline=p, window=window, estimator=estimator,
                        overhead_tokens=dict(overhead_tokens), reported_until=reported_until)
    return _walk(base, base, settings, {}, None)


def _walk(base: Transcript, t: Transcript, settings: Settings, start: Mapping[str, int],
          previous: Replay | None) -> Replay:
    rows: list[dict[str, Any]] = []
    ledger: list[pd.DataFrame] = []
    events: list[dict[str, Any]] = []
    for session in base.sessions:
        calls = base.calls[base.calls["session"] == session].sort_values("input_end_pos")
        first = start.get(session, 0) if previous is not None else 0
        if previous is not None and session not in start:
            continue  # this session was not rewound: keep it as it was
        calls = calls[calls["call"] >= first]
        if calls.empty:
            continue
        anchor = _Anchor(until=settings.reported_until.get(session, np.inf))
        if previous is not None:
            anchor.resume(previous, base, session, first)
        t = _walk_session(t, session, calls, settings, rows, events, ledger, anchor)
    calls_df = pd.DataFrame(rows)
    events_df = pd.DataFrame(events)
    ledger_df = pd.concat(ledger, ignore_index=True) if ledger else _empty_ledger()
    if previous is not None:
        calls_df = pd.concat([previous.calls, calls_df], ignore_index=True)
        events_df = pd.concat([previous.events, events_df], ignore_index=True) \
            if len(events_df) else previous.events
        ledger_df = pd.concat([previous.ledger, ledger_df], ignore_index=True)
    if calls_df.empty:
        calls_df = pd.DataFrame(columns=["session", "call"])
    if events_df.empty:
        events_df = pd.DataFrame(columns=["session", "event", "call", "stage"])
    return Replay(base=base, transcript=t, calls=calls_df, events=events_df, ledger=ledger_df,
                  settings=settings, next_call={})


def _empty_ledger() -> pd.DataFrame:
    return pd.DataFrame(columns=["session", "event", "call", "stage", "action", "part", "role",
                                 "kind", "tool_name", "file_path", "tokens", "reason"])


class _Anchor:
    """The previous call's reported input, for ``trigger_on="reported"``.

    Valid while the replayed request is still the logged one: before the log's first
    recorded compaction (``until``) and before the replay's first event.
    """

    def __init__(self, until: float) -> None:
        self.until = until
        self.prev: tuple[int, int] | None = None  # (reported input, estimated total)
        self.replayed = False

    def checked(self, total: int) -> int | None:
        """The trigger's measure at this call, or None when the estimate applies."""
        if self.replayed or self.prev is None:
            return None
        return self.prev[0] + (total - self.prev[1])

    def passed(self, end: float, input_total: Any, total: int) -> None:
        """Remember a call that went out as logged."""
        known = input_total is not None and not pd.isna(input_total)
        self.prev = (int(input_total), int(total)) if known and end < self.until else None

    def resume(self, previous: Replay, base: Transcript, session: str, first: int) -> None:
        """Pick up from the calls a rewound replay kept."""
        ev = previous.events
        self.replayed = bool(len(ev) and (ev["session"] == session).any())
        c = previous.calls
        kept = c[(c["session"] == session) & (c["call"] < first)]
        if len(kept) and not self.replayed:
            last = kept.iloc[-1]
            bc = base.calls
            end = float(bc.loc[(bc["session"] == session) & (bc["call"] == last["call"]),
                               "input_end_pos"].iloc[0])
            self.passed(end, last["input_total"], int(last["tokens_before"]))


def _walk_session(t: Transcript, session: str, calls: pd.DataFrame, settings: Settings,
                  rows: list[dict[str, Any]], events: list[dict[str, Any]],
                  ledger: list[pd.DataFrame], anchor: _Anchor) -> Transcript:
    p = settings.pipeline
    k0 = int(calls["call"].iloc[0])
    est = _estimator(settings, t, session, k0)
    overhead = int(settings.overhead_tokens.get(session, 0))
    history = SessionHistory(t, session)
    f = history.frame
    lo, hi = history.lo.tolist(), history.hi.tolist()
    tokens = est.count_parts(f).tolist()
    cats = _categories(f).tolist()
    turns = f["turn"].to_numpy(dtype=np.int64, na_value=0).tolist()
    msgs = f["msg"].to_numpy(dtype=np.int64).tolist()
    prompt_of = _prompt_messages(f)
    sums = _Sums(overhead)
    order = np.argsort(history.lo, kind="stable").tolist()
    exits: list[tuple[float, int]] = []
    compactions: list[tuple[int, list[StageRun]]] = []
    nxt, n = 0, len(order)
    target_ratio = p.target if p.target is not None else p.threshold
    inf = float("inf")
    for c in zip(calls["call"].tolist(), calls["input_end_pos"].tolist(),
                 calls["model"].tolist(), calls["input_total"].tolist()):
        k, end = int(c[0]), float(c[1])
        while nxt < n and lo[order[nxt]] < end:
            i = order[nxt]
            nxt += 1
            if end <= hi[i]:
                sums.add(cats[i], tokens[i], turns[i], msgs[i], +1)
                if hi[i] != inf:
                    heapq.heappush(exits, (hi[i], i))
        while exits and exits[0][0] < end:
            _, i = heapq.heappop(exits)
            sums.add(cats[i], tokens[i], turns[i], msgs[i], -1)
        win = settings.window if settings.window is not None else _window(c[2])
        limit = p.limit_for(win)
        layers = sums.layers(prompt_of.get(sums.max_turn))
        total = sum(layers.values()) + est.framing(sums.messages)
        checked = total if p.trigger_layers is None else sum(
            v for name, v in layers.items() if name in p.trigger_layers)
        reported = anchor.checked(total) if p.trigger_on == "reported" else None
        if reported is not None:
            checked = reported
        anchor.passed(end, c[3], total)
        row = _row(session, k, c[2], c[3], layers, total, limit, win, p, target_ratio)
        row["checked_tokens"] = int(checked)
        if p.always or checked > p.threshold * limit:
            budget = Budget(window_tokens=win, limit_tokens=limit,
                            target_tokens=row["target_tokens"], overhead_tokens=overhead)
            view = make_view(history.visible(end), est, budget, session, k)
            r = compact_view(history, view, p, end_pos=end, checked=reported)
            made = [run for run in r.runs if run.event is not None]
            new_events = [int(run.event) for run in made]
            if made:
                anchor.replayed = True
                _apply_to_sums(sums, made)
                compactions.append((k, made))
                for run in r.runs:
                    if run.event is None:
                        continue
                    events.append({"session": session, "event": int(run.event), "call": k,
                                   "stage": run.stage, "tokens_before": run.tokens_before,
                                   "tokens_after": run.tokens_after,
                                   "tokens_saved": run.tokens_saved, "hidden": run.hidden,
                                   "inserted": run.inserted,
                                   "summarizer_calls": run.summarizer_calls,
                                   "grammar_before": run.grammar_before,
                                   "grammar_after": run.grammar_after, "ms": run.ms,
                                   "reason": run.reason})
            after = sums.layers(prompt_of.get(sums.max_turn))
            row.update(_after(after, after_total := sum(after.values())
                              + est.framing(sums.messages), limit))
            row.update({"triggered": r.triggered, "compacted": bool(new_events),
                        "stages_used": ",".join(r.stages_used),
                        "within_target": after_total <= r.target_tokens or not r.triggered,
                        "over_window": after_total > win,
                        "forced_final": p.on_over == "final" and after_total > limit,
                        "note": r.note})
        rows.append(row)
    if compactions:
        ledger.append(_ledger_rows(session, compactions))
    return history.transcript()


def _window(model: Any) -> int:
    """The context window of a model (registry lookup, cached)."""
    key = model if isinstance(model, str) else None
    if key not in _WINDOWS:
        _WINDOWS[key] = resolve_window(model=key).window_tokens
    return _WINDOWS[key]


_WINDOWS: dict[str | None, int] = {}


def _prompt_messages(f: pd.DataFrame) -> dict[int, int]:
    """The prompt message (first user text message) of every turn."""
    users = f[(f["role"] == "user") & (f["kind"] == "text")]
    return {int(k): int(v) for k, v in users.groupby("turn")["msg"].min().items()}


def _apply_to_sums(sums: _Sums, made: list[StageRun]) -> None:
    """Take out of the sums what the runs hid and add what they inserted."""
    for run in made:
        for frame, sign in ((run.removed, -1), (run.added, +1)):
            if frame is None or frame.empty:
                continue
            layer = frame["layer"].to_numpy(dtype=object)
            kind = frame["kind"].to_numpy(dtype=object)
            # the layer already says system and tools; the rest is attachment or other
            cats = np.where(np.isin(layer, ["system", "tools"]), layer,
                            np.where(kind == "attachment", "attach", "other"))
            for cat, n, turn, msg in zip(cats.tolist(),
                                         frame["tokens"].to_numpy(dtype=np.int64).tolist(),
                                         frame["turn"].to_numpy(dtype=np.int64,
                                                                na_value=0).tolist(),
                                         frame["msg"].to_numpy(dtype=np.int64).tolist()):
                sums.add(cat, n, turn, msg, sign)


_LEDGER_TEXT = ("role", "kind", "tool_name", "file_path")


def _ledger_rows(session: str, compactions: list[tuple[int, list[StageRun]]]) -> pd.DataFrame:
    """One row per part each compaction hid or inserted: per compaction the hidden parts
    in position order, then the inserted ones (a part inserted and hidden in the same
    compaction is in both)."""
    cols: dict[str, list[np.ndarray]] = {k: [] for k in (
        "order", "action", "pos", "event", "call", "stage", "reason", "part", "tokens",
        *_LEDGER_TEXT)}
    for i, (call, made) in enumerate(compactions):
        for run in made:
            for action, frame in ((0, run.removed), (1, run.added)):
                if frame is None or frame.empty:
                    continue
                n = len(frame)
                cols["order"].append(np.full(n, i))
                cols["action"].append(np.full(n, action))
                cols["pos"].append(frame["pos"].to_numpy(dtype=np.float64))
                cols["event"].append(np.full(n, int(run.event)))
                cols["call"].append(np.full(n, call))
                cols["stage"].append(np.full(n, run.stage, dtype=object))
                cols["reason"].append(np.full(n, run.reason, dtype=object))
                cols["part"].append(frame["part"].to_numpy(dtype=np.int64))
                cols["tokens"].append(frame["tokens"].to_numpy(dtype=np.int64))
                for c in _LEDGER_TEXT:
                    cols[c].append(frame[c].to_numpy(dtype=object))
    if not cols["order"]:
        return _empty_ledger()
    flat = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.lexsort((flat["pos"], flat["action"], flat["order"]))
    out = {k: v[order] for k, v in flat.items()}
    n = len(order)
    text = {k: pd.array(v, dtype=TEXT) for k, v in (
        ("session", [session] * n), ("stage", out["stage"]),
        ("action", np.where(out["action"] == 0, "hidden", "inserted").astype(object)),
        ("role", out["role"]), ("kind", out["kind"]), ("tool_name", out["tool_name"]),
        ("file_path", out["file_path"]), ("reason", out["reason"]))}
    return pd.DataFrame({
        "session": text["session"], "event": out["event"], "call": out["call"],
        "stage": text["stage"], "action": text["action"], "part": out["part"],
        "role": text["role"], "kind": text["kind"], "tool_name": text["tool_name"],
        "file_path": text["file_path"], "tokens": out["tokens"], "reason": text["reason"]})


_BEFORE = tuple(f"{k}_before" for k in ("system", "tools", "carried", "current", "history",
                                          "prompt"))
_AFTER = tuple(f"{k}_after" for k in ("system", "tools", "carried", "current", "history",
                                        "prompt"))


def _row(session: str, call: int, model: Any, input_total: Any, layers: dict[str, int],
         total: int, limit: int, win: int, p: Pipeline, target_ratio: float) -> dict[str, Any]:
    usage = total / limit if limit else np.inf
    row: dict[str, Any] = {"session": session, "call": call, "model": model,
                           "input_total": input_total, "tokens_before": total}
    row.update(zip(_BEFORE, layers.values()))
    row.update({"usage_before": usage, "limit_tokens": limit, "window_tokens": win})
    row.update(zip(_AFTER, layers.values()))
    row.update({"tokens_after": total, "usage_after": usage,
                "target_tokens": int(target_ratio * limit), "triggered": False,
                "compacted": False, "stages_used": "", "within_target": True,
                "over_window": total > win,
                "forced_final": p.on_over == "final" and total > limit, "note": ""})
    if total > win:
        row["note"] = (f"over the {win:,}-token window, but the trigger did not fire "
                       f"(it measures {trigger_scope(p)})")
    return row


def _after(layers: dict[str, int], total: int, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = dict(zip(_AFTER, layers.values()))
    out["tokens_after"] = int(total)
    out["usage_after"] = total / limit if limit else np.inf
    return out


__all__ = ["Replay", "Settings", "replay"]
