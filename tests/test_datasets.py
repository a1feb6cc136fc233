"""ctxlab.datasets: determinism, the committed set, realism of the records, and loading."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import ctxlab
from ctxlab import datasets
from ctxlab.errors import ConfigError

from conftest import DATASETS

NEUROLINK_READ = re.compile(r"(?:read|reading|read_file|readFile|Read file|cat)\s+['\"`]?"
                            r"([^\s'\"`\n]+)", re.I)


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def lines(p: Path) -> list[str]:
    return p.read_text(encoding="utf-8").split("\n")[:-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built")
    datasets.build_default(out)
    return out


@pytest.fixture(scope="module")
def sidecar(built: Path) -> dict[str, Any]:
    return json.loads((built / "facts.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def records(built: Path) -> dict[str, list[dict[str, Any]]]:
    return {n: [json.loads(x) for x in lines(built / datasets.FILES[n])] for n in datasets.FILES}


# ---- determinism and the committed files ---------------------------------------------------
def test_generate_session_is_deterministic():
    a = datasets.generate_session("coding", 3, calls=20, big_outputs=0)
    b = datasets.generate_session("coding", 3, calls=20, big_outputs=0)
    assert a == b
    assert a != datasets.generate_session("coding", 4, calls=20, big_outputs=0)
    assert datasets.generate_session("projects", 3, context_tokens=5000) == \
        datasets.generate_session("projects", 3, context_tokens=5000)


def test_compact_at_below_the_sessions_overhead_is_refused():
    """Below it the generator compacted every few messages and failed its own check."""
    with pytest.raises(ctxlab.ConfigError, match="compact_at must be at least 40,000"):
        datasets.generate_session("coding", 0, calls=40, compact_at=20_000)
    s = datasets.generate_session("coding", 0, calls=40, compact_at=datasets.MIN_COMPACT_AT)
    assert s is not None


def test_build_default_is_byte_reproducible(built: Path, tmp_path: Path):
    files = datasets.build_default(tmp_path)
    assert sorted(p.name for p in files) == sorted([*datasets.FILES.values(), "facts.json"])
    for p in files:
        assert sha(p) == sha(built / p.name), p.name


def test_committed_files_equal_a_fresh_build(built: Path):
    for name in [*datasets.FILES.values(), "facts.json"]:
        committed = DATASETS / name
        assert committed.exists(), f"{committed} missing: run python -m ctxlab.datasets build"
        assert sha(committed) == sha(built / name), (
            f"datasets/{name} is stale: run `python -m ctxlab.datasets build`")


def test_committed_set_stays_small():
    total = sum((DATASETS / n).stat().st_size for n in [*datasets.FILES.values(), "facts.json"])
    assert total < 6_000_000


def test_names_and_paths():
    assert datasets.names() == ["coding_session", "coding_session_b", "openai_sessions",
                                "projects_mode"]
    assert datasets.path("coding_session") == DATASETS / "coding_session.jsonl"
    assert datasets.path("coding_session.jsonl") == datasets.path("coding_session")
    assert datasets.path("facts").name == "facts.json"
    with pytest.raises(ConfigError, match="known: coding_session"):
        datasets.path("nope")


def test_missing_folder_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(datasets, "DATASETS_DIR", tmp_path / "absent")
    with pytest.raises(ctxlab.CtxlabError, match="python -m ctxlab.datasets build"):
        datasets.path("coding_session")


def test_cli_builds(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert datasets.main(["nope"]) == 2
    assert datasets.main(["build", str(tmp_path)]) == 0
    assert (tmp_path / "facts.json").exists() and "bytes" in capsys.readouterr().out


def test_bad_arguments():
    with pytest.raises(ConfigError, match="unknown session kind"):
        datasets.generate_session("chat", 1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="calls must be"):
        datasets.generate_session("coding", 1, calls=2)


# ---- realism of the generated sessions ------------------------------------------------------
def test_coding_session_has_what_the_stages_need():
    s = datasets.generate_session("coding", 5, calls=60, compact_at=None, big_outputs=2)
    responses = [m for m in s.messages if m.kind == "response"]
    assert any(sum(b.type == "tool_use" for b in m.blocks) >= 2 for m in responses)
    reads: dict[str, list[int]] = defaultdict(list)
    edits: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(responses):
        for b in m.blocks:
            if b.type == "tool_use" and b.tool in ("Read", "Edit"):
                (reads if b.tool == "Read" else edits)[b.input["file_path"]].append(i)
    assert max(len(v) for v in reads.values()) >= 3
    assert any(any(r > e for r in reads[p] for e in edits[p]) for p in edits)  # re-read after edit
    results = [b for m in s.messages for b in m.blocks if b.type == "tool_result"]
    big = [b for b in results if b.text.count("\n") > 2000 and len(b.text.encode()) > 51_200]
    assert any("webpack" in b.text for b in big) and any("test session" in b.text for b in big)
    assert any(b.is_error for b in results)
    text = "\n".join(m.text for m in s.messages)
    for needle in ("<|endoftext|>", "导出", "レポート", "iVBORw0KGgo", "Traceback (most recent",
                   "def ", "export async function", "```"):
        assert needle in text, needle
    prose = [b.text for m in responses for b in m.blocks if b.type == "text"]
    assert any(NEUROLINK_READ.search(t) and "/" not in NEUROLINK_READ.search(t).group(1)
               for t in prose)  # prose the seed's file-read regex mistakes for a read


def test_usage_grows_then_drops_at_the_compaction():
    s = datasets.generate_session("coding", 22, calls=40, compact_at=45_000, big_outputs=0)
    usage = datasets.call_usage(s)
    assert all(u.total == u.input_tokens + u.cache_read + u.cache_write for u in usage)
    cut = sum(m.kind == "response" for m in s.messages[:[m.kind for m in s.messages]
                                                       .index("boundary")])
    totals = [u.total for u in usage]
    assert totals[:cut] == sorted(totals[:cut]) and totals[cut] < totals[cut - 1] / 2
    boundary = next(m for m in s.messages if m.kind == "boundary")
    assert boundary.pre_tokens is not None and boundary.pre_tokens >= 45_000
    assert totals[0] == s.overhead_tokens + datasets.tokens(len(s.messages[0].text))


def test_projects_session_carries_the_project_context():
    s = datasets.generate_session("projects", 3, context_tokens=500_000)
    assert s.messages[0].kind == "system"
    assert 495_000 <= datasets.tokens(len(s.messages[0].text)) <= 520_000
    assert all(f.stated_in == 0 and f.needed_in for f in s.facts)


# ---- the record shapes of the committed files -----------------------------------------------
def test_claude_code_records_look_like_the_real_ones(records: dict[str, list[dict[str, Any]]]):
    recs = records["coding_session"]
    seen: set[str] = set()
    by_msg: dict[str, list[dict[str, Any]]] = defaultdict(list)
    tool_line: dict[str, str] = {}
    for r in recs:
        if "uuid" in r:
            assert r["parentUuid"] is None or r["parentUuid"] in seen
            seen.add(r["uuid"])
            assert r["sessionId"] == recs[0]["sessionId"] and r["version"].startswith("2.")
        if r["type"] == "assistant":
            assert len(r["message"]["content"]) == 1 and r["requestId"].startswith("req_")
            by_msg[r["message"]["id"]].append(r)
            block = r["message"]["content"][0]
            if block["type"] == "tool_use":
                tool_line[block["id"]] = r["uuid"]
        if r["type"] == "user" and "toolUseResult" in r:
            (res,) = r["message"]["content"]
            assert r["parentUuid"] == r["sourceToolAssistantUUID"] == tool_line[res["tool_use_id"]]
    for group in by_msg.values():
        usage = [g["message"]["usage"] for g in group]
        assert {(u["input_tokens"], u["cache_read_input_tokens"]) for u in usage} == \
            {(usage[0]["input_tokens"], usage[0]["cache_read_input_tokens"])}
        assert usage[-1]["output_tokens"] == max(u["output_tokens"] for u in usage)
    assert any(sum(g["message"]["content"][0]["type"] == "tool_use" for g in group) >= 2
               for group in by_msg.values())
    (boundary,) = [i for i, r in enumerate(recs) if r.get("subtype") == "compact_boundary"]
    b = recs[boundary]
    assert b["parentUuid"] is None and b["logicalParentUuid"] in seen
    assert b["compactMetadata"]["trigger"] == "auto" and b["compactMetadata"]["preTokens"] > 160_000
    assert recs[boundary + 1]["isCompactSummary"] and recs[boundary + 1]["parentUuid"] == b["uuid"]
    kinds = {r["type"] for r in recs}
    assert {"progress", "file-history-snapshot", "system"} <= kinds
    assert not any(r.get("subtype") == "compact_boundary" for r in records["coding_session_b"])


def test_openai_records(records: dict[str, list[dict[str, Any]]]):
    convs = records["openai_sessions"]
    assert 3 <= len(convs) <= 5 and any(c["id"].endswith("/2") for c in convs)
    for c in convs:
        assert c["messages"][0]["role"] == "system" and c["tools"]
        ids: set[str] = set()
        for m in c["messages"]:
            if m["role"] == "assistant":
                u = m["usage"]
                assert u["prompt_tokens"] >= u["prompt_tokens_details"]["cached_tokens"]
                for call in m.get("tool_calls", []):
                    assert isinstance(json.loads(call["function"]["arguments"]), dict)
                    ids.add(call["id"])
            if m["role"] == "tool":
                assert m["tool_call_id"] in ids
    assert any(len(m.get("tool_calls", [])) >= 2 for c in convs for m in c["messages"])


def test_planted_facts_are_where_the_sidecar_says(built: Path, sidecar: dict[str, Any]):
    for file, entry in sidecar["files"].items():
        text = lines(built / file)
        for s in entry["sessions"]:
            for f in s["facts"]:
                spots = [f["stated"], *f["needed"]]
                assert f["needed"], f["name"]
                for spot in spots:
                    record = json.loads(text[spot["line"] - 1])
                    if entry["format"] == "openai":
                        record = record["messages"][spot["message"]]
                    assert f["key"] in json.dumps(record, ensure_ascii=False), (file, spot)
                if entry["format"] == "claude_code":
                    assert not any(f["key"] in x for x in text[:f["stated"]["line"] - 1])
                    for c in s["compactions"]:
                        summary = text[c["line"]]  # the line after the boundary
                        assert (f["key"] in summary) == bool(f["in_summary"]), f["name"]
    coding = sidecar["files"]["coding_session.jsonl"]["sessions"][0]
    (cut,) = [c["before_call"] for c in coding["compactions"]]
    dropped = [f for f in coding["facts"] if f["in_summary"] is False]
    assert dropped and all(n["call"] >= cut for f in dropped for n in f["needed"])


# ---- loading through ctxlab's own loaders ---------------------------------------------------
@pytest.mark.parametrize("name", sorted(datasets.FILES))
def test_committed_files_load(name: str, sidecar: dict[str, Any]):
    t = ctxlab.load(datasets.path(name))
    assert t.load_report.skipped.empty, t.load_report.skipped
    entry = sidecar["files"][datasets.FILES[name]]
    expected = {k: v for s in entry["sessions"] for k, v in s["calls_by_session"].items()}
    assert t.calls.groupby("session").size().to_dict() == expected
    assert t.meta["format"] == ("openai_messages" if name == "openai_sessions" else "claude_code")
    compactions = [c for s in entry["sessions"] for c in s["compactions"]]
    recorded = t.events[t.events["origin"] == "recorded"]
    if entry["format"] == "claude_code":
        assert list(recorded["pre_tokens"]) == [c["pre_tokens"] for c in compactions]
        assert list(recorded["trigger"]) == ["auto"] * len(compactions)


def test_loaded_usage_matches_the_writer(sidecar: dict[str, Any]):
    s = datasets.generate_session(**datasets.DEFAULT_SET["coding_session"][0])
    t = ctxlab.load(datasets.path("coding_session"))
    usage = datasets.call_usage(s)
    assert list(t.calls["input_total"]) == [u.total for u in usage]
    assert list(t.calls["cache_read"]) == [u.cache_read for u in usage]
    assert list(t.calls["output_tokens"]) == [u.output_tokens for u in usage]
    assert len(t.events) == 1 and sidecar["files"]["coding_session.jsonl"]["sessions"][0][
        "overhead_tokens"] == s.overhead_tokens


def test_files_stop_growing_in_long_sessions():
    from ctxlab._datagen.script import EDIT_GROWTH_CAP
    s = datasets.generate_session("coding", 7, calls=900, compact_at=None, big_outputs=0)
    reads: dict[str, list[int]] = {}
    for m in s.messages:
        for b in m.blocks:
            meta = b.detail if b.type == "tool_result" else None
            f = meta.get("file") if isinstance(meta, dict) else None
            if isinstance(f, dict) and "numLines" in f:
                reads.setdefault(f["filePath"], []).append(int(f["numLines"]))
    grown = {p: max(n) - n[0] for p, n in reads.items() if len(n) > 1}
    assert grown and max(grown.values()) <= EDIT_GROWTH_CAP + 6   # + import lines of features
    assert max(grown.values()) >= EDIT_GROWTH_CAP // 2             # edits did pile up first
