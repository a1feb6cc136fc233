"""anthropic_messages: Anthropic Messages API lists (JSON list, request object, JSONL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import registry

from corrupt_strategies import (assert_accounts, corrupt, corruptions, expected_wheres,
                                orphan_entries)
from golden import check_golden

TOOLS = [{"name": "Read", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}]
USAGE = {"input_tokens": 3, "cache_creation_input_tokens": 1500, "cache_read_input_tokens": 9000,
         "output_tokens": 42}


def messages() -> list[dict]:
    """A small Anthropic conversation with every block type the loader handles."""
    return [
        {"role": "user", "content": [
            {"type": "text", "text": "What is in a.py?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                            "data": "spec text"}, "title": "spec"}]},
        {"role": "assistant", "id": "msg_1", "usage": USAGE, "content": [
            {"type": "thinking", "thinking": "I should read it.", "signature": "sig" * 10},
            {"type": "redacted_thinking", "data": "EuYBCkQYAiJA"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "Read",
             "input": {"file_path": "/r/a.py"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": False,
             "content": [{"type": "text", "text": "x = 1"},
                         {"type": "image", "source": {"type": "base64", "data": "QQ==",
                                                      "media_type": "image/png"}}]}]},
        {"role": "assistant", "content": "a.py sets x to 1."},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": [{"type": "text", "text": "You're welcome."}]},
    ]


def request() -> dict:
    return {"model": "claude-sonnet-4", "system": [{"type": "text", "text": "Be brief."}],
            "tools": TOOLS, "messages": messages()}


def test_request_object_maps_every_block(tmp_path: Path):
    p = tmp_path / "req.json"
    p.write_text(json.dumps(request()), encoding="utf-8")
    assert registry.detect(p).name == "anthropic_messages"
    t = ctxlab.load(p)
    f = t.frame
    assert list(zip(f["role"], f["kind"])) == [
        ("system", "tool_schema"), ("system", "text"),
        ("user", "text"), ("user", "image"), ("user", "attachment"),
        ("assistant", "thinking"), ("assistant", "thinking"), ("assistant", "text"),
        ("assistant", "tool_call"),
        ("user", "tool_result"), ("user", "image"),
        ("assistant", "text"), ("user", "text"), ("assistant", "text")]
    assert f["tool_name"].iloc[0] == "Read" and json.loads(f["content"].iloc[0]) == TOOLS[0]
    assert f["content"].iloc[3] == "iVBORw0KGgo=" and f["content"].iloc[4] == "spec text"
    assert json.loads(f["meta"].iloc[5]) == {"signature_chars": 30}
    assert json.loads(f["meta"].iloc[6]) == {"redacted": True}
    call, result, img = f.iloc[8], f.iloc[9], f.iloc[10]
    assert call["content"] == 'Read({"file_path": "/r/a.py"})'
    assert call["tool_call_id"] == result["tool_call_id"] == img["tool_call_id"] == "toolu_1"
    assert result["tool_name"] == "Read" and result["content"] == "x = 1"
    assert call["file_path"] == result["file_path"] == "/r/a.py"
    assert json.loads(result["meta"]) == {"is_error": False}
    # the tool_result message is not a user turn; "thanks" is
    assert f["turn"].tolist() == [0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2]
    c = t.calls
    assert len(c) == 3 and c["call_id"].iloc[0] == "msg_1"
    assert (c["input_total"].iloc[0], c["input_tokens"].iloc[0], c["cache_write"].iloc[0],
            c["cache_read"].iloc[0], c["output_tokens"].iloc[0]) == (10503, 3, 1500, 9000, 42)
    assert c["model"].unique().tolist() == ["claude-sonnet-4"]
    assert c["input_end_pos"].tolist() == [5.0, 11.0, 13.0]
    assert sorted(t.load_report.records["where"]) == sorted(
        ["system", "tools[0]"] + [f"messages[{j}]" for j in range(6)])
    check_golden("anthropic_messages__fixture", t)


def test_plain_list_and_jsonl_of_requests(tmp_path: Path):
    lst = tmp_path / "list.json"
    lst.write_text(json.dumps(messages()), encoding="utf-8")
    assert registry.detect(lst).name == "anthropic_messages"
    t = ctxlab.load(lst)
    assert t.sessions == ["list"] and len(t.calls) == 3 and len(t.frame) == 12
    many = tmp_path / "reqs.jsonl"
    many.write_text("".join(json.dumps({**request(), "id": f"r{i}"}) + "\n" for i in range(3)),
                    encoding="utf-8")
    t = ctxlab.load(many)
    assert t.meta["format"] == "anthropic_messages" and t.sessions == ["r0", "r1", "r2"]
    assert len(t.calls) == 9 and t.calls["input_total"].tolist()[::3] == [10503] * 3
    rep = t.load_report.records
    assert rep[rep["where"].str.fullmatch(r"line \d+")]["line"].astype(int).tolist() == [1, 2, 3]


def test_string_system_and_unknown_blocks_are_kept(tmp_path: Path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"system": "Sys prompt", "messages": [
        {"role": "user", "content": [{"type": "search_result", "title": "x"}]},
        {"role": "assistant", "content": []}]}), encoding="utf-8")
    t = ctxlab.load(p, format="anthropic_messages")
    assert t.frame["content"].tolist()[0] == "Sys prompt"
    assert json.loads(t.frame["content"].iloc[1]) == {"type": "search_result", "title": "x"}
    assert t.frame["content"].iloc[2] == "" and len(t.calls) == 1  # an empty reply is a call


def test_bad_records_are_reported_and_strict_raises(tmp_path: Path):
    lines = [json.dumps(request()), "{broken", json.dumps({"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "name": "x"}]},
        {"role": "user"}]})]
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = ctxlab.load(p, format="anthropic_messages")
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["line 2", "line 3 messages[0]", "line 3 messages[1]"]
    assert all("unexpected shape: KeyError" in r for r in sk["reason"].iloc[1:])
    with pytest.raises(LoadError, match=rf"{p}:2"):
        ctxlab.load(p, format="anthropic_messages", strict=True)
    good = tmp_path / "good.jsonl"
    good.write_text(lines[0] + "\n" + lines[2] + "\n", encoding="utf-8")
    with pytest.raises(LoadError, match=r"line 2 messages\[0\]"):
        ctxlab.load(good, format="anthropic_messages", strict=True)


FIXTURES = {
    "list.json": json.dumps(messages(), indent=1).encode(),
    "req.json": json.dumps(request(), indent=1).encode(),
    "reqs.jsonl": "".join(json.dumps(request()) + "\n" for _ in range(3)).encode(),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(c=corruptions)
def test_corrupted_input_is_reported_or_load_error(name: str, c: tuple, tmp_path: Path):
    data = corrupt(FIXTURES[name], c)
    p = tmp_path / name
    p.write_bytes(data)
    try:
        t = ctxlab.load(p, format="anthropic_messages")
    except LoadError:
        return
    expected = expected_wheres(data, jsonl=name.endswith(".jsonl"), trailing=True)
    assert expected is not None
    assert_accounts(t, expected)


def test_an_openai_key_inside_a_tool_input_does_not_make_it_openai(tmp_path):
    """``image_url`` as a key of a tool_use's input: the tool_use block decides."""
    import json

    from ctxlab.loaders.message_lists import sniff_style

    msgs = [{"role": "user", "content": "describe https://x/a.png"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                               "name": "fetch_image",
                                               "input": {"image_url": "https://x/a.png"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "a cat"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "A cat."}]}]
    text = json.dumps({"model": "claude", "messages": msgs})
    assert sniff_style(text) == "anthropic"
    p = tmp_path / "anth.json"
    p.write_text(text)
    t = ctxlab.load(p)
    assert t.meta["format"] == "anthropic_messages"
    assert t.frame["kind"].tolist() == ["text", "tool_call", "tool_result", "text"]
    assert t.frame["tool_call_id"].iloc[1] == t.frame["tool_call_id"].iloc[2] == "toolu_1"


