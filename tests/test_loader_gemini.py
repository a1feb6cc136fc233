"""Gemini CLI loader: the real JSONL and legacy JSON recordings, hand-made fixtures
(re-written messages, rewinds, history replacement) and corruption."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import gemini
from conftest import realdata_path
from corrupt_strategies import (corrupt, corruptions, expected_wheres, orphan_entries,
                                record_wheres)
from golden import check_golden

JSONL = "gemini_cli/vibecodingtracker/gemini.jsonl"
LEGACY = "gemini_cli/vibecodingtracker/test_conversation_gemini.json"
# tokens.input / tokens.cached of the last copy of each gemini message, checked by hand
JSONL_INPUT = [13906, 29082, 38324, 40914, 40122, 40238]
JSONL_CACHED = [0, 8156, 0, 32637, 8158, 0]
LEGACY_INPUT = [11894, 20960, 43494]


def _tokens(inp: int, out: int, cached: int = 0, thoughts: int = 0) -> dict[str, int]:
    return {"input": inp, "output": out, "cached": cached, "thoughts": thoughts, "tool": 0,
            "total": inp + out + thoughts}


def _call(cid: str, name: str, args: dict[str, Any], output: str) -> dict[str, Any]:
    return {"id": cid, "name": name, "args": args, "status": "success",
            "resultDisplay": "shown", "displayName": name.title(),
            "result": [{"functionResponse": {"id": cid, "name": name,
                                             "response": {"output": output}}}]}


G1 = {"id": "g1", "timestamp": "2026-01-01T00:00:02Z", "type": "gemini", "content": "",
      "model": "gemini-3-flash", "tokens": _tokens(1000, 20, 0, 30),
      "thoughts": [{"subject": "Plan", "description": "read it", "timestamp": "x"}]}
G1_DONE = {**G1, "toolCalls": [_call("t1", "read_file", {"file_path": "a.py"}, "print(1)")]}


def fixture_records() -> list[dict[str, Any]]:
    return [
        {"sessionId": "gs-1", "projectHash": "ph", "startTime": "2026-01-01T00:00:00Z",
         "lastUpdated": "2026-01-01T00:00:00Z", "kind": "main"},                            # 1
        {"id": "i0", "timestamp": "2026-01-01T00:00:00Z", "type": "info", "content": "hi"},  # 2
        {"id": "u1", "timestamp": "2026-01-01T00:00:01Z", "type": "user",
         "content": [{"text": "expanded /init prompt"}],
         "displayContent": [{"text": "/init"}]},                                            # 3
        G1,                                                                                 # 4
        {"$set": {"lastUpdated": "2026-01-01T00:00:03Z"}},                                  # 5
        G1_DONE,                                                                            # 6
        {"id": "g2", "timestamp": "2026-01-01T00:00:04Z", "type": "gemini",
         "content": "Done.", "model": "gemini-3-flash",
         "tokens": _tokens(1400, 10, 800)},                                                 # 7
        {"id": "u2", "timestamp": "2026-01-01T00:00:05Z", "type": "user",
         "content": [{"text": "System: Please continue."}]},                                # 8
        {"id": "g3", "timestamp": "2026-01-01T00:00:06Z", "type": "gemini",
         "content": "Really done.", "tokens": {**_tokens(0, 0), "total": 0}},               # 9
        {"id": "u3", "timestamp": "2026-01-01T00:00:07Z", "type": "user", "content": "thanks"},
        {"id": "e1", "timestamp": "2026-01-01T00:00:08Z", "type": "error", "content": "boom"},
    ]


def write(tmp_path: Path, records: list[Any], name: str = "session.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return p


# ---- real files ---------------------------------------------------------------------------
@pytest.mark.parametrize("rel,name", [(JSONL, "vibecodingtracker_jsonl"),
                                      (LEGACY, "vibecodingtracker_legacy")])
def test_golden(rel: str, name: str) -> None:
    t = ctxlab.load(realdata_path(rel))
    assert t.meta["format"] == "gemini"
    check_golden(f"gemini__{name}", t)


def test_real_jsonl_calls() -> None:
    path = realdata_path(JSONL)
    t = ctxlab.load(path)
    c = t.calls
    assert c["input_total"].tolist() == JSONL_INPUT
    assert c["cache_read"].tolist() == JSONL_CACHED
    assert (c["input_tokens"] == c["input_total"] - c["cache_read"]).all()
    assert c["output_tokens"].tolist() == [185, 89, 1172, 351, 89, 266]
    assert c["reasoning_tokens"].tolist() == [306, 642, 232, 161, 348, 452]
    assert c["model"].tolist() == ["gemini-3-flash-preview"] * 5 + ["gemini-3.1-pro-preview"]
    assert c["call_id"].iloc[0] == "52e62e67-5d6b-4a2c-b12d-11b87fe3e4a4"
    # the input of call k ends right before its first output part
    f = t.frame
    first_out = f[f["call"].notna()].groupby("call")["pos"].min()
    assert (c.set_index("call")["input_end_pos"] == first_out).all()


def test_real_jsonl_parts_and_report() -> None:
    path = realdata_path(JSONL)
    t = ctxlab.load(path)
    f = t.frame
    calls, results = f[f["kind"] == "tool_call"], f[f["kind"] == "tool_result"]
    assert len(calls) == len(results) == 12
    assert (results["role"] == "user").all() and results["call"].isna().all()
    assert calls["tool_call_id"].tolist() == results["tool_call_id"].tolist()
    assert calls["file_path"].tolist() == results["file_path"].tolist()
    assert "README.md" in set(calls["file_path"].dropna())
    # the /init prompt and the later request are turns; "System: Please continue." is not
    users = f[(f["role"] == "user") & (f["kind"] == "text")]
    assert users["turn"].tolist() == [1, 1, 2]
    assert users["content"].iloc[1] == "System: Please continue."
    assert json.loads(users["meta"].iloc[0])["displayContent"] == [{"text": "/init"}]
    rep = t.load_report.records
    assert sorted(rep["where"]) == sorted(expected_wheres(path.read_bytes(), jsonl=True))
    sup = rep[rep["reason"].fillna("").str.startswith("superseded")]
    assert sup["line"].tolist() == [6, 9, 12, 15, 24]
    assert sup["reason"].iloc[0] == ("superseded by a later copy of message "
                                     "52e62e67-5d6b-4a2c-b12d-11b87fe3e4a4 at line 8")
    assert rep.loc[rep["record"] == "info", "status"].tolist() == ["ignored", "ignored"]
    assert (rep["status"] != "skipped").all()


def test_real_legacy_calls() -> None:
    path = realdata_path(LEGACY)
    t = ctxlab.load(path)
    c = t.calls
    assert c["input_total"].tolist() == LEGACY_INPUT
    assert c["cache_read"].tolist() == [7900, 11834, 20092]
    assert c["output_tokens"].tolist() == [68, 8960, 297]
    assert c["reasoning_tokens"].tolist() == [344, 10849, 423]
    f = t.frame
    assert (f["kind"] == "thinking").sum() == 39
    assert (f["kind"] == "tool_call").sum() == (f["kind"] == "tool_result").sum() == 7
    assert t.load_report.records["where"].tolist() == [f"messages[{i}]" for i in range(4)]
    assert t.meta["session_id"] == "8a20078e-2d5e-4f81-a640-9b879bbb7e6d"


# ---- hand-made fixtures -------------------------------------------------------------------
def test_fixture(tmp_path: Path) -> None:
    t = ctxlab.load(write(tmp_path, fixture_records()))
    f = t.frame
    assert f["kind"].tolist() == ["text", "thinking", "tool_call", "tool_result", "text", "text",
                                  "text", "text"]
    assert f["role"].tolist() == ["user", "assistant", "assistant", "user", "assistant", "user",
                                  "assistant", "user"]
    assert f["turn"].tolist() == [1, 1, 1, 1, 1, 1, 1, 2]
    assert f["content"].iloc[1] == "**Plan**\n\nread it"
    assert f["content"].iloc[2] == 'read_file({"file_path": "a.py"})'
    assert f["content"].iloc[3] == '{"output": "print(1)"}'
    assert f.loc[3, ["tool_name", "tool_call_id", "file_path"]].tolist() == \
        ["read_file", "t1", "a.py"]
    assert f["call"].tolist()[1:7] == [0, 0, pd.NA, 1, pd.NA, 2]
    c = t.calls
    assert c["input_total"].tolist()[:2] == [1000, 1400]
    assert c["input_tokens"].tolist()[:2] == [1000, 600]
    assert c["reasoning_tokens"].tolist()[0] == 30
    assert c.loc[2, ["input_total", "output_tokens"]].isna().all()  # total == 0: unknown
    assert c["input_end_pos"].tolist() == [1.0, 4.0, 6.0]
    # Gemini CLI keeps thoughts out of its history: call 0's are its output, not call 1's input
    from ctxlab.visibility import call_input
    assert "**Plan**\n\nread it" not in call_input(t, 1)["content"].tolist()
    ev = t.events
    assert ev["origin"].tolist() == ["not_resent"] and f.loc[1, "hidden_by"] == 0
    assert float(ev["pos"].iloc[0]) < c["input_end_pos"].iloc[1]
    rep = t.load_report.records.set_index("line")
    assert rep.loc[4, "reason"] == "superseded by a later copy of message g1 at line 6"
    assert rep.loc[6, "parts"] == 3
    assert rep.loc[[2, 11], "status"].tolist() == ["ignored", "ignored"]
    assert t.meta["lastUpdated"] == "2026-01-01T00:00:03Z"


def test_rewind_and_replace(tmp_path: Path) -> None:
    recs = fixture_records()[:7] + [
        {"$rewindTo": "g2"},                                                                 # 8
        {"id": "u9", "timestamp": "2026-01-01T00:01:00Z", "type": "user", "content": "redo"},
        {"$set": {"messages": [{"id": "s", "type": "user", "content": "summary of it all"}]}},
        {"id": "g9", "type": "gemini", "content": "ok", "tokens": _tokens(50, 1)},          # 11
    ]
    t = ctxlab.load(write(tmp_path, recs))
    ev = t.events
    assert ev["origin"].tolist() == ["not_resent", "rewind", "recorded"]
    assert ev["trigger"].tolist() == ["history", "rewind", "replace"]
    f = t.frame.set_index("part")
    assert f.loc[1, "hidden_by"] == 0            # g1's thoughts: never sent again
    assert f.loc[4, "hidden_by"] == 1            # g2 "Done." rewound
    assert (f.loc[[0, 2, 3, 5], "hidden_by"] == 2).all()
    assert f.loc[6, ["content", "event"]].tolist() == ["summary of it all", 2]
    assert t.effective()["content"].tolist() == ["summary of it all", "ok"]
    assert t.calls["input_end_pos"].tolist()[-1] == 7.0
    # undoing recorded compactions keeps the user's rewind
    assert "Done." not in t.rewind_recorded().effective()["content"].tolist()


def test_legacy_fixture(tmp_path: Path) -> None:
    doc = {"sessionId": "old", "projectHash": "p", "startTime": "t", "lastUpdated": "t",
           "messages": fixture_records()[2:4] + [G1_DONE]}
    p = tmp_path / "conv.json"
    p.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    t = ctxlab.load(p)
    assert t.meta["format"] == "gemini" and t.sessions == ["old"]
    rep = t.load_report.records
    assert rep["where"].tolist() == ["messages[0]", "messages[1]", "messages[2]"]
    assert rep["reason"].iloc[1] == "superseded by a later copy of message g1 at messages[2]"
    assert len(t.calls) == 1 and len(t.frame) == 4


def test_sniff(tmp_path: Path) -> None:
    assert ctxlab.loaders.detect(write(tmp_path, fixture_records())).name == "gemini"
    assert not gemini.sniff(tmp_path / "x.jsonl", '{"sessionId":"s","type":"user"}')


def test_strict_names_file_and_line(tmp_path: Path) -> None:
    recs: list[Any] = fixture_records()
    recs[6] = {"id": "g2", "type": "gemini", "toolCalls": [{"id": "t"}]}
    p = write(tmp_path, recs)
    with pytest.raises(LoadError, match=rf"{p.name}:7\b.*unexpected shape"):
        ctxlab.load(p, strict=True)
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps({"sessionId": "s", "projectHash": "p", "messages": []})[:-5])
    with pytest.raises(LoadError, match=r"cut\.json:1"):
        ctxlab.load(cut)


@settings(max_examples=40, deadline=None)
@given(cs=st.lists(corruptions, min_size=1, max_size=3))
def test_corruption_is_reported_or_raises(cs: list[Any]) -> None:
    data = ("\n".join(json.dumps(r) for r in fixture_records()) + "\n").encode()
    for c in cs:
        data = corrupt(data, c)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "session.jsonl"
        p.write_bytes(data)
        try:
            t = ctxlab.load(p, format="gemini")
        except LoadError:
            return
        # (an entry for a piece of a line, a result whose call id was garbled, beside it)
        assert record_wheres(t) == sorted(expected_wheres(data, jsonl=True))
        t.validate()


def test_tool_use_prompt_tokens_count_as_input(tmp_path: Path) -> None:
    recs = fixture_records()
    k = recs.index(G1_DONE)                     # the copy of g1 that wins
    g = recs[k] = {**G1_DONE, "tokens": {**G1_DONE["tokens"], "tool": 250,
                                         "total": G1_DONE["tokens"]["total"] + 250}}
    c = ctxlab.load(write(tmp_path, recs)).calls
    assert c["input_total"].iloc[0] == g["tokens"]["input"] + 250
    assert c["input_tokens"].iloc[0] == g["tokens"]["input"] + 250 - g["tokens"]["cached"]


def test_thoughts_in_a_rewritten_history_are_never_input(tmp_path: Path) -> None:
    """$set.messages re-inserts messages with their thoughts: those are hidden at once,
    as the CLI never sends thoughts back, so no later call sees them."""
    from ctxlab.visibility import call_input

    g9 = {"id": "g9", "type": "gemini", "content": "ok", "tokens": _tokens(50, 1)}
    recs = fixture_records()[:7] + [
        {"$set": {"messages": [fixture_records()[2], G1_DONE]}},
        {"id": "u9", "type": "user", "content": "again"}, g9]
    t = ctxlab.load(write(tmp_path, recs))
    last = call_input(t, int(t.calls["call"].max()))
    assert "thinking" not in last["kind"].tolist()
    assert "thinking" not in t.effective()["kind"].tolist()
    assert (t.frame["kind"] == "thinking").sum() == 2          # both kept, both hidden
    # undoing every compaction keeps the log's own history edits
    back = t.rewind()
    assert "thinking" not in back.effective()["kind"].tolist()
    assert set(back.events["origin"]) == {"not_resent"}


def test_a_tool_call_without_a_name_is_left_out_alone() -> None:
    """One tool call of a real message lost its name: that call (and its result) is
    reported with where it is; the message's usage, thoughts, other calls and results
    stay."""
    path = realdata_path(JSONL)
    lines = path.read_text(encoding="utf-8").split("\n")
    k = next(i for i, x in enumerate(lines)
             if x.strip() and len(json.loads(x).get("toolCalls") or []) > 1)
    rec = json.loads(lines[k])
    n_tools = len(rec["toolCalls"])
    del rec["toolCalls"][1]["name"]
    lines[k] = json.dumps(rec)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "gemini.jsonl"
        p.write_text("\n".join(lines), encoding="utf-8")
        t, whole = ctxlab.load(p), ctxlab.load(path)
    assert t.calls["input_total"].tolist() == whole.calls["input_total"].tolist()
    part_of = t.frame[t.frame["source"].str.endswith(f":{k + 1}")]
    whole_of = whole.frame[whole.frame["source"].str.endswith(f":{k + 1}")]
    assert len(part_of) == len(whole_of) - 2 and n_tools > 1
    sk = t.load_report.skipped
    assert sk[["line", "where"]].values.tolist() == [[k + 1, f"line {k + 1} toolCalls[1]"]]
    assert "without a name" in sk["reason"].iloc[0]


def test_a_single_part_or_a_text_is_a_list_of_one(tmp_path: Path) -> None:
    """gemini-cli's PartListUnion: a result or content given as one Part or a text is
    read as a list of one (it became a part per key or per character)."""
    g = {"id": "g1", "type": "gemini", "content": "", "tokens": _tokens(100, 5),
         "toolCalls": [{**_call("c1", "read_file", {"file_path": "a.py"}, "x"),
                        "result": {"functionResponse": {"id": "c1", "name": "read_file",
                                                        "response": {"output": "x = 1"}}}},
                       {**_call("c2", "run", {"command": "ls"}, ""), "result": "a.py b.py"}]}
    recs = [{"sessionId": "s", "projectHash": "h"},
            {"id": "u1", "type": "user", "content": {"text": "please use uv run"}}, g]
    t = ctxlab.load(write(tmp_path, recs))
    f = t.frame
    assert f[["kind", "content"]].values.tolist()[0] == ["text", "please use uv run"]
    res = f[f["tool_call_id"].isin(["c1", "c2"]) & (f["role"] == "user")]
    assert res["content"].tolist() == ['{"output": "x = 1"}', "a.py b.py"]
    assert len(t.load_report.skipped) == 0


def test_usage_without_a_total_is_still_read(tmp_path: Path) -> None:
    """Only a total of 0 means unknown: without the key, input/cached/output were all
    thrown away."""
    src = realdata_path(JSONL)
    lines = src.read_text(encoding="utf-8").split("\n")
    for k in [i for i, line in enumerate(lines) if '"total":29813' in line]:  # every copy
        rec = json.loads(lines[k])
        del rec["tokens"]["total"]
        lines[k] = json.dumps(rec)
    p = tmp_path / "gemini.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    c = ctxlab.load(p).calls
    assert c["input_total"].tolist() == JSONL_INPUT and c["cache_read"].tolist() == JSONL_CACHED
    assert gemini._usage({"total": 0, "input": 5}) == {}
    assert gemini._usage({"input": 0, "output": 0}) == {}


@pytest.mark.parametrize("drop", ["first", "second"])
def test_a_copy_written_without_its_id_is_still_one_message(tmp_path: Path, drop: str) -> None:
    """Gemini CLI writes a message twice under one id (then with its toolCalls). A copy
    without the id is known by its type and timestamp: still one call, the later copy's
    parts, the earlier copy reported as superseded. A message of its own (a timestamp no
    other has) stays one."""
    src = realdata_path("gemini_cli/vibecodingtracker/gemini.jsonl")
    lines = src.read_text(encoding="utf-8").split("\n")
    whole = ctxlab.load(src)
    recs = {i: json.loads(x) for i, x in enumerate(lines) if x.strip()}
    ids = [r.get("id") for r in recs.values()]
    i, j = [k for k, r in recs.items() if r.get("type") == "gemini"
            and ids.count(r["id"]) == 2][:2]
    at = i if drop == "first" else j
    lines[at] = json.dumps({k: v for k, v in recs[at].items() if k != "id"})
    p = tmp_path / "gemini.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    assert len(t.calls) == len(whole.calls)
    assert t.frame["content"].tolist() == whole.frame["content"].tolist()
    rep = t.load_report.records.set_index("line")
    assert rep.loc[i + 1, "status"] == "ignored" and "superseded" in rep.loc[i + 1, "reason"]
    single = next(k for k, r in recs.items() if r.get("type") == "gemini"
                  and ids.count(r["id"]) == 1)
    lines = src.read_text(encoding="utf-8").split("\n")
    lines[single] = json.dumps({k: v for k, v in recs[single].items() if k != "id"})
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    assert len(t.calls) == len(whole.calls)
    assert t.frame["content"].tolist() == whole.frame["content"].tolist()


def test_messages_without_ids_at_one_timestamp_stay_apart(tmp_path: Path) -> None:
    """Four id-less messages written at one millisecond are four messages: only a copy of
    a message with an id (same type, time and content, or none yet) is one with it."""
    ts = "2026-04-23T12:53:11.257Z"
    recs = [{"sessionId": "s", "projectHash": "h", "startTime": ts, "lastUpdated": ts,
             "kind": "main"},
            {"timestamp": ts, "type": "user", "content": "first question"},
            {"timestamp": ts, "type": "gemini", "content": "first answer",
             "tokens": {"input": 10, "output": 2, "total": 12}},
            {"timestamp": ts, "type": "user", "content": "second question"},
            {"id": "g2", "timestamp": ts, "type": "gemini", "content": "second answer",
             "tokens": {"input": 20, "output": 2, "total": 22}}]
    p = tmp_path / "g.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in recs), encoding="utf-8")
    t = ctxlab.load(p)
    assert t.frame["content"].tolist() == ["first question", "first answer",
                                           "second question", "second answer"]
    assert len(t.calls) == 2


def test_a_message_whose_type_is_no_string_is_reported(tmp_path: Path) -> None:
    src = realdata_path("gemini_cli/vibecodingtracker/gemini.jsonl")
    lines = src.read_text(encoding="utf-8").split("\n")
    lines.insert(2, json.dumps({"type": ["user"], "timestamp": "2026-04-23T12:53:03.000Z"}))
    p = tmp_path / "gemini.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    rep = t.load_report.records.set_index("line")
    assert rep.loc[3, "status"] == "skipped"


def test_a_function_response_without_its_call_is_kept_and_reported(tmp_path: Path) -> None:
    """A user message answering a call id no earlier gemini message made, and a tool call
    whose result names another id: each result is kept, unlinked, and reported."""
    recs = fixture_records()
    recs.insert(3, {"id": "u9", "timestamp": "2026-01-01T00:00:01Z", "type": "user",
                    "content": [{"functionResponse": {"id": "x_gone", "name": "read_file",
                                                      "response": {"output": "old"}}}]})
    k = recs.index(G1_DONE)
    other = _call("t1", "read_file", {"file_path": "a.py"}, "print(1)")
    other["result"][0]["functionResponse"]["id"] = "t1_other"
    recs[k] = {**G1_DONE, "toolCalls": [other]}
    p = write(tmp_path, recs)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(4, "line 4 tool_result x_gone"),
                                 (7, "line 7 tool_result t1_other")]
    f = t.frame
    assert f.loc[f["kind"] == "tool_result", "tool_call_id"].tolist() == ["x_gone", "t1_other"]
    with pytest.raises(LoadError, match=rf"{p}:4 .*call id 'x_gone'"):
        ctxlab.load(p, strict=True)
