"""Inspect AI eval-log loader: the real browser log, .eval zips, a fixture, corruption."""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxlab
import ctxlab.loaders
from ctxlab.errors import LoadError
from ctxlab.loaders import inspect_ai
from ctxlab.schema import Transcript
from conftest import realdata_path
from corrupt_strategies import orphan_entries
from golden import check_golden

BROWSER = "inspect_ai/2025-05-12T20-27-36-04-00_browser.json"


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": "attachment://d1",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}


def _model(inp: list[dict[str, Any]], out: dict[str, Any], tools: list[str],
           usage: dict[str, int]) -> dict[str, Any]:
    return {"event": "model", "model": "openai/test", "timestamp": "2025-01-01T00:00:00+00:00",
            "input": inp, "tools": [_tool(t) for t in tools], "tool_choice": "auto",
            "output": {"model": "test-1", "choices": [{"message": out}], "usage": usage}}


def fixture_log() -> dict[str, Any]:
    """One sample: user -> tool call -> tool result -> answer; the second call adds a tool."""
    user = {"id": "m0", "role": "user", "source": "input", "content": "attachment://a1"}
    a1 = {"id": "m1", "role": "assistant", "content": "",
          "tool_calls": [{"id": "c1", "function": "read", "arguments": {"path": "x.py"}}]}
    tool = {"id": "m2", "role": "tool", "tool_call_id": "c1", "function": "read",
            "content": [{"type": "text", "text": "print(1)"}]}
    a2 = {"id": "m3", "role": "assistant", "source": "generate",
          "content": [{"type": "reasoning", "reasoning": "short", "signature": "sig"},
                      {"type": "text", "text": "It prints 1."}]}
    return {
        "version": 2, "status": "success",
        "eval": {"eval_id": "E", "task": "t", "task_id": "T", "model": "openai/test",
                 "packages": {"inspect_ai": "0.3.x"}},
        "stats": {"model_usage": {"openai/test": {"input_tokens": 300, "output_tokens": 30}}},
        "samples": [{
            "id": "s1", "epoch": 2, "messages": [user, a1, tool, a2],
            "attachments": {"a1": "What does x.py print?", "d1": "Read a file."},
            "events": [
                {"event": "sample_init", "sample": {"input": "attachment://a1"}},
                _model([user], a1, ["read"], {"input_tokens": 100, "output_tokens": 10,
                                              "total_tokens": 110}),
                {"event": "tool", "id": "c1", "function": "read", "result": "print(1)"},
                _model([user, a1, tool], a2, ["read", "write"],
                       {"input_tokens": 200, "output_tokens": 20, "total_tokens": 220,
                        "input_tokens_cache_read": 64}),
                {"event": "score", "score": {"value": 1}},
            ]}],
        "reductions": [{"scorer": "s", "samples": []}],
    }


