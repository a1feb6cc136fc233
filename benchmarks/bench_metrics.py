"""What a sweep pays per replay for its recall and retention totals (`ctxlab.metrics.loss_totals`).

Generated Claude Code sessions of 2,000 messages (`ctxlab.datasets`, as in
``bench_sweep.py``), each replayed by the grid a sweep would run (the non-LLM presets at
several thresholds, sharing their beginnings as in a sweep: `ctxlab.sweep_prefix`). The
replays are made first; then each session's are measured in sweep order, the metrics'
memory of the last frame emptied before each session (a worker meeting a new session).
The first pass pays the extraction of every text, once in a process (printed apart); the
timed rounds that follow find every text's artifacts known, as a sweep's later replays
do. Prints CPU milliseconds per replay: the minimum over rounds, overall and per preset.

    .venv/bin/python benchmarks/bench_metrics.py [--sessions 3] [--messages 2000]
        [--rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import ctxlab
from ctxlab import datasets, metrics
from ctxlab.sweep_grid import expand
from ctxlab.sweep_prefix import replays

NON_LLM = ["probe", "ai-agent", "neuron", "observation-masking"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--messages", type=int, default=2_000)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.8, 0.9, 1.0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    configs, _ = expand({"preset": NON_LLM, "threshold": args.thresholds})
    units = list(enumerate(configs))
    sessions = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.sessions):
            s = datasets.generate_session("coding", 11 + i, calls=args.messages // 2,
                                          compact_at=None)
            t = ctxlab.load(datasets.write_claude_code(s, Path(tmp) / f"s{i}.jsonl"))
            sessions.append([(c.preset, r.transcript) for _, c, r, _ in replays(t, units)])
    n = sum(len(rs) for rs in sessions)
    best: dict[str, float] = {}
    total = float("inf")
    for k in range(args.rounds + 1):
        spent: dict[str, float] = {}
        for rs in sessions:
            metrics._LAST.clear()
            for preset, t in rs:
                c0 = time.process_time()
                metrics.loss_totals(t)
                spent[preset] = spent.get(preset, 0.0) + time.process_time() - c0
        if k == 0:
            print(f"first pass (extracting every text once): "
                  f"{1000 * sum(spent.values()) / n:.1f} ms per replay")
            continue
        best = {p: min(best.get(p, v), v) for p, v in spent.items()}
        total = min(total, sum(spent.values()))
    print(f"{n} replays of {args.sessions} sessions of {args.messages:,} messages; metrics "
          f"per replay (CPU, min of {args.rounds} rounds): {1000 * total / n:.2f} ms")
    per = n // len(NON_LLM)
    for preset, v in best.items():
        print(f"  {preset:20s} {1000 * v / per:6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
