"""Pipelines: a trigger, ordered stages, a target, post-steps — and `compact`.

A `Pipeline` says when to compact (usage of a limit above a threshold, measured on
all layers or only some), which stages to run in order until the request is under
the target, which stages run on every request regardless (``always`` before the
trigger: e.g. tool output truncation; ``enforce`` after the triggered stages, where
every layer is assembled: seed 003's history budget), and what runs after compaction
(``post``: tool-pair repair).
`compact` applies one to the request of one call and returns a `CompactResult`
(seed 000's CompactionResult: stages used, tokens before/after/saved) holding the
annotated, rewindable transcript.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from ctxlab.engine import Budget, StageRun, call_end_pos, make_view, run_on
from ctxlab.errors import ConfigError
from ctxlab.history import SessionHistory
from ctxlab.layers import LAYERS
from ctxlab.schema import Transcript, one_log, remembered, session_rows
from ctxlab.stages import stage as make_stage
from ctxlab.stages.base import Stage, View, ints, labels, one_of
from ctxlab.stages.grammar import view_grammar
from ctxlab.tokens import Estimator, estimator as get_estimator
from ctxlab.tokens.windows import guard_limit, output_reserve, resolve_window

Limit = Literal["available", "effective", "autocompact", "window", "fixed"]
AUTOCOMPACT_OUTPUT = 20_000
"""Claude Code's auto-compaction keeps ``min(max output, 20,000)`` for the summary's reply."""
AUTOCOMPACT_BUFFER = 13_000
"""And a further 13,000 tokens of buffer: it compacts past ``window − 20k − 13k``."""
OnOver = Literal["send", "final"]
TriggerOn = Literal["estimated", "reported"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pipeline:
    """When and how to compact one request.

    Attributes:
        name: shown in results and reports.
        stages: run in order when triggered, each only while the request is over target.
        always: run on every request before the trigger is checked.
        enforce: run on every request after the triggered stages, in order (seed 003's
            single enforcement point: the history gets the budget the other layers
            leave, `ctxlab.stages.trim_history`).
        post: run after any compaction (tool-pair repair...).
        threshold: trigger when the checked tokens exceed ``threshold × limit``.
        target: stages stop once the request is at or under ``target × limit``
            (None: the threshold).
        limit: what the ratio is of: ``available`` (seed 000: window − output reserve),
            ``effective`` (seed 002: window − 8,192 buffer − max output), ``autocompact``
            (Claude Code: window − min(max output, 20k) − 13k, 167k of 200k), ``window``,
            or ``fixed`` (``limit_tokens``, e.g. seed 003's autoCompactThreshold).
        limit_tokens: the limit when ``limit == "fixed"``.
        max_tokens: explicit max output tokens (output reserve), when the system sets one.
        trigger_layers: layers the trigger measures (None: the whole request). Seed 003's
            legacy trigger sees only L2, L3 and L5.
        trigger_tools: whether the trigger counts the tool definitions (seed 004's loop
            checks the messages' estimate alone: False). Only with the whole request.
        on_over: ``send`` (the request goes out over the limit) or ``final`` (seed 002:
            force a final turn instead).
        trigger_on: what a replay's trigger measures: ``estimated`` (the estimator's count
            of the request) or ``reported`` (Claude Code: the previous call's reported
            input plus the estimate of what entered the request since, while the
            replayed request is still the logged one; the estimate afterwards).
        estimator: spec used when `compact` is given none; ``{provider}`` is filled
            from the call's model.
        default_window: the window of a model the window registry does not know (None:
            the registry's fallback, seed 000's 128,000; seed 002 falls back to 131,072).
        description: one line for listings.
    """

    name: str
    stages: tuple[Stage, ...] = ()
    always: tuple[Stage, ...] = ()
    enforce: tuple[Stage, ...] = ()
    post: tuple[Stage, ...] = ()
    threshold: float = 0.8
    target: float | None = None
    limit: Limit = "available"
    limit_tokens: int | None = None
    max_tokens: int | None = None
    trigger_layers: tuple[str, ...] | None = None
    trigger_tools: bool = True
    on_over: OnOver = "send"
    trigger_on: TriggerOn = "estimated"
    estimator: str = "chars:4"
    default_window: int | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if not _ratio(self.threshold):
            raise ConfigError(f"threshold must be a ratio in (0, 10], not {self.threshold!r}")
        if self.target is not None and not _ratio(self.target):
            raise ConfigError(f"target must be a ratio in (0, 10], not {self.target!r}")
        if self.default_window is not None and (
                isinstance(self.default_window, bool) or not isinstance(self.default_window, int)
                or self.default_window <= 0):
            raise ConfigError(f"default_window must be a number of tokens > 0 or None, not "
                              f"{self.default_window!r}")
        if self.limit not in ("available", "effective", "autocompact", "window", "fixed"):
            raise ConfigError(f"limit must be 'available', 'effective', 'autocompact', "
                              f"'window' or 'fixed', not {self.limit!r}")
        if self.limit == "fixed" and not (self.limit_tokens and self.limit_tokens > 0):
            raise ConfigError("limit='fixed' needs limit_tokens > 0")
        if self.trigger_on not in ("estimated", "reported"):
            raise ConfigError(f"trigger_on must be 'estimated' or 'reported', not "
                              f"{self.trigger_on!r}")
        if not isinstance(self.trigger_tools, bool):
            raise ConfigError(f"trigger_tools must be True or False, not {self.trigger_tools!r}")
        if not self.trigger_tools and (self.trigger_layers is not None
                                       or self.trigger_on == "reported"):
            raise ConfigError("trigger_tools=False takes the tool definitions out of the whole "
                              "estimated request; with trigger_layers leave out 'tools' "
                              "instead, and reported usage cannot be split")
        if self.trigger_on == "reported" and self.trigger_layers is not None:
            raise ConfigError("trigger_on='reported' measures the whole request (reported "
                              "usage has no layers); drop trigger_layers")
        bad = set(self.trigger_layers or ()) - set(LAYERS)
        if bad:
            raise ConfigError(f"unknown layers {sorted(bad)}; layers: {', '.join(LAYERS)}")
        for s in (*self.stages, *self.always, *self.enforce, *self.post):
            if not isinstance(s, Stage):
                raise ConfigError(f"{s!r} is not a Stage; build stages with ctxlab.stages.stage")

    def with_threshold(self, threshold: float, target: float | None = None) -> Pipeline:
        """A copy with another trigger threshold (and target)."""
        return replace(self, threshold=threshold, target=target)

    def limit_for(self, window: int) -> int:
        """The limit in tokens for a context window."""
        if self.limit == "fixed":
            return int(self.limit_tokens or 0)
        if self.limit == "window":
            return window
        if self.limit == "effective":   # no room at all: every request is over (seed 002)
            return max(guard_limit(window, max_output=self.max_tokens), 0)
        if self.limit == "autocompact":
            out = AUTOCOMPACT_OUTPUT if self.max_tokens is None \
                else min(self.max_tokens, AUTOCOMPACT_OUTPUT)
            return max(window - out - AUTOCOMPACT_BUFFER, 0)
        return window - output_reserve(window, self.max_tokens)

    def __str__(self) -> str:
        every = [f"{' + '.join(s.name for s in group)} {when}" for group, when in (
            (self.always, "on every request"), (self.enforce, "enforced after"))
            if group]
        of = f"{self.limit_tokens or 0:,} tokens (fixed)" if self.limit == "fixed" \
            else self.limit
        return (f"{self.name}: {''.join(e + '; ' for e in every)}"
                f"{' > '.join(s.name for s in self.stages) or 'no stages'} "
                f"at {round(100 * self.threshold, 2):g}% of {of}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactResult:
    """What `compact` did to one request (seed 000's CompactionResult, and more).

    Attributes:
        compacted: whether any event was made.
        triggered: whether the trigger fired.
        stages_used: stages that made an event, in order (always-stages included).
        tokens_before, tokens_after: the whole request, before and after.
        limit_tokens, target_tokens, window_tokens: the budget it was measured against.
        within_target: whether the request ends at or under the target when the trigger
            fired; when it did not, at or under the limit if stages are enforced on every
            request (their budget), else True.
        over_window: whether it still exceeds the context window.
        forced_final: seed 002's guard forced a final turn (``on_over="final"``).
        grammar_before, grammar_after: message-grammar problems, by kind.
        runs: every stage application (events, tokens, timing).
        history: the session's edits; `transcript` is the annotated transcript
            (``transcript.rewind()`` undoes it).
        view: the request after compaction.
    """

    pipeline: str
    session: str
    call: int
    compacted: bool
    triggered: bool
    stages_used: tuple[str, ...]
    tokens_before: int
    tokens_after: int
    limit_tokens: int
    target_tokens: int
    window_tokens: int
    within_target: bool
    over_window: bool
    forced_final: bool
    grammar_before: dict[str, int]
    grammar_after: dict[str, int]
    runs: tuple[StageRun, ...] = field(default_factory=tuple)
    trigger_scope: str = "the whole request"
    history: SessionHistory
    view: View

    @property
    def transcript(self) -> Transcript:
        """The annotated transcript (built from the session history on first use)."""
        return self.history.transcript()

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def note(self) -> str:
        """Why the request is over its target after compaction ('' when it is not)."""
        return request_note(self.runs, triggered=self.triggered, within_target=self.within_target,
                            over_window=self.over_window, forced_final=self.forced_final,
                            window_tokens=self.window_tokens, trigger_scope=self.trigger_scope)

    def __repr__(self) -> str:
        return (f"CompactResult({self.pipeline}, call {self.call}: "
                f"{self.tokens_before:,} → {self.tokens_after:,} tokens "
                f"(limit {self.limit_tokens:,}), stages {list(self.stages_used)})")


def forced_final(p: Pipeline, total: int, limit: int, tools: Callable[[], int],
                 one_turn: Callable[[], bool]) -> bool:
    """Seed 002's guard: a request over the limit forces a final turn (``on_over="final"``)
    — unless only the tool schemas push it over while the request holds a single turn:
    nothing is committed yet, the guard's projection leaves the schemas out, and the
    request goes ahead. ``tools`` (the schemas' tokens) and ``one_turn`` are asked only
    then.

    Example:
        >>> from ctxlab.presets import preset
        >>> p = preset("ai-agent")
        >>> [forced_final(p, 110, 100, lambda: 20, lambda: first) for first in (True, False)]
        [False, True]
        >>> forced_final(p, 130, 100, lambda: 20, lambda: True)
        True
    """
    if p.on_over != "final" or total <= limit:
        return False
    return not (total - tools() <= limit and one_turn())


def within_target(p: Pipeline, tokens: int, target: int, limit: int, triggered: bool,
                  measured: int | None = None) -> bool:
    """A request's verdict after compaction: what the trigger measures (``measured``; None:
    the whole request, ``tokens``) at or under the target when the trigger fired; when it
    did not, the request at or under the limit if stages are enforced on every request
    (their budget), else True."""
    if triggered:
        return (tokens if measured is None else measured) <= target
    return not p.enforce or tokens <= limit


def scoped(p: Pipeline) -> bool:
    """Does the trigger measure less than the whole request (some layers, or the request
    without its tool definitions)? The triggered stages then work towards a target of that
    same quantity (seed 004's composite strategy re-estimates the messages alone)."""
    return p.trigger_layers is not None or not p.trigger_tools


def trigger_measure(p: Pipeline, view: View) -> int:
    """What the trigger measures on a view (`trigger_scope`)."""
    checked = checked_tokens(view, p.trigger_layers)
    if not p.trigger_tools:
        checked -= checked_tokens(view, ("tools",))
    return checked


def measured_from_layers(p: Pipeline, total: int, layers: dict[str, int]) -> int:
    """`trigger_measure` from a request's layer sums and its ``total`` (a replay's)."""
    checked = total if p.trigger_layers is None else sum(
        v for name, v in layers.items() if name in p.trigger_layers)
    return checked - layers["tools"] if not p.trigger_tools else checked


def _ratio(x: Any) -> bool:
    """A number in (0, 10] (not a bool, not a text)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x <= 10


def request_note(runs: Sequence[StageRun], *, triggered: bool, within_target: bool,
                 over_window: bool, forced_final: bool, window_tokens: int,
                 trigger_scope: str) -> str:
    """Why a request is over its target after compaction ('' when it is not), from the
    stage runs it had (`CompactResult.note`)."""
    if over_window and not triggered:
        return (f"over the {window_tokens:,}-token window, but the trigger did not "
                f"fire (it measures {trigger_scope})")
    if within_target:
        return ""
    if forced_final:
        return "over the limit: the guard forces a final turn instead of compacting"
    tried = [f"{r.stage}: {r.reason}" if r.event is None else f"{r.stage}: {r.warning}"
             for r in runs if r.event is None or r.warning]
    if not runs:
        return "over target and the pipeline has no stage to run"
    return "stages exhausted, still over target" + (f" ({'; '.join(tried)})" if tried else "")


def window_note(p: Pipeline, window: int | None) -> str | None:
    """What a window given for ``p`` does not do: a pipeline with a fixed limit
    (``limit="fixed"``: neuron, copilot) triggers and targets by that limit whatever the
    window, which only decides which requests overflow. None: nothing to say.

    Example:
        >>> print(window_note(Pipeline(name="x", limit="fixed", limit_tokens=100_000), 50_000))
        x triggers at a fixed 100,000 tokens whatever the window: 50,000 counts overflows only
    """
    if window is None or p.limit != "fixed":
        return None
    return (f"{p.name} triggers at a fixed {p.limit_tokens or 0:,} tokens whatever the window: "
            f"{window:,} counts overflows only")


def changed(p: Pipeline, **changes: Any) -> Pipeline:
    """``p`` with fields replaced (``threshold=0.7``).

    Raises:
        ConfigError: a name that is not a field of `Pipeline` (listing the fields).

    Example:
        >>> changed(Pipeline(name="x"), threshold=0.7).threshold
        0.7
        >>> changed(Pipeline(name="x"), treshold=0.7)
        Traceback (most recent call last):
        ...
        ctxlab.errors.ConfigError: pipeline 'x' has no field 'treshold'; fields: name, ...
    """
    names = [f.name for f in fields(Pipeline)]
    unknown = [k for k in changes if k not in names]
    if unknown:
        raise ConfigError(f"pipeline {p.name!r} has no field {unknown[0]!r}; fields: "
                          f"{', '.join(names)}")
    try:
        return replace(p, **changes) if changes else p
    except (TypeError, ValueError) as e:     # a value of the wrong type
        raise ConfigError(f"pipeline {p.name!r}: {e}") from None


def resolve_pipeline(pipeline: str | Pipeline) -> Pipeline:
    """A pipeline from a preset name, or the instance itself."""
    if isinstance(pipeline, Pipeline):
        return pipeline
    from ctxlab.presets import preset
    return preset(pipeline)


def call_models(t: Transcript, session: str) -> dict[int, str | None]:
    """The model of each call of a session: its own, or for a call that names none (some
    agents log none for a step they took without a model response) the latest model
    named before it in the session, else the first named after it."""
    rows = session_rows(t.calls, session)
    calls, models = _call_columns(t.calls)
    rows = rows[np.argsort(calls[rows], kind="stable")]
    known = [m if isinstance(m, str) else None for m in models[rows].tolist()]
    first = next((m for m in known if m is not None), None)
    out: dict[int, str | None] = {}
    last = first
    for k, m in zip(calls[rows].tolist(), known):
        last = m if m is not None else last
        out[int(k)] = last
    return out


def _call_columns(calls: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A calls frame's ``call`` and ``model`` columns as arrays (read once per frame
    inside `ctxlab.schema.frames_unchanged`: a log of many sessions)."""
    return remembered(calls, "call_columns", lambda c: (
        c["call"].to_numpy(dtype=np.int64), c["model"].to_numpy(dtype=object)))


def window_for(t: Transcript, session: str, call: int, default: int | None = None) -> int:
    """The context window of the model that made a call (registry lookup; `call_models`);
    ``default``: the window of a model the registry does not know (None: its fallback)."""
    return model_window(call_models(t, session).get(int(call)), default)


def model_window(model: str | None, default: int | None = None) -> int:
    """A model's context window; ``default``: that of a model the registry does not know
    (None: the registry's fallback, `Pipeline.default_window`)."""
    r = resolve_window(model=model)
    return default if default is not None and r.method == "global-default" \
        else r.window_tokens


def session_provider(t: Transcript, session: str) -> str:
    """The provider whose tokenizer counts a session's requests: that of its first call
    whose model the window registry knows (``""`` when none is known).

    One provider per session: a call that names no model (some agents log none for a
    retry or a sub-step) is counted like the session's other calls, and every way of
    looking at a call (`compact`, the replay walk, `Replay.at`, a resumed replay) counts
    it alike.
    """
    for model in call_models(t, session).values():      # in call order
        if model is not None and (provider := resolve_window(model=model).provider):
            return provider
    return ""


def filled_spec(spec: str, provider: str | None) -> str:
    """An estimator spec with ``{provider}`` filled in (none known: the family's default).

    Example:
        >>> filled_spec("neurolink:{provider}", "openai"), filled_spec("neurolink:{provider}", "")
        ('neurolink:openai', 'neurolink')
    """
    return spec.replace("{provider}", provider or "").rstrip(":")


def pipeline_estimator(p: Pipeline, provider: str) -> Estimator:
    """The pipeline's default estimator, with ``{provider}`` filled in."""
    return get_estimator(filled_spec(p.estimator, provider))


def trigger_scope(p: Pipeline) -> str:
    """What the pipeline's trigger measures, in words."""
    if p.trigger_layers is None:
        return "the whole request" if p.trigger_tools else \
            "the whole request but the tool definitions"
    return "only " + ", ".join(p.trigger_layers)


def checked_tokens(view: View, layers: tuple[str, ...] | None) -> int:
    """Tokens the trigger sees: the whole request, or only some layers."""
    if layers is None:
        return view.total_tokens
    chosen = one_of(labels(view, "layer"), layers)
    tokens = int(np.asarray(view.col("tokens"), dtype=np.int64)[chosen].sum())
    return tokens + (view.overhead_tokens if "system" in layers else 0)


def compact(t: Transcript, pipeline: str | Pipeline, *, window: int | None = None,
            session: str | None = None, call: int | None = None,
            estimator: str | Estimator | None = None, overhead_tokens: int = 0,
            force: bool = False) -> CompactResult:
    """Compact the request of one call (default: the last call of the first session).

    Args:
        t: the transcript (not changed; the result holds the new one).
        pipeline: a preset name (``"neurolink"``...) or a `Pipeline`.
        window: the context window in tokens (default: from the call's model).
        session: which session (default: the first).
        call: which call (default: the session's last).
        estimator: spec or instance (default: the pipeline's).
        overhead_tokens: unrecorded input to add to the request (system prompt and tool
            schemas the log lacks; `ctxlab.reported_usage_df` fits it).
        force: run the stages even when the trigger does not fire.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/coding_session.jsonl").rewind_recorded()
        >>> r = ctxlab.compact(t, "neurolink", window=200_000)
        >>> r.stages_used[:1], r.tokens_after < r.tokens_before
        (('truncate_tool_output',), True)
    """
    t = one_log(t, "compact")
    p = resolve_pipeline(pipeline)
    sessions = t.sessions
    if not sessions:
        raise ConfigError("the transcript has no sessions")
    session = session if session is not None else sessions[0]
    if session not in sessions:
        raise ConfigError(f"no session {session!r}; sessions: {sessions[:10]}")
    calls = t.calls[t.calls["session"] == session]
    if calls.empty:
        raise ConfigError(f"session {session!r} has no LLM calls to compact")
    call = int(calls["call"].max()) if call is None else int(call)
    end = call_end_pos(t, session, call)
    win = int(window) if window is not None else window_for(t, session, call,
                                                            p.default_window)
    est = get_estimator(estimator) if estimator is not None else \
        pipeline_estimator(p, session_provider(t, session))
    limit = p.limit_for(win)
    target = int((p.target if p.target is not None else p.threshold) * limit)
    budget = Budget(window_tokens=win, limit_tokens=limit, target_tokens=target,
                    overhead_tokens=int(overhead_tokens))
    history = SessionHistory(t, session)
    view = make_view(history.visible_table(end), est, budget, session, call)
    return compact_view(history, view, p, end_pos=end, force=force)


def compact_view(history: SessionHistory, view: View, p: Pipeline, *, end_pos: float,
                 force: bool = False, checked: int | None = None) -> CompactResult:
    """`compact` on a view already built, recording the edits in a session history.

    The replay keeps one history per session and builds views from it; `compact` makes
    a fresh one per call. ``checked``: what the trigger measures, when the caller knows
    better than the view's estimate (``trigger_on="reported"``).
    """
    before, g_before = view.total_tokens, view_grammar(view)
    runs: list[StageRun] = []
    if p.always:
        view, more = run_on(history, view, p.always, end_pos=end_pos, trigger="always",
                            until_target=False)
        runs += more
    if checked is None:
        checked = trigger_measure(p, view)
    else:
        checked += view.total_tokens - before  # what always-stages saved
    triggered = force or checked > p.threshold * view.limit_tokens
    if triggered and p.stages:
        view, more = run_on(history, view, p.stages, end_pos=end_pos, trigger="threshold",
                            measure=(lambda v: trigger_measure(p, v)) if scoped(p) else None)
        runs += more
    if p.enforce:
        view, more = run_on(history, view, p.enforce, end_pos=end_pos, trigger="enforce",
                            until_target=False)
        runs += more
    if any(run.event is not None for run in runs) and p.post:
        view, more = run_on(history, view, p.post, end_pos=end_pos, trigger="post",
                            until_target=False)
        runs += more
    after, limit, target = view.total_tokens, view.limit_tokens, view.target_tokens

    def one_turn() -> bool:
        turns = ints(view, "turn")
        turns = turns[turns > 0]
        return not len(turns) or turns.min() == turns.max()

    return CompactResult(
        pipeline=p.name, session=view.session, call=view.call if view.call is not None else -1,
        compacted=any(run.event is not None for run in runs), triggered=triggered,
        stages_used=tuple(run.stage for run in runs if run.event is not None),
        tokens_before=before, tokens_after=after, limit_tokens=limit, target_tokens=target,
        window_tokens=view.window_tokens,
        within_target=within_target(p, after, target, limit, triggered,
                                    trigger_measure(p, view) if scoped(p) else None),
        over_window=after > view.window_tokens,
        forced_final=forced_final(p, after, limit, lambda: checked_tokens(view, ("tools",)),
                                  one_turn),
        grammar_before=g_before, grammar_after=view_grammar(view), runs=tuple(runs),
        trigger_scope=trigger_scope(p), history=history, view=view)


def compact_all(t: Transcript, pipeline: str | Pipeline, *, window: int | None = None,
                estimator: str | Estimator | None = None,
                overhead_tokens: dict[str, int] | int = 0) -> tuple[Transcript, pd.DataFrame]:
    """Compact every call's request in order, each on the result of the one before.

    A plain walk over the calls (the replay engine adds caching, rewind and what-if on
    top). Returns the annotated transcript and one row per call: ``session``, ``call``,
    ``tokens_before``, ``tokens_after``, ``limit_tokens``, ``target_tokens``,
    ``window_tokens``, ``triggered``, ``stages_used``, ``within_target``, ``over_window``,
    ``forced_final``, ``note`` (why a request stayed over its target).
    """
    t = one_log(t, "compact_all")
    p = resolve_pipeline(pipeline)
    rows = []
    for session in t.sessions:
        calls = t.calls.loc[t.calls["session"] == session, "call"].astype(int).tolist()
        over = overhead_tokens.get(session, 0) if isinstance(overhead_tokens, dict) \
            else int(overhead_tokens)
        for k in calls:
            r = compact(t, p, window=window, session=session, call=k, estimator=estimator,
                        overhead_tokens=over)
            t = r.transcript
            rows.append({"session": session, "call": k, "tokens_before": r.tokens_before,
                         "tokens_after": r.tokens_after, "limit_tokens": r.limit_tokens,
                         "target_tokens": r.target_tokens, "window_tokens": r.window_tokens,
                         "triggered": r.triggered, "stages_used": ",".join(r.stages_used),
                         "within_target": r.within_target, "over_window": r.over_window,
                         "forced_final": r.forced_final, "note": r.note})
    return t, pd.DataFrame(rows)


def stages_from(specs: list[str | tuple[str, dict[str, Any]] | Stage]) -> tuple[Stage, ...]:
    """Stages from names, ``(name, params)`` pairs or instances."""
    out = []
    for s in specs:
        if isinstance(s, tuple):
            out.append(make_stage(s[0], **s[1]))
        else:
            out.append(make_stage(s))
    return tuple(out)


__all__ = ["CompactResult", "Pipeline", "changed", "compact", "compact_all", "compact_view",
           "stages_from", "window_note"]
