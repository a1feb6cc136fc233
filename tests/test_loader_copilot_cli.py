"""GitHub Copilot CLI events loader: the real 1.0.34 file, a hand-made fixture, corruption."""

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
from ctxlab.loaders import copilot_cli
from conftest import realdata_path
from corrupt_strategies import corrupt, corruptions, expected_wheres, record_wheres
from golden import check_golden

REAL = "copilot_cli/vibecodingtracker/copilot.jsonl"
# outputTokens of the six assistant.message records, checked by hand
REAL_OUTPUT = [311, 170, 141, 153, 1379, 694]


def _ev(t: str, data: dict[str, Any], n: int) -> dict[str, Any]:
    return {"type": t, "data": data, "id": f"e{n}", "timestamp": f"2026-01-01T00:00:{n:02d}Z",
            "parentId": f"e{n - 1}" if n else None}


def fixture_events() -> list[dict[str, Any]]:
    ev = [
        ("session.start", {"sessionId": "cs-1", "copilotVersion": "1.0.40",
                           "producer": "copilot-agent", "context": {"cwd": "/w"}}),         # 1
        ("session.model_change", {"newModel": "claude-sonnet-4.6"}),                        # 2
        ("system.message", {"role": "system", "content": "You are Copilot."}),              # 3
        ("user.message", {"content": "read a.py", "attachments": [],
                          "transformedContent": "<current_datetime>now</current_datetime>\n\n"
                                                "read a.py"}),                              # 4
        ("assistant.turn_start", {"turnId": "0"}),                                          # 5
        ("assistant.message", {"messageId": "m1", "requestId": "r1", "content": "",
                               "reasoningText": "Let me read it.", "reasoningOpaque": "abcd",
                               "outputTokens": 40, "toolRequests": [
                                   {"toolCallId": "t1", "name": "view", "type": "function",
                                    "arguments": {"path": "/w/a.py"}}]}),                   # 6
        ("tool.execution_start", {"toolCallId": "t1", "toolName": "view"}),                 # 7
        ("tool.execution_complete", {"toolCallId": "t1", "success": True, "result": {
            "content": "1. print(1)", "detailedContent": "diff..."}}),                      # 8
        ("assistant.usage", {"model": "claude-sonnet-4.6", "inputTokens": 12000,
                             "outputTokens": 41, "cacheReadTokens": 9000,
                             "cacheWriteTokens": 1000}),                                     # 9
        ("assistant.turn_end", {"turnId": "0"}),                                            # 10
        ("system.message", {"role": "system", "content": "You are Copilot."}),              # 11
        ("system.message", {"role": "system", "content": "You are Copilot, v2."}),          # 12
        ("user.message", {"content": "", "transformedContent": "You have not yet marked "
                          "the task as complete."}),                                        # 13
        ("assistant.message", {"messageId": "m2", "requestId": "r2", "content": "It prints 1.",
                               "outputTokens": 7}),                                         # 14
        ("tool.execution_complete", {"toolCallId": "ghost", "success": True,
                                     "result": {"content": "x"}}),                          # 15
        ("session.brand_new_event", {}),                                                    # 16
        ("session.shutdown", {"modelMetrics": {"claude-sonnet-4.6": {
            "requests": {"count": 2}, "usage": {"inputTokens": 25000, "outputTokens": 48}}},
            "currentTokens": 13000, "systemTokens": 5000, "conversationTokens": 2000,
            "toolDefinitionsTokens": 6000}),                                                 # 17
    ]
    return [_ev(t, d, n) for n, (t, d) in enumerate(ev, start=1)]


