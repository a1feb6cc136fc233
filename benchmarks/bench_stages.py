"""Planner cost per stage on realistic views: what one compaction spends outside the engine.

Views come from generated Claude Code sessions (`ctxlab.datasets`, as in
``bench_replay.py``), counted with ``chars:4`` in a 200k window:

* ``2k replay``: the request of the last call the replay benchmark's pipeline compacts
  in the 2,000-message session, as it was before that compaction (about 1,000-1,500
  parts at 80% of the window, many of them placeholders of earlier compactions) — the
  view a threshold-triggered compaction plans on late in a session;
* ``2k@80%``: the first request of that session at 80% of the window, uncompacted;
* ``2k last``: the last request of that session uncompacted (the whole session: a big view);
* ``20k replay``, ``20k last``: the same for the 20,000-message session (``--sizes 2000 20000``).

For each view it prints the median milliseconds of the per-view helpers the engine calls
(`assign_layers`, `grammar_counts`) and of every stage's ``plan(view)`` in the replay
benchmark's pipeline (prune, dedup by path, clear_tool_results keep=10, summarize,
truncate keep_tool_pairs, repair), each stage planning on the view the previous stages
left (every edit is applied, whether or not the target is reached), then the other
registered stages on the first view. No asserts: numbers only.

    .venv/bin/python benchmarks/bench_stages.py [--sizes 2000 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxlab
from bench_replay import pipeline as replay_pipeline  # the replay benchmark's pipeline
from ctxlab import datasets
from ctxlab.engine import Budget, build_view, call_end_pos
from ctxlab.history import apply_edit
from ctxlab.layers import assign_layers
from ctxlab.stages import stage
from ctxlab.stages.base import Stage, View
from ctxlab.stages.grammar import grammar_counts

WINDOW = 200_000
BUDGET = Budget(window_tokens=WINDOW, limit_tokens=WINDOW, target_tokens=WINDOW // 2)
PIPELINE: list[tuple[str, dict[str, Any]]] = [
    ("prune", {}), ("dedup", {"mode": "paths"}), ("clear_tool_results", {"keep": 10}),
    ("summarize", {}), ("truncate", {"keep_tool_pairs": True}), ("repair", {})]
OTHERS: list[tuple[str, dict[str, Any]]] = [
    ("dedup", {}), ("keep_last", {}), ("trim_history", {}), ("monologue", {}),
    ("truncate_tool_output", {}), ("file_budget", {}), ("carry_forward", {}),
    ("summarize", {"mode": "blocks", "block_chars": 5_000})]


def session(messages: int, folder: Path) -> ctxlab.Transcript:
    s = datasets.generate_session("coding", 11, calls=messages // 2, compact_at=None)
    t = ctxlab.load(datasets.write_claude_code(s, folder / f"s{messages}.jsonl"))
    return t.rewind_recorded()


def view_at(t: ctxlab.Transcript, call: int) -> View:
    sid = str(t.calls["session"].iloc[0])
    return build_view(t, sid, call_end_pos(t, sid, call), ctxlab.estimator("chars:4"), BUDGET,
                      call)


def first_call_over(t: ctxlab.Transcript, tokens: int) -> int:
    """The first call whose uncompacted request reaches ``tokens`` (requests only grow)."""
    calls = t.calls["call"].tolist()
    lo, hi = 0, len(calls) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if view_at(t, calls[mid]).total_tokens >= tokens else (mid + 1, hi)
    return int(calls[lo])


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def late_replayed(t: ctxlab.Transcript) -> tuple[ctxlab.Transcript, int]:
    """The transcript as the replay left it before its last compaction, and that call."""
    t0 = time.perf_counter()
    r = ctxlab.replay(t, replay_pipeline(), window=WINDOW, overhead_tokens=0)
    call = int(r.calls.loc[r.calls["triggered"], "call"].iloc[-1])
    print(f"\n(replay: {time.perf_counter() - t0:.1f} s, "
          f"{int(r.calls['triggered'].sum())} compactions)")
    return r.rewind(call).transcript, call


def bench_view(label: str, t: ctxlab.Transcript, call: int, repeat: int) -> None:
    view = view_at(t, call)
    print(f"\n{label}: call {call}, {len(view):,} parts, {view.messages:,} messages, "
          f"{view.total_tokens:,} tokens")
    table = view.table    # the columns the engine hands around (a View would memoize)
    print(f"  {'assign_layers':<34}{median_ms(lambda: assign_layers(table), repeat):9.2f} ms")
    print(f"  {'grammar_counts':<34}{median_ms(lambda: grammar_counts(table), repeat):9.2f} ms")
    sid, end = view.session, call_end_pos(t, view.session, call)
    total = 0.0
    first = view
    for name, params in PIPELINE:
        st: Stage = stage(name, **params)
        ms = median_ms(lambda: st.plan(view), repeat)
        total += ms
        edit = st.plan(view)
        did = "no edit" if edit is None or edit.empty else \
            f"hides {len(edit.hide):,}, inserts {len(edit.insert):,}"
        print(f"  {str(st)[:34]:<34}{ms:9.2f} ms   on {len(view):,} parts: {did}")
        if edit is not None and not edit.empty:
            t, _ = apply_edit(t, edit, session=sid, end_pos=end, trigger="bench")
            view = build_view(t, sid, end, view.estimator, BUDGET, call)
    print(f"  {'pipeline planners, total':<34}{total:9.2f} ms")
    for name, params in OTHERS:
        st = stage(name, **params)
        print(f"  {str(st)[:34]:<34}{median_ms(lambda: st.plan(first), repeat):9.2f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[2_000])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            t = session(n, Path(tmp))
            bench_view(f"{n // 1000}k replay", *late_replayed(t), args.repeat)
            if n == args.sizes[0]:
                bench_view(f"{n // 1000}k@80%", t, first_call_over(t, int(0.8 * WINDOW)),
                           args.repeat)
            bench_view(f"{n // 1000}k last", t, int(t.calls["call"].iloc[-1]), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
