"""Replays of a sweep that share their beginning: configurations differing only in
threshold (and target) are the same replay until the lowest threshold's first compaction.

Before a configuration's first compaction only its always-stages, enforced stages and
post-steps have run, and the built-in ones never read the threshold or the target
(`TARGET_READERS` do: they are kept apart). A configuration with a higher threshold fires
no earlier (the trigger compares the same request with a larger share of the same limit),
so up to that call its replay is the lower one's with the target column recomputed.
`replays` runs a group in ascending threshold and resumes each from the previous replay
rewound to its first compaction (`Replay.rewind`, `Replay.resume`), when that saves at
least `MIN_SHARED` of the calls; a group that never compacts is replayed once. The result
equals replaying every configuration from the start (tests compare them on generated and
real logs).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ctxlab.pipeline import Pipeline
from ctxlab.replay import Replay, replay
from ctxlab.schema import Transcript
from ctxlab.sweep_grid import Config

MIN_SHARED = 0.1
"""Resume only when the shared beginning holds at least this share of the calls (a rewind
and a resume cost about what replaying a few calls does)."""
TARGET_READERS = frozenset({"summarize", "reattach"})
"""Built-in stages whose edits depend on the target (the summary's budget)."""


def shared_groups(configs: Sequence[Config]) -> list[list[int]]:
    """Indices of ``configs`` grouped by what they share (`_shareable`; a configuration
    that shares nothing is a group of its own), in order of first appearance."""
    groups: list[tuple[Any, list[int]]] = []
    for i, config in enumerate(configs):
        key = _shareable(config, config.pipeline())
        group = next((g for k, g in groups if key is not None and k == key), None)
        if group is None:
            groups.append((key, [i]))
        else:
            group.append(i)
    return [g for _, g in groups]


def replays(t: Transcript, units: Sequence[tuple[int, Config]]
            ) -> Iterator[tuple[int, Config, Replay, float]]:
    """Each configuration's replay of ``t``, one session: ``(index, config, replay,
    start)``, ``start`` the `time.perf_counter` at which its work began. Configurations
    come grouped (`shared_groups`), each group in ascending threshold."""
    configs = [config for _, config in units]
    for group in shared_groups(configs):
        previous: Replay | None = None
        pipelines = {k: configs[k].pipeline() for k in group}
        for k in sorted(group, key=lambda k: pipelines[k].threshold):
            config, p = configs[k], pipelines[k]
            start = time.perf_counter()
            r = _continued(previous, p) if previous is not None else None
            if r is None:
                r = replay(t, p, window=config.window, estimator=config.estimator)
            yield units[k][0], config, r, start
            previous = r


def _shareable(config: Config, p: Pipeline) -> tuple[Any, ...] | None:
    """What configurations sharing their beginning have in common (None: share nothing,
    when a stage that runs before the first compaction is not known to ignore the
    threshold and the target)."""
    for st in (*p.always, *p.enforce, *p.post):
        if not type(st).__module__.startswith("ctxlab.stages.") or st.name in TARGET_READERS:
            return None
    return (replace(p, threshold=1.0, target=None), config.window, config.estimator)


def _continued(previous: Replay, p: Pipeline) -> Replay | None:
    """``p``'s replay from ``previous`` (same pipeline but a threshold no higher): its
    calls before its first compaction, then ``p``'s own walk; None when that beginning is
    too short to be worth it."""
    calls = previous.calls
    if len(previous.base.sessions) != 1:
        return None
    fired = calls["triggered"].to_numpy(dtype=bool)
    first = int(fired.argmax()) if fired.any() else len(calls)
    if first < MIN_SHARED * len(calls):
        return None
    if first < len(calls):
        r = previous.rewind(int(calls["call"].iloc[first])).resume(p)
    else:
        r = replace(previous, settings=replace(previous.settings, pipeline=p))
    ratio = p.target if p.target is not None else p.threshold
    out = r.calls.copy()
    limits = out["limit_tokens"].iloc[:first].tolist()
    out.loc[out.index[:first], "target_tokens"] = [int(ratio * limit) for limit in limits]
    return replace(r, calls=out)