def write(tmp_path: Path, events: list[Any], name: str = "events.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(e) for e in events) + "\n", encoding="utf-8")
    return p


# ---- real file ----------------------------------------------------------------------------
def test_golden() -> None:
    t = ctxlab.load(realdata_path(REAL))
    assert t.meta["format"] == "copilot_cli"
    check_golden("copilot_cli__vibecodingtracker", t)


def test_real_calls_and_session_usage() -> None:
    t = ctxlab.load(realdata_path(REAL))
    c = t.calls
    usage = t.meta["session_usage"]
    metrics = usage["modelMetrics"]["claude-sonnet-4.6"]
    # one call per assistant.message = per turn_start/turn_end pair = requests.count
    assert len(c) == metrics["requests"]["count"] == 6
    assert c["output_tokens"].tolist() == REAL_OUTPUT
    assert int(c["output_tokens"].sum()) == metrics["usage"]["outputTokens"] == 2848
    assert c["input_total"].isna().all()
    assert c["call_id"].iloc[0] == "EAA6:19D0BE:5FB348C:6A45F07:69EA52B5"
    assert set(c["model"]) == {"claude-sonnet-4.6"}
    assert metrics["usage"] == {"inputTokens": 186809, "outputTokens": 2848,
                                "cacheReadTokens": 151738, "cacheWriteTokens": 0,
                                "reasoningTokens": 1024}
    assert {k: usage[k] for k in ("currentTokens", "systemTokens", "conversationTokens",
                                  "toolDefinitionsTokens")} == \
        {"currentTokens": 35322, "systemTokens": 9891, "conversationTokens": 10223,
         "toolDefinitionsTokens": 15204}
    assert t.meta["copilot_version"] == "1.0.34"


def test_a_replay_counts_the_tool_definitions_the_log_does_not_record() -> None:
    """The log holds the system prompt but not the tool schemas, and no call reports its
    input: the replay counts the 15,204 tokens of tool definitions the session usage
    reports in every request. Its requests then add up to within 10% of the 186,809 input
    tokens billed (they were 40% under), and the last is near the client's final 35,322."""
    t = ctxlab.load(realdata_path(REAL))
    session = t.sessions[0]
    assert t.meta["unrecorded_input"] == {session: 15204}
    r = ctxlab.replay(t, "neurolink")
    assert r.settings.overhead_tokens == {session: 15204}
    billed = t.meta["session_usage"]["modelMetrics"]["claude-sonnet-4.6"]["usage"]
    assert abs(r.calls["tokens_after"].sum() / billed["inputTokens"] - 1) < 0.10
    assert abs(r.calls["tokens_after"].iloc[-1] / 35322 - 1) < 0.10
    bare = ctxlab.replay(t, "neurolink", overhead_tokens=0)
    assert bare.calls["tokens_after"].sum() < 0.65 * billed["inputTokens"]


def test_real_parts_and_report() -> None:
    path = realdata_path(REAL)
    t = ctxlab.load(path)
    f = t.frame
    assert f.loc[0, ["role", "kind"]].tolist() == ["system", "text"]
    assert len(f.loc[0, "content"]) == 37833  # the system prompt is recorded
    users = f[f["role"] == "user"]
    assert users["content"].iloc[0].startswith("<current_datetime>")  # transformedContent
    assert json.loads(users["meta"].iloc[0])["content"].startswith("請不要修改任何代碼")
    assert users["turn"].tolist() == [1, 1]  # the autopilot nudge is not a user turn
    calls, results = f[f["kind"] == "tool_call"], f[f["kind"] == "tool_result"]
    assert len(calls) == len(results) == 11
    assert set(calls["tool_call_id"]) == set(results["tool_call_id"])
    assert (results["role"] == "tool").all()
    assert (f["kind"] == "thinking").sum() == 4  # reasoningText on 4 of 6 messages
    rep = t.load_report.records
    assert sorted(rep["where"]) == sorted(expected_wheres(path.read_bytes(), jsonl=True))
    orphans = rep[rep["reason"].fillna("").str.contains("no assistant.message requested")]
    assert orphans["line"].tolist() == [35, 37]
    assert rep.loc[rep["line"] == 47, "reason"].iloc[0].startswith("identical system prompt")
    assert (rep["status"] != "skipped").all()


# ---- hand-made fixture --------------------------------------------------------------------
def test_fixture(tmp_path: Path) -> None:
    t = ctxlab.load(write(tmp_path, fixture_events()))
    f = t.frame
    assert f["kind"].tolist() == ["text", "text", "thinking", "tool_call", "tool_result",
                                  "text", "text", "text"]
    assert f["role"].tolist() == ["system", "user", "assistant", "assistant", "tool", "system",
                                  "user", "assistant"]
    assert f["turn"].tolist() == [0, 1, 1, 1, 1, 1, 1, 1]
    assert f.loc[3, ["content", "file_path"]].tolist() == ['view({"path": "/w/a.py"})', "/w/a.py"]
    assert f.loc[4, ["tool_name", "tool_call_id", "file_path", "content"]].tolist() == \
        ["view", "t1", "/w/a.py", "1. print(1)"]
    assert json.loads(f.loc[2, "meta"])["reasoningOpaque_chars"] == 4
    assert f["call"].tolist()[2:4] == [0, 0] and f["call"].tolist()[7] == 1
    c = t.calls
    assert c["call_id"].tolist() == ["r1", "r2"]
    assert c.loc[0, ["input_total", "cache_read", "cache_write", "input_tokens",
                     "output_tokens"]].tolist() == [12000, 9000, 1000, 2000, 41]
    assert pd.isna(c.loc[1, "input_total"]) and c.loc[1, "output_tokens"] == 7
    assert c["input_end_pos"].tolist() == [2.0, 7.0]
    # the changed system prompt replaces the first one
    assert t.events["origin"].tolist() == ["system_prompt"]
    assert f.loc[0, "hidden_by"] == 0 and f.loc[5, "content"] == "You are Copilot, v2."
    rep = t.load_report.records.set_index("line")
    assert rep.loc[11, "status"] == "ignored" and rep.loc[15, "status"] == "ignored"
    assert rep.loc[16, "status"] == "skipped"
    assert t.meta["session_usage"]["toolDefinitionsTokens"] == 6000
    assert t.sessions == ["cs-1"]


def test_sniff(tmp_path: Path) -> None:
    assert ctxlab.loaders.detect(write(tmp_path, fixture_events())).name == "copilot_cli"
    assert not copilot_cli.sniff(tmp_path / "x.jsonl",
                                 '{"type":"user","message":"\\"type\\":\\"user.message\\""}')


def test_strict_names_file_and_line(tmp_path: Path) -> None:
    events: list[Any] = fixture_events()[:15]
    events[5] = {"type": "assistant.message", "data": {"toolRequests": [{"name": "x"}]}}
    p = write(tmp_path, events)
    with pytest.raises(LoadError, match=rf"{p.name}:6\b.*a tool request without its name "
                                        rf"or toolCallId"):
        ctxlab.load(p, strict=True)
    # without --strict, the message and its call are kept, the bad request alone is not
    t = ctxlab.load(p)
    rep = t.load_report.records
    bad = rep[rep["status"] == "skipped"]
    assert bad["line"].tolist() == [6] and bad["where"].tolist() == ["line 6 toolRequests[0]"]
    assert (rep["line"] == 6).sum() == 2          # the message itself is used
    assert t.calls["source"].astype(str).str.endswith(":6").sum() == 1


def test_one_bad_tool_request_of_a_real_message_leaves_the_rest_of_its_call(tmp_path: Path):
    """Line 9 of the real log requests 4 tools; without the second's toolCallId the whole
    message (thinking, 4 calls, usage) was skipped."""
    src = realdata_path("copilot_cli/vibecodingtracker/copilot.jsonl")
    lines = src.read_text(encoding="utf-8").split("\n")
    rec = json.loads(lines[8])
    requests = rec["data"]["toolRequests"]
    assert len(requests) == 4
    del requests[1]["toolCallId"]
    lines[8] = json.dumps(rec)
    p = tmp_path / "copilot.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t, good = ctxlab.load(p), ctxlab.load(src)
    assert len(t.calls) == len(good.calls)
    mine = t.frame[t.frame["source"].astype(str).str.endswith(":9")]
    assert (mine["kind"] == "tool_call").sum() == 3
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["line 9 toolRequests[1]"]


@settings(max_examples=40, deadline=None)
@given(cs=st.lists(corruptions, min_size=1, max_size=3))
def test_corruption_is_reported_or_raises(cs: list[Any]) -> None:
    data = ("\n".join(json.dumps(e) for e in fixture_events()) + "\n").encode()
    for c in cs:
        data = corrupt(data, c)
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "events.jsonl"
        p.write_bytes(data)
        try:
            t = ctxlab.load(p, format="copilot_cli")
        except LoadError:
            return
        assert record_wheres(t) == sorted(expected_wheres(data, jsonl=True))
        t.validate()


def test_the_result_of_a_request_left_out_for_its_name_is_skipped_with_it(tmp_path: Path):
    """A request left out for having no name still has its toolCallId: its result is
    skipped with it, naming the request's line (it was reported as a result that no
    message requested)."""
    src = realdata_path("copilot_cli/vibecodingtracker/copilot.jsonl")
    lines = src.read_text(encoding="utf-8").split("\n")
    rec = json.loads(lines[8])
    cid = rec["data"]["toolRequests"][1]["toolCallId"]
    del rec["data"]["toolRequests"][1]["name"]
    lines[8] = json.dumps(rec)
    at = next(i + 1 for i, x in enumerate(lines) if x.strip()
              and json.loads(x).get("type") == "tool.execution_complete"
              and json.loads(x)["data"].get("toolCallId") == cid)
    p = tmp_path / "copilot.jsonl"
    p.write_text("\n".join(lines), encoding="utf-8")
    t = ctxlab.load(p)
    rep = t.load_report.records.set_index("line")
    assert rep.loc[at, "status"] == "skipped"
    assert "(line 9)" in rep.loc[at, "reason"] and "no name" in rep.loc[at, "reason"]
    assert not (t.frame["tool_call_id"] == cid).any()


def test_a_resumed_session_keeps_every_runs_usage(tmp_path: Path) -> None:
    """Each run of a resumed session ends with its own session.shutdown: the last is the
    session's usage and the earlier ones are kept (the second replaced the first)."""
    events = fixture_events()
    first = json.loads(json.dumps(events[-1]))
    first["data"]["currentTokens"] = 9000
    t = ctxlab.load(write(tmp_path, [*events[:-1], first, events[-1]]))
    assert t.meta["session_usage"]["currentTokens"] == 13000
    assert [u["currentTokens"] for u in t.meta["earlier_session_usage"]] == [9000]
    assert "earlier_session_usage" not in ctxlab.load(write(tmp_path, events, "one.jsonl")).meta
