"""Loader bugs a mutation fuzz found (about 36,000 mutants of eight formats), one test each.

The rules they broke: bad input is a `LoadError` naming the file (never a raw traceback)
or a report entry; a skipped record leaves nothing behind; the report's part counts add up
to the frame; a report entry names the record it is about; every part has a place of its own.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import ctxlab
from ctxlab.errors import LoadError

SAMPLE = {"id": 1, "epoch": 1, "messages": [{"id": "m1", "role": "user", "content": "hi"}],
          "events": []}


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def _inspect(**doc: Any) -> str:
    return json.dumps({"version": 2, "status": "success",
                       "eval": {"task": "t", "task_id": "x", "model": "m"},
                       "samples": [SAMPLE], **doc})


def _eval(members: dict[str, str], method: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, text in members.items():
            z.writestr(name, text)
    return buf.getvalue()


def _accounted(t: ctxlab.Transcript) -> bool:
    """The report's part counts add up to the frame."""
    return int(t.load_report.records["parts"].sum()) == len(t.frame)


def test_repeated_session_ids_are_sessions_of_their_own(tmp_path: Path):
    """Two samples with one id and epoch (or 1 and "1"), and conversations named "a:2",
    "a", "a", stopped the whole file with a SchemaError on duplicate part ids."""
    twice = _inspect(samples=[SAMPLE, {**SAMPLE, "id": "1"}])
    t = ctxlab.load(_write(tmp_path, "dup.json", twice), format="inspect_ai")
    assert len(t.sessions) == 2 and len(set(t.sessions)) == 2 and len(t.frame) == 2
    convs = [{"id": i, "messages": [{"role": "user", "content": f"q{n}"}]}
             for n, i in enumerate(("a:2", "a", "a"))]
    t = ctxlab.load(_write(tmp_path, "ids.json", json.dumps(convs)), format="openai_messages")
    assert len(set(t.sessions)) == 3 and sorted(t.frame["content"]) == ["q0", "q1", "q2"]


@pytest.mark.parametrize("name,data", [
    ("packages.json", _inspect(eval={"task": "t", "task_id": "x", "packages": ["inspect_ai"]})),
    ("reductions.json", _inspect(reductions=0.5)),
    ("header.eval", _eval({"header.json": "[]"})),
    ("deep.eval", _eval({"header.json": "{}", "samples/1_epoch_1.json": "[" * 3000 + "]" * 3000})),
])
def test_inspect_odd_documents_load_or_fail_with_a_load_error(tmp_path: Path, name, data):
    """A list of packages, a number of reductions, a header that is no object, a sample
    nested 3,000 deep: raw AttributeError, TypeError or RecursionError before."""
    p = _write(tmp_path, name, data)
    try:
        t = ctxlab.load(p, format="inspect_ai")
    except LoadError as e:
        assert str(p) in str(e)
    else:
        assert _accounted(t)


def test_an_inspect_archive_with_a_corrupt_member_is_a_load_error_or_a_skipped_sample(
        tmp_path: Path):
    raw = bytearray(_eval({"header.json": "{}",
                           "samples/1_epoch_1.json": json.dumps(SAMPLE) * 20},
                          zipfile.ZIP_DEFLATED))
    at = raw.find(b"samples/1_epoch_1.json") + 40
    for k in range(at, at + 30):
        raw[k] ^= 0x5A
    p = _write(tmp_path, "z.eval", bytes(raw))
    try:
        t = ctxlab.load(p, format="inspect_ai")
    except LoadError as e:
        assert str(p) in str(e)
    else:
        assert (t.load_report.records["status"] == "skipped").any() and _accounted(t)


