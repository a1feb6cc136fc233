"""Estimator accuracy on the real Claude Code sessions against their reported usage.

Per session and estimator: MAPE, bias and p95 of the per-call error of the estimated input
against the billed ``input_total`` (overhead fitted per session for every estimator). The
calibrated estimator is shown twice: fitted on all sessions (in-sample) and fitted with the
session held out (leave-one-out: the honest number for a log it has not seen).

    python benchmarks/bench_estimator_accuracy.py [FOLDER]

FOLDER defaults to ../shared/realdata/claude_code/spotter. Prints tables; exits 0.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

import ctxlab

HEURISTICS = ("chars:4", "neurolink:anthropic", "neuron", "tiktoken:o200k_base")


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else (Path(__file__).resolve().parents[2] / "shared" /
                                         "realdata" / "claude_code" / "spotter")
    if not folder.is_dir():
        print(f"no real logs at {folder}: nothing to measure")
        return 0
    logs = [ctxlab.load(p) for p in sorted(folder.glob("*.jsonl"))]
    pooled = ctxlab.calibrate(ctxlab.load_dir(folder))
    print(f"{len(logs)} sessions, {sum(len(t.calls) for t in logs)} calls; pooled fit: scale "
          f"{pooled.rates.scale:.3f} tokens per o200k token")
    rows = []
    for i, t in enumerate(logs):
        rest = [x for j, x in enumerate(logs) if j != i]
        held_out = ctxlab.calibrate(SimpleNamespace(
            frame=pd.concat([x.frame for x in rest], ignore_index=True),
            calls=pd.concat([x.calls for x in rest], ignore_index=True),
            events=pd.concat([x.events for x in rest], ignore_index=True)))
        named = [(h, h) for h in HEURISTICS] + [("calibrated (in-sample)", pooled),
                                                ("calibrated (held out)", held_out)]
        for name, est in named:
            e = ctxlab.usage_errors_df(ctxlab.reported_usage_df(t, est)).iloc[0]
            rows.append({"estimator": name, "session": t.sessions[0][:8], "calls": e["calls"],
                         "mape_pct": e["mape_pct"], "bias_pct": e["bias_pct"],
                         "p95_abs_error_pct": e["p95_abs_error_pct"]})
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 120)
    print(df.pivot(index="estimator", columns="session", values="mape_pct")
          .assign(mean=lambda d: d.mean(axis=1)).round(2).to_string())
    print()
    print(df.groupby("estimator", sort=False)[["bias_pct", "p95_abs_error_pct"]].mean()
          .round(2).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
