"""What a replay's requests cost under one yardstick: every request after compaction
counted by one estimator (the *measure*), whatever estimator the pipeline triggered with.

A pipeline counts with its own estimator (neurolink's heuristic, ``chars:4``, tiktoken):
its ``tokens_after`` mix what it sent with how it counts, and two presets that send the
very same requests report different totals. A sweep ranks configurations on what they
send, so it counts every request with one estimator (`ctxlab.sweep.MEASURE` unless told
otherwise): the same request then costs the same in every configuration.

A request's size under the measure is what `ctxlab.replay` computes with its own
estimator: the visible parts after compaction (`ctxlab.visibility.call_sums`), the
estimator's framing of the messages, and the session's unrecorded overhead (system prompt
and tool schemas) fitted from the log's reported usage for that estimator, as the replay
fits its own (or the replay's overheads, when they were given rather than fitted). With
the pipeline's own estimator it gives ``Replay.calls["tokens_after"]`` exactly (tested).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ctxlab.pipeline import filled_spec, session_provider
from ctxlab.tokens import Estimator, estimator as get_estimator
from ctxlab.visibility import call_sums

if TYPE_CHECKING:
    from ctxlab.replay import Replay
    from ctxlab.schema import Transcript


def request_tokens(r: Replay, measure: str | Estimator) -> np.ndarray:
    """Per row of ``r.calls``: its request after compaction, as ``measure`` counts it.

    Args:
        r: a replay.
        measure: an estimator spec (``{provider}`` is filled in per session, as in a
            pipeline's spec) or instance.

    Returns:
        Tokens (float64, whole numbers) in ``r.calls``' order.

    Example:
        >>> import ctxlab
        >>> t = ctxlab.load("datasets/openai_sessions.jsonl")
        >>> r = ctxlab.replay(t, "copilot-fixed")          # counts with chars:4
        >>> own = request_tokens(r, "chars:4")
        >>> bool((own == r.calls["tokens_after"].to_numpy()).all())
        True
        >>> int(request_tokens(r, "tiktoken:o200k_base").sum()) < int(own.sum())
        True
    """
    from ctxlab.replay import _fitted_overheads

    calls = r.calls
    if not len(calls):
        return np.zeros(0)
    t, log = r.transcript, r.settings.log
    sessions = calls["session"].astype(str)
    groups: dict[str | int, tuple[str | Estimator, list[str]]] = {}
    for s in pd.unique(sessions):       # sessions by their filled-in spec
        spec = _filled(measure, t, s)
        groups.setdefault(spec if isinstance(spec, str) else id(spec), (spec, []))[1].append(s)
    out = np.full(len(calls), np.nan)
    for spec, members in groups.values():
        est = get_estimator(spec)
        sums = call_sums(t, {"content": _counts(est, t.frame, r.base.frame)})
        framing = est.framings(sums["messages"].to_numpy())
        over = _fitted_overheads(log, r.settings.pipeline, spec) if log is not None \
            else r.settings.overhead_tokens
        total = sums["content"].to_numpy() + framing + \
            sums["session"].astype(str).map(over).fillna(0).to_numpy(dtype=np.float64)
        keyed = pd.Series(total, index=pd.MultiIndex.from_arrays(
            [sums["session"].astype(str), sums["call"].to_numpy()]))
        mine = sessions.isin(members).to_numpy(dtype=bool)
        want = pd.MultiIndex.from_arrays([sessions[mine], calls["call"].to_numpy()[mine]])
        out[mine] = keyed.reindex(want).to_numpy()
    return np.rint(out)


_BASE_COUNTS: OrderedDict[tuple[int, str], tuple[pd.DataFrame, np.ndarray]] = OrderedDict()
_BASE_KEPT = 4
_LOCK = threading.Lock()       # a Dask worker runs tasks in threads


def _counts(est: Estimator, frame: pd.DataFrame, base: pd.DataFrame) -> np.ndarray:
    """``est``'s count of every part of a replay's frame: the parts of the replayed log
    (``base``, one frame for every replay of a session in a sweep) counted once and
    remembered for the last `_BASE_KEPT` logs, the inserted ones each time."""
    parts = frame["part"].to_numpy(dtype=np.int64)
    base_parts = base["part"].to_numpy(dtype=np.int64)
    if len(np.unique(base_parts)) != len(base_parts):     # ids repeat: count them all
        return np.asarray(est.count_parts(frame), dtype=np.float64)
    key = (id(base), est.spec)
    with _LOCK:
        got = _BASE_COUNTS.get(key)
    if got is None or got[0] is not base:
        got = (base, np.asarray(est.count_parts(base), dtype=np.float64))
        with _LOCK:
            _BASE_COUNTS[key] = got
            while len(_BASE_COUNTS) > _BASE_KEPT:
                _BASE_COUNTS.popitem(last=False)
    order = np.argsort(base_parts, kind="stable")
    at = np.searchsorted(base_parts[order], parts)
    at = np.minimum(at, len(order) - 1) if len(order) else at
    known = base_parts[order][at] == parts if len(order) else np.zeros(len(parts), bool)
    out = np.empty(len(parts), dtype=np.float64)
    out[known] = got[1][order[at[known]]]
    if not known.all():
        out[~known] = est.count_parts(frame[~known])
    return out


def _filled(measure: str | Estimator, t: Transcript, session: str) -> str | Estimator:
    """``measure`` with ``{provider}`` filled in for a session (as a pipeline's spec)."""
    if isinstance(measure, str) and "{provider}" in measure:
        return filled_spec(measure, session_provider(t, session))
    return measure


__all__ = ["request_tokens"]
