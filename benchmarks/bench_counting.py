"""How much ctxlab's exact counting costs over calling tiktoken directly.

Loads every session in ``datasets/`` (and ``../shared/realdata`` when present),
then, in one process and with the encoding already loaded, times best-of-N:

* ``ctxlab``: ``estimator("tiktoken:<enc>").count(parts)`` with its cache cleared
  before every repeat (so it tokenizes every distinct text, like a first replay);
* ``ctxlab (warm)``: the same call again, counts served from the cache;
* ``raw loop``: ``[len(enc.encode_ordinary(t)) for t in texts]``;
* ``raw batch``: ``enc.encode_ordinary_batch(texts)`` (tiktoken's thread pool).

The part column repeats texts (a system prompt in every session), which ctxlab
counts once, so the comparison is also made on the de-duplicated texts, where
the ratio ctxlab / raw loop is the plain overhead (target <= 1.1).

Run: ``.venv/bin/python benchmarks/bench_counting.py [--repeats 5] [--encoding o200k_base]``
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

import ctxlab
from ctxlab.tokens import estimator
from ctxlab.tokens.offline import get_encoding

REPO = Path(__file__).resolve().parent.parent
REALDATA = REPO.parent / "shared" / "realdata"


def corpus_parts() -> pd.Series:
    """Every part's content over datasets/ and realdata (when present)."""
    frames = [ctxlab.load_dir(REPO / "datasets").frame]
    if REALDATA.is_dir():
        frames.append(ctxlab.load_dir(REALDATA).frame)
    return pd.concat(frames, ignore_index=True)["content"]


def best_of(repeats: int, runs: dict[str, Callable[[], object]],
            before: dict[str, Callable[[], None]]) -> dict[str, float]:
    """Fastest wall time of each run over ``repeats`` rounds.

    The runs take turns within each round, so a busy neighbour slows them alike;
    ``before[name]`` runs untimed before its run.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            if name in before:
                before[name]()
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def raw_loop(encode: Callable[[str], list[int]], texts: list[str]) -> list[int]:
    """What a caller of tiktoken writes: one ``encode_ordinary`` per text."""
    return [len(encode(t)) for t in texts]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--encoding", default="o200k_base")
    args = parser.parse_args()

    t0 = time.perf_counter()
    parts = corpus_parts()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    enc = get_encoding(args.encoding)
    enc_s = time.perf_counter() - t0
    est = estimator(f"tiktoken:{args.encoding}")
    unique = pd.Series(parts.drop_duplicates().tolist(), dtype="string")

    print(f"corpus: {len(parts)} parts, {parts.nunique()} distinct, "
          f"{int(parts.str.len().sum()):,} chars (loaded in {load_s:.2f} s); "
          f"encoding {args.encoding} ready in {enc_s:.2f} s; best of {args.repeats}")
    encode = enc.encode_ordinary
    rows = []
    for label, texts in (("all parts", parts), ("distinct texts", unique)):
        plain = texts.tolist()
        assert est.count(texts).tolist() == [len(encode(t)) for t in plain], "ctxlab != tiktoken"
        t = best_of(args.repeats, {
            "cold": functools.partial(est.count, texts),
            "warm": functools.partial(est.count, texts),
            "loop": functools.partial(raw_loop, encode, plain),
            "batch": functools.partial(enc.encode_ordinary_batch, plain),
        }, before={"cold": est.clear_cache})
        rows.append((label, len(plain), t["cold"], t["warm"], t["loop"], t["batch"]))

    print(f"\n{'texts':<15} {'n':>6} {'ctxlab':>9} {'warm':>9} {'raw loop':>9} "
          f"{'raw batch':>9} {'ctxlab/loop':>11} {'ctxlab/batch':>12}")
    for label, n, cold, warm, loop, batch in rows:
        print(f"{label:<15} {n:>6} {cold:>8.3f}s {warm:>8.3f}s {loop:>8.3f}s {batch:>8.3f}s "
              f"{cold / loop:>11.3f} {cold / batch:>12.3f}")
    overhead = rows[1][2] / rows[1][4]
    print(f"\noverhead on distinct texts: ctxlab / raw loop = {overhead:.3f} "
          f"({'within' if overhead <= 1.1 else 'OVER'} the 1.1 target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
