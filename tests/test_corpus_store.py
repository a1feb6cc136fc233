"""Corpus datasets (ctxlab.loaders.corpus_store): written by session, read back exactly,
lazily, one partition at a time; ``ctxlab convert DIR -o corpus/``."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import ctxlab
from ctxlab.cli import main
from ctxlab.errors import ConfigError, LoadError
from ctxlab.loaders import corpus_store, parquet
from ctxlab.loaders.corpus_store import MANIFEST, read_manifest, write_corpus
from ctxlab.overview import sessions_df

from conftest import DATASETS, REALDATA


def assert_same_session(got: ctxlab.Transcript, want: ctxlab.Transcript) -> None:
    for name in ("frame", "calls", "events"):
        pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name), obj=name)
    pd.testing.assert_frame_equal(got.load_report.records, want.load_report.records)
    assert dict(got.meta) == dict(want.meta)


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """A copy of datasets/: four logs (seven sessions) and two files that are not logs."""
    d = tmp_path_factory.mktemp("logs") / "logs"
    shutil.copytree(DATASETS, d)
    return d


@pytest.fixture(scope="module")
def dataset(logs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ds") / "corpus"
    write_corpus(logs, out)
    return out


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_session_reads_back_equal_to_its_log(logs, dataset):
    c = ctxlab.load_dir(dataset)
    assert c.dataset == dataset and len(c) == 7
    assert list(c.files.columns) == list(corpus_store.FILE_COLUMNS)
    assert (c.files["format"] == "parquet").all() and (c.files["status"] == "log").all()
    orig = ctxlab.load_dir(logs)
    for path, session, source in zip(c.files["path"], c.files["session"], c.files["source"]):
        assert Path(path).parent.parent == dataset
        assert_same_session(c.transcript(path), orig.transcript(source).session(session))
    # the whole corpus too: same parts, report and sessions table as the folder of logs
    pd.testing.assert_frame_equal(c.frame, orig.frame)
    pd.testing.assert_frame_equal(c.load_report.records, orig.load_report.records)
    pd.testing.assert_frame_equal(sessions_df(c), sessions_df(orig))
    assert int(c.files["calls"].sum()) == len(orig.calls)


def test_the_manifest_keeps_the_inputs_other_files_and_per_source_reports(logs, dataset):
    m = read_manifest(dataset)
    assert [Path(s["path"]).name for s in m["sources"]] == [
        "coding_session.jsonl", "coding_session_b.jsonl", "openai_sessions.jsonl",
        "projects_mode.jsonl"]
    assert sorted(Path(f["path"]).name for f in m["other_files"]) == ["README.md", "facts.json"]
    assert all(f["status"] == "not-a-log" and f["note"] for f in m["other_files"])
    assert [s["sessions"] for s in m["sources"]] == [1, 1, 4, 1]
    assert len(list((dataset / "_reports").iterdir())) == 4


def test_load_dir_reads_nothing_until_used_then_only_that_partition(dataset, monkeypatch):
    read: list[str] = []
    real = parquet.read_transcript
    monkeypatch.setattr(parquet, "read_transcript",
                        lambda path, **kw: read.append(str(path)) or real(path, **kw))
    c = ctxlab.load_dir(dataset)
    assert read == [] and c._cache == {}
    path = c.files["path"].iloc[3]
    t = c.transcript(path)
    assert read == [path] and t.sessions == [c.files["session"].iloc[3]]
    c.transcript(path)
    assert read == [path]  # kept


def test_a_partition_file_loads_alone_with_its_sources_report(logs, dataset):
    c = ctxlab.load_dir(dataset)
    row = c.files.iloc[4]
    t = ctxlab.load(row["path"])
    assert_same_session(t, ctxlab.load(row["source"]).session(row["session"]))
    with pytest.raises(LoadError, match="use ctxlab.load_dir"):
        ctxlab.load(dataset)
    alone = dataset.parent / "alone.parquet"
    shutil.copy(row["path"], alone)
    with pytest.raises(LoadError, match="its load report .* is missing"):
        ctxlab.load(alone)


def _odd_ids() -> ctxlab.Transcript:
    """openai_sessions with its four session ids renamed to awkward ones."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    names = dict(zip(t.sessions, ["a/b.c", "A/B.C", "x" * 300 + "/..", ".."]))

    def rename(df: pd.DataFrame) -> pd.DataFrame:
        return df.assign(session=df["session"].map(names).astype(df["session"].dtype))
    return replace(t, frame=rename(t.frame), calls=rename(t.calls), events=rename(t.events))