def test_a_failed_inspect_sample_leaves_no_used_entries(tmp_path: Path):
    """A response id that is a list failed the sample after its messages were reported
    used: the report said 2 parts, the frame had none. Now the sample loads (the id is
    dropped), and whatever fails, the report adds up to the frame."""
    ev = {"event": "model", "model": "m", "tools": [],
          "input": [{"id": "m1", "role": "user", "content": "hi"}],
          "output": {"model": "m", "choices": [{"message": {"id": "a1", "role": "assistant",
                                                            "content": "yo"}}],
                     "usage": {"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}},
          "call": {"response": {"id": ["x"]}}}
    sample = {**SAMPLE, "messages": [*SAMPLE["messages"],
                                     {"id": "a1", "role": "assistant", "content": "yo"}],
              "events": [ev]}
    t = ctxlab.load(_write(tmp_path, "rid.json", _inspect(samples=[sample])),
                    format="inspect_ai")
    assert _accounted(t) and len(t.frame) == 2 and t.calls["input_total"].tolist() == [5]
    assert t.calls["call_id"].isna().all()
    broken = {**sample, "output": {"choices": {"not": "a list"}}}
    t = ctxlab.load(_write(tmp_path, "bad.json", _inspect(samples=[broken, SAMPLE])),
                    format="inspect_ai")
    assert _accounted(t)


def test_a_skipped_openhands_record_leaves_nothing_behind(tmp_path: Path):
    """An action whose id is a list was reported skipped, yet its thought and its call
    stayed, and every later condensation then failed after hiding parts."""
    events = [{"id": 1, "source": "user", "action": "message", "args": {"content": "task"}},
              {"id": [2], "source": "agent", "action": "run",
               "args": {"command": "ls", "thought": "look"}},
              {"id": 3, "source": "agent", "action": "condensation",
               "args": {"forgotten_event_ids": [1], "summary": "S", "summary_offset": 0}}]
    t = ctxlab.load(_write(tmp_path, "oh.json", json.dumps(events)), format="openhands")
    f, rep = t.frame, t.load_report.records
    assert "look" not in set(f["content"]) and len(t.calls) == 0 and _accounted(t)
    assert (rep["status"] == "skipped").sum() == 1
    assert f.loc[f["content"] == "task", "hidden_by"].notna().all()
    assert (f["kind"] == "summary").sum() == 1
    system = [{"id": 0, "source": "agent", "action": "system",
               "args": {"content": "SYS", "tools": [{"function": "bash"}]}}]
    t = ctxlab.load(_write(tmp_path, "sys.json", json.dumps(system)), format="openhands")
    assert len(t.frame) == 0 and _accounted(t)


def test_an_openhands_summary_has_a_place_of_its_own(tmp_path: Path):
    """Forgetting one event of three put the summary at the forgotten part's position."""
    events = [{"id": i, "source": "user", "action": "message", "args": {"content": c}}
              for i, c in ((1, "task"), (2, "old"), (3, "new"))]
    events.append({"id": 4, "source": "agent", "action": "condensation",
                   "args": {"forgotten_event_ids": [2], "summary": "S", "summary_offset": 1}})
    t = ctxlab.load(_write(tmp_path, "oh3.json", json.dumps(events)), format="openhands")
    pos = t.frame.set_index("content")["pos"]
    assert pos.is_unique and pos["task"] < pos["S"] < pos["new"]
    visible = t.frame[t.frame["hidden_by"].isna()].sort_values("pos")["content"].tolist()
    assert visible == ["task", "S", "new"]


def test_a_refused_token_count_is_reported_at_its_own_record(tmp_path: Path):
    """aider: a count too large to be one was reported a second time at the next, valid
    token line; a JSONL conversation's refused count named no line."""
    md = ("# aider chat started at 2024-08-01 10:00:00\n\n#### hello  \n\nHi.\n\n"
          "> Tokens: 99999999999999999999 sent, 5 received.  \n\n#### next  \n\nBye.\n\n"
          "> Tokens: 10 sent, 3 received.  \n")
    t = ctxlab.load(_write(tmp_path, "x.aider.chat.history.md", md), format="aider")
    skipped = t.load_report.skipped
    assert skipped["line"].tolist() == [7]
    conv = [{"id": f"c{n}", "messages": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "usage": {"prompt_tokens": tokens}}]}
        for n, tokens in ((1, 5), (2, -5))]
    p = _write(tmp_path, "u.jsonl", "\n".join(json.dumps(c) for c in conv) + "\n")
    with pytest.raises(LoadError) as e:
        ctxlab.load(p, format="openai_messages", strict=True)
    assert f"{p}:2" in str(e.value)
    assert ctxlab.load(p, format="openai_messages").load_report.skipped["line"].tolist() == [2]


def test_one_image_url_is_one_image(tmp_path: Path):
    """OpenHands: an image_urls given as one string made an image part per character."""
    events = [{"id": 1, "source": "user", "action": "message",
               "args": {"content": "look", "image_urls": "http://x/a.png"}}]
    t = ctxlab.load(_write(tmp_path, "img.json", json.dumps(events)), format="openhands")
    assert t.frame.loc[t.frame["kind"] == "image", "content"].tolist() == ["http://x/a.png"]


@pytest.mark.parametrize("field,value,status", [
    ("trajectory", {"not": "a list"}, "ignored"), ("info", ["x"], "skipped"),
    ("info", {"model_stats": 7}, "skipped"), ("info", None, "ignored")])