def write_json(tmp_path: Path, log: Any, name: str = "log.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(log), encoding="utf-8")
    return p


def write_eval(tmp_path: Path, log: dict[str, Any], name: str = "log.eval") -> Path:
    """The .eval layout: header.json (log without samples), one file per sample."""
    p = tmp_path / name
    header = {k: v for k, v in log.items() if k != "samples"}
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("header.json", json.dumps(header))
        for s in log["samples"]:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        z.writestr("summaries.json", json.dumps([{"id": s["id"], "epoch": s["epoch"]}
                                                 for s in log["samples"]]))
        z.writestr("reductions.json", json.dumps(log.get("reductions") or []))
    return p


def expected_wheres(log: dict[str, Any]) -> list[str]:
    out = [f"reductions[{i}]" for i in range(len(log.get("reductions") or []))]
    for i, s in enumerate(log["samples"]):
        out.append(f"samples[{i}]")
        out += [f"samples[{i}].messages[{j}]" for j in range(len(s["messages"]))]
        out += [f"samples[{i}].events[{j}]" for j in range(len(s["events"]))]
    return sorted(out)


def input_message_counts(t: Transcript) -> list[int]:
    """Messages (excluding tool schemas) positioned before each call's input_end_pos."""
    f = t.frame[t.frame["kind"] != "tool_schema"]
    return [int(f[(f["session"] == c.session) & (f["pos"] < c.input_end_pos)]["msg"].nunique())
            for c in t.calls.itertuples()]


def same_transcript(a: Transcript, b: Transcript) -> None:
    pd.testing.assert_frame_equal(a.frame.drop(columns="source"), b.frame.drop(columns="source"))
    pd.testing.assert_frame_equal(a.calls.drop(columns="source"), b.calls.drop(columns="source"))


# ---- the real log -----------------------------------------------------------------------
@pytest.mark.realdata
def test_golden() -> None:
    check_golden("inspect_ai__browser", ctxlab.load(realdata_path(BROWSER)))


@pytest.mark.realdata
def test_browser_facts() -> None:
    path = realdata_path(BROWSER)
    t = ctxlab.load(path)
    log = json.loads(path.read_text())
    sample = log["samples"][0]
    models = [e for e in sample["events"] if e["event"] == "model"]
    assert t.sessions == ["1:1"] and len(t.calls) == 5 == len(models)
    c = t.calls
    assert c["input_total"].tolist() == [1124, 1568, 2732, 3896, 5915]
    assert c["cache_read"].tolist() == [0, 1024, 1536, 2688, 3840]
    assert c["output_tokens"].tolist() == [23, 17, 17, 17, 207]
    # inclusive semantics: Inspect's input_tokens is OpenAI's prompt_tokens
    assert c["input_total"].tolist() == [e["call"]["response"]["usage"]["prompt_tokens"]
                                         for e in models]
    assert (c["input_tokens"] + c["cache_read"]).tolist() == c["input_total"].tolist()
    totals = log["stats"]["model_usage"]["openai/gpt-4o-mini"]
    assert int(c["input_total"].sum()) == totals["input_tokens"] == 15235
    assert int(c["cache_read"].sum()) == totals["input_tokens_cache_read"] == 9088
    # each call's input is exactly event.input
    assert input_message_counts(t) == [len(e["input"]) for e in models] == [1, 3, 5, 7, 9]
    f = t.frame
    first_out = f[f["call"].notna()].groupby("call")["meta"].first()
    assert [json.loads(m)["input_messages"] for m in first_out] == [1, 3, 5, 7, 9]
    # tool schemas first, resolved, equal to the request's tools
    schemas = f[f["kind"] == "tool_schema"]
    assert schemas["pos"].max() < f[f["kind"] != "tool_schema"]["pos"].min()
    req_tools = inspect_ai.resolve(models[0]["call"]["request"]["tools"], sample["attachments"])
    assert [json.loads(s) for s in schemas["content"]] == [
        {k: tl["function"][k] for k in ("name", "description", "parameters")} for tl in req_tools]
    assert not f["content"].str.contains("attachment://").any()
    # tool results link to calls and equal what was sent on the wire
    calls = f[f["kind"] == "tool_call"].set_index("tool_call_id")
    results = f[f["kind"] == "tool_result"]
    assert len(results) == 4 and results["tool_call_id"].isin(calls.index).all()
    wire = inspect_ai.resolve(models[-1]["call"]["request"]["messages"], sample["attachments"])
    assert results["content"].tolist() == [m["content"] for m in wire if m["role"] == "tool"]
    assert f["turn"].max() == 1
    rep = t.load_report.records
    assert sorted(rep["where"]) == expected_wheres(log)
    assert rep[rep["record"] == "event:model"]["status"].eq("used").all()
    assert t.load_report.parts_made == len(f)


@pytest.mark.realdata
def test_eval_zip_equals_json(tmp_path: Path) -> None:
    path = realdata_path(BROWSER)
    log = json.loads(path.read_text())
    a, b = ctxlab.load(path), ctxlab.load(write_eval(tmp_path, log))
    assert b.meta["format"] == "inspect_ai" and b.meta["model"] == a.meta["model"]
    same_transcript(a, b)


# ---- hand-made fixture ------------------------------------------------------------------
def test_fixture(tmp_path: Path) -> None:
    log = fixture_log()
    t = ctxlab.load(write_json(tmp_path, log))
    f = t.frame
    assert t.sessions == ["s1:2"]
    assert f["kind"].tolist() == ["tool_schema", "text", "tool_call", "tool_result", "thinking",
                                  "text"]
    assert f["content"].iloc[1] == "What does x.py print?"
    assert json.loads(f["content"].iloc[0])["description"] == "Read a file."
    assert f["file_path"].iloc[2] == f["file_path"].iloc[3] == "x.py"
    assert f["tool_call_id"].iloc[3] == "c1" and f["role"].iloc[3] == "tool"
    assert f["call"].fillna(-1).tolist() == [-1, -1, 0, -1, 1, 1]
    assert json.loads(f["meta"].iloc[4])["signature"] == "sig"
    assert t.calls["input_total"].tolist() == [100, 200]
    assert t.calls["input_tokens"].tolist() == [100, 136]
    assert input_message_counts(t) == [1, 3]
    assert t.meta["tools_changed"] == {"s1:2": [1]}
    assert sorted(t.load_report.records["where"]) == expected_wheres(log)
    ignored = t.load_report.records.query("status == 'ignored'")["record"].tolist()
    assert sorted(ignored) == ["event:sample_init", "event:score", "event:tool", "reduction"]


def test_a_scorer_call_is_a_session_of_its_own(tmp_path: Path) -> None:
    """A model-graded scorer's call sees none of the conversation: its own session with
    its input and output, not the first messages of the sample with its usage."""
    log = fixture_log()
    grader_in = {"id": "g0", "role": "user", "content": "Grade: It prints 1. Correct?"}
    grader_out = {"id": "g1", "role": "assistant", "content": "GRADE: C"}
    events = log["samples"][0]["events"]
    events.insert(4, _model([grader_in], grader_out, [],
                            {"input_tokens": 480, "output_tokens": 3, "total_tokens": 483}))
    t = ctxlab.load(write_json(tmp_path, log))
    assert t.sessions == ["s1:2", "s1:2/call-4"]
    main = t.calls[t.calls["session"] == "s1:2"]
    assert main["input_total"].tolist() == [100, 200] and input_message_counts(t)[:2] == [1, 3]
    g = t.frame[t.frame["session"] == "s1:2/call-4"]
    assert g["content"].tolist() == ["Grade: It prints 1. Correct?", "GRADE: C"]
    assert g["call"].fillna(-1).tolist() == [-1, 0]
    grader = t.calls[t.calls["session"] == "s1:2/call-4"].iloc[0]
    assert grader["input_total"] == 480 and grader["input_end_pos"] == g["pos"].iloc[1]
    rep = t.load_report.records.set_index("where")
    assert rep.loc["samples[0].events[4]", ["status", "parts"]].tolist() == ["used", 2]
    assert t.meta["tools_changed"] == {"s1:2": [1]}


def test_a_bad_message_of_a_scorer_call_does_not_drop_the_sample(tmp_path: Path) -> None:
    log = fixture_log()
    events = log["samples"][0]["events"]
    events.insert(4, _model([{"id": "g0", "content": "no role"}],
                            {"id": "g1", "role": "assistant", "content": "GRADE: C"}, [],
                            {"input_tokens": 480, "output_tokens": 3, "total_tokens": 483}))
    t = ctxlab.load(write_json(tmp_path, log))
    assert t.sessions == ["s1:2", "s1:2/call-4"]
    assert t.calls.loc[t.calls["session"] == "s1:2", "input_total"].tolist() == [100, 200]
    rep = t.load_report.records.set_index("where")
    assert rep.loc["samples[0].events[4].input[0]", "status"] == "skipped"
    assert rep.loc["samples[0]", "status"] == "used"


def test_fixture_eval_zip(tmp_path: Path) -> None:
    log = fixture_log()
    a = ctxlab.load(write_json(tmp_path, log))
    p = write_eval(tmp_path, log)
    assert ctxlab.loaders.detect(p).name == "inspect_ai"
    b = ctxlab.load(p)
    same_transcript(a, b)
    assert b.load_report.records["where"].str.startswith("samples/s1_epoch_2.json").sum() == 10


def test_anthropic_style_usage_is_exclusive() -> None:
    u = {"input_tokens": 10, "input_tokens_cache_write": 500, "input_tokens_cache_read": 1000,
         "output_tokens": 5, "total_tokens": 1515}
    got = inspect_ai.usage_fields(u)
    assert (got["input_total"], got["input_tokens"]) == (1510, 10)
    u = {"input_tokens": 1500, "input_tokens_cache_read": 1000, "output_tokens": 5,
         "total_tokens": 1505}
    got = inspect_ai.usage_fields(u)
    assert (got["input_total"], got["input_tokens"]) == (1500, 500)


def test_tool_error_is_what_openai_was_sent(tmp_path: Path) -> None:
    log = fixture_log()
    log["samples"][0]["messages"][2]["error"] = {"type": "unknown", "message": "no such file"}
    t = ctxlab.load(write_json(tmp_path, log))
    res = t.frame[t.frame["kind"] == "tool_result"]
    assert res["content"].tolist() == ["Error: no such file"]
    assert json.loads(res["meta"].iloc[0])["is_error"] is True


def test_strict_raises_naming_file_and_record(tmp_path: Path) -> None:
    text = json.dumps(fixture_log(), indent=1)
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(LoadError) as e:
        ctxlab.load(cut, format="inspect_ai", strict=True)
    assert str(cut) in str(e.value) and e.value.line is not None
    log = fixture_log()
    log["samples"][0]["messages"][1]["tool_calls"] = [{"function": "read"}]
    bad = write_json(tmp_path, log, "bad.json")
    with pytest.raises(LoadError, match=r"samples\[0\]\.messages\[1\]"):
        ctxlab.load(bad, strict=True)
    broken = tmp_path / "broken.eval"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(LoadError, match="broken.eval"):
        ctxlab.load(broken)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_corruption_is_reported_or_raises(tmp_path_factory: pytest.TempPathFactory,
                                          data: st.DataObject) -> None:
    log = fixture_log()
    sample = log["samples"][0]
    op = data.draw(st.sampled_from(["drop", "dup", "replace", "cut", "bytes", "sample"]))
    key = data.draw(st.sampled_from(["messages", "events"]))
    i = data.draw(st.integers(0, len(sample[key]) - 1))
    if op == "drop":
        del sample[key][i]
    elif op == "dup":
        sample[key].insert(i, copy.deepcopy(sample[key][i]))
    elif op == "replace":
        sample[key][i] = data.draw(st.one_of(
            st.integers(), st.none(), st.text(max_size=4), st.just({"role": "tool"}),
            st.just({"event": "model", "input": 3, "output": {}}),
            st.just({"role": "assistant", "content": 5, "tool_calls": [1]})))
    elif op == "sample":
        log["samples"][0] = data.draw(st.one_of(st.none(), st.just({"id": 1}),
                                                st.just({"messages": [], "events": []})))
    text = json.dumps(log)
    if op == "cut":
        text = text[: data.draw(st.integers(0, len(text)))]
    elif op == "bytes":
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.sampled_from(["\x00", "}", "\ufffd", "]["])) + text[at:]
    d = tmp_path_factory.mktemp("insp")
    p = d / "log.json"
    p.write_text(text, encoding="utf-8")
    try:
        t = ctxlab.load(p, format="inspect_ai")
    except LoadError:
        return
    assert t.load_report.parts_made == len(t.frame)
    wheres = t.load_report.records["where"]
    differs = wheres.str.endswith(".input")   # a call's input unlike its conversation
    # a tool message whose call was dropped: an entry beside its message's own
    orphan = wheres.isin([w for _, w in orphan_entries(t)])
    assert all(w.split(" ")[0] in set(wheres[~orphan]) for w in wheres[orphan])
    if op in ("drop", "dup", "replace"):
        assert sorted(wheres[~differs & ~orphan]) == expected_wheres(log)
    if not differs.all() and op == "drop" and key == "messages" and i == 0:
        assert differs.any()        # the first message was sent to every call
    assert wheres.is_unique


