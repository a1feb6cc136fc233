"""Threshold tuning at scale: replay every configuration of a grid over every session.

`sweep` expands a grid (`ctxlab.sweep_grid`) into configurations and replays each
over each session of a corpus. Rows come back in configuration order, then session
order (files in corpus order, sessions in log order), whatever the engine and the
number of workers. ``engine="local"``: with ``workers=1`` everything runs in this
process; otherwise a process pool (``spawn``) runs tasks of several configurations
over one session (with few sessions, a session's configurations are split so every
worker has work: one task per group that shares its beginning, `ctxlab.sweep_prefix`, or
runs of them), each worker loading the file of its session itself (only
a path, format and session id travel), keeping the last files it loaded. ``engine="dask"``
(`ctxlab.sweep_dask`): one task per session on a ``distributed`` cluster. A corpus
dataset (`ctxlab.loaders.corpus_store`) is read one session partition at a time, so a
worker reads only the sessions it replays, and takes the facts stored with each session
(`ctxlab.facts`: its artifacts and tokenizer counts, not computed again while valid).
`ctxlab.recommend.recommend` picks the best configurations from the result.

Per row (`METRIC_COLUMNS`): ``calls``; ``compactions`` (calls whose trigger fired, whether
or not a stage could change the request); ``calls_compacted`` (calls whose request a stage
changed: always-on stages need no trigger, and a trigger that found nothing to do changes
nothing, as `Replay.summary` counts them); ``events``; ``failures`` (summarizer attempts
that failed); ``summarizer_calls``, ``summarizer_input_tokens``,
``summarizer_output_tokens``; ``tokens_sent`` (sum of the request sizes after compaction,
the input cost, counted by one estimator for every configuration: `MEASURE` or ``measure=``,
`ctxlab.measure`); ``cost`` (USD, `PRICES`, of those tokens and the summarizers');
``measure`` (that estimator's spec); ``peak_usage`` (largest request / limit); ``overflows``
(requests over the window); ``forced_final``; ``needed``, ``missing``, ``recall`` (pooled
over the session's calls: 1 − missing / needed, NaN when nothing was needed);
``hidden_artifacts``, ``retained``, ``retention`` (all artifact kinds pooled over the
compaction events: retained / hidden, NaN when no event hid any); ``seconds`` (wall time of
the replay and its metrics; for a configuration resumed from another's shared beginning,
`ctxlab.sweep_prefix`, of its own part: it varies from run to run, leave it out when
comparing results).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ctxlab.errors import ConfigError, LoadError
from ctxlab.loaders.corpus import Corpus, load_dir
from ctxlab.loaders.records import LoadOptions
from ctxlab.schema import Transcript
from ctxlab.sweep_costs import (MEASURE, PRICES, Metering, measure_spec, price_for,  # noqa: F401
                                price_table)
from ctxlab.sweep_grid import Config, Grid, distinct, expand
from ctxlab.sweep_records import (NO_LEFT_OUT, NOT_REPLAYED, LeftOut,  # noqa: F401
                                  SharedRecords, SkippedRecords, left_out, listed_sessions,
                                  not_replayed_records, once_each, partitions_not_replayed,
                                  replayed_sessions, skipped_records)
from ctxlab.sweep_prefix import replays, shared_groups

METRIC_COLUMNS = ("calls", "compactions", "calls_compacted", "events", "failures",
                  "summarizer_calls", "summarizer_input_tokens", "summarizer_output_tokens",
                  "tokens_sent", "cost",
                  "peak_usage", "overflows", "forced_final", "needed", "missing", "recall",
                  "hidden_artifacts", "retained", "retention", "seconds")
FILES_KEPT = 2


@dataclass(frozen=True, slots=True)
class Source:
    """Where a worker finds a session: a file (path, format, options), a session partition
    of a corpus dataset (``part``; ``path`` is its source log), or an in-memory log."""

    path: str
    format: str | None = None
    options: LoadOptions | None = None
    memory: int | None = None
    part: str | None = None


_MEMORY: list[Transcript] = []
_FILES: OrderedDict[str, Transcript] = OrderedDict()
_LOCK = threading.Lock()  # a Dask worker may run tasks in several threads


def _init_worker(memory: list[Transcript]) -> None:
    _MEMORY[:] = memory
    _FILES.clear()


def _load(src: Source) -> Transcript:
    if src.memory is not None:
        return _MEMORY[src.memory]
    key = src.part or src.path
    with _LOCK:
        t = _FILES.get(key)
        if t is not None:
            _FILES.move_to_end(key)
            return t
    if src.part is not None:
        from ctxlab.loaders.corpus_store import read_session
        from ctxlab.schema import REPORT_COLUMNS, LoadReport, empty_frame
        # the load report does not change a replay: the source's is not read
        try:
            t = read_session(src.part, LoadReport(records=empty_frame(REPORT_COLUMNS)))
        except LoadError as e:
            raise LoadError(f"{e.reason}; a session of the corpus dataset (from {src.path}) "
                            f"is missing or damaged: convert its logs again (ctxlab convert "
                            f"DIR -o DATASET)", path=e.path) from None
    else:
        from ctxlab.loaders.registry import get
        t = get(str(src.format)).load(Path(src.path), src.options or LoadOptions())
    with _LOCK:
        _FILES[key] = t
        while len(_FILES) > FILES_KEPT:
            _FILES.popitem(last=False)
    return t


def _sessions_of(src: Source) -> tuple[list[str], pd.DataFrame, LeftOut]:
    """The sessions a sweep replays from a log loaded in a worker, the records of the
    log that could not be used (`LoadReport.skipped`, with a row for each session left
    out as no agent's conversation: `not_replayed_records`) and what else it leaves out
    (`left_out`). A log that cannot be read at all (truncated JSON...) gives no session
    and one skipped record saying why, unless the sweep is strict: one bad file does not
    stop a corpus."""
    try:
        t = _load(src)
    except LoadError as e:
        if src.options is not None and src.options.strict:
            raise
        return [], _unreadable(e.path or src.path, e.line, e.where, e.reason), NO_LEFT_OUT
    sessions, skipped = listed_sessions(t)
    return sessions, skipped, left_out(t, src.path)


def _unreadable(file: str, line: int | None, where: str | None, reason: str) -> pd.DataFrame:
    """The skipped record of a log that could not be read at all (none of it replayed)."""
    from ctxlab.schema import REPORT_COLUMNS, coerce
    return coerce({"file": [file], "line": [line],
                   "where": [where or (f"line {line}" if line is not None else "file")],
                   "record": ["log"], "status": ["skipped"], "parts": [0],
                   "reason": [f"the log could not be read, so none of it was replayed: "
                              f"{reason}"]}, REPORT_COLUMNS)


def session_list(sources: Sessions,
                 listed: Iterable[tuple[list[str], pd.DataFrame, LeftOut]]
                 ) -> tuple[list[tuple[Source, str]], list[pd.DataFrame], list[LeftOut]]:
    """Every (source, session) to replay, in order, and the skipped records and what else
    was left out (`left_out`) of the logs whose sessions were listed by loading them
    (``listed``: `_sessions_of` of each source without sessions, in order)."""
    found = iter(listed)
    sessions: list[tuple[Source, str]] = []
    skipped: list[pd.DataFrame] = []
    out: list[LeftOut] = []
    for src, ss in sources:
        if ss is None:
            ss, sk, lo = next(found)
            if len(sk):
                skipped.append(sk)
            out.append(lo)
        sessions.extend((src, s) for s in ss)
    return sessions, skipped, out


def _run_units(units: Sequence[tuple[int, Config]], src: Source, session: str,
               stage_cols: Sequence[str], metering: Metering,
               t: Transcript | None = None) -> list[tuple[int, dict[str, Any]]]:
    """Some configurations over one session, which is loaded and cut out once (``t``:
    the session's transcript when the caller has it): ``(index, row)`` in ``units``'
    order. Configurations that differ only in threshold share the replay of their
    common beginning (`ctxlab.sweep_prefix`)."""
    t = t if t is not None else _load(src).session(session)
    rows = {i: _row(config, src, session, stage_cols, metering, r, start)
            for i, config, r, start in replays(t, units)}
    return [(i, rows[i]) for i, _ in units]


def _row(config: Config, src: Source, session: str, stage_cols: Sequence[str],
         metering: Metering, r: Any, start: float) -> dict[str, Any]:
    """The row of (configuration, session) from its replay and its metrics (``start``:
    when the replay's work began)."""
    from ctxlab.measure import request_tokens
    from ctxlab.metrics import loss_totals

    loss = loss_totals(r.transcript)
    seconds = time.perf_counter() - start
    c, ev = r.calls, r.events
    n = len(c)

    def ev_sum(col: str) -> int:
        return int(pd.to_numeric(ev[col], errors="coerce").fillna(0).sum()) \
            if col in ev and len(ev) else 0

    s_in, s_out = ev_sum("summarizer_input_tokens"), ev_sum("summarizer_output_tokens")
    first_model = c["model"].iloc[0] if n else None
    prices = metering.prices
    measured = request_tokens(r, metering.measure)
    cost = 0.0
    if n:
        sent = pd.Series(measured).groupby(c["model"].astype(object).fillna("").to_numpy(),
                                           sort=True).sum()
        cost = sum(float(v) * price_for(m or None, prices)[0] for m, v in sent.items())
    pin, pout = price_for(first_model, prices)
    cost = (cost + s_in * pin + s_out * pout) / 1e6
    return {**config.columns(stage_cols), "file": src.path, "session": session,
            "measure": metering.measure,
            "calls": n, "compactions": int(c["triggered"].sum()) if n else 0,
            "calls_compacted": int(c["compacted"].sum()) if n else 0,
            "events": int(ev["event"].notna().sum()) if len(ev) else 0,
            "failures": int(ev["failure"].notna().sum()) if "failure" in ev else 0,
            "summarizer_calls": ev_sum("summarizer_calls"),
            "summarizer_input_tokens": s_in, "summarizer_output_tokens": s_out,
            "tokens_sent": int(measured.sum()) if n else 0, "cost": cost,
            "peak_usage": float(c["usage_after"].max()) if n else 0.0,
            "overflows": int(c["over_window"].sum()) if n else 0,
            "forced_final": int(c["forced_final"].sum()) if n else 0,
            **loss, "seconds": seconds}


Sessions = list[tuple[Source, list[str] | None]]


def _sources(corpus: Any, where: str | None = None
             ) -> tuple[Sessions, list[Transcript], list[pd.DataFrame], list[LeftOut],
                        list[dict[str, str]]]:
    """Each source with the sessions to replay (None: listed by loading the file), the
    in-memory transcripts, the records known now that could not be used and what else is
    known now to be left out (`left_out`; a corpus dataset's and in-memory logs'; a file's
    are found when a worker loads it), and the files of a folder that are not logs
    (``path``, ``note``: ``Corpus.files``). ``where``: the corpus as the user named it
    (default: its path, or "the corpus")."""
    where = where or (str(corpus) if isinstance(corpus, (str, Path)) else "the corpus")
    if isinstance(corpus, (str, Path)):     # (a folder is a Corpus by now: `sweep`)
        path = Path(corpus)
        if not path.is_file():
            raise ConfigError(f"{path}: no such file or folder")
        from ctxlab.loaders.registry import detect
        return [(Source(path=str(path), format=detect(path).name), None)], [], [], [], []
    if isinstance(corpus, Corpus):
        files = corpus.files[corpus.files["status"] == "log"]
        if files.empty:
            raise ConfigError(f"{where}: no logs to sweep (corpus.files, or ctxlab info "
                              f"on the folder, says why)")
        other = corpus.files[corpus.files["status"] == "not-a-log"]
        not_logs = [{"path": str(p), "note": str(n)} for p, n in zip(other["path"],
                                                                     other["note"])]
        if corpus.dataset is not None:
            # the sessions replayed from the source log itself (`replayed_sessions`): with
            # calls, and parts unless the log has none
            log_parts = files.groupby("source", sort=False)["parts"].transform("sum")
            keep = (files["calls"] > 0) & ((files["parts"] > 0) | (log_parts == 0))
            # a session left out without calls is named by the manifest; one with calls
            # is read (a few calls, no part) to name them
            lo = {"sessions_without_calls": [
                {"file": str(r.source), "session": str(r.session)}
                for r in files[files["calls"] == 0].itertuples()],
                "calls_without_input": [
                    c for r in files[~keep & (files["calls"] > 0)].itertuples()
                    for c in left_out(corpus.transcript(r.path), str(r.source))[
                        "calls_without_input"]]}
            helper = files["note"].notna()      # no agent's conversation (`write_corpus`)
            # the input folder's other files, as its manifest lists them: not logs, and
            # logs that could not be read (stored as nothing)
            from ctxlab.loaders.corpus_store import read_manifest
            other = read_manifest(corpus.dataset)["other_files"]
            not_logs += [{"path": str(f["path"]), "note": str(f["note"])} for f in other
                         if f.get("status") == "not-a-log"]
            unread = [_unreadable(str(f["path"]), None, None, str(f["note"])) for f in other
                      if f.get("status") == "unreadable"]
            return [(Source(path=str(r.source), format="parquet", part=str(r.path)),
                     [str(r.session)]) for r in files[keep & ~helper].itertuples()], [], \
                [corpus.load_report.skipped, *unread, partitions_not_replayed(files[helper])], \
                [lo], not_logs
        return [(Source(path=str(p), format=str(f), options=corpus.options), None)
                for p, f in zip(files["path"], files["format"])], [], [], [], not_logs
    if isinstance(corpus, Transcript):
        corpus = [corpus]
    if isinstance(corpus, Sequence) and corpus and all(isinstance(t, Transcript)
                                                       for t in corpus):
        listed = [listed_sessions(t) for t in corpus]
        sources = [(Source(path=str(t.meta.get("path") or f"<transcript {i}>"), memory=i), ss)
                   for i, (t, (ss, _)) in enumerate(zip(corpus, listed))]
        return sources, list(corpus), [sk for _, sk in listed], \
            [left_out(t, src.path) for t, (src, _) in zip(corpus, sources)], []
    raise ConfigError("sweep takes a Corpus, a folder or file path, a Transcript or a list "
                      f"of Transcripts, not {type(corpus).__name__}")


def _bar(total: int, progress: bool | None, desc: str) -> Any:
    if progress is False or (progress is None and not sys.stderr.isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, file=sys.stderr, leave=False)


def sweep(corpus: Corpus | str | Path | Transcript | Sequence[Transcript],
          grid: Grid | Sequence[Grid], *, engine: str = "local",
          estimator: str | None = None, window: int | None = None,
          workers: int | None = None, client: Any = None,
          prices: Mapping[str, tuple[float, float]] | None = None,
          measure: str | None = None, progress: bool | None = None) -> pd.DataFrame:
    """Replay every configuration of a grid over every session: one row per pair.

    Args:
        corpus: a `Corpus` (a folder of logs or a corpus dataset), a folder or log file
            path, a `Transcript` or a list of them. Files are loaded by the workers,
            dataset sessions read from their own partitions; in-memory transcripts are
            sent to each worker once (Dask: each session to the task that replays it).
        grid: name -> values (`ctxlab.sweep_grid`), or a list of such grids (their union).
        engine: ``"local"`` (a process pool on this machine) or ``"dask"`` (one task per
            session on a ``distributed`` cluster: ``pip install ctxlab[dask]``).
        estimator, window: for configurations whose grid does not set them (None: the
            pipeline's estimator, each call's model's window).
        workers: processes (None: the CPU count). Local: 1 runs everything here without a
            pool. Dask: the size of the local cluster started for this sweep (and closed
            after it); not used with ``client``.
        client: Dask only: a ``distributed.Client`` to run on (left open); None starts a
            ``LocalCluster``.
        prices: USD per million (input, output) tokens by model family, merged over
            `PRICES`.
        measure: the estimator spec that counts ``tokens_sent`` and ``cost`` for every
            configuration (None: `MEASURE`; ``{provider}`` is filled in per session),
            whatever estimator each configuration triggers with.
        progress: a tqdm bar on stderr (None: when stderr is a terminal and tqdm is
            installed).

    Returns:
        One row per configuration × session, in configuration then session order:
        ``config`` (index), the configuration's columns (``preset``, ``threshold``,
        ``target``, ``window``, ``estimator``, any ``stage.param``, ``note``), ``file``,
        ``session``, ``measure`` and `METRIC_COLUMNS`. The same for either engine and any number of
        workers (``seconds`` aside: `equal_results`). What the rows leave out, in
        ``df.attrs`` (plain values, kept by ``to_parquet``): ``skipped``, the records of
        the swept logs that could not be used, which the replays ran without
        (`skipped_records`: file, line, reason); ``sessions_without_calls`` (file,
        session) and ``calls_without_input`` (file, session, call, source), not replayed
        (`left_out`); ``not_logs``, the files of a folder that are not logs (path, note,
        as ``Corpus.files`` has them); ``not_replayed``, the sessions left out as no
        agent's conversation (`not_replayed_records`: Claude Code's compaction
        summarizer), as ``skipped`` lists records; ``sessions_in_several_files``, a
        session replayed from more than one file, each copy in the totals
        (`repeated_sessions`); ``sub_agent_files``, a folder's sub-agent logs, swept
        with their sessions only with ``sidechains=True`` (`sub_agent_files`).

    Example:
        >>> from ctxlab.sweep import sweep
        >>> df = sweep("datasets/coding_session_b.jsonl",
        ...            {"preset": ["neurolink"], "threshold": [0.5, 0.8]}, workers=1)
        >>> df["threshold"].tolist(), df["compactions"].tolist()
        ([0.5, 0.8], [5, 1])
    """
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; engines: {', '.join(ENGINES)}")
    if client is not None and engine != "dask":
        raise ConfigError("client= runs a sweep on Dask: pass engine='dask' with it")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be >= 1, not {workers}")
    metering = Metering(price_table(prices), measure_spec(measure))
    configs, stage_cols = expand(grid)
    configs = distinct(replace(c, window=c.window if c.window is not None else window,
                               estimator=c.estimator if c.estimator is not None else estimator)
                       for c in configs)
    named = str(corpus) if isinstance(corpus, (str, Path)) else None
    if named is not None and Path(corpus).is_dir():     # (its sub-agents' logs named below)
        corpus = load_dir(Path(corpus))
    sources, memory, known, known_out, not_logs = _sources(corpus, named)
    if engine == "dask":
        from ctxlab.sweep_dask import run_dask
        rows, n_sessions, listed, listed_out = run_dask(
            sources, memory, configs, stage_cols, metering, client=client, workers=workers,
            progress=progress)
    else:
        rows, n_sessions, listed, listed_out = _run_local(sources, memory, configs,
                                                          stage_cols, metering, workers, progress)
    df = _frame(rows, configs, n_sessions, stage_cols)
    frames = [*known, *listed]
    df.attrs["skipped"] = skipped_records(f[f["status"] != NOT_REPLAYED] for f in frames)
    df.attrs["not_replayed"] = skipped_records(f[f["status"] == NOT_REPLAYED] for f in frames)
    for key in NO_LEFT_OUT:
        df.attrs[key] = once_each([r for lo in (*known_out, *listed_out) for r in lo[key]])
    df.attrs["not_logs"] = SharedRecords(not_logs)
    df.attrs["sessions_in_several_files"] = repeated_sessions(df)
    df.attrs["sub_agent_files"] = sub_agent_files(corpus)
    return df


ENGINES = ("local", "dask")


def _run_local(sources: Sessions, memory: list[Transcript], configs: list[Config],
               stage_cols: list[str], metering: Metering,
               workers: int | None, progress: bool | None
               ) -> tuple[dict[int, dict[str, Any]], int, list[pd.DataFrame], list[LeftOut]]:
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    if n_workers == 1:
        _init_worker(memory)
        return _run_inline(sources, configs, stage_cols, metering, progress)
    import multiprocessing as mp
    pool = ProcessPoolExecutor(max_workers=n_workers, mp_context=mp.get_context("spawn"),
                               initializer=_init_worker, initargs=(memory,))
    try:
        # sessions listed first, each one's configurations split among the workers: a log
        # that holds most of the sessions (aider's one history) is not one worker's alone
        unknown = [src for src, ss in sources if ss is None]
        sessions, skipped, out = session_list(sources, pool.map(_sessions_of, unknown))
        # a task is a run of configurations over one session (loaded once per task); with
        # few sessions, each session's configurations are split so every worker has work
        pieces = min(len(configs), max(1, -(-2 * n_workers // max(len(sessions), 1))))
        runs = _runs(configs, pieces, n_workers)
        tasks = [([(ci * len(sessions) + si, configs[ci]) for ci in run], src, s)
                 for si, (src, s) in enumerate(sessions) for run in runs]
        bar = _bar(len(configs) * len(sessions), progress, "sweep")
        rows = _run_all(tasks, stage_cols, metering, pool, bar)
    finally:
        pool.shutdown(cancel_futures=True)
    return rows, len(sessions), skipped, out


def _run_inline(sources: Sessions, configs: list[Config], stage_cols: list[str],
                metering: Metering, progress: bool | None
                ) -> tuple[dict[int, dict[str, Any]], int, list[pd.DataFrame], list[LeftOut]]:
    """`_run_local` in this process, one log at a time: listing a log's sessions loads it,
    and its replays follow while it is still loaded (listing every log first would read
    each file twice once the logs outnumber the `FILES_KEPT` kept loaded). The progress
    bar counts a log not yet listed as one session, until it is."""
    units = list(enumerate(configs))
    bar = _bar(len(configs) * sum(len(ss) if ss is not None else 1 for _, ss in sources),
               progress, "sweep")
    per_session: list[list[tuple[int, dict[str, Any]]]] = []
    skipped: list[pd.DataFrame] = []
    out: list[LeftOut] = []
    try:
        for src, ss in sources:
            if ss is None:
                ss, sk, lo = _sessions_of(src)
                if len(sk):
                    skipped.append(sk)
                out.append(lo)
                if bar is not None and len(ss) != 1:
                    bar.total += len(configs) * (len(ss) - 1)
                    bar.refresh()
            for s in ss:
                got = []
                for ci, row in _run_units(units, src, s, stage_cols, metering):
                    got.append((ci, row))
                    if bar is not None:
                        bar.update(1)
                per_session.append(got)
    finally:
        if bar is not None:
            bar.close()
    n = len(per_session)
    return {ci * n + si: row for si, got in enumerate(per_session) for ci, row in got}, n, \
        skipped, out


def _runs(configs: Sequence[Config], pieces: int, n_workers: int) -> list[list[int]]:
    """The configuration indices of each task of a session: all of them (``pieces`` 1),
    else one task per group that shares its beginning (`ctxlab.sweep_prefix`) when there
    are enough groups to keep the workers busy, else ``pieces`` runs of the grouped order."""
    if pieces == 1:
        return [list(range(len(configs)))]
    groups = shared_groups(configs)
    if len(groups) >= n_workers:
        return groups
    order = [i for g in groups for i in g]
    return [order[r.start:r.stop] for r in _split(range(len(order)), pieces)]


def _split(items: range, pieces: int) -> list[range]:
    """``items`` in ``pieces`` contiguous runs of near-equal length (none empty).

    Example:
        >>> [list(r) for r in _split(range(5), 2)], [list(r) for r in _split(range(2), 4)]
        ([[0, 1, 2], [3, 4]], [[0], [1]])
    """
    size, extra = divmod(len(items), pieces)
    bounds = [0]
    for k in range(pieces):
        bounds.append(bounds[-1] + size + (1 if k < extra else 0))
    return [items[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _run_all(tasks: list[tuple[list[tuple[int, Config]], Source, str]], stage_cols: list[str],
             metering: Metering, pool: ProcessPoolExecutor,
             bar: Any) -> dict[int, dict[str, Any]]:
    rows: dict[int, dict[str, Any]] = {}
    try:
        futures = [pool.submit(_run_units, units, src, s, stage_cols, metering)
                   for units, src, s in tasks]
        for fut in as_completed(futures):
            for i, row in fut.result():
                rows[i] = row
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return rows


def _frame(rows: Mapping[int, dict[str, Any]], configs: list[Config], n_sessions: int,
           stage_cols: Iterable[str]) -> pd.DataFrame:
    ordered = [dict(config=i // n_sessions, **rows[i]) for i in sorted(rows)]
    cols = ["config", "preset", "threshold", "target", "window", "estimator", *stage_cols,
            "note", "file", "session", "measure", *METRIC_COLUMNS]
    df = pd.DataFrame(ordered, columns=cols)
    df["window"] = df["window"].astype("Int64")
    for c in stage_cols:    # whole numbers stay whole beside the presets they skip (NA)
        values = [r.get(c) for r in ordered]
        given = [v for v in values if v is not None]
        if given and all(isinstance(v, int) and not isinstance(v, bool) for v in given):
            df[c] = pd.array(values, dtype="Int64")
    for c in ("recall", "retention", "cost", "peak_usage", "seconds"):
        df[c] = df[c].astype("float64")
    return df


def sub_agent_files(corpus: Any) -> SharedRecords:
    """A folder's sub-agent logs a sweep left out (``path``, ``note``; of a corpus
    dataset, those of the folder it was written from): loaded with the log they belong to
    only with ``sidechains=True`` (``load_dir(path, sidechains=True)``, ``ctxlab sweep
    --sidechains``; a dataset written with ``--sidechains`` holds them)."""
    if not isinstance(corpus, Corpus) or corpus.options.sidechains:
        return SharedRecords()
    if corpus.dataset is not None:     # the input folder's, as the dataset's manifest has them
        from ctxlab.loaders.corpus_store import read_manifest
        return SharedRecords({"path": str(f["path"]), "note": str(f["note"])}
                             for f in read_manifest(corpus.dataset)["other_files"]
                             if f.get("status") == "part-of")
    part = corpus.files[corpus.files["status"] == "part-of"]
    return SharedRecords({"path": str(p), "note": str(n)}
                         for p, n in zip(part["path"], part["note"]))


def repeated_sessions(df: pd.DataFrame) -> SharedRecords:
    """The sessions a sweep replayed from more than one file (a log copied under another
    name): ``session`` and its ``files``, in order. Each copy is a row of every
    configuration and counts in the totals `ctxlab.recommend` compares.

    Example:
        >>> df = pd.DataFrame({"file": ["a.jsonl", "b.jsonl", "a.jsonl", "b.jsonl"],
        ...                    "session": ["s1", "s1", "s2", "s3"]})
        >>> repeated_sessions(df)
        [{'session': 's1', 'files': ['a.jsonl', 'b.jsonl']}]
    """
    pairs = df[["session", "file"]].drop_duplicates()
    files = pairs.groupby("session", sort=False)["file"].agg(list)
    return SharedRecords({"session": str(s), "files": [str(f) for f in fs]}
                         for s, fs in files.items() if len(fs) > 1)


def equal_results(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Whether two sweeps agree on everything but timing (``seconds``)."""
    return a.drop(columns="seconds").equals(b.drop(columns="seconds"))


__all__ = ["MEASURE", "METRIC_COLUMNS", "PRICES", "equal_results", "price_for", "price_table",
           "sweep"]
