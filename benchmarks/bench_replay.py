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
fresh load, with the estimator's counts and the summarizer's per-text facts forgotten:
ctxlab's time is the fastest of ``--repeat`` such replays (3; the machine is shared and
noisy), LangChain's of one run (minutes at 20,000 messages).

Times are CPU seconds of this process (`time.process_time`: both sides run in one thread,
and on a shared machine wall time also counts the time other work held the core).
Prints seconds for each, the ratio LangChain / ctxlab, and how each grows from 2k to 20k
messages (linear growth = 10x), with how the sessions' text, ctxlab's compactions and the
parts their events hid grow (a window holds about as many parts in both sessions, so the
shorter session ends with a larger share of its parts never compacted: work done per part
compacted grows faster than the messages) and the call of the first compaction (the share
of the calls spent filling the window);
ctxlab's time is split into the stages' applications
(``Replay.events["ms"]``: plan, edit and its bookkeeping, which grow with the number of
compactions and the size of the requests they compact) and the walk and the rest (which
grow with the calls and parts). ctxlab also replays each session in a window no request
nears, where nothing is compacted: the rest of its time goes with the compactions, and the
last line says what a compaction may cost at most, the same in both sessions, for ctxlab's
growth to stay within 12x per 10x the messages (issue 5's bound). The peer,
``langchain-core``, comes with ``make install`` (the ``bench`` extra); ``--no-peer`` times
ctxlab alone (LangChain takes minutes at 20,000 messages), and ``--windows`` replays in
other windows too (LangChain's ``max_tokens`` follows).

    .venv/bin/python benchmarks/bench_replay.py [--sizes 2000 20000] [--windows 200000 64000]
        [--target 0.5] [--no-peer]
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
UNREACHED = 10**12
"""A window no request nears: the walk with nothing to compact."""
GROWTH_BOUND = 1.2
"""Issue 5's bound on ctxlab's growth, per growth of the messages (12x from 2,000 to 20,000)."""


def pipeline(target: float = 0.5) -> Pipeline:
    return Pipeline(name="all-non-llm",
                    stages=stages_from(["prune", ("dedup", {"mode": "paths"}),
                                        ("clear_tool_results", {"keep": 10}), "summarize",
                                        ("truncate", {"keep_tool_pairs": True})]),
                    post=stages_from(["repair"]), threshold=0.8, target=target, limit="window",
                    estimator="chars:4")


def session_file(messages: int, folder: Path, seed: int = 11) -> Path:
    s = datasets.generate_session("coding", seed, calls=messages // 2, compact_at=None)
    return datasets.write_claude_code(s, folder / f"s{messages}-{seed}.jsonl")


def session(messages: int, folder: Path, seed: int = 11) -> ctxlab.Transcript:
    return ctxlab.load(session_file(messages, folder, seed))


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
    t0 = time.process_time()
    r = ctxlab.replay(t, p, window=window, overhead_tokens=0)
    return time.process_time() - t0, r


def cold_caches(p: Pipeline) -> None:
    """Forget what an earlier replay in this process counted or read: the estimator's
    counts and the structured summarizer's per-text facts."""
    from ctxlab.summarizers import text_facts

    ctxlab.estimator(p.estimator).clear_cache()
    for f in vars(text_facts).values():
        if callable(getattr(f, "cache_clear", None)):
            f.cache_clear()


def time_langchain(msgs: list, window: int = WINDOW) -> float:
    from langchain_core.messages import trim_messages

    t0 = time.process_time()
    for i in range(len(msgs)):
        trim_messages(msgs[:i + 1], max_tokens=int(0.8 * window), strategy="last",
                      token_counter="approximate")
    return time.process_time() - t0


def warm_up_share(r: ctxlab.Replay) -> tuple[int, float]:
    """The call of the replay's first compaction and the share of its calls before it (a
    session that spent much of itself filling the window would compact at fewer of its
    calls than a longer one, and its compactions would grow faster than its calls)."""
    fired = r.calls["triggered"].to_numpy(dtype=bool)
    first = int(fired.argmax()) if fired.any() else len(fired)
    return (int(r.calls["call"].iloc[first]) if first < len(fired) else -1,
            first / max(len(fired), 1))


def run_window(window: int, sizes: list[int], target: float, peer: bool,
               folder: Path, repeat: int = 1) -> list[tuple]:
    """Time ctxlab (the fastest of ``repeat`` replays, each of a fresh load) and LangChain
    (once, when ``peer``) at every size in one window; print a line per size and the
    growth from the first size to the last."""
    rows = []
    n_parts: list[int] = []
    print(f"window {window:,} (trigger at 80%, target {target:.0%}):")
    for n in sizes:
        path = session_file(n, folder)
        ours, r = min((time_ctxlab(ctxlab.load(path), target, window=window)
                       for _ in range(repeat)), key=lambda got: got[0])
        # the same walk with nothing to compact: what the calls and parts cost alone
        idle = min(time_ctxlab(ctxlab.load(path), target, window=UNREACHED)[0]
                   for _ in range(repeat))
        t = r.base
        theirs = time_langchain(langchain_messages(t), window) if peer else float("nan")
        stages = float(r.events["ms"].sum()) / 1000 if len(r.events) else 0.0
        comps = int(r.calls["triggered"].sum())
        first, share = warm_up_share(r)
        text = int(t.frame["content"].str.len().sum())
        hidden = int((r.ledger["action"] == "hidden").sum())    # parts the events hid
        rows.append((n, ours, theirs, comps, stages, text, idle, hidden))
        n_parts.append(len(t.frame))
        vs = (f", langchain trim_messages {theirs:7.2f} s, ratio {theirs / ours:5.1f}x"
              if peer else "")
        print(f"  {n:>6} messages, {len(t.calls):>5} calls: ctxlab replay {ours:7.2f} s "
              f"({comps} compactions, {len(r.events)} events hiding {hidden:,} parts of "
              f"{len(t.frame):,}; the first at call {first}, {share:.0%} of the calls before "
              f"it){vs}")
        print(f"          ctxlab: {stages:.3f} s in the stages' applications (plan, edit, "
              f"bookkeeping), {ours - stages:.3f} s in the walk and the rest")
        print(f"          ctxlab in a window no request nears (nothing compacted) {idle:.3f} s: "
              f"{ours - idle:.3f} s go with the compactions, "
              f"{1000 * (ours - idle) / max(comps, 1):.1f} ms each")
    if len(rows) >= 2:
        (n0, a0, b0, c0, s0, x0, i0, h0), (n1, a1, b1, c1, s1, x1, i1, h1) = rows[0], rows[-1]
        theirs = f", langchain {b1 / b0:.1f}x" if peer else ""
        print(f"  growth {n0:,} -> {n1:,} messages ({n1 / n0:.0f}x): ctxlab {a1 / a0:.1f}x"
              f"{theirs}; text {x1 / x0:.1f}x, compactions {c1 / max(c0, 1):.1f}x, parts "
              f"hidden {h1 / max(h0, 1):.1f}x, ctxlab seconds per compaction "
              f"{a0 / max(c0, 1):.3f} -> {a1 / max(c1, 1):.3f}")
        if s0 > 0 and a0 > s0:
            print(f"      of which the stages' applications grew {s1 / s0:.1f}x and the "
                  f"walk and the rest {(a1 - s1) / (a0 - s0):.1f}x")
        # cost against the sessions' content: equal figures mean cost linear in the text
        print(f"      ctxlab seconds per MB of session text {a0 / x0 * 1e6:.4f} -> "
              f"{a1 / x1 * 1e6:.4f}")
        # the walk alone against what goes with the compactions, and the cost of a compaction,
        # the same in both sessions, under which ctxlab grows within issue 5's bound (12x for
        # 10x the messages): (i1 + c1 x) / (i0 + c0 x) <= bound
        bound = GROWTH_BOUND * n1 / n0
        print(f"      without compactions ctxlab grew {i1 / max(i0, 1e-9):.1f}x; what goes "
              f"with the compactions grew {(a1 - i1) / max(a0 - i0, 1e-9):.1f}x")
        if h1 > bound * h0 and i1 < bound * i0:
            # the same in parts: the work that goes with a compaction is mostly per part it
            # hides (the summary reads it, a placeholder replaces it, the ledger records it)
            most = (bound * i0 - i1) / (h1 - bound * h0)
            print(f"      per part hidden, what goes with the compactions costs "
                  f"{1e6 * (a0 - i0) / max(h0, 1):.1f} and {1e6 * (a1 - i1) / max(h1, 1):.1f} "
                  f"µs, the walk alone {1e6 * i0 / n_parts[0]:.1f} and "
                  f"{1e6 * i1 / n_parts[-1]:.1f} µs per part; within {bound:g}x needs at "
                  f"most {1e6 * most:.1f} µs per part hidden")
        if c1 > bound * c0 and i1 > bound * i0:
            print(f"      a growth of {bound:g}x is out of reach at any cost per compaction "
                  f"(the walk alone grew {i1 / i0:.1f}x)")
        elif c1 > bound * c0:
            most = (bound * i0 - i1) / (c1 - bound * c0)
            print(f"      a growth within {bound:g}x needs a compaction to cost at most "
                  f"{1000 * most:.1f} ms in both sessions (it costs "
                  f"{1000 * (a0 - i0) / max(c0, 1):.1f} and "
                  f"{1000 * (a1 - i1) / max(c1, 1):.1f} ms)")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000])
    ap.add_argument("--windows", type=int, nargs="+", default=[WINDOW],
                    help=f"context windows to replay in, one after the other (default "
                         f"{WINDOW:,})")
    ap.add_argument("--target", type=float, default=0.5,
                    help="compact down to this share of the window (default 0.5)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="ctxlab's time is the fastest of this many replays (default 3; "
                         "the machine is shared and noisy)")
    ap.add_argument("--no-peer", action="store_true",
                    help="time ctxlab alone (LangChain takes minutes at 20,000 messages)")
    args = ap.parse_args()
    peer = not args.no_peer
    if peer:
        try:
            import langchain_core  # noqa: F401
        except ImportError:
            print("langchain-core is not installed: make install, or pip install -e "
                  "'.[bench]' (or --no-peer)")
            return 0
    with tempfile.TemporaryDirectory() as tmp:
        warm = session(600, Path(tmp), seed=97)  # first-replay costs of the process
        time_ctxlab(warm, args.target, window=50_000)
        if peer:
            time_langchain(langchain_messages(warm))
        for w in args.windows:
            run_window(w, args.sizes, args.target, peer, Path(tmp), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
