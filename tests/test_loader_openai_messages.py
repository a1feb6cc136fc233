"""openai_messages: OpenAI chat-completions message lists (JSON, JSONL, conversation objects)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxlab
from ctxlab.errors import LoadError
from ctxlab.loaders import registry
from ctxlab.loaders.message_lists import sniff_style

from conftest import realdata_path
from corrupt_strategies import (assert_accounts, corrupt, corruptions, expected_wheres,
                                orphan_entries)
from golden import check_golden

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def conversation() -> list[dict]:
    """A small OpenAI conversation with every message shape the loader handles."""
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "developer", "content": [{"type": "text", "text": "Be terse."}]},
        {"role": "user", "content": [{"type": "text", "text": "Fix a.py <|endoftext|>"},
                                     {"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64,iVBORw0K"}}]},
        {"role": "assistant", "content": None, "reasoning_content": "Look at a.py first.",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {
             "name": "read_file", "arguments": "{\"path\": \"src/a.py\"}"}}],
         "usage": {"prompt_tokens": 120, "completion_tokens": 30,
                   "prompt_tokens_details": {"cached_tokens": 64},
                   "completion_tokens_details": {"reasoning_tokens": 12}}},
        {"role": "tool", "tool_call_id": "call_1", "content": "def f():\n    return 1\n"},
        {"role": "assistant", "content": "It returns 1.", "function_call": {
            "name": "run", "arguments": "{\"cmd\": \"pytest\"}"}},
        {"role": "function", "name": "run", "content": "1 passed"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "Done."},
    ]


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_jsonl(path: Path, values: list[object]) -> Path:
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    return path


def test_object_with_tools_maps_every_shape(tmp_path: Path):
    p = write_json(tmp_path / "chat.json",
                   {"model": "gpt-4o", "tools": TOOLS, "messages": conversation()})
    assert registry.detect(p).name == "openai_messages"
    t = ctxlab.load(p)
    f = t.frame
    assert t.meta["format"] == "openai_messages" and t.meta["models"] == ["gpt-4o"]
    assert t.sessions == ["chat"]
    assert list(zip(f["role"], f["kind"])) == [
        ("system", "tool_schema"), ("system", "text"), ("system", "text"),
        ("user", "text"), ("user", "image"),
        ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("assistant", "text"), ("assistant", "tool_call"), ("tool", "tool_result"),
        ("user", "text"), ("assistant", "text")]
    assert f["tool_name"].iloc[0] == "read_file"
    assert json.loads(f["content"].iloc[0]) == TOOLS[0]
    assert json.loads(f["meta"].iloc[2]) == {"role": "developer"}
    assert f["content"].iloc[3] == "Fix a.py <|endoftext|>"
    assert f["content"].iloc[4] == "data:image/png;base64,iVBORw0K"
    call, result = f.iloc[6], f.iloc[7]
    assert call["content"] == 'read_file({"path": "src/a.py"})'  # arguments verbatim
    assert (call["tool_call_id"], result["tool_call_id"]) == ("call_1", "call_1")
    assert result["tool_name"] == "read_file"
    assert call["file_path"] == result["file_path"] == "src/a.py"
    assert f["tool_name"].iloc[10] == "run" and f["content"].iloc[9] == 'run({"cmd": "pytest"})'
    assert f["turn"].tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2]
    assert f["call"].astype("float").fillna(-1).astype(int).tolist() == \
        [-1, -1, -1, -1, -1, 0, 0, -1, 1, 1, -1, -1, 2]
    c = t.calls
    assert len(c) == 3 and c["model"].tolist() == ["gpt-4o"] * 3
    first = c.iloc[0]
    assert (first["input_total"], first["cache_read"], first["input_tokens"],
            first["output_tokens"], first["reasoning_tokens"]) == (120, 64, 56, 30, 12)
    assert c["input_total"].iloc[1:].isna().all()
    assert c["input_end_pos"].tolist() == [5.0, 8.0, 12.0]
    rep = t.load_report.records
    assert sorted(rep["where"]) == sorted(["tools[0]"] + [f"messages[{j}]" for j in range(9)])
    assert (rep["status"] == "used").all() and t.load_report.parts_made == len(f)


def test_jsonl_of_messages_is_one_conversation(tmp_path: Path):
    p = write_jsonl(tmp_path / "one.jsonl", conversation())
    t = ctxlab.load(p)
    assert t.meta["format"] == "openai_messages" and t.sessions == ["one"]
    assert len(t.calls) == 3 and len(t.frame) == 12
    rep = t.load_report.records
    assert sorted(rep["line"].astype(int)) == list(range(1, 10))
    assert t.frame["source"].iloc[0] == f"{p}:1"


def test_jsonl_of_conversations_like_the_dataset_generator(tmp_path: Path):
    """The shape ctxlab.datasets writes: one conversation per line with tools and usage."""
    lines = []
    for n in range(3):
        msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"task {n}"}]
        for k in range(n + 1):
            msgs.append({"role": "assistant", "content": f"step {k}",
                         "usage": {"prompt_tokens": 100 + 10 * k, "completion_tokens": 5}})
            msgs.append({"role": "user", "content": "go on"})
        line = {"messages": msgs, "tools": TOOLS, "model": "gpt-x"}
        if n != 1:
            line["id"] = f"sess-{n}"
        lines.append(line)
    lines[2]["id"] = "sess-0"  # a duplicate id gets the line number
    p = write_jsonl(tmp_path / "sessions.jsonl", lines)
    assert sniff_style(registry.read_head(p)) == "openai"
    t = ctxlab.load(p)
    assert t.sessions == ["sess-0", "sessions:2", "sess-0:3"]
    assert t.calls.groupby("session", sort=False).size().tolist() == [1, 2, 3]
    assert t.calls["input_total"].tolist() == [100, 100, 110, 100, 110, 120]
    assert (t.frame["kind"] == "tool_schema").sum() == 3
    assert t.frame.groupby("session", sort=False)["turn"].max().tolist() == [2, 3, 4]
    rep = t.load_report.records
    line_level = rep[rep["where"].str.fullmatch(r"line \d+")]
    assert line_level["line"].astype(int).tolist() == [1, 2, 3]
    assert rep["where"].str.contains(r"^line 2 messages\[5\]$").sum() == 1
    assert t.frame["source"].iloc[1] == f"{p}:1#messages[0]"


def test_jsonl_line_holding_a_list_of_messages_is_a_conversation(tmp_path: Path):
    """A line may hold a whole conversation as its message list (and a one-line JSON
    document followed by stray text is read the same way: the stray line is skipped)."""
    msgs = conversation()
    p = write_jsonl(tmp_path / "lists.jsonl", [msgs, msgs[:3]])
    t = ctxlab.load(p)
    assert t.sessions == ["lists:1", "lists:2"]
    assert t.frame.groupby("session", sort=False).size().tolist() == [12, 4]
    rep = t.load_report.records
    assert (rep["status"] == "used").all()
    assert rep["where"].str.fullmatch(r"line 2 \[\d\]").sum() == 3
    q = tmp_path / "one.json"
    q.write_text(json.dumps(msgs) + "\nnot json\n", encoding="utf-8")
    t = ctxlab.load(q)
    assert len(t.frame) == 12
    rep = t.load_report.records
    assert rep.loc[rep["status"] == "skipped", "line"].tolist() == [2]


def test_conversation_usage_goes_to_a_single_call_only(tmp_path: Path):
    one = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
           "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    two = {"messages": one["messages"] * 2, "usage": {"prompt_tokens": 30}, "id": "b"}
    t = ctxlab.load(write_jsonl(tmp_path / "u.jsonl", [one, two]))
    assert t.calls["input_total"].tolist()[:1] == [9]
    assert t.calls["input_total"].iloc[1:].isna().all()
    assert t.meta["conversation_usage"] == {"b": {"prompt_tokens": 30}}
    # a request whose response is not in the list: its usage is not the earlier call's
    req = {"messages": one["messages"] + [{"role": "user", "content": "and?"}],
           "usage": {"prompt_tokens": 12}, "id": "req"}
    t = ctxlab.load(write_jsonl(tmp_path / "r.jsonl", [req]))
    assert t.calls["input_total"].isna().all()
    assert t.meta["conversation_usage"] == {"req": {"prompt_tokens": 12}}


def test_sniff_prefers_openai_when_ambiguous_and_yields_to_anthropic_blocks(tmp_path: Path):
    plain = write_json(tmp_path / "plain.json", [{"role": "user", "content": "hi"},
                                                 {"role": "assistant", "content": "yo"}])
    blocks = write_json(tmp_path / "blocks.json", [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "x",
                                           "input": {}}]}])
    text_in_content = write_json(tmp_path / "quoted.json", [
        {"role": "user", "content": '{"type": "tool_use", "id": "t"}'}])
    assert registry.detect(plain).name == "openai_messages"
    assert registry.detect(blocks).name == "anthropic_messages"
    assert registry.detect(text_in_content).name == "openai_messages"
    notes = tmp_path / "n.json"
    notes.write_text('{"title": "not messages", "items": [1, 2]}')
    assert sniff_style(registry.read_head(notes)) is None


def test_reads_the_messages_of_a_mini_swe_agent_file_when_forced():
    p = realdata_path("mini_swe_agent/astropy__astropy-12907.traj.json")
    t = ctxlab.load(p, format="openai_messages")
    doc = json.loads(p.read_text(encoding="utf-8"))
    assert t.meta["format"] == "openai_messages"
    assert len(t.frame) == len(doc["messages"]) == 42
    assert len(t.calls) == doc["info"]["model_stats"]["api_calls"] == 20
    assert t.calls["input_total"].iloc[0] == 1662 and t.calls["input_total"].iloc[-1] == 20662
    assert t.frame["turn"].max() == 21  # generic reading: every user message is a turn
    assert_accounts(t, [f"messages[{k}]" for k in range(42)])
    check_golden("openai_messages__astropy_forced", t)


def test_golden_fixture(tmp_path: Path):
    p = write_json(tmp_path / "chat.json",
                   {"model": "gpt-4o", "tools": TOOLS, "messages": conversation()})
    check_golden("openai_messages__fixture", ctxlab.load(p))


def test_bad_records_are_reported_and_strict_names_file_and_line(tmp_path: Path):
    lines = [json.dumps(m) for m in conversation()]
    lines.insert(2, "{not json")
    lines.insert(4, json.dumps({"role": "robot", "content": "beep"}))
    lines.insert(5, json.dumps({"role": "assistant", "tool_calls": [{"id": "x"}]}))
    lines.insert(6, json.dumps([1, 2]))
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = ctxlab.load(p)
    sk = t.load_report.skipped.sort_values("line")
    assert sk["line"].astype(int).tolist() == [3, 5, 6, 7]
    assert "malformed JSON" in sk["reason"].iloc[0] and "unknown role" in sk["reason"].iloc[1]
    assert "unexpected shape: KeyError" in sk["reason"].iloc[2]
    assert sorted(t.load_report.records["line"].astype(int)) == list(range(1, 14))
    with pytest.raises(LoadError, match=rf"{p}:3"):
        ctxlab.load(p, strict=True)


def test_broken_json_document_raises_load_error(tmp_path: Path):
    p = tmp_path / "cut.json"
    p.write_text(json.dumps({"messages": conversation()})[:200], encoding="utf-8")
    with pytest.raises(LoadError, match=rf"{p}:1"):
        ctxlab.load(p, format="openai_messages")


FIXTURES = {
    "list.json": json.dumps(conversation(), indent=1).encode(),
    "obj.json": json.dumps({"tools": TOOLS, "messages": conversation()}, indent=1).encode(),
    "msgs.jsonl": "".join(json.dumps(m) + "\n" for m in conversation()).encode(),
    "convs.jsonl": "".join(json.dumps({"messages": conversation()[i:i + 4], "tools": TOOLS}) + "\n"
                           for i in range(0, 9, 3)).encode(),
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
        t = ctxlab.load(p, format="openai_messages")
    except LoadError:
        return
    expected = expected_wheres(data, jsonl=name.endswith(".jsonl"), trailing=True)
    assert expected is not None
    assert_accounts(t, expected)
    assert isinstance(t.frame, pd.DataFrame)


def test_a_token_count_that_is_no_count_is_reported_not_dropped_silently(tmp_path: Path):
    """A count recorded as a text, negative or absurd is left empty (it cannot be trusted)
    and the load report says which and where; --strict stops there."""
    msgs = conversation()
    msgs[3]["usage"] = {"prompt_tokens": "120", "completion_tokens": -3}
    p = write_jsonl(tmp_path / "odd.jsonl", msgs)
    t = ctxlab.load(p)
    assert pd.isna(t.calls["input_total"].iloc[0]) and pd.isna(t.calls["output_tokens"].iloc[0])
    sk = t.load_report.skipped
    assert sk["record"].tolist() == ["usage"] and sk["line"].tolist() == [4]
    assert sk["where"].tolist() == ["line 4 usage"]
    assert "token counts '120', -3 are not a whole number" in sk["reason"].iloc[0]
    with pytest.raises(LoadError, match=r"odd.jsonl:4 .*'120', -3 are not a whole number"):
        ctxlab.load(p, strict=True)


def test_a_tool_result_without_its_call_is_kept_and_reported(tmp_path: Path):
    """A tool message whose tool_call_id no earlier assistant message called: the result
    is kept (unlinked) and the load report names its record and the id; --strict stops
    there, as at a refused count."""
    msgs = conversation()
    msgs.insert(5, {"role": "tool", "tool_call_id": "call_gone",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
    p = write_json(tmp_path / "orphan.json", msgs)
    t = ctxlab.load(p)
    assert orphan_entries(t) == [(None, "[5] tool_result call_gone")]   # one per record
    f = t.frame
    assert (f.loc[f["tool_call_id"] == "call_gone", "kind"] == "tool_result").sum() == 2
    assert "'call_gone'" in t.load_report.skipped["reason"].iloc[0]
    with pytest.raises(LoadError, match=r"orphan\.json \(\[5\] tool_result call_gone\): "
                                        r"tool result for call id 'call_gone'"):
        ctxlab.load(p, strict=True)
    lines = write_jsonl(tmp_path / "orphan.jsonl", msgs)
    assert orphan_entries(ctxlab.load(lines)) == [(6, "line 6 tool_result call_gone")]


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.booleans(), st.sampled_from("abcd")), max_size=12))
def test_every_result_without_an_earlier_call_is_reported_once(steps: list, tmp_path: Path):
    """Generated conversations: an assistant message calling tool id X, or a tool message
    answering X, in any order. The report lists exactly the results whose id no earlier
    message called, at their record; every result stays a part."""
    msgs: list[dict] = [{"role": "user", "content": "go"}]
    called: set[str] = set()
    want = []
    for is_call, cid in steps:
        if is_call:
            msgs.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]})
            called.add(cid)
        else:
            msgs.append({"role": "tool", "tool_call_id": cid, "content": "out"})
            if cid not in called:
                want.append((None, f"[{len(msgs) - 1}] tool_result {cid}"))
    t = ctxlab.load(write_json(tmp_path / "gen.json", msgs), format="openai_messages")
    assert orphan_entries(t) == want
    assert (t.frame["kind"] == "tool_result").sum() == sum(not c for c, _ in steps)
    assert_accounts(t, [f"[{j}]" for j in range(len(msgs))])


def test_both_reasoning_fields_are_kept_when_they_differ(tmp_path: Path):
    """``reasoning_content`` and ``reasoning`` saying different things are both thinking
    parts (the second was dropped silently); the same text twice is one part, and a
    reasoning recorded as an object is kept as its JSON (it was dropped too)."""
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": "a", "reasoning_content": "plan A",
             "reasoning": "plan B"},
            {"role": "assistant", "content": "b", "reasoning_content": "same",
             "reasoning": "same"},
            {"role": "assistant", "content": "c", "reasoning": {"summary": "brief"}}]
    t = ctxlab.load(write_json(tmp_path / "r.json", msgs), format="openai_messages")
    f = t.frame[t.frame["kind"] == "thinking"]
    assert f["content"].tolist() == ["plan A", "plan B", "same", '{"summary": "brief"}']
    assert f["call"].tolist() == [0, 0, 1, 2]