def test_swe_agent_fields_of_the_wrong_shape_are_reported(tmp_path: Path, field, value,
                                                          status):
    """A trajectory that is no list, an info or model_stats that is no object were
    dropped without a report entry (an info of null, a run that recorded none, is no
    error: strict mode loads the file)."""
    doc = {"environment": "e", "history": [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": "ok", "action": "ls"}], field: value}
    t = ctxlab.load(_write(tmp_path, "x.traj", json.dumps(doc)), format="swe_agent")
    rep = t.load_report.records
    where = "info.model_stats" if isinstance(value, dict) and "model_stats" in value else field
    assert rep.loc[rep["where"] == where, "status"].tolist() == [status]


def test_forgotten_event_ids_are_in_number_order(tmp_path: Path):
    """OpenHands: a condensation's forgotten ids, numbers in order then texts (a first
    fix sorted them as text: 10, 11, 8, 9)."""
    events = [{"id": i, "source": "user", "action": "message", "args": {"content": f"m{i}"}}
              for i in range(7, 13)]
    events.append({"id": 13, "source": "agent", "action": "condensation",
                   "args": {"forgotten_event_ids": [11, 9, 10, 8]}})
    t = ctxlab.load(_write(tmp_path, "forgot.json", json.dumps(events)), format="openhands")
    meta = json.loads(t.events["meta"].iloc[0])
    assert meta["forgotten_event_ids"] == [8, 9, 10, 11]


# ---- Claude Code, Gemini, Codex: a second fuzz (~12,000 mutants) ----------------------------
def _cc_user(uuid: str, parent: str | None, content: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
            "isSidechain": False, "timestamp": "2026-01-01T00:00:00Z",
            "message": {"role": "user", "content": content}, **kw}


def _cc_assistant(uuid: str, parent: str, mid: str, content: Any, **kw: Any) -> dict[str, Any]:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
            "isSidechain": False, "timestamp": "2026-01-01T00:00:01Z", "requestId": "r",
            "message": {"id": mid, "model": "claude-x", "role": "assistant",
                        "content": [{"type": "text", "text": content}]
                        if isinstance(content, str) else content,
                        "usage": {"input_tokens": 10, "output_tokens": 2}}, **kw}


def _lines(records: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(r) for r in records) + "\n"


def test_a_claude_code_line_that_cannot_be_read_makes_no_call_and_no_event(tmp_path: Path):
    """A timestamp out of range crashed the loader (OutOfBoundsDatetime), then cost its whole
    line: now the line is read and only its time is left empty, reported at its line; an
    unreadable assistant line, reported skipped, still made a call; an unreadable compact
    summary, reported skipped, still made an event that hid the whole conversation."""
    p = _write(tmp_path, "a.jsonl", _lines([_cc_user("u1", None, "hi"), {
        **_cc_assistant("a1", "u1", "m1", "yo"), "timestamp": 1e20}]))
    with pytest.raises(LoadError) as e:
        ctxlab.load(p, strict=True)
    assert f"{p}:2" in str(e.value) and "timestamp" in str(e.value)
    t = ctxlab.load(p)
    sk = t.load_report.skipped
    assert len(t.calls) == 1 and pd.isna(t.calls["ts"].iloc[0])
    assert t.frame["content"].tolist() == ["hi", "yo"] and t.frame["ts"].iloc[1] is pd.NaT
    assert sk["line"].tolist() == [2] and sk["record"].tolist() == ["timestamp"]
    p = _write(tmp_path, "d.jsonl", _lines([_cc_user("u1", None, "hi"),
                                            _cc_assistant("a1", "u1", "m1", 5)]))
    t = ctxlab.load(p)
    assert len(t.calls) == 0 and t.load_report.skipped["line"].tolist() == [2]
    p = _write(tmp_path, "b.jsonl", _lines([
        _cc_user("u1", None, "hi"), _cc_assistant("a1", "u1", "m1", "yo"),
        _cc_user("u2", "a1", 5, isCompactSummary=True), _cc_assistant("a2", "u2", "m2", "ok")]))
    t = ctxlab.load(p)
    assert len(t.events) == 0 and t.frame["hidden_by"].isna().all() and _accounted(t)
    assert t.load_report.skipped["line"].tolist() == [3]


def test_a_message_id_back_after_another_call_is_a_call_of_its_own(tmp_path: Path):
    """It joined the earlier call: its output sat before that call's input end and the
    earlier call's usage was overwritten."""
    p = _write(tmp_path, "e.jsonl", _lines([
        _cc_user("u1", None, "hi"), _cc_assistant("a1", "u1", "m1", "one"),
        _cc_user("u2", "a1", "next"), _cc_assistant("a2", "u2", "m2", "two"),
        _cc_user("u3", "a2", "again"), _cc_assistant("a3", "u3", "m1", "three")]))
    t = ctxlab.load(p)
    f = t.frame.set_index("content")
    assert len(t.calls) == 3 and f.loc[["one", "two", "three"], "call"].tolist() == [0, 1, 2]
    ends = t.calls.set_index("call")["input_end_pos"]
    assert all(ends[f.loc[x, "call"]] <= f.loc[x, "pos"] for x in ("one", "two", "three"))


def test_a_refused_count_of_a_line_that_makes_no_call_is_not_the_next_calls(tmp_path: Path):
    """Gemini: the usage of a $set.messages entry (no call) was reported as the next
    event's pre_tokens; Codex: a skipped token_count's bad total, as the next one's."""
    g = [{"sessionId": "s", "projectHash": "p", "startTime": "2026-01-01T00:00:00Z",
          "lastUpdated": "2026-01-01T00:00:00Z", "kind": "main"},
         {"$set": {"messages": [{"id": "old", "type": "gemini", "content": "earlier",
                                 "tokens": {"input": "12", "output": 1, "total": 13}}]}},
         {"id": "u1", "timestamp": "2026-01-01T00:00:01Z", "type": "user", "content": "hi"},
         {"id": "g1", "timestamp": "2026-01-01T00:00:02Z", "type": "gemini", "content": "ok",
          "model": "m", "tokens": {"input": 100, "output": 2, "total": 102}}]
    t = ctxlab.load(_write(tmp_path, "g.jsonl", _lines(g)), format="gemini")
    assert not t.load_report.skipped["reason"].str.contains("pre_tokens|'12'").any()
    x = [{"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s1"}},
         {"timestamp": "2025-01-01T00:00:01Z", "type": "response_item", "payload": {
             "type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "hi"}]}},
         {"timestamp": "2025-01-01T00:00:02Z", "type": "event_msg", "payload": {
             "type": "token_count", "info": {"total_token_usage": {"total_tokens": "x"},
                                             "last_token_usage": {}}}},
         {"timestamp": "2025-01-01T00:00:03Z", "type": "event_msg", "payload": {
             "type": "token_count", "info": {
                 "total_token_usage": {"total_tokens": 110},
                 "last_token_usage": {"input_tokens": 100, "output_tokens": 10,
                                      "total_tokens": 110}}}},
         {"timestamp": "2025-01-01T00:00:04Z", "type": "response_item", "payload": {
             "type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": "yo"}]}}]
    t = ctxlab.load(_write(tmp_path, "x.jsonl", _lines(x)), format="codex")
    assert t.load_report.skipped["line"].tolist() == [3]
    assert t.calls["input_total"].tolist() == [100]


