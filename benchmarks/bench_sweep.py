"""Sweep throughput: replays per minute of the local engine with 1 and 2 workers and of the
Dask engine with 2 workers.

Generated Claude Code sessions of 2,000 messages each (`ctxlab.datasets.generate_session`,
as in ``bench_replay.py``, one seed per session), written to a temporary folder and also
converted to a corpus dataset (`ctxlab.loaders.corpus_store.write_corpus`), once with the
sessions' facts (`ctxlab.facts`) and once without (time and size of each); a grid of the
non-LLM presets (``probe``, ``ai-agent``, ``neuron``, ``observation-masking``: no stage
that would call a model) at several thresholds, replayed over every session by
`ctxlab.sweep.sweep` (each replay with its recall and retention metrics; a preset's
thresholds share the replay of their common beginning, `ctxlab.sweep_prefix`, as in any
sweep). Prints, per
engine and worker count, the wall time, replays per minute, and the speed-up over the
local engine with 1 worker; checks that every run gave the same results; the replay
seconds summed over workers against the wall time (the concurrency reached: on a machine
busy with other work, the speed-up stays low even though the workers run at once); and,
per preset, the seconds of one replay with its metrics in the 1-worker run and the
replays per minute two cores would give at that speed. Before the sweeps, on a session of
its own, it prints what a session costs once whatever the grid: loading its file, extracting
its artifacts and the exact token counts of the presets that use a tokenizer; then the same
read from a dataset without facts and with them (taking the stored facts instead).

Each Dask run gets a fresh ``LocalCluster`` of 2 processes (`ctxlab.sweep_dask.local_cluster`;
workers keep module caches from one sweep to the next), started before the run is timed
(its start-up time is printed apart; ``sweep(engine="dask")`` without a client pays it on
every call): once over the log files, once over the dataset without facts and once over the
dataset with them, whose workers read only the partitions of their sessions; the CPU time
the workers spent is printed too (on a busy machine it varies less than the wall time). The
local pool's start-up (spawned processes importing ctxlab) is counted in its time.

    .venv/bin/python benchmarks/bench_sweep.py [--sessions 4] [--messages 2000]
        [--presets probe ai-agent ...] [--thresholds 0.8 0.9 1.0] [--workers 1 2]
        [--dask-workers 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ctxlab import datasets
from ctxlab.loaders.corpus_store import write_corpus
from ctxlab.sweep import equal_results, sweep


NON_LLM = ["probe", "ai-agent", "neuron", "observation-masking"]


def write_sessions(n: int, messages: int, folder: Path) -> None:
    for i in range(n):
        s = datasets.generate_session("coding", 11 + i, calls=messages // 2, compact_at=None)
        datasets.write_claude_code(s, folder / f"s{i}_{messages}.jsonl")


def fixed_costs(messages: int, folder: Path) -> None:
    """What every session costs once, whatever the configurations: on a session of its
    own (a sweep's caches stay cold), loading the file, extracting its artifacts (for
    recall and retention) and the exact counts of the presets that use a tokenizer; then
    the same session read from a dataset without its stored facts and with them."""
    import ctxlab
    from ctxlab.artifacts import clear_artifact_cache
    from ctxlab.loaders.corpus_store import read_manifest, read_session
    from ctxlab.tokens import registry

    s = datasets.generate_session("coding", 7, calls=messages // 2, compact_at=None)
    (folder / "fixed").mkdir()
    path = datasets.write_claude_code(s, folder / "fixed" / "fixed.jsonl")
    print(f"once per session (CPU, a session of {messages:,} messages): "
          + session_costs(lambda: ctxlab.load(path), "load"))
    # from a dataset, with its stored facts and without: the caches emptied first, as in a
    # worker meeting the session (the tokenizer's fingerprint, once per process, is known)
    for facts in (False, True):
        out = folder / f"fixed-{facts}"
        write_corpus(folder / "fixed", out, facts=facts)
        part = out / read_manifest(out)["partitions"][0]["path"]
        clear_artifact_cache()
        for e in list(registry._INSTANCES.values()):
            for one in (e, getattr(e, "a", None), getattr(e, "b", None)):
                if one is not None:
                    one.clear_cache()
        print(f"  read from a dataset {'with' if facts else 'without'} facts: "
              + session_costs(lambda: read_session(part), "read"))


def session_costs(read: Any, what: str) -> str:
    """CPU seconds of reading a session (``read()``), extracting its artifacts and the
    exact counts of the presets that use a tokenizer, as one line."""
    from ctxlab.artifacts import artifact_ids, instruction_rows
    from ctxlab.pipeline import pipeline_estimator
    from ctxlab.presets import preset

    t0 = time.process_time()
    t = read()
    t1 = time.process_time()
    artifact_ids(t.frame["content"].reset_index(drop=True),
                 user=instruction_rows(t.frame).reset_index(drop=True))
    t2 = time.process_time()
    exact = {}
    for name in NON_LLM:
        if "tiktoken" in preset(name).estimator:
            est = pipeline_estimator(preset(name), "anthropic")
            c0 = time.process_time()
            est.count_parts(t.frame)
            exact[name] = time.process_time() - c0
    return f"{what} {t1 - t0:.2f} s, artifacts {t2 - t1:.2f} s" + "".join(
        f", {k}'s exact counts {v:.2f} s" for k, v in exact.items())


def timed(corpus: Any, grid: dict, **kw: Any) -> tuple[pd.DataFrame, float]:
    t0 = time.perf_counter()
    df = sweep(corpus, grid, progress=False, **kw)
    return df, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--messages", type=int, default=2_000)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.8, 0.9, 1.0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dask-workers", type=int, default=2, help="0: no Dask runs")
    ap.add_argument("--presets", nargs="+", default=NON_LLM)
    args = ap.parse_args()
    grid = {"preset": args.presets, "threshold": args.thresholds}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "logs"
        folder.mkdir()
        write_sessions(args.sessions, args.messages, folder)
        sizes = {}
        for facts in (False, True):
            t0 = time.perf_counter()
            out = Path(tmp) / ("corpus" if facts else "corpus-no-facts")
            write_corpus(folder, out, facts=facts)
            dt = time.perf_counter() - t0
            sizes[facts] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            print(f"{args.sessions} sessions of {args.messages:,} messages; converted to a "
                  f"corpus dataset {'with' if facts else 'without'} facts in {dt:.1f} s "
                  f"({sizes[facts] / 1e6:.2f} MB)")
        print(f"    facts add {sizes[True] / sizes[False] - 1:.1%} to the dataset")
        fixed_costs(args.messages, Path(tmp))
        runs: list[tuple[str, pd.DataFrame, float]] = []
        for w in args.workers:
            df, dt = timed(folder, grid, workers=w)
            runs.append((f"local engine, {w} worker(s), log files", df, dt))
        if args.dask_workers:
            from distributed import Client

            from ctxlab.sweep_dask import local_cluster

            # a fresh cluster per run: workers keep their module caches between sweeps
            for what, corpus in (("log files", folder),
                                 ("corpus dataset without facts", Path(tmp) / "corpus-no-facts"),
                                 ("corpus dataset", Path(tmp) / "corpus")):
                t0 = time.perf_counter()
                with local_cluster(args.dask_workers) as cluster, \
                        Client(cluster, set_as_default=False) as client:
                    start = time.perf_counter() - t0
                    c0 = client.run(time.process_time)
                    df, dt = timed(corpus, grid, engine="dask", client=client)
                    c1 = client.run(time.process_time)
                cpu = sum(c1[w] - c0[w] for w in c1)
                runs.append((f"Dask engine, {args.dask_workers} workers, {what} (cluster "
                             f"start-up {start:.1f} s not counted; workers' CPU {cpu:.1f} s)",
                             df, dt))
        first, base = runs[0][1], len(runs[0][1]) / runs[0][2] * 60
        for name, df, dt in runs:
            per_min = len(df) / dt * 60
            print(f"{name}: {len(df)} replays ({args.sessions} sessions x "
                  f"{len(args.presets)} presets x {len(args.thresholds)} thresholds, "
                  f"{int(df['calls'].iloc[0]):,} calls "
                  f"each) in {dt:6.1f} s = {per_min:6.1f} replays/minute, speed-up "
                  f"{per_min / base:4.2f}x, same results as the first: "
                  f"{equal_results(first, df)}")
            # replay time summed over workers / wall time: how many ran at once (a busy
            # machine shows a low speed-up with concurrency near the worker count)
            print(f"    replay seconds summed {df['seconds'].sum():.1f} s, "
                  f"concurrency {df['seconds'].sum() / dt:.2f}")
        # the mean counts the first replay of each session, which extracts the session's
        # artifacts (what a session costs once); the median is a replay's own cost
        per = runs[0][1].groupby("preset", sort=False)["seconds"].agg(["mean", "median"])
        for preset, sec in per.iterrows():
            print(f"  {preset:20s} {sec['mean']:6.3f} s per replay with metrics (1 worker; "
                  f"median {sec['median']:.3f} s) -> {2 * 60 / sec['mean']:7.1f} "
                  f"replays/minute on 2 cores at that speed ({2 * 60 / sec['median']:.1f} at "
                  f"the median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
