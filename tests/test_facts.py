"""Session facts of a corpus dataset (ctxlab.facts): stored at convert time, handed to the
caches when a session is read back, used only while valid, never changing a result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import ctxlab
from ctxlab import artifacts, datasets, facts
from ctxlab.cli import main
from ctxlab.errors import ConfigError
from ctxlab.loaders.corpus_store import read_manifest, read_session, write_corpus
from ctxlab.sweep import equal_results, sweep
from ctxlab.tokens import base as tokens_base
from ctxlab.tokens import estimator
from ctxlab.tokens.exact import TiktokenEstimator

from conftest import REALDATA

GRID = {"preset": ["ai-agent", "probe", "observation-masking"], "threshold": [0.8, 1.0]}
REAL = ["claude_code/vibecodingtracker/claude_code.jsonl",
        "claude_code/claude-code-viewer/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        "codex_cli/vibecodingtracker/codex.jsonl", "gemini_cli/vibecodingtracker/gemini.jsonl",
        "copilot_cli/vibecodingtracker/copilot.jsonl",
        "mini_swe_agent/astropy__astropy-12907.traj.json"]


def cold() -> None:
    """This process as a fresh sweep worker: no artifacts, counts or offers remembered."""
    import importlib

    from ctxlab import metrics
    sweep_module = importlib.import_module("ctxlab.sweep")
    from ctxlab.tokens import registry

    artifacts.clear_artifact_cache()
    metrics._LAST.clear()
    sweep_module._FILES.clear()
    tokens_base._OFFERS.clear()
    for est in list(registry._INSTANCES.values()):
        est.clear_cache()
        for side in (getattr(est, "a", None), getattr(est, "b", None)):
            if side is not None:
                side.clear_cache()


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """A generated Claude Code session of 2,000 messages and real logs of five formats."""
    d = tmp_path_factory.mktemp("facts") / "logs"
    d.mkdir()
    s = datasets.generate_session("coding", 11, calls=1000, compact_at=None)
    datasets.write_claude_code(s, d / "generated.jsonl")
    for rel in REAL:
        if (REALDATA / rel).is_file():
            shutil.copy(REALDATA / rel, d / rel.replace("/", "__"))
    return d


@pytest.fixture(scope="module")
def dataset(logs) -> Path:
    out = logs.parent / "corpus"
    write_corpus(logs, out)
    return out


@pytest.fixture(scope="module")
def from_logs(logs) -> ctxlab.Transcript:
    cold()
    return sweep(logs, GRID, workers=1)


def _spy(monkeypatch) -> tuple[list, list]:
    """Record every (text, flag) the artifact extractor and every text a tokenizer is
    asked about."""
    extracted: list = []
    counted: list = []
    extract, count = artifacts.artifacts, TiktokenEstimator._count

    def spy_extract(texts, *, user=None):
        flags = [True] * len(texts) if user is None else user.tolist()
        extracted.extend(zip(texts.tolist(), flags))
        return extract(texts, user=user)

    def spy_count(self, texts):
        counted.extend(texts)
        return count(self, texts)

    monkeypatch.setattr(artifacts, "artifacts", spy_extract)
    monkeypatch.setattr(TiktokenEstimator, "_count", spy_count)
    return extracted, counted


def _stored_keys(dataset: Path) -> tuple[set, set]:
    """Every (text, flag) whose artifacts the dataset stores, and every text it counted."""
    keys, texts = set(), set()
    for p in read_manifest(dataset)["partitions"]:
        t = read_session(dataset / p["path"], facts=False)
        import pyarrow as pa
        table = pa.ipc.open_stream((dataset / p["facts"]).read_bytes()).read_all()
        content = t.frame["content"].astype(object).where(t.frame["content"].notna(), "")
        keys |= set(zip(content.tolist(), table.column("user").to_pylist()))
        texts |= set(content.tolist())
    return keys, texts


def test_the_manifest_names_what_the_facts_were_computed_by(dataset):
    m = read_manifest(dataset)
    assert m["ctxlab_corpus"] == 1          # readers of version 1 read it, facts ignored
    assert m["facts"]["version"] == facts.VERSION
    assert m["facts"]["artifacts"] == artifacts.extraction_fingerprint()
    assert sorted(m["facts"]["tokens"]) == ["tiktoken:cl100k_base", "tiktoken:o200k_base"]
    assert m["facts"]["tokens"]["tiktoken:cl100k_base"] == \
        estimator("tiktoken:cl100k_base").fingerprint()
    assert all((dataset / p["facts"]).is_file() for p in m["partitions"])


def test_a_sweep_over_the_dataset_with_facts_equals_one_over_the_logs(dataset, from_logs,
                                                                      monkeypatch):
    keys, texts = _stored_keys(dataset)
    cold()
    extracted, counted = _spy(monkeypatch)
    got = sweep(dataset, GRID, workers=1)
    assert len(got) == len(from_logs) > 6 * len(GRID["preset"])
    assert equal_results(got, from_logs)
    # the facts were used: no stored text extracted or counted again (only texts the
    # replays made, such as a cut tool output, and a flag the replay gives otherwise)
    assert extracted and not keys & set(extracted)
    assert not texts & set(counted)
    assert len(set(counted)) < len(texts) / 20


def test_without_facts_the_same_work_is_done_and_the_same_results_come(logs, from_logs,
                                                                       tmp_path, monkeypatch):
    plain = write_corpus(logs, tmp_path / "plain", facts=False).dataset
    m = read_manifest(plain)
    assert m["facts"] is None and not any("facts" in p for p in m["partitions"])
    assert not list(plain.rglob("facts-*"))
    cold()
    extracted, counted = _spy(monkeypatch)
    got = sweep(plain, GRID, workers=1)
    assert equal_results(got, from_logs)
    assert len(extracted) > 1000 and len(counted) > 1000


def _rewrite_facts(dataset: Path, header_change: dict, poison: bool) -> None:
    """Every facts file of a dataset with its header changed and, with ``poison``, wrong
    facts: no artifact anywhere and one token per text."""
    import pyarrow as pa

    for p in read_manifest(dataset)["partitions"]:
        path = dataset / p["facts"]
        table = pa.ipc.open_stream(path.read_bytes()).read_all()
        header = json.loads(table.schema.metadata[facts.KEY])
        for k, v in header_change.items():
            if k == "tokens":
                header["tokens"] = [dict(e, fingerprint=v) for e in header["tokens"]]
            else:
                header[k] = v
        if poison:
            n = len(table)
            empty = pa.ListArray.from_arrays(
                pa.array(np.zeros(n + 1, np.int32)),
                pa.array([], table.column("artifacts").type.value_type))
            table = table.set_column(table.schema.get_field_index("artifacts"), "artifacts",
                                     empty)
            for i, e in enumerate(header["tokens"]):
                col = table.schema.get_field_index(e["column"])
                table = table.set_column(col, e["column"], pa.array(np.ones(n, np.int32)))
        header["payload"] = facts.payload_digest(table)    # as a writer of such facts
        table = table.replace_schema_metadata({facts.KEY: json.dumps(header).encode()})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        path.write_bytes(sink.getvalue().to_pybytes())


def test_poisoned_facts_with_valid_fingerprints_change_the_results(dataset, from_logs,
                                                                   tmp_path):
    """The control of the next test: wrong facts that are trusted do show."""
    copy = tmp_path / "corpus"
    shutil.copytree(dataset, copy)
    _rewrite_facts(copy, {}, poison=True)
    cold()
    got = sweep(copy, GRID, workers=1)
    assert not equal_results(got, from_logs)
    assert (got["needed"] == 0).all()


@pytest.mark.parametrize("change", [
    {"artifacts": "0" * 32 + "-py3.0", "tokens": "encode_ordinary-v0/cl100k_base/x"},
    {"version": facts.VERSION + 1}, {"texts": "0" * 64}])
def test_stale_or_foreign_facts_are_ignored(dataset, from_logs, tmp_path, change,
                                            monkeypatch):
    copy = tmp_path / "corpus"
    shutil.copytree(dataset, copy)
    _rewrite_facts(copy, change, poison=True)
    cold()
    extracted, counted = _spy(monkeypatch)
    got = sweep(copy, GRID, workers=1)
    assert equal_results(got, from_logs)
    assert len(extracted) > 1000 and len(counted) > 1000


def test_a_changed_extraction_or_tokenizer_makes_the_facts_stale(dataset, monkeypatch):
    from ctxlab.loaders.corpus_store import seed_facts

    p = read_manifest(dataset)["partitions"][0]
    cold()
    t = read_session(dataset / p["path"], facts=False)
    sf = seed_facts(t, dataset / p["path"])
    assert sf.status == "not read"          # offered, read only when a cache misses a text
    fp = estimator("tiktoken:cl100k_base").fingerprint()
    assert sf.artifacts() is not None and sf.counts("tiktoken:cl100k_base", fp) is not None
    assert sf.status == "valid"
    assert sf.counts("tiktoken:cl100k_base", fp + "x") is None
    monkeypatch.setattr(artifacts, "_FINGERPRINT", ["another extraction"])
    assert sf.artifacts() is None
    # an estimator of another fingerprint does not take the counts
    monkeypatch.setattr(TiktokenEstimator, "fingerprint", lambda self: "another encoding")
    est = TiktokenEstimator("cl100k_base")
    assert est.facts_key == "tiktoken:cl100k_base"
    assert not est._take_offers() and est.cache_size == 0


def test_a_damaged_facts_file_is_ignored(dataset, tmp_path):
    from ctxlab.loaders.corpus_store import seed_facts

    copy = tmp_path / "corpus"
    shutil.copytree(dataset, copy)
    p = read_manifest(copy)["partitions"][0]
    (copy / p["facts"]).write_bytes(b"not arrow")
    cold()
    t = read_session(copy / p["path"], facts=False)
    sf = seed_facts(t, copy / p["path"])
    texts = t.frame["content"].reset_index(drop=True)
    rows, ids = artifacts.artifact_ids(texts)
    assert sf.status.startswith("unreadable facts")
    want = artifacts.artifacts(texts)
    assert rows.tolist() == want["row"].tolist()
    assert artifacts.artifact_values(ids).tolist() == want["value"].tolist()


def _facts_of(frame, blob: bytes) -> tuple[str, dict | None, list | None]:
    """What a session's facts file gives: its status, its artifacts per (text, flag) and
    its cl100k counts."""
    sf = facts.SessionFacts(frame, lambda: blob)
    try:        # (the caches take a source that raises as no offer)
        got = sf.artifacts()
        counts = sf.counts("tiktoken:cl100k_base",
                           estimator("tiktoken:cl100k_base").fingerprint())
    except Exception as e:
        return f"raised {type(e).__name__}", None, None
    arts = None
    if got is not None:
        keys, offsets, kinds, values, codes = got
        arts = {k: [(kinds[c], values[c]) for c in codes[offsets[i]:offsets[i + 1]]]
                for i, k in enumerate(keys)}
    return sf.status, arts, counts


def test_a_flipped_bit_never_gives_other_facts(dataset):
    """Arrow IPC holds no checksum: a review flipped every bit of a real facts file and
    82,000 flips read as valid facts with other counts or artifacts (a replay then
    compacted at call 2 instead of later). The header's hash of the values catches them:
    every flip is ignored, unreadable, or gives the same facts."""
    p = read_manifest(dataset)["partitions"][0]
    frame = read_session(dataset / p["path"], facts=False).frame
    blob = (dataset / p["facts"]).read_bytes()
    status, arts, counts = _facts_of(frame, blob)
    assert status == "valid" and arts and counts
    outcomes: dict[str, int] = {}
    for pos in range(0, len(blob), max(1, len(blob) // 1500)):
        for bit in (0, 5):
            flipped = bytearray(blob)
            flipped[pos] ^= 1 << bit
            got = _facts_of(frame, bytes(flipped))
            if got[0] != "valid":
                outcome = "ignored"
            else:
                assert (got[1] is None or got[1] == arts) and \
                    (got[2] is None or got[2] == counts), (pos, bit)
                outcome = "same"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("ignored", 0) > 1000


def test_a_null_or_negative_count_is_no_count(dataset, tmp_path):
    """A null count passed Arrow's validation, went into the shared cache as NaN and
    failed every later count of that text in the process."""
    import pyarrow as pa

    p = read_manifest(dataset)["partitions"][0]
    frame = read_session(dataset / p["path"], facts=False).frame
    table = pa.ipc.open_stream((dataset / p["facts"]).read_bytes()).read_all()
    header = json.loads(table.schema.metadata[facts.KEY])
    column = header["tokens"][0]["column"]
    n = len(table)
    for bad in (pa.array([None] * n, pa.int32()), pa.array(-np.ones(n, np.int32)),
                pa.array(np.ones(n), pa.float64())):
        t = table.set_column(table.schema.get_field_index(column), column, bad)
        with pytest.raises(ValueError):
            facts.payload_digest(t)
        t = t.replace_schema_metadata({facts.KEY: json.dumps(header).encode()})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as w:
            w.write_table(t)
        status, _, counts = _facts_of(frame, sink.getvalue().to_pybytes())
        assert status.startswith("unreadable facts") and counts is None


def test_a_tokenizer_without_a_fingerprint_trusts_no_stored_count(monkeypatch):
    from ctxlab.tokens import exact

    monkeypatch.setattr(exact, "encoding_fingerprint", lambda enc: None)
    est = TiktokenEstimator("cl100k_base")
    assert est.fingerprint() is None        # it was the constant "encode_ordinary-v1/None"
    tokens_base.offer_counts(lambda key, fingerprint: (["some text"], [1]))
    assert not est._take_offers() and est.cache_size == 0
    with pytest.raises(ConfigError):        # asked for by name: said
        facts.storable(["tiktoken:cl100k_base"])


def test_a_dataset_of_an_earlier_ctxlab_without_facts_still_loads(dataset, tmp_path):
    copy = tmp_path / "corpus"
    shutil.copytree(dataset, copy)
    m = read_manifest(copy)
    del m["facts"]
    for p in m["partitions"]:
        (copy / p.pop("facts")).unlink()
    (copy / "_ctxlab_corpus.json").write_text(json.dumps(m), encoding="utf-8")
    c = ctxlab.load_dir(copy)
    assert len(c.transcript(c.paths[0]).frame) == m["partitions"][0]["parts"]
    write_corpus(c.files["source"].iloc[0], copy)      # and is replaced like any dataset


def test_facts_take_a_list_of_tokenizers_and_refuse_cheap_estimators(logs, tmp_path):
    one = sorted(logs.glob("generated*"))[0]
    c = write_corpus(one, tmp_path / "a", facts=["tiktoken:gpt-4"])
    assert list(read_manifest(c.dataset)["facts"]["tokens"]) == ["tiktoken:cl100k_base"]
    c = write_corpus(one, tmp_path / "b", facts=[])
    assert read_manifest(c.dataset)["facts"]["tokens"] == {}
    with pytest.raises(ConfigError, match="not stored"):
        write_corpus(one, tmp_path / "c", facts=["chars:4"])


def test_cli_convert_no_facts(logs, tmp_path, capsys):
    out = tmp_path / "corpus"
    assert main(["convert", str(logs), "-o", str(out), "--no-facts"]) == 0
    assert read_manifest(out)["facts"] is None and not list(out.rglob("facts-*"))


def test_offered_counts_wait_until_an_estimator_misses_a_text(monkeypatch):
    from collections import deque

    monkeypatch.setattr(tokens_base, "_OFFERS", deque(maxlen=tokens_base.OFFERS_KEPT))
    loaded, asked = [], []

    class Words(tokens_base.Estimator):
        facts_key = "words"

        def fingerprint(self):
            loaded.append(1)
            return "v1"

        def _count(self, texts):
            return np.array([len(t.split()) for t in texts])

    def offer(texts, counts):
        def source(key, fingerprint):
            asked.append((key, fingerprint))
            return (texts, counts) if (key, fingerprint) == ("words", "v1") else None
        tokens_base.offer_counts(source)

    offer(["a b"], [7])
    e = Words()
    assert e.count([]).tolist() == [] and not loaded and not asked   # nothing missed
    assert e.count(["a b", "c"]).tolist() == [7, 1] and loaded == [1]
    assert asked == [("words", "v1")]
    for i in range(tokens_base.OFFERS_KEPT + 1):
        offer([f"x{i}"], [i + 100])
    # the oldest offer went: only the last OFFERS_KEPT wait
    assert e.count(["x0", "x1", f"x{tokens_base.OFFERS_KEPT}"]).tolist() == [1, 101, 104]
    assert len(asked) == 1 + tokens_base.OFFERS_KEPT        # each offer asked once


def test_a_partition_file_loaded_alone_offers_its_facts(dataset, monkeypatch):
    p = read_manifest(dataset)["partitions"][0]
    cold()
    t = ctxlab.load(dataset / p["path"])
    extracted, _ = _spy(monkeypatch)
    texts = t.frame["content"].reset_index(drop=True)
    artifacts.artifact_ids(texts, user=artifacts.instruction_rows(t.frame)
                           .reset_index(drop=True))
    assert extracted == []