def test_a_legacy_gemini_patch_names_where_it_is(tmp_path: Path):
    """A $set inside a legacy JSON recording made parts and an event whose source named
    the file only, not messages[i]."""
    doc = {"sessionId": "s", "projectHash": "p", "messages": [
        {"id": "u1", "type": "user", "content": "hi"},
        {"$set": {"messages": [{"id": "s1", "type": "user", "content": "summary"}]}}]}
    p = _write(tmp_path, "gl.json", json.dumps(doc))
    t = ctxlab.load(p, format="gemini")
    assert t.frame["source"].tolist() == [f"{p}#messages[0]", f"{p}#messages[1]"]
    assert t.events["source"].tolist() == [f"{p}#messages[1]"]


def test_a_refused_count_of_the_compaction_summarizer_is_reported(tmp_path: Path):
    """The usage of Claude Code's compaction summarizer (its agent-acompact file) lost a
    count that is none without a word."""
    import shutil

    from tests.conftest import REALDATA

    spotter = REALDATA / "claude_code" / "spotter"
    stem = "258c7280-ae70-4798-800f-63464d01a85d"
    if not (spotter / stem).is_dir():
        pytest.skip("../shared/realdata is absent")
    shutil.copy(spotter / f"{stem}.jsonl", tmp_path)
    shutil.copytree(spotter / stem, tmp_path / stem)
    sub = next((tmp_path / stem / "subagents").glob("agent-acompact-*.jsonl"))
    lines = sub.read_text(encoding="utf-8").splitlines()
    at = max(i for i, x in enumerate(lines) if '"usage"' in x and '"assistant"' in x)
    rec = json.loads(lines[at])
    rec["message"]["usage"]["input_tokens"] = "lots"
    lines[at] = json.dumps(rec)
    sub.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t = ctxlab.load(tmp_path / f"{stem}.jsonl")
    sk = t.load_report.skipped
    assert sk["where"].tolist() == [f"line {at + 1} usage"]
    assert "compaction summarizer" in sk["reason"].iloc[0] and "'lots'" in sk["reason"].iloc[0]
    with pytest.raises(LoadError):
        ctxlab.load(tmp_path / f"{stem}.jsonl", strict=True)