def test_any_session_id_gets_a_safe_unique_partition(tmp_path):
    t = _odd_ids()
    c = write_corpus([t], tmp_path / "odd")
    dirs = [Path(p).parent for p in c.files["path"]]
    assert len({d.name.casefold() for d in dirs}) == 4
    assert all(d.parent == tmp_path / "odd" and len(d.name) <= 150 for d in dirs)
    assert dirs[0].name == "session=a%2Fb%2Ec" and dirs[3].name == "session=%2E%2E"
    assert "~" in dirs[1].name and "~" in dirs[2].name  # case twin and too long: hashed
    for path, s in zip(c.files["path"], c.files["session"]):
        assert_same_session(c.transcript(path), t.session(s))


def test_a_session_id_shared_by_two_logs_keeps_both(tmp_path):
    t = ctxlab.load(DATASETS / "coding_session_b.jsonl")
    other = replace(t, meta={**t.meta, "path": "elsewhere.jsonl"})
    c = write_corpus([t, other], tmp_path / "twice")
    assert c.files["session"].nunique() == 1 and len(c) == 2
    assert c.files["source"].tolist() == [str(DATASETS / "coding_session_b.jsonl"),
                                          "elsewhere.jsonl"]
    assert Path(c.files["path"].iloc[0]).parent == Path(c.files["path"].iloc[1]).parent
    assert dict(c.transcript(c.files["path"].iloc[1]).meta)["path"] == "elsewhere.jsonl"
    assert len(c.load_report.records) == 2 * len(t.load_report.records)


def test_a_session_named_only_by_events_is_kept(tmp_path):
    t = ctxlab.load(DATASETS / "coding_session.jsonl")
    ev = t.events.copy()
    ev.loc[0, "session"] = "only-events"
    c = write_corpus([replace(t, events=ev)], tmp_path / "ev")
    # its event is the log's first: its partition comes first, so the rows keep their order
    assert c.files["session"].tolist() == ["only-events", t.sessions[0]]
    assert c.files[["parts", "calls", "events"]].iloc[0].tolist() == [0, 0, 1]
    pd.testing.assert_frame_equal(c.events, ev)


def test_a_session_named_only_by_calls_keeps_its_place_in_the_rows(tmp_path):
    """Rows read back session by session are in the log's order: a session that only
    calls name sits where its calls were, not after every session with parts."""
    t = ctxlab.load(DATASETS / "openai_sessions.jsonl")
    middle = t.sessions[1]
    calls = t.calls.copy()
    calls.loc[calls["session"] == middle, "session"] = "calls-only"
    assert calls["session"].iloc[-1] != "calls-only"      # its calls are not the last ones
    c = write_corpus([replace(t, calls=calls)], tmp_path / "calls")
    assert c.files["session"].tolist().index("calls-only") < len(c.files) - 1
    pd.testing.assert_frame_equal(c.calls, calls)
    pd.testing.assert_frame_equal(c.frame, t.frame)


