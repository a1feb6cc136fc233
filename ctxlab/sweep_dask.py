"""The Dask engine of `ctxlab.sweep.sweep`: one task per session on a ``distributed`` cluster.

Each task replays every configuration over one session (`ctxlab.sweep._run_units`)
and loads only that session: from its partition when the corpus is a dataset
(`ctxlab.loaders.corpus_store`), from its file otherwise (each worker keeps the last
files it loaded); in-memory transcripts are cut into sessions here and each session is
scattered to the cluster once. Rows are put back in configuration then session order,
so the result equals the local engine's (`ctxlab.sweep.equal_results`).

``dask`` and ``distributed`` are imported only when a sweep runs with ``engine="dask"``
(``pip install 'ctxlab[dask]'``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ctxlab.errors import ConfigError
from ctxlab.schema import Transcript
from ctxlab.sweep import (LeftOut, Metering, Sessions, Source, _bar, _load, _run_units,
                          _sessions_of, session_list)
from ctxlab.sweep_grid import Config


def _session_task(si: int, src: Source, session: str, t: Transcript | None,
                  configs: Sequence[Config], stage_cols: Sequence[str],
                  metering: Metering) -> tuple[int, list[dict[str, Any]]]:
    """Every configuration over one session: (session index, one row per configuration)."""
    t = t if t is not None else _load(src).session(session)
    return si, [row for _, row in _run_units(list(enumerate(configs)), src, session,
                                             stage_cols, metering, t)]


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as e:
        raise ConfigError(f"engine='dask' needs dask.distributed ({e}): pip install "
                          f"'ctxlab[dask]', or use engine='local'") from None
    return distributed


def local_cluster(workers: int | None = None) -> Any:
    """A ``distributed.LocalCluster`` as `sweep` starts it: ``workers`` processes (None: the
    CPU count) of one thread, no dashboard, logs below errors silenced.

    Without a dashboard the scheduler still serves a few HTTP routes (health checks) on
    port 8787; they go to a free port of 127.0.0.1 instead, so that a second cluster
    (or anything else on 8787) neither collides nor warns.
    """
    return _distributed().LocalCluster(
        n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
        dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        silence_logs=logging.ERROR)


def run_dask(sources: Sessions, memory: list[Transcript], configs: list[Config],
             stage_cols: list[str], metering: Metering, *,
             client: Any, workers: int | None, progress: bool | None
             ) -> tuple[dict[int, dict[str, Any]], int, list[pd.DataFrame], list[LeftOut]]:
    """Rows by unit index (configuration-major, as the local engine numbers them), the
    number of sessions, and the skipped records and what else was left out of the logs the
    workers listed (`ctxlab.sweep.session_list`); on ``client``, else on a `local_cluster` closed
    afterwards."""
    distributed = _distributed()
    if client is None:
        with local_cluster(workers) as cluster, \
                distributed.Client(cluster, set_as_default=False) as own:
            return _run(own, distributed, sources, memory, configs, stage_cols, metering,
                        progress)
    if workers is not None:
        raise ConfigError("workers= sizes the cluster a Dask sweep starts; with client= the "
                          "client's cluster decides: leave workers out")
    if not isinstance(client, distributed.Client):
        raise ConfigError(f"client must be a distributed.Client, not {type(client).__name__}")
    return _run(client, distributed, sources, memory, configs, stage_cols, metering, progress)


def _run(client: Any, distributed: Any, sources: Sessions, memory: list[Transcript],
         configs: list[Config], stage_cols: list[str],
         metering: Metering, progress: bool | None
         ) -> tuple[dict[int, dict[str, Any]], int, list[pd.DataFrame], list[LeftOut]]:
    futures: list[Any] = []
    try:
        unknown = [src for src, ss in sources if ss is None]
        futures = client.map(_sessions_of, unknown, pure=False) if unknown else []
        sessions, skipped, out = session_list(sources, client.gather(futures))
        n = len(sessions)
        pieces = [memory[src.memory].session(s) for src, s in sessions
                  if src.memory is not None]
        scattered = iter(client.scatter(pieces, hash=False) if pieces else [])
        futures = [client.submit(_session_task, si, src, s,
                                 next(scattered) if src.memory is not None else None,
                                 configs, stage_cols, metering, pure=False)
                   for si, (src, s) in enumerate(sessions)]
        rows: dict[int, dict[str, Any]] = {}
        bar = _bar(n * len(configs), progress, "sweep")
        try:
            for fut in distributed.as_completed(futures, loop=client.loop):
                si, session_rows = fut.result()
                for ci, row in enumerate(session_rows):
                    rows[ci * n + si] = row
                if bar is not None:
                    bar.update(len(session_rows))
        finally:
            if bar is not None:
                bar.close()
    finally:
        client.cancel([f for f in futures if not f.done()])
    return rows, n, skipped, out


__all__ = ["local_cluster", "run_dask"]