def test_conversation_usage_goes_to_a_single_call_only(tmp_path: Path):
    """A logged request/response pair carries its usage beside the messages (as OpenAI
    lists do): the one call gets it; with several calls it is kept in the meta."""
    msgs = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}]
    usage = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 5}
    one = {"model": "claude-sonnet-4-5", "system": "Be brief.", "messages": msgs,
           "usage": usage}
    two = {"system": "Be brief.", "messages": msgs * 2, "usage": usage, "id": "b"}
    lines = [json.dumps(one), json.dumps(two)]
    (tmp_path / "u.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = ctxlab.load(tmp_path / "u.jsonl", format="anthropic_messages")
    first = t.calls.iloc[0]
    assert (first["input_total"], first["cache_read"], first["output_tokens"]) == (100, 90, 5)
    assert t.calls["input_total"].iloc[1:].isna().all()
    assert t.meta["conversation_usage"] == {"b": usage}
    # a request whose response is not in the list: its usage is not the earlier call's
    req = {"id": "req", "messages": msgs + [{"role": "user", "content": "and?"}],
           "usage": usage}
    (tmp_path / "r.jsonl").write_text(json.dumps(req) + "\n", encoding="utf-8")
    t = ctxlab.load(tmp_path / "r.jsonl", format="anthropic_messages")
    assert t.calls["input_total"].isna().all()
    assert t.meta["conversation_usage"] == {"req": usage}


def test_a_tool_result_without_its_tool_use_is_kept_and_reported(tmp_path: Path):
    """A tool_result block whose tool_use_id no earlier tool_use has: its text and image
    parts are kept, and one report entry names the record and the id."""
    req = request()
    req["messages"][2]["content"][0]["tool_use_id"] = "toolu_gone"
    p = tmp_path / "req.json"
    p.write_text(json.dumps(req), encoding="utf-8")
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(None, "messages[2] tool_result toolu_gone")]
    f = t.frame
    assert f.loc[f["tool_call_id"] == "toolu_gone", "kind"].tolist() == ["tool_result", "image"]
    lines = tmp_path / "reqs.jsonl"
    lines.write_text(json.dumps(request()) + "\n" + json.dumps(req) + "\n", encoding="utf-8")
    t = ctxlab.load(lines, format="anthropic_messages")
    assert orphan_entries(t) == [(2, "line 2 messages[2] tool_result toolu_gone")]
    with pytest.raises(LoadError, match=rf"{lines}:2 \(line 2 messages\[2\] tool_result "
                                        rf"toolu_gone\): tool result for call id 'toolu_gone'"):
        ctxlab.load(lines, format="anthropic_messages", strict=True)
