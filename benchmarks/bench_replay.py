"""Full replay cost against LangChain's ``trim_messages`` after every message, and its growth.

Two generated Claude Code sessions from `ctxlab.datasets` (2,000 and 20,000 messages), in one
process:

* **ctxlab**: `ctxlab.replay` of a pipeline of every non-LLM stage (prune, dedup by path,
  clear old tool results, sliding-window truncation, tool-pair repair; the structured
  summarizer is deterministic and runs too), triggered at 80% of a 200k window and
  compacting down to 50% (a target below the trigger, as Claude Code, ProbeAgent and
  ai-agent do; with the target at the trigger, as in NeuroLink, a full session compacts
  at nearly every call, which ``--target 0.8`` shows), checked at every call;
* **LangChain**: ``trim_messages(messages[:i + 1], max_tokens=..., strategy="last",
  token_counter="approximate")`` after every message i — what an agent loop that trims on
  every turn does.

Before the timed runs, both replay a small session of their own once (600 messages of
another seed; for ctxlab in a 50k window, where the stages act), so that what a process
pays on its first replay (lazy imports, compiled patterns, first calls into NumPy and
pandas) is counted against neither size; the timed sessions are replayed once each, from a
fresh load, with the estimator's counts and the summarizer's per-text facts forgotten.

Prints seconds for each, the ratio LangChain / ctxlab, and how each grows from 2k to 20k
messages (linear growth = 10x); ctxlab's time is split into the stages' applications
(``Replay.events["ms"]``: plan, edit and its bookkeeping, which grow with the number of
compactions and the size of the requests they compact) and the walk and the rest (which
grow with the calls and parts). Needs ``pip install langchain-core`` for the peer.

    .venv/bin/python benchmarks/bench_replay.py [--sizes 2000 20000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ctxlab
from ctxlab import datasets
from ctxlab.pipeline import Pipeline, stages_from

WINDOW = 200_000


def pipeline(target: float = 0.5) -> Pipeline:
    return Pipeline(name="all-non-llm",
                    stages=stages_from(["prune", ("dedup", {"mode": "paths"}),
                                        ("clear_tool_results", {"keep": 10}), "summarize",
                                        ("truncate", {"keep_tool_pairs": True})]),
                    post=stages_from(["repair"]), threshold=0.8, target=target, limit="window",
                    estimator="chars:4")


def session(messages: int, folder: Path, seed: int = 11) -> ctxlab.Transcript:
    s = datasets.generate_session("coding", seed, calls=messages // 2, compact_at=None)
    return ctxlab.load(datasets.write_claude_code(s, folder / f"s{messages}-{seed}.jsonl"))


def langchain_messages(t: ctxlab.Transcript) -> list:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    kinds = {"user": HumanMessage, "assistant": AIMessage, "system": SystemMessage,
             "tool": HumanMessage}
    f = t.frame
    grouped = f.groupby("msg", sort=False).agg(role=("role", "first"),
                                               content=("content", "\n".join))
    return [kinds[r](content=c) for r, c in zip(grouped["role"], grouped["content"])]


def time_ctxlab(t: ctxlab.Transcript, target: float,
                window: int = WINDOW) -> tuple[float, ctxlab.Replay]:
    p = pipeline(target)   # the first one imports the stage and summarizer registries,
    ctxlab.estimator(p.estimator)   # and this the estimators' (plugins found once): untimed
    cold_caches(p)
    t0 = time.perf_counter()
    r = ctxlab.replay(t, p, window=window, overhead_tokens=0)
    return time.perf_counter() - t0, r


def cold_caches(p: Pipeline) -> None:
    """Forget what an earlier replay in this process counted or read: the estimator's
    counts and the structured summarizer's per-text facts."""
    from ctxlab.summarizers import text_facts

    ctxlab.estimator(p.estimator).clear_cache()
    for f in vars(text_facts).values():
        if callable(getattr(f, "cache_clear", None)):
            f.cache_clear()


def time_langchain(msgs: list) -> float:
    from langchain_core.messages import trim_messages

    t0 = time.perf_counter()
    for i in range(len(msgs)):
        trim_messages(msgs[:i + 1], max_tokens=int(0.8 * WINDOW), strategy="last",
                      token_counter="approximate")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000])
    ap.add_argument("--target", type=float, default=0.5,
                    help="compact down to this share of the window (default 0.5)")
    args = ap.parse_args()
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        print("langchain-core is not installed: pip install langchain-core")
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = session(600, Path(tmp), seed=97)  # first-replay costs of the process
        time_ctxlab(warm, args.target, window=50_000)
        time_langchain(langchain_messages(warm))
        for n in args.sizes:
            t = session(n, Path(tmp))
            ours, r = time_ctxlab(t, args.target)
            theirs = time_langchain(langchain_messages(t))
            stages = float(r.events["ms"].sum()) / 1000 if len(r.events) else 0.0
            rows.append((n, len(t.calls), ours, theirs, int(r.calls["triggered"].sum()),
                         stages))
            print(f"{n:>6} messages, {len(t.calls):>5} calls: ctxlab replay {ours:7.2f} s "
                  f"({int(r.calls['triggered'].sum())} compactions, {len(r.events)} events), "
                  f"langchain trim_messages {theirs:7.2f} s, ratio {theirs / ours:5.1f}x")
            print(f"        ctxlab: {stages:.3f} s in the stages' applications (plan, edit, "
                  f"bookkeeping), {ours - stages:.3f} s in the walk and the rest")
    if len(rows) >= 2:
        (n0, _, a0, b0, c0, s0), (n1, _, a1, b1, c1, s1) = rows[0], rows[-1]
        print(f"growth {n0:,} -> {n1:,} messages ({n1 / n0:.0f}x): ctxlab {a1 / a0:.1f}x, "
              f"langchain {b1 / b0:.1f}x; compactions {c1 / max(c0, 1):.1f}x, ctxlab seconds "
              f"per compaction {a0 / max(c0, 1):.3f} -> {a1 / max(c1, 1):.3f}")
        if s0 > 0 and a0 > s0:
            print(f"    of which the stages' applications grew {s1 / s0:.1f}x and the walk "
                  f"and the rest {(a1 - s1) / (a0 - s0):.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