def test_surrogates_huge_counts_and_bad_times_do_not_crash(tmp_path: Path) -> None:
    log = fixture_log()
    log["samples"][0]["events"][1]["output"]["usage"]["input_tokens"] = 10 ** 25
    log["samples"][0]["events"][1]["timestamp"] = 1e300
    log["samples"][0]["attachments"]["a1"] = "x\ud83d"
    for p in (write_json(tmp_path, log), write_eval(tmp_path, log)):
        t = ctxlab.load(p)
        assert pd.isna(t.calls["input_total"].iloc[0]) and pd.isna(t.calls["ts"].iloc[0])
        assert t.frame["content"].iloc[1] == "x\ufffd"
        # the absurd count is left empty and said so (not silently), the call kept
        sk = t.load_report.skipped
        assert sk["record"].tolist() == ["usage", "timestamp"]
        assert "is not a whole number from 0 to 2**53: left empty" in sk["reason"].iloc[0]
        # the time too is left empty, and said so, at the event it came from
        assert sk["where"].tolist() == [f"{at} {what}" for at in [sk["where"].iloc[0][:-6]]
                                         for what in ("usage", "timestamp")]
        assert "'1e+300' is not an ISO-8601 time" in sk["reason"].iloc[1]


def test_a_call_sent_other_messages_than_its_conversation_is_reported(tmp_path: Path) -> None:
    """Inspect's compaction (or an injected message) sends a call other messages than the
    sample's conversation before it: the loader, which gives each call the conversation's
    messages, says so for that call instead of passing it off as what was sent."""
    log = fixture_log()
    sample = log["samples"][0]
    j, ev = next((j, e) for j, e in enumerate(sample["events"]) if e.get("event") == "model")
    assert ctxlab.load(write_json(tmp_path, log)).load_report.skipped.empty
    ev["input"] = [*ev["input"], {"id": "injected", "role": "system", "content": "x"}]
    sample["events"].insert(j, {"event": "compaction", "type": "trim"})
    t = ctxlab.load(write_json(tmp_path, log))
    sk = t.load_report.skipped
    assert sk["where"].tolist() == [f"samples[0].events[{j + 1}].input"]
    assert "1 others" in sk["reason"].iloc[0]
    rep = t.load_report.records
    assert "Inspect's own compaction" in rep.loc[rep["where"] == f"samples[0].events[{j}]",
                                                 "reason"].iloc[0]