def test_a_log_that_gives_no_session_keeps_its_load_report(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(DATASETS / "coding_session_b.jsonl", src / "a.jsonl")
    (src / "b.jsonl").write_text(json.dumps({"type": "summary", "summary": "Old chat",
                                             "leafUuid": "x"}) + "\n")
    orig = ctxlab.load_dir(src)
    assert [len(t.frame) + len(t.calls) for t in orig] == [len(orig.transcript(
        orig.paths[0]).frame) + len(orig.transcript(orig.paths[0]).calls), 0]
    c = write_corpus(src, tmp_path / "corpus")
    pd.testing.assert_frame_equal(c.load_report.records, orig.load_report.records)
    pd.testing.assert_frame_equal(ctxlab.load_dir(tmp_path / "corpus").load_report.records,
                                  orig.load_report.records)


def test_writing_refuses_a_foreign_folder_and_replaces_a_dataset(logs, tmp_path):
    before = _digest(logs)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty and not a corpus dataset"):
        write_corpus(logs, busy)
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    with pytest.raises(ConfigError, match="is a file"):
        write_corpus(logs, busy / "notes.txt")
    out = tmp_path / "ds"
    write_corpus(DATASETS / "coding_session_b.jsonl", out)
    assert len(ctxlab.load_dir(out)) == 1
    write_corpus(logs, out)  # a dataset is replaced, nothing of the old one stays
    assert len(ctxlab.load_dir(out)) == 7
    assert {p.parent.name for p in out.rglob("*.parquet")} - {"_reports"} == {
        Path(p).parent.name for p in ctxlab.load_dir(out).files["path"]}
    (out / "session=x").mkdir()
    (out / "session=x" / "stray.parquet").write_bytes(b"")
    with pytest.raises(ConfigError, match="also holds 1 other file"):
        write_corpus(logs, out)
    assert _digest(logs) == before  # input files untouched throughout
    assert not list(tmp_path.glob(".*"))  # no temporary folder left behind


def test_a_dataset_inside_its_input_folder_is_not_part_of_the_input(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(DATASETS / "openai_sessions.jsonl", logs)
    (logs / "notes.md").write_text("# notes\n")
    for _ in range(2):  # the second time, load_dir(logs) also lists the first dataset
        c = write_corpus(logs, logs / "corpus")
    assert len(c) == 4
    assert [Path(f["path"]).name for f in read_manifest(logs / "corpus")["other_files"]] == [
        "notes.md"]


def test_damaged_manifest_and_options_not_written_are_load_errors(dataset, tmp_path):
    with pytest.raises(LoadError, match="written with sidechains=False; convert the logs "
                                        "again with --sidechains"):
        ctxlab.load_dir(dataset, sidechains=True)
    bad = tmp_path / "bad"
    shutil.copytree(dataset, bad)
    m = json.loads((bad / MANIFEST).read_text())
    (bad / MANIFEST).write_text(json.dumps({**m, "ctxlab_corpus": 99}))
    with pytest.raises(LoadError, match="version 99; this ctxlab reads version 1"):
        ctxlab.load_dir(bad)
    (bad / MANIFEST).write_text("{")
    with pytest.raises(LoadError, match="not a readable corpus manifest"):
        ctxlab.load_dir(bad)
    # writing over it: the advice is one that works (converting again is what failed)
    with pytest.raises(ConfigError, match="cannot be read .*; delete the folder or write "
                                          "elsewhere"):
        write_corpus(DATASETS / "coding_session_b.jsonl", bad)
    with pytest.raises(ConfigError, match="already a corpus dataset"):
        write_corpus(ctxlab.load_dir(dataset), tmp_path / "again")


# -- the command ---------------------------------------------------------------------------


def test_cli_convert_a_folder_to_a_dataset(logs, tmp_path, capsys):
    out = tmp_path / "corpus"
    assert main(["convert", str(logs), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"wrote {out}: 7 sessions from 4 logs (992 parts, 311 calls, "
                           "1 event); 2 other files (not logs)")
    assert len(ctxlab.load_dir(out)) == 7
    one = tmp_path / "one"
    assert main(["convert", str(logs / "openai_sessions.jsonl"), "-o", f"{one}/"]) == 0
    assert ctxlab.load_dir(one).files["session"].tolist() == \
        ctxlab.load(logs / "openai_sessions.jsonl").sessions


@pytest.mark.parametrize("args, words", [
    (["-o", "{tmp}/x.parquet"], "give -o a folder name, and no --format"),
    (["-o", "{tmp}/c", "--format", "claude_code"], "give -o a folder name, and no --format"),
    (["-o", "{logs}"], "never writes over its input"),
    (["-o", "{tmp}/other"], "is not empty and not a corpus dataset")])
def test_cli_convert_errors_are_one_line(logs, tmp_path, capsys, args, words):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("not a dataset", encoding="utf-8")
    argv = ["convert", str(logs)] + [a.format(tmp=tmp_path, logs=logs) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlab: error: ") and words in err and err.count("\n") == 1


# -- the real logs -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.realdata
def test_real_logs_round_trip_session_by_session(tmp_path):
    if not REALDATA.is_dir():
        pytest.skip(f"real transcripts not available: {REALDATA} is absent")
    c = write_corpus(REALDATA, tmp_path / "real")
    orig = ctxlab.load_dir(REALDATA)
    assert c.files["source"].unique().tolist() == [str(p) for p in orig.paths]
    for source, files in c.files.groupby("source", sort=False):
        t = orig.transcript(source)
        named = set(t.frame["session"]) | set(t.calls["session"])
        got = [c.transcript(p) for p in files["path"]]
        # a session that only events name (no parts, no calls) keeps its events
        only_events = [g for g, s in zip(got, files["session"]) if s not in named]
        assert all(len(g.frame) == len(g.calls) == 0 < len(g.events) for g in only_events)
        got = [g for g, s in zip(got, files["session"]) if s in named]
        want = [t.session(s) for s in files["session"] if s in named]
        # every session equal to t.session(id): compared in one concatenation per source
        for name in ("frame", "calls", "events"):
            pd.testing.assert_frame_equal(
                pd.concat([getattr(g, name) for g in got], ignore_index=True),
                pd.concat([getattr(w, name) for w in want], ignore_index=True), obj=name)
        assert [len(g.frame) for g in got] == [len(w.frame) for w in want]
        assert [len(g.calls) for g in got] == [len(w.calls) for w in want]
        assert all(dict(g.meta) == dict(t.meta) for g in got)
        # one report per source, read once and shared by its sessions
        pd.testing.assert_frame_equal(got[0].load_report.records, t.load_report.records)
        assert all(g.load_report is got[0].load_report for g in got)
        assert int(files["events"].sum()) == len(t.events)
        # and every session read back, in the dataset's order, gives the log's rows
        every = [c.transcript(p) for p in files["path"]]
        for name in ("frame", "calls", "events"):
            pd.testing.assert_frame_equal(
                pd.concat([getattr(g, name) for g in every], ignore_index=True),
                getattr(t, name), obj=f"{source} {name}")
    pd.testing.assert_frame_equal(c.load_report.records, orig.load_report.records)


def test_a_log_that_cannot_be_read_is_listed_and_the_others_are_stored(logs, tmp_path,
                                                                       capsys):
    """Outside strict mode one unreadable log does not stop a folder's conversion: it is
    listed in the manifest with its reason and named on stderr; --strict stops at it."""
    import shutil

    src = tmp_path / "logs"
    shutil.copytree(logs, src)
    bad = src / "broken.traj.json"
    bad.write_text('{"trajectory": [', encoding="utf-8")
    out = tmp_path / "corpus"
    assert main(["convert", str(src), "-o", f"{out}/"]) == 0
    cap = capsys.readouterr()
    assert "1 log that could not be read" in cap.out
    assert "broken.traj.json" in cap.err and "malformed JSON" in cap.err
    assert main(["convert", str(logs), "-o", f"{tmp_path}/clean/"]) == 0
    assert ctxlab.load_dir(out).files["session"].tolist() == \
        ctxlab.load_dir(tmp_path / "clean").files["session"].tolist()
    assert main(["convert", str(src), "-o", f"{tmp_path}/strict/", "--strict"]) == 2
