"""Values no loader expected — JSON nested past the parser's depth, a number too large
for an integer, a message's content given as one block — are reported or read, never a
traceback and never a record's keys turned into text."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import LoadError
from conftest import REALDATA

OPENHANDS = REALDATA / "openhands" / "basic.json"


def test_json_nested_too_deep_is_a_load_error_and_a_folder_lists_it(tmp_path: Path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"messages": ' + "[" * 5000 + "]" * 5000 + "}", encoding="utf-8")
    (tmp_path / "ok.jsonl").write_text(json.dumps({"id": "a", "model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}) + "\n",
        encoding="utf-8")
    with pytest.raises(LoadError):
        ctxlab.load(deep)
    c = ctxlab.load_dir(tmp_path)
    files = c.files.set_index("path")
    assert files.loc[str(deep), "status"] == "not-a-log" and len(c) == 1


@pytest.mark.skipif(not OPENHANDS.is_file(), reason="../shared/realdata is absent")
def test_a_number_too_large_for_an_integer_skips_its_record(tmp_path: Path):
    events = json.loads(OPENHANDS.read_text(encoding="utf-8"))
    events.insert(2, {"id": 99, "action": "condensation", "source": "agent",
                      "args": {"forgotten_events_start_id": 0,
                               "forgotten_events_end_id": 1e400}})
    p = tmp_path / "oh.json"
    p.write_text(json.dumps(events).replace("Infinity", "1e400"), encoding="utf-8")
    t = ctxlab.load(p, format="openhands")
    sk = t.load_report.skipped
    assert sk["where"].tolist() == ["[2]"] and "OverflowError" in sk["reason"].iloc[0]
    assert len(t.calls) == len(ctxlab.load(OPENHANDS).calls)


def test_an_anthropic_content_block_given_alone_is_that_block(tmp_path: Path):
    conv = {"model": "claude-sonnet-4-5", "system": {"type": "text", "text": "Be brief."},
            "messages": [{"role": "user", "content": {"type": "text", "text": "hello"}},
                         {"role": "assistant", "content": {"type": "text", "text": "done"}}]}
    p = tmp_path / "a.json"
    p.write_text(json.dumps(conv), encoding="utf-8")
    t = ctxlab.load(p, format="anthropic_messages")
    assert t.frame["content"].tolist() == ["Be brief.", "hello", "done"]
    assert t.load_report.skipped.empty


SWE = REALDATA / "swe_agent" / "swe-agent__test-repo-i1.traj"


@pytest.mark.skipif(not SWE.is_file(), reason="../shared/realdata is absent")
def test_a_tool_message_naming_its_call_by_a_text_is_linked_to_it(tmp_path: Path):
    """SWE-agent's ``tool_call_ids`` given as one id, not a list: the result belongs to
    that call (it became the call of its first character)."""
    doc = json.loads(SWE.read_text(encoding="utf-8"))
    k = next(i for i, m in enumerate(doc["history"]) if m.get("role") == "assistant")
    doc["history"][k]["tool_calls"] = [{"id": "call_abc", "type": "function", "function": {
        "name": "bash", "arguments": json.dumps({"command": "ls"})}}]
    doc["history"].insert(k + 1, {"role": "tool", "content": "a.py", "agent": "main",
                                  "tool_call_ids": "call_abc"})
    p = tmp_path / "t.traj"
    p.write_text(json.dumps(doc), encoding="utf-8")
    f = ctxlab.load(p).frame
    res = f[(f["kind"] == "tool_result") & (f["content"] == "a.py")]
    assert res[["tool_call_id", "tool_name"]].values.tolist() == [["call_abc", "bash"]]


def test_a_negative_token_count_is_no_count(tmp_path: Path):
    p = tmp_path / "n.jsonl"
    p.write_text(json.dumps({"id": "a", "model": "gpt-4o", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo", "usage": {
            "prompt_tokens": -5, "completion_tokens": 2, "total_tokens": -3}}]}) + "\n",
        encoding="utf-8")
    c = ctxlab.load(p).calls
    assert c["input_total"].isna().all() and c["output_tokens"].tolist() == [2]


def test_a_message_list_document_followed_by_junk_is_read_and_the_junk_reported(
        tmp_path: Path):
    """A pretty-printed list of messages, then a stray line: the list is read and the stray
    line is the one record skipped (it fell back to JSONL and skipped every line)."""
    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yo",
                 "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}]
    text = json.dumps(messages, indent=2)
    p = tmp_path / "m.json"
    p.write_text(text + "\nnot json\n", encoding="utf-8")
    t = ctxlab.load(p, format="openai_messages")
    assert t.frame["content"].tolist() == ["hi", "yo"]
    sk = t.load_report.skipped
    assert sk["line"].tolist() == [text.count("\n") + 2]
    assert "after the JSON" in sk["reason"].iloc[0]


MINI = REALDATA / "mini_swe_agent" / "astropy__astropy-12907.traj.json"


@pytest.mark.skipif(not MINI.is_file(), reason="../shared/realdata is absent")
def test_an_unsent_field_of_an_odd_shape_does_not_drop_its_message(tmp_path: Path):
    """mini-swe-agent's ``extra`` is never sent: a text there (instead of an object) loses
    only what it would have told (usage, time), not the message the model wrote."""
    doc = json.loads(MINI.read_text(encoding="utf-8"))
    k = next(i for i, m in enumerate(doc["messages"]) if m.get("role") == "assistant")
    doc["messages"][k]["extra"] = "not an object"
    p = tmp_path / "t.traj.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    t, whole = ctxlab.load(p), ctxlab.load(MINI)
    assert t.load_report.skipped.empty
    assert t.frame["content"].tolist() == whole.frame["content"].tolist()
    assert len(t.calls) == len(whole.calls) and pd.isna(t.calls["input_total"].iloc[0])