def test_a_tool_message_without_its_call_is_kept_and_reported(tmp_path: Path) -> None:
    """A tool message whose tool_call_id no earlier assistant message called: kept,
    unlinked, reported at its message, in .json and .eval logs alike."""
    log = fixture_log()
    log["samples"][0]["messages"][2]["tool_call_id"] = "c_gone"
    t = ctxlab.load(write_json(tmp_path, log))
    assert orphan_entries(t) == [(None, "samples[0].messages[2] tool_result c_gone")]
    f = t.frame
    assert f.loc[f["tool_call_id"] == "c_gone", "kind"].tolist() == ["tool_result"]
    t = ctxlab.load(write_eval(tmp_path, log))
    assert orphan_entries(t) == [(None, "samples/s1_epoch_2.json#messages[2] tool_result c_gone")]
    with pytest.raises(LoadError, match=r"messages\[2\] tool_result c_gone\): tool result for "
                                        r"call id 'c_gone'"):
        ctxlab.load(write_json(tmp_path, log), strict=True)


def test_an_attachment_the_sample_does_not_hold_is_kept_as_its_reference_and_reported(
        tmp_path: Path) -> None:
    """``attachment://<hash>`` whose text is not in ``sample.attachments``: the part keeps
    the reference (shorter than what the model was sent) and the load report says so at
    each record whose parts hold it (the message; the tools that became schema parts)."""
    log = fixture_log()
    log["samples"][0]["attachments"] = {}
    p = write_json(tmp_path, log)
    t = ctxlab.load(p)
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["samples[0].messages[0] attachment://a1",
                                    "samples[0].events[1].tools attachment://d1"]
    assert (sk["record"] == "attachment").all()
    assert sk["reason"].str.contains("not in the sample's attachments").all()
    f = t.frame
    assert f.loc[f["role"] == "user", "content"].tolist() == ["attachment://a1"]
    with pytest.raises(LoadError, match=r"messages\[0\] attachment://a1\): attachment://a1 is "
                                        r"not in the sample's attachments"):
        ctxlab.load(p, strict=True)
    assert ctxlab.load(write_json(tmp_path, fixture_log())).load_report.skipped.empty
    grader = fixture_log()      # a call apart (a grader's): its event's parts are its input
    grader["samples"][0]["events"].append(_model(
        [{"id": "g0", "role": "user", "content": "attachment://zz"}],
        {"id": "g1", "role": "assistant", "content": "yes"}, [],
        {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}))
    t = ctxlab.load(write_json(tmp_path, grader))
    assert t.sessions == ["s1:2", "s1:2/call-5"]
    assert t.load_report.skipped["where"].tolist() == ["samples[0].events[5] attachment://zz"]


def test_a_message_content_that_is_an_object_is_skipped_not_read_as_its_keys(
        tmp_path: Path) -> None:
    """A message whose content is an object (no Inspect shape) is reported as skipped; it
    became text parts of its keys, silently."""
    log = fixture_log()
    log["samples"][0]["messages"][3]["content"] = {"type": "text", "text": "It prints 1."}
    t = ctxlab.load(write_json(tmp_path, log))
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["samples[0].messages[3]"]
    assert "content is a dict" in sk["reason"].iloc[0]
    assert "type" not in t.frame["content"].tolist()
