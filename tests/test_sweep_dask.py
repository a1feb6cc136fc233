"""The Dask engine of ctxlab.sweep: the same frame as the local engine, on a LocalCluster of
two worker processes started once for the module."""

from __future__ import annotations

import shutil

import pytest

import ctxlab
from ctxlab.errors import ConfigError, LoadError
from ctxlab.loaders.corpus_store import write_corpus
from ctxlab.sweep import equal_results, sweep

from conftest import DATASETS

distributed = pytest.importorskip("distributed", reason="the dask extra is not installed")

# The one third-party warning let through: distributed warns when creating a scheduler's or
# worker's scratch folder takes over a second, which a loaded test machine can reach.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Creating scratch directories is taking a surprisingly long time:UserWarning")

GRID = {"preset": ["neurolink", "neuron"], "threshold": [0.5, 0.8]}


@pytest.fixture(scope="module")
def client():
    """LocalCluster(n_workers=2, threads_per_worker=1, processes=True, no dashboard, logs
    silenced, its HTTP routes on a free port: `ctxlab.sweep_dask.local_cluster`)."""
    from ctxlab.sweep_dask import local_cluster

    with local_cluster(2) as cluster, distributed.Client(cluster, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Two logs (1 + 4 sessions) and their corpus dataset."""
    d = tmp_path_factory.mktemp("small")
    for name in ("coding_session_b", "openai_sessions"):
        shutil.copy(DATASETS / f"{name}.jsonl", d / f"{name}.jsonl")
    write_corpus(d, d.parent / "small_ds")
    return d


@pytest.fixture(scope="module")
def local(small):
    return sweep(small, GRID, workers=1)


def test_dask_gives_the_local_frame_from_files_and_from_a_dataset(client, small, local):
    assert len(local) == 4 * 5
    from_files = sweep(small, GRID, engine="dask", client=client)
    assert equal_results(local, from_files)
    from_dataset = sweep(small.parent / "small_ds", GRID, engine="dask", client=client)
    assert equal_results(local, from_dataset)
    assert from_dataset.dtypes.equals(local.dtypes)
    # not vacuous: configurations differ, and every session ran on the cluster
    assert local.groupby("config")["tokens_sent"].sum().nunique() > 1
    assert (from_dataset["seconds"] > 0).all()
    assert client.status == "running"  # a client passed in is left open


def test_dask_reports_the_records_its_workers_could_not_use(client, tmp_path):
    lines = (DATASETS / "openai_sessions.jsonl").read_text(encoding="utf-8").split("\n")
    lines[3] = "{not json"
    (tmp_path / "bad.jsonl").write_text("\n".join(lines), encoding="utf-8")
    grid = {"preset": ["neuron"]}
    local = sweep(tmp_path, grid, workers=1)
    got = sweep(tmp_path, grid, engine="dask", client=client)
    assert equal_results(local, got) and got.attrs["skipped"] == local.attrs["skipped"]
    assert [r["line"] for r in got.attrs["skipped"]] == [4]


def test_in_memory_transcripts_are_scattered_by_session(client):
    ts = [ctxlab.load(DATASETS / "openai_sessions.jsonl"),
          ctxlab.load(DATASETS / "coding_session_b.jsonl")]
    grid = {"preset": ["neuron"], "threshold": [0.6]}
    got = sweep(ts, grid, engine="dask", client=client)
    assert equal_results(sweep(ts, grid, workers=1), got)
    assert got["session"].tolist() == ts[0].sessions + ts[1].sessions


def test_the_progress_bar_counts_replays(client, small, capsys, monkeypatch):
    from ctxlab import sweep_dask

    bars = []
    real = sweep_dask._bar
    monkeypatch.setattr(sweep_dask, "_bar", lambda *a: bars.append(real(*a)) or bars[-1])
    sweep(small, {"preset": ["neuron"], "threshold": [0.5, 0.7]}, engine="dask",
          client=client, progress=True)
    assert bars[0].total == bars[0].n == 10
    assert "sweep:   0%|          | 0/10" in capsys.readouterr().err


def test_a_failing_task_raises_its_error_and_leaves_the_client_usable(client, small, tmp_path):
    ds = write_corpus(small, tmp_path / "ds")
    (ds.paths[2]).unlink()
    with pytest.raises(LoadError, match="not a readable Parquet file"):
        sweep(ds, {"preset": ["neuron"]}, engine="dask", client=client)
    assert client.submit(sum, [1, 2]).result() == 3


def test_dask_errors_say_what_to_pass(client, small):
    with pytest.raises(ConfigError, match="with client= the client's cluster decides"):
        sweep(small, GRID, engine="dask", client=client, workers=2)
    with pytest.raises(ConfigError, match="client must be a distributed.Client, not str"):
        sweep(small, GRID, engine="dask", client="tcp://127.0.0.1:8786")


def test_without_a_client_a_local_cluster_is_started_and_closed(small, local, monkeypatch):
    """Through the command: ``--engine dask --workers 1``."""
    import pandas as pd

    from ctxlab import sweep_dask
    from ctxlab.cli import main

    started = []
    real = sweep_dask.local_cluster
    monkeypatch.setattr(sweep_dask, "local_cluster",
                        lambda workers=None: started.append(real(workers)) or started[-1])
    out = small.parent / "r.parquet"
    assert main(["sweep", str(small), "--engine", "dask", "--workers", "1", "--preset",
                 "neurolink,neuron", "--grid", "threshold=0.5,0.8", "-o", str(out)]) == 0
    assert len(started) == 1 and len(started[0].workers) == 0
    assert started[0].status.name == "closed"
    pd.testing.assert_frame_equal(pd.read_parquet(out).drop(columns="seconds"),
                                  local.drop(columns="seconds"), check_dtype=False)
