"""Sweep throughput: replays per minute of the local engine with 1 and 2 workers.

Generated Claude Code sessions of 2,000 messages each (`ctxlab.datasets.generate_session`,
as in ``bench_replay.py``, one seed per session), written to a temporary folder; a grid
of the ``neurolink`` preset at several thresholds, replayed over every session by
`ctxlab.sweep.sweep` (each replay with its recall and retention metrics). Prints, per
worker count, the wall time, replays per minute, and the speed-up over 1 worker; checks
that every worker count gave the same results; and the replay seconds summed over workers
against the wall time (the concurrency reached: on a machine busy with other work, the
speed-up stays low even though the workers run at once).

    .venv/bin/python benchmarks/bench_sweep.py [--sessions 4] [--messages 2000]
        [--thresholds 0.6 0.7 0.8] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ctxlab import datasets
from ctxlab.sweep import equal_results, sweep


def write_sessions(n: int, messages: int, folder: Path) -> None:
    for i in range(n):
        s = datasets.generate_session("coding", 11 + i, calls=messages // 2, compact_at=None)
        datasets.write_claude_code(s, folder / f"s{i}_{messages}.jsonl")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--messages", type=int, default=2_000)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.6, 0.7, 0.8])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--preset", default="neurolink")
    args = ap.parse_args()
    grid = {"preset": [args.preset], "threshold": args.thresholds}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_sessions(args.sessions, args.messages, folder)
        first = None
        base = None
        for w in args.workers:
            t0 = time.perf_counter()
            df = sweep(folder, grid, workers=w, progress=False)
            dt = time.perf_counter() - t0
            per_min = len(df) / dt * 60
            base = base or per_min
            same = "" if first is None else \
                f", same results as {args.workers[0]} worker(s): {equal_results(first, df)}"
            first = df if first is None else first
            print(f"local engine, {w} worker(s): {len(df)} replays ({args.sessions} sessions x "
                  f"{len(args.thresholds)} thresholds, {int(df['calls'].iloc[0]):,} calls "
                  f"each) in {dt:6.1f} s = {per_min:6.1f} replays/minute, speed-up "
                  f"{per_min / base:4.2f}x{same}")
            # replay time summed over workers / wall time: how many ran at once (a busy
            # machine shows a low speed-up with concurrency near the worker count)
            print(f"    replay seconds summed {df['seconds'].sum():.1f} s, "
                  f"concurrency {df['seconds'].sum() / dt:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
